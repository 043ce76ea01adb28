//===- ElementwiseLayout.cpp - a loop nest's iteration space on tiles -----===//
//
// Where a loop nest's elements go. Every view the loop nest reads or writes
// (and a few that only steer: the random numbers' index, the reductions and
// column sums it may fold on the way) is seen over the group's shape; the
// dimensions are collapsed wherever every view allows; then the layout puts
// the second-innermost on the partitions and the innermost on the free axis,
// or, where rows are short, two dimensions on the free axis, in chunks as
// wide as SBUF holds.
//
//===----------------------------------------------------------------------===//

#include "passes/tile/ElementwiseLoop.h"

using namespace mlir;
using namespace kiln::kgraph;

namespace kiln::tile_passes {

LoopSpace collapse(llvm::ArrayRef<int64_t> shape,
                   llvm::ArrayRef<Shape> viewStrides, bool splitInnermost) {
  LoopSpace space;
  space.strides.resize(viewStrides.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) {
      continue;
    }
    bool merge = !space.sizes.empty();
    for (size_t v = 0; merge && v < viewStrides.size(); ++v) {
      merge = space.strides[v].back() == viewStrides[v][d] * shape[d];
    }
    if (merge) {
      space.sizes.back() *= shape[d];
      for (size_t v = 0; v < viewStrides.size(); ++v) {
        space.strides[v].back() = viewStrides[v][d];
      }
      continue;
    }
    space.sizes.push_back(shape[d]);
    for (size_t v = 0; v < viewStrides.size(); ++v) {
      space.strides[v].push_back(viewStrides[v][d]);
    }
  }
  if (space.sizes.empty()) {
    space.sizes.push_back(1);
    for (auto &s : space.strides) {
      s.push_back(1);
    }
  }
  // Fewer rows than partitions in front of an innermost dimension merged
  // from several (a [B, S, S] value beside a broadcast [S, S] mask, whose
  // S x S elements every view steps through alike): split it again at the
  // shape's last dimension, so that S rows can go on the partitions rather
  // than B (where the caller asks: a causal mask's selects).
  int64_t last = 1;
  for (int64_t size : shape) {
    last = size == 1 ? last : size;
  }
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < space.sizes.size(); ++d) {
    rows *= space.sizes[d];
  }
  if (splitInnermost && space.sizes.size() > 1 && rows < 128 &&
      space.sizes.back() > last &&
      space.sizes.back() % last == 0) {
    int64_t n = space.sizes.back();
    space.sizes.back() = n / last;
    space.sizes.push_back(last);
    for (auto &s : space.strides) {
      int64_t stride = s.back();
      s.back() = stride * last;
      s.push_back(stride);
    }
  }
  // One dimension: fold part of it onto the partitions.
  if (space.sizes.size() == 1) {
    int64_t n = space.sizes[0], rows = 1;
    for (int64_t p = std::min<int64_t>(128, n); p > 1; --p) {
      if (n % p == 0) {
        rows = p;
        break;
      }
    }
    space.sizes = {rows, n / rows};
    for (auto &s : space.strides) {
      int64_t stride = s[0];
      s = {stride * (n / rows), stride};
    }
  }
  return space;
}

int64_t peakBytesPerColumn(llvm::ArrayRef<Operation *> ops,
                           llvm::ArrayRef<Value> inputs,
                           llvm::ArrayRef<bool> inputIsScalar,
                           llvm::ArrayRef<LoopOutput> outputs,
                           llvm::ArrayRef<int64_t> chainShape) {
  // A row chain's row values hold one element per row, not per column.
  auto bytesOf = [&](Value v) -> int64_t {
    auto type = llvm::cast<RankedTensorType>(v.getType());
    if (!chainShape.empty() && type.getShape() != chainShape) {
      return 0;
    }
    return isa::dtypeBytes(deviceType(type.getElementType()));
  };
  int64_t end = static_cast<int64_t>(ops.size());
  llvm::DenseMap<Value, int64_t> lastUse;
  for (auto [i, op] : llvm::enumerate(ops)) {
    for (Value v : op->getOperands()) {
      lastUse[v] = static_cast<int64_t>(i);
    }
  }
  for (const LoopOutput &out : outputs) {
    lastUse[out.value] = end;
  }
  // Live bytes change by +bytes where a value appears, -bytes after its
  // last use; inputs appear before the first op.
  std::vector<int64_t> delta(ops.size() + 3, 0);
  auto live = [&](Value v, int64_t from) {
    auto it = lastUse.find(v);
    int64_t to = it == lastUse.end() ? from : std::max(from, it->second);
    delta[from + 1] += bytesOf(v);
    delta[to + 2] -= bytesOf(v);
  };
  for (auto [v, scalar] : llvm::zip(inputs, inputIsScalar)) {
    if (!scalar) {
      live(v, -1);
    }
  }
  for (auto [i, op] : llvm::enumerate(ops)) {
    for (Value r : op->getResults()) {
      live(r, static_cast<int64_t>(i));
    }
  }
  int64_t peak = 4, running = 0;
  for (size_t i = 0; i < ops.size() + 2; ++i) {
    running += delta[i];
    int64_t scratch = 0;
    if (i >= 1 && i <= ops.size()) {
      scratch = 4 * (llvm::isa<SelectOp, DropoutOp>(ops[i - 1]) ? 3 : 1);
    }
    peak = std::max(peak, running + scratch);
  }
  return peak;
}

namespace {

/// Adds the views that only steer the collapse (see LoopViews).
void addSteeringViews(LoopViews &lv, llvm::ArrayRef<Operation *> ops,
                      llvm::ArrayRef<int64_t> shape,
                      llvm::ArrayRef<LoopReduction> reductions,
                      size_t columnSums, const RowChain *chain) {
  // Random numbers follow the row-major index of the group's shape, which
  // joins the collapse like one more view.
  lv.needsIndex =
      lv.needsIndex ||
      llvm::any_of(ops, [](Operation *op) { return llvm::isa<DropoutOp>(op); });
  lv.indexView = lv.strides.size();
  if (lv.needsIndex) {
    lv.strides.push_back(rowMajorStrides(shape));
    lv.offsets.push_back(0);
  }
  // A reduction's result seen over the group's shape: its strides, 0 along
  // the reduced dimensions. After the collapse it is fused when exactly the
  // innermost dimension has stride 0, so that each row's reduction is a
  // fold along the free axis.
  lv.reductionView = lv.strides.size();
  for (const LoopReduction &r : reductions) {
    Shape seen = rowMajorStrides(shape.take_front(r.from));
    seen.resize(shape.size(), 0);
    if (r.keptDim >= 0) { // one result per index of the kept dimension
      seen.assign(shape.size(), 0);
      seen[r.keptDim] = 1;
    }
    lv.strides.push_back(seen);
    lv.offsets.push_back(r.dst.offset);
  }
  // A row chain's row values, seen like its reductions: it runs in one
  // loop nest only where each row's reduced elements are its free axis's
  // innermost ones.
  lv.chainView = lv.strides.size();
  if (chain) {
    Shape seen = rowMajorStrides(shape.take_front(chain->from));
    seen.resize(shape.size(), 0);
    lv.strides.push_back(seen);
    lv.offsets.push_back(0);
  }
  // A column sum seen over the group's shape: stride 1 along the last
  // dimension, 0 along the summed leading ones, so that the collapse keeps
  // the columns apart from the rows.
  lv.columnSumView = lv.strides.size();
  for (size_t k = 0; k < columnSums; ++k) {
    Shape seen(shape.size(), 0);
    seen.back() = 1;
    lv.strides.push_back(seen);
    lv.offsets.push_back(0);
  }
}

/// Whether the view folds along exactly the innermost dimension.
bool foldsInnermost(const LoopSpace &space, size_t view) {
  size_t rank = space.sizes.size();
  const Shape &s = space.strides[view];
  return s.back() == 0 && llvm::all_of(llvm::seq<size_t>(0, rank - 1),
                                       [&](size_t d) { return s[d] != 0; });
}

/// Rows shorter than this many elements (a head's 64 features) would cost a
/// DMA each: the layout puts several on each partition's free axis.
constexpr int64_t kShortRun = 256;

/// Short rows of a two-dimensional space (a softmax's 128 keys, kept apart
/// from the rows above by a per-row statistic) go several to a partition:
/// [R, C] is seen as [R / g, g, C], and the layout puts g consecutive rows
/// on each partition's free axis, so one iteration moves 128 g rows, not
/// 128.
void groupShortRows(LoopSpace &space, int64_t chunkLimit) {
  if (space.sizes.size() != 2 || space.sizes[1] >= kShortRun ||
      space.sizes[0] <= 128) {
    return;
  }
  int64_t r = space.sizes[0], c = space.sizes[1], g = 1;
  for (int64_t d = std::min(r / 128, chunkLimit / c); d > 1; --d) {
    if (r % d == 0) {
      g = d;
      break;
    }
  }
  if (g > 1) {
    space.sizes = {r / g, g, c};
    for (Shape &st : space.strides) {
      st = {st[0] * g, st[0], st[1]};
    }
  }
}

/// Where the innermost dimension is short, the free axis spans it and one
/// of the two dimensions above, and the partitions take the other, the
/// larger: merging heads ([B, S, heads, d]) puts S on the partitions and
/// [heads x d] on the free axis, and so does splitting them ([B, heads, S,
/// d]). One DMA then moves up to 128 rows of both.
void chooseWide(LoopLayout &layout, int64_t chunkLimit,
                const LoopViews &views) {
  size_t rank = layout.rank;
  const LoopSpace &space = layout.space;
  if (rank < 3 || space.sizes[rank - 1] >= kShortRun) {
    return;
  }
  size_t p =
      space.sizes[rank - 3] > space.sizes[rank - 2] ? rank - 3 : rank - 2;
  size_t f = p == rank - 3 ? rank - 2 : rank - 3;
  // Random numbers follow the row-major index along the free axis: its two
  // dimensions must be consecutive in that index.
  auto indexFollows = [&] {
    const Shape &index = space.strides[views.indexView];
    return f == rank - 2 && index[f] == space.sizes[rank - 1] * index[rank - 1];
  };
  if ((!views.needsIndex || indexFollows()) &&
      space.sizes[p] > space.sizes[f] &&
      space.sizes[f] * space.sizes[rank - 1] <= chunkLimit) {
    layout.wide = true;
    layout.partitionDim = p;
    layout.freeOuterDim = f;
  }
}

} // namespace

LoopViews loopViews(Lowering &lowering, llvm::ArrayRef<Operation *> ops,
                    llvm::ArrayRef<int64_t> shape,
                    llvm::ArrayRef<LoopOutput> outputs,
                    llvm::ArrayRef<LoopReduction> reductions, size_t columnSums,
                    const RowChain *chain) {
  LoopViews lv;
  // A copy's source is an output no op defines: an input too.
  llvm::SmallPtrSet<Operation *, 16> members(ops.begin(), ops.end());
  lv.inputs = externalInputs(ops);
  for (const LoopOutput &out : outputs) {
    Operation *def = out.value.getDefiningOp();
    if (!(def && members.contains(def))) {
      lv.inputs.insert(out.value);
    }
  }
  for (Value v : lv.inputs) {
    TensorOperand &operand = lowering.operandOf(v);
    lv.isImmediate.push_back(operand.immediate.has_value());
    lv.immediates.push_back(operand.immediate.value_or(0.0));
    lv.views.push_back(operand.immediate ? HbmView{}
                                         : operand.view.broadcastTo(shape));
    if (operand.immediate) {
      lv.views.back().shape.assign(shape.begin(), shape.end());
      lv.views.back().strides.assign(shape.size(), 0);
    }
  }
  // Selects compute a condition affine in the element's position from the
  // row-major index (as dropout's numbers), without loading it.
  for (Value v : lv.inputs) {
    lv.computedConditions.push_back(selectCondition(v, ops, shape));
  }
  lv.needsIndex = lv.computesConditions();
  lv.shape.assign(shape.begin(), shape.end());
  for (const LoopOutput &out : outputs) {
    lv.views.push_back(out.dst);
  }
  for (const HbmView &v : lv.views) {
    lv.strides.push_back(v.strides);
    lv.offsets.push_back(v.offset);
  }
  addSteeringViews(lv, ops, shape, reductions, columnSums, chain);
  return lv;
}

bool fuseRowFolds(const LoopSpace &space, const LoopViews &views,
                  llvm::MutableArrayRef<LoopReduction> reductions,
                  const RowChain *chain) {
  for (auto [k, r] : llvm::enumerate(reductions)) {
    // A kept-dimension sum waits for the layout (fuseKeptDimFolds).
    r.fused = r.keptDim < 0 && foldsInnermost(space, views.reductionView + k);
  }
  return chain && foldsInnermost(space, views.chainView);
}

bool fuseKeptDimFolds(const LoopLayout &layout, const LoopViews &views,
                      llvm::MutableArrayRef<LoopReduction> reductions) {
  // Each tile iteration folds into a column of its own (4 bytes a
  // partition): bounded so that they stay small beside the loop's tiles.
  constexpr int64_t kMaxIterations = 2048;
  bool any = false;
  for (auto [k, r] : llvm::enumerate(reductions)) {
    if (r.keptDim < 0) {
      continue;
    }
    // Every tile's rows are indices of the kept dimension: the result's
    // view steps along the partitions only.
    const Shape &st = layout.space.strides[views.reductionView + k];
    r.fused = layout.outerCount * layout.chunks <= kMaxIterations &&
              st[layout.partitionDim] != 0 &&
              llvm::all_of(llvm::seq<size_t>(0, layout.rank), [&](size_t d) {
                return d == layout.partitionDim || st[d] == 0;
              });
    any |= r.fused;
  }
  return any;
}

int64_t chunkLimitOf(int64_t sbufBudget, llvm::ArrayRef<Operation *> ops,
                     const LoopViews &views, const LoopSpace &space,
                     llvm::ArrayRef<LoopOutput> outputs,
                     llvm::ArrayRef<int64_t> chainShape) {
  // A DMA costs a fixed ~2 us on top of its bytes, so the chunk is as wide
  // as the iteration's peak of live tiles allows, not sized for every tile
  // it ever allocates (AdamW's fifteen ops hold about eight). Immediates
  // and inputs every element reads alike take no column.
  llvm::SmallVector<bool> inputIsScalar(views.inputs.size());
  for (size_t i = 0; i < views.inputs.size(); ++i) {
    inputIsScalar[i] =
        views.isImmediate[i] ||
        llvm::all_of(space.strides[i], [](int64_t s) { return s == 0; });
  }
  return std::clamp<int64_t>(
      sbufBudget / peakBytesPerColumn(ops, views.inputs.getArrayRef(),
                                      inputIsScalar, outputs, chainShape),
      64, 4096);
}

llvm::SmallVector<FreeDim, 2> LoopLayout::freeDims(size_t v,
                                                   int64_t cols) const {
  llvm::SmallVector<FreeDim, 2> free;
  if (wide) {
    free.push_back({space.strides[v][freeOuterDim], space.sizes[freeOuterDim]});
    free.push_back({space.strides[v][rank - 1], space.sizes[rank - 1]});
  } else {
    free.push_back({space.strides[v][rank - 1], cols});
  }
  return free;
}

int64_t LoopLayout::columnOffset(size_t v, int64_t f0) const {
  return wide ? 0 : f0 * space.strides[v][rank - 1];
}

LoopLayout layOut(LoopSpace space, int64_t chunkLimit, const LoopViews &views) {
  LoopLayout layout;
  layout.space = std::move(space);
  groupShortRows(layout.space, chunkLimit);
  const Shape &sizes = layout.space.sizes;
  size_t rank = sizes.size();
  layout.rank = rank;
  layout.partitionDim = rank - 2;
  layout.freeOuterDim = rank - 1;
  chooseWide(layout, chunkLimit, views);
  bool wide = layout.wide;
  layout.rowsTotal = sizes[layout.partitionDim];
  layout.colsTotal =
      wide ? sizes[layout.freeOuterDim] * sizes[rank - 1] : sizes[rank - 1];
  layout.chunks = (layout.colsTotal + chunkLimit - 1) / chunkLimit;
  layout.chunk = (layout.colsTotal + layout.chunks - 1) / layout.chunks;
  layout.perRow = wide ? sizes[layout.freeOuterDim] : 1;
  layout.outer.assign(sizes.begin(), sizes.end() - (wide ? 3 : 2));
  for (int64_t d : layout.outer) {
    layout.outerCount *= d;
  }
  return layout;
}

bool fuseColumnSums(const LoopLayout &layout, const LoopViews &views,
                    llvm::ArrayRef<int64_t> shape,
                    llvm::MutableArrayRef<LoopColumnSum> columnSums,
                    int64_t bankColumns) {
  // Column sums fold each tile's rows on TensorE: the rows must be on the
  // partitions (every dimension but the columns summed), the columns the
  // free axis in chunks of whole 128-column blocks (a matmul's result
  // partitions start at 0).
  if (columnSums.empty() || layout.wide ||
      !(layout.chunks == 1 || layout.chunk % 128 == 0) ||
      (layout.colsTotal + 127) / 128 > bankColumns) {
    return false;
  }
  size_t rank = layout.rank;
  for (auto [k, c] : llvm::enumerate(columnSums)) {
    const Shape &st = layout.space.strides[views.columnSumView + k];
    c.fused = st[rank - 1] == 1 &&
              layout.space.sizes[rank - 1] == shape.back() &&
              llvm::all_of(llvm::seq<size_t>(0, rank - 1),
                           [&](size_t d) { return st[d] == 0; });
  }
  return true;
}

} // namespace kiln::tile_passes
