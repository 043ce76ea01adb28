//===- Cache.h - getOrCompile: the one call users of the cache make -*- C++
//-*-===//
//
// Training workers and `kiln precompile` both call getOrCompile(graph,
// options). A hit loads the verified artifact from the memory-mapped file. A
// miss takes the key's single-flight lease and compiles; everyone else who
// misses the same key waits for that compile and loads its result.
//
// Compiles run in-process, through the compile function the caller passes
// (the compiler library's compile()). In-process costs no exec, no
// serialization and no second load of the compiler, which matters because a
// worker that misses is blocking a training step; isolation from a compiler
// crash and per-graph timeouts belong to `kiln precompile`, which runs each
// compile in a child process of its own.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CACHE_CACHE_H
#define KILN_CACHE_CACHE_H

#include "cache/Index.h"
#include "cache/Key.h"
#include "cache/Lease.h"
#include "cache/Store.h"

#include <functional>
#include <optional>

namespace kiln::cache {

/// Compiles a graph to artifact bytes.
using CompileFunction = std::function<llvm::Expected<std::string>(
    const proto::Graph &, const CompileOptions &)>;

enum class Outcome {
  Hit,      // loaded from the cache
  Compiled, // compiled here and published
  InMemory, // compiled here, not published (read-only, or publish failed)
};

struct Result {
  artifact::Artifact artifact;
  Key key;
  Outcome outcome = Outcome::Hit;
  double compileSeconds = 0;
  /// For InMemory: why nothing was published (read-only, no lease could be
  /// created, publishing failed, the entry there is unreadable).
  std::string notPublished;
};

/// This process's counters (the index keeps everyone's).
struct Stats {
  int64_t hits = 0, misses = 0, compiles = 0, bypasses = 0, failures = 0,
          corrupt = 0, leaseWaits = 0;
  double leaseWaitSeconds = 0, compileSeconds = 0;
  int64_t bytesRead = 0, bytesWritten = 0;
  std::string toJson() const;
};

struct GetOptions {
  /// Compile again even if a negative entry says the graph failed
  /// (--retry-failed, KILN_CACHE_RETRY_FAILED=1).
  bool retryFailed = false;
  /// How long a negative entry lasts (KILN_CACHE_FAILED_TTL, seconds).
  double failedTtlSeconds = 24 * 3600;
  static GetOptions fromEnvironment();
};

class Cache {
public:
  /// Opens the cache at `root` with options from the environment.
  static llvm::Expected<Cache> open(llvm::StringRef root);
  static llvm::Expected<Cache> open(llvm::StringRef root, StoreOptions store,
                                    LeaseOptions leases, GetOptions get);
  /// The cache KILN_CACHE_URL names, or ~/.cache/kiln.
  static llvm::Expected<Cache> openDefault();
  static std::string defaultRoot();

  llvm::Expected<Result> getOrCompile(const proto::Graph &graph,
                                      const CompileOptions &options,
                                      const CompileFunction &compile);

  /// Compiles with no cache at all (its root is unusable): the artifact, bound
  /// to its key as a cached one would be, lives in this process only.
  static llvm::Expected<Result> compileUncached(const proto::Graph &graph,
                                                const CompileOptions &options,
                                                const CompileFunction &compile);

  const Store &store() const { return files; }
  const Stats &stats() const { return counters; }

private:
  Cache(Store store, LeaseOptions leases, GetOptions get)
      : files(std::move(store)), leases(leases), get(get) {}
  /// Compiles and publishes; with `notPublishing` set, publishes nothing
  /// and says why in the result.
  llvm::Expected<Result>
  compileAndPublish(const proto::Graph &graph, const CompileOptions &options,
                    const CompileFunction &compile, Key key,
                    std::optional<std::string> notPublishing = std::nullopt);
  void record(Event event);

  Store files;
  LeaseOptions leases;
  GetOptions get;
  Stats counters;
};

} // namespace kiln::cache

#endif // KILN_CACHE_CACHE_H
