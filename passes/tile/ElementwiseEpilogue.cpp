//===- ElementwiseEpilogue.cpp - an elementwise group on matmul tiles -----===//
//
// A matmul's epilogue (see Epilogue in Lowering.h) runs its group's ops on
// each output tile as it leaves PSUM: the tiles of its other inputs loaded
// beside the product's, the ops by emitGroupOps, then the outputs stored and
// the reductions and column sums folded. Also what an epilogue holds in
// SBUF, for the matmul to size its tiles by.
//
//===----------------------------------------------------------------------===//

#include "passes/tile/AffinePredicate.h"
#include "passes/tile/ElementwiseLoop.h"

#include "dialects/kgraph/KGraphShapes.h"

using namespace mlir;
using namespace kiln::kgraph;

namespace kiln::tile_passes {

std::optional<HbmView> asRows(const HbmView &view) {
  if (view.shape.size() <= 2) {
    return view;
  }
  int64_t last = view.shape.back();
  return view.reshaped({view.elements() / last, last});
}

LogicalResult Lowering::epilogueTiles(
    const Epilogue &e, const Tile &product, const TileIndex &index,
    llvm::function_ref<FailureOr<Tile>(Value, const HbmView &)> load,
    llvm::DenseMap<Value, TileArg> &tiles) {
  tiles[e.product] = TileArg{std::nullopt, product};
  auto productShape =
      llvm::cast<RankedTensorType>(e.product.getType()).getShape();
  // Inputs that are the same elements of the same buffer share one load.
  llvm::SmallVector<std::pair<HbmView, Value>, 8> loaded;
  for (Value v : externalInputs(e.ops)) {
    if (v == e.product) {
      continue;
    }
    // Before the operand is looked up: a mask the selects compute may be
    // lowered after the product (see planChainEpilogues).
    if (computesCondition(v, e.ops, productShape, index, product.rows,
                          product.cols)) {
      tiles[v] = TileArg{}; // computed by its selects
      continue;
    }
    TensorOperand &operand = operandOf(v);
    if (operand.immediate) {
      tiles[v] = TileArg{operand.immediate, Tile{}};
      continue;
    }
    const auto *same = llvm::find_if(loaded, [&](const auto &l) {
      return l.first.sameElements(operand.view);
    });
    if (same != loaded.end()) {
      tiles[v] = tiles.lookup(same->second);
      continue;
    }
    loaded.emplace_back(operand.view, v);
    FailureOr<Tile> t = load(v, operand.view);
    if (failed(t)) {
      return failure();
    }
    tiles[v] = TileArg{std::nullopt, *t};
  }
  return success();
}

namespace {

/// Each 128 columns of each column sum's value on the tile against a column
/// of ones, into the sum's column of `e.sums` (its partitions the columns),
/// accumulating over the row tiles.
void sumEpilogueColumns(TileBuilder &tb, Epilogue &e,
                        const llvm::DenseMap<Value, TileArg> &tiles,
                        int64_t rows, int64_t cols, int64_t m0, int64_t n0,
                        int64_t n) {
  int64_t blocks = (n + 127) / 128;
  for (auto [k, c] : llvm::enumerate(e.columnSums)) {
    isa::DType type =
        deviceType(llvm::cast<RankedTensorType>(c.op->getOperand(1).getType())
                       .getElementType());
    TileArg arg = tiles.lookup(c.value);
    Tile v = arg.immediate ? storedTile(tb, arg, type, rows, cols) : arg.tile;
    if (v.dtype != type || v.freeStride != 1 || v.run > 0) {
      Tile rounded = tb.tile(isa::Memory::Sbuf, type, rows, cols);
      tb.copy(rounded, v);
      v = rounded;
    }
    for (int64_t c0 = 0; c0 < cols; c0 += 128) {
      int64_t cc = std::min<int64_t>(128, cols - c0);
      int64_t column = static_cast<int64_t>(k) * blocks + (n0 + c0) / 128;
      tb.matmul(e.sums.columns(column, 1).withRows(0, cc), v.columns(c0, cc),
                e.ones[type].withRows(0, rows), /*accumulate=*/m0 > 0);
    }
  }
}

/// Where rows [m0, ...) and columns [n0, ...) of batch element `element` of
/// a product of `shape` lie in `input`: a view of the product's shape (or
/// one that broadcasts to it), or, for a 2-D product, of any shape whose
/// rows are the product's (a chain's `[B, S, H]` over a `[B·S, H]` linear
/// layer).
struct RowsAt {
  HbmView view;
  int64_t origin, rowStride, colStride;
  bool rowsAlike; // every row of every element reads the same elements
};

std::optional<RowsAt> rowsAt(const HbmView &input,
                             llvm::ArrayRef<int64_t> shape, int64_t element,
                             int64_t m0, int64_t n0) {
  size_t rank = shape.size();
  HbmView view;
  int64_t base;
  if (rank <= 2) {
    std::optional<HbmView> flat = asRows(input);
    if (!flat) {
      return std::nullopt;
    }
    view = flat->broadcastTo(shape);
    base = view.offset;
  } else {
    // A view that broadcasts to the product's shape by NumPy's rules, or
    // one of the same elements in another shape (a reshape of its rows).
    std::optional<HbmView> same =
        kgraph::isBroadcastableTo(input.shape, shape)
            ? std::optional<HbmView>(input.broadcastTo(shape))
            : input.reshaped(shape);
    if (!same) {
      return std::nullopt;
    }
    view = *same;
    base = batchElementOffset(view.offset, view.strides, shape.drop_back(2),
                              element);
  }
  int64_t rowStride = view.strides[rank - 2], colStride = view.strides.back();
  bool rowsAlike =
      llvm::all_of(llvm::ArrayRef<int64_t>(view.strides).drop_back(),
                   [](int64_t s) { return s == 0; });
  return RowsAt{view, base + m0 * rowStride + n0 * colStride, rowStride,
                colStride, rowsAlike};
}

} // namespace

LogicalResult Lowering::emitEpilogue(Epilogue &e, const Tile &product,
                                     int64_t element, int64_t m0, int64_t n0,
                                     int64_t n) {
  int64_t rows = product.rows, cols = product.cols;
  auto shape = llvm::cast<RankedTensorType>(e.product.getType()).getShape();
  // The row of the product seen as [elements x M, N]: where the row values
  // gather and what the random counters and affine predicates count.
  int64_t row = element * shape[shape.size() - 2] + m0;
  llvm::DenseMap<Value, TileArg> tiles;
  auto load = [&](Value v, const HbmView &input) -> FailureOr<Tile> {
    std::optional<RowsAt> at = rowsAt(input, shape, element, m0, n0);
    if (!at) {
      return mlir::emitError(v.getLoc())
             << "epilogue input is not a view of the product's rows";
    }
    // A bias reads every row alike: one [128, cols] tile per column
    // offset serves every row tile; a scalar one column for all.
    bool scalar = at->rowsAlike && at->colStride == 0;
    std::pair<const void *, int64_t> key{v.getAsOpaquePointer(),
                                         scalar ? -1 : n0};
    auto keptTile = at->rowsAlike ? e.kept.find(key) : e.kept.end();
    Tile t;
    if (keptTile != e.kept.end()) {
      t = keptTile->second;
    } else {
      int64_t loadRows =
          at->rowsAlike ? std::min<int64_t>(128, shape[shape.size() - 2])
                        : rows;
      t = loadInput(tb, at->view, at->origin, at->rowStride,
                    {FreeDim{at->colStride, cols}}, loadRows, cols);
      if (at->rowsAlike) {
        e.kept.emplace(key, t);
      }
    }
    t = t.withRows(0, rows);
    if (scalar) {
      t.cols = cols; // one column, read with stride 0
    }
    return t;
  };
  TileIndex index{row * n + n0, n, 1};
  if (failed(epilogueTiles(e, product, index, load, tiles))) {
    return failure();
  }
  if (failed(emitGroupOps(tb, e.ops, tiles, rows, cols, index, e.chainShape,
                          /*perRow=*/1, e.product))) {
    return failure();
  }
  sumEpilogueColumns(tb, e, tiles, rows, cols, m0, n0, n);
  // A chain's row values read later: a column per row tile (the span is
  // the whole row, so each row tile passes once).
  for (auto [k, out] : llvm::enumerate(e.rowOutputs)) {
    tb.copy(e.rowGathered[k].columns(row / 128, 1).withRows(0, rows),
            tiles.lookup(out.value).tile);
  }
  for (auto [k, r] : llvm::enumerate(e.reductions)) {
    auto key = std::make_pair(k, row);
    auto before = e.soFar.find(key);
    Tile into = n0 + cols >= n
                    ? e.gathered[k].columns(row / 128, 1).withRows(0, rows)
                    : Tile{};
    e.soFar[key] =
        foldRows(tb, r, tiles, rows, cols, 1,
                 before == e.soFar.end() ? nullptr : &before->second, into);
  }
  for (const LoopOutput &out : e.outputs) {
    if (!out.stored) {
      continue;
    }
    Tile src =
        storedTile(tb, tiles.lookup(out.value), out.dst.dtype, rows, cols);
    std::optional<RowsAt> at = rowsAt(out.dst, shape, element, m0, n0);
    if (!at) {
      return mlir::emitError(out.value.getLoc())
             << "epilogue output is not a view of the product's rows";
    }
    tb.store(at->view, at->origin, at->rowStride,
             {FreeDim{at->colStride, cols}}, src);
  }
  return success();
}

LogicalResult Lowering::emitBatchedEpilogue(Epilogue &e, const Tile &product,
                                            int64_t first, int64_t count) {
  auto shape = llvm::cast<RankedTensorType>(e.product.getType()).getShape();
  size_t rank = shape.size();
  llvm::ArrayRef<int64_t> batch = shape.drop_back(2);
  int64_t rows = product.rows, cols = product.cols, n = shape[rank - 1];
  // A view's part for these elements: rows on the partitions, then the
  // elements (consecutive in the innermost batch dimension), then columns.
  auto originOf = [&](const HbmView &v) {
    return batchElementOffset(v.offset, v.strides, batch, first);
  };
  auto freeOf = [&](const HbmView &v) {
    return llvm::SmallVector<FreeDim, 2>{FreeDim{v.strides[rank - 3], count},
                                         FreeDim{v.strides[rank - 1], n}};
  };
  llvm::DenseMap<Value, TileArg> tiles;
  auto load = [&](Value v, const HbmView &input) -> FailureOr<Tile> {
    HbmView view = input.broadcastTo(shape);
    bool scalar = llvm::all_of(view.strides, [](int64_t s) { return s == 0; });
    std::pair<const void *, int64_t> key{v.getAsOpaquePointer(), -1};
    auto keptTile = scalar ? e.kept.find(key) : e.kept.end();
    Tile t;
    if (keptTile != e.kept.end()) {
      t = keptTile->second;
    } else {
      t = loadInput(tb, view, originOf(view), view.strides[rank - 2],
                    freeOf(view), scalar ? 128 : rows, cols);
      if (scalar) {
        e.kept.emplace(key, t);
      }
    }
    return t.withRows(0, rows);
  };
  int64_t m = shape[rank - 2];
  TileIndex index{first * m * n, n, 1, n, m * n};
  if (failed(epilogueTiles(e, product, index, load, tiles))) {
    return failure();
  }
  if (failed(emitGroupOps(tb, e.ops, tiles, rows, cols, index, shape, count,
                          e.product))) {
    return failure();
  }
  for (const LoopOutput &out : e.outputs) {
    Tile src =
        storedTile(tb, tiles.lookup(out.value), out.dst.dtype, rows, cols);
    tb.store(out.dst, originOf(out.dst), out.dst.strides[rank - 2],
             freeOf(out.dst), src);
  }
  return success();
}

EpilogueFootprint Lowering::epilogueFootprint(const Epilogue &e) {
  auto shape = llvm::cast<RankedTensorType>(e.product.getType()).getShape();
  llvm::SmallPtrSet<Operation *, 16> members(e.ops.begin(), e.ops.end());
  llvm::SetVector<Value> inputs;
  inputs.insert(e.product);
  inputs.insert_range(externalInputs(e.ops));
  // Immediates and scalars (every element alike) take no column.
  llvm::SmallVector<bool> scalar{false}; // the product
  EpilogueFootprint footprint;
  for (Value v : inputs.getArrayRef().drop_front()) {
    TensorOperand &operand = operandOf(v);
    if (operand.immediate) {
      scalar.push_back(true);
      continue;
    }
    HbmView view = operand.view.broadcastTo(shape);
    scalar.push_back(view.strides[0] == 0 && view.strides[1] == 0);
  }
  for (const LoopOutput &out : e.outputs) {
    if (!out.stored) {
      continue; // read only by the epilogue's own reductions
    }
    for (Operation *user : out.value.getUsers()) {
      footprint.outputsReadLater |=
          !members.contains(user) && !llvm::isa<func::ReturnOp>(user);
    }
  }
  footprint.bytesPerColumn =
      peakBytesPerColumn(e.ops, inputs.getArrayRef(), scalar, e.outputs, {});
  return footprint;
}

} // namespace kiln::tile_passes
