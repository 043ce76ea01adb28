//===- FunctionLowering.h - one kgraph function to ktile --------*- C++ -*-===//
//
// The lowering of one kgraph function to a ktile function, following the
// plan the planning passes recorded (TilePlan.h): TileLowering.cpp walks
// the function in program order and dispatches each op to its family's
// lowering (LowerDataMovement.cpp, LowerGroups.cpp, LowerProducts.cpp,
// LowerEmbedding.cpp, LowerConvolution.cpp). Private to the tile passes.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_TILE_FUNCTIONLOWERING_H
#define KILN_PASSES_TILE_FUNCTIONLOWERING_H

#include "passes/tile/TilePlan.h"

#include <deque>

namespace kiln::tile_passes {

class FunctionLowering : public TilePlan {
public:
  FunctionLowering(mlir::func::FuncOp source,
                   const target::TargetDescription &t, int64_t sbufBudget,
                   bool hbmTrades)
      : TilePlan(source), builder(source.getContext()),
        tb(builder, source.getLoc(), t),
        lowering(tb, sbufBudget, oneHotIndices) {
    lowering.hbmTrades = hbmTrades;
  }

  mlir::FailureOr<mlir::func::FuncOp> run();

private:
  mlir::LogicalResult lowerOp(mlir::Operation *op);
  // One family of ops each (LowerDataMovement.cpp, LowerGroups.cpp,
  // LowerProducts.cpp, LowerEmbedding.cpp, LowerConvolution.cpp).
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
  mlir::LogicalResult lowerEarlyViews(mlir::Operation *product);
  llvm::SmallVector<HbmView, 1> sumsBeside(mlir::Operation *product);
  void addEpilogueSums(kgraph::MatmulOp m, Epilogue &e);
  mlir::LogicalResult lowerEmbeddingOp(kgraph::EmbeddingOp e);
  mlir::LogicalResult lowerConvolutionOp(mlir::Operation *op);
  mlir::LogicalResult lowerConvolutionEpilogue(mlir::Operation *op,
                                               mlir::Value result, int64_t id);
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
      const llvm::SmallPtrSetImpl<mlir::Operation *> *computed = nullptr,
      bool keptDims = false);
  void bindLoopResults(llvm::ArrayRef<LoopOutput> outputs,
                       llvm::ArrayRef<LoopReduction> reductions);
  void planBf16Copies();
  void bindEpilogueSums(const Epilogue &e);
  void interleaveRows(mlir::Value value, HbmView &dst);
  mlir::LogicalResult lowerReturn(mlir::func::ReturnOp ret);
  mlir::LogicalResult lowerCollective(mlir::Value input, mlir::Value output,
                                      llvm::StringRef kind,
                                      llvm::StringRef group);
  /// A collective instruction's `kind`, and its `group` where that is not
  /// the data-parallel group (the instruction's default).
  llvm::SmallVector<mlir::NamedAttribute, 2>
  collectiveArguments(llvm::StringRef kind, llvm::StringRef group);
  HbmView freshBuffer(mlir::Value result);
  void dropUnwritten(mlir::Value value, const HbmView &view);
  /// See SpreadTableUpdates.cpp.
  std::optional<unsigned>
  spreadUntil(llvm::ArrayRef<mlir::Operation *> members);
  void spread(mlir::Operation *from, unsigned at, unsigned until);
  unsigned spreadEnd(unsigned at, unsigned until);
  void emitDueSlices(unsigned at);
  /// Places the concat buffers kgraph-plan-buffers planned, and the parts
  /// of them their inputs' producers write.
  void placeConcats();

  mlir::OpBuilder builder;
  TileBuilder tb;
  Lowering lowering;
  mlir::func::FuncOp target;
  /// Results computed straight into their part of a concat's buffer, and
  /// the concat buffers not yet moved to their first writer.
  llvm::DenseMap<mlir::Value, HbmView> destinations;
  llvm::SmallPtrSet<mlir::Operation *, 4> unplacedBuffers;
  llvm::SmallPtrSet<mlir::Operation *, 8> loweredEarly;
  /// Reductions a group's loop nest computed.
  llvm::SmallPtrSet<mlir::Operation *, 16> fusedReductions;
  /// Row chains whose loop nest declined (their parts run alone).
  llvm::DenseSet<size_t> declinedChains;
  /// Slices of whole-table updates waiting for their position.
  struct DeferredSlice {
    unsigned due;
    llvm::SmallVector<mlir::Operation *> ops;
  };
  std::deque<DeferredSlice> deferredSlices;
};

} // namespace kiln::tile_passes

#endif // KILN_PASSES_TILE_FUNCTIONLOWERING_H
