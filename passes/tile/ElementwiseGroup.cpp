//===- ElementwiseGroup.cpp - a group's ops on one tile iteration ---------===//
//
// emitGroupOps runs the ops of an elementwise group (a loop nest's, a row
// chain's or a matmul epilogue's) on one tile iteration, in program order.
// Most ops go one by one to emitElementwiseOp; a few pairs take fewer
// instructions together (a square and its row sums, a scaled square); and
// in a row chain, reductions fold each row and the ops on their results
// work on one element per row.
//
//===----------------------------------------------------------------------===//

#include "passes/tile/AffinePredicate.h"
#include "passes/tile/ElementwiseLoop.h"

using namespace mlir;
using namespace kiln::kgraph;

namespace kiln::tile_passes {

llvm::SetVector<Value> externalInputs(llvm::ArrayRef<Operation *> ops) {
  llvm::SmallPtrSet<Operation *, 16> members(ops.begin(), ops.end());
  llvm::SetVector<Value> inputs;
  for (Operation *op : ops) {
    for (Value v : op->getOperands()) {
      Operation *def = v.getDefiningOp();
      if (!(def && members.contains(def))) {
        inputs.insert(v);
      }
    }
  }
  return inputs;
}

Tile storedTile(TileBuilder &tb, const TileArg &arg, isa::DType dtype,
                int64_t rows, int64_t cols) {
  Tile src = arg.tile;
  if (arg.immediate) {
    src = tb.tile(isa::Memory::Sbuf, dtype, rows, cols);
    tb.memset(src, *arg.immediate);
  } else if (src.freeStride == 0 || src.run > 0 ||
             (src.dtype == isa::DType::F32 && dtype == isa::DType::BF16)) {
    bool narrow = src.dtype == isa::DType::F32 && dtype == isa::DType::BF16;
    Tile full =
        tb.tile(isa::Memory::Sbuf, narrow ? dtype : src.dtype, rows, cols);
    tb.copy(full, src);
    src = full;
  }
  return src;
}

bool isRowValueShape(llvm::ArrayRef<int64_t> shape,
                     llvm::ArrayRef<int64_t> chainShape) {
  if (chainShape.back() == 1) {
    return shape != chainShape;
  }
  return shape.empty() || shape.back() != chainShape.back();
}

namespace {

/// A row value's tile, one element per row, as an operand of an op over
/// the rows' `cols` columns: each element read for each column of its row.
Tile acrossRow(Tile perRowTile, int64_t cols, int64_t perRow) {
  if (perRow == 1) {
    perRowTile.freeStride = 0;
  } else {
    perRowTile.run = cols / perRow;
  }
  perRowTile.cols = cols;
  return perRowTile;
}

/// For `op` = `x * c` or `x * x`, with c an immediate >= 0 and x an f32
/// tile read per element, whose one reader is a member that makes it
/// `(x * c) * x` or `(x * x) * c` (either order): x and c, for that reader
/// to square `x * sqrt(c)` in one activation (GroupEmitter::squareScaled);
/// std::nullopt otherwise.
std::optional<std::pair<Value, double>>
scaledSquareFactor(Operation *op,
                   const llvm::SmallPtrSetImpl<Operation *> &members,
                   const llvm::DenseMap<Value, TileArg> &tiles) {
  auto mul = llvm::dyn_cast<MulOp>(op);
  if (!mul || !mul.getResult().hasOneUse()) {
    return std::nullopt;
  }
  auto outer = llvm::dyn_cast<MulOp>(*mul.getResult().getUsers().begin());
  if (!outer || !members.contains(outer) || outer.getType() != mul.getType() ||
      deviceType(mul.getType().getElementType()) != isa::DType::F32) {
    return std::nullopt;
  }
  Value other =
      outer.getLhs() == mul.getResult() ? outer.getRhs() : outer.getLhs();
  auto factor = [&](Value x,
                    Value c) -> std::optional<std::pair<Value, double>> {
    TileArg xArg = tiles.lookup(x), cArg = tiles.lookup(c);
    if (!cArg.immediate || *cArg.immediate < 0 || xArg.immediate ||
        !xArg.tile.buffer || xArg.tile.freeStride == 0 || xArg.tile.run != 0 ||
        xArg.tile.dtype == isa::DType::I32) {
      return std::nullopt;
    }
    return std::pair(x, *cArg.immediate);
  };
  if (mul.getLhs() == mul.getRhs()) {
    return factor(mul.getLhs(), other);
  }
  for (auto [x, c] : {std::pair(mul.getLhs(), mul.getRhs()),
                      std::pair(mul.getRhs(), mul.getLhs())}) {
    if (x == other) {
      if (auto found = factor(x, c)) {
        return found;
      }
    }
  }
  return std::nullopt;
}

/// The ops of a group on one tile iteration, one at a time: the tiles of the
/// values so far, and what one op leaves for a later one to finish.
class GroupEmitter {
public:
  GroupEmitter(TileBuilder &tb, llvm::ArrayRef<Operation *> ops,
               llvm::DenseMap<Value, TileArg> &tiles, int64_t rows,
               int64_t cols, const TileIndex &index,
               llvm::ArrayRef<int64_t> chainShape, int64_t perRow,
               Value ownedInput)
      : tb(tb), members(ops.begin(), ops.end()), tiles(tiles), rows(rows),
        cols(cols), index(index), chainShape(chainShape), perRow(perRow),
        ownedInput(ownedInput) {}

  LogicalResult emit(Operation *op);

private:
  bool isRowValue(Value v) const {
    return !chainShape.empty() &&
           isRowValueShape(llvm::cast<RankedTensorType>(v.getType()).getShape(),
                           chainShape);
  }
  // Each of these computes `op` when its pattern applies and says whether
  // it did; emit tries them in turn.
  bool deferScaledFactor(Operation *op);
  bool squareScaled(Operation *op);
  bool forwardReshape(Operation *op);
  FailureOr<bool> affineSelect(SelectOp select);
  bool selectsInPlace(SelectOp select, Value value, const Tile &tile,
                      isa::DType dtype) const;
  void selectColumnsInPlace(const Tile &tile, const AffineBox &box,
                            llvm::StringRef compare, double fill);
  bool reuseRowSums(Operation *op);
  bool valuesWithRowSums(Operation *op);
  bool foldReduction(Operation *op);
  bool forwardCast(Operation *op, llvm::ArrayRef<TileArg> args);

  FailureOr<llvm::SmallVector<TileArg>> operandsOf(Operation *op);
  LogicalResult emitOnTiles(Operation *op, llvm::ArrayRef<TileArg> args);
  LogicalResult emitPerSegment(Operation *op, llvm::ArrayRef<TileArg> args,
                               llvm::ArrayRef<Tile> dsts);

  TileBuilder &tb;
  llvm::SmallPtrSet<Operation *, 16> members;
  llvm::DenseMap<Value, TileArg> &tiles;
  int64_t rows, cols;
  const TileIndex &index;
  llvm::ArrayRef<int64_t> chainShape;
  int64_t perRow;
  /// An input whose tile is this iteration's alone (see emitGroupOps).
  Value ownedInput;
  /// Row sums ScalarE computed beside the values they sum
  /// (valuesWithRowSums).
  llvm::DenseMap<Value, Tile> summedAlready;
  /// Products `x * c` left to the one `(x * c) * x` that reads them
  /// (squareScaled): the value x and the constant c.
  llvm::DenseMap<Value, std::pair<Value, double>> scaledForSquare;
};

LogicalResult GroupEmitter::emit(Operation *op) {
  // A select on a condition the loop nest did not load (computesCondition).
  if (auto select = llvm::dyn_cast<SelectOp>(op)) {
    TileArg cond = tiles.lookup(select.getCondition());
    if (!cond.immediate && !cond.tile.buffer) {
      FailureOr<bool> done = affineSelect(select);
      if (failed(done) || *done) {
        return failure(failed(done));
      }
    }
  }
  if (deferScaledFactor(op) || squareScaled(op) || forwardReshape(op) ||
      reuseRowSums(op) || valuesWithRowSums(op) || foldReduction(op)) {
    return success();
  }
  FailureOr<llvm::SmallVector<TileArg>> args = operandsOf(op);
  if (failed(args)) {
    return failure();
  }
  if (forwardCast(op, *args)) {
    return success();
  }
  return emitOnTiles(op, *args);
}

/// Leaves `x * c` to the `(x * c) * x` that reads it (squareScaled).
bool GroupEmitter::deferScaledFactor(Operation *op) {
  Value result = op->getResult(0);
  if (isRowValue(result)) {
    return false;
  }
  std::optional<std::pair<Value, double>> scaled =
      scaledSquareFactor(op, members, tiles);
  if (!scaled) {
    return false;
  }
  scaledForSquare[result] = *scaled;
  return true;
}

/// `(x * c) * x` or `(x * x) * c` with c >= 0 (AdamW's second moment,
/// (1 - beta2) g g): the square of x * sqrt(c), one ScalarE activation,
/// instead of a tensor_scalar and a tensor_tensor on the SBUF port VectorE
/// and GpSimd share. f32 rounds them differently in the last bits (a few
/// units in the last place, far inside 1e-5).
bool GroupEmitter::squareScaled(Operation *op) {
  auto mul = llvm::dyn_cast<MulOp>(op);
  if (!mul) {
    return false;
  }
  auto factor = scaledForSquare.find(mul.getLhs());
  if (factor == scaledForSquare.end()) {
    factor = scaledForSquare.find(mul.getRhs());
  }
  if (factor == scaledForSquare.end()) {
    return false;
  }
  Value x = factor->second.first;
  Tile squares = tb.tile(isa::Memory::Sbuf, isa::DType::F32, rows, cols);
  tb.activation(squares, tiles.lookup(x).tile, "square",
                std::sqrt(factor->second.second));
  tiles[op->getResult(0)] = TileArg{std::nullopt, squares};
  return true;
}

/// In a chain, a reshape that keeps the rows (TileLowering checks) reads
/// the same tile.
bool GroupEmitter::forwardReshape(Operation *op) {
  if (!llvm::isa<ReshapeOp>(op)) {
    return false;
  }
  tiles[op->getResult(0)] = tiles.lookup(op->getOperand(0));
  return true;
}

/// A select whose condition the loop nest did not load
/// (computesCondition): affine_select computes the condition from each
/// element's position, keeping the branch that is a tile and filling in
/// the constant one. When neither branch or both are immediates (a
/// constant the canonicalizer left as a view), the condition's tile is
/// computed instead (an iota and a comparison a box) and the select runs
/// as any other: false then.
FailureOr<bool> GroupEmitter::affineSelect(SelectOp select) {
  auto type = llvm::cast<RankedTensorType>(select.getOutput().getType());
  std::optional<AffinePredicate> predicate =
      affinePredicateOf(select.getCondition(), type.getShape());
  std::optional<llvm::SmallVector<AffineBox, 1>> boxes;
  if (predicate) {
    boxes = affineBoxes(*predicate, type.getShape(), index, rows, cols);
  }
  if (!boxes) {
    return select.emitOpError(
        "has a condition its group did not load that is not affine on this "
        "tile (a compiler bug: computesCondition admitted it)");
  }
  TileArg onTrue = tiles.lookup(select.getOnTrue());
  TileArg onFalse = tiles.lookup(select.getOnFalse());
  bool fillTrue = onTrue.immediate.has_value();
  const TileArg &kept = fillTrue ? onFalse : onTrue;
  const TileArg &fill = fillTrue ? onTrue : onFalse;
  if (!fill.immediate || kept.immediate) {
    Tile positions = tb.tile(isa::Memory::Sbuf, isa::DType::I32, rows, cols);
    Tile cond = tb.tile(isa::Memory::Sbuf, isa::DType::F32, rows, cols);
    for (const AffineBox &box : *boxes) {
      Tile at = positions.withRows(box.p0, box.rows).columns(box.f0, box.cols);
      tb.iota(at, box.base, box.partitionStep, box.freeStep);
      tb.tensorScalar(cond.withRows(box.p0, box.rows).columns(box.f0, box.cols),
                      at, predicate->compare, 0.0);
    }
    tiles[select.getCondition()] = TileArg{std::nullopt, cond};
    return false;
  }
  llvm::StringRef compare =
      fillTrue ? negatedComparison(predicate->compare) : predicate->compare;
  isa::DType dtype = deviceType(type.getElementType());
  Value keptValue = fillTrue ? select.getOnFalse() : select.getOnTrue();
  if (selectsInPlace(select, keptValue, kept.tile, dtype)) {
    for (const AffineBox &box : *boxes) {
      selectColumnsInPlace(kept.tile, box, compare, *fill.immediate);
    }
    tiles[select.getOutput()] = kept;
    return true;
  }
  Tile dst = tb.tile(isa::Memory::Sbuf, dtype, rows, cols);
  for (const AffineBox &box : *boxes) {
    tb.affineSelect(dst.withRows(box.p0, box.rows).columns(box.f0, box.cols),
                    kept.tile.withRows(box.p0, box.rows).columns(box.f0, box.cols),
                    compare, *fill.immediate, box.base, box.partitionStep,
                    box.freeStep);
  }
  tiles[select.getOutput()] = TileArg{std::nullopt, dst};
  return true;
}

/// Whether `select` may overwrite the tile of its kept branch `value`:
/// the tile is this iteration's own (the value is computed by the group,
/// or is the product whose tile an epilogue runs on, not an input a loop
/// nest or an epilogue may load once for every iteration), of the select's
/// shape, the select is the value's one reader, no other value shares the
/// tile (a forwarded reshape or cast), and the tile holds every element
/// once in the select's type.
bool GroupEmitter::selectsInPlace(SelectOp select, Value value,
                                  const Tile &tile, isa::DType dtype) const {
  Operation *def = value.getDefiningOp();
  bool ownTile = (def && members.contains(def)) || value == ownedInput;
  return ownTile && value.getType() == select.getOutput().getType() &&
         value.hasOneUse() && tile.dtype == dtype && tile.freeStride == 1 &&
         tile.run == 0 && tile.rows == rows && tile.cols == cols &&
         llvm::none_of(tiles, [&](const auto &entry) {
           return entry.first != value &&
                  entry.second.tile.buffer == tile.buffer;
         });
}

/// The select of `box` on `tile` in place: columns that every row of the
/// box keeps need nothing, columns that none keeps are filled by a
/// memset, and only the columns between (a causal mask's diagonal block)
/// go through affine_select. On a row tile of a causal softmax over 2048
/// keys that is 128 columns instead of 2048.
void GroupEmitter::selectColumnsInPlace(const Tile &tile, const AffineBox &box,
                                        llvm::StringRef compare, double fill) {
  enum class Kind { Kept, Mixed, Filled };
  // The expression's extremes over the box's rows at column i, which
  // decide an ordering comparison (not eq or ne) for every row.
  bool ordering = compare != "eq" && compare != "ne";
  int64_t rowSpan = box.partitionStep * (box.rows - 1);
  auto kindOf = [&](int64_t i) {
    if (!ordering) {
      return Kind::Mixed;
    }
    int64_t at = box.base + box.freeStep * i;
    bool low = foldAlu(compare, at + std::min<int64_t>(0, rowSpan), 0) != 0;
    bool high = foldAlu(compare, at + std::max<int64_t>(0, rowSpan), 0) != 0;
    return low && high     ? Kind::Kept
           : !low && !high ? Kind::Filled
                           : Kind::Mixed;
  };
  Tile rowsOfBox = tile.withRows(box.p0, box.rows);
  for (int64_t i0 = 0; i0 < box.cols;) {
    Kind kind = kindOf(i0);
    int64_t i1 = i0 + 1;
    while (i1 < box.cols && kindOf(i1) == kind) {
      ++i1;
    }
    Tile part = rowsOfBox.columns(box.f0 + i0, i1 - i0);
    if (kind == Kind::Filled) {
      tb.memset(part, fill);
    } else if (kind == Kind::Mixed) {
      tb.affineSelect(part, part, compare, fill,
                      box.base + box.freeStep * i0, box.partitionStep,
                      box.freeStep);
    }
    i0 = i1;
  }
}

/// A sum of rows valuesWithRowSums has summed already.
bool GroupEmitter::reuseRowSums(Operation *op) {
  if (!llvm::isa<ReduceSumOp>(op) || perRow != 1) {
    return false;
  }
  auto sums = summedAlready.find(op->getOperand(0));
  if (sums == summedAlready.end()) {
    return false;
  }
  tiles[op->getResult(0)] = TileArg{std::nullopt, sums->second};
  return true;
}

/// A square or an activation whose rows a sum of the chain folds (a layer
/// norm's variance, softmax's exponentials): ScalarE writes each row's
/// sum (`reduce_dst`) as it computes the values, instead of a
/// `tensor_reduce` on the SBUF port VectorE and GpSimd share (which
/// paces attention's softmax beside GpSimd's mask and max subtraction).
/// The engines compute in f32 and sum in order either way, so an f32
/// value's sums have the same bits; a bf16 activation's sum is of its
/// values before they are rounded to the tile (within bf16's rounding of
/// the sum; exp only). A bf16 square keeps the two instructions.
bool GroupEmitter::valuesWithRowSums(Operation *op) {
  Value result = op->getResult(0);
  if (perRow != 1 || isRowValue(result) || op->getNumResults() != 1 ||
      llvm::none_of(result.getUsers(), [&](Operation *user) {
        return llvm::isa<ReduceSumOp>(user) && members.contains(user);
      })) {
    return false;
  }
  auto mul = llvm::dyn_cast<MulOp>(op);
  auto engine = llvm::dyn_cast<EngineElementwiseOp>(op);
  llvm::StringRef func =
      mul && mul.getLhs() == mul.getRhs()       ? llvm::StringRef("square")
      : engine && op->getNumOperands() == 1 ? engine.getActivationFunction()
                                               : llvm::StringRef();
  auto type = llvm::cast<RankedTensorType>(result.getType());
  isa::DType dtype = deviceType(type.getElementType());
  // An activation's rows short of 512 columns: ScalarE's fixed cost a
  // row outweighs the fold it takes over (random graphs got slower). A
  // narrower activation than f32 only when it is exp: its values are
  // positive, so the sum of the unrounded ones is within the sum's own
  // rounding of the rounded ones' (a function of either sign could cancel).
  bool narrow = dtype != isa::DType::F32;
  if (func.empty() || dtype == isa::DType::I32 ||
      (mul ? narrow : cols < 512 || (narrow && func != "exp"))) {
    return false;
  }
  TileArg x = tiles.lookup(op->getOperand(0));
  if (x.immediate || x.tile.freeStride == 0 || x.tile.run != 0 ||
      x.tile.dtype == isa::DType::I32) {
    return false;
  }
  Tile values = tb.tile(isa::Memory::Sbuf, dtype, rows, cols);
  Tile sums = tb.tile(isa::Memory::Sbuf, isa::DType::F32, rows, 1);
  tb.activationWithRowSums(values, x.tile, func, sums);
  tiles[result] = TileArg{std::nullopt, values};
  summedAlready[result] = sums;
  return true;
}

/// A reduction folds each row's `cols / perRow` columns of its input.
bool GroupEmitter::foldReduction(Operation *op) {
  if (!llvm::isa<ReduceSumOp, ReduceMaxOp, ReduceMinOp>(op)) {
    return false;
  }
  Tile in = storedTile(tb, tiles.lookup(op->getOperand(0)), isa::DType::F32,
                       rows, cols);
  Tile fold = tb.tile(isa::Memory::Sbuf, isa::DType::F32, rows, perRow);
  tb.reduce(fold, in, reductionAlu(op), cols / perRow);
  tiles[op->getResult(0)] = TileArg{std::nullopt, fold};
  return true;
}

/// The operands of `op` as it reads them: a row op reads one element per
/// row, any other op reads a row value once for each column of its row.
FailureOr<llvm::SmallVector<TileArg>> GroupEmitter::operandsOf(Operation *op) {
  bool rowOp = isRowValue(op->getResult(0));
  llvm::SmallVector<TileArg> args;
  for (Value v : op->getOperands()) {
    TileArg arg = tiles.lookup(v);
    Operation *def = v.getDefiningOp();
    bool computedRowValue = isRowValue(v) && def && members.contains(def);
    if (!arg.immediate && rowOp) {
      // A row value's operands are row values or scalars (planRowChains);
      // a scalar is loaded once and read with stride 0.
      if (!computedRowValue && arg.tile.freeStride != 0) {
        op->emitOpError(
            "reads a value that its row chain does not hold per row");
        return failure();
      }
      if (!computedRowValue) {
        arg.tile.cols = perRow;
      }
    } else if (!arg.immediate && computedRowValue) {
      arg.tile = acrossRow(arg.tile, cols, perRow);
    }
    args.push_back(arg);
  }
  return args;
}

/// A cast between types the device stores alike moves nothing; nor does
/// widening bf16 to f32: the engines read bf16 and compute in f32, so the
/// cast's readers read the bf16 tile, exactly the f32 values.
bool GroupEmitter::forwardCast(Operation *op, llvm::ArrayRef<TileArg> args) {
  if (!llvm::isa<CastOp>(op) || args[0].immediate) {
    return false;
  }
  Value result = op->getResult(0);
  auto type = llvm::cast<RankedTensorType>(result.getType());
  isa::DType dtype = deviceType(type.getElementType());
  isa::DType from = args[0].tile.dtype;
  if (!(from == dtype ||
        (from == isa::DType::BF16 && dtype == isa::DType::F32)) ||
      type.getElementType().isInteger(1)) {
    return false;
  }
  tiles[result] = args[0];
  return true;
}

/// Emits `op` on fresh destination tiles, one per result.
LogicalResult GroupEmitter::emitOnTiles(Operation *op,
                                        llvm::ArrayRef<TileArg> args) {
  bool rowOp = isRowValue(op->getResult(0));
  int64_t width = rowOp ? perRow : cols;
  llvm::SmallVector<Tile, 2> dsts;
  for (Value r : op->getResults()) {
    auto t = llvm::cast<RankedTensorType>(r.getType());
    dsts.push_back(tb.tile(isa::Memory::Sbuf, deviceType(t.getElementType()),
                           rows, width));
  }
  // An op against a few rows' values per partition (a batched product's
  // softmax, four heads to a partition): one op per row, each reading its
  // row's value as a per-partition scalar, a tensor_scalar that ScalarE
  // may run, instead of one tensor_tensor on the SBUF port VectorE and
  // GpSimd share (2 cycles an element there, against about 1 and a fixed
  // 64 on ScalarE).
  int64_t segment = cols / perRow;
  bool perSegment = !rowOp && perRow > 1 && perRow <= 8 && segment >= 128 &&
                    !llvm::isa<DropoutOp>(op) &&
                    llvm::any_of(args, [&](const TileArg &a) {
                      return !a.immediate && a.tile.run == segment;
                    });
  if (failed(perSegment ? emitPerSegment(op, args, dsts)
                        : emitElementwiseOp(tb, op, args, dsts, index))) {
    return failure();
  }
  for (auto [r, dst] : llvm::zip(op->getResults(), dsts)) {
    tiles[r] = TileArg{std::nullopt, dst};
  }
  return success();
}

/// Emits `op` once per row of each partition (see emitOnTiles), on that
/// row's columns of every tile.
LogicalResult GroupEmitter::emitPerSegment(Operation *op,
                                           llvm::ArrayRef<TileArg> args,
                                           llvm::ArrayRef<Tile> dsts) {
  int64_t segment = cols / perRow;
  for (int64_t g = 0; g < perRow; ++g) {
    llvm::SmallVector<TileArg> segmentArgs(args);
    for (TileArg &a : segmentArgs) {
      if (a.immediate) {
        continue;
      }
      a.tile = a.tile.columns(g * segment, segment);
      if (a.tile.run == segment) { // the row's value, read per column
        a.tile.run = 0;
        a.tile.freeStride = 0;
      }
    }
    llvm::SmallVector<Tile, 2> segmentDsts;
    for (const Tile &d : dsts) {
      segmentDsts.push_back(d.columns(g * segment, segment));
    }
    TileIndex at = index;
    at.first += index.segmentCols > 0 ? g * index.segmentStep
                                      : g * segment * index.colStep;
    at.segmentCols = 0;
    if (failed(emitElementwiseOp(tb, op, segmentArgs, segmentDsts, at))) {
      return failure();
    }
  }
  return success();
}

} // namespace

LogicalResult emitGroupOps(TileBuilder &tb, llvm::ArrayRef<Operation *> ops,
                           llvm::DenseMap<Value, TileArg> &tiles, int64_t rows,
                           int64_t cols, const TileIndex &index,
                           llvm::ArrayRef<int64_t> chainShape, int64_t perRow,
                           Value ownedInput) {
  GroupEmitter emitter(tb, ops, tiles, rows, cols, index, chainShape, perRow,
                       ownedInput);
  for (Operation *op : ops) {
    if (failed(emitter.emit(op))) {
      return failure();
    }
  }
  return success();
}

} // namespace kiln::tile_passes
