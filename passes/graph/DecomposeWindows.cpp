//===- DecomposeWindows.cpp - batch norm, pooling and bias to primitives -===//
//
// Batch norm is its definition over the [N, S...] values of each channel.
// A pooling window is a set of taps, each a strided slice of the padded
// input (a view the tile phase does not copy); the forward folds the taps
// with max or add, and the backward places each tap's share of the
// gradient back where the tap read (the slice's transpose: zeros between
// the strided positions) and sums. Max pooling's backward gives each
// window's gradient to its first maximum, as PyTorch does.
//
//===----------------------------------------------------------------------===//

#include "passes/graph/DecomposeWindows.h"

#include "dialects/kgraph/KGraphWindow.h"

#include "llvm/ADT/TypeSwitch.h"

#include <map>

using namespace mlir;
using namespace kiln::kgraph;

namespace kiln::graph_passes {

namespace {

using Values = llvm::SmallVector<Value>;

Shape channelShape(Value x) {
  Shape shape(GraphEmitter::shapeOf(x).size(), 1);
  shape[1] = GraphEmitter::shapeOf(x)[1];
  return shape;
}

Shape allButChannels(Value x) {
  Shape dims = {0};
  for (int64_t d = 2; d < GraphEmitter::typeOf(x).getRank(); ++d) {
    dims.push_back(d);
  }
  return dims;
}

/// The number of values each channel normalises over.
double perChannelCount(Value x) {
  auto type = GraphEmitter::typeOf(x);
  return static_cast<double>(type.getNumElements() / type.getDimSize(1));
}

/// Sets `b` to insert right after the last definition of `values` (at the
/// block's start when they are all arguments).
void insertAfterDefinitions(OpBuilder &b, ValueRange values) {
  Operation *last = nullptr;
  for (Value v : values) {
    Operation *def = v.getDefiningOp();
    if (def && (!last || last->isBeforeInBlock(def))) {
      last = def;
    }
  }
  if (last) {
    b.setInsertionPointAfter(last);
  } else {
    b.setInsertionPointToStart(b.getInsertionBlock());
  }
}

Values batchNorm(GraphEmitter &e, BatchNormOp op) {
  Value x = op.getInput();
  Type t = GraphEmitter::elementOf(x);
  Shape dims = allButChannels(x), perChannel = channelShape(x);
  int64_t channels = perChannel[1];
  double count = perChannelCount(x);
  auto spread = [&](Value v) { return e.reshape(v, perChannel); };
  auto flat = [&](Value v) { return e.reshape(v, {channels}); };
  double eps = op.getEpsilon().convertToDouble();
  Value mean, var, rstd, y;
  if (op.getTraining()) {
    mean = e.mul(e.reduceSum(x, dims, true), e.scalar(1.0 / count, t));
    Value centred = e.sub(x, mean);
    var = e.mul(e.reduceSum(e.mul(centred, centred), dims, true),
                e.scalar(1.0 / count, t));
    rstd = e.rsqrt(e.add(var, e.scalar(eps, t)));
    y = e.add(e.mul(e.mul(e.sub(x, mean), rstd), spread(op.getWeight())),
              spread(op.getBias()));
  } else {
    // The per-channel values are computed where their inputs are (usually
    // the step's start), so that a convolution computing x finds them
    // ready and can normalise each block as it leaves PSUM.
    Value weight, bias;
    {
      OpBuilder::InsertionGuard guard(e.builder());
      insertAfterDefinitions(e.builder(),
                             {op.getRunningMean(), op.getRunningVar(),
                              op.getWeight(), op.getBias()});
      mean = spread(op.getRunningMean());
      var = spread(op.getRunningVar());
      rstd = e.rsqrt(e.add(var, e.scalar(eps, t)));
      weight = spread(op.getWeight());
      bias = spread(op.getBias());
    }
    y = e.add(e.mul(e.mul(e.sub(x, mean), rstd), weight), bias);
  }
  Value nextMean = op.getRunningMean(), nextVar = op.getRunningVar();
  if (op.getTraining()) {
    double m = op.getMomentum().convertToDouble();
    nextMean = e.add(e.mul(nextMean, e.scalar(1.0 - m, t)),
                     e.mul(flat(mean), e.scalar(m, t)));
    nextVar = e.add(e.mul(nextVar, e.scalar(1.0 - m, t)),
                    e.mul(flat(var), e.scalar(m * count / (count - 1.0), t)));
  }
  return {y, flat(mean), flat(rstd), nextMean, nextVar};
}

Values batchNormBackward(GraphEmitter &e, BatchNormBackwardOp op) {
  Value g = op.getGradOutput(), x = op.getInput();
  Type t = GraphEmitter::elementOf(x);
  Shape dims = allButChannels(x), perChannel = channelShape(x);
  auto spread = [&](Value v) { return e.reshape(v, perChannel); };
  Value rstd = spread(op.getRstd());
  Value xhat = e.mul(e.sub(x, spread(op.getMean())), rstd);
  Value sumG = e.reduceSum(g, dims, true);
  Value sumGX = e.reduceSum(e.mul(g, xhat), dims, true);
  Value gi = g;
  if (op.getTraining()) {
    gi = e.sub(g, e.mul(e.add(sumG, e.mul(xhat, sumGX)),
                        e.scalar(1.0 / perChannelCount(x), t)));
  }
  Value gx = e.mul(gi, e.mul(spread(op.getWeight()), rstd));
  return {gx, e.reshape(sumGX, {perChannel[1]}),
          e.reshape(sumG, {perChannel[1]})};
}

/// Where a window's taps read in the padded input: padding `lo` before
/// each spatial dim, and the padded size the last window needs.
struct Padded {
  Shape lo, hi, size;
};

Padded paddingOf(const Window &w, llvm::ArrayRef<int64_t> input) {
  Padded p;
  for (size_t d = 0; d < w.spatialRank(); ++d) {
    int64_t in = input[2 + d], out = w.outputSize(d, in);
    int64_t needed = (out - 1) * w.stride[d] + (w.kernel[d] - 1) * w.dilation[d] + 1;
    p.lo.push_back(w.padding[d]);
    p.hi.push_back(std::max<int64_t>(0, needed - in - w.padding[d]));
    p.size.push_back(in + p.lo[d] + p.hi.back());
  }
  return p;
}

/// `x` with `before` and `after` elements of `fill` around it along `dim`.
Value surround(GraphEmitter &e, Value x, int64_t dim, int64_t before,
               int64_t after, double fill) {
  Type t = GraphEmitter::elementOf(x);
  llvm::SmallVector<Value, 3> parts;
  Shape shape(GraphEmitter::shapeOf(x));
  if (before > 0) {
    shape[dim] = before;
    parts.push_back(e.splat(fill, shape, t));
  }
  parts.push_back(x);
  if (after > 0) {
    shape[dim] = after;
    parts.push_back(e.splat(fill, shape, t));
  }
  return e.concat(parts, dim);
}

Value pad(GraphEmitter &e, Value x, const Padded &p, double fill) {
  for (size_t d = 0; d < p.lo.size(); ++d) {
    x = surround(e, x, 2 + d, p.lo[d], p.hi[d], fill);
  }
  return x;
}

/// Every tap of the window as an index per spatial dim, row-major.
llvm::SmallVector<Shape> tapsOf(const Window &w) {
  llvm::SmallVector<Shape> taps = {{}};
  for (int64_t k : w.kernel) {
    llvm::SmallVector<Shape> next;
    for (const Shape &tap : taps) {
      for (int64_t r = 0; r < k; ++r) {
        next.push_back(tap);
        next.back().push_back(r);
      }
    }
    taps = std::move(next);
  }
  return taps;
}

/// What tap `tap` reads of the padded input `xp` for every output position.
Value tapSlice(GraphEmitter &e, Value xp, const Window &w, const Shape &tap,
               llvm::ArrayRef<int64_t> out) {
  Shape shape(GraphEmitter::shapeOf(xp));
  Shape start(shape.size(), 0), limit(shape), stride(shape.size(), 1);
  for (size_t d = 0; d < tap.size(); ++d) {
    start[2 + d] = tap[d] * w.dilation[d];
    stride[2 + d] = w.stride[d];
    limit[2 + d] = start[2 + d] + (out[2 + d] - 1) * w.stride[d] + 1;
  }
  return e.slice(xp, start, limit, stride);
}

/// Padded positions congruent to `phase` modulo the window's stride along
/// spatial dim `d`: how many there are.
int64_t phaseSize(const Window &w, const Padded &p, size_t d, int64_t phase) {
  return (p.size[d] - phase + w.stride[d] - 1) / w.stride[d];
}

/// Grids of one value per padded position of a phase (its offset modulo
/// the stride, per spatial dim), merged dim by dim from the last: the
/// phases of dim d interleave (stacked along a new dim, then merged), and
/// the keys lose their last entry, so that each grid then covers every
/// padded position of dims d and on. A phase no tap reads is zeros.
Value interleavePhases(GraphEmitter &e, std::map<Shape, Value> grids,
                       const Window &w, const Padded &p, Type t) {
  for (size_t d = p.size.size(); d-- > 0;) {
    int64_t dim = 2 + static_cast<int64_t>(d), s = w.stride[d];
    std::map<Shape, Value> merged;
    for (const auto &[phase, grid] : grids) {
      Shape prefix(phase.begin(), phase.begin() + d);
      if (merged.count(prefix)) {
        continue;
      }
      Shape full(GraphEmitter::shapeOf(grid));
      int64_t rows = phaseSize(w, p, d, 0);
      llvm::SmallVector<Value> stacked;
      for (int64_t f = 0; f < s; ++f) {
        Shape key(prefix);
        key.push_back(f);
        full[dim] = phaseSize(w, p, d, f);
        auto found = grids.find(key);
        Value v = found != grids.end() ? found->second
                                       : e.splat(0.0, full, t);
        // Every phase's grid as long as phase 0's (at most one more).
        v = surround(e, v, dim, 0, rows - full[dim], 0.0);
        Shape unit(GraphEmitter::shapeOf(v));
        unit.insert(unit.begin() + dim + 1, 1);
        stacked.push_back(s > 1 ? e.reshape(v, unit) : v);
      }
      Value v = stacked.front();
      if (s > 1) {
        full[dim] = rows * s;
        v = e.reshape(e.concat(stacked, dim + 1), full);
        if (rows * s > p.size[d]) {
          Shape start(full.size(), 0), limit(full), step(full.size(), 1);
          limit[dim] = p.size[d];
          v = e.slice(v, start, limit, step);
        }
      }
      merged[prefix] = v;
    }
    grids = std::move(merged);
  }
  return grids.begin()->second;
}

/// The transpose of the taps' slices: each tap's `share` (one value per
/// output position) placed where the tap read in the padded input of size
/// `p.size`, zeros elsewhere, summed over the taps. A tap of offset
/// `stride * a + phase` along a dim writes every stride-th position from
/// `phase` on, shifted by `a` output positions: the taps of one phase are
/// summed on that phase's grid, each padded by its shift only, and the
/// phases interleave once at the end. (Placing each tap on the whole padded
/// grid would write `stride^2` times as much per tap, then add it.)
Value placeTaps(GraphEmitter &e,
                llvm::ArrayRef<std::pair<Shape, Value>> shares,
                const Window &w, const Padded &p) {
  Type t = GraphEmitter::elementOf(shares.front().second);
  std::map<Shape, Value> grids;
  for (const auto &[tap, share] : shares) {
    Shape phase;
    Value v = share;
    for (size_t d = 0; d < tap.size(); ++d) {
      int64_t offset = tap[d] * w.dilation[d], s = w.stride[d];
      int64_t dim = 2 + static_cast<int64_t>(d);
      int64_t out = GraphEmitter::shapeOf(v)[dim];
      phase.push_back(offset % s);
      int64_t shift = offset / s;
      v = surround(e, v, dim, shift,
                   phaseSize(w, p, d, offset % s) - shift - out, 0.0);
    }
    Value &sum = grids[phase];
    sum = sum ? e.add(sum, v) : v;
  }
  return interleavePhases(e, std::move(grids), w, p, t);
}

/// The padded input's part inside the input.
Value crop(GraphEmitter &e, Value padded, const Padded &p,
           llvm::ArrayRef<int64_t> input) {
  Shape start(input.size(), 0), limit(input), stride(input.size(), 1);
  for (size_t d = 0; d < p.lo.size(); ++d) {
    start[2 + d] = p.lo[d];
    limit[2 + d] = p.lo[d] + input[2 + d];
  }
  return e.slice(padded, start, limit, stride);
}

double lowest(Type t) {
  return APFloat::getLargest(llvm::cast<FloatType>(t).getFloatSemantics(),
                             /*Negative=*/true)
      .convertToDouble();
}

/// The window's maximum at every output position, from the taps' slices.
Value foldMax(GraphEmitter &e, llvm::ArrayRef<Value> slices) {
  Value y = slices.front();
  for (Value s : slices.drop_front()) {
    y = e.max(y, s);
  }
  return y;
}

Values maxPool(GraphEmitter &e, MaxPoolOp op) {
  Window w = windowOf(op);
  Value x = op.getInput();
  Padded p = paddingOf(w, GraphEmitter::shapeOf(x));
  Value xp = pad(e, x, p, lowest(GraphEmitter::elementOf(x)));
  Values slices;
  for (const Shape &tap : tapsOf(w)) {
    slices.push_back(
        tapSlice(e, xp, w, tap, GraphEmitter::shapeOf(op.getOutput())));
  }
  return {foldMax(e, slices)};
}

Values maxPoolBackward(GraphEmitter &e, MaxPoolBackwardOp op) {
  Window w = windowOf(op);
  Value x = op.getInput(), g = op.getGradOutput();
  Type t = GraphEmitter::elementOf(x);
  Padded p = paddingOf(w, GraphEmitter::shapeOf(x));
  Value xp = pad(e, x, p, lowest(t));
  llvm::SmallVector<Shape> taps = tapsOf(w);
  Values slices;
  for (const Shape &tap : taps) {
    slices.push_back(tapSlice(e, xp, w, tap, GraphEmitter::shapeOf(g)));
  }
  Value y = foldMax(e, slices);
  Value taken;
  llvm::SmallVector<std::pair<Shape, Value>> shares;
  for (auto [tap, slice] : llvm::zip(taps, slices)) {
    Value hit = e.compare("eq", slice, y);
    Value first = hit;
    if (taken) {
      first = e.logicalAnd(hit, e.logicalNot(taken));
      taken = e.logicalOr(taken, hit);
    } else {
      taken = hit;
    }
    shares.push_back({tap, e.mul(g, e.cast(first, t))});
  }
  return {crop(e, placeTaps(e, shares, w, p), p, GraphEmitter::shapeOf(x))};
}

/// What avg_pool divides each output position's sum by, shaped to
/// broadcast against the output ([1, 1, O...]).
template <typename PoolOp>
Value divisors(GraphEmitter &e, PoolOp op, llvm::ArrayRef<int64_t> input,
               llvm::ArrayRef<int64_t> output, Type t) {
  Window w = windowOf(op);
  Shape shape(output.size(), 1), spatial(input.drop_front(2));
  llvm::SmallVector<double> values;
  Shape at(w.spatialRank(), 0);
  int64_t positions = 1;
  for (size_t d = 0; d < w.spatialRank(); ++d) {
    shape[2 + d] = output[2 + d];
    positions *= output[2 + d];
  }
  for (int64_t i = 0; i < positions; ++i) {
    int64_t rest = i;
    for (int64_t d = w.spatialRank() - 1; d >= 0; --d) {
      at[d] = rest % output[2 + d];
      rest /= output[2 + d];
    }
    values.push_back(static_cast<double>(avgPoolDivisor(
        w, spatial, at, op.getCountIncludePad(), op.getDivisor())));
  }
  if (llvm::all_equal(values)) {
    return e.scalar(values.front(), t);
  }
  auto type = RankedTensorType::get(shape, t);
  llvm::SmallVector<APFloat> elements;
  for (double v : values) {
    APFloat f(v);
    bool lost;
    f.convert(llvm::cast<FloatType>(t).getFloatSemantics(),
              APFloat::rmNearestTiesToEven, &lost);
    elements.push_back(f);
  }
  return ConstantOp::create(e.builder(), e.location(),
                            DenseElementsAttr::get(type, elements));
}

Values avgPool(GraphEmitter &e, AvgPoolOp op) {
  Window w = windowOf(op);
  Value x = op.getInput();
  llvm::ArrayRef<int64_t> out = GraphEmitter::shapeOf(op.getOutput());
  Padded p = paddingOf(w, GraphEmitter::shapeOf(x));
  Value xp = pad(e, x, p, 0.0);
  Value sum;
  for (const Shape &tap : tapsOf(w)) {
    Value s = tapSlice(e, xp, w, tap, out);
    sum = sum ? e.add(sum, s) : s;
  }
  return {e.div(sum, divisors(e, op, GraphEmitter::shapeOf(x), out,
                              GraphEmitter::elementOf(x)))};
}

Values avgPoolBackward(GraphEmitter &e, AvgPoolBackwardOp op) {
  Window w = windowOf(op);
  Value g = op.getGradOutput();
  llvm::ArrayRef<int64_t> input = GraphEmitter::shapeOf(op.getGradInput());
  Padded p = paddingOf(w, input);
  Value share = e.div(g, divisors(e, op, input, GraphEmitter::shapeOf(g),
                                  GraphEmitter::elementOf(g)));
  llvm::SmallVector<std::pair<Shape, Value>> shares;
  for (const Shape &tap : tapsOf(w)) {
    shares.push_back({tap, share});
  }
  return {crop(e, placeTaps(e, shares, w, p), p, input)};
}

std::optional<Values> convBias(GraphEmitter &e, ConvOp op) {
  Value bias = op.getBias();
  if (!bias) {
    return std::nullopt;
  }
  Value y = ConvOp::create(e.builder(), e.location(), op.getInput(),
                           op.getWeight(), Value(), op.getStrideAttr(),
                           op.getPaddingAttr(), op.getDilationAttr(),
                           op.getGroupsAttr());
  return Values{e.add(y, e.reshape(bias, channelShape(y)))};
}

} // namespace

std::optional<Values> decomposeWindowOp(GraphEmitter &e, Operation *op) {
  using R = std::optional<Values>;
  return llvm::TypeSwitch<Operation *, R>(op)
      .Case([&](ConvOp o) { return convBias(e, o); })
      .Case([&](BatchNormOp o) { return R(batchNorm(e, o)); })
      .Case([&](BatchNormBackwardOp o) { return R(batchNormBackward(e, o)); })
      .Case([&](MaxPoolOp o) { return R(maxPool(e, o)); })
      .Case([&](MaxPoolBackwardOp o) { return R(maxPoolBackward(e, o)); })
      .Case([&](AvgPoolOp o) { return R(avgPool(e, o)); })
      .Case([&](AvgPoolBackwardOp o) { return R(avgPoolBackward(e, o)); })
      .Default([](Operation *) { return std::nullopt; });
}

} // namespace kiln::graph_passes
