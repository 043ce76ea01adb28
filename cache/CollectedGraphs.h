//===- CollectedGraphs.h - the folder graph collection records into -*- C++ -*-===//
//
// Graph-collection mode (KILN_EXTRACT_GRAPHS_ONLY=1) records every graph a
// training command would run into one folder, and `kiln precompile` compiles
// what is there; this module is both sides of that contract. A graph is
// <key>.kgraph.pb (as traced, names and source locations included) with
// <key>.flags beside it (its compile flags, one a line). Each file appears
// by rename() of a staging file <name>.tmp-XXXXXXXX, the flags first, so a
// .kgraph.pb that is there is whole and has its flags. Every worker of a job
// may record the same graph: a file already there is left alone.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CACHE_COLLECTEDGRAPHS_H
#define KILN_CACHE_COLLECTEDGRAPHS_H

#include "cache/Store.h"
#include "compiler/graph/kgraph.pb.h"
#include "compiler/target/CompileOptions.h"

#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace kiln::cache {

/// <root>/kiln-<major>/collected: where collection records graphs when
/// nothing says otherwise.
std::string defaultCollectedDir(const Store &store);

/// Where collection records graphs: `graphsDir` when given, else
/// defaultCollectedDir of the cache at `cacheRoot` (empty: KILN_CACHE_URL,
/// else ~/.cache/kiln; for a remote tier, its local directory).
llvm::Expected<std::string> collectedDirFor(llvm::StringRef graphsDir,
                                            llvm::StringRef cacheRoot);

/// Records `graph`, keyed `key`, and the flags of `options` into `dir`.
llvm::Error recordGraph(const proto::Graph &graph, const CompileOptions &options,
                        llvm::StringRef key, llvm::StringRef dir);

/// One recorded graph.
struct CollectedGraph {
  std::string path; // <dir>/<key>.kgraph.pb
  std::string key;  // the key it was recorded under
  std::vector<std::string> flags;
};

/// The graphs recorded in `dir`, by file name; none when it does not exist.
llvm::Expected<std::vector<CollectedGraph>>
listCollectedGraphs(llvm::StringRef dir);

/// Whether `name` (a file name) is one that recordGraph writes: a recorded
/// graph, its flags, or the staging file of either.
bool isCollectedFileName(llvm::StringRef name);

} // namespace kiln::cache

#endif // KILN_CACHE_COLLECTEDGRAPHS_H
