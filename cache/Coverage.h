//===- Coverage.h - did precompile cover the run? ---------------*- C++ -*-===//
//
// `kiln precompile` writes a coverage manifest: for each key it collected,
// the graph's name, its inputs' shapes, the world size and the key's fields.
// A run checks itself against it: in strict mode (KILN_CACHE_MODE=strict) a
// miss is an error naming the graph, its shapes and the key fields that
// differ from the nearest precompiled key; with KILN_CACHE_RUN_LOG each
// session appends what it used, and `kiln cache coverage` lists what the
// manifest lacks (docs/cache.md, "Coverage").
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CACHE_COVERAGE_H
#define KILN_CACHE_COVERAGE_H

#include "cache/Key.h"
#include "cache/Store.h"

#include "llvm/Support/Error.h"

#include <map>
#include <string>
#include <vector>

namespace kiln::cache {

/// One graph as precompile produced it or a run used it.
struct CoverageEntry {
  std::string key;
  std::string graph;  // the graph's name
  std::string inputs; // "x f32[16,784], y i64[16]"
  int64_t worldSize = 1;
  /// The key's fields; values over 64 bytes as their SHA-256.
  std::map<std::string, std::string> fields;
  /// In a run log: hit, compiled, ...
  std::string outcome;
};

CoverageEntry describeGraph(const proto::Graph &graph,
                            const CompileOptions &options, const Key &key);

/// <store>/coverage.json: where precompile writes its manifest and strict
/// mode reads it unless KILN_CACHE_MANIFEST names another.
std::string defaultManifestPath(const Store &store);

/// The manifest as JSON text, and written atomically to `path`.
std::string manifestText(const std::vector<CoverageEntry> &entries);
llvm::Error writeManifest(llvm::StringRef path,
                          const std::vector<CoverageEntry> &entries);
/// A manifest from its text; errors name `where`.
llvm::Expected<std::vector<CoverageEntry>>
parseManifest(llvm::StringRef text, llvm::StringRef where);
llvm::Expected<std::vector<CoverageEntry>> readManifest(llvm::StringRef path);

/// Appends `entry` to the run log at `path` (one JSON object a line).
llvm::Error appendRunLog(llvm::StringRef path, const CoverageEntry &entry);
/// The run log's entries; a line that does not parse is skipped with a
/// warning naming it.
llvm::Expected<std::vector<CoverageEntry>> readRunLog(llvm::StringRef path);

/// The first inputs of CoverageEntry::inputs and how many more there are.
std::string summarizeInputs(llvm::StringRef inputs);

/// Why `missing` is not among `manifest`: no graph of its name, or the key
/// fields (and input shapes) in which the nearest entry differs.
std::string explainMiss(const CoverageEntry &missing,
                        const std::vector<CoverageEntry> &manifest);

} // namespace kiln::cache

#endif // KILN_CACHE_COVERAGE_H
