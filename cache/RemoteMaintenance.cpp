//===- RemoteMaintenance.cpp - ls, verify, gc and doctor on a remote tier -===//

#include "cache/RemoteMaintenance.h"

#include "cache/Key.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <zip.h>
#include <unistd.h>

namespace kiln::cache {

llvm::Expected<std::vector<RemoteEntry>> listRemoteEntries(RemoteTier &tier) {
  auto objects = tier.list(remoteObjectsDir());
  if (!objects) {
    return objects.takeError();
  }
  std::vector<RemoteEntry> entries;
  for (RemoteObject &object : *objects) {
    llvm::StringRef name = llvm::StringRef(object.path).rsplit('/').second;
    if (name.consume_back(".kneff") && isKey(name)) {
      entries.push_back({name.str(), std::move(object)});
    }
  }
  std::sort(entries.begin(), entries.end(),
            [](const RemoteEntry &a, const RemoteEntry &b) {
              return std::tie(a.object.modified, a.key) <
                     std::tie(b.object.modified, b.key);
            });
  return entries;
}

llvm::Expected<RemoteVerifyReport> verifyRemote(RemoteTier &tier, bool repair) {
  auto entries = listRemoteEntries(tier);
  if (!entries) {
    return entries.takeError();
  }
  RemoteVerifyReport report;
  for (const RemoteEntry &entry : *entries) {
    auto bytes = tier.get(entry.object.path);
    if (!bytes) {
      return bytes.takeError();
    }
    ++report.checked;
    if (!*bytes) {
      continue; // removed since the listing
    }
    std::string origin = tier.url() + "/" + entry.object.path;
    auto loaded = artifact::readArtifact(**bytes, origin);
    llvm::Error bad = loaded ? checkBinding(*loaded, entry.key, origin)
                             : loaded.takeError();
    if (!bad) {
      continue;
    }
    report.bad.emplace_back(entry.key, llvm::toString(std::move(bad)));
    if (repair) {
      if (llvm::Error error = tier.remove(entry.object.path)) {
        return std::move(error);
      }
      ++report.removed;
    }
  }
  return report;
}

llvm::Expected<RemoteGcReport> collectRemoteGarbage(RemoteTier &tier,
                                                    const GcPolicy &policy) {
  if (policy.keepVersions || policy.otherCompilers) {
    return llvm::createStringError(
        "remote cache '" + tier.url() +
        "': --keep-versions and --version work on a cache directory; on a "
        "remote tier, use --max-size, --max-age or --older-than");
  }
  auto entries = listRemoteEntries(tier);
  if (!entries) {
    return entries.takeError();
  }
  int64_t total = 0;
  for (const RemoteEntry &entry : *entries) {
    total += entry.object.size;
  }
  double now = wallSeconds();
  RemoteGcReport report;
  for (const RemoteEntry &entry : *entries) { // oldest upload first
    double age = now - entry.object.modified;
    bool tooOld = (policy.maxAgeSeconds && age > *policy.maxAgeSeconds) ||
                  (policy.olderThanSeconds && age > *policy.olderThanSeconds);
    bool tooBig = policy.maxBytes && total > *policy.maxBytes;
    if (!tooOld && !tooBig) {
      ++report.kept;
      report.keptBytes += entry.object.size;
      continue;
    }
    if (age < policy.graceSeconds) {
      ++report.skippedYoung;
      ++report.kept;
      report.keptBytes += entry.object.size;
      continue;
    }
    if (!policy.dryRun) {
      if (llvm::Error error = tier.remove(entry.object.path)) {
        return std::move(error);
      }
    }
    total -= entry.object.size;
    report.freedBytes += entry.object.size;
    report.removed.push_back(entry);
  }
  return report;
}

llvm::Expected<ExportReport> exportRemote(RemoteTier &tier,
                                          llvm::StringRef file) {
  auto entries = listRemoteEntries(tier);
  if (!entries) {
    return entries.takeError();
  }
  int error = 0;
  ::unlink(file.str().c_str());
  zip_t *zip = zip_open(file.str().c_str(), ZIP_CREATE | ZIP_EXCL, &error);
  if (!zip) {
    return llvm::createStringError("cannot create '" + file +
                                   "' (zip error " + llvm::Twine(error) + ")");
  }
  ExportReport report;
  for (const RemoteEntry &entry : *entries) {
    auto bytes = tier.get(entry.object.path);
    if (!bytes || !*bytes) {
      zip_discard(zip);
      return bytes ? llvm::createStringError(tier.url() + "/" +
                                             entry.object.path +
                                             " vanished during the export")
                   : bytes.takeError();
    }
    std::string origin = tier.url() + "/" + entry.object.path;
    auto loaded = artifact::readArtifact(**bytes, origin);
    llvm::Error bad = loaded ? checkBinding(*loaded, entry.key, origin)
                             : loaded.takeError();
    if (bad) {
      report.skipped.emplace_back(entry.key, llvm::toString(std::move(bad)));
      continue;
    }
    // libzip reads the buffer when it writes the archive, and frees it then.
    void *copy = std::malloc((*bytes)->size());
    std::memcpy(copy, (*bytes)->data(), (*bytes)->size());
    zip_source_t *source =
        zip_source_buffer(zip, copy, (*bytes)->size(), /*freep=*/1);
    std::string name = "objects/" + entry.key + ".kneff";
    if (!source || zip_file_add(zip, name.c_str(), source, 0) < 0) {
      if (source) {
        zip_source_free(source);
      } else {
        std::free(copy);
      }
      std::string why = zip_strerror(zip);
      zip_discard(zip);
      return llvm::createStringError("cannot add " + name + " to '" + file +
                                     "': " + why);
    }
    ++report.exported;
  }
  if (zip_close(zip) != 0) {
    std::string why = zip_strerror(zip);
    zip_discard(zip);
    return llvm::createStringError("cannot write '" + file + "': " + why);
  }
  return report;
}

llvm::Expected<std::pair<int, int>> importRemote(RemoteTier &tier,
                                                 llvm::StringRef file) {
  return readBundle(file, [&](BundleItem kind, llvm::StringRef key,
                              llvm::StringRef bytes) -> llvm::Error {
    if (kind != BundleItem::Object) {
      return llvm::Error::success(); // a remote tier serves artifacts only
    }
    return tier.put(remoteObjectPath(key), bytes);
  });
}

std::vector<DoctorCheck> diagnoseRemote(RemoteTier &tier) {
  std::vector<DoctorCheck> checks;
  std::string path = llvm::formatv("kiln-{0}/doctor/{1}-{2}.probe",
                                   artifact::kFormatMajor, hostIdentity(),
                                   ::getpid())
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
