//===- LowerElementwise.cpp - elementwise loop nests ----------------------===//
//
// A group of elementwise ops over one shape becomes one loop nest of tiles
// (Lowering::lowerElementwise): ElementwiseLayout.cpp lays the shape on the
// partitions and the free axis; each tile iteration here loads the group's
// inputs, runs its ops in SBUF (ElementwiseGroup.cpp) and stores its
// outputs, and folds on the way the reductions and column sums of group
// values that would otherwise read them back from HBM.
//
//===----------------------------------------------------------------------===//

#include "passes/tile/ElementwiseLoop.h"

#include <map>

using namespace mlir;
using namespace kiln::kgraph;

namespace kiln::tile_passes {

Tile loadInput(TileBuilder &tb, const HbmView &view, int64_t origin,
               int64_t rowStride, llvm::ArrayRef<FreeDim> free, int64_t rows,
               int64_t cols) {
  bool oneColumn =
      llvm::all_of(free, [](const FreeDim &d) { return d.stride == 0; });
  bool runs = !oneColumn && free.size() == 2 && free[1].stride == 0;
  Tile t = tb.tile(isa::Memory::Sbuf, view.dtype, rows,
                   oneColumn ? 1
                   : runs    ? free[0].size
                             : cols);
  if (oneColumn) {
    tb.load(t, view, origin, rowStride, 1);
    t.cols = cols;
    t.freeStride = 0;
  } else if (runs) {
    tb.load(t, view, origin, rowStride, {free[0]});
    t.cols = cols;
    t.run = free[1].size;
  } else {
    tb.load(t, view, origin, rowStride, free);
  }
  return t;
}

Tile foldRows(TileBuilder &tb, const LoopReduction &r,
              const llvm::DenseMap<Value, TileArg> &tiles, int64_t rows,
              int64_t cols, int64_t perRow, const Tile *before, Tile into) {
  const char *alu = reductionAlu(r.op);
  auto fresh = [&] {
    return tb.tile(isa::Memory::Sbuf, isa::DType::F32, rows, perRow);
  };
  Value value = r.via ? r.via->getOperand(0) : r.op->getOperand(0);
  Tile in = storedTile(tb, tiles.lookup(value), isa::DType::F32, rows, cols);
  Tile fold = into.buffer && !before ? into : fresh();
  tb.reduce(fold, in, alu, cols / perRow);
  if (before) {
    Tile combined = into.buffer ? into : fresh();
    tb.tensorTensor(combined, *before, fold, alu);
    fold = combined;
  }
  return fold;
}

/// Stores the results `gathered` holds for `total` rows (row 128 t + p in
/// column t of partition p), `rowStride` apart from `offset` in `dst`: the
/// whole row tiles in one DMA, a partial last one in another.
void storeGathered(TileBuilder &tb, const HbmView &dst, int64_t offset,
                   int64_t rowStride, int64_t total, const Tile &gathered) {
  int64_t full = total / 128, rest = total % 128;
  if (full > 0) {
    tb.store(dst, offset, rowStride, {FreeDim{128 * rowStride, full}},
             gathered.columns(0, full));
  }
  if (rest > 0) {
    tb.store(dst, offset + full * 128 * rowStride, rowStride, {FreeDim{1, 1}},
             gathered.columns(full, 1).withRows(0, rest));
  }
}

void skipOutputsOnlyReducedOnes(llvm::MutableArrayRef<LoopOutput> outputs,
                                llvm::ArrayRef<Operation *> members,
                                llvm::ArrayRef<LoopReduction> reductions,
                                llvm::ArrayRef<LoopColumnSum> columnSums) {
  llvm::SmallPtrSet<Operation *, 16> inside(members.begin(), members.end());
  llvm::SmallPtrSet<Operation *, 4> fused;
  for (const LoopReduction &r : reductions) {
    if (r.fused) {
      fused.insert(r.op);
    }
  }
  for (const LoopColumnSum &c : columnSums) {
    if (c.fused) {
      fused.insert(c.op);
      fused.insert(c.via.begin(), c.via.end());
    }
  }
  // A reader the loop nest takes care of: a group op, a fused reduction or
  // sum, or a reshape only those read.
  auto handled = [&](Operation *user) {
    if (inside.contains(user) || fused.contains(user)) {
      return true;
    }
    return llvm::isa<ReshapeOp, TransposeOp>(user) && !user->use_empty() &&
           llvm::all_of(user->getUsers(),
                        [&](Operation *u) { return fused.contains(u); });
  };
  for (LoopOutput &out : outputs) {
    Operation *def = out.value.getDefiningOp();
    out.stored = !def || !inside.contains(def) ||
                 !llvm::all_of(out.value.getUsers(), handled);
  }
}

namespace {

/// One loop nest as it emits: the group it computes, where its elements lie
/// (views and layout), and what it carries from one tile iteration to the
/// next.
struct LoopNest {
  LoopNest(Lowering &lowering, llvm::ArrayRef<Operation *> ops,
           llvm::ArrayRef<int64_t> chainShape,
           llvm::ArrayRef<LoopOutput> outputs,
           llvm::ArrayRef<LoopReduction> reductions,
           llvm::ArrayRef<LoopColumnSum> columnSums, const LoopViews &views,
           const LoopLayout &layout)
      : lowering(lowering), tb(lowering.tb), ops(ops), chainShape(chainShape),
        outputs(outputs), reductions(reductions), columnSums(columnSums),
        views(views), layout(layout) {}

  LogicalResult emit();

  Lowering &lowering;
  TileBuilder &tb;
  llvm::ArrayRef<Operation *> ops;
  llvm::ArrayRef<int64_t> chainShape; // a row chain's shape, else empty
  llvm::ArrayRef<LoopOutput> outputs;
  llvm::ArrayRef<LoopReduction> reductions;
  llvm::ArrayRef<LoopColumnSum> columnSums;
  const LoopViews &views;
  const LoopLayout &layout;

  /// Per input: loaded once per column chunk and kept for every row block
  /// (`invariant`), or once for the loop nest (`everywhere`); and the input
  /// whose load it shares (itself where none).
  std::vector<bool> invariant, everywhere;
  std::vector<size_t> loadedAs;
  /// The kept inputs' tiles by (input, first column; 0 for `everywhere`).
  std::map<std::pair<size_t, int64_t>, Tile> kept;
  /// Per fused reduction, the fold of the columns so far; for a kept-
  /// dimension sum, per row block, a column per tile iteration.
  std::vector<Tile> reductionSoFar;
  std::vector<std::map<int64_t, Tile>> keptSoFar;
  int64_t iteration = 0; // the outer iteration being emitted
  /// Per fused column sum, its PSUM tile (a column per 128-column block),
  /// and the columns of ones they multiply, per operand type.
  std::vector<Tile> sums;
  std::map<isa::DType, Tile> ones;
  /// The outer iteration's element offset in every view, and per fused
  /// reduction the rows' results (a column per row block).
  std::vector<int64_t> base;
  std::vector<Tile> gathered;

private:
  void planInputLoads();
  void allocateColumnSums();
  LogicalResult emitOuterIteration(int64_t o);
  LogicalResult emitTile(bool first, int64_t p0, int64_t f0);
  TileArg inputTile(size_t i, const llvm::DenseMap<Value, TileArg> &tiles,
                    int64_t p0, int64_t f0, int64_t rows, int64_t cols);
  Tile loadTile(size_t i, int64_t p0, int64_t f0, int64_t rows, int64_t cols);
  TileIndex tileIndex(int64_t p0, int64_t f0) const;
  void storeOutputs(const llvm::DenseMap<Value, TileArg> &tiles, int64_t p0,
                    int64_t f0, int64_t rows, int64_t cols);
  void sumColumns(const llvm::DenseMap<Value, TileArg> &tiles, bool first,
                  int64_t f0, int64_t rows, int64_t cols);
  void foldReductions(const llvm::DenseMap<Value, TileArg> &tiles, int64_t p0,
                      int64_t f0, int64_t rows, int64_t cols);
  void storeGatheredReductions();
  void storeKeptDimSums();
  void storeColumnSums();
};

LogicalResult LoopNest::emit() {
  planInputLoads();
  allocateColumnSums();
  for (int64_t o = 0; o < layout.outerCount; ++o) {
    if (failed(emitOuterIteration(o))) {
      return failure();
    }
  }
  storeKeptDimSums();
  storeColumnSums();
  return success();
}

/// An input that every row block reads alike (a bias) is loaded once per
/// column chunk and kept, rather than once per iteration; one that every
/// element reads alike (AdamW's step scalars) once for the loop nest. A big
/// tensor's update would otherwise spend a 2 us DMA per iteration on 512
/// bytes. Two inputs that are the same elements of the same buffer (a value
/// and a view of it that moves nothing) share one load: LayerNorm's
/// backward read its saved normalized input twice per row tile, 79 MB in
/// BERT-base.
void LoopNest::planInputLoads() {
  size_t count = views.inputs.size();
  invariant.assign(count, false);
  everywhere.assign(count, false);
  const std::vector<Shape> &strides = layout.space.strides;
  for (size_t i = 0; i < count; ++i) {
    auto zeroIn = [&](size_t from, size_t to) {
      return llvm::all_of(llvm::seq<size_t>(from, to),
                          [&](size_t d) { return strides[i][d] == 0; });
    };
    bool rowsAlike = !views.isImmediate[i] &&
                     strides[i][layout.partitionDim] == 0 &&
                     zeroIn(0, layout.outer.size());
    everywhere[i] = rowsAlike && zeroIn(0, layout.rank);
    invariant[i] = everywhere[i] || (rowsAlike && layout.chunks <= 4);
  }
  loadedAs.resize(count);
  for (size_t i = 0; i < count; ++i) {
    loadedAs[i] = i;
    for (size_t j = 0; j < i && !views.isImmediate[i]; ++j) {
      if (!views.isImmediate[j] && views.views[j] == views.views[i]) {
        loadedAs[i] = j;
        break;
      }
    }
  }
}

void LoopNest::allocateColumnSums() {
  reductionSoFar.resize(reductions.size());
  keptSoFar.resize(reductions.size());
  int64_t columnBlocks = (layout.colsTotal + 127) / 128;
  sums.resize(columnSums.size());
  for (auto [k, c] : llvm::enumerate(columnSums)) {
    if (c.fused) {
      sums[k] = tb.tile(isa::Memory::Psum, isa::DType::F32,
                        std::min<int64_t>(128, layout.colsTotal), columnBlocks);
    }
  }
}

/// The tiles of one index of the outer dimensions: every row block, every
/// column chunk.
LogicalResult LoopNest::emitOuterIteration(int64_t o) {
  iteration = o;
  // Element offset of this outer index in every view.
  const Shape &outer = layout.outer;
  base.assign(views.strides.size(), 0);
  for (size_t v = 0; v < views.strides.size(); ++v) {
    int64_t rest = o, offset = views.offsets[v];
    for (int64_t d = static_cast<int64_t>(outer.size()) - 1; d >= 0; --d) {
      offset += (rest % outer[d]) * layout.space.strides[v][d];
      rest /= outer[d];
    }
    base[v] = offset;
  }
  // One result per row: the row blocks' results gather in one tile, a
  // column per block, and leave together (a store per block would move 512
  // bytes for a DMA's fixed ~2 us).
  int64_t rowsTotal = layout.rowsTotal;
  int64_t rowBlocks = (rowsTotal + 127) / 128;
  gathered.assign(reductions.size(), Tile{});
  for (auto [k, r] : llvm::enumerate(reductions)) {
    if (r.fused && !layout.wide && r.keptDim < 0) {
      gathered[k] = tb.tile(isa::Memory::Sbuf, isa::DType::F32,
                            std::min<int64_t>(128, rowsTotal), rowBlocks);
    }
  }
  for (int64_t p0 = 0; p0 < rowsTotal; p0 += 128) {
    for (int64_t f0 = 0; f0 < layout.colsTotal; f0 += layout.chunk) {
      if (failed(emitTile(o == 0 && p0 == 0, p0, f0))) {
        return failure();
      }
    }
  }
  storeGatheredReductions();
  return success();
}

/// One tile iteration, rows from `p0` and columns from `f0`; `first` in
/// the first row block of the loop nest.
LogicalResult LoopNest::emitTile(bool first, int64_t p0, int64_t f0) {
  int64_t rows = std::min<int64_t>(128, layout.rowsTotal - p0);
  int64_t cols = std::min(layout.chunk, layout.colsTotal - f0);
  llvm::DenseMap<Value, TileArg> tiles;
  TileIndex index = tileIndex(p0, f0);
  for (size_t i = 0; i < views.inputs.size(); ++i) {
    const std::optional<AffinePredicate> &condition =
        views.computedConditions[i];
    if (condition &&
        affineBoxes(*condition, views.shape, index, rows, cols)) {
      tiles[views.inputs[i]] = TileArg{};
      continue;
    }
    TileArg arg = inputTile(i, tiles, p0, f0, rows, cols);
    tiles[views.inputs[i]] = arg;
  }
  if (failed(emitGroupOps(tb, ops, tiles, rows, cols, index,
                          chainShape, layout.perRow))) {
    return failure();
  }
  storeOutputs(tiles, p0, f0, rows, cols);
  sumColumns(tiles, first, f0, rows, cols);
  foldReductions(tiles, p0, f0, rows, cols);
  return success();
}

/// Input i's tile: its immediate, the tile of the input whose load it
/// shares, a kept tile, or a fresh load.
TileArg LoopNest::inputTile(size_t i,
                            const llvm::DenseMap<Value, TileArg> &tiles,
                            int64_t p0, int64_t f0, int64_t rows,
                            int64_t cols) {
  if (views.isImmediate[i]) {
    return TileArg{views.immediates[i], Tile{}};
  }
  if (loadedAs[i] != i &&
      (tiles.lookup(views.inputs[loadedAs[i]]).tile.buffer ||
       views.isImmediate[loadedAs[i]])) {
    return tiles.lookup(views.inputs[loadedAs[i]]);
  }
  std::pair<size_t, int64_t> key{i, everywhere[i] ? 0 : f0};
  auto keptTile = kept.find(key);
  if (keptTile != kept.end()) {
    Tile t = keptTile->second.withRows(0, rows);
    if (everywhere[i]) {
      t.cols = cols; // one column, read with stride 0
    }
    return TileArg{std::nullopt, t};
  }
  Tile t = loadTile(i, p0, f0, rows, cols);
  if (invariant[i]) {
    kept[key] = t;
  }
  return TileArg{std::nullopt, t.withRows(0, rows)};
}

Tile LoopNest::loadTile(size_t i, int64_t p0, int64_t f0, int64_t rows,
                        int64_t cols) {
  const HbmView &view = views.views[i];
  int64_t rowStride = layout.rowStride(i);
  // A kept tile serves every row block: all 128 partitions.
  int64_t loadRows =
      invariant[i] ? std::min<int64_t>(128, layout.rowsTotal) : rows;
  int64_t origin = base[i] + p0 * rowStride + layout.columnOffset(i, f0);
  if (layout.wide || !lowering.iotaBuffers.contains(view.buffer)) {
    return loadInput(tb, view, origin, rowStride, layout.freeDims(i, cols),
                     loadRows, cols);
  }
  // An iota's element is its index, so any view of it is an affine function
  // of the tile position: computed, not loaded (the [tokens x vocabulary]
  // compare of the embedding gradient's one-hot matrix read the
  // 30522-entry iota once per row block, 125 MB).
  int64_t freeStride = layout.space.strides[i][layout.rank - 1];
  Tile t = tb.tile(isa::Memory::Sbuf, view.dtype, loadRows,
                   freeStride == 0 ? 1 : cols);
  tb.iota(t, origin, rowStride, freeStride);
  if (freeStride == 0) {
    t.cols = cols;
    t.freeStride = 0;
  }
  return t;
}

TileIndex LoopNest::tileIndex(int64_t p0, int64_t f0) const {
  if (!views.needsIndex) {
    return TileIndex{};
  }
  const Shape &strides = layout.space.strides[views.indexView];
  int64_t rowStep = strides[layout.partitionDim];
  int64_t colStep = strides[layout.rank - 1];
  return {base[views.indexView] + p0 * rowStep + f0 * colStep, rowStep,
          colStep};
}

void LoopNest::storeOutputs(const llvm::DenseMap<Value, TileArg> &tiles,
                            int64_t p0, int64_t f0, int64_t rows,
                            int64_t cols) {
  for (auto [k, out] : llvm::enumerate(outputs)) {
    if (!out.stored) {
      continue;
    }
    size_t v = views.inputs.size() + k;
    Tile src =
        storedTile(tb, tiles.lookup(out.value), out.dst.dtype, rows, cols);
    int64_t rowStride = layout.rowStride(v);
    tb.store(out.dst, base[v] + p0 * rowStride + layout.columnOffset(v, f0),
             rowStride, layout.freeDims(v, cols), src);
  }
}

/// Each fused column sum's tile against a column of ones, 128 columns at a
/// time, accumulating into the sum's PSUM columns.
void LoopNest::sumColumns(const llvm::DenseMap<Value, TileArg> &tiles,
                          bool first, int64_t f0, int64_t rows, int64_t cols) {
  for (auto [k, c] : llvm::enumerate(columnSums)) {
    if (!c.fused) {
      continue;
    }
    TileArg arg = tiles.lookup(c.value);
    Tile v = arg.immediate ? storedTile(tb, arg, isa::DType::F32, rows, cols)
                           : arg.tile;
    isa::DType type =
        v.dtype == isa::DType::BF16 ? isa::DType::BF16 : isa::DType::F32;
    if (v.dtype != type) {
      Tile widened = tb.tile(isa::Memory::Sbuf, type, rows, cols);
      tb.copy(widened, v);
      v = widened;
    }
    Tile &column = ones[type];
    if (!column.buffer) {
      column = tb.tile(isa::Memory::Sbuf, type, 128, 1);
      tb.memset(column, 1.0);
    }
    for (int64_t c0 = 0; c0 < cols; c0 += 128) {
      int64_t cc = std::min<int64_t>(128, cols - c0);
      tb.matmul(sums[k].columns((f0 + c0) / 128, 1).withRows(0, cc),
                v.columns(c0, cc), column.withRows(0, rows),
                /*accumulate=*/!first);
    }
  }
}

/// Each row's fold of this chunk, combined with the chunks before. The last
/// lands in the row block's column of `gathered`, or, wide (a result per
/// row and outer free index), is stored at once.
void LoopNest::foldReductions(const llvm::DenseMap<Value, TileArg> &tiles,
                              int64_t p0, int64_t f0, int64_t rows,
                              int64_t cols) {
  bool wide = layout.wide;
  for (auto [k, r] : llvm::enumerate(reductions)) {
    if (!r.fused) {
      continue;
    }
    if (r.keptDim >= 0) {
      // Each partition's whole tile row into this iteration's column; the
      // columns fold once the loop nest is done (independent folds, not a
      // chain of additions).
      Tile &columns = keptSoFar[k][p0];
      if (!columns.buffer) {
        columns = tb.tile(isa::Memory::Sbuf, isa::DType::F32, rows,
                          layout.outerCount * layout.chunks);
      }
      int64_t column = iteration * layout.chunks + f0 / layout.chunk;
      foldRows(tb, r, tiles, rows, cols, 1, nullptr,
               columns.columns(column, 1));
      continue;
    }
    bool last = f0 + cols >= layout.colsTotal;
    Tile into = last && !wide
                    ? gathered[k].columns(p0 / 128, 1).withRows(0, rows)
                    : Tile{};
    Tile fold;
    if (r.rowValue) {
      // Computed by the chain's ops: whole rows, one chunk.
      fold = tiles.lookup(r.op->getResult(0)).tile;
      if (into.buffer) {
        tb.copy(into, fold);
      }
    } else {
      fold = foldRows(tb, r, tiles, rows, cols, layout.perRow,
                      f0 > 0 ? &reductionSoFar[k] : nullptr, into);
    }
    reductionSoFar[k] = fold;
    if (last && wide) {
      size_t v = views.reductionView + k;
      int64_t rowStride = layout.rowStride(v);
      tb.store(r.dst, base[v] + p0 * rowStride, rowStride,
               {FreeDim{layout.space.strides[v][layout.freeOuterDim],
                        layout.perRow}},
               fold);
    }
  }
}

void LoopNest::storeGatheredReductions() {
  for (auto [k, r] : llvm::enumerate(reductions)) {
    if (r.fused && !layout.wide && r.keptDim < 0) {
      size_t v = views.reductionView + k;
      storeGathered(tb, r.dst, base[v], layout.rowStride(v), layout.rowsTotal,
                    gathered[k]);
    }
  }
}

void LoopNest::storeKeptDimSums() {
  for (auto [k, r] : llvm::enumerate(reductions)) {
    for (auto &[p0, columns] : keptSoFar[k]) {
      Tile sum = columns;
      if (columns.cols > 1) {
        sum = tb.tile(isa::Memory::Sbuf, isa::DType::F32, columns.rows, 1);
        tb.reduce(sum, columns, reductionAlu(r.op));
      }
      size_t v = views.reductionView + k;
      int64_t rowStride = layout.rowStride(v);
      tb.store(r.dst, r.dst.offset + p0 * rowStride, rowStride,
               {FreeDim{1, 1}}, sum);
    }
  }
}

void LoopNest::storeColumnSums() {
  int64_t colsTotal = layout.colsTotal;
  for (auto [k, c] : llvm::enumerate(columnSums)) {
    if (c.fused) {
      // Rounded to the sum's type as the product's evacuation would.
      Tile out =
          tb.tile(isa::Memory::Sbuf, c.dst.dtype,
                  std::min<int64_t>(128, colsTotal), (colsTotal + 127) / 128);
      tb.copy(out, sums[k]);
      storeGathered(tb, c.dst, c.dst.offset, 1, colsTotal, out);
    }
  }
}

} // namespace

LogicalResult Lowering::lowerElementwise(
    llvm::ArrayRef<Operation *> ops, llvm::ArrayRef<int64_t> shape,
    llvm::MutableArrayRef<LoopOutput> outputs,
    llvm::MutableArrayRef<LoopReduction> reductions,
    llvm::MutableArrayRef<LoopColumnSum> columnSums, RowChain *chain) {
  LoopViews views = loopViews(*this, ops, shape, outputs, reductions,
                              columnSums.size(), chain);
  // Selects that compute their mask from positions want its rows on the
  // partitions: one affine_select a tile.
  LoopSpace space =
      collapse(shape, views.strides,
               views.computesConditions() &&
                   reductions.empty() && columnSums.empty() && !chain);
  bool chainFolds = fuseRowFolds(space, views, reductions, chain);
  skipOutputsOnlyReducedOnes(outputs, ops, reductions);
  llvm::ArrayRef<int64_t> chainShape =
      chain ? shape : llvm::ArrayRef<int64_t>{};
  int64_t chunkLimit =
      chunkLimitOf(sbufBudget, ops, views, space, outputs, chainShape);
  LoopLayout layout = layOut(std::move(space), chunkLimit, views);
  if (fuseKeptDimFolds(layout, views, reductions)) {
    skipOutputsOnlyReducedOnes(outputs, ops, reductions);
  }
  if (chain && !(chainFolds && layout.chunks == 1)) {
    chain->declined = true; // nothing emitted: its parts go one by one
    return success();
  }
  int64_t bankColumns = tb.targetDescription().psumBankBytes / 4;
  if (fuseColumnSums(layout, views, shape, columnSums, bankColumns)) {
    skipOutputsOnlyReducedOnes(outputs, ops, reductions, columnSums);
  }
  return LoopNest(*this, ops, chainShape, outputs, reductions, columnSums,
                  views, layout)
      .emit();
}

void Lowering::copyInto(const TensorOperand &src, const HbmView &dst) {
  // A placeholder value stands for the source inside the loop nest.
  OpBuilder &b = tb.builder();
  Type element = kisa::toMlirType(b.getContext(), dst.dtype);
  auto type = RankedTensorType::get(dst.shape, element);
  Value placeholder =
      kgraph::ConstantOp::create(
          b, tb.location(),
          DenseElementsAttr::get(type, b.getZeroAttr(element)))
          .getOutput();
  bind(placeholder, src);
  LoopOutput copy{placeholder, dst};
  (void)lowerElementwise({}, dst.shape, copy);
  values.erase(placeholder);
  placeholder.getDefiningOp()->erase();
}

HbmView Lowering::materialize(const TensorOperand &operand,
                              llvm::ArrayRef<int64_t> shape) {
  if (!operand.immediate && operand.view.isContiguous() &&
      operand.view.shape == shape) {
    return operand.view;
  }
  isa::DType dtype =
      operand.immediate ? isa::DType::F32 : operand.view.dtype;
  HbmView dst = HbmView::whole(tb.hbm(shape, dtype));
  dst.shape.assign(shape.begin(), shape.end());
  dst.strides = rowMajorStrides(shape);
  copyInto(operand, dst);
  return dst;
}

} // namespace kiln::tile_passes
