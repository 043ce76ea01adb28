//===- Maintenance.cpp - gc, prune, verify, export/import, doctor --------===//

#include "cache/Maintenance.h"

#include "cache/Bundle.h"

#include "cache/Key.h"
#include "cache/Lease.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <zip.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

namespace kiln::cache {

namespace {

/// The mount table's type of the file system holding `path` (the longest
/// mount point above it), e.g. "ext4", "nfs4", "fuse.sshfs"; empty when
/// the table cannot be read.
std::string mountType(llvm::StringRef path) {
  auto table = llvm::MemoryBuffer::getFileAsStream("/proc/self/mounts");
  if (!table) {
    return "";
  }
  llvm::SmallString<256> real;
  if (llvm::sys::fs::real_path(path, real)) {
    real = path;
  }
  std::string best, type;
  llvm::SmallVector<llvm::StringRef> lines, fields;
  (*table)->getBuffer().split(lines, '\n', -1, false);
  for (llvm::StringRef line : lines) {
    fields.clear();
    line.split(fields, ' ', -1, false);
    if (fields.size() < 3) {
      continue;
    }
    // The table writes a space in a mount point as \040.
    std::string point;
    for (llvm::StringRef rest = fields[1]; !rest.empty();) {
      if (rest.starts_with("\\040")) {
        point += ' ';
        rest = rest.drop_front(4);
      } else {
        point += rest.front();
        rest = rest.drop_front();
      }
    }
    llvm::StringRef r(real);
    bool above = point == "/" || r == point ||
                 (r.starts_with(point) && r.size() > point.size() &&
                  r[point.size()] == '/');
    if (above && point.size() >= best.size()) {
      best = point;
      type = fields[2].str();
    }
  }
  return type;
}

} // namespace

std::string describeFileSystem(llvm::StringRef dir) {
  std::string type = mountType(dir);
  llvm::StringRef t(type);
  std::string shared = " (shared: per-host event logs, no WAL)";
  if (t.starts_with("nfs")) {
    return "NFS, " + type + shared;
  }
  if (t == "lustre") {
    return "Lustre" + shared;
  }
  if (t.starts_with("fuse")) {
    return "FUSE, " + type +
           " (often a network file system: shared between hosts only if it "
           "keeps O_EXCL creates and link() atomic across them, which the "
           "checks above tried from this host alone)";
  }
  if (t == "tmpfs") {
    return "tmpfs (not shared between hosts)";
  }
  struct statfs fs;
  if (type.empty() && ::statfs(dir.str().c_str(), &fs) == 0) {
    switch (static_cast<uint32_t>(fs.f_type)) {
    case 0x6969:
      return "NFS" + shared;
    case 0x0BD00BD0:
      return "Lustre" + shared;
    case 0x65735546:
      return "FUSE (often a network file system)";
    }
  }
  return "local" + (type.empty() ? std::string() : ", " + type);
}

namespace {

struct ObjectFile {
  std::string key, path;
  int64_t size = 0;
  double mtime = 0;
};

double mtimeOf(const struct stat &info) {
  return info.st_mtim.tv_sec + info.st_mtim.tv_nsec * 1e-9;
}

/// The objects on disk (the truth), not the index's idea of them, by key.
std::vector<ObjectFile> scanObjects(const Store &store) {
  std::vector<ObjectFile> out;
  auto entries = store.listArtifacts();
  if (!entries) {
    llvm::consumeError(entries.takeError()); // a directory lists no errors
    return out;
  }
  for (const TierEntry &e : *entries) {
    out.push_back({e.key, store.objectPath(e.key), e.size, e.written});
  }
  std::sort(
      out.begin(), out.end(),
      [](const ObjectFile &a, const ObjectFile &b) { return a.key < b.key; });
  return out;
}

/// Removes files in `dir` (recursively) for which `dead(path, info)`.
int sweep(llvm::StringRef dir,
          const std::function<bool(llvm::StringRef, const struct stat &)> &dead,
          bool dryRun) {
  int count = 0;
  std::error_code ec;
  std::vector<std::string> doomed;
  for (llvm::sys::fs::recursive_directory_iterator it(dir, ec), end;
       it != end && !ec; it.increment(ec)) {
    struct stat info;
    if (::stat(it->path().c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
        dead(it->path(), info)) {
      doomed.push_back(it->path());
    }
  }
  for (const std::string &path : doomed) {
    if (dryRun || ::unlink(path.c_str()) == 0) {
      ++count;
    }
  }
  return count;
}

} // namespace

llvm::Expected<GcReport> collectGarbage(const Store &store, Index &index,
                                        const GcPolicy &policy) {
  LeaseOptions leaseOptions = LeaseOptions::fromEnvironment();
  auto lease = Lease::tryAcquire(store.leasePath("gc"), leaseOptions);
  if (!lease) {
    return lease.takeError();
  }
  if (!*lease) {
    return llvm::createStringError(
        "another gc (" + describeHolder(store.leasePath("gc")) +
        ") holds the cache's gc lease (" + store.leasePath("gc") +
        "); try again when it is done");
  }
  GcReport report;
  double now = wallSeconds();
  std::map<std::string, IndexEntry> known;
  for (IndexEntry &e : index.entries()) {
    known[e.key] = e;
  }
  std::string current = thisBuild();
  std::vector<ObjectFile> objects = scanObjects(store);
  auto lastUsed = [&](const ObjectFile &o) {
    auto it = known.find(o.key);
    return it != known.end() ? std::max(it->second.lastUsed, o.mtime) : o.mtime;
  };
  // Least recently used first, so that --max-size removes those.
  std::sort(objects.begin(), objects.end(),
            [&](const ObjectFile &a, const ObjectFile &b) {
              return lastUsed(a) < lastUsed(b);
            });
  int64_t total = 0;
  for (const ObjectFile &o : objects) {
    total += o.size;
  }
  for (const ObjectFile &o : objects) {
    bool wanted = false;
    if (policy.maxBytes && total > *policy.maxBytes) {
      wanted = true;
    }
    if (policy.maxAgeSeconds && now - lastUsed(o) > *policy.maxAgeSeconds) {
      wanted = true;
    }
    if (policy.olderThanSeconds && now - o.mtime > *policy.olderThanSeconds) {
      wanted = true;
    }
    if (policy.otherCompilers) {
      // Keys embed the compiler build, so an entry of another build can
      // never be hit again by this one; an unreadable entry never could.
      auto loaded = loadEntry(o.path, o.key);
      wanted = wanted || !loaded || artifactBuild(*loaded) != current;
      if (!loaded) {
        llvm::consumeError(loaded.takeError());
      }
    }
    if (!wanted) {
      ++report.kept;
      report.keptBytes += o.size;
      continue;
    }
    if (now - o.mtime < policy.graceSeconds) {
      ++report.skippedYoung;
      report.keptBytes += o.size;
      ++report.kept;
      continue;
    }
    if (leaseIsLive(store.leasePath(o.key), leaseOptions)) {
      ++report.skippedLeased;
      report.keptBytes += o.size;
      ++report.kept;
      continue;
    }
    if (!policy.dryRun) {
      ::unlink(o.path.c_str());
      ::unlink(store.graphPath(o.key).c_str());
      llvm::consumeError(index.remove(o.key));
    }
    report.removed.push_back(o.key);
    report.freedBytes += o.size;
    total -= o.size;
  }

  // Other format versions' directories beside ours.
  if (policy.keepVersions) {
    std::vector<std::pair<int, std::string>> versions;
    std::error_code ec;
    for (llvm::sys::fs::directory_iterator it(store.root(), ec), end;
         it != end && !ec; it.increment(ec)) {
      llvm::StringRef name = llvm::sys::path::filename(it->path());
      int v = 0;
      if (name.consume_front("kiln-") && !name.getAsInteger(10, v)) {
        versions.push_back({v, it->path()});
      }
    }
    std::sort(versions.rbegin(), versions.rend());
    for (size_t i = 0; i < versions.size(); ++i) {
      if (static_cast<int>(i) < *policy.keepVersions ||
          versions[i].second == store.dir()) {
        continue;
      }
      if (!policy.dryRun) {
        llvm::sys::fs::remove_directories(versions[i].second);
      }
      ++report.versionsRemoved;
    }
  }

  // Staging files of writers that died, leases nobody renews, expired
  // negative entries.
  report.tmpSwept = sweep(
      store.subdir("tmp"),
      [&](llvm::StringRef, const struct stat &info) {
        return now - mtimeOf(info) > policy.graceSeconds;
      },
      policy.dryRun);
  report.leasesBroken = sweep(
      store.subdir("leases"),
      [&](llvm::StringRef path, const struct stat &) {
        return !llvm::StringRef(path).ends_with("/gc.lease") &&
               !leaseIsLive(path.str(), leaseOptions);
      },
      policy.dryRun);
  report.failedExpired = sweep(
      store.subdir("failed"),
      [&](llvm::StringRef path, const struct stat &) {
        llvm::StringRef key = llvm::sys::path::stem(path);
        return isKey(key) && !store.failedEntry(key);
      },
      policy.dryRun);
  return report;
}

VerifyReport verifyObjects(const Store &store, Index *index, bool repair) {
  VerifyReport report;
  report.layout = store.layoutProblems();
  for (const ObjectFile &o : scanObjects(store)) {
    ++report.checked;
    if (::access(o.path.c_str(), R_OK) != 0) {
      report.unreadable.push_back(
          {o.key, std::string("cannot read '") + o.path +
                      "': " + std::strerror(errno)});
      continue;
    }
    auto loaded = loadEntry(o.path, o.key);
    if (loaded) {
      continue;
    }
    report.bad.push_back({o.key, llvm::toString(loaded.takeError())});
    if (!repair) {
      continue;
    }
    if (llvm::Error error = store.quarantine(o.key)) {
      report.unrepaired.push_back({o.key, llvm::toString(std::move(error))});
    } else if (index) {
      llvm::consumeError(index->remove(o.key));
    }
  }
  return report;
}

llvm::Expected<ExportReport> exportCache(const Store &store,
                                         llvm::StringRef file) {
  auto bundle = BundleWriter::create(file);
  if (!bundle) {
    return bundle.takeError();
  }
  ExportReport report;
  for (const ObjectFile &o : scanObjects(store)) {
    // Only what a lookup would serve goes out: a damaged or mislabeled entry
    // would be refused by every importer anyway.
    auto valid = loadEntry(o.path, o.key);
    if (!valid) {
      report.skipped.push_back({o.key, llvm::toString(valid.takeError())});
      continue;
    }
    for (auto [path, name] : {std::pair{o.path, "objects/" + o.key + ".kneff"},
                              std::pair{store.graphPath(o.key),
                                        "graphs/" + o.key + ".kgraph.pb"}}) {
      if (!llvm::sys::fs::exists(path)) {
        continue;
      }
      if (llvm::Error error = (*bundle)->addFile(name, path)) {
        return std::move(error);
      }
    }
    ++report.exported;
  }
  if (llvm::Error error = (*bundle)->close()) {
    return std::move(error);
  }
  return report;
}

llvm::Expected<std::pair<int, int>> readBundle(llvm::StringRef file,
                                               const BundleSink &take) {
  int error = 0;
  zip_t *zip = zip_open(file.str().c_str(), ZIP_RDONLY, &error);
  if (!zip) {
    return llvm::createStringError("cannot open '" + file +
                                   "' as a cache export (zip error " +
                                   llvm::Twine(error) + ")");
  }
  int imported = 0, skipped = 0;
  zip_int64_t entries = zip_get_num_entries(zip, 0);
  for (zip_int64_t i = 0; i < entries; ++i) {
    llvm::StringRef name = zip_get_name(zip, i, 0);
    zip_stat_t st;
    if (zip_stat_index(zip, i, 0, &st) != 0) {
      ++skipped;
      continue;
    }
    std::string bytes(st.size, '\0');
    zip_file_t *f = zip_fopen_index(zip, i, 0);
    bool read = f && zip_fread(f, bytes.data(), st.size) ==
                         static_cast<zip_int64_t>(st.size);
    if (f) {
      zip_fclose(f);
    }
    llvm::StringRef key = llvm::sys::path::stem(llvm::sys::path::stem(name));
    if (!read || !isKey(key)) {
      ++skipped;
      continue;
    }
    BundleItem kind;
    if (name.starts_with("objects/") && name.ends_with(".kneff")) {
      // Never trust an import: an artifact is verified before it is shared.
      auto valid = artifact::readArtifact(bytes, name);
      llvm::Error bound = valid ? checkBinding(*valid, key, name)
                                : valid.takeError();
      if (bound) {
        llvm::consumeError(std::move(bound));
        ++skipped;
        continue;
      }
      kind = BundleItem::Object;
      ++imported;
    } else if (name.starts_with("graphs/")) {
      kind = BundleItem::Graph;
    } else {
      ++skipped;
      continue;
    }
    if (llvm::Error failed = take(kind, key, bytes)) {
      zip_discard(zip);
      return std::move(failed);
    }
  }
  zip_discard(zip);
  return std::pair{imported, skipped};
}

llvm::Expected<std::pair<int, int>> importCache(const Store &store,
                                                llvm::StringRef file) {
  return readBundle(file, [&](BundleItem kind, llvm::StringRef key,
                              llvm::StringRef bytes) -> llvm::Error {
    auto published = store.publish(kind == BundleItem::Object
                                       ? store.objectPath(key)
                                       : store.graphPath(key),
                                   bytes);
    return published ? llvm::Error::success() : published.takeError();
  });
}

std::vector<DoctorCheck> diagnose(const Store &store) {
  std::vector<DoctorCheck> checks;
  auto add = [&](std::string name, bool ok, std::string detail) {
    checks.push_back({std::move(name), ok, std::move(detail)});
  };
  struct stat info;
  ::stat(store.root().str().c_str(), &info);
  char mode[8];
  std::snprintf(mode, sizeof(mode), "%03o", info.st_mode & 0777);
  add("owner", info.st_uid == ::geteuid() || ::geteuid() == 0,
      "root owned by uid " + std::to_string(info.st_uid) + ", mode " + mode);

  std::string probe = store.subdir("tmp") + "/doctor-" + hostIdentity() + "-" +
                      std::to_string(::getpid());
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0666);
  add("write", fd >= 0,
      fd >= 0 ? "tmp/ is writable"
              : std::string("cannot create a file in tmp/: ") +
                    std::strerror(errno));
  if (fd >= 0) {
    ::close(fd);
    int again = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0666);
    add("exclusive create", again < 0 && errno == EEXIST,
        again < 0
            ? "a second O_EXCL create fails with EEXIST, as leases need"
            : "a second O_EXCL create succeeded: leases are not safe here");
    if (again >= 0) {
      ::close(again);
    }
    std::string linked = probe + ".link", renamed = probe + ".renamed";
    bool link1 = ::link(probe.c_str(), linked.c_str()) == 0;
    bool link2 = ::link(probe.c_str(), linked.c_str()) != 0 && errno == EEXIST;
    add("atomic link", link1 && link2,
        link1 && link2 ? "link() publishes and refuses an existing name"
                       : "link() does not behave atomically; publishing is "
                         "unsafe on this filesystem");
    bool rename = ::rename(linked.c_str(), renamed.c_str()) == 0;
    add("atomic rename", rename,
        rename ? "rename() works"
               : std::string("rename() failed: ") + std::strerror(errno));
    ::unlink(probe.c_str());
    ::unlink(linked.c_str());
    ::unlink(renamed.c_str());
  }

  struct statvfs fs;
  if (::statvfs(store.dir().str().c_str(), &fs) == 0) {
    double free = static_cast<double>(fs.f_bavail) * fs.f_frsize;
    add("free space", free > 1e9,
        llvm::formatv("{0:f1} GiB free", free / (1 << 30)).str() +
            (free > 1e9 ? "" : ": under 1 GB, publishing may fail"));
  }
  add("filesystem", true, describeFileSystem(store.dir()));
  std::vector<std::string> layout = store.layoutProblems();
  add("layout", layout.empty(),
      layout.empty() ? "every directory of " + store.dir().str() + " is sound"
                     : llvm::join(layout, "; ") +
                           ": move the damaged path away and rerun (Kiln "
                           "recreates its directories)");
  std::string indexFile = (store.dir() + "/index.sqlite").str();
  if (!llvm::sys::fs::exists(indexFile)) {
    add("index", true,
        "no index.sqlite yet (the next maintenance command builds it)");
  } else if (!llvm::sys::fs::is_regular_file(indexFile)) {
    add("index", false,
        "index.sqlite is not a regular file: kiln cache index rebuild moves "
        "it to quarantine/ and rebuilds the index");
  } else {
    auto index = Index::openReadOnly(store);
    add("index", static_cast<bool>(index),
        index ? "index.sqlite is readable"
              : llvm::toString(index.takeError()) +
                    " (kiln cache index rebuild recreates it)");
  }
  return checks;
}

} // namespace kiln::cache
