//===- ShapeKernels.cpp - data movement and indexing ops on the host -----===//

#include "compiler/reference/Kernels.h"

#include "dialects/kgraph/KGraphDialect.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace kiln::kgraph;

namespace kiln::reference {

namespace {

/// Copies the strided view of `in` (base offset, per-dim strides) into a new
/// tensor of the op's result type.
HostTensor gatherStrided(Operation *op, const HostTensor &in, int64_t base,
                         const Shape &strides) {
  HostTensor out = emptyLike(op->getResult(0));
  forEachStrided<1>(out.shape, {strides}, [&](int64_t i, const auto &off) {
    out.data[i] = in.data[base + off[0]];
  });
  return out;
}

/// Checks an index value against [0, size) and names it in the error.
llvm::Error checkIndex(Operation *op, double index, int64_t size) {
  if (index < 0 || index >= static_cast<double>(size)) {
    return kernelError(op, "index " + llvm::Twine(static_cast<int64_t>(index)) +
                               " is out of range [0, " + llvm::Twine(size) +
                               ")");
  }
  return llvm::Error::success();
}

HostTensor constant(ConstantOp op) {
  HostTensor out = emptyLike(op.getOutput());
  auto dense = llvm::cast<DenseElementsAttr>(op.getValue());
  Type element = dense.getElementType();
  int64_t i = 0;
  if (llvm::isa<FloatType>(element)) {
    for (const APFloat &v : dense.getValues<APFloat>()) {
      out.data[i++] = v.convertToDouble();
    }
  } else if (element.isInteger(1)) {
    for (bool v : dense.getValues<bool>()) {
      out.data[i++] = v;
    }
  } else {
    for (const APInt &v : dense.getValues<APInt>()) {
      out.data[i++] = static_cast<double>(v.getSExtValue());
    }
  }
  return out;
}

llvm::Expected<Results> gather(GatherOp op, Operands in) {
  const HostTensor &input = *in[0], &index = *in[1];
  HostTensor out = emptyLike(op.getOutput());
  int64_t dim = op.getDim();
  Shape inStrides = kgraph::rowMajorStrides(input.shape);
  Shape readStrides = inStrides;
  readStrides[dim] = 0;
  llvm::Error err = llvm::Error::success();
  forEachStrided<1>(out.shape, {readStrides}, [&](int64_t i, const auto &off) {
    double idx = index.data[i];
    if (err) {
      return;
    }
    if ((err = checkIndex(op, idx, input.shape[dim]))) {
      return;
    }
    out.data[i] =
        input.data[off[0] + static_cast<int64_t>(idx) * inStrides[dim]];
  });
  if (err) {
    return std::move(err);
  }
  return Results{std::move(out)};
}

llvm::Expected<Results> scatterAdd(ScatterAddOp op, Operands in) {
  const HostTensor &input = *in[0], &index = *in[1], &source = *in[2];
  HostTensor out = input;
  int64_t dim = op.getDim();
  Shape outStrides = kgraph::rowMajorStrides(out.shape);
  Shape writeStrides = outStrides;
  writeStrides[dim] = 0;
  Shape sourceStrides = kgraph::rowMajorStrides(source.shape);
  llvm::Error err = llvm::Error::success();
  forEachStrided<2>(
      index.shape, {writeStrides, sourceStrides},
      [&](int64_t i, const auto &off) {
        double idx = index.data[i];
        if (err || (err = checkIndex(op, idx, out.shape[dim]))) {
          return;
        }
        int64_t at = off[0] + static_cast<int64_t>(idx) * outStrides[dim];
        out.data[at] = roundTo(out.dtype, out.data[at] + source.data[off[1]]);
      });
  if (err) {
    return std::move(err);
  }
  return Results{std::move(out)};
}

llvm::Expected<Results> indexSelect(IndexSelectOp op, Operands in) {
  const HostTensor &input = *in[0], &index = *in[1];
  HostTensor out = emptyLike(op.getOutput());
  Lines from = linesAlong(input.shape, op.getDim());
  Lines to = linesAlong(out.shape, op.getDim());
  for (int64_t k = 0; k < to.size; ++k) {
    if (llvm::Error err = checkIndex(op, index.data[k], from.size)) {
      return std::move(err);
    }
    int64_t src = static_cast<int64_t>(index.data[k]);
    for (int64_t o = 0; o < to.outer; ++o) {
      for (int64_t i = 0; i < to.inner; ++i) {
        out.data[to.at(o, k, i)] = input.data[from.at(o, src, i)];
      }
    }
  }
  return Results{std::move(out)};
}

llvm::Expected<Results> embedding(EmbeddingOp op, Operands in) {
  const HostTensor &weight = *in[0], &indices = *in[1];
  HostTensor out = emptyLike(op.getOutput());
  int64_t rows = weight.shape[0], width = weight.shape[1];
  for (int64_t n = 0; n < indices.numElements(); ++n) {
    if (llvm::Error err = checkIndex(op, indices.data[n], rows)) {
      return std::move(err);
    }
    int64_t row = static_cast<int64_t>(indices.data[n]);
    std::copy_n(weight.data.begin() + row * width, width,
                out.data.begin() + n * width);
  }
  return Results{std::move(out)};
}

llvm::Expected<Results> scatterRows(ScatterRowsOp op, Operands in) {
  const HostTensor &indices = *in[1], &rows = *in[2];
  HostTensor out = *in[0];
  int64_t bound = out.shape[0], width = out.shape[1];
  for (int64_t n = 0; n < indices.numElements(); ++n) {
    if (llvm::Error err = checkIndex(op, indices.data[n], bound)) {
      return std::move(err);
    }
    int64_t row = static_cast<int64_t>(indices.data[n]);
    std::copy_n(rows.data.begin() + n * width, width,
                out.data.begin() + row * width);
  }
  return Results{std::move(out)};
}

llvm::Expected<Results> embeddingBackward(EmbeddingBackwardOp op, Operands in) {
  const HostTensor &grad = *in[0], &indices = *in[1];
  HostTensor out = emptyLike(op.getOutput());
  int64_t rows = out.shape[0], width = out.shape[1];
  // Accumulate in double, round once: the sum of many rows stays accurate.
  std::vector<double> acc(out.data.size(), 0.0);
  for (int64_t n = 0; n < indices.numElements(); ++n) {
    if (llvm::Error err = checkIndex(op, indices.data[n], rows)) {
      return std::move(err);
    }
    int64_t row = static_cast<int64_t>(indices.data[n]);
    if (row == static_cast<int64_t>(op.getPaddingIdx())) {
      continue;
    }
    for (int64_t j = 0; j < width; ++j) {
      acc[row * width + j] += grad.data[n * width + j];
    }
  }
  for (size_t i = 0; i < acc.size(); ++i) {
    out.data[i] = roundTo(out.dtype, acc[i]);
  }
  return Results{std::move(out)};
}

} // namespace

KernelResult evaluateShapeOp(Operation *op, Operands in) {
  using R = KernelResult;
  return llvm::TypeSwitch<Operation *, R>(op)
      .Case([&](ConstantOp c) { return R(Results{constant(c)}); })
      .Case([&](ReshapeOp) {
        HostTensor out = *in[0];
        out.shape = emptyLike(op->getResult(0)).shape;
        return R(Results{std::move(out)});
      })
      .Case([&](BroadcastOp) {
        Shape outShape = emptyLike(op->getResult(0)).shape;
        return R(Results{gatherStrided(
            op, *in[0], 0, broadcastStrides(in[0]->shape, outShape))});
      })
      .Case([&](TransposeOp t) {
        Shape inStrides = kgraph::rowMajorStrides(in[0]->shape);
        Shape strides;
        for (int64_t p : t.getPermutation()) {
          strides.push_back(inStrides[p]);
        }
        return R(Results{gatherStrided(op, *in[0], 0, strides)});
      })
      .Case([&](SliceOp s) {
        Shape inStrides = kgraph::rowMajorStrides(in[0]->shape);
        Shape strides;
        int64_t base = 0;
        for (size_t d = 0; d < inStrides.size(); ++d) {
          base += s.getStart()[d] * inStrides[d];
          strides.push_back(inStrides[d] * s.getStride()[d]);
        }
        return R(Results{gatherStrided(op, *in[0], base, strides)});
      })
      .Case([&](ConcatOp c) {
        HostTensor out = emptyLike(c.getOutput());
        Lines to = linesAlong(out.shape, c.getDim());
        int64_t offset = 0;
        for (const HostTensor *part : in) {
          Lines from = linesAlong(part->shape, c.getDim());
          for (int64_t o = 0; o < from.outer; ++o) {
            for (int64_t k = 0; k < from.size; ++k) {
              for (int64_t i = 0; i < from.inner; ++i) {
                out.data[to.at(o, offset + k, i)] =
                    part->data[from.at(o, k, i)];
              }
            }
          }
          offset += from.size;
        }
        return R(Results{std::move(out)});
      })
      .Case([&](GatherOp g) { return R(gather(g, in)); })
      .Case([&](ScatterAddOp s) { return R(scatterAdd(s, in)); })
      .Case([&](IndexSelectOp s) { return R(indexSelect(s, in)); })
      .Case([&](EmbeddingOp e) { return R(embedding(e, in)); })
      .Case([&](ScatterRowsOp s) { return R(scatterRows(s, in)); })
      .Case([&](EmbeddingBackwardOp e) { return R(embeddingBackward(e, in)); })
      .Default([](Operation *) { return std::nullopt; });
}

} // namespace kiln::reference
