//===- Precompile.h - kiln precompile: collect, then compile in parallel -*- C++ -*-===//
//
// `kiln precompile -- <training command>` runs the command in graph-
// collection mode (the runtime's sessions record every graph they would run
// into a graphs directory, deduplicated by cache key across every worker),
// then compiles each collected graph through the cache's getOrCompile in a
// pool of child processes: a crashing or hanging compile costs one graph,
// never the run. docs/pytorch.md is the user guide.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TOOLS_KILN_PRECOMPILE_H
#define KILN_TOOLS_KILN_PRECOMPILE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace kiln::tool {

struct PrecompileOptions {
  std::string cacheRoot;
  std::string graphsDir;
  int jobs = 1;
  int maxRetries = 1;
  double timeoutSeconds = 3600;
  bool keepGoing = false;
  bool retryFailed = false;
  int shardIndex = 0, shardCount = 1;
  std::string reportPath;
  /// The coverage manifest of the graphs in the cache (cache/Coverage.h);
  /// empty until openCache sets <store>/coverage.json.
  std::string manifestPath;
  /// Print a live progress line (a terminal) or one line per graph.
  bool live = false;
  /// Collect once per world size, each run seeing that many workers
  /// (KILN_COLLECT_WORLD_SIZE); empty: the command's own.
  std::vector<int> worldSizes;
};

/// One collected graph and what compiling it did.
struct GraphJob {
  std::string path;       // <graphs>/<key>.kgraph.pb
  std::string name;       // the graph's name
  std::string key;        // the key derived now (what the cache uses)
  std::vector<std::string> flags;
  // hit, compiled, failed, unpublished (compiled, but the cache did not take
  // the artifact), timeout, skipped
  std::string status = "pending";
  std::string error;
  double seconds = 0;
  int64_t artifactBytes = 0;
  int attempts = 0;
};

/// Writes the coverage manifest of the jobs now in the cache (hit or
/// compiled) to options.manifestPath.
llvm::Error writeCoverage(const std::vector<GraphJob> &jobs,
                          const PrecompileOptions &options);

/// Runs `command` with KILN_EXTRACT_GRAPHS_ONLY=1 and KILN_GRAPHS_DIR set
/// (and KILN_COLLECT_WORLD_SIZE=`worldSize`, when above 0); returns its exit
/// status (128 + signal when killed), or an error when it could not start.
llvm::Expected<int> collectGraphs(llvm::ArrayRef<std::string> command,
                                  const PrecompileOptions &options,
                                  int worldSize = 0);

/// Every graph in the graphs directory, one per key, sorted by key.
/// Unreadable graphs come back as failed jobs naming the file.
llvm::Expected<std::vector<GraphJob>>
listGraphs(const PrecompileOptions &options);

/// The jobs of options' shard: a key's shard depends on the key alone.
std::vector<GraphJob> selectShard(std::vector<GraphJob> jobs,
                                  const PrecompileOptions &options);

/// What removing a directory's own files left behind.
struct CleanResult {
  int removed = 0;
  /// Entries that are not the directory's own, kept; the first one's name.
  int kept = 0;
  std::string firstKept;
  bool removedDirectory = false;
};

/// Removes the files collection wrote into `dir` (cache::isCollectedFileName,
/// regular files only), then `dir` itself if nothing else is in it. Anything
/// else is kept and counted.
llvm::Expected<CleanResult> cleanGraphsDirectory(llvm::StringRef dir);

/// Removes the lease files in the cache's leases directory `dir` (`*.lease`
/// and their `.tmp-*` and `.broken-*` leftovers); the directory stays.
llvm::Expected<CleanResult> clearLeases(llvm::StringRef dir);

/// Compiles every job (in place), `options.jobs` at a time.
void compileGraphs(std::vector<GraphJob> &jobs,
                   const PrecompileOptions &options);

/// The summary table and, with --report, the JSON report.
llvm::Error reportJobs(const std::vector<GraphJob> &jobs,
                       const PrecompileOptions &options, double wallSeconds);

int runPrecompileCommand(llvm::ArrayRef<std::string> argv);

} // namespace kiln::tool

#endif // KILN_TOOLS_KILN_PRECOMPILE_H
