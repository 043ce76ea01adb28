//===- MixedPrecision.cpp - bf16 matmul inputs, f32 accumulation ---------===//

#include "passes/graph/GraphEmitter.h"
#include "passes/graph/OpClasses.h"
#include "passes/graph/Passes.h"

namespace kiln::graph_passes {
#define GEN_PASS_DEF_KGRAPHMIXEDPRECISION
#include "passes/graph/Passes.h.inc"
} // namespace kiln::graph_passes

using namespace mlir;
using namespace kiln::kgraph;
using kiln::graph_passes::GraphEmitter;

namespace {

/// `x` in bf16, for a matmul `e` stands before. Where `x` is a reshape or
/// transpose of a value an elementwise op computes, the value itself is
/// narrowed right after that op and the views follow: every matmul that
/// reads the value, through whichever views, then shares one cast (CSE),
/// which fusion puts in the producer's group, so the group stores bf16
/// instead of f32 that each matmul narrows as it loads it. Casts of
/// arguments stay at the matmul: its loads narrow them for free.
Value narrowToBf16(GraphEmitter &e, Value x) {
  Type bf16 = BFloat16Type::get(x.getContext());
  llvm::SmallVector<Operation *> views;
  Value root = x;
  while (Operation *def = root.getDefiningOp()) {
    if (!llvm::isa<ReshapeOp, TransposeOp>(def)) {
      break;
    }
    views.push_back(def);
    root = def->getOperand(0);
  }
  Operation *producer = root.getDefiningOp();
  if (views.empty() || !producer ||
      !kiln::graph_passes::isElementwise(producer) ||
      !GraphEmitter::elementOf(root).isF32()) {
    return e.cast(x, bf16);
  }
  OpBuilder after(producer->getContext());
  after.setInsertionPointAfter(producer);
  Value narrowed = GraphEmitter(after, producer->getLoc()).cast(root, bf16);
  for (Operation *view : llvm::reverse(views)) {
    if (auto transpose = llvm::dyn_cast<TransposeOp>(view)) {
      narrowed = e.transpose(narrowed, transpose.getPermutation());
    } else {
      narrowed = e.reshape(narrowed, GraphEmitter::shapeOf(view->getResult(0)));
    }
  }
  return narrowed;
}

struct KGraphMixedPrecision
    : kiln::graph_passes::impl::KGraphMixedPrecisionBase<KGraphMixedPrecision> {
  void runOnOperation() override {
    llvm::SmallVector<MatmulOp> matmuls;
    getOperation().walk([&](MatmulOp op) {
      if (GraphEmitter::elementOf(op.getOutput()).isF32()) {
        matmuls.push_back(op);
      }
    });
    for (MatmulOp op : matmuls) {
      OpBuilder builder(op);
      GraphEmitter e(builder, op.getLoc());
      Value lhs = narrowToBf16(e, op.getLhs());
      Value rhs = narrowToBf16(e, op.getRhs());
      Value product =
          e.matmul(lhs, rhs, op.getTransposeLhs(), op.getTransposeRhs());
      op.getOutput().replaceAllUsesWith(e.cast(product, builder.getF32Type()));
      op.erase();
    }
  }
};

} // namespace
