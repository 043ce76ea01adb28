//===- LowerElementwise.cpp - elementwise loop nests ----------------------===//
//
// A group of elementwise ops over one shape becomes one loop nest of tiles:
// the shape's dimensions are collapsed wherever every operand allows, the
// second-innermost goes on the partitions and the innermost along the free
// axis. Each tile iteration loads its inputs, runs every op in SBUF and
// stores the group's outputs.
//
//===----------------------------------------------------------------------===//

#include "passes/tile/Lowering.h"

#include <map>

#include "passes/graph/OpClasses.h"

#include "compiler/target/Random.h"

#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace kiln::kgraph;

namespace kiln::tile_passes {

namespace {

/// Dimensions of an iteration space with every view's strides, collapsed.
struct LoopSpace {
  Shape sizes;
  std::vector<Shape> strides; // per view
};

LoopSpace collapse(llvm::ArrayRef<int64_t> shape,
                   llvm::ArrayRef<Shape> viewStrides) {
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

/// The activation function, or the ALU op, that computes `op` (the
/// kgraph op declares it); empty when it has its own rule below.
llvm::StringRef activationName(Operation *op) {
  auto engine = llvm::dyn_cast<EngineElementwiseOp>(op);
  return engine ? engine.getActivationFunction() : llvm::StringRef();
}

llvm::StringRef aluName(Operation *op) {
  auto engine = llvm::dyn_cast<EngineElementwiseOp>(op);
  return engine ? engine.getAluOperation() : llvm::StringRef();
}

/// The comparison that holds for (b, a) when `name` holds for (a, b).
llvm::StringRef swapped(llvm::StringRef name) {
  return llvm::StringSwitch<llvm::StringRef>(name)
      .Case("lt", "gt")
      .Case("gt", "lt")
      .Case("le", "ge")
      .Case("ge", "le")
      .Default(name);
}

double fold(llvm::StringRef alu, double a, double b) {
  return llvm::StringSwitch<double>(alu)
      .Case("add", float(a) + float(b))
      .Case("sub", float(a) - float(b))
      .Case("mul", float(a) * float(b))
      .Case("div", float(a) / float(b))
      .Case("max", std::max(a, b))
      .Case("min", std::min(a, b))
      .Case("eq", a == b)
      .Case("ne", a != b)
      .Case("lt", a < b)
      .Case("le", a <= b)
      .Case("gt", a > b)
      .Case("ge", a >= b)
      .Default(NAN);
}

bool isInteger(const Tile &t) { return t.dtype == isa::DType::I32; }

class OpEmitter {
public:
  OpEmitter(TileBuilder &tb, const Tile &dst) : tb(tb), dst(dst) {}

  Tile asTile(const TileArg &arg) {
    if (!arg.immediate) {
      return arg.tile;
    }
    Tile t = scratch(isa::DType::F32);
    tb.memset(t, *arg.immediate);
    return t;
  }
  Tile scratch(isa::DType dtype) {
    return tb.tile(isa::Memory::Sbuf, dtype, dst.rows, dst.cols);
  }

  /// dst = a <alu> b for tiles or immediates.
  void binary(llvm::StringRef alu, const TileArg &a, const TileArg &b,
              const Tile &out) {
    if (a.immediate && b.immediate) {
      tb.memset(out, fold(alu, *a.immediate, *b.immediate));
      return;
    }
    if (b.immediate) {
      tb.tensorScalar(out, a.tile, alu, *b.immediate);
      return;
    }
    if (!a.immediate) {
      // One scalar per partition (a row statistic, a runtime scalar):
      // tensor_scalar reads one tile, where tensor_tensor's second input
      // doubles its time on the SBUF port.
      auto perPartition = [](const Tile &t) {
        return t.freeStride == 0 && t.run == 0;
      };
      // The engines take per-partition scalars in floating point only.
      bool floats = !isInteger(a.tile) && !isInteger(b.tile) && !isInteger(out);
      if (floats && perPartition(b.tile) && !perPartition(a.tile)) {
        tb.tensorScalar(out, a.tile, alu, "", b.tile, /*first=*/true);
        return;
      }
      bool swappable = llvm::StringSwitch<bool>(alu)
                           .Cases({"add", "mul", "max", "min", "eq", "ne"}, true)
                           .Cases({"lt", "gt", "le", "ge"}, true)
                           .Default(false);
      if (floats && perPartition(a.tile) && !perPartition(b.tile)) {
        if (swappable) {
          tb.tensorScalar(out, b.tile, swapped(alu), "", a.tile,
                          /*first=*/true);
          return;
        }
        if (alu == "sub") { // s - x = (x * -1) + s, exactly
          tb.tensorScalar(out, b.tile, "mul", "add", a.tile, /*first=*/false,
                          -1.0);
          return;
        }
      }
      tb.tensorTensor(out, a.tile, b.tile, alu);
      return;
    }
    double k = *a.immediate;
    if (alu == "sub") { // k - x = (x * -1) + k, exactly
      tb.tensorScalar(out, b.tile, "mul", -1.0, "add", k);
    } else if (alu == "div") {
      if (k == 1.0) {
        tb.activation(out, b.tile, "reciprocal");
      } else {
        Tile r = scratch(isa::DType::F32);
        tb.activation(r, b.tile, "reciprocal");
        tb.tensorScalar(out, r, "mul", k);
      }
    } else {
      tb.tensorScalar(out, b.tile, swapped(alu), k);
    }
  }

  TileBuilder &tb;
  Tile dst;
};

/// Dropout on the engines: GpSimd draws the uniform numbers of the tile's
/// counters, one tensor_scalar turns them into the keep-mask and another
/// into the mask scaled by 1 / (1 - p), which multiplies the input.
LogicalResult emitDropout(OpEmitter &e, DropoutOp op, llvm::ArrayRef<TileArg> args,
                          llvm::ArrayRef<Tile> dsts, const TileIndex &index) {
  TileBuilder &tb = e.tb;
  uint64_t elements = static_cast<uint64_t>(op.getInput().getType().getNumElements());
  auto stream = static_cast<uint64_t>(op.getStream());
  if (elements >= reference::kCountersPerStream ||
      stream >= (uint64_t(1) << 62) / reference::kCountersPerStream) {
    return op.emitOpError("has more elements or a larger stream than the "
                          "device's random counters cover");
  }
  Tile seed;
  if (args[1].immediate) {
    double value = *args[1].immediate;
    if (value < INT32_MIN || value > INT32_MAX) {
      return op.emitOpError("has a constant seed that does not fit the "
                            "device's i32");
    }
    seed = tb.tile(isa::Memory::Sbuf, isa::DType::I32, e.dst.rows, 1);
    tb.memset(seed, value);
  } else {
    // A 0-d seed is loaded once per partition and read with stride 0.
    seed = args[1].tile.columns(0, 1);
    seed.freeStride = 1;
  }
  Tile uniform = e.scratch(isa::DType::F32);
  // The counters run along the free axis within a segment and jump from
  // one segment to the next (a head's scores to the next head's): one
  // `random` draws the whole segments, each a run of its destination with
  // the jump as group step (GpSimd's fixed ~150 cycles paid once, not per
  // head), and a last partial one alone.
  int64_t base = static_cast<int64_t>(stream * reference::kCountersPerStream);
  int64_t segment = index.segmentCols > 0 ? index.segmentCols : uniform.cols;
  int64_t whole = uniform.cols / segment;
  if (whole > 0) {
    tb.random(uniform.columns(0, whole * segment), seed, base + index.first,
              index.rowStep, index.colStep, whole > 1 ? segment : 0,
              whole > 1 ? index.segmentStep - index.colStep * segment : 0);
  }
  if (whole * segment < uniform.cols) {
    tb.random(uniform.columns(whole * segment, uniform.cols - whole * segment),
              seed, base + index.first + whole * index.segmentStep,
              index.rowStep, index.colStep);
  }
  double p = op.getP().convertToDouble();
  double threshold = reference::dropoutThreshold(p);
  float scale = 1.0f / (1.0f - static_cast<float>(p));
  if (!op.getMask().use_empty()) {
    tb.tensorScalar(dsts[1], uniform, "ge", threshold);
  }
  if (op.getOutput().use_empty()) {
    return success(); // a mask recomputed for a backward pass
  }
  Tile scaled = e.scratch(isa::DType::F32);
  tb.tensorScalar(scaled, uniform, "ge", threshold, "mul", scale);
  e.binary("mul", args[0], TileArg{std::nullopt, scaled}, dsts[0]);
  return success();
}

/// Bytes per free-axis column that one iteration of the loop nest holds at
/// its peak: each input from its load to its last use, each result from
/// its op to its last use (an output until its store), and an op's scratch
/// tiles while it runs.
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

} // namespace

LogicalResult emitElementwiseOp(TileBuilder &tb, Operation *op,
                                llvm::ArrayRef<TileArg> args,
                                llvm::ArrayRef<Tile> dsts,
                                const TileIndex &index) {
  const Tile &dst = dsts[0];
  OpEmitter e(tb, dst);
  if (auto dropout = llvm::dyn_cast<DropoutOp>(op)) {
    return emitDropout(e, dropout, args, dsts, index);
  }
  if (llvm::StringRef alu = aluName(op); !alu.empty()) {
    TileArg a = args[0], b = args[1];
    if (llvm::isa<AndOp, OrOp>(op)) {
      // Logical operands may be any non-zero value: normalise to 0/1.
      for (TileArg *x : {&a, &b}) {
        if (x->immediate) {
          x->immediate = *x->immediate != 0.0;
        } else {
          Tile t = e.scratch(isa::DType::F32);
          tb.tensorScalar(t, x->tile, "ne", 0.0);
          x->tile = t;
        }
      }
    }
    e.binary(alu, a, b, dst);
    return success();
  }
  if (llvm::StringRef func = activationName(op); !func.empty()) {
    Tile x = e.asTile(args[0]);
    if (isInteger(x) || isInteger(dst)) {
      // ScalarE works on floating point; integer forms go to VectorE.
      if (llvm::isa<ReluOp>(op)) {
        tb.tensorScalar(dst, x, "max", 0.0);
        return success();
      }
      if (llvm::isa<AbsOp, SignOp>(op)) {
        Tile pos = e.scratch(isa::DType::F32), neg = e.scratch(isa::DType::F32);
        tb.tensorScalar(pos, x, "gt", 0.0);
        tb.tensorScalar(neg, x, "lt", 0.0);
        Tile sign = llvm::isa<SignOp>(op) ? dst : e.scratch(isa::DType::F32);
        tb.tensorTensor(sign, pos, neg, "sub");
        if (llvm::isa<AbsOp>(op)) {
          tb.tensorTensor(dst, x, sign, "mul");
        }
        return success();
      }
      return op->emitOpError("has no integer form on the engines");
    }
    tb.activation(dst, x, func);
    return success();
  }
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](NegOp) {
        tb.tensorScalar(dst, e.asTile(args[0]), "mul", -1.0);
        return success();
      })
      .Case([&](NotOp) {
        tb.tensorScalar(dst, e.asTile(args[0]), "eq", 0.0);
        return success();
      })
      .Case([&](CastOp cast) {
        Tile x = e.asTile(args[0]);
        if (cast.getOutput().getType().getElementType().isInteger(1)) {
          tb.tensorScalar(dst, x, "ne", 0.0);
        } else {
          tb.copy(dst, x);
        }
        return success();
      })
      .Case([&](SelectOp) {
        // c ? t : f = t*c + f*(1-c): exact for finite t and f (a product
        // with 1 or 0 is exact and adding 0 changes nothing).
        Tile c = e.asTile(args[0]);
        Tile taken = e.scratch(isa::DType::F32);
        Tile notC = e.scratch(isa::DType::F32);
        Tile other = e.scratch(isa::DType::F32);
        e.binary("mul", args[1], TileArg{std::nullopt, c}, taken);
        tb.tensorScalar(notC, c, "mul", -1.0, "add", 1.0);
        e.binary("mul", args[2], TileArg{std::nullopt, notC}, other);
        tb.tensorTensor(dst, taken, other, "add");
        return success();
      })
      .Case([&](GeluBackwardOp g) {
        Tile slope = e.scratch(isa::DType::F32);
        tb.activation(slope, e.asTile(args[1]),
                      g.getApproximate() == "tanh" ? "gelu_tanh_derivative"
                                                   : "gelu_derivative");
        e.binary("mul", args[0], TileArg{std::nullopt, slope}, dst);
        return success();
      })
      .Default([&](Operation *) {
        return op->emitOpError("is not an elementwise op the tile phase knows");
      });
}

namespace {

/// The values `ops` read that none of them defines, in first-use order.
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

/// The tile a store of a group value into `dtype` reads: an immediate
/// filled in, a tile read with stride 0 made whole (a store reads its
/// source's own layout), an f32 tile stored in bf16 rounded on an engine
/// (a converting DMA would move the f32 bytes).
Tile storedTile(TileBuilder &tb, const TileArg &arg, isa::DType dtype,
                int64_t rows, int64_t cols) {
  Tile src = arg.tile;
  if (arg.immediate) {
    src = tb.tile(isa::Memory::Sbuf, dtype, rows, cols);
    tb.memset(src, *arg.immediate);
  } else if (src.freeStride == 0 || src.run > 0 ||
             (src.dtype == isa::DType::F32 && dtype == isa::DType::BF16)) {
    bool narrow = src.dtype == isa::DType::F32 && dtype == isa::DType::BF16;
    Tile full = tb.tile(isa::Memory::Sbuf, narrow ? dtype : src.dtype, rows,
                        cols);
    tb.copy(full, src);
    src = full;
  }
  return src;
}

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
/// to square `x * sqrt(c)` in one activation (emitGroupOps). std::nullopt
/// otherwise.
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

/// Runs `ops` (in order) on one tile iteration of `rows` x `cols`: `tiles`
/// holds each operand from outside the ops, and receives every result.
/// With `chainShape` (a row chain's), the ops not of that shape compute
/// row values, `perRow` per partition: a reduction folds each row of its
/// input, and ops on row values work on one element per row.
LogicalResult emitGroupOps(TileBuilder &tb, llvm::ArrayRef<Operation *> ops,
                           llvm::DenseMap<Value, TileArg> &tiles, int64_t rows,
                           int64_t cols, const TileIndex &index,
                           llvm::ArrayRef<int64_t> chainShape = {},
                           int64_t perRow = 1) {
  llvm::SmallPtrSet<Operation *, 16> members(ops.begin(), ops.end());
  auto isRowValue = [&](Value v) {
    return !chainShape.empty() &&
           isRowValueShape(llvm::cast<RankedTensorType>(v.getType()).getShape(),
                           chainShape);
  };
  // Row sums ScalarE computed beside the values they sum (see below).
  llvm::DenseMap<Value, Tile> summedAlready;
  // Products `x * c` left to the one `(x * c) * x` that reads them (below):
  // the value x and the constant c.
  llvm::DenseMap<Value, std::pair<Value, double>> scaledForSquare;
  for (Operation *op : ops) {
    Value result = op->getResult(0);
    if (auto scaled = isRowValue(result)
                          ? std::nullopt
                          : scaledSquareFactor(op, members, tiles)) {
      scaledForSquare[result] = *scaled;
      continue;
    }
    // `(x * c) * x` or `(x * x) * c` with c >= 0 (AdamW's second moment,
    // (1 - beta2) g g): the square of x * sqrt(c), one ScalarE activation,
    // instead of a tensor_scalar and a tensor_tensor on the SBUF port
    // VectorE and GpSimd share. f32 rounds them differently in the last
    // bits (a few units in the last place, far inside 1e-5).
    if (auto mul = llvm::dyn_cast<MulOp>(op)) {
      auto factor = scaledForSquare.find(mul.getLhs());
      if (factor == scaledForSquare.end()) {
        factor = scaledForSquare.find(mul.getRhs());
      }
      if (factor != scaledForSquare.end()) {
        Value x = factor->second.first;
        Tile squares = tb.tile(isa::Memory::Sbuf, isa::DType::F32, rows, cols);
        tb.activation(squares, tiles.lookup(x).tile, "square",
                      std::sqrt(factor->second.second));
        tiles[result] = TileArg{std::nullopt, squares};
        continue;
      }
    }
    if (llvm::isa<ReshapeOp>(op)) {
      // In a chain, a reshape that keeps the rows (TileLowering checks)
      // reads the same tile.
      tiles[result] = tiles.lookup(op->getOperand(0));
      continue;
    }
    bool rowOp = isRowValue(result);
    if (llvm::isa<ReduceSumOp>(op) && perRow == 1) {
      if (auto sums = summedAlready.find(op->getOperand(0));
          sums != summedAlready.end()) {
        tiles[result] = TileArg{std::nullopt, sums->second};
        continue;
      }
    }
    // A square whose rows a sum of the chain folds (a layer norm's
    // variance): ScalarE squares and sums each row in one activation,
    // instead of a tensor_tensor and a tensor_reduce on the SBUF port
    // VectorE and GpSimd share. The engines compute in f32 and sum in
    // order either way, so the bits are the same.
    if (auto mul = llvm::dyn_cast<MulOp>(op);
        mul && perRow == 1 && !rowOp && mul.getLhs() == mul.getRhs() &&
        llvm::any_of(result.getUsers(), [&](Operation *user) {
          return llvm::isa<ReduceSumOp>(user) && members.contains(user);
        })) {
      TileArg x = tiles.lookup(mul.getLhs());
      auto type = llvm::cast<RankedTensorType>(result.getType());
      if (!x.immediate && x.tile.freeStride != 0 && x.tile.run == 0 &&
          x.tile.dtype != isa::DType::I32 &&
          deviceType(type.getElementType()) == isa::DType::F32) {
        Tile squares = tb.tile(isa::Memory::Sbuf, isa::DType::F32, rows, cols);
        Tile sums = tb.tile(isa::Memory::Sbuf, isa::DType::F32, rows, 1);
        tb.activationWithRowSums(squares, x.tile, "square", sums);
        tiles[result] = TileArg{std::nullopt, squares};
        summedAlready[result] = sums;
        continue;
      }
    }
    if (llvm::isa<ReduceSumOp, ReduceMaxOp, ReduceMinOp>(op)) {
      Tile in = storedTile(tb, tiles.lookup(op->getOperand(0)),
                           isa::DType::F32, rows, cols);
      Tile fold = tb.tile(isa::Memory::Sbuf, isa::DType::F32, rows, perRow);
      tb.reduce(fold, in, reductionAlu(op), cols / perRow);
      tiles[result] = TileArg{std::nullopt, fold};
      continue;
    }
    llvm::SmallVector<TileArg> args;
    for (Value v : op->getOperands()) {
      TileArg arg = tiles.lookup(v);
      Operation *def = v.getDefiningOp();
      bool computedRowValue = isRowValue(v) && def && members.contains(def);
      if (!arg.immediate && rowOp) {
        // A row value's operands are row values or scalars (planRowChains);
        // a scalar is loaded once and read with stride 0.
        if (!computedRowValue && arg.tile.freeStride != 0) {
          return op->emitOpError(
              "reads a value that its row chain does not hold per row");
        }
        if (!computedRowValue) {
          arg.tile.cols = perRow;
        }
      } else if (!arg.immediate && computedRowValue) {
        arg.tile = acrossRow(arg.tile, cols, perRow);
      }
      args.push_back(arg);
    }
    int64_t width = rowOp ? perRow : cols;
    auto type = llvm::cast<RankedTensorType>(result.getType());
    isa::DType dtype = deviceType(type.getElementType());
    // A cast between types the device stores alike moves nothing; nor
    // does widening bf16 to f32: the engines read bf16 and compute in f32,
    // so the cast's readers read the bf16 tile, exactly the f32 values.
    if (llvm::isa<CastOp>(op) && !args[0].immediate &&
        (args[0].tile.dtype == dtype ||
         (args[0].tile.dtype == isa::DType::BF16 &&
          dtype == isa::DType::F32)) &&
        !type.getElementType().isInteger(1)) {
      tiles[result] = args[0];
      continue;
    }
    llvm::SmallVector<Tile, 2> dsts;
    for (Value r : op->getResults()) {
      auto t = llvm::cast<RankedTensorType>(r.getType());
      dsts.push_back(tb.tile(isa::Memory::Sbuf,
                             deviceType(t.getElementType()), rows, width));
    }
    // An op against a few rows' values per partition (a batched product's
    // softmax, four heads to a partition): one op per row, each reading
    // its row's value as a per-partition scalar, a tensor_scalar that
    // ScalarE may run, instead of one tensor_tensor on the SBUF port
    // VectorE and GpSimd share (2 cycles an element there, against about
    // 1 and a fixed 64 on ScalarE).
    int64_t segment = cols / perRow;
    bool perSegment = !rowOp && perRow > 1 && perRow <= 8 && segment >= 128 &&
                      !llvm::isa<DropoutOp>(op) &&
                      llvm::any_of(args, [&](const TileArg &a) {
                        return !a.immediate && a.tile.run == segment;
                      });
    for (int64_t g = 0; g < (perSegment ? perRow : 1); ++g) {
      llvm::SmallVector<TileArg> segmentArgs(args);
      llvm::SmallVector<Tile, 2> segmentDsts(dsts);
      TileIndex at = index;
      if (perSegment) {
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
        for (Tile &d : segmentDsts) {
          d = d.columns(g * segment, segment);
        }
        at.first += index.segmentCols > 0 ? g * index.segmentStep
                                          : g * segment * index.colStep;
        at.segmentCols = 0;
      }
      if (failed(emitElementwiseOp(tb, op, segmentArgs, segmentDsts, at))) {
        return failure();
      }
    }
    for (auto [r, dst] : llvm::zip(op->getResults(), dsts)) {
      tiles[r] = TileArg{std::nullopt, dst};
    }
  }
  return success();
}

/// Loads `rows` x `cols` of an input from `origin`. A broadcast along the
/// free axis (every free stride 0) loads one column, read with stride 0;
/// one along the inner of two free dimensions (a statistic per short row)
/// loads one element per run, each read `run` times.
Tile loadInput(TileBuilder &tb, const HbmView &view, int64_t origin,
               int64_t rowStride, llvm::ArrayRef<FreeDim> free, int64_t rows,
               int64_t cols) {
  bool oneColumn =
      llvm::all_of(free, [](const FreeDim &d) { return d.stride == 0; });
  bool runs = !oneColumn && free.size() == 2 && free[1].stride == 0;
  Tile t = tb.tile(isa::Memory::Sbuf, view.dtype, rows,
                   oneColumn ? 1 : runs ? free[0].size : cols);
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

/// Folds the rows of a reduction's input tile (`perRow` runs each) and
/// combines them with `before` (the fold of the columns before, if any),
/// into `into` when given (the last columns), else a fresh tile.
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

} // namespace

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
    return llvm::isa<ReshapeOp>(user) && !user->use_empty() &&
           llvm::all_of(user->getUsers(),
                        [&](Operation *u) { return fused.contains(u); });
  };
  for (LoopOutput &out : outputs) {
    Operation *def = out.value.getDefiningOp();
    out.stored = !def || !inside.contains(def) ||
                 !llvm::all_of(out.value.getUsers(), handled);
  }
}

LogicalResult
Lowering::lowerElementwise(llvm::ArrayRef<Operation *> ops,
                           llvm::ArrayRef<int64_t> shape,
                           llvm::MutableArrayRef<LoopOutput> outputs,
                           llvm::MutableArrayRef<LoopReduction> reductions,
                           llvm::MutableArrayRef<LoopColumnSum> columnSums,
                           RowChain *chain) {
  llvm::SmallPtrSet<Operation *, 16> members(ops.begin(), ops.end());
  // External inputs in first-use order (a copy's source among them); group
  // values by their op.
  llvm::SetVector<Value> inputs = externalInputs(ops);
  for (const LoopOutput &out : outputs) {
    Operation *def = out.value.getDefiningOp();
    if (!(def && members.contains(def))) {
      inputs.insert(out.value);
    }
  }

  // Views in the iteration space: inputs then outputs.
  std::vector<HbmView> views;
  std::vector<bool> isImmediate;
  std::vector<double> immediates;
  for (Value v : inputs) {
    TensorOperand &operand = operandOf(v);
    isImmediate.push_back(operand.immediate.has_value());
    immediates.push_back(operand.immediate.value_or(0.0));
    views.push_back(operand.immediate ? HbmView{}
                                      : operand.view.broadcastTo(shape));
    if (operand.immediate) {
      views.back().shape.assign(shape.begin(), shape.end());
      views.back().strides.assign(shape.size(), 0);
    }
  }
  for (const LoopOutput &out : outputs) {
    views.push_back(out.dst);
  }
  std::vector<Shape> strides;
  std::vector<int64_t> offsets;
  for (const HbmView &v : views) {
    strides.push_back(v.strides);
    offsets.push_back(v.offset);
  }
  // Random numbers follow the row-major index of the group's shape, which
  // joins the collapse like one more view.
  bool needsIndex = llvm::any_of(
      ops, [](Operation *op) { return llvm::isa<DropoutOp>(op); });
  size_t indexView = strides.size();
  if (needsIndex) {
    strides.push_back(rowMajorStrides(shape));
    offsets.push_back(0);
  }
  // A reduction's result seen over the group's shape: its strides, 0 along
  // the reduced dimensions. After the collapse it is fused when exactly the
  // innermost dimension has stride 0, so that each row's reduction is a
  // fold along the free axis.
  size_t reductionView = strides.size();
  for (const LoopReduction &r : reductions) {
    Shape seen = rowMajorStrides(shape.take_front(r.from));
    seen.resize(shape.size(), 0);
    strides.push_back(seen);
    offsets.push_back(r.dst.offset);
  }
  // A row chain's row values, seen like its reductions: it runs in one
  // loop nest only where each row's reduced elements are its free axis's
  // innermost ones.
  size_t chainView = strides.size();
  if (chain) {
    Shape seen = rowMajorStrides(shape.take_front(chain->from));
    seen.resize(shape.size(), 0);
    strides.push_back(seen);
    offsets.push_back(0);
  }
  // A column sum seen over the group's shape: stride 1 along the last
  // dimension, 0 along the summed leading ones, so that the collapse keeps
  // the columns apart from the rows.
  size_t columnSumView = strides.size();
  for (size_t k = 0; k < columnSums.size(); ++k) {
    Shape seen(shape.size(), 0);
    seen.back() = 1;
    strides.push_back(seen);
    offsets.push_back(0);
  }
  LoopSpace space = collapse(shape, strides);
  size_t rank = space.sizes.size();
  // Whether the view folds along exactly the innermost dimension.
  auto foldsInnermost = [&](size_t view) {
    const Shape &s = space.strides[view];
    return s.back() == 0 && llvm::all_of(llvm::seq<size_t>(0, rank - 1),
                                         [&](size_t d) { return s[d] != 0; });
  };
  for (auto [k, r] : llvm::enumerate(reductions)) {
    r.fused = foldsInnermost(reductionView + k);
  }
  bool chainFolds = chain && foldsInnermost(chainView);
  skipOutputsOnlyReducedOnes(outputs, ops, reductions);

  // Free-axis chunk: the tiles one iteration holds at once within the
  // budget. A DMA costs a fixed ~2 us on top of its bytes, so the chunk is
  // as wide as the iteration's peak of live tiles allows, not sized for
  // every tile it ever allocates (AdamW's fifteen ops hold about eight).
  // Immediates and inputs every element reads alike take no column.
  llvm::SmallVector<bool> inputIsScalar(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    inputIsScalar[i] = isImmediate[i] ||
                       llvm::all_of(space.strides[i],
                                    [](int64_t s) { return s == 0; });
  }
  int64_t chunkLimit = std::clamp<int64_t>(
      sbufBudget /
          peakBytesPerColumn(ops, inputs.getArrayRef(), inputIsScalar, outputs,
                             chain ? shape : llvm::ArrayRef<int64_t>{}),
      64, 4096);
  // The partitions take the second-innermost dimension and the free axis
  // the innermost. Where the innermost is short (a head's 64 features: a
  // DMA per short row), the free axis spans it and one of the two
  // dimensions above, and the partitions take the other, the larger:
  // merging heads ([B, S, heads, d]) puts S on the partitions and
  // [heads x d] on the free axis, and so does splitting them
  // ([B, heads, S, d]). One DMA then moves up to 128 rows of both. Random
  // numbers follow a one-dimensional free index, so a dropout takes this
  // layout only where the two free dimensions are consecutive in it.
  const int64_t shortRun = 256;
  // Short rows of a two-dimensional space (a softmax's 128 keys, kept
  // apart from the rows above by a per-row statistic) go several to a
  // partition: [R, C] is seen as [R / g, g, C], and the layout below puts
  // g consecutive rows on each partition's free axis, so one iteration
  // moves 128 g rows, not 128.
  if (rank == 2 && space.sizes[1] < shortRun && space.sizes[0] > 128) {
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
      rank = 3;
    }
  }
  bool wide = false;
  size_t partitionDim = rank - 2, freeOuterDim = rank - 1;
  if (rank >= 3 && space.sizes[rank - 1] < shortRun) {
    size_t p = space.sizes[rank - 3] > space.sizes[rank - 2] ? rank - 3
                                                              : rank - 2;
    size_t f = p == rank - 3 ? rank - 2 : rank - 3;
    // Random numbers follow the row-major index along the free axis: its
    // two dimensions must be consecutive in that index.
    bool indexFollows =
        !needsIndex || (f == rank - 2 && space.strides[indexView][f] ==
                                             space.sizes[rank - 1] *
                                                 space.strides[indexView][rank - 1]);
    if (indexFollows && space.sizes[p] > space.sizes[f] &&
        space.sizes[f] * space.sizes[rank - 1] <= chunkLimit) {
      wide = true;
      partitionDim = p;
      freeOuterDim = f;
    }
  }
  int64_t rowsTotal = space.sizes[partitionDim];
  int64_t colsTotal = wide ? space.sizes[freeOuterDim] * space.sizes[rank - 1]
                           : space.sizes[rank - 1];
  int64_t chunks = (colsTotal + chunkLimit - 1) / chunkLimit;
  int64_t chunk = (colsTotal + chunks - 1) / chunks;
  if (chain && !(chainFolds && chunks == 1)) {
    chain->declined = true; // nothing emitted: its parts go one by one
    return success();
  }
  // Row values per partition: one per row, or wide, one per short row.
  int64_t perRow = wide ? space.sizes[freeOuterDim] : 1;
  // Column sums fold each tile's rows on TensorE: the rows must be on the
  // partitions (every dimension but the columns summed), the columns the
  // free axis in chunks of whole 128-column blocks (a matmul's result
  // partitions start at 0).
  int64_t bankColumns = tb.targetDescription().psumBankBytes / 4;
  if (!columnSums.empty() && !wide && (chunks == 1 || chunk % 128 == 0) &&
      (colsTotal + 127) / 128 <= bankColumns) {
    for (auto [k, c] : llvm::enumerate(columnSums)) {
      const Shape &st = space.strides[columnSumView + k];
      c.fused = space.sizes.size() == rank && st[rank - 1] == 1 &&
                space.sizes[rank - 1] == shape.back() &&
                llvm::all_of(llvm::seq<size_t>(0, rank - 1),
                             [&](size_t d) { return st[d] == 0; });
    }
    skipOutputsOnlyReducedOnes(outputs, ops, reductions, columnSums);
  }
  // View v's free dimensions for `cols` columns from column f0, and the
  // element offset of f0.
  auto freeDims = [&](size_t v, int64_t cols) {
    llvm::SmallVector<FreeDim, 2> free;
    if (wide) {
      free.push_back({space.strides[v][freeOuterDim],
                      space.sizes[freeOuterDim]});
      free.push_back({space.strides[v][rank - 1], space.sizes[rank - 1]});
    } else {
      free.push_back({space.strides[v][rank - 1], cols});
    }
    return free;
  };
  auto columnOffset = [&](size_t v, int64_t f0) {
    return wide ? 0 : f0 * space.strides[v][rank - 1];
  };

  Shape outer(space.sizes.begin(), space.sizes.end() - (wide ? 3 : 2));
  int64_t outerCount = 1;
  for (int64_t d : outer) {
    outerCount *= d;
  }
  // An input that every row block reads alike (a bias) is loaded once per
  // column chunk and kept, rather than once per iteration; one that every
  // element reads alike (AdamW's step scalars) once for the loop nest. A
  // big tensor's update would otherwise spend a 2 us DMA per iteration on
  // 512 bytes.
  std::vector<bool> invariant(inputs.size(), false);
  std::vector<bool> everywhere(inputs.size(), false);
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto zeroIn = [&](size_t from, size_t to) {
      return llvm::all_of(llvm::seq<size_t>(from, to),
                          [&](size_t d) { return space.strides[i][d] == 0; });
    };
    bool rowsAlike = !isImmediate[i] &&
                     space.strides[i][partitionDim] == 0 &&
                     zeroIn(0, outer.size());
    everywhere[i] = rowsAlike && zeroIn(0, rank);
    invariant[i] = everywhere[i] || (rowsAlike && chunks <= 4);
  }
  // Two inputs that are the same elements of the same buffer (a value and
  // a view of it that moves nothing) share one load: LayerNorm's backward
  // read its saved normalized input twice per row tile, 79 MB in BERT-base.
  std::vector<size_t> loadedAs(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    loadedAs[i] = i;
    for (size_t j = 0; j < i && !isImmediate[i]; ++j) {
      if (!isImmediate[j] && views[j] == views[i]) {
        loadedAs[i] = j;
        break;
      }
    }
  }
  std::map<std::pair<size_t, int64_t>, Tile> kept;
  std::vector<Tile> reductionSoFar(reductions.size());
  int64_t columnBlocks = (colsTotal + 127) / 128;
  std::vector<Tile> sums(columnSums.size());
  std::map<isa::DType, Tile> ones;
  for (auto [k, c] : llvm::enumerate(columnSums)) {
    if (c.fused) {
      sums[k] = tb.tile(isa::Memory::Psum, isa::DType::F32,
                        std::min<int64_t>(128, colsTotal), columnBlocks);
    }
  }
  for (int64_t o = 0; o < outerCount; ++o) {
    // Element offset of this outer index in every view.
    std::vector<int64_t> base(strides.size());
    for (size_t v = 0; v < strides.size(); ++v) {
      int64_t rest = o, offset = offsets[v];
      for (int64_t d = static_cast<int64_t>(outer.size()) - 1; d >= 0; --d) {
        offset += (rest % outer[d]) * space.strides[v][d];
        rest /= outer[d];
      }
      base[v] = offset;
    }
    // One result per row: the row blocks' results gather in one tile, a
    // column per block, and leave together (a store per block would move
    // 512 bytes for a DMA's fixed ~2 us).
    int64_t rowBlocks = (rowsTotal + 127) / 128;
    std::vector<Tile> gathered(reductions.size());
    for (auto [k, r] : llvm::enumerate(reductions)) {
      if (r.fused && !wide) {
        gathered[k] = tb.tile(isa::Memory::Sbuf, isa::DType::F32,
                              std::min<int64_t>(128, rowsTotal), rowBlocks);
      }
    }
    for (int64_t p0 = 0; p0 < rowsTotal; p0 += 128) {
      int64_t rows = std::min<int64_t>(128, rowsTotal - p0);
      for (int64_t f0 = 0; f0 < colsTotal; f0 += chunk) {
        int64_t cols = std::min(chunk, colsTotal - f0);
        llvm::DenseMap<Value, TileArg> tiles;
        for (size_t i = 0; i < inputs.size(); ++i) {
          if (isImmediate[i]) {
            tiles[inputs[i]] = TileArg{immediates[i], Tile{}};
            continue;
          }
          if (loadedAs[i] != i) {
            tiles[inputs[i]] = tiles.lookup(inputs[loadedAs[i]]);
            continue;
          }
          std::pair<size_t, int64_t> key{i, everywhere[i] ? 0 : f0};
          auto keptTile = kept.find(key);
          if (keptTile != kept.end()) {
            Tile t = keptTile->second.withRows(0, rows);
            if (everywhere[i]) {
              t.cols = cols; // one column, read with stride 0
            }
            tiles[inputs[i]] = TileArg{std::nullopt, t};
            continue;
          }
          int64_t rowStride = space.strides[i][partitionDim];
          // A kept tile serves every row block: all 128 partitions.
          int64_t loadRows = invariant[i] ? std::min<int64_t>(128, rowsTotal)
                                          : rows;
          int64_t origin = base[i] + p0 * rowStride + columnOffset(i, f0);
          Tile t;
          if (!wide && iotaBuffers.contains(views[i].buffer)) {
            // An iota's element is its index, so any view of it is an
            // affine function of the tile position: computed, not loaded
            // (the [tokens x vocabulary] compare of the embedding
            // gradient's one-hot matrix read the 30522-entry iota once per
            // row block, 125 MB).
            int64_t freeStride = space.strides[i][rank - 1];
            t = tb.tile(isa::Memory::Sbuf, views[i].dtype, loadRows,
                        freeStride == 0 ? 1 : cols);
            tb.iota(t, origin, rowStride, freeStride);
            if (freeStride == 0) {
              t.cols = cols;
              t.freeStride = 0;
            }
          } else {
            t = loadInput(tb, views[i], origin, rowStride, freeDims(i, cols),
                          loadRows, cols);
          }
          if (invariant[i]) {
            kept[key] = t;
          }
          tiles[inputs[i]] = TileArg{std::nullopt, t.withRows(0, rows)};
        }
        TileIndex index;
        if (needsIndex) {
          index = {base[indexView] +
                       p0 * space.strides[indexView][partitionDim] +
                       f0 * space.strides[indexView][rank - 1],
                   space.strides[indexView][partitionDim],
                   space.strides[indexView][rank - 1]};
        }
        if (failed(emitGroupOps(tb, ops, tiles, rows, cols, index,
                                chain ? shape : llvm::ArrayRef<int64_t>{},
                                perRow))) {
          return failure();
        }
        for (auto [k, out] : llvm::enumerate(outputs)) {
          if (!out.stored) {
            continue;
          }
          size_t v = inputs.size() + k;
          Tile src = storedTile(tb, tiles.lookup(out.value), out.dst.dtype,
                                rows, cols);
          int64_t rowStride = space.strides[v][partitionDim];
          tb.store(out.dst, base[v] + p0 * rowStride + columnOffset(v, f0),
                   rowStride, freeDims(v, cols), src);
        }
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
          bool first = o == 0 && p0 == 0;
          for (int64_t c0 = 0; c0 < cols; c0 += 128) {
            int64_t cc = std::min<int64_t>(128, cols - c0);
            tb.matmul(sums[k].columns((f0 + c0) / 128, 1).withRows(0, cc),
                      v.columns(c0, cc), column.withRows(0, rows),
                      /*accumulate=*/!first);
          }
        }
        // Each row's fold of this chunk, combined with the chunks before.
        // The last lands in the row block's column of `gathered`, or, wide
        // (a result per row and outer free index), is stored at once.
        for (auto [k, r] : llvm::enumerate(reductions)) {
          if (!r.fused) {
            continue;
          }
          bool last = f0 + cols >= colsTotal;
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
            fold = foldRows(tb, r, tiles, rows, cols, perRow,
                            f0 > 0 ? &reductionSoFar[k] : nullptr, into);
          }
          reductionSoFar[k] = fold;
          if (last && wide) {
            size_t v = reductionView + k;
            int64_t rowStride = space.strides[v][partitionDim];
            tb.store(r.dst, base[v] + p0 * rowStride, rowStride,
                     {FreeDim{space.strides[v][freeOuterDim], perRow}}, fold);
          }
        }
      }
    }
    for (auto [k, r] : llvm::enumerate(reductions)) {
      if (r.fused && !wide) {
        size_t v = reductionView + k;
        storeGathered(tb, r.dst, base[v], space.strides[v][partitionDim],
                      rowsTotal, gathered[k]);
      }
    }
  }
  for (auto [k, c] : llvm::enumerate(columnSums)) {
    if (c.fused) {
      // Rounded to the sum's type as the product's evacuation would.
      Tile out = tb.tile(isa::Memory::Sbuf, c.dst.dtype,
                         std::min<int64_t>(128, colsTotal), columnBlocks);
      tb.copy(out, sums[k]);
      storeGathered(tb, c.dst, c.dst.offset, 1, colsTotal, out);
    }
  }
  return success();
}

bool isRowValueShape(llvm::ArrayRef<int64_t> shape,
                     llvm::ArrayRef<int64_t> chainShape) {
  if (chainShape.back() == 1) {
    return shape != chainShape;
  }
  return shape.empty() || shape.back() != chainShape.back();
}

std::optional<HbmView> asRows(const HbmView &view) {
  if (view.shape.size() <= 2) {
    return view;
  }
  int64_t last = view.shape.back();
  return view.reshaped({view.elements() / last, last});
}

LogicalResult Lowering::epilogueTiles(
    const Epilogue &e, const Tile &product,
    llvm::function_ref<FailureOr<Tile>(Value, const HbmView &)> load,
    llvm::DenseMap<Value, TileArg> &tiles) {
  tiles[e.product] = TileArg{std::nullopt, product};
  // Inputs that are the same elements of the same buffer share one load.
  llvm::SmallVector<std::pair<HbmView, Value>, 8> loaded;
  for (Value v : externalInputs(e.ops)) {
    if (v == e.product) {
      continue;
    }
    TensorOperand &operand = operandOf(v);
    if (operand.immediate) {
      tiles[v] = TileArg{operand.immediate, Tile{}};
      continue;
    }
    const auto *same = llvm::find_if(
        loaded, [&](const auto &l) { return l.first.sameElements(operand.view); });
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

LogicalResult Lowering::emitEpilogue(Epilogue &e, const Tile &product,
                                     int64_t m0, int64_t n0, int64_t n) {
  int64_t rows = product.rows, cols = product.cols;
  auto shape = llvm::cast<RankedTensorType>(e.product.getType()).getShape();
  llvm::DenseMap<Value, TileArg> tiles;
  auto load = [&](Value v, const HbmView &input) -> FailureOr<Tile> {
    std::optional<HbmView> flat = asRows(input);
    if (!flat) {
      return mlir::emitError(v.getLoc())
             << "epilogue input is not a view of the product's rows";
    }
    HbmView view = flat->broadcastTo(shape);
    int64_t rowStride = view.strides[0], colStride = view.strides[1];
    // A bias reads every row alike: one [128, cols] tile per column
    // offset serves every row tile; a scalar one column for all.
    bool rowsAlike = rowStride == 0, scalar = rowsAlike && colStride == 0;
    std::pair<const void *, int64_t> key{v.getAsOpaquePointer(),
                                         scalar ? -1 : n0};
    auto keptTile = rowsAlike ? e.kept.find(key) : e.kept.end();
    Tile t;
    if (keptTile != e.kept.end()) {
      t = keptTile->second;
    } else {
      t = loadInput(tb, view, view.offset + m0 * rowStride + n0 * colStride,
                    rowStride, {FreeDim{colStride, cols}},
                    rowsAlike ? std::min<int64_t>(128, shape[0]) : rows, cols);
      if (rowsAlike) {
        e.kept.emplace(key, t);
      }
    }
    t = t.withRows(0, rows);
    if (scalar) {
      t.cols = cols; // one column, read with stride 0
    }
    return t;
  };
  if (failed(epilogueTiles(e, product, load, tiles))) {
    return failure();
  }
  TileIndex index{m0 * n + n0, n, 1};
  if (failed(emitGroupOps(tb, e.ops, tiles, rows, cols, index, e.chainShape))) {
    return failure();
  }
  // Column sums: each 128 columns of the value against a column of ones,
  // into the sum's column of `sums` (its partitions the columns).
  int64_t blocks = (n + 127) / 128;
  for (auto [k, c] : llvm::enumerate(e.columnSums)) {
    isa::DType type =
        deviceType(llvm::cast<RankedTensorType>(c.op->getOperand(1).getType()).getElementType());
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
  // A chain's row values read later: a column per row tile (the span is
  // the whole row, so each row tile passes once).
  for (auto [k, out] : llvm::enumerate(e.rowOutputs)) {
    tb.copy(e.rowGathered[k].columns(m0 / 128, 1).withRows(0, rows),
            tiles.lookup(out.value).tile);
  }
  for (auto [k, r] : llvm::enumerate(e.reductions)) {
    auto key = std::make_pair(k, m0);
    auto before = e.soFar.find(key);
    Tile into = n0 + cols >= n
                    ? e.gathered[k].columns(m0 / 128, 1).withRows(0, rows)
                    : Tile{};
    e.soFar[key] = foldRows(tb, r, tiles, rows, cols, 1,
                            before == e.soFar.end() ? nullptr : &before->second,
                            into);
  }
  for (const LoopOutput &out : e.outputs) {
    if (!out.stored) {
      continue;
    }
    Tile src = storedTile(tb, tiles.lookup(out.value), out.dst.dtype, rows,
                          cols);
    std::optional<HbmView> dst = asRows(out.dst);
    if (!dst) {
      return mlir::emitError(out.value.getLoc())
             << "epilogue output is not a view of the product's rows";
    }
    tb.store(*dst, dst->offset + m0 * dst->strides[0] + n0 * dst->strides[1],
             dst->strides[0], {FreeDim{dst->strides[1], cols}}, src);
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
  if (failed(epilogueTiles(e, product, load, tiles))) {
    return failure();
  }
  int64_t m = shape[rank - 2];
  TileIndex index{first * m * n, n, 1, n, m * n};
  if (failed(emitGroupOps(tb, e.ops, tiles, rows, cols, index, shape, count))) {
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
  footprint.bytesPerColumn = peakBytesPerColumn(
      e.ops, inputs.getArrayRef(), scalar, e.outputs, {});
  return footprint;
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
