//===- RemoteCacheCommand.cpp - kiln cache ... on a remote tier -----------===//
//
// `kiln cache ls|stats|verify|gc|prune|doctor|export|import --cache s3://... (or
// http(s)://...)`: the commands that make sense on the remote tier itself
// (cache/TierMaintenance.h). The others work on a cache directory, such as
// the local one in front of the tier.
//
//===----------------------------------------------------------------------===//

#include "tools/kiln/CacheArgs.h"
#include "tools/kiln/CacheCommand.h"
#include "tools/kiln/ToolSupport.h"

#include "cache/TierMaintenance.h"
#include "cache/Store.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

namespace kiln::tool {

namespace {

using namespace kiln::cache;

int runRemoteList(const Tier &tier, const Args &args) {
  auto entries = tier.listArtifacts();
  if (!entries) {
    return reportError(entries.takeError());
  }
  if (args.has("--json")) {
    llvm::json::Array out;
    for (const TierEntry &e : *entries) {
      out.push_back(llvm::json::Object{
          {"key", e.key}, {"size", e.size}, {"uploaded", e.written}});
    }
    printJson(std::move(out));
    return Success;
  }
  int64_t total = 0;
  llvm::outs() << llvm::formatv("{0,-16} {1,10} {2}\n", "KEY", "SIZE",
                                "UPLOADED (UTC)");
  for (const TierEntry &e : *entries) {
    total += e.size;
    llvm::outs() << llvm::formatv("{0,-16} {1,10} {2}\n", e.key.substr(0, 16),
                                  humanBytes(e.size), humanTime(e.written));
  }
  llvm::outs() << entries->size() << " entries, " << humanBytes(total)
               << " in " << tier.location() << "\n";
  return Success;
}

int runRemoteStats(const Tier &tier, const Args &args) {
  auto entries = tier.listArtifacts();
  if (!entries) {
    return reportError(entries.takeError());
  }
  int64_t total = 0;
  for (const TierEntry &e : *entries) {
    total += e.size;
  }
  if (args.has("--json")) {
    printJson(llvm::json::Object{{"tier", tier.location()},
                                 {"entries", int64_t(entries->size())},
                                 {"bytes", total}});
    return Success;
  }
  llvm::outs() << llvm::formatv("{0}: {1} entries, {2}\n", tier.location(),
                                entries->size(), humanBytes(total));
  return Success;
}

int runRemoteVerify(const Tier &tier, const Args &args) {
  auto report = verifyTier(tier, args.has("--repair"));
  if (!report) {
    return reportError(report.takeError());
  }
  for (const auto &[key, why] : report->bad) {
    llvm::outs() << "BAD " << key << ": " << why << "\n";
  }
  llvm::outs() << llvm::formatv("{0} artifacts checked, {1} bad, {2} removed\n",
                                report->checked, report->bad.size(),
                                report->removed);
  return report->bad.empty() ? Success : InternalFailure;
}

int runRemoteGc(const Tier &tier, const Args &args, bool prune) {
  auto policy = parseGcPolicy(args, prune);
  if (!policy) {
    return reportError(policy.takeError());
  }
  auto report = collectTierGarbage(tier, *policy);
  if (!report) {
    return reportError(report.takeError());
  }
  const char *verb = policy->dryRun ? "would remove" : "removed";
  for (const TierEntry &e : report->removed) {
    llvm::outs() << verb << " " << e.key << "\n";
  }
  llvm::outs() << llvm::formatv("{0} {1} entries ({2}); kept {3} ({4}), {5} "
                                "too young for the grace period\n",
                                verb, report->removed.size(),
                                humanBytes(report->freedBytes), report->kept,
                                humanBytes(report->keptBytes),
                                report->skippedYoung);
  return Success;
}

int runRemoteDoctor(const RemoteTier &tier) {
  return printDoctorChecks("remote cache " + tier.location(),
                           diagnoseRemote(tier));
}

/// export FILE: the tier's artifacts into a bundle; import FILE: a bundle's
/// artifacts onto the tier (the bundles of `kiln cache export` from any tier).
int runRemoteBundle(const Tier &tier, llvm::StringRef command,
                    const Args &args) {
  if (args.positional.size() != 1) {
    return fail("cache " + command + " takes one file");
  }
  const std::string &file = args.positional[0];
  if (command == "export") {
    auto report = exportTier(tier, file);
    if (!report) {
      return reportError(report.takeError());
    }
    for (auto &[key, why] : report->skipped) {
      llvm::outs() << "skipped " << key << ": " << why << "\n";
    }
    llvm::outs() << "exported " << report->exported << " artifacts from "
                 << tier.location() << " to " << file << ", skipped "
                 << report->skipped.size() << " invalid entries\n";
    return report->skipped.empty() ? Success : InternalFailure;
  }
  auto counts = importTier(tier, file);
  if (!counts) {
    return reportError(counts.takeError());
  }
  llvm::outs() << "uploaded " << counts->first << " artifacts to "
               << tier.location() << ", skipped " << counts->second
               << " invalid entries\n";
  return counts->second == 0 ? Success : InternalFailure;
}

} // namespace

int runRemoteCacheCommand(llvm::StringRef command, llvm::StringRef url,
                          const Args &args) {
  auto tier = RemoteTier::open(url);
  if (!tier) {
    return reportError(tier.takeError());
  }
  if (command == "ls") {
    return runRemoteList(**tier, args);
  }
  if (command == "stats") {
    return runRemoteStats(**tier, args);
  }
  if (command == "verify") {
    return runRemoteVerify(**tier, args);
  }
  if (command == "gc" || command == "prune") {
    return runRemoteGc(**tier, args, command == "prune");
  }
  if (command == "doctor") {
    return runRemoteDoctor(**tier);
  }
  if (command == "export" || command == "import") {
    return runRemoteBundle(**tier, command, args);
  }
  return fail("cache " + command + " works on a cache directory, not on the "
              "remote tier '" + url + "'; the local directory in front of it "
              "is " + localRootFor(url) + " (--cache DIR)");
}

} // namespace kiln::tool
