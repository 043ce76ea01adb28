//===- MixedPrecision.cpp - bf16 matmul inputs, f32 accumulation ---------===//

#include "passes/graph/GraphEmitter.h"
#include "passes/graph/Passes.h"

namespace kiln::graph_passes {
#define GEN_PASS_DEF_KGRAPHMIXEDPRECISION
#include "passes/graph/Passes.h.inc"
} // namespace kiln::graph_passes

using namespace mlir;
using namespace kiln::kgraph;
using kiln::graph_passes::GraphEmitter;

namespace {

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
      Type bf16 = builder.getBF16Type();
      Value lhs = e.cast(op.getLhs(), bf16);
      Value rhs = e.cast(op.getRhs(), bf16);
      Value product =
          e.matmul(lhs, rhs, op.getTransposeLhs(), op.getTransposeRhs());
      op.getOutput().replaceAllUsesWith(e.cast(product, builder.getF32Type()));
      op.erase();
    }
  }
};

} // namespace
