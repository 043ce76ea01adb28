//===- GraphEmitter.cpp - terse construction of kgraph ops ---------------===//

#include "passes/graph/GraphEmitter.h"

using namespace mlir;
using namespace kiln::kgraph;

namespace kiln::graph_passes {

Value GraphEmitter::splat(double value, llvm::ArrayRef<int64_t> shape,
                          Type elementType) {
  auto type = RankedTensorType::get(shape, elementType);
  Attribute element;
  if (llvm::isa<FloatType>(elementType)) {
    element = b.getFloatAttr(elementType, value);
  } else {
    element = b.getIntegerAttr(elementType, static_cast<int64_t>(value));
  }
  return ConstantOp::create(b, loc, DenseElementsAttr::get(type, element));
}

Value GraphEmitter::scalar(double value, Type elementType) {
  return splat(value, {}, elementType);
}

Value GraphEmitter::add(Value x, Value y) { return AddOp::create(b, loc, x, y); }
Value GraphEmitter::sub(Value x, Value y) { return SubOp::create(b, loc, x, y); }
Value GraphEmitter::mul(Value x, Value y) { return MulOp::create(b, loc, x, y); }
Value GraphEmitter::div(Value x, Value y) { return DivOp::create(b, loc, x, y); }
Value GraphEmitter::max(Value x, Value y) { return MaxOp::create(b, loc, x, y); }
Value GraphEmitter::logicalAnd(Value x, Value y) {
  return AndOp::create(b, loc, x, y);
}
Value GraphEmitter::logicalOr(Value x, Value y) {
  return OrOp::create(b, loc, x, y);
}
Value GraphEmitter::logicalNot(Value x) { return NotOp::create(b, loc, x); }
Value GraphEmitter::exp(Value x) { return ExpOp::create(b, loc, x); }
Value GraphEmitter::log(Value x) { return LogOp::create(b, loc, x); }
Value GraphEmitter::rsqrt(Value x) { return RsqrtOp::create(b, loc, x); }

Value GraphEmitter::compare(llvm::StringRef direction, Value x, Value y) {
  // compare wants operands of one type: broadcast them to a common shape.
  llvm::ArrayRef<int64_t> xs = shapeOf(x), ys = shapeOf(y);
  size_t rank = std::max(xs.size(), ys.size());
  llvm::SmallVector<int64_t> shape(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t a = i < rank - xs.size() ? 1 : xs[i - (rank - xs.size())];
    int64_t c = i < rank - ys.size() ? 1 : ys[i - (rank - ys.size())];
    shape[i] = std::max(a, c);
  }
  x = broadcast(x, shape);
  y = broadcast(y, shape);
  return CompareOp::create(b, loc, x, y, b.getStringAttr(direction));
}

Value GraphEmitter::select(Value c, Value t, Value f) {
  return SelectOp::create(b, loc, c, t, f);
}

Value GraphEmitter::cast(Value x, Type elementType) {
  if (elementOf(x) == elementType) {
    return x;
  }
  // A 16-bit float widened to f32 and narrowed back is itself: f32 holds
  // every bf16 and f16 value exactly.
  if (auto widened = x.getDefiningOp<CastOp>()) {
    Value source = widened.getInput();
    if (elementOf(source) == elementType && elementOf(x).isF32() &&
        (elementType.isBF16() || elementType.isF16())) {
      return source;
    }
  }
  return CastOp::create(b, loc,
                        RankedTensorType::get(shapeOf(x), elementType), x);
}

Value GraphEmitter::reshape(Value x, llvm::ArrayRef<int64_t> shape) {
  if (shapeOf(x) == shape) {
    return x;
  }
  return ReshapeOp::create(
      b, loc, RankedTensorType::get(shape, elementOf(x)), x);
}

Value GraphEmitter::transpose(Value x, llvm::ArrayRef<int64_t> permutation) {
  return TransposeOp::create(b, loc, x,
                             b.getDenseI64ArrayAttr(permutation));
}

Value GraphEmitter::slice(Value x, llvm::ArrayRef<int64_t> start,
                          llvm::ArrayRef<int64_t> limit,
                          llvm::ArrayRef<int64_t> stride) {
  llvm::ArrayRef<int64_t> shape = shapeOf(x);
  bool whole = true;
  for (size_t d = 0; d < shape.size(); ++d) {
    whole &= start[d] == 0 && limit[d] == shape[d] && stride[d] == 1;
  }
  if (whole) {
    return x;
  }
  return SliceOp::create(b, loc, x, b.getDenseI64ArrayAttr(start),
                         b.getDenseI64ArrayAttr(limit),
                         b.getDenseI64ArrayAttr(stride));
}

Value GraphEmitter::concat(llvm::ArrayRef<Value> values, int64_t dim) {
  llvm::SmallVector<Value> parts;
  for (Value v : values) {
    if (shapeOf(v)[dim] > 0) {
      parts.push_back(v);
    }
  }
  if (parts.size() == 1) {
    return parts.front();
  }
  return ConcatOp::create(b, loc, parts, b.getI64IntegerAttr(dim));
}

Value GraphEmitter::broadcast(Value x, llvm::ArrayRef<int64_t> shape) {
  if (shapeOf(x) == shape) {
    return x;
  }
  return BroadcastOp::create(
      b, loc, RankedTensorType::get(shape, elementOf(x)), x);
}

Value GraphEmitter::reduceSum(Value x, llvm::ArrayRef<int64_t> dims,
                              bool keepdim) {
  return ReduceSumOp::create(b, loc, x, b.getDenseI64ArrayAttr(dims),
                             b.getBoolAttr(keepdim));
}
Value GraphEmitter::reduceMax(Value x, llvm::ArrayRef<int64_t> dims,
                              bool keepdim) {
  return ReduceMaxOp::create(b, loc, x, b.getDenseI64ArrayAttr(dims),
                             b.getBoolAttr(keepdim));
}
Value GraphEmitter::reduceMin(Value x, llvm::ArrayRef<int64_t> dims,
                              bool keepdim) {
  return ReduceMinOp::create(b, loc, x, b.getDenseI64ArrayAttr(dims),
                             b.getBoolAttr(keepdim));
}

Value GraphEmitter::matmul(Value x, Value y, bool transposeA,
                           bool transposeB) {
  return MatmulOp::create(b, loc, x, y, b.getBoolAttr(transposeA),
                          b.getBoolAttr(transposeB));
}

Value GraphEmitter::iota1d(int64_t n, Type elementType) {
  return IotaOp::create(b, loc, RankedTensorType::get({n}, elementType),
                        b.getI64IntegerAttr(0));
}

Value GraphEmitter::oneHot(Value indices, int64_t classes, Type elementType) {
  int64_t n = shapeOf(indices)[0];
  Type indexType = elementOf(indices);
  Value column = reshape(indices, {n, 1});
  Value row = reshape(iota1d(classes, indexType), {1, classes});
  return cast(compare("eq", column, row), elementType);
}

Value GraphEmitter::zeroPaddingRows(Value rows, Value indices,
                                    int64_t padding) {
  if (padding < 0) {
    return rows;
  }
  // Zeroing [n, d] gradient rows costs less than zeroing [n, vocabulary]
  // one-hot rows.
  Value keep = cast(compare("ne", indices, scalar(padding, elementOf(indices))),
                    elementOf(rows));
  return mul(rows, reshape(keep, {shapeOf(indices)[0], 1}));
}

} // namespace kiln::graph_passes
