//===- TilePlan.h - the tile phase's plan of one function ------*- C++ -*-===//
//
// What the tile phase decided for one kgraph function, as the planning
// passes record it on the ops (see docs/compiler.md, "Tile phase") and as
// the planners and the lowering hold it in memory: TilePlan reads it from
// the IR; TilePlanner (TilePlanner.h) computes and writes it;
// FunctionLowering (FunctionLowering.h) lowers the function following it.
// Private to the tile passes.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_TILE_TILEPLAN_H
#define KILN_PASSES_TILE_TILEPLAN_H

#include "passes/tile/Lowering.h"

#include "passes/graph/OpClasses.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace kiln::tile_passes {

/// The ranked tensor type of a kgraph value.
mlir::RankedTensorType tensorType(mlir::Value v);
/// The memref an HBM buffer for a tensor of `type` has (rank 0 as [1]).
mlir::MemRefType hbmTypeOf(mlir::RankedTensorType type);
/// The row-major view of a whole buffer holding a tensor of `type`.
HbmView viewOfBuffer(mlir::Value buffer, mlir::RankedTensorType type);
/// Elements [at, at + size) along `dim` of a concat's result view.
HbmView concatPart(const HbmView &whole, int64_t dim, int64_t at, int64_t size);
/// Erases a buffer nothing reads or writes.
void eraseIfUnused(const HbmView &view);
/// Whether `op` only views its operand (reshape, transpose, broadcast,
/// slice): it computes nothing.
bool isViewOp(mlir::Operation *op);
/// The indices of a one-hot operand kgraph-plan-matmul-operands folded
/// (see PlanMatmulOperands.cpp).
mlir::Value oneHotIndicesOf(mlir::Value matrix);
/// A 2-D product with neither operand transposed.
bool isPlain2d(kgraph::MatmulOp m);
/// A sum over rows as layout assignment writes it: `ones[1, R] . V`.
bool isRowSum(kgraph::MatmulOp m);

class TilePlan {
public:
  explicit TilePlan(mlir::func::FuncOp source) : source(source) {}

protected:
  /// Each reads what one planning pass recorded (kgraph-plan-matmul-
  /// operands, -row-sums, -epilogues, -buffers), in that order.
  void readMatmulOperandPlan();
  void readRowSumPlan();
  void readEpiloguePlan();
  void readEpilogueReferences(
      mlir::Operation *op,
      const llvm::DenseMap<int64_t, mlir::Operation *> &products);
  void readBufferPlan();

  /// A row sum's result, or the f32 cast folded into it.
  mlir::Value sumResult(mlir::Operation *sum);
  /// The value a row sum reads, through single-use reshapes and folded
  /// casts (`via`).
  mlir::Value summedValue(kgraph::MatmulOp sum,
                          llvm::SmallVectorImpl<mlir::Operation *> &via);
  void sortByPosition(llvm::SmallVectorImpl<mlir::Operation *> &ops);
  std::optional<std::pair<mlir::Value, HbmView>>
  concatSlice(kgraph::ConcatOp concat, unsigned index, const HbmView &whole);

  mlir::func::FuncOp source;
  llvm::DenseMap<mlir::Operation *, unsigned> position;
  llvm::DenseMap<int64_t, llvm::SmallVector<mlir::Operation *>> groups;
  /// Ops another op's lowering performs (kgraph.fold).
  llvm::SmallPtrSet<mlir::Operation *, 16> absorbed;
  llvm::DenseMap<mlir::Operation *, mlir::Operation *> matmulResultCast;
  /// One-hot matrices computed on chip, with their indices (see
  /// Lowering::oneHotIndices).
  llvm::DenseMap<mlir::Value, mlir::Value> oneHotIndices;
  /// f32 values of elementwise ops stored in bf16 (kgraph.narrowed).
  llvm::DenseSet<mlir::Value> narrowed;
  /// Bias gradients `ones[1, K] . dY` a weight gradient `dY^T . X`
  /// computes beside its product (see Lowering::lowerMatmul).
  llvm::DenseMap<mlir::Operation *, llvm::SmallVector<kgraph::MatmulOp, 1>>
      columnSumsOf;
  llvm::SmallPtrSet<mlir::Operation *, 8> summedBySibling;
  /// Per-channel sums of a convolution's output it computes as its tiles
  /// leave PSUM (see kgraph::channelSummedConvolution).
  llvm::DenseMap<mlir::Operation *, llvm::SmallVector<mlir::Operation *, 1>>
      channelSumsOf;
  /// Sums over rows of a group value that its loop nest may compute (see
  /// LoopColumnSum), keyed by the group's last op.
  llvm::DenseMap<mlir::Operation *,
                 llvm::SmallVector<std::pair<kgraph::MatmulOp, mlir::Value>, 2>>
      rowSumsOf;
  llvm::SmallPtrSet<mlir::Operation *, 8> rowSumCandidates;
  /// Groups a matmul computes on its output tiles, and where they run.
  llvm::DenseMap<mlir::Operation *, int64_t> epilogueOf;
  llvm::DenseMap<int64_t, unsigned> epilogueAt;
  /// Views an epilogue reads that stand after its matmul: lowered before it.
  llvm::DenseMap<mlir::Operation *, llvm::SmallVector<mlir::Operation *>>
      earlyViews;
  /// Row sums a 2-D product's epilogue computes (see planEpilogueSums),
  /// by matmul, the groups that join epilogues for them, and the reshapes
  /// and casts between a sum and its value, which the epilogue does.
  llvm::DenseMap<mlir::Operation *, llvm::SmallVector<LoopColumnSum, 2>>
      epilogueSumsOf;
  llvm::DenseMap<mlir::Operation *, llvm::SmallVector<mlir::Operation *>>
      joinedEpilogue;
  llvm::SmallPtrSet<mlir::Operation *, 16> doneByEpilogues;
  /// Row chains (see PlanRowChains.cpp), each run where its last op
  /// stands.
  std::vector<PlannedRowChain> chains;
  llvm::DenseMap<mlir::Operation *, size_t> chainOf;
  /// Row chains a product computes on its tiles (see planChainEpilogues),
  /// keyed by the matmul, and where they run.
  llvm::DenseMap<mlir::Operation *, size_t> chainEpilogueOf;
  llvm::DenseMap<size_t, unsigned> chainEpilogueAt;
  /// Results computed straight into an argument's buffer.
  llvm::DenseMap<mlir::Value, unsigned> inPlace;
  /// Results copied into an argument's buffer as soon as they exist.
  llvm::DenseMap<mlir::Value, unsigned> copiedEarly;
  /// The concat inputs computed into their part of the concat's buffer,
  /// by concat (in program order).
  llvm::MapVector<mlir::Operation *, llvm::SmallVector<int64_t, 2>>
      concatsIntoSlices;
};

} // namespace kiln::tile_passes

#endif // KILN_PASSES_TILE_TILEPLAN_H
