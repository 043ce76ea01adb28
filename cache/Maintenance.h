//===- Maintenance.h - gc, prune, verify, export/import, doctor -*- C++ -*-===//

#ifndef KILN_CACHE_MAINTENANCE_H
#define KILN_CACHE_MAINTENANCE_H

#include "cache/Index.h"
#include "cache/Store.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace kiln::cache {

struct GcPolicy {
  std::optional<int64_t> maxBytes;        // --max-size: oldest-used go first
  std::optional<double> maxAgeSeconds;    // --max-age: unused for this long
  std::optional<int> keepVersions;        // --keep-versions: kiln-<v> dirs
  std::optional<double> olderThanSeconds; // prune --older-than: created
  bool otherCompilers = false;            // prune --version: other builds
  /// Nothing younger than this is removed (a compile may be using it).
  double graceSeconds = 3600;
  bool dryRun = false;
};

struct GcReport {
  std::vector<std::string> removed;
  int64_t freedBytes = 0, keptBytes = 0;
  int kept = 0, skippedYoung = 0, skippedLeased = 0;
  int tmpSwept = 0, leasesBroken = 0, failedExpired = 0, versionsRemoved = 0;
};

/// Applies `policy` under the gc lease, then sweeps stale tmp/ files, dead
/// leases and expired negative entries.
llvm::Expected<GcReport> collectGarbage(const Store &store, Index &index,
                                        const GcPolicy &policy);

struct VerifyReport {
  int checked = 0;
  /// Layout damage (Store::layoutProblems): objects there cannot be checked.
  std::vector<std::string> layout;
  std::vector<std::pair<std::string, std::string>> bad;        // key, why
  std::vector<std::pair<std::string, std::string>> unreadable; // key, why
  /// Bad objects that `repair` could not move to quarantine/: key, why.
  std::vector<std::pair<std::string, std::string>> unrepaired;
  bool clean() const {
    return layout.empty() && bad.empty() && unreadable.empty();
  }
};
/// Verifies every object (loadEntry: integrity, and the key it records);
/// with `repair`, quarantines the bad ones. Objects this process cannot read
/// are reported apart and never quarantined.
VerifyReport verifyObjects(const Store &store, Index *index, bool repair);

/// Writes every valid object, and its graph, into a zip file; returns how
/// many objects went in and which were left out as invalid (key, why).
struct ExportReport {
  int exported = 0;
  std::vector<std::pair<std::string, std::string>> skipped;
};
llvm::Expected<ExportReport> exportCache(const Store &store,
                                         llvm::StringRef file);
/// What a bundle (an export's zip file) holds.
enum class BundleItem { Object, Graph };
using BundleSink = std::function<llvm::Error(
    BundleItem kind, llvm::StringRef key, llvm::StringRef bytes)>;
/// Hands every object of a bundle that verifies (integrity, and the key it
/// records), and every graph, to `take`; returns (objects taken, entries
/// skipped as invalid).
llvm::Expected<std::pair<int, int>> readBundle(llvm::StringRef file,
                                               const BundleSink &take);
/// Publishes every valid object and graph of a zip file written by
/// exportCache; returns (imported, skipped as invalid).
llvm::Expected<std::pair<int, int>> importCache(const Store &store,
                                                llvm::StringRef file);

struct DoctorCheck {
  std::string name;
  bool ok = true;
  std::string detail;
};
/// Probes the root: ownership, write access, atomic link and rename, lease
/// exclusivity, free space, filesystem type, the index.
std::vector<DoctorCheck> diagnose(const Store &store);

/// The file system holding `dir`, as the doctor names it: its type from
/// the mount table (NFS, Lustre, FUSE, tmpfs or local, with the table's
/// name) and what that means for a cache shared between hosts.
std::string describeFileSystem(llvm::StringRef dir);

} // namespace kiln::cache

#endif // KILN_CACHE_MAINTENANCE_H
