//===- TierMaintenance.cpp - verify, gc and bundles on any tier -----------===//

#include "cache/TierMaintenance.h"

#include "cache/Bundle.h"
#include "cache/Key.h"
#include "cache/Store.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <unistd.h>

namespace kiln::cache {

namespace {

/// The artifact `bytes` verified as the entry for `key` of `tier`.
llvm::Error verifyEntry(const Tier &tier, llvm::StringRef key,
                        llvm::StringRef bytes) {
  std::string origin = "the artifact for " + key.str() + " in " +
                       tier.location();
  auto loaded = artifact::readArtifact(bytes, origin);
  return loaded ? checkBinding(*loaded, key, origin) : loaded.takeError();
}

/// Hands every artifact of `tier` to `visit` with its bytes and what its
/// verification found (success for a sound one); artifacts removed since
/// the listing are passed over. Stops at the first error of the tier or
/// of `visit`.
llvm::Error visitArtifacts(
    const Tier &tier,
    llvm::function_ref<llvm::Error(const TierEntry &, llvm::StringRef bytes,
                                   llvm::Error verified)>
        visit) {
  auto entries = tier.listArtifacts();
  if (!entries) {
    return entries.takeError();
  }
  for (const TierEntry &entry : *entries) {
    auto bytes = tier.fetchArtifact(entry.key);
    if (!bytes) {
      return bytes.takeError();
    }
    if (!*bytes) {
      continue;
    }
    if (llvm::Error error =
            visit(entry, **bytes, verifyEntry(tier, entry.key, **bytes))) {
      return error;
    }
  }
  return llvm::Error::success();
}

} // namespace

llvm::Expected<TierVerifyReport> verifyTier(const Tier &tier, bool repair) {
  TierVerifyReport report;
  llvm::Error failed = visitArtifacts(
      tier, [&](const TierEntry &entry, llvm::StringRef,
                llvm::Error bad) -> llvm::Error {
        ++report.checked;
        if (!bad) {
          return llvm::Error::success();
        }
        report.bad.emplace_back(entry.key, llvm::toString(std::move(bad)));
        if (!repair) {
          return llvm::Error::success();
        }
        ++report.removed;
        return tier.removeArtifact(entry.key);
      });
  if (failed) {
    return std::move(failed);
  }
  return report;
}

llvm::Expected<TierGcReport> collectTierGarbage(const Tier &tier,
                                                const GcPolicy &policy) {
  if (policy.keepVersions || policy.otherCompilers) {
    return llvm::createStringError(
        "'" + tier.location() +
        "': --keep-versions and --version work on a cache directory; on a "
        "remote tier, use --max-size, --max-age or --older-than");
  }
  auto entries = tier.listArtifacts();
  if (!entries) {
    return entries.takeError();
  }
  int64_t total = 0;
  for (const TierEntry &entry : *entries) {
    total += entry.size;
  }
  double now = wallSeconds();
  TierGcReport report;
  for (const TierEntry &entry : *entries) { // oldest write first
    // An object whose time the listing did not give counts as new: kept.
    double age = entry.written > 0 ? now - entry.written : 0;
    bool tooOld = (policy.maxAgeSeconds && age > *policy.maxAgeSeconds) ||
                  (policy.olderThanSeconds && age > *policy.olderThanSeconds);
    bool tooBig = policy.maxBytes && total > *policy.maxBytes;
    if ((!tooOld && !tooBig) || age < policy.graceSeconds) {
      report.skippedYoung += tooOld || tooBig;
      ++report.kept;
      report.keptBytes += entry.size;
      continue;
    }
    if (!policy.dryRun) {
      if (llvm::Error error = tier.removeArtifact(entry.key)) {
        return std::move(error);
      }
    }
    total -= entry.size;
    report.freedBytes += entry.size;
    report.removed.push_back(entry);
  }
  return report;
}

llvm::Expected<ExportReport> exportTier(const Tier &tier,
                                        llvm::StringRef file) {
  auto bundle = BundleWriter::create(file);
  if (!bundle) {
    return bundle.takeError();
  }
  ExportReport report;
  llvm::Error failed = visitArtifacts(
      tier, [&](const TierEntry &entry, llvm::StringRef bytes,
                llvm::Error bad) -> llvm::Error {
        if (bad) {
          report.skipped.emplace_back(entry.key,
                                      llvm::toString(std::move(bad)));
          return llvm::Error::success();
        }
        ++report.exported;
        return (*bundle)->addBytes("objects/" + entry.key + ".kneff", bytes);
      });
  if (failed) {
    return std::move(failed);
  }
  if (llvm::Error error = (*bundle)->close()) {
    return std::move(error);
  }
  return report;
}

llvm::Expected<std::pair<int, int>> importTier(const Tier &tier,
                                               llvm::StringRef file) {
  return readBundle(file, [&](BundleItem kind, llvm::StringRef key,
                              llvm::StringRef bytes) -> llvm::Error {
    if (kind != BundleItem::Object) {
      return llvm::Error::success(); // graphs stay with directories
    }
    return tier.publishArtifact(key, bytes);
  });
}

std::vector<DoctorCheck> diagnoseRemote(const RemoteTier &tier) {
  std::vector<DoctorCheck> checks;
  std::string host = hostIdentity();
  for (char &c : host) {
    c = llvm::isAlnum(c) || c == '-' || c == '.' ? c : '_';
  }
  std::string path = llvm::formatv("kiln-{0}/doctor/{1}-{2}.probe",
                                   artifact::kFormatMajor, host, ::getpid())
                         .str();
  std::string probe = "kiln cache doctor probe " + path;
  auto check = [&](llvm::StringRef name, llvm::Error error,
                   llvm::StringRef good) {
    bool ok = !error;
    checks.push_back({name.str(), ok,
                      ok ? good.str() : llvm::toString(std::move(error))});
    return ok;
  };
  if (!check("upload", tier.put(path, probe), "PUT " + path)) {
    return checks;
  }
  auto fetched = tier.get(path);
  llvm::Error read = !fetched ? fetched.takeError()
                     : !*fetched || **fetched != probe
                         ? llvm::createStringError(
                               "the probe came back different or not at all")
                         : llvm::Error::success();
  check("download", std::move(read), "GET returns what was uploaded");
  auto listed = tier.list("kiln-" + std::to_string(artifact::kFormatMajor) +
                          "/doctor");
  llvm::Error found =
      !listed ? listed.takeError()
      : std::none_of(listed->begin(), listed->end(),
                     [&](const RemoteObject &o) { return o.path == path; })
          ? llvm::createStringError("the probe is missing from the listing")
          : llvm::Error::success();
  check("listing", std::move(found), "the probe is listed");
  check("delete", tier.remove(path), "DELETE " + path);
  return checks;
}

} // namespace kiln::cache
