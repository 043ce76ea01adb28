//===- Store.cpp - the cache's files
//---------------------------------------===//

#include "cache/Store.h"

#include "cache/Key.h"
#include "cache/Remote.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <random>
#include <tuple>
#include <sys/stat.h>
#include <unistd.h>

namespace kiln::cache {

std::string hostIdentity() {
  if (const char *id = std::getenv("KILN_HOST_ID"); id && *id) {
    return id;
  }
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || !*name) {
    return "unknown-host";
  }
  return name;
}

double wallSeconds() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

namespace {

llvm::Error errnoError(const llvm::Twine &what, int error) {
  return llvm::createStringError(
      std::error_code(error, std::generic_category()),
      what + ": " + std::strerror(error));
}

} // namespace

int injectedFault(PublishStep step) {
  const char *spec = std::getenv("KILN_CACHE_FAULT");
  if (!spec) {
    return 0;
  }
  static const char *names[] = {"open", "write", "fsync", "link", "lease"};
  llvm::SmallVector<llvm::StringRef> faults;
  llvm::StringRef(spec).split(faults, ',', -1, false);
  for (llvm::StringRef fault : faults) {
    auto [action, where] = fault.trim().split('@');
    if (where != names[static_cast<int>(step)]) {
      continue;
    }
    if (action == "kill") {
      std::raise(SIGKILL);
    }
    if (action == "enospc") {
      return ENOSPC;
    }
    if (action == "eio") {
      return EIO;
    }
  }
  return 0;
}

namespace {

/// The directories of a cache version, in the order Store::open makes them.
constexpr const char *kSubdirs[] = {"objects", "failed", "graphs",   "leases",
                                    "events",  "tmp",    "quarantine"};

std::string fanOut(llvm::StringRef dir, llvm::StringRef key,
                   llvm::StringRef suffix) {
  return (dir + "/" + key.take_front(2) + "/" + key + suffix).str();
}

std::string uniqueSuffix() {
  std::random_device device;
  return llvm::utohexstr((static_cast<uint64_t>(device()) << 32) | device(),
                         /*LowerCase=*/true);
}

/// Writes all of `bytes` to `fd`, retrying short writes and EINTR.
int writeAll(int fd, llvm::StringRef bytes) {
  const char *p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return errno;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return 0;
}

void syncDirectory(llvm::StringRef dir) {
  int fd = ::open(dir.str().c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

/// Whether the directory above `path` is setgid (so new ones keep its group).
bool parentSetgid(llvm::StringRef path) {
  struct stat info;
  return ::stat(llvm::sys::path::parent_path(path).str().c_str(), &info) == 0 &&
         (info.st_mode & S_ISGID);
}

} // namespace

llvm::Expected<std::string> readWholeFile(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer) {
    return llvm::createStringError(buffer.getError(),
                                   "cannot read '" + path +
                                       "': " + buffer.getError().message());
  }
  return (*buffer)->getBuffer().str();
}

llvm::Expected<CacheMode> cacheModeFromEnvironment() {
  const char *text = std::getenv("KILN_CACHE_MODE");
  llvm::StringRef mode = text ? text : "";
  if (mode.empty() || mode == "readwrite") {
    return CacheMode::ReadWrite;
  }
  if (mode == "readonly") {
    return CacheMode::ReadOnly;
  }
  if (mode == "strict") {
    return CacheMode::Strict;
  }
  return llvm::createStringError("KILN_CACHE_MODE='" + mode +
                                 "' is not readwrite, readonly or strict");
}

StoreOptions Store::optionsFromEnvironment() {
  StoreOptions o;
  if (const char *mask = std::getenv("KILN_CACHE_UMASK")) {
    unsigned value = 0;
    if (!llvm::StringRef(mask).getAsInteger(8, value) && value <= 0777) {
      o.umask = value;
    }
  }
  auto flag = [](const char *name) {
    const char *v = std::getenv(name);
    return v && *v && llvm::StringRef(v) != "0";
  };
  o.allowForeignOwner = flag("KILN_CACHE_ALLOW_FOREIGN_OWNER");
  auto mode = cacheModeFromEnvironment();
  o.readOnly = flag("KILN_CACHE_READONLY") ||
               (mode && *mode == CacheMode::ReadOnly);
  if (!mode) {
    llvm::consumeError(mode.takeError()); // Cache::open reports it
  }
  return o;
}

llvm::Error checkRootUrl(llvm::StringRef root) {
  size_t scheme = root.find("://");
  if (scheme == llvm::StringRef::npos || root.starts_with("file://") ||
      isRemoteUrl(root)) {
    return llvm::Error::success();
  }
  return llvm::createStringError(
      "cache root '" + root + "': the " + root.take_front(scheme) +
      ":// scheme is not supported; give a directory (local or on shared "
      "storage), a file:// URL, or an s3://, http:// or https:// remote tier");
}

std::string localRootFor(llvm::StringRef root) {
  if (!isRemoteUrl(root)) {
    return root.str();
  }
  if (const char *local = std::getenv("KILN_CACHE_LOCAL"); local && *local) {
    return local;
  }
  const char *home = std::getenv("HOME");
  return std::string(home ? home : ".") + "/.cache/kiln";
}

llvm::Expected<Store> Store::open(llvm::StringRef root, StoreOptions options) {
  if (llvm::Error error = checkRootUrl(root)) {
    return std::move(error);
  }
  // A remote tier's local directory is the store; the cache puts the remote
  // behind it (Cache.h).
  std::string local = localRootFor(root);
  llvm::StringRef path = local;
  path.consume_front("file://");
  if (path.empty()) {
    return llvm::createStringError(
        "cache root is empty: set KILN_CACHE_URL to a directory");
  }
  auto fail = [&](const llvm::Twine &what) {
    return llvm::createStringError("cache root '" + path + "' " + what);
  };
  Store store;
  llvm::SmallString<256> absolute(path);
  llvm::sys::fs::make_absolute(absolute);
  store.rootDir = absolute.str().str();
  store.versionDir =
      store.rootDir + "/kiln-" + std::to_string(artifact::kFormatMajor);
  store.opts = options;

  struct stat info;
  if (::stat(store.rootDir.c_str(), &info) != 0) {
    if (errno != ENOENT || options.readOnly) {
      return fail(llvm::Twine("is unreachable: ") + std::strerror(errno));
    }
    if (std::error_code ec = llvm::sys::fs::create_directories(store.rootDir)) {
      return fail("cannot be created: " + ec.message());
    }
    ::stat(store.rootDir.c_str(), &info);
  }
  if (!S_ISDIR(info.st_mode)) {
    return fail("is not a directory");
  }
  // Write access to the cache is code execution on every worker that loads
  // from it: refuse a root someone else controls unless told to trust it.
  if (info.st_uid != ::geteuid() && ::geteuid() != 0 &&
      !options.allowForeignOwner) {
    return fail("is owned by uid " + llvm::Twine(info.st_uid) +
                ", not this user; set KILN_CACHE_ALLOW_FOREIGN_OWNER=1 to "
                "trust it");
  }
  if (options.readOnly) {
    return store;
  }
  for (const char *sub : kSubdirs) {
    std::error_code ec = store.makeDirectory(store.versionDir + "/" + sub);
    // A file where a directory belongs is damage that layoutProblems()
    // reports (and `kiln cache doctor` explains), not a reason to refuse
    // the maintenance commands that diagnose it.
    if (ec && ec != std::errc::not_a_directory) {
      return fail("is not writable: cannot create " + llvm::Twine(sub) +
                  "/: " + ec.message());
    }
  }
  return store;
}

std::error_code Store::makeDirectory(llvm::StringRef path) const {
  // The cache's permissions come from its umask, not the process's: a
  // training script's umask 022 must not make the shared cache unwritable
  // for the rest of the group.
  llvm::StringRef parent = llvm::sys::path::parent_path(path);
  if (!parent.empty() && !llvm::sys::fs::exists(parent)) {
    if (std::error_code ec = makeDirectory(parent)) {
      return ec;
    }
  }
  if (::mkdir(path.str().c_str(), 0777) != 0) {
    if (errno != EEXIST) {
      return std::error_code(errno, std::generic_category());
    }
    // Something is there already: fine if it is a directory, and a damaged
    // layout (a file where a directory belongs) otherwise.
    return llvm::sys::fs::is_directory(path)
               ? std::error_code()
               : std::make_error_code(std::errc::not_a_directory);
  }
  ::chmod(path.str().c_str(),
          (0777 & ~opts.umask) | (parentSetgid(path) ? S_ISGID : 0));
  return {};
}

std::string Store::objectPath(llvm::StringRef key) const {
  return fanOut(versionDir + "/objects", key, ".kneff");
}
std::string Store::failedPath(llvm::StringRef key) const {
  return fanOut(versionDir + "/failed", key, ".json");
}
std::string Store::graphPath(llvm::StringRef key) const {
  return fanOut(versionDir + "/graphs", key, ".kgraph.pb");
}
std::string Store::leasePath(llvm::StringRef name) const {
  return (versionDir + "/leases/" + name + ".lease").str();
}
llvm::Expected<std::optional<std::string>>
Store::fetchArtifact(llvm::StringRef key) const {
  std::string path = objectPath(key);
  if (!llvm::sys::fs::exists(path)) {
    return std::nullopt;
  }
  auto bytes = readWholeFile(path);
  if (!bytes) {
    return bytes.takeError();
  }
  return std::optional<std::string>(std::move(*bytes));
}

llvm::Error Store::publishArtifact(llvm::StringRef key,
                                   llvm::StringRef bytes) const {
  auto published = publish(objectPath(key), bytes);
  return published ? llvm::Error::success() : published.takeError();
}

llvm::Error Store::removeArtifact(llvm::StringRef key) const {
  std::string path = objectPath(key);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return errnoError("cannot remove '" + path + "'", errno);
  }
  return llvm::Error::success();
}

llvm::Expected<std::vector<TierEntry>> Store::listArtifacts() const {
  std::vector<TierEntry> out;
  std::error_code ec;
  for (llvm::sys::fs::recursive_directory_iterator it(subdir("objects"), ec),
       end;
       it != end && !ec; it.increment(ec)) {
    llvm::StringRef path = it->path();
    llvm::StringRef key = llvm::sys::path::stem(path);
    struct stat info;
    if (!path.ends_with(".kneff") || !isKey(key) ||
        ::stat(path.str().c_str(), &info) != 0) {
      continue;
    }
    out.push_back({key.str(), info.st_size,
                   info.st_mtim.tv_sec + info.st_mtim.tv_nsec * 1e-9});
  }
  std::sort(out.begin(), out.end(), [](const TierEntry &a, const TierEntry &b) {
    return std::tie(a.written, a.key) < std::tie(b.written, b.key);
  });
  return out;
}

std::string Store::subdir(llvm::StringRef name) const {
  return (versionDir + "/" + name).str();
}

llvm::Expected<bool> Store::publish(llvm::StringRef path, llvm::StringRef bytes,
                                    bool replace) const {
  if (opts.readOnly) {
    return llvm::createStringError("cache is read-only (KILN_CACHE_READONLY)");
  }
  std::string tmp = subdir("tmp") + "/" + hostIdentity() + "-" +
                    std::to_string(::getpid()) + "-" + uniqueSuffix();
  auto fail = [&](const llvm::Twine &what, int error) {
    ::unlink(tmp.c_str());
    return errnoError("cannot publish '" + path + "': " + what, error);
  };
  int fd = -1;
  if (int fault = injectedFault(PublishStep::Open)) {
    return fail("creating the staging file", fault);
  }
  fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) {
    return fail("creating the staging file " + tmp, errno);
  }
  ::fchmod(fd, fileMode());
  size_t half = bytes.size() / 2;
  int error = writeAll(fd, bytes.take_front(half));
  if (!error) {
    error = injectedFault(PublishStep::Write);
  }
  if (!error) {
    error = writeAll(fd, bytes.drop_front(half));
  }
  if (!error) {
    error = injectedFault(PublishStep::Fsync);
  }
  if (!error && ::fsync(fd) != 0) {
    error = errno;
  }
  if (::close(fd) != 0 && !error) {
    error = errno;
  }
  if (error) {
    return fail("writing " + llvm::Twine(bytes.size()) + " bytes", error);
  }
  llvm::StringRef parent = llvm::sys::path::parent_path(path);
  if (std::error_code ec = makeDirectory(parent)) {
    return fail("creating " + parent, ec.value());
  }
  if (int fault = injectedFault(PublishStep::Link)) {
    return fail("linking into place", fault);
  }
  bool published = true;
  if (replace) {
    if (::rename(tmp.c_str(), path.str().c_str()) != 0) {
      return fail("renaming into place", errno);
    }
  } else {
    // link() fails with EEXIST if another writer got there first: theirs
    // stays, and the caller goes on with its own bytes (identical by
    // content addressing).
    if (::link(tmp.c_str(), path.str().c_str()) != 0) {
      if (errno != EEXIST) {
        return fail("linking into place", errno);
      }
      published = false;
    }
    ::unlink(tmp.c_str());
  }
  syncDirectory(parent);
  return published;
}

llvm::Error checkBinding(const artifact::Artifact &artifact,
                         llvm::StringRef key, llvm::StringRef origin) {
  llvm::StringRef recorded = artifact.manifest.cache_key();
  if (recorded == key) {
    return llvm::Error::success();
  }
  return llvm::createStringError(
      "artifact '" + origin + "' is not the entry for key " + key + ": " +
      (recorded.empty() ? llvm::Twine("it records no key")
                        : "it was compiled for key " + recorded));
}

llvm::Expected<artifact::Artifact> loadEntry(llvm::StringRef path,
                                             llvm::StringRef key) {
  auto loaded = artifact::loadArtifactFile(path);
  if (!loaded) {
    return loaded.takeError();
  }
  if (llvm::Error error = checkBinding(*loaded, key, path)) {
    return std::move(error);
  }
  return loaded;
}

Lookup Store::loadObject(llvm::StringRef key) const {
  std::string path = objectPath(key);
  Lookup lookup;
  // Whether this process can read the file at all, before judging what is
  // in it: a permission problem says nothing about the entry.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT && errno != ENOTDIR) {
      lookup.state = Lookup::State::Unreadable;
      lookup.problem = "cannot read cache entry '" + path +
                       "': " + std::strerror(errno);
    }
    return lookup;
  }
  ::close(fd);
  auto loaded = loadEntry(path, key);
  if (loaded) {
    lookup.state = Lookup::State::Valid;
    lookup.artifact = std::move(*loaded);
    return lookup;
  }
  std::string why = llvm::toString(loaded.takeError());
  if (!llvm::sys::fs::exists(path)) {
    return lookup; // removed under us (gc): a plain miss
  }
  lookup.state = Lookup::State::Corrupt;
  lookup.problem = "corrupt cache entry " + key.str() + ": " + why;
  if (llvm::Error error = quarantine(key)) {
    if (!opts.readOnly) {
      lookup.problem += " (" + llvm::toString(std::move(error)) + ")";
    } else {
      llvm::consumeError(std::move(error));
    }
  }
  return lookup;
}

llvm::Error Store::quarantine(llvm::StringRef key) const {
  if (opts.readOnly) {
    return llvm::createStringError(
        "cannot quarantine " + key + ": the cache is read-only "
        "(KILN_CACHE_READONLY)");
  }
  std::string to = subdir("quarantine") + "/" + key.str() + "-" +
                   hostIdentity() + "-" + std::to_string(::getpid()) + "-" +
                   uniqueSuffix() + ".kneff";
  if (::rename(objectPath(key).c_str(), to.c_str()) != 0) {
    return errnoError("cannot move '" + objectPath(key) + "' to quarantine/",
                      errno);
  }
  return llvm::Error::success();
}

std::vector<std::string> Store::layoutProblems() const {
  std::vector<std::string> problems;
  struct stat info;
  if (::stat(versionDir.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
    problems.push_back(versionDir + " is not a directory");
    return problems;
  }
  for (const char *sub : kSubdirs) {
    std::string path = subdir(sub);
    if (::stat(path.c_str(), &info) != 0) {
      if (!opts.readOnly) {
        problems.push_back(std::string(sub) + "/ is missing");
      }
    } else if (!S_ISDIR(info.st_mode)) {
      problems.push_back(std::string(sub) + "/ is not a directory");
    }
  }
  std::string index = versionDir + "/index.sqlite";
  if (::lstat(index.c_str(), &info) == 0 && !S_ISREG(info.st_mode)) {
    problems.push_back("index.sqlite is not a regular file");
  }
  return problems;
}

std::optional<FailedEntry> Store::failedEntry(llvm::StringRef key) const {
  auto text = readWholeFile(failedPath(key));
  if (!text) {
    llvm::consumeError(text.takeError());
    return std::nullopt;
  }
  auto json = llvm::json::parse(*text);
  if (!json) {
    llvm::consumeError(json.takeError());
    return std::nullopt;
  }
  const llvm::json::Object *o = json->getAsObject();
  if (!o) {
    return std::nullopt;
  }
  FailedEntry entry;
  entry.error = o->getString("error").value_or("").str();
  entry.compiler = o->getString("compiler").value_or("").str();
  entry.time = o->getNumber("time").value_or(0);
  entry.expires = o->getNumber("expires").value_or(0);
  if (entry.expires <= wallSeconds()) {
    return std::nullopt;
  }
  return entry;
}

llvm::Error Store::recordFailure(llvm::StringRef key,
                                 const FailedEntry &entry) const {
  llvm::json::Object o{{"key", key},
                       {"error", entry.error},
                       {"compiler", entry.compiler},
                       {"time", entry.time},
                       {"expires", entry.expires},
                       {"host", hostIdentity()}};
  std::string text;
  llvm::raw_string_ostream(text) << llvm::json::Value(std::move(o)) << "\n";
  auto published = publish(failedPath(key), text, /*replace=*/true);
  return published ? llvm::Error::success() : published.takeError();
}

void Store::forgetFailure(llvm::StringRef key) const {
  if (!opts.readOnly) {
    ::unlink(failedPath(key).c_str());
  }
}

} // namespace kiln::cache
