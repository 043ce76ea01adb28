//===- Cache.h - getOrCompile: the one call users of the cache make -*- C++
//-*-===//
//
// Training workers and `kiln precompile` both call getOrCompile(graph,
// options). A hit loads the verified artifact from the memory-mapped file. A
// miss takes the key's single-flight lease and compiles; everyone else who
// misses the same key waits for that compile and loads its result.
//
// A cache root may be a remote tier (s3://, http(s)://, Remote.h) with a
// local directory in front of it: a local miss asks the remote, verifies
// what comes back and keeps a copy; a compile publishes locally, then
// uploads. Remote trouble costs one warning per process, after which the
// process uses its local tier alone.
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

#include "cache/Coverage.h"
#include "cache/Index.h"
#include "cache/Key.h"
#include "cache/Lease.h"
#include "cache/Remote.h"
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
  /// Of the hits, those the remote tier served; uploads to it.
  int64_t remoteHits = 0, uploads = 0;
  std::string toJson() const;
};

struct GetOptions {
  CacheMode mode = CacheMode::ReadWrite;
  /// The coverage manifest strict mode explains misses with
  /// (KILN_CACHE_MANIFEST; empty: <store>/coverage.json).
  std::string manifestPath;
  /// Where every lookup appends what it used (KILN_CACHE_RUN_LOG), for
  /// `kiln cache coverage`; empty: nowhere.
  std::string runLog;
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

  /// The artifact for `graph` compiled with `options`: from the local tier,
  /// then the remote one, else compiled with `compile` and published
  /// (unless the mode says otherwise).
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
  /// The remote tier behind the local directory, if the root named one and
  /// it has worked so far in this process.
  const Tier *remoteTier() const;

private:
  Cache(Store store, LeaseOptions leases, GetOptions get)
      : files(std::move(store)), leases(leases), get(get) {}
  /// The remote tier's verified object for `key`, kept in the local
  /// directory too; nullopt on a remote miss, a corrupt object (reported)
  /// or remote trouble (one warning per process).
  std::optional<artifact::Artifact> fetchRemote(const Key &key,
                                                const CompileOptions &options,
                                                llvm::StringRef graphName);
  /// getOrCompile less the run log.
  llvm::Expected<Result> lookUpOrCompile(const proto::Graph &graph,
                                         const CompileOptions &options,
                                         const CompileFunction &compile);
  /// KILN_CACHE_MANIFEST's manifest, else this directory's, else the
  /// remote tier's.
  llvm::Expected<std::vector<CoverageEntry>> readCoverageManifest();
  /// Strict mode's error for a miss of `key`.
  llvm::Error strictMiss(const proto::Graph &graph,
                         const CompileOptions &options, const Key &key);
  /// Uploads a compiled artifact's bytes to the remote tier, if any, with
  /// the record of what compiled it.
  void upload(const Key &key, llvm::StringRef bytes, llvm::StringRef graphName,
              double compileSeconds);

  /// Compiles and publishes; with `notPublishing` set, publishes nothing
  /// and says why in the result.
  llvm::Expected<Result>
  compileAndPublish(const proto::Graph &graph, const CompileOptions &options,
                    const CompileFunction &compile, Key key,
                    std::optional<std::string> notPublishing = std::nullopt);
  void record(Event event);

  Store files;
  std::shared_ptr<const Tier> remote;
  LeaseOptions leases;
  GetOptions get;
  Stats counters;
};

} // namespace kiln::cache

#endif // KILN_CACHE_CACHE_H
