//===- Lease.cpp - single-flight compile leases --------------------------===//

#include "cache/Lease.h"

#include "cache/Store.h"

#include "llvm/ADT/StringExtras.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kiln::cache {

namespace {

double envSeconds(const char *name, double fallback) {
  const char *v = std::getenv(name);
  double value = 0;
  if (v && !llvm::StringRef(v).getAsDouble(value) && value > 0) {
    return value;
  }
  return fallback;
}

/// Holder "host pid" of the lease at `path`, and its age in seconds.
struct Holder {
  std::string host;
  long pid = 0;
  double age = 0;
};

bool readHolder(const std::string &path, Holder &holder) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) {
    return false;
  }
  holder.age =
      wallSeconds() - (info.st_mtim.tv_sec + info.st_mtim.tv_nsec * 1e-9);
  auto text = readWholeFile(path);
  if (!text) {
    llvm::consumeError(text.takeError());
    return true; // unreadable content: judged by age alone
  }
  llvm::SmallVector<llvm::StringRef> parts;
  llvm::SplitString(*text, parts);
  if (parts.size() >= 2) {
    holder.host = parts[0].str();
    parts[1].getAsInteger(10, holder.pid);
  }
  return true;
}

bool isStale(const Holder &holder, const LeaseOptions &options) {
  if (holder.age > options.timeoutSeconds) {
    return true;
  }
  // A holder on this host that no longer exists will never renew: break its
  // lease now instead of after the timeout.
  return holder.host == hostIdentity() && holder.pid > 0 &&
         ::kill(static_cast<pid_t>(holder.pid), 0) != 0 && errno == ESRCH;
}

} // namespace

LeaseOptions LeaseOptions::fromEnvironment() {
  LeaseOptions o;
  o.timeoutSeconds = envSeconds("KILN_CACHE_LEASE_TIMEOUT", o.timeoutSeconds);
  o.maxWaitSeconds = envSeconds("KILN_CACHE_LEASE_WAIT", o.maxWaitSeconds);
  return o;
}

bool leaseIsLive(const std::string &path, const LeaseOptions &options) {
  Holder holder;
  return readHolder(path, holder) && !isStale(holder, options);
}

bool breakIfStale(const std::string &path, const LeaseOptions &options) {
  Holder holder;
  if (!readHolder(path, holder) || !isStale(holder, options)) {
    return false;
  }
  // Rename first, so that of several breakers exactly one removes it.
  std::string broken =
      path + ".broken-" + hostIdentity() + "-" + std::to_string(::getpid());
  if (::rename(path.c_str(), broken.c_str()) != 0) {
    return false;
  }
  ::unlink(broken.c_str());
  return true;
}

std::unique_ptr<Lease> Lease::tryAcquire(const std::string &path,
                                         const LeaseOptions &options) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    int fd =
        ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      std::string holder =
          hostIdentity() + " " + std::to_string(::getpid()) + "\n";
      ssize_t written = ::write(fd, holder.data(), holder.size());
      (void)written; // the holder line is advisory; the mtime is the heartbeat
      ::close(fd);
      return std::unique_ptr<Lease>(
          new Lease(path, std::max(0.05, options.timeoutSeconds / 4)));
    }
    if (errno != EEXIST || !breakIfStale(path, options)) {
      return nullptr;
    }
  }
  return nullptr;
}

Lease::Lease(std::string leasePath, double renewEvery)
    : path(std::move(leasePath)) {
  renewer = std::thread([this, renewEvery] {
    auto period = std::chrono::duration<double>(renewEvery);
    auto next = std::chrono::steady_clock::now() + period;
    while (!stop.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (std::chrono::steady_clock::now() >= next) {
        ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);
        next += std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            period);
      }
    }
  });
}

Lease::~Lease() {
  stop = true;
  renewer.join();
  // Only our own: if our lease was broken (we stalled past the timeout) and
  // someone else took it, theirs stays.
  Holder holder;
  if (readHolder(path, holder) && holder.host == hostIdentity() &&
      holder.pid == ::getpid()) {
    ::unlink(path.c_str());
  }
}

} // namespace kiln::cache
