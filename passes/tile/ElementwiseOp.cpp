//===- ElementwiseOp.cpp - one elementwise op on a tile iteration ---------===//
//
// The instructions that compute one elementwise kgraph op on the tiles of
// one iteration of a loop nest (emitElementwiseOp): an ALU op on VectorE or
// GpSimd, an activation on ScalarE, or the few instructions of the ops
// neither engine computes in one (select, dropout, integer absolute value).
//
//===----------------------------------------------------------------------===//

#include "passes/tile/ElementwiseLoop.h"

#include "compiler/target/Random.h"

#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace kiln::kgraph;

namespace kiln::tile_passes {

double foldAlu(llvm::StringRef alu, double a, double b) {
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

namespace {

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


bool isInteger(const Tile &t) { return t.dtype == isa::DType::I32; }

/// Emits the instructions of one op whose destination is `dst`: scratch
/// tiles of its shape, and binary ALU ops whose operands may be immediates.
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
      tb.memset(out, foldAlu(alu, *a.immediate, *b.immediate));
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
      bool swappable =
          llvm::StringSwitch<bool>(alu)
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
LogicalResult emitDropout(OpEmitter &e, DropoutOp op,
                          llvm::ArrayRef<TileArg> args,
                          llvm::ArrayRef<Tile> dsts, const TileIndex &index) {
  TileBuilder &tb = e.tb;
  uint64_t elements =
      static_cast<uint64_t>(op.getInput().getType().getNumElements());
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

/// An activation on ScalarE, or on VectorE the few whose integer forms it
/// computes.
LogicalResult emitActivation(OpEmitter &e, Operation *op, llvm::StringRef func,
                             const TileArg &arg) {
  TileBuilder &tb = e.tb;
  const Tile &dst = e.dst;
  Tile x = e.asTile(arg);
  if (!isInteger(x) && !isInteger(dst)) {
    tb.activation(dst, x, func);
    return success();
  }
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
    return emitActivation(e, op, func, args[0]);
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

} // namespace kiln::tile_passes
