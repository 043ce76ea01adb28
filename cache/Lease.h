//===- Lease.h - single-flight compile leases -------------------*- C++ -*-===//
//
// A lease is a file that names its holder's host and pid. It appears whole:
// the holder line is written to a staging file that is then link()ed to the
// lease's name, which fails if the name exists, so no one ever sees a lease
// without its holder (a file without one, left by a crash or an older
// build, is no lease). Its holder renews it, by touching it, from a
// background thread; a lease whose mtime is older than the timeout, or whose
// holder is a dead process on this host, is stale and may be broken. Leases only save
// duplicate work: correctness rests on content addressing and atomic publish
// (cache.md, rule 3), so every wait is bounded and then fails open.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CACHE_LEASE_H
#define KILN_CACHE_LEASE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>

namespace kiln::cache {

struct LeaseOptions {
  /// A lease not renewed for this long is stale (KILN_CACHE_LEASE_TIMEOUT).
  double timeoutSeconds = 60;
  /// How long a waiter waits for another's compile before compiling anyway
  /// (KILN_CACHE_LEASE_WAIT).
  double maxWaitSeconds = 600;
  /// How often a waiter says what it waits for (KILN_CACHE_LEASE_REPORT).
  double reportEverySeconds = 10;

  static LeaseOptions fromEnvironment();
};

/// A held lease: renewed until destroyed, then released.
class Lease {
public:
  /// Takes the lease at `path`, or returns null when someone else holds a
  /// live one. A stale lease is broken first. An error means no lease can be
  /// created there at all (a read-only or full filesystem, no permission):
  /// waiting would not help, and the error says why.
  static llvm::Expected<std::unique_ptr<Lease>>
  tryAcquire(const std::string &path, const LeaseOptions &options);
  ~Lease();
  Lease(const Lease &) = delete;
  Lease &operator=(const Lease &) = delete;

private:
  Lease(std::string path, double renewEvery);
  std::string path;
  std::atomic<bool> stop{false};
  std::thread renewer;
};

/// Whether the lease file at `path` is held by a live holder.
bool leaseIsLive(const std::string &path, const LeaseOptions &options);

/// Who holds the lease at `path` ("host pid N", or "an unknown holder"), for
/// messages of those who wait for it.
std::string describeHolder(const std::string &path);

/// Removes the lease at `path` if it is stale; true if it did.
bool breakIfStale(const std::string &path, const LeaseOptions &options);

} // namespace kiln::cache

#endif // KILN_CACHE_LEASE_H
