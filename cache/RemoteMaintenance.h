//===- RemoteMaintenance.h - ls, verify, gc and doctor on a remote tier -*- C++ -*-===//
//
// `kiln cache ... --cache s3://... (or http(s)://...)` works on the remote
// tier itself: what it holds, whether each object is sound, collecting
// garbage, and probing that it takes writes. A remote store keeps no access
// times, so ages there count from the upload.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CACHE_REMOTEMAINTENANCE_H
#define KILN_CACHE_REMOTEMAINTENANCE_H

#include "cache/Maintenance.h"
#include "cache/Remote.h"

#include <string>
#include <vector>

namespace kiln::cache {

/// One artifact a remote tier holds.
struct RemoteEntry {
  std::string key;
  RemoteObject object;
};

/// The artifacts under the tier's kiln-<major>/objects/, oldest upload
/// first. Other files there are left out.
llvm::Expected<std::vector<RemoteEntry>> listRemoteEntries(RemoteTier &tier);

struct RemoteVerifyReport {
  int checked = 0;
  std::vector<std::pair<std::string, std::string>> bad; // key, why
  int removed = 0;
};
/// Downloads and verifies every artifact (integrity, and the key it
/// records); with `repair`, deletes the bad ones.
llvm::Expected<RemoteVerifyReport> verifyRemote(RemoteTier &tier, bool repair);

struct RemoteGcReport {
  std::vector<RemoteEntry> removed;
  int64_t freedBytes = 0, keptBytes = 0;
  int kept = 0, skippedYoung = 0;
};
/// Applies `policy` (--max-size, --max-age, --older-than, --grace,
/// --dry-run; oldest uploads go first). --keep-versions and --version need
/// a cache directory and are refused.
llvm::Expected<RemoteGcReport> collectRemoteGarbage(RemoteTier &tier,
                                                    const GcPolicy &policy);

/// Downloads every artifact that verifies into a bundle, as exportCache
/// writes one from a directory (graphs stay in the directories that
/// compiled them).
llvm::Expected<ExportReport> exportRemote(RemoteTier &tier,
                                          llvm::StringRef file);
/// Uploads every artifact of a bundle that verifies; returns (uploaded,
/// skipped as invalid).
llvm::Expected<std::pair<int, int>> importRemote(RemoteTier &tier,
                                                 llvm::StringRef file);

/// Probes the tier: an upload, its download, a listing and a delete.
std::vector<DoctorCheck> diagnoseRemote(RemoteTier &tier);

} // namespace kiln::cache

#endif // KILN_CACHE_REMOTEMAINTENANCE_H
