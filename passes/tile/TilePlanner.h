//===- TilePlanner.h - the tile phase's planning passes ---------*- C++ -*-===//
//
// The planning of kgraph-plan-epilogues (PlanEpilogues.cpp, EpiloguePlan.cpp)
// and kgraph-plan-buffers (PlanLowering.cpp, BufferPlan.cpp): each reads
// the plan the passes before it recorded, decides its part, and records it
// on the ops. Private to the tile passes.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_TILE_TILEPLANNER_H
#define KILN_PASSES_TILE_TILEPLANNER_H

#include "passes/tile/TilePlan.h"

#include <map>

namespace kiln::tile_passes {

class TilePlanner : public TilePlan {
public:
  TilePlanner(mlir::func::FuncOp source, const target::TargetDescription &t)
      : TilePlan(source), target(t) {}

  /// kgraph-plan-epilogues: plans what matmuls compute on their output
  /// tiles and the row chains, and records it on the ops.
  void recordEpiloguePlan();
  /// kgraph-plan-buffers: plans the results computed into arguments' and
  /// concats' buffers, and records it on the ops.
  void recordBufferPlan();

private:
  void writeEpiloguePlan();
  void planEpilogues();
  void planConvolutionEpilogues();
  bool groupFitsEpilogue(mlir::Operation *product, mlir::Value value,
                         llvm::ArrayRef<mlir::Operation *> members,
                         llvm::SetVector<mlir::Operation *> &views);
  void recordEpilogue(mlir::Operation *product, int64_t id,
                      const llvm::SetVector<mlir::Operation *> &views);
  void setEarlyViews(mlir::Operation *product,
                     const llvm::SetVector<mlir::Operation *> &views);
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
  bool isUnpairedRowSum(mlir::Operation *op);
  bool onlySummed(mlir::Value v,
                  const llvm::SmallPtrSetImpl<mlir::Operation *> &inside);
  bool joinEpilogueBySums(
      mlir::Operation *def, mlir::Value v, llvm::ArrayRef<int64_t> rhsShape,
      llvm::DenseMap<mlir::Operation *, mlir::Operation *> &epilogueOfOp);
  bool
  returnsAliasedResult(const llvm::SmallPtrSetImpl<mlir::Operation *> &ops);
  void runChainAt(size_t chain, kgraph::MatmulOp product,
                  const llvm::SetVector<mlir::Operation *> &views);
  unsigned readAt(mlir::Operation *op);
  bool availableBy(mlir::Operation *def, unsigned at,
                   llvm::SetVector<mlir::Operation *> &views);
  unsigned loweredAt(mlir::Operation *op);
  bool readsEndBefore(mlir::Value value, unsigned at,
                      const llvm::SmallPtrSetImpl<mlir::Operation *> &group,
                      bool throughView);
  void planInPlace();
  void planScatterInPlace(kgraph::ScatterRowsOp scatter, unsigned arg,
                          llvm::SmallPtrSetImpl<mlir::Value> &taken);
  void planConcats();

  const target::TargetDescription &target;
  std::map<mlir::Operation *, mlir::Operation *> loneGroups; // stable storage
};

} // namespace kiln::tile_passes

#endif // KILN_PASSES_TILE_TILEPLANNER_H
