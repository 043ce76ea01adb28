//===- CacheArgs.h - arguments of kiln cache's commands ---------*- C++ -*-===//
//
// What `kiln cache <command>` parses, shared by the commands on a cache
// directory (CacheCommand.cpp) and on a remote tier
// (RemoteCacheCommand.cpp): flags, durations, sizes and the gc policy.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TOOLS_KILN_CACHEARGS_H
#define KILN_TOOLS_KILN_CACHEARGS_H

#include "cache/Maintenance.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace kiln::tool {

/// A duration: a plain number with an optional s, m, h or d suffix
/// (seconds by default). Anything else is refused.
std::optional<double> parseDuration(llvm::StringRef text);

/// A size: a plain number of bytes with an optional K, M, G or T suffix in
/// either case (powers of 1024). Anything else is refused, and so is a
/// size of 2^63 bytes or more, which would not fit the byte counts it is
/// compared with.
std::optional<int64_t> parseSize(llvm::StringRef text);

std::string humanBytes(double bytes);
/// "2026-11-27 13:47" (UTC), or "-" for no time.
std::string humanTime(double epoch);

/// The arguments after `kiln cache <command>`, with flag lookup.
struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::string> values;
  std::set<std::string> flags;
  std::vector<std::string> passThrough; // compile options for `key`

  bool has(llvm::StringRef flag) const { return flags.count(flag.str()); }
  std::optional<std::string> value(llvm::StringRef name) const {
    auto it = values.find(name.str());
    return it == values.end() ? std::nullopt
                              : std::optional<std::string>(it->second);
  }
};

/// `valued` options take a value (`--x V` or `--x=V`), `boolean` ones do
/// not; with `compileOptions`, unknown options are compile options.
llvm::Expected<Args> parseArgs(llvm::ArrayRef<std::string> raw,
                               const std::set<std::string> &valued,
                               const std::set<std::string> &boolean,
                               bool compileOptions = false);

/// gc's (or, with `prune`, prune's) policy from --grace, --max-age,
/// --older-than, --max-size, --keep-versions, --version and --dry-run.
llvm::Expected<cache::GcPolicy> parseGcPolicy(const Args &args, bool prune);

/// Prints `title` and the doctor's checks; returns the exit status (0 when
/// every check passed).
int printDoctorChecks(llvm::StringRef title,
                      const std::vector<cache::DoctorCheck> &checks);

/// Reports `message` as kiln's one-line error; returns the exit status.
int fail(const llvm::Twine &message);
void printJson(llvm::json::Value value);

} // namespace kiln::tool

#endif // KILN_TOOLS_KILN_CACHEARGS_H
