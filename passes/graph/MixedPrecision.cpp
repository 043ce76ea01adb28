//===- MixedPrecision.cpp - bf16 matmul and convolution inputs, f32 sums -===//

#include "passes/graph/GraphEmitter.h"
#include "passes/graph/OpClasses.h"
#include "passes/graph/Passes.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace kiln::graph_passes {
#define GEN_PASS_DEF_KGRAPHMIXEDPRECISION
#include "passes/graph/Passes.h.inc"
} // namespace kiln::graph_passes

using namespace mlir;
using namespace kiln::kgraph;
using kiln::graph_passes::GraphEmitter;

namespace {

/// Whether every reader of `v`, through reshapes and transposes, is an f32
/// matmul (which this pass gives bf16 operands).
bool onlyFeedsMatmuls(Value v) {
  return llvm::all_of(v.getUsers(), [](Operation *user) {
    if (llvm::isa<ReshapeOp, TransposeOp>(user)) {
      return onlyFeedsMatmuls(user->getResult(0));
    }
    auto matmul = llvm::dyn_cast<MatmulOp>(user);
    return matmul && GraphEmitter::elementOf(matmul.getOutput()).isF32();
  });
}

/// `x` in bf16, the views and casts that make it placed by `b` (before
/// the op that needs it). Where `x` is a reshape or transpose of a value an
/// elementwise op computes, the value itself is narrowed right after that
/// op and the views follow: every matmul that reads the value, through
/// whichever views, then shares one cast (CSE), which fusion puts in the
/// producer's group, so the group stores bf16 instead of f32 that each
/// matmul narrows as it loads it. A concat only matmuls read (attention's
/// Q, K and V gradients) is rebuilt from its narrowed inputs, so its parts
/// are written in bf16 where they are computed. Casts of arguments stay at the
/// matmul: its loads narrow them for free.
Value narrowToBf16(OpBuilder &b, Location loc, Value x) {
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
  if (!producer || !GraphEmitter::elementOf(root).isF32()) {
    return GraphEmitter(b, loc).cast(x, bf16);
  }
  OpBuilder after(producer->getContext());
  after.setInsertionPointAfter(producer);
  Value narrowed;
  auto concat = llvm::dyn_cast<ConcatOp>(producer);
  if (concat && onlyFeedsMatmuls(root)) {
    llvm::SmallVector<Value> parts;
    for (Value input : concat.getInputs()) {
      parts.push_back(narrowToBf16(after, concat.getLoc(), input));
    }
    narrowed = ConcatOp::create(
        after, concat.getLoc(),
        RankedTensorType::get(GraphEmitter::shapeOf(root), bf16), parts,
        concat.getDim());
  } else if (!views.empty() && kiln::graph_passes::isElementwise(producer)) {
    narrowed = GraphEmitter(after, producer->getLoc()).cast(root, bf16);
  } else {
    return GraphEmitter(b, loc).cast(x, bf16);
  }
  GraphEmitter e(b, loc);
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
  /// Convolutions and their gradients, like matmuls, read bf16 operands
  /// and accumulate in f32: the same op on bf16 casts, its result cast
  /// back (which the tile phase folds into the PSUM evacuation).
  void narrowConvolutions() {
    llvm::SmallVector<Operation *> convolutions;
    getOperation().walk([&](Operation *op) {
      if (llvm::isa<ConvOp, ConvInputGradOp, ConvWeightGradOp>(op) &&
          GraphEmitter::elementOf(op->getResult(0)).isF32()) {
        convolutions.push_back(op);
      }
    });
    for (Operation *op : convolutions) {
      OpBuilder builder(op);
      Type bf16 = builder.getBF16Type();
      llvm::SmallVector<Value> operands;
      for (Value operand : op->getOperands()) {
        operands.push_back(narrowToBf16(builder, op->getLoc(), operand));
      }
      Value result = op->getResult(0);
      Operation *narrowOp = builder.clone(*op);
      narrowOp->setOperands(operands);
      Value narrow = narrowOp->getResult(0);
      narrow.setType(RankedTensorType::get(GraphEmitter::shapeOf(result), bf16));
      result.replaceAllUsesWith(
          GraphEmitter(builder, op->getLoc()).cast(narrow, builder.getF32Type()));
      op->erase();
    }
  }

  void runOnOperation() override {
    llvm::SmallVector<MatmulOp> matmuls;
    getOperation().walk([&](MatmulOp op) {
      if (GraphEmitter::elementOf(op.getOutput()).isF32()) {
        matmuls.push_back(op);
      }
    });
    narrowConvolutions();
    for (MatmulOp op : matmuls) {
      OpBuilder builder(op);
      GraphEmitter e(builder, op.getLoc());
      Value lhs = narrowToBf16(builder, op.getLoc(), op.getLhs());
      Value rhs = narrowToBf16(builder, op.getLoc(), op.getRhs());
      Value product =
          e.matmul(lhs, rhs, op.getTransposeLhs(), op.getTransposeRhs());
      op.getOutput().replaceAllUsesWith(e.cast(product, builder.getF32Type()));
      op.erase();
    }
    // What the matmuls read before (an f32 concat now read in bf16) goes.
    Block &body = getOperation().getBody().front();
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body))) {
      if (isOpTriviallyDead(&op)) {
        op.erase();
      }
    }
  }
};

} // namespace
