//===- KGraphDialect.h - the kgraph dialect and its ops --------*- C++ -*-===//

#ifndef KILN_DIALECTS_KGRAPH_KGRAPHDIALECT_H
#define KILN_DIALECTS_KGRAPH_KGRAPHDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/kgraph/KGraphDialect.h.inc"

#include "dialects/kgraph/KGraphInterfaces.h.inc"

#define GET_OP_CLASSES
#include "dialects/kgraph/KGraphOps.h.inc"

namespace kiln::kgraph {

/// Names of the function argument/result attributes that carry a value's role
/// in the training step (see the dialect description).
inline constexpr llvm::StringLiteral kNameAttr = "kgraph.name";
inline constexpr llvm::StringLiteral kRoleAttr = "kgraph.role";
inline constexpr llvm::StringLiteral kAliasesAttr = "kgraph.aliases";

/// The plan the compiler records on ops for the tile phase (see "Plan
/// attributes" in the dialect description); the dialect verifies them.
/// The elementwise fusion group an op belongs to (kgraph-fuse-elementwise).
inline constexpr llvm::StringLiteral kFusionAttr = "kgraph.fusion";
/// Which other op's instructions compute this op (the tile phase's
/// kgraph-plan-matmul-operands).
inline constexpr llvm::StringLiteral kFoldAttr = "kgraph.fold";
/// The f32 results of an elementwise op stored in bf16, by number (the
/// same pass).
inline constexpr llvm::StringLiteral kNarrowedAttr = "kgraph.narrowed";

/// A label on a matmul or a convolution that other ops' plans refer to (the
/// tile phase's kgraph-plan-row-sums).
inline constexpr llvm::StringLiteral kProductAttr = "kgraph.product";
/// On a row sum `ones[1, K] . G`: the product (by label) that computes it
/// beside itself from the G tiles it holds; on a per-channel sum of a
/// convolution's output, the convolution, which sums its tiles as they
/// leave PSUM (the same pass).
inline constexpr llvm::StringLiteral kSumBesideAttr = "kgraph.sum_beside";
/// On a row sum: a candidate for the loop nest of the group computing
/// what it sums (the same pass).
inline constexpr llvm::StringLiteral kSumInLoopNestAttr =
    "kgraph.sum_in_loop_nest";

/// The epilogue plan (the tile phase's kgraph-plan-epilogues): on the
/// function, each row chain's `from` and `shape`; on an op, the chain it is
/// in; on a matmul, the fusion group or chain it computes on its output
/// tiles; on a view, the products (by label) it is lowered early for; on an
/// op, the product whose epilogue it joins; on a row sum, the product whose
/// epilogue folds it.
inline constexpr llvm::StringLiteral kRowChainsAttr = "kgraph.row_chains";
inline constexpr llvm::StringLiteral kRowChainAttr = "kgraph.row_chain";
inline constexpr llvm::StringLiteral kEpilogueAttr = "kgraph.epilogue";
inline constexpr llvm::StringLiteral kChainEpilogueAttr =
    "kgraph.chain_epilogue";
inline constexpr llvm::StringLiteral kEarlyForAttr = "kgraph.early_for";
inline constexpr llvm::StringLiteral kJoinsEpilogueAttr =
    "kgraph.joins_epilogue";
inline constexpr llvm::StringLiteral kSumInEpilogueAttr =
    "kgraph.sum_in_epilogue";

/// The buffer plan (the tile phase's kgraph-plan-buffers): the argument
/// each result is computed into (-1: none); the inputs of a concat computed
/// into their part of its buffer.
inline constexpr llvm::StringLiteral kInPlaceAttr = "kgraph.in_place";
inline constexpr llvm::StringLiteral kIntoSlicesAttr = "kgraph.into_slices";
/// The argument each result is copied into right where it is computed,
/// rather than at the function's end (-1: none).
inline constexpr llvm::StringLiteral kCopiedIntoAttr = "kgraph.copied_into";

/// Whether `op` is a product TensorE computes from operands it loads
/// itself (a matmul, a convolution or a convolution's gradient): casts of
/// its operands and of its result may fold into its loads and its PSUM
/// evacuation.
bool isTensorEngineProduct(mlir::Operation *op);

/// The convolution (or convolution input gradient) whose output `sum` adds
/// up per channel, `reduce_sum(transpose(Y, [1, 0, 2, ...]), [1, ...])`,
/// where Y is its f32 result or the f32 cast folded into its evacuation;
/// null for any other sum. Such a sum can be computed from the output's
/// tiles as they leave PSUM, channels on the partitions.
mlir::Operation *channelSummedConvolution(ReduceSumOp sum);

/// The values of kgraph.fold.
enum class Fold {
  None,
  /// A bf16 cast a matmul's operand loads perform.
  IntoLoads,
  /// An f32 cast of a product, done as its tiles leave PSUM.
  IntoEvacuation,
  /// Part of a one-hot operand the matmuls reading it compute on chip from
  /// its indices.
  OnChip,
};
Fold foldOf(mlir::Operation *op);
void setFold(mlir::Operation *op, Fold fold);
/// The fusion group of `op`, if it is in one.
std::optional<int64_t> fusionGroupOf(mlir::Operation *op);

} // namespace kiln::kgraph

#endif // KILN_DIALECTS_KGRAPH_KGRAPHDIALECT_H
