//===- StandInCompiler.h - a compile function for cache tests ---*- C++ -*-===//
//
// The cache is tested apart from the compiler (issue 5 builds beside it): this
// stand-in turns a graph into a small valid artifact whose constants are the
// graph's canonical bytes, so different graphs give different artifacts and
// the same graph the same bytes. The environment steers it:
//   KILN_TEST_COMPILE_SECONDS  sleep this long (a slow compile)
//   KILN_TEST_COMPILE_FAIL=1   fail with a compile error
//   KILN_TEST_COMPILE_LOG      append one line per compile (to count them)
//   KILN_TEST_ARTIFACT_BYTES   pad the constants to about this size
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_CACHE_STANDINCOMPILER_H
#define KILN_TEST_CACHE_STANDINCOMPILER_H

#include "compiler/target/CompileOptions.h"
#include "compiler/graph/kgraph.pb.h"

#include "llvm/Support/Error.h"

namespace mlir {
class MLIRContext;
}

#include <string>

namespace kiln::test {

/// A small training-step graph (a matmul, a loss, an update scaled by
/// `scale`): different names or scales give different graphs to cache.
llvm::Expected<proto::Graph> smallStepGraph(mlir::MLIRContext &context,
                                            llvm::StringRef name, double scale);

llvm::Expected<std::string> standInCompile(const proto::Graph &graph,
                                           const CompileOptions &options);

} // namespace kiln::test

#endif // KILN_TEST_CACHE_STANDINCOMPILER_H
