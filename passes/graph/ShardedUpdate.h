//===- ShardedUpdate.h - one parameter's update on a block of its rows -*- C++ -*-===//
//
// ZeRO-1 (kgraph-data-parallel with shard-optimizer-state): each worker of
// a group of W updates rows [r * d/W, (r + 1) * d/W) of a parameter with
// the same rows of its optimizer state, which is all it holds. This finds
// a parameter's update in the step, decides whether it can run on a block
// of rows, and rewrites it to.
//
// The update is what the averaged gradient flows into: ops computed
// element by element over the parameter's shape (the optimizer's formula),
// reading besides the gradient only values alike in every row (the step's
// scalars), the parameter, its optimizer state (arguments of its shape)
// and other such ops. Its values may be returned as the new parameter or
// new optimizer state, and summed whole to a scalar (a clipping or trust
// ratio norm: each worker then sums its rows and an all-reduce adds the
// blocks). Anything else reading them (a matmul, a reshape, a metric
// output) keeps the parameter whole.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_GRAPH_SHARDEDUPDATE_H
#define KILN_PASSES_GRAPH_SHARDEDUPDATE_H

#include "dialects/kgraph/KGraphDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SetVector.h"

#include <optional>

namespace kiln::graph_passes {

/// An updated parameter's block, to be gathered from every worker into
/// the function's result `result`.
struct ParameterBlock {
  unsigned result;
  mlir::Value block;
};

class ShardedUpdate {
public:
  /// The update of `marker`'s parameter, when it can run on a block of
  /// its rows in a group of `group` workers.
  static std::optional<ShardedUpdate> analyze(kgraph::GradientOp marker,
                                              int64_t group);

  /// Adds the update's ops to `claimed`, unless another update claimed
  /// one of them already (an op two updates read stays whole).
  bool claim(llvm::DenseSet<mlir::Operation *> &claimed) const;

  /// The type of this worker's block of the gradient.
  mlir::RankedTensorType blockType() const;

  /// Rewrites the update to read `gradientBlock` (this worker's rows of
  /// the averaged gradient) in place of the marker, which it leaves for
  /// the caller to erase; the optimizer state arguments become blocks.
  /// Returns the updated parameter's block, which the caller gathers, and
  /// adds the all-reduces of the whole sums' blocks to `blockSums`.
  llvm::SmallVector<ParameterBlock>
  rewrite(mlir::Value gradientBlock,
          llvm::SmallVectorImpl<kgraph::AllReduceOp> &blockSums);

private:
  ShardedUpdate(kgraph::GradientOp marker, int64_t group)
      : marker(marker), fullType(marker.getOutput().getType()), group(group) {}

  mlir::RankedTensorType blockOf(mlir::Type full) const;
  bool isFullShaped(mlir::Value v) const;
  bool isAlikeInEveryRow(mlir::Value operand) const;
  bool followUses(mlir::Value derived);
  bool acceptReturn(mlir::func::ReturnOp ret, unsigned index);
  bool readsOnlyBlocks(mlir::Operation *op);
  bool isBlockable(mlir::Value v);
  bool allUsesRewritten() const;
  mlir::Value blockOfParameter(mlir::OpBuilder &builder);

  kgraph::GradientOp marker;
  /// The parameter's (and its gradient's) type.
  mlir::RankedTensorType fullType;
  int64_t group;
  mlir::func::FuncOp func;
  /// The parameter's argument.
  mlir::BlockArgument parameter;
  /// Ops recomputed on blocks (the update and what it reads), and the
  /// whole sums of its values.
  llvm::SetVector<mlir::Operation *> ops;
  llvm::SetVector<mlir::Operation *> sums;
  /// Optimizer state arguments that become blocks.
  llvm::SetVector<mlir::BlockArgument> state;
  /// Results: the new parameter (gathered) and new state (blocks).
  llvm::SmallVector<unsigned> parameterResults;
  llvm::SmallVector<unsigned> stateResults;
  llvm::DenseSet<mlir::Value> derived;
  llvm::DenseMap<mlir::Value, bool> blockable;
};

} // namespace kiln::graph_passes

#endif // KILN_PASSES_GRAPH_SHARDEDUPDATE_H
