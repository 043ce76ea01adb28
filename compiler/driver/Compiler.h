//===- Compiler.h - compile(graph, options) -> artifact ---------*- C++ -*-===//
//
// The library entry point the cache, `kiln compile` and `kiln precompile`
// share. The pipeline is the phase table of ARCHITECTURE.md:
//
//   import  protobuf -> kgraph
//   graph   decompose, layout, canonicalize + CSE, mixed precision, fusion
//   tile    kgraph -> ktile (tiling), SBUF/PSUM/HBM plan
//   engine  ktile -> kisa (engines, schedule, semaphores)
//   emit    kisa -> .kneff
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_DRIVER_COMPILER_H
#define KILN_COMPILER_DRIVER_COMPILER_H

#include "compiler/target/CompileOptions.h"
#include "compiler/graph/kgraph.pb.h"
#include "runtime/artifact/Artifact.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include <optional>

namespace kiln {

enum class Phase { Import, Graph, Tile, Engine, Emit };
std::optional<Phase> phaseNamed(llvm::StringRef name);
llvm::StringRef phaseName(Phase phase);

/// Registers what the pipeline's IR needs in `context`.
void prepareContext(mlir::MLIRContext &context);

/// Adds the passes that take kgraph IR through `last` (Graph, Tile or
/// Engine; Import adds nothing, Emit the same as Engine). `hbmTrades`: the
/// plan may spend HBM for speed (lowerModule drops them where it must).
llvm::Error buildPipeline(mlir::PassManager &pm, const CompileOptions &options,
                          Phase last, bool hbmTrades = true);

struct CompileHooks {
  /// Print each pass's wall time here (--timing).
  llvm::raw_ostream *timing = nullptr;
  /// Verify the IR after every pass (--verify-each; the compiler's tests),
  /// not only the imported graph and the finished program: a fifth of the
  /// compile time of a large step, and it changes no output.
  bool verifyEachPass = false;
};

/// Runs the pipeline on imported kgraph IR up to `last`, in place; where
/// the HBM plan overflows, once more without the plan's HBM trades.
llvm::Error lowerModule(mlir::ModuleOp module, const CompileOptions &options,
                        Phase last, const CompileHooks &hooks = {});

/// The whole pipeline: a graph in, an artifact out. Deterministic: the same
/// graph and options give byte-identical artifacts.
llvm::Expected<artifact::Artifact> compile(const proto::Graph &graph,
                                           const CompileOptions &options,
                                           const CompileHooks &hooks = {});

/// compile() then the artifact's bytes: the cache's CompileFunction.
llvm::Expected<std::string> compileToBytes(const proto::Graph &graph,
                                           const CompileOptions &options);

} // namespace kiln

#endif // KILN_COMPILER_DRIVER_COMPILER_H
