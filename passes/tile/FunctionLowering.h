//===- FunctionLowering.h - one kgraph function to ktile --------*- C++ -*-===//
//
// The state of lowering one kgraph function to a ktile function, shared by
// the planning (PlanEpilogues.cpp: which groups and row chains run as
// matmul epilogues or loop nests; PlanLowering.cpp: in place or in a
// concat's slice, operands computed on chip, layouts) and the lowering
// proper (TileLowering.cpp), which walks the function in program order
// following the plan. Private to the tile passes.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_TILE_FUNCTIONLOWERING_H
#define KILN_PASSES_TILE_FUNCTIONLOWERING_H

#include "passes/tile/Lowering.h"

#include "passes/graph/OpClasses.h"

#include "llvm/ADT/SetVector.h"

#include <deque>
#include <map>

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
/// Whether `cast` is a bf16 cast ending a fusion group whose f32 input
/// nothing outside the group reads: the group then stores the bf16 value.
bool narrowsGroupOutput(kgraph::CastOp cast);
/// The indices of a one-hot operand kgraph-plan-matmul-operands folded
/// (see PlanMatmulOperands.cpp).
mlir::Value oneHotIndicesOf(mlir::Value matrix);
/// A 2-D product with neither operand transposed.
bool isPlain2d(kgraph::MatmulOp m);
/// A sum over rows as layout assignment writes it: `ones[1, R] . V`.
bool isRowSum(kgraph::MatmulOp m);

class FunctionLowering {
public:
  FunctionLowering(mlir::func::FuncOp source,
                   const target::TargetDescription &t, int64_t sbufBudget)
      : source(source), builder(source.getContext()),
        tb(builder, source.getLoc(), t), lowering(tb, sbufBudget) {}

  mlir::FailureOr<mlir::func::FuncOp> run();
  /// kgraph-plan-epilogues: plans what matmuls compute on their output
  /// tiles and the row chains, and records it on the ops (EpiloguePlan.cpp).
  void recordEpiloguePlan();
  /// kgraph-plan-buffers: plans the results computed into arguments' and
  /// concats' buffers, and records it on the ops (BufferPlan.cpp).
  void recordBufferPlan();

private:
  mlir::LogicalResult lowerOp(mlir::Operation *op);
  // One family of ops each (LowerDataMovement.cpp, LowerGroups.cpp,
  // LowerProducts.cpp, LowerEmbedding.cpp).
  mlir::LogicalResult lowerConstant(kgraph::ConstantOp c);
  mlir::LogicalResult lowerReshape(kgraph::ReshapeOp r);
  mlir::LogicalResult lowerTranspose(kgraph::TransposeOp t);
  mlir::LogicalResult lowerBroadcast(kgraph::BroadcastOp bc);
  mlir::LogicalResult lowerSlice(kgraph::SliceOp s);
  mlir::LogicalResult lowerConcat(kgraph::ConcatOp c);
  mlir::LogicalResult lowerIota(kgraph::IotaOp iota);
  mlir::LogicalResult lowerElementwiseOp(mlir::Operation *op);
  mlir::LogicalResult lowerReduction(mlir::Operation *r);
  mlir::LogicalResult lowerMatmulOp(kgraph::MatmulOp m);
  mlir::LogicalResult lowerChainEpilogue(kgraph::MatmulOp m, size_t chain);
  mlir::LogicalResult lowerGroupEpilogue(kgraph::MatmulOp m, int64_t group);
  mlir::LogicalResult lowerEarlyViews(kgraph::MatmulOp m);
  llvm::SmallVector<HbmView, 1> sumsBeside(kgraph::MatmulOp m);
  void addEpilogueSums(kgraph::MatmulOp m, Epilogue &e);
  void sortByPosition(llvm::SmallVectorImpl<mlir::Operation *> &ops);
  mlir::LogicalResult lowerEmbeddingOp(kgraph::EmbeddingOp e);
  mlir::LogicalResult lowerScatterOp(kgraph::ScatterRowsOp scatter);
  /// Binds `value` to `view` (lowered: its data is there).
  void bindView(mlir::Value value, HbmView view);
  mlir::LogicalResult lowerGroup(llvm::ArrayRef<mlir::Operation *> members);
  mlir::LogicalResult lowerChain(size_t chain);
  llvm::SmallVector<LoopOutput>
  groupOutputs(llvm::ArrayRef<mlir::Operation *> members);
  llvm::SmallVector<LoopReduction> groupReductions(
      llvm::ArrayRef<mlir::Operation *> members, llvm::ArrayRef<int64_t> shape,
      unsigned at,
      const llvm::SmallPtrSetImpl<mlir::Operation *> *computed = nullptr);
  void bindLoopResults(llvm::ArrayRef<LoopOutput> outputs,
                       llvm::ArrayRef<LoopReduction> reductions);
  void readMatmulOperandPlan();
  void readRowSumPlan();
  void writeEpiloguePlan();
  void readBufferPlan();
  std::optional<std::pair<mlir::Value, HbmView>>
  concatSlice(kgraph::ConcatOp concat, unsigned index, const HbmView &whole);
  void readEpiloguePlan();
  void readEpilogueReferences(
      mlir::Operation *op,
      const llvm::DenseMap<int64_t, mlir::Operation *> &products);
  void planBf16Copies();
  void planEpilogues();
  void planChains();
  void planChainEpilogues();
  void planEpilogueChains();
  bool joinChainToEpilogue(
      size_t chain, bool alone,
      const llvm::DenseMap<int64_t, kgraph::MatmulOp> &productOf);
  bool chainEpilogueFits(const PlannedRowChain &plan,
                         const llvm::SetVector<mlir::Operation *> &between,
                         const llvm::SmallPtrSetImpl<mlir::Operation *> &all,
                         kgraph::MatmulOp product,
                         llvm::SetVector<mlir::Operation *> &views);
  void planEpilogueSums();
  llvm::DenseMap<mlir::Operation *, mlir::Operation *> epilogueOps();
  mlir::Value summedValue(kgraph::MatmulOp sum,
                          llvm::SmallVectorImpl<mlir::Operation *> &via);
  bool isUnpairedRowSum(mlir::Operation *op);
  bool onlySummed(mlir::Value v,
                  const llvm::SmallPtrSetImpl<mlir::Operation *> &inside);
  bool joinEpilogueBySums(
      mlir::Operation *def, mlir::Value v, llvm::ArrayRef<int64_t> rhsShape,
      llvm::DenseMap<mlir::Operation *, mlir::Operation *> &epilogueOfOp);
  mlir::Value sumResult(mlir::Operation *sum);
  void bindEpilogueSums(const Epilogue &e);
  bool
  returnsAliasedResult(const llvm::SmallPtrSetImpl<mlir::Operation *> &ops);
  void runChainAt(size_t chain, kgraph::MatmulOp product,
                  const llvm::SetVector<mlir::Operation *> &views);
  void interleaveRows(mlir::Value value, HbmView &dst);
  unsigned readAt(mlir::Operation *op);
  bool availableBy(mlir::Operation *def, unsigned at,
                   llvm::SetVector<mlir::Operation *> &views);
  mlir::LogicalResult lowerReturn(mlir::func::ReturnOp ret);
  mlir::LogicalResult lowerCollective(mlir::Value input, mlir::Value output,
                                      llvm::StringRef kind);
  HbmView freshBuffer(mlir::Value result);
  void dropUnwritten(mlir::Value value, const HbmView &view);
  void planInPlace();
  void planScatterInPlace(kgraph::ScatterRowsOp scatter, unsigned arg,
                          llvm::SmallPtrSetImpl<mlir::Value> &taken);
  void planConcats();
  /// See SpreadTableUpdates.cpp.
  std::optional<unsigned>
  spreadUntil(llvm::ArrayRef<mlir::Operation *> members);
  void spread(mlir::Operation *from, unsigned at, unsigned until);
  unsigned spreadEnd(unsigned at, unsigned until);
  void emitDueSlices(unsigned at);
  unsigned loweredAt(mlir::Operation *op);
  bool readsEndBefore(mlir::Value value, unsigned at,
                      const llvm::SmallPtrSetImpl<mlir::Operation *> &group,
                      bool throughView);

  mlir::func::FuncOp source;
  mlir::OpBuilder builder;
  TileBuilder tb;
  Lowering lowering;
  mlir::func::FuncOp target;
  llvm::DenseMap<mlir::Operation *, unsigned> position;
  llvm::DenseMap<int64_t, llvm::SmallVector<mlir::Operation *>> groups;
  /// Results computed straight into an argument's buffer.
  llvm::DenseMap<mlir::Value, unsigned> inPlace;
  /// Results computed straight into their part of a concat's buffer, and
  /// the concat buffers not yet moved to their first writer.
  llvm::DenseMap<mlir::Value, HbmView> destinations;
  llvm::SmallPtrSet<mlir::Operation *, 4> unplacedBuffers;
  /// The concat inputs planConcats found computable into their part of
  /// the concat's buffer, by concat (in program order).
  llvm::MapVector<mlir::Operation *, llvm::SmallVector<int64_t, 2>>
      concatsIntoSlices;
  /// Ops another op's lowering performs (casts folded into matmuls).
  llvm::SmallPtrSet<mlir::Operation *, 16> absorbed;
  llvm::DenseMap<mlir::Operation *, mlir::Operation *> matmulResultCast;
  /// Groups a matmul computes on its output tiles, and where they run.
  llvm::DenseMap<mlir::Operation *, int64_t> epilogueOf;
  llvm::DenseMap<int64_t, unsigned> epilogueAt;
  /// Views an epilogue reads that stand after its matmul: lowered before it.
  llvm::DenseMap<mlir::Operation *, llvm::SmallVector<mlir::Operation *>>
      earlyViews;
  llvm::SmallPtrSet<mlir::Operation *, 8> loweredEarly;
  /// Bias gradients `ones[1, K] . dY` a weight gradient `dY^T . X`
  /// computes beside its product (see Lowering::lowerMatmul).
  llvm::DenseMap<mlir::Operation *, llvm::SmallVector<kgraph::MatmulOp, 1>>
      columnSumsOf;
  llvm::SmallPtrSet<mlir::Operation *, 8> summedBySibling;
  /// Sums over rows of a group value that its loop nest may compute (see
  /// LoopColumnSum), keyed by the group's last op.
  llvm::DenseMap<mlir::Operation *,
                 llvm::SmallVector<std::pair<kgraph::MatmulOp, mlir::Value>, 2>>
      rowSumsOf;
  llvm::SmallPtrSet<mlir::Operation *, 8> rowSumCandidates;
  /// Row sums a 2-D product's epilogue computes (see planEpilogueSums),
  /// by matmul, the groups that join epilogues for them, and the reshapes
  /// and casts between a sum and its value, which the epilogue does.
  llvm::DenseMap<mlir::Operation *, llvm::SmallVector<LoopColumnSum, 2>>
      epilogueSumsOf;
  llvm::DenseMap<mlir::Operation *, llvm::SmallVector<mlir::Operation *>>
      joinedEpilogue;
  llvm::SmallPtrSet<mlir::Operation *, 16> doneByEpilogues;
  /// Reductions a group's loop nest computed.
  llvm::SmallPtrSet<mlir::Operation *, 16> fusedReductions;
  /// Row chains (see PlanRowChains.cpp), each run where its last op
  /// stands, and those whose loop nest declined (their parts run alone).
  std::vector<PlannedRowChain> chains;
  llvm::DenseMap<mlir::Operation *, size_t> chainOf;
  llvm::DenseSet<size_t> declinedChains;
  /// Row chains a batched product computes on its tiles (see
  /// planChainEpilogues), keyed by the matmul, and where they run.
  llvm::DenseMap<mlir::Operation *, size_t> chainEpilogueOf;
  llvm::DenseMap<size_t, unsigned> chainEpilogueAt;
  std::map<mlir::Operation *, mlir::Operation *> loneGroups; // stable storage
  /// Slices of whole-table updates waiting for their position.
  struct DeferredSlice {
    unsigned due;
    llvm::SmallVector<mlir::Operation *> ops;
  };
  std::deque<DeferredSlice> deferredSlices;
  /// f32 values of elementwise ops stored in bf16 (kgraph.narrowed).
  llvm::DenseSet<mlir::Value> narrowed;
};

} // namespace kiln::tile_passes

#endif // KILN_PASSES_TILE_FUNCTIONLOWERING_H
