//===- KGraphShapes.cpp - shape rules of kgraph ops ----------------------===//

#include "dialects/kgraph/KGraphShapes.h"

#include "llvm/ADT/STLExtras.h"

namespace kiln::kgraph {

std::optional<Shape> broadcastShapes(llvm::ArrayRef<int64_t> a,
                                     llvm::ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  Shape result(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) {
      return std::nullopt;
    }
    result[i] = da == 1 ? db : da;
  }
  return result;
}

bool isBroadcastableTo(llvm::ArrayRef<int64_t> from,
                       llvm::ArrayRef<int64_t> to) {
  if (from.size() > to.size()) {
    return false;
  }
  size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i] != 1 && from[i] != to[lead + i]) {
      return false;
    }
  }
  return true;
}

int64_t numElements(llvm::ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    n *= d;
  }
  return n;
}

Shape rowMajorStrides(llvm::ArrayRef<int64_t> shape) {
  Shape strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i) {
    strides[i] = strides[i + 1] * shape[i + 1];
  }
  return strides;
}

Shape reducedShape(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> dims,
                   bool keepDim) {
  Shape result;
  for (auto [i, d] : llvm::enumerate(shape)) {
    bool reduced = llvm::is_contained(dims, static_cast<int64_t>(i));
    if (!reduced) {
      result.push_back(d);
    } else if (keepDim) {
      result.push_back(1);
    }
  }
  return result;
}

int64_t sliceSize(int64_t start, int64_t limit, int64_t stride) {
  if (limit <= start) {
    return 0;
  }
  // Written so that no intermediate can overflow, whatever the stride.
  return (limit - start - 1) / stride + 1;
}

int64_t Window::outputSize(size_t d, int64_t in) const {
  int64_t span = in + 2 * padding[d] - dilation[d] * (kernel[d] - 1) - 1;
  if (span < 0) {
    return 0;
  }
  int64_t out = (ceilMode ? (span + stride[d] - 1) / stride[d]
                          : span / stride[d]) +
                1;
  if (ceilMode && (out - 1) * stride[d] >= in + padding[d]) {
    --out;
  }
  return out;
}

Window Window::twoDimensional() const {
  Window w = *this;
  if (spatialRank() == 1) {
    w.kernel.insert(w.kernel.begin(), 1);
    w.stride.insert(w.stride.begin(), 1);
    w.padding.insert(w.padding.begin(), 0);
    w.dilation.insert(w.dilation.begin(), 1);
  }
  return w;
}

Shape Window::outputShape(llvm::ArrayRef<int64_t> input,
                          int64_t channels) const {
  Shape shape = {input[0], channels};
  for (size_t d = 0; d < spatialRank(); ++d) {
    shape.push_back(outputSize(d, input[2 + d]));
  }
  return shape;
}

} // namespace kiln::kgraph
