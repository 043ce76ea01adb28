//===- Tier.h - where artifacts live: a directory or a remote store -*- C++ -*-===//
//
// The cache keeps artifacts in tiers: a cache directory (Store, on local or
// shared storage) and, behind it, optionally a remote tier (RemoteTier: an
// S3 bucket or an HTTP server). getOrCompile asks the directory, then the
// remote tier; what works the same on any tier (listing, verifying,
// collecting garbage by size and age, bundles) is written once against
// this interface (TierMaintenance.h). A directory adds what only it has:
// leases, the index, quarantine, negative entries and mapped loads.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CACHE_TIER_H
#define KILN_CACHE_TIER_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::cache {

/// One artifact a tier holds.
struct TierEntry {
  std::string key;
  int64_t size = 0;
  /// When it was last written (published or uploaded), seconds since the
  /// epoch: a remote store keeps no access times.
  double written = 0;
};

class Tier {
public:
  virtual ~Tier() = default;
  /// The directory or URL, for messages.
  virtual std::string location() const = 0;
  /// The bytes filed under `key`, unverified; nullopt when there are none.
  virtual llvm::Expected<std::optional<std::string>>
  fetchArtifact(llvm::StringRef key) const = 0;
  /// Files `bytes` under `key`, so that no reader sees part of them.
  virtual llvm::Error publishArtifact(llvm::StringRef key,
                                      llvm::StringRef bytes) const = 0;
  /// Removes the artifact for `key`; none there is no error.
  virtual llvm::Error removeArtifact(llvm::StringRef key) const = 0;
  /// Every artifact, oldest write first.
  virtual llvm::Expected<std::vector<TierEntry>> listArtifacts() const = 0;

  /// A small JSON record about an artifact (its graph, the build and the
  /// seconds that compiled it), kept beside it by tiers with no index of
  /// their own, so that a host served from there knows what the hit saved.
  /// A directory keeps this in its index and ignores these.
  virtual llvm::Error publishRecord(llvm::StringRef key,
                                    llvm::StringRef json) const {
    return llvm::Error::success();
  }
  virtual llvm::Expected<std::optional<std::string>>
  fetchRecord(llvm::StringRef key) const {
    return std::nullopt;
  }

  /// The coverage manifest precompile wrote (Coverage.h), kept on a remote
  /// tier for the hosts whose own directory has none. A directory keeps it
  /// as a file (defaultManifestPath) and ignores these.
  virtual llvm::Error publishManifest(llvm::StringRef json) const {
    return llvm::Error::success();
  }
  virtual llvm::Expected<std::optional<std::string>> fetchManifest() const {
    return std::nullopt;
  }
};

} // namespace kiln::cache

#endif // KILN_CACHE_TIER_H
