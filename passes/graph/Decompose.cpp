//===- Decompose.cpp - composite kgraph ops to primitives ----------------===//
//
// Each rewrite is the op's definition written with primitives; see the
// pass description in Passes.td for the list. Rewrites run in program order
// and a rewrite's output may itself need rewriting (linear makes a matmul,
// gather makes an iota), so the pass repeats until nothing changes.
//
//===----------------------------------------------------------------------===//

#include "passes/graph/DecomposeWindows.h"
#include "passes/graph/GraphEmitter.h"
#include "passes/graph/Passes.h"

#include "llvm/ADT/TypeSwitch.h"

#include <numeric>

namespace kiln::graph_passes {
#define GEN_PASS_DEF_KGRAPHDECOMPOSE
#include "passes/graph/Passes.h.inc"
} // namespace kiln::graph_passes

using namespace mlir;
using namespace kiln::kgraph;
using kiln::graph_passes::GraphEmitter;

namespace {

using Values = llvm::SmallVector<Value>;
using Shape = llvm::SmallVector<int64_t>;

int64_t product(llvm::ArrayRef<int64_t> shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t(1),
                         std::multiplies<>());
}

/// The trailing `rank` dims of a tensor of rank `total`.
Shape trailingDims(int64_t total, int64_t rank) {
  Shape dims;
  for (int64_t d = total - rank; d < total; ++d) {
    dims.push_back(d);
  }
  return dims;
}

Values linear(GraphEmitter &e, LinearOp op) {
  Value x = op.getInput(), w = op.getWeight();
  llvm::ArrayRef<int64_t> xs = GraphEmitter::shapeOf(x);
  int64_t in = xs.back(), out = GraphEmitter::shapeOf(w)[0];
  int64_t rows = product(xs.drop_back());
  Value y = e.matmul(e.reshape(x, {rows, in}), w, false, true);
  if (Value bias = op.getBias()) {
    y = e.add(y, e.reshape(bias, {1, out}));
  }
  Shape outShape(xs.drop_back());
  outShape.push_back(out);
  return {e.reshape(y, outShape)};
}

Values softmax(GraphEmitter &e, Value x, int64_t dim, bool logarithm) {
  Value shifted = e.sub(x, e.reduceMax(x, {dim}, true));
  Value exps = e.exp(shifted);
  Value sum = e.reduceSum(exps, {dim}, true);
  if (logarithm) {
    return {e.sub(shifted, e.log(sum))};
  }
  return {e.div(exps, sum)};
}

Values layerNorm(GraphEmitter &e, LayerNormOp op) {
  Value x = op.getInput();
  int64_t rank = GraphEmitter::typeOf(x).getRank();
  Shape dims = trailingDims(rank, op.getNormalizedRank());
  Type t = GraphEmitter::elementOf(x);
  double inverseWidth = 1.0 / product(GraphEmitter::shapeOf(op.getWeight()));
  // Each op is made in a statement of its own: the order of a call's
  // arguments is unspecified, and GCC and clang would emit them apart.
  Value perElement = e.scalar(inverseWidth, t);
  Value sum = e.reduceSum(x, dims, true);
  Value mean = e.mul(sum, perElement);
  Value centered = e.sub(x, mean);
  Value squares = e.reduceSum(e.mul(centered, centered), dims, true);
  Value var = e.mul(squares, perElement);
  Value epsilon = e.scalar(op.getEpsilon().convertToDouble(), t);
  Value rstd = e.rsqrt(e.add(var, epsilon));
  Value y = e.add(e.mul(e.mul(centered, rstd), op.getWeight()), op.getBias());
  return {y, mean, rstd};
}

Values layerNormBackward(GraphEmitter &e, LayerNormBackwardOp op) {
  Value g = op.getGradOutput(), x = op.getInput();
  int64_t rank = GraphEmitter::typeOf(x).getRank();
  int64_t normRank = op.getNormalizedRank();
  Shape normDims = trailingDims(rank, normRank);
  Shape rowDims;
  for (int64_t d = 0; d < rank - normRank; ++d) {
    rowDims.push_back(d);
  }
  Type t = GraphEmitter::elementOf(x);
  double inverseWidth = 1.0 / product(GraphEmitter::shapeOf(op.getWeight()));
  Value xhat = e.mul(e.sub(x, op.getMean()), op.getRstd());
  Value dxhat = e.mul(g, op.getWeight());
  // One op per statement, as in layerNorm.
  Value perElement = e.scalar(inverseWidth, t);
  Value sumD = e.reduceSum(dxhat, normDims, true);
  Value meanD = e.mul(sumD, perElement);
  Value sumDX = e.reduceSum(e.mul(dxhat, xhat), normDims, true);
  Value meanDX = e.mul(sumDX, perElement);
  Value centeredD = e.sub(dxhat, meanD);
  Value alongX = e.mul(xhat, meanDX);
  Value gradInput = e.mul(op.getRstd(), e.sub(centeredD, alongX));
  Value gradWeight = e.mul(g, xhat), gradBias = g;
  if (!rowDims.empty()) {
    gradWeight = e.reduceSum(gradWeight, rowDims, false);
    gradBias = e.reduceSum(g, rowDims, false);
  }
  return {gradInput, gradWeight, gradBias};
}

/// nll_loss on [N, C] log-probabilities (a [C] input is one row).
struct NllParts {
  Value picked; // [N]: -input[i, target[i]], 0 where ignored
  Value valid;  // [N]: 1 where the target counts, else 0
  Value oneHot; // [N, C] in the input's type, zero rows where ignored
};

/// `v` seen through reshapes: the value it views.
Value throughReshapes(Value v) {
  while (auto reshape = v.getDefiningOp<ReshapeOp>()) {
    v = reshape.getInput();
  }
  return v;
}

NllParts nllParts(GraphEmitter &e, Value input, Value target,
                  int64_t ignoreIndex) {
  Type t = GraphEmitter::elementOf(input);
  llvm::ArrayRef<int64_t> is = GraphEmitter::shapeOf(input);
  int64_t classes = is.back(), rows = is.size() == 2 ? is[0] : 1;
  Value valid, checked, ids;
  {
    // Each target picks its class id from the ids [C, 1] by an embedding
    // lookup, whose gather DMA checks every index: a target outside [0, C)
    // stops the step with an error naming it and its row (its partition),
    // as PyTorch and the interpreter refuse it, where its one-hot row alone
    // would be zero and its loss a silent 0. An ignored target, which may
    // lie outside, looks up class 0. The ids are f32, exact below 2^24
    // classes. The lookup reads the targets alone and is emitted where
    // they are defined, so that nothing but the labels holds it up.
    OpBuilder &b = e.builder();
    OpBuilder::InsertionGuard guard(b);
    Value source = throughReshapes(target);
    if (Operation *def = source.getDefiningOp()) {
      b.setInsertionPointAfter(def);
    } else {
      b.setInsertionPointToStart(llvm::cast<BlockArgument>(source).getOwner());
    }
    Value targets = e.reshape(source, {rows});
    Type indexType = GraphEmitter::elementOf(targets);
    Value counted = e.compare("ne", targets, e.scalar(ignoreIndex, indexType));
    valid = e.cast(counted, t);
    Value looked = targets;
    if (ignoreIndex < 0 || ignoreIndex >= classes) {
      looked = e.mul(targets, e.cast(counted, indexType));
    }
    ids = e.iota1d(classes, b.getF32Type());
    checked = EmbeddingOp::create(b, e.location(),
                                  e.reshape(ids, {classes, 1}), looked);
  }
  Value logp = e.reshape(input, {rows, classes});
  Value hot = e.cast(e.compare("eq", checked, e.reshape(ids, {1, classes})), t);
  hot = e.mul(hot, e.reshape(valid, {rows, 1}));
  Value picked = e.reduceSum(e.mul(hot, logp), {1}, false);
  return {e.sub(e.scalar(0.0, t), picked), valid, hot};
}

Values nllLoss(GraphEmitter &e, NllLossOp op) {
  NllParts p = nllParts(e, op.getInput(), op.getTarget(), op.getIgnoreIndex());
  Value total = e.reduceSum(p.valid, {0}, false);
  Value loss = p.picked;
  llvm::StringRef reduction = op.getReduction();
  if (reduction == "none") {
    loss = e.reshape(loss, GraphEmitter::shapeOf(op.getLoss()));
  } else {
    loss = e.reduceSum(loss, {0}, false);
    if (reduction == "mean") {
      loss = e.div(loss, total);
    }
  }
  return {loss, e.reshape(total, GraphEmitter::shapeOf(op.getTotalWeight()))};
}

Values nllLossBackward(GraphEmitter &e, NllLossBackwardOp op) {
  NllParts p = nllParts(e, op.getInput(), op.getTarget(), op.getIgnoreIndex());
  Type t = GraphEmitter::elementOf(op.getInput());
  int64_t rows = GraphEmitter::shapeOf(p.oneHot)[0];
  Value g = op.getGradOutput();
  llvm::StringRef reduction = op.getReduction();
  if (reduction == "none") {
    g = e.reshape(g, {rows, 1});
  } else {
    g = e.reshape(g, {1, 1});
    if (reduction == "mean") {
      g = e.div(g, e.reshape(op.getTotalWeight(), {1, 1}));
    }
  }
  Value grad = e.mul(e.sub(e.scalar(0.0, t), p.oneHot), g);
  return {e.reshape(grad, GraphEmitter::shapeOf(op.getGradInput()))};
}

Values argmax(GraphEmitter &e, ArgmaxOp op) {
  Value x = op.getInput();
  int64_t dim = op.getDim();
  llvm::ArrayRef<int64_t> xs = GraphEmitter::shapeOf(x);
  Type f32 = e.builder().getF32Type();
  Value xf = e.cast(x, GraphEmitter::elementOf(x).isIntOrIndex() ? f32
                                                    : GraphEmitter::elementOf(x));
  Type t = GraphEmitter::elementOf(xf);
  Value isMax = e.compare("eq", xf, e.reduceMax(xf, {dim}, true));
  Shape iotaShape(xs.size(), 1);
  iotaShape[dim] = xs[dim];
  Value index = e.reshape(e.iota1d(xs[dim], t), iotaShape);
  // The first maximum: the smallest index among the maxima.
  Value indices = e.broadcast(index, xs);
  Value past = e.scalar(xs[dim], t);
  Value candidates = e.select(isMax, indices, past);
  Value first = e.reduceMin(candidates, {dim}, op.getKeepdim());
  return {e.cast(first, GraphEmitter::elementOf(op.getOutput()))};
}

/// hot[.., j, c, ..] = (index[.., j, ..] == c) in `work`: the index with a
/// new axis of `classes` after `dim`, compared with an iota along it.
Value oneHotAlong(GraphEmitter &e, Value index, int64_t dim, int64_t classes,
                  Type work) {
  llvm::ArrayRef<int64_t> js = GraphEmitter::shapeOf(index);
  Shape hotShape(js);
  hotShape.insert(hotShape.begin() + dim + 1, classes);
  Shape idxShape(js);
  idxShape.insert(idxShape.begin() + dim + 1, 1);
  Shape iotaShape(hotShape.size(), 1);
  iotaShape[dim + 1] = classes;
  Type indexType = GraphEmitter::elementOf(index);
  Value column = e.broadcast(e.reshape(index, idxShape), hotShape);
  Value iota = e.broadcast(
      e.reshape(e.iota1d(classes, indexType), iotaShape), hotShape);
  return e.cast(e.compare("eq", column, iota), work);
}

/// input[..., C, ...] contracted with a one-hot [.., J, C, ..] along `dim`:
/// out[..., j, ...] = sum_c hot[.., j, c, ..] * input[.., c, ..].
Values gather(GraphEmitter &e, GatherOp op) {
  Value input = op.getInput(), index = op.getIndex();
  int64_t dim = op.getDim();
  llvm::ArrayRef<int64_t> is = GraphEmitter::shapeOf(input),
                          js = GraphEmitter::shapeOf(index);
  Type t = GraphEmitter::elementOf(input);
  Type work = t.isIntOrIndex() ? e.builder().getF32Type() : t;
  // Trim the input to the index's extent in every other dimension.
  Shape start(is.size(), 0), limit(js), stride(is.size(), 1);
  limit[dim] = is[dim];
  input = e.slice(input, start, limit, stride);
  Value hot = oneHotAlong(e, index, dim, is[dim], work);
  Shape inShape(limit);
  inShape.insert(inShape.begin() + dim, 1);
  Value values = e.reshape(e.cast(input, work), inShape);
  Value out = e.reduceSum(e.mul(hot, values), {dim + 1}, false);
  return {e.cast(out, t)};
}

Values scatterAdd(GraphEmitter &e, ScatterAddOp op) {
  Value input = op.getInput(), index = op.getIndex(), source = op.getSource();
  int64_t dim = op.getDim();
  llvm::ArrayRef<int64_t> is = GraphEmitter::shapeOf(input),
                          js = GraphEmitter::shapeOf(index);
  Type t = GraphEmitter::elementOf(input);
  Type work = t.isIntOrIndex() ? e.builder().getF32Type() : t;
  int64_t classes = is[dim];
  // The contraction runs over j instead of c.
  Value hot = oneHotAlong(e, index, dim, classes, work);
  Shape idxShape(js);
  idxShape.insert(idxShape.begin() + dim + 1, 1);
  // Only the index's extent of source takes part, as in PyTorch.
  Shape start(js.size(), 0), stride(js.size(), 1);
  Value src = e.slice(source, start, js, stride);
  Value contribution = e.reduceSum(
      e.mul(hot, e.reshape(e.cast(src, work), idxShape)), {dim}, false);
  // contribution covers js with dim replaced by classes; pad to the input.
  Shape covered(js);
  covered[dim] = classes;
  for (size_t d = 0; d < is.size(); ++d) {
    if (covered[d] == is[d]) {
      continue;
    }
    Shape padShape(covered);
    padShape[d] = is[d] - covered[d];
    Value zeros = e.splat(0.0, padShape, work);
    contribution = ConcatOp::create(e.builder(), e.location(),
                                    ValueRange{contribution, zeros},
                                    e.builder().getI64IntegerAttr(d));
    covered[d] = is[d];
  }
  return {e.cast(e.add(e.cast(input, work), contribution), t)};
}

/// One-hot [J, C] times the input with `dim` moved to the front, [C, R].
Values indexSelect(GraphEmitter &e, IndexSelectOp op) {
  Value input = op.getInput();
  int64_t dim = op.getDim();
  llvm::ArrayRef<int64_t> is = GraphEmitter::shapeOf(input);
  Type t = GraphEmitter::elementOf(input);
  Type work = t.isIntOrIndex() ? e.builder().getF32Type() : t;
  Shape perm{dim};
  Shape moved{is[dim]};
  for (int64_t d = 0; d < static_cast<int64_t>(is.size()); ++d) {
    if (d != dim) {
      perm.push_back(d);
      moved.push_back(is[d]);
    }
  }
  Value front = e.cast(input, work);
  if (dim != 0) {
    front = e.transpose(front, perm);
  }
  int64_t rest = product(llvm::ArrayRef<int64_t>(moved).drop_front());
  Value index = e.reshape(op.getIndex(), {product(
                                  GraphEmitter::shapeOf(op.getIndex()))});
  int64_t picked = GraphEmitter::shapeOf(index)[0];
  Value hot = e.oneHot(index, is[dim], work);
  Value rows = e.matmul(hot, e.reshape(front, {is[dim], rest}));
  Shape outMoved(moved);
  outMoved[0] = picked;
  Value out = e.reshape(rows, outMoved);
  if (dim != 0) {
    Shape inverse(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) {
      inverse[perm[i]] = i;
    }
    out = e.transpose(out, inverse);
  }
  return {e.cast(out, t)};
}

Values embeddingBackward(GraphEmitter &e, EmbeddingBackwardOp op) {
  Value g = op.getGradOutput();
  llvm::ArrayRef<int64_t> gs = GraphEmitter::shapeOf(g);
  int64_t n = product(gs.drop_back()), d = gs.back();
  Type t = GraphEmitter::elementOf(g);
  Value flat = e.reshape(op.getIndices(), {n});
  Value hot = e.oneHot(flat, op.getNumWeights(), t);
  // Tokens of the padding row contribute nothing. (The attribute's getter
  // is unsigned; -1, no padding row, is negative.)
  Value rows = e.zeroPaddingRows(e.reshape(g, {n, d}), flat,
                                 op.getPaddingIdxAttr().getInt());
  return {e.matmul(hot, rows, /*transposeA=*/true)};
}

Values pow(GraphEmitter &e, PowOp op) {
  Value x = op.getLhs(), y = op.getRhs();
  Shape outShape(GraphEmitter::shapeOf(op.getOutput()));
  if (auto c = y.getDefiningOp<ConstantOp>()) {
    auto dense = llvm::dyn_cast<DenseElementsAttr>(c.getValue());
    if (dense && dense.isSplat()) {
      double exponent = dense.getSplatValue<APFloat>().convertToDouble();
      if (exponent == 2.0) {
        return {e.broadcast(e.mul(x, x), outShape)};
      }
      if (exponent == 1.0) {
        return {e.broadcast(x, outShape)};
      }
      if (exponent == 0.5) {
        return {e.broadcast(SqrtOp::create(e.builder(), e.location(), x),
                            outShape)};
      }
    }
  }
  return {e.exp(e.mul(y, e.log(x)))};
}

Values reduceMean(GraphEmitter &e, ReduceMeanOp op) {
  llvm::ArrayRef<int64_t> xs = GraphEmitter::shapeOf(op.getInput());
  double count = 1;
  for (int64_t d : op.getDims()) {
    count *= xs[d];
  }
  Value sum = e.reduceSum(op.getInput(), op.getDims(), op.getKeepdim());
  return {e.mul(sum, e.scalar(1.0 / count, GraphEmitter::elementOf(sum)))};
}

/// A multi-dimensional iota: the 1-D iota along `dim`, broadcast.
Values iota(GraphEmitter &e, IotaOp op) {
  llvm::ArrayRef<int64_t> shape = GraphEmitter::shapeOf(op.getOutput());
  int64_t dim = op.getDim();
  Shape along(shape.size(), 1);
  along[dim] = shape[dim];
  Value line = e.iota1d(shape[dim], GraphEmitter::elementOf(op.getOutput()));
  return {e.broadcast(e.reshape(line, along), shape)};
}

/// The rewrite of a composite op, or nullopt for a primitive.
std::optional<Values> decompose(GraphEmitter &e, Operation *op) {
  using R = std::optional<Values>;
  auto t = [](Value v) { return GraphEmitter::elementOf(v); };
  return llvm::TypeSwitch<Operation *, R>(op)
      .Case([&](LinearOp o) { return R(linear(e, o)); })
      .Case([&](SoftmaxOp o) {
        return R(softmax(e, o.getInput(), o.getDim(), false));
      })
      .Case([&](LogSoftmaxOp o) {
        return R(softmax(e, o.getInput(), o.getDim(), true));
      })
      .Case([&](SoftmaxBackwardOp o) {
        Value g = o.getGradOutput(), y = o.getOutput();
        Value dot = e.reduceSum(e.mul(g, y), {static_cast<int64_t>(o.getDim())}, true);
        return R(Values{e.mul(y, e.sub(g, dot))});
      })
      .Case([&](LogSoftmaxBackwardOp o) {
        Value g = o.getGradOutput(), y = o.getOutput();
        Value sum = e.reduceSum(g, {static_cast<int64_t>(o.getDim())}, true);
        return R(Values{e.sub(g, e.mul(e.exp(y), sum))});
      })
      .Case([&](LayerNormOp o) { return R(layerNorm(e, o)); })
      .Case([&](LayerNormBackwardOp o) { return R(layerNormBackward(e, o)); })
      .Case([&](TanhBackwardOp o) {
        Value y = o.getSaved();
        Value one = e.scalar(1.0, t(y));
        return R(Values{e.mul(o.getGradOutput(), e.sub(one, e.mul(y, y)))});
      })
      .Case([&](SigmoidBackwardOp o) {
        Value y = o.getSaved();
        Value one = e.scalar(1.0, t(y));
        Value scaled = e.mul(o.getGradOutput(), y);
        return R(Values{e.mul(scaled, e.sub(one, y))});
      })
      .Case([&](ReluBackwardOp o) {
        Value x = o.getSaved();
        Value above = e.compare(
            "gt", x, e.scalar(o.getThreshold().convertToDouble(), t(x)));
        return R(Values{e.mul(o.getGradOutput(), e.cast(above, t(x)))});
      })
      .Case([&](NllLossOp o) { return R(nllLoss(e, o)); })
      .Case([&](NllLossBackwardOp o) { return R(nllLossBackward(e, o)); })
      .Case([&](ArgmaxOp o) { return R(argmax(e, o)); })
      .Case([&](GatherOp o) { return R(gather(e, o)); })
      .Case([&](ScatterAddOp o) { return R(scatterAdd(e, o)); })
      .Case([&](IndexSelectOp o) { return R(indexSelect(e, o)); })
      .Case([&](EmbeddingBackwardOp o) { return R(embeddingBackward(e, o)); })
      .Case([&](PowOp o) { return R(pow(e, o)); })
      .Case([&](ReduceMeanOp o) { return R(reduceMean(e, o)); })
      .Case([&](IotaOp o) -> R {
        if (GraphEmitter::typeOf(o.getOutput()).getRank() == 1) {
          return std::nullopt;
        }
        return R(iota(e, o));
      })
      .Default([&](Operation *other) {
        return kiln::graph_passes::decomposeWindowOp(e, other);
      });
}

struct KGraphDecompose
    : kiln::graph_passes::impl::KGraphDecomposeBase<KGraphDecompose> {
  void runOnOperation() override {
    bool changed = true;
    while (changed) {
      changed = false;
      llvm::SmallVector<Operation *> ops;
      getOperation().walk([&](Operation *op) { ops.push_back(op); });
      for (Operation *op : ops) {
        OpBuilder builder(op);
        GraphEmitter e(builder, op->getLoc());
        std::optional<Values> replacement = decompose(e, op);
        if (!replacement) {
          continue;
        }
        for (auto [from, to] : llvm::zip(op->getResults(), *replacement)) {
          if (from.getType() != to.getType()) {
            op->emitOpError("decomposition changed a result type from ")
                << from.getType() << " to " << to.getType();
            return signalPassFailure();
          }
          from.replaceAllUsesWith(to);
        }
        op->erase();
        changed = true;
      }
    }
  }
};

} // namespace
