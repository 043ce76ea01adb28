//===- AssignLayout.cpp - put reduced dimensions where tiles reduce -------===//

#include "passes/graph/GraphEmitter.h"
#include "passes/graph/Passes.h"

#include "dialects/kgraph/KGraphShapes.h"

#include <numeric>

namespace kiln::graph_passes {
#define GEN_PASS_DEF_KGRAPHASSIGNLAYOUT
#include "passes/graph/Passes.h.inc"
} // namespace kiln::graph_passes

using namespace mlir;
using namespace kiln::kgraph;
using kiln::graph_passes::GraphEmitter;

namespace {

using Shape = llvm::SmallVector<int64_t>;

/// The most slices a reduction over one middle dimension adds elementwise.
constexpr int64_t kMaxSlicesAdded = 16;

/// A sum over one middle dimension of few elements, each slice a
/// long block of contiguous elements (grouped-query attention's key and
/// value gradients, summed over the 8 query heads that share a key-value
/// head): the slices combined elementwise, one loop nest that loads each
/// slice as it lies, instead of a transpose that moves the dimension
/// innermost with element-sized runs. Low-precision sums accumulate in
/// f32, as the reduction would, and round once. nullptr when it does not
/// apply.
Value combineSlices(GraphEmitter &e, Operation *op, Value input, int64_t dim,
                    const Shape &resultShape) {
  llvm::ArrayRef<int64_t> xs = GraphEmitter::shapeOf(input);
  int64_t inner = numElements(xs.drop_front(dim + 1));
  Type t = GraphEmitter::elementOf(input);
  if (!llvm::isa<ReduceSumOp>(op) || xs[dim] < 1 || xs[dim] > kMaxSlicesAdded ||
      inner < 128 || !llvm::isa<FloatType>(t)) {
    return nullptr;
  }
  Type work = t.getIntOrFloatBitWidth() < 32 ? e.builder().getF32Type() : t;
  Shape start(xs.size(), 0), limit(xs.begin(), xs.end()), stride(xs.size(), 1);
  Value combined;
  for (int64_t k = 0; k < xs[dim]; ++k) {
    start[dim] = k;
    limit[dim] = k + 1;
    Value part = e.cast(e.slice(input, start, limit, stride), work);
    combined = combined ? e.add(combined, part) : part;
  }
  return e.reshape(e.cast(combined, t), resultShape);
}

/// Rewrites one reduction whose dims are not the trailing ones; nullptr when
/// it already is.
Value relayout(GraphEmitter &e, Operation *op, Value input,
               llvm::ArrayRef<int64_t> dims, bool keepdim) {
  auto rank = static_cast<int64_t>(GraphEmitter::shapeOf(input).size());
  Shape sorted(dims);
  llvm::sort(sorted);
  auto count = static_cast<int64_t>(sorted.size());
  bool trailing = true, leading = true;
  for (int64_t i = 0; i < count; ++i) {
    trailing &= sorted[i] == rank - count + i;
    leading &= sorted[i] == i;
  }
  if (trailing || count == 0) {
    return nullptr;
  }
  llvm::ArrayRef<int64_t> xs = GraphEmitter::shapeOf(input);
  Shape resultShape(
      llvm::cast<RankedTensorType>(op->getResult(0).getType()).getShape());
  Type t = GraphEmitter::elementOf(input);
  if (leading && llvm::isa<ReduceSumOp>(op)) {
    // Sum of the rows: ones[1, rows] . x[rows, rest] on TensorE.
    Type work = t.isIntOrIndex() ? e.builder().getF32Type() : t;
    int64_t rows = 1, rest = 1;
    for (int64_t d = 0; d < rank; ++d) {
      (d < count ? rows : rest) *= xs[d];
    }
    Value ones = e.splat(1.0, {1, rows}, work);
    Value sum = e.matmul(ones, e.reshape(e.cast(input, work), {rows, rest}));
    return e.cast(e.reshape(sum, resultShape), t);
  }
  if (count == 1) {
    if (Value combined = combineSlices(e, op, input, sorted[0], resultShape)) {
      return combined;
    }
  }
  Shape perm;
  for (int64_t d = 0; d < rank; ++d) {
    if (!llvm::is_contained(sorted, d)) {
      perm.push_back(d);
    }
  }
  perm.append(sorted.begin(), sorted.end());
  Shape inner;
  for (int64_t i = 0; i < count; ++i) {
    inner.push_back(rank - count + i);
  }
  Value moved = e.transpose(input, perm);
  Value reduced;
  if (llvm::isa<ReduceSumOp>(op)) {
    reduced = e.reduceSum(moved, inner, keepdim);
  } else if (llvm::isa<ReduceMaxOp>(op)) {
    reduced = e.reduceMax(moved, inner, keepdim);
  } else {
    reduced = e.reduceMin(moved, inner, keepdim);
  }
  return e.reshape(reduced, resultShape);
}

struct KGraphAssignLayout
    : kiln::graph_passes::impl::KGraphAssignLayoutBase<KGraphAssignLayout> {
  void runOnOperation() override {
    llvm::SmallVector<Operation *> reductions;
    getOperation().walk([&](Operation *op) {
      if (llvm::isa<ReduceSumOp, ReduceMaxOp, ReduceMinOp>(op)) {
        reductions.push_back(op);
      }
    });
    for (Operation *op : reductions) {
      OpBuilder builder(op);
      GraphEmitter e(builder, op->getLoc());
      auto dims = op->getAttrOfType<DenseI64ArrayAttr>("dims").asArrayRef();
      bool keepdim = false;
      if (auto k = op->getAttrOfType<BoolAttr>("keepdim")) {
        keepdim = k.getValue();
      }
      if (Value replacement =
              relayout(e, op, op->getOperand(0), dims, keepdim)) {
        op->getResult(0).replaceAllUsesWith(replacement);
        op->erase();
      }
    }
  }
};

} // namespace
