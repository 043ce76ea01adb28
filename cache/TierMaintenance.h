//===- TierMaintenance.h - verify, gc and bundles on any tier ---*- C++ -*-===//
//
// What `kiln cache` does on a remote tier (--cache s3://... or
// http(s)://...), written against the Tier interface: listing, verifying,
// collecting garbage by size and age, and bundles in and out. A cache
// directory has richer versions of these (Maintenance.h: the index, leases,
// quarantine). A remote store keeps no access times, so ages count from the
// upload.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CACHE_TIERMAINTENANCE_H
#define KILN_CACHE_TIERMAINTENANCE_H

#include "cache/Maintenance.h"
#include "cache/Remote.h"
#include "cache/Tier.h"

#include <string>
#include <vector>

namespace kiln::cache {

struct TierVerifyReport {
  int checked = 0;
  std::vector<std::pair<std::string, std::string>> bad; // key, why
  int removed = 0;
};
/// Fetches and verifies every artifact (integrity, and the key it records);
/// with `repair`, removes the bad ones.
llvm::Expected<TierVerifyReport> verifyTier(const Tier &tier, bool repair);

struct TierGcReport {
  std::vector<TierEntry> removed;
  int64_t freedBytes = 0, keptBytes = 0;
  int kept = 0, skippedYoung = 0;
};
/// Applies `policy` (--max-size, --max-age, --older-than, --grace,
/// --dry-run; the oldest writes go first). --keep-versions and --version
/// need a cache directory and are refused.
llvm::Expected<TierGcReport> collectTierGarbage(const Tier &tier,
                                                const GcPolicy &policy);

/// Writes every artifact that verifies into a bundle, as exportCache does
/// from a directory (graphs stay with the directories that compiled them).
llvm::Expected<ExportReport> exportTier(const Tier &tier, llvm::StringRef file);
/// Publishes every artifact of a bundle that verifies; returns (published,
/// skipped as invalid).
llvm::Expected<std::pair<int, int>> importTier(const Tier &tier,
                                               llvm::StringRef file);

/// Probes a remote tier: an upload, its download, a listing and a delete.
std::vector<DoctorCheck> diagnoseRemote(const RemoteTier &tier);

} // namespace kiln::cache

#endif // KILN_CACHE_TIERMAINTENANCE_H
