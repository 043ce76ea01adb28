//===- Store.h - the cache's files: layout, publish, verify -----*- C++ -*-===//
//
// Files are the truth (cache.md, rule 5). This is the layer that writes and
// reads them:
//
//   <root>/kiln-<format major>/
//     objects/<k0k1>/<key>.kneff     immutable, checksummed artifacts
//     failed/<k0k1>/<key>.json       negative entries
//     graphs/<k0k1>/<key>.kgraph.pb  source graphs
//     leases/<key>.lease             single-flight leases
//     events/<host>.log              per-host event logs, merged into the index
//     tmp/                           staging, same filesystem as objects/
//     quarantine/                    entries that failed verification
//     index.sqlite                   the rebuildable index
//
// Every visible file appears by link() or rename() of a complete, fsynced
// staging file: no reader can see a partial entry.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CACHE_STORE_H
#define KILN_CACHE_STORE_H

#include "cache/Tier.h"
#include "runtime/artifact/Artifact.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace kiln::cache {

/// This host's identity in lease files and event logs: KILN_HOST_ID, or the
/// host name. (Tests give process trees different identities with it.)
std::string hostIdentity();

/// Seconds since the epoch, as a double.
double wallSeconds();

/// Where publishing can be interrupted, for fault injection. KILN_CACHE_FAULT
/// holds `action@step` pairs, comma separated: action `kill` (SIGKILL
/// itself), `enospc` or `eio` (the step fails with that error); steps are
/// `open`, `write` (after half the bytes), `fsync`, `link`, and `lease`
/// (writing a lease's holder line).
enum class PublishStep { Open, Write, Fsync, Link, Lease };

/// The fault KILN_CACHE_FAULT injects at `step`: 0 for none, else an errno.
/// A `kill` fault does not return.
int injectedFault(PublishStep step);

/// What a cache may do (KILN_CACHE_MODE).
enum class CacheMode {
  ReadWrite, // look up, compile on a miss, publish (the default)
  ReadOnly,  // never write: a miss compiles in memory (KILN_CACHE_READONLY=1)
  Strict,    // a miss is an error naming what precompile did not cover
};

/// KILN_CACHE_MODE: readwrite, readonly or strict; another value is an
/// error naming it.
llvm::Expected<CacheMode> cacheModeFromEnvironment();

struct StoreOptions {
  /// Permission bits masked from every entry (KILN_CACHE_UMASK, octal;
  /// default 002: group members share the cache).
  unsigned umask = 002;
  /// Accept a root owned by another user (KILN_CACHE_ALLOW_FOREIGN_OWNER=1).
  bool allowForeignOwner = false;
  /// Readers never create or move anything (KILN_CACHE_READONLY=1).
  bool readOnly = false;
};

/// What looking up a key's object found.
struct Lookup {
  enum class State {
    Missing,    // no object: a miss
    Valid,      // verified, and bound to the key looked up
    Corrupt,    // failed verification: quarantined (unless read-only)
    Unreadable, // there but not readable by this process: left alone
  };
  State state = State::Missing;
  std::optional<artifact::Artifact> artifact; // when Valid
  std::string problem;                        // when Corrupt or Unreadable
};

/// Loads the artifact at `path` and checks that it is the entry for `key`:
/// header, version, checksum, every instruction, and the key it records.
llvm::Expected<artifact::Artifact> loadEntry(llvm::StringRef path,
                                             llvm::StringRef key);
/// Checks that `artifact` records `key` (an entry copied, renamed or
/// imported under another key must never be served). `origin` names it.
llvm::Error checkBinding(const artifact::Artifact &artifact,
                         llvm::StringRef key, llvm::StringRef origin);

/// Checks the spelling of a cache root: a directory path, a file:// URL, or
/// a remote tier (s3://, http://, https://). Other schemes are refused by
/// name rather than taken for a relative directory called "gs:".
llvm::Error checkRootUrl(llvm::StringRef root);

/// The local directory of cache root `root`: the root itself, or, for a
/// remote tier, the directory in front of it (KILN_CACHE_LOCAL, else
/// ~/.cache/kiln).
std::string localRootFor(llvm::StringRef root);

/// A negative entry: why a key failed to compile.
struct FailedEntry {
  std::string error;
  std::string compiler;
  double time = 0;
  double expires = 0;
};

class Store : public Tier {
public:
  /// Opens (creating unless read-only) the cache at `root` (for a remote
  /// tier, its local directory). Errors name the root and what is wrong:
  /// unreachable, not a directory, not writable, owned by another user.
  static llvm::Expected<Store> open(llvm::StringRef root,
                                    StoreOptions options = {});
  /// Options from KILN_CACHE_UMASK, KILN_CACHE_ALLOW_FOREIGN_OWNER and
  /// KILN_CACHE_READONLY.
  static StoreOptions optionsFromEnvironment();

  llvm::StringRef root() const { return rootDir; }
  /// <root>/kiln-<format major>
  llvm::StringRef dir() const { return versionDir; }
  const StoreOptions &options() const { return opts; }

  /// The Tier interface: objects/<k0k1>/<key>.kneff. Publishing links a
  /// staging file into place (the first writer wins, as publish()).
  std::string location() const override { return rootDir; }
  llvm::Expected<std::optional<std::string>>
  fetchArtifact(llvm::StringRef key) const override;
  llvm::Error publishArtifact(llvm::StringRef key,
                              llvm::StringRef bytes) const override;
  llvm::Error removeArtifact(llvm::StringRef key) const override;
  llvm::Expected<std::vector<TierEntry>> listArtifacts() const override;

  std::string objectPath(llvm::StringRef key) const;
  std::string failedPath(llvm::StringRef key) const;
  std::string graphPath(llvm::StringRef key) const;
  std::string leasePath(llvm::StringRef name) const;
  std::string subdir(llvm::StringRef name) const;

  /// Permission bits for files the cache creates (0666 less its umask).
  unsigned fileMode() const { return 0666 & ~opts.umask; }
  /// Creates a directory (and its parents) with the cache's permissions.
  std::error_code makeDirectory(llvm::StringRef path) const;

  /// Publishes `bytes` at `path` atomically. With `replace` false the first
  /// writer wins (link): returns false when the path already existed. With
  /// `replace` true it renames over whatever is there.
  llvm::Expected<bool> publish(llvm::StringRef path, llvm::StringRef bytes,
                               bool replace = false) const;

  /// Loads and verifies the artifact for `key` (loadEntry). An object that
  /// fails verification is moved to quarantine/ (the caller counts and
  /// recompiles); one this process cannot read (permissions) is left where
  /// it is: it may be good, and others may read it.
  Lookup loadObject(llvm::StringRef key) const;
  /// Moves the object for `key` to quarantine/; an error when it could not
  /// (read-only cache, quarantine/ damaged).
  llvm::Error quarantine(llvm::StringRef key) const;

  /// What is wrong with the directory layout (a subdirectory that is a file,
  /// an index that is not a file); empty when it is sound. `kiln cache
  /// doctor` and `verify` report these.
  std::vector<std::string> layoutProblems() const;

  /// The live negative entry for `key`, if any (expired ones are ignored).
  std::optional<FailedEntry> failedEntry(llvm::StringRef key) const;
  llvm::Error recordFailure(llvm::StringRef key,
                            const FailedEntry &entry) const;
  void forgetFailure(llvm::StringRef key) const;

private:
  std::string rootDir, versionDir;
  StoreOptions opts;
};

/// Reads a whole file (for small files: entries' JSON, leases, logs).
llvm::Expected<std::string> readWholeFile(llvm::StringRef path);

} // namespace kiln::cache

#endif // KILN_CACHE_STORE_H
