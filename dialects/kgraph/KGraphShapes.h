//===- KGraphShapes.h - shape rules shared by verifiers and evaluators ---===//
//
// The shape rules of kgraph ops live here once, so that type inference, the
// reference interpreter and later lowerings agree on them.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECTS_KGRAPH_KGRAPHSHAPES_H
#define KILN_DIALECTS_KGRAPH_KGRAPHSHAPES_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include <cstdint>
#include <optional>

namespace kiln::kgraph {

using Shape = llvm::SmallVector<int64_t, 4>;

/// NumPy broadcast of two shapes; nullopt when a pair of dimensions differs
/// and neither is 1.
std::optional<Shape> broadcastShapes(llvm::ArrayRef<int64_t> a,
                                     llvm::ArrayRef<int64_t> b);

/// True when `from` broadcasts to exactly `to`.
bool isBroadcastableTo(llvm::ArrayRef<int64_t> from,
                       llvm::ArrayRef<int64_t> to);

/// Number of elements of a shape (1 for rank 0).
int64_t numElements(llvm::ArrayRef<int64_t> shape);

/// Row-major strides of a shape.
Shape rowMajorStrides(llvm::ArrayRef<int64_t> shape);

/// The result shape of reducing `dims` of `shape`.
Shape reducedShape(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> dims,
                   bool keepDim);

/// Number of elements of a strided slice dimension [start, limit) by stride.
int64_t sliceSize(int64_t start, int64_t limit, int64_t stride);

/// A window sliding over the spatial dims of a channels-first tensor
/// [N, C, S...] (convolution and pooling), one entry per spatial dim.
/// Output position o reads, through tap r, input position
/// o * stride - padding + r * dilation; positions outside [0, S) are
/// padding.
struct Window {
  Shape kernel, stride, padding, dilation;
  /// Round the output size up (PyTorch's pooling `ceil_mode`), never
  /// starting a window inside the right padding.
  bool ceilMode = false;

  size_t spatialRank() const { return kernel.size(); }
  /// Output positions along spatial dim `d` for an input of size `in`;
  /// below 1 when not one window fits.
  int64_t outputSize(size_t d, int64_t in) const;
  /// [N, channels, O...] for an input [N, C, S...].
  Shape outputShape(llvm::ArrayRef<int64_t> input, int64_t channels) const;
  int64_t inputIndex(size_t d, int64_t o, int64_t r) const {
    return o * stride[d] - padding[d] + r * dilation[d];
  }
  /// The same window over two spatial dims: a 1-d window gains a leading
  /// dim of size 1 (kernel 1, stride 1, no padding), so that code written
  /// for 2-d serves both.
  Window twoDimensional() const;
};

} // namespace kiln::kgraph

#endif // KILN_DIALECTS_KGRAPH_KGRAPHSHAPES_H
