//===- Passes.h - the tile phase --------------------------------*- C++ -*-===//

#ifndef KILN_PASSES_TILE_PASSES_H
#define KILN_PASSES_TILE_PASSES_H

#include "dialects/kgraph/KGraphDialect.h"
#include "dialects/kisa/KisaDialect.h"
#include "dialects/ktile/KTileDialect.h"
#include "compiler/target/TargetDescription.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace kiln::tile_passes {

#define GEN_PASS_DECL
#include "passes/tile/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/tile/Passes.h.inc"

/// The target a tile pass's `target` option names, or null after an error
/// on `op` that says which name is unknown.
const target::TargetDescription *lookupTargetOrError(mlir::Operation *op,
                                                     llvm::StringRef name);

/// The tile phase's planning passes, in order, on each function of the
/// module `pm` runs on: they record the plan convert-kgraph-to-ktile reads.
/// `convInputCopies`: kgraph-plan-matmul-operands' trade of HBM for DMA.
void addTilePlanningPasses(mlir::OpPassManager &pm, llvm::StringRef target,
                           bool convInputCopies = true);

/// What ktile-plan-memory leaves on the module when a function's HBM plan
/// overflows the target (besides its error): the compile driver then plans
/// again without the trades that cost HBM.
inline constexpr llvm::StringLiteral kHbmOverflowAttr = "kiln.hbm_overflow";
/// Registers them as the pipeline `kgraph-plan-tiles` (for kiln-opt).
void registerTilePlanningPipeline();

} // namespace kiln::tile_passes

#endif // KILN_PASSES_TILE_PASSES_H
