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

} // namespace kiln::kgraph
