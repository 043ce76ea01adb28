//===- Lease.cpp - single-flight compile leases --------------------------===//

#include "cache/Lease.h"

#include "cache/Store.h"

#include "llvm/ADT/StringExtras.h"

#include <cerrno>
#include <cstring>
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
  bool named = false; // the file holds a "host pid" line
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
  holder.named = !holder.host.empty() && holder.pid > 0;
  return true;
}

bool isStale(const Holder &holder, const LeaseOptions &options) {
  // Leases appear with their holder line (link() of a written file), so one
  // without it was never taken: a crash or a full disk left it behind.
  if (!holder.named) {
    return true;
  }
  if (holder.age > options.timeoutSeconds) {
    return true;
  }
  // A holder on this host that no longer exists will never renew: break its
  // lease now instead of after the timeout.
  return holder.host == hostIdentity() &&
         ::kill(static_cast<pid_t>(holder.pid), 0) != 0 && errno == ESRCH;
}

} // namespace

LeaseOptions LeaseOptions::fromEnvironment() {
  LeaseOptions o;
  o.timeoutSeconds = envSeconds("KILN_CACHE_LEASE_TIMEOUT", o.timeoutSeconds);
  o.maxWaitSeconds = envSeconds("KILN_CACHE_LEASE_WAIT", o.maxWaitSeconds);
  o.reportEverySeconds =
      envSeconds("KILN_CACHE_LEASE_REPORT", o.reportEverySeconds);
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

std::string describeHolder(const std::string &path) {
  Holder holder;
  if (!readHolder(path, holder) || !holder.named) {
    return "an unknown holder";
  }
  return holder.host + " pid " + std::to_string(holder.pid);
}

llvm::Expected<std::unique_ptr<Lease>>
Lease::tryAcquire(const std::string &path, const LeaseOptions &options) {
  auto cannot = [&](const llvm::Twine &what, int error) {
    return llvm::createStringError(
        std::error_code(error, std::generic_category()),
        "cannot take the lease '" + path + "': " + what + ": " +
            std::strerror(error));
  };
  // A waiter polls this: while someone holds the lease, it costs a stat and
  // a read, not a staging file written and removed on shared storage.
  if (leaseIsLive(path, options)) {
    return nullptr;
  }
  // The holder line goes into a staging file first, so that the lease
  // appears whole or not at all (a full disk cannot leave an empty one).
  static std::atomic<uint64_t> attempts{0};
  std::string staging = path + ".tmp-" + hostIdentity() + "-" +
                        std::to_string(::getpid()) + "-" +
                        std::to_string(attempts++);
  int fd = ::open(staging.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                  0666);
  if (fd < 0) {
    return cannot("creating it", errno);
  }
  std::string holder = hostIdentity() + " " + std::to_string(::getpid()) + "\n";
  int writeError = injectedFault(PublishStep::Lease);
  ssize_t written = writeError ? 0 : ::write(fd, holder.data(), holder.size());
  if (written < 0) {
    writeError = errno;
  }
  if (::close(fd) != 0 && writeError == 0 &&
      written == static_cast<ssize_t>(holder.size())) {
    writeError = errno;
  }
  if (writeError != 0 || written != static_cast<ssize_t>(holder.size())) {
    ::unlink(staging.c_str());
    return cannot("writing its holder", writeError ? writeError : ENOSPC);
  }
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (::link(staging.c_str(), path.c_str()) == 0) {
      ::unlink(staging.c_str());
      return std::unique_ptr<Lease>(
          new Lease(path, std::max(0.05, options.timeoutSeconds / 4)));
    }
    int error = errno;
    if (error != EEXIST) {
      ::unlink(staging.c_str());
      return cannot("linking it into place", error);
    }
    if (!breakIfStale(path, options)) {
      break;
    }
  }
  ::unlink(staging.c_str());
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
  if (readHolder(path, holder) && holder.named &&
      holder.host == hostIdentity() &&
      holder.pid == ::getpid()) {
    ::unlink(path.c_str());
  }
}

} // namespace kiln::cache
