//===- LowerDataMovement.cpp - ops that move or make data, not compute ---===//
//
// Constants (initialised buffers; a splat is an immediate), the views that
// move no data (reshape, transpose, broadcast, slice: their strides are
// applied by the readers' access patterns), concatenation into one buffer,
// iota, and the collectives.
//
//===----------------------------------------------------------------------===//

#include "passes/tile/FunctionLowering.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::kgraph;
using namespace kiln::tile_passes;

namespace {

/// A constant's elements in the device type of its buffer.
ElementsAttr deviceConstant(DenseElementsAttr value, MemRefType bufferType) {
  auto shape =
      RankedTensorType::get(bufferType.getShape(), bufferType.getElementType());
  Type from = value.getElementType(), to = bufferType.getElementType();
  if (from == to) {
    return value.reshape(shape);
  }
  if (llvm::isa<IntegerType>(from)) {
    llvm::SmallVector<APInt> ints;
    llvm::SmallVector<APFloat> floats;
    for (APInt v : value.getValues<APInt>()) {
      int64_t x = from.isInteger(1) ? v.getZExtValue() : v.getSExtValue();
      if (to.isInteger(32)) {
        ints.push_back(APInt(32, static_cast<uint64_t>(x), true));
      } else {
        floats.push_back(APFloat(static_cast<float>(x)));
      }
    }
    return to.isInteger(32) ? DenseElementsAttr::get(shape, ints)
                            : DenseElementsAttr::get(shape, floats);
  }
  return value.reshape(shape);
}

} // namespace

LogicalResult FunctionLowering::lowerConstant(ConstantOp c) {
  auto dense = llvm::dyn_cast<DenseElementsAttr>(c.getValue());
  if (!dense) {
    return c.emitOpError("has a constant that is not dense elements");
  }
  if (dense.isSplat()) {
    Type t = dense.getElementType();
    double v = llvm::isa<FloatType>(t)
                   ? dense.getSplatValue<APFloat>().convertToDouble()
               : t.isInteger(1)
                   ? double(dense.getSplatValue<APInt>().getZExtValue())
                   : double(dense.getSplatValue<APInt>().getSExtValue());
    lowering.bind(c.getOutput(), TensorOperand{v, HbmView{}});
    return success();
  }
  MemRefType type = hbmTypeOf(c.getType());
  auto alloc =
      ktile::AllocOp::create(builder, c.getLoc(), type, StringAttr(),
                             deviceConstant(dense, type), IntegerAttr());
  bindView(c.getOutput(), viewOfBuffer(alloc, c.getType()));
  return success();
}

/// A reshape is a view of its input unless the merged dimensions do not
/// step through memory as one: then the input is copied first.
LogicalResult FunctionLowering::lowerReshape(ReshapeOp r) {
  TensorOperand in = lowering.operandOf(r.getInput());
  if (in.immediate) {
    lowering.bind(r.getOutput(), in);
    return success();
  }
  if (auto view = in.view.reshaped(r.getType().getShape())) {
    bindView(r.getOutput(), *view);
    return success();
  }
  HbmView view =
      lowering.materialize(in, tensorType(r.getInput()).getShape());
  view.shape.assign(r.getType().getShape().begin(),
                    r.getType().getShape().end());
  view.strides = rowMajorStrides(view.shape);
  bindView(r.getOutput(), view);
  return success();
}

LogicalResult FunctionLowering::lowerTranspose(TransposeOp t) {
  TensorOperand in = lowering.operandOf(t.getInput());
  if (in.immediate) {
    lowering.bind(t.getOutput(), in);
    return success();
  }
  bindView(t.getOutput(), in.view.transposed(t.getPermutation()));
  return success();
}

LogicalResult FunctionLowering::lowerBroadcast(BroadcastOp bc) {
  TensorOperand in = lowering.operandOf(bc.getInput());
  if (!in.immediate) {
    in.view = in.view.broadcastTo(bc.getType().getShape());
  }
  lowering.bind(bc.getOutput(), in);
  return success();
}

LogicalResult FunctionLowering::lowerSlice(SliceOp s) {
  TensorOperand in = lowering.operandOf(s.getInput());
  if (in.immediate) {
    lowering.bind(s.getOutput(), in);
    return success();
  }
  HbmView view = in.view;
  for (size_t d = 0; d < view.shape.size(); ++d) {
    view.offset += s.getStart()[d] * view.strides[d];
    view.shape[d] = s.getType().getShape()[d];
    view.strides[d] *= s.getStride()[d];
  }
  bindView(s.getOutput(), view);
  return success();
}

LogicalResult FunctionLowering::lowerConcat(ConcatOp c) {
  HbmView dst = freshBuffer(c.getOutput());
  int64_t dim = c.getDim(), at = 0;
  for (Value input : c.getInputs()) {
    int64_t size = tensorType(input).getShape()[dim];
    HbmView part = concatPart(dst, dim, at, size);
    at += size;
    // An input planConcats had computed in place is there already.
    const TensorOperand &in = lowering.operandOf(input);
    if (in.immediate || !(in.view == part)) {
      lowering.copyInto(in, part);
    }
  }
  bindView(c.getOutput(), dst);
  return success();
}

/// A 1-D iota as [rows, n / rows] tiles of GpSimd's iota, 4096 columns at a
/// time; loop nests that read it compute their part instead of loading it.
LogicalResult FunctionLowering::lowerIota(IotaOp iota) {
  auto type = iota.getType();
  if (type.getRank() != 1) {
    return iota.emitOpError("of rank > 1; run kgraph-decompose first");
  }
  HbmView dst = freshBuffer(iota.getOutput());
  int64_t n = type.getShape()[0], rows = 1;
  for (int64_t p = std::min<int64_t>(128, n); p > 1; --p) {
    if (n % p == 0) {
      rows = p;
      break;
    }
  }
  int64_t cols = n / rows;
  for (int64_t c0 = 0; c0 < cols; c0 += 4096) {
    int64_t cc = std::min<int64_t>(4096, cols - c0);
    Tile t = tb.tile(isa::Memory::Sbuf, dst.dtype, rows, cc);
    tb.iota(t, c0, cols, 1);
    tb.store(dst, c0, cols, 1, t);
  }
  bindView(iota.getOutput(), dst);
  lowering.iotaBuffers.insert(dst.buffer);
  return success();
}

/// A collective of `kind` from `input` into a fresh buffer for `output`,
/// each one partition of all its elements (an all-gather's output holds
/// the group's size times the input's).
LogicalResult FunctionLowering::lowerCollective(Value input, Value output,
                                                llvm::StringRef kind,
                                                llvm::StringRef group) {
  HbmView src = lowering.materialize(lowering.operandOf(input),
                                     tensorType(input).getShape());
  HbmView dst = freshBuffer(output);
  tb.emit("collective",
          {{dst.buffer, tb.pattern(dst, dst.offset, 1, 0, dst.elements(), 1)},
           {src.buffer, tb.pattern(src, src.offset, 1, 0, src.elements(), 1)}},
          collectiveArguments(kind, group));
  bindView(output, std::move(dst));
  return success();
}


llvm::SmallVector<NamedAttribute, 2>
FunctionLowering::collectiveArguments(llvm::StringRef kind,
                                      llvm::StringRef group) {
  llvm::SmallVector<NamedAttribute, 2> arguments = {
      builder.getNamedAttr("kind", builder.getStringAttr(kind))};
  if (group == isa::collectiveGroupName(isa::CollectiveGroup::Tensor)) {
    arguments.push_back(builder.getNamedAttr(
        "group", builder.getI64IntegerAttr(
                     static_cast<int64_t>(isa::CollectiveGroup::Tensor))));
  }
  return arguments;
}
