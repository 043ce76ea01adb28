//===- Kernels.h - evaluation of kgraph ops on host tensors -----*- C++ -*-===//
//
// Internal to the reference interpreter. Each kernel group returns nullopt
// for an op it does not own, so the interpreter can ask them in turn.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_REFERENCE_KERNELS_H
#define KILN_COMPILER_REFERENCE_KERNELS_H

#include "compiler/reference/HostTensor.h"

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/SmallVector.h"

#include <array>
#include <optional>

namespace kiln::reference {

using Operands = llvm::ArrayRef<const HostTensor *>;
using Results = llvm::SmallVector<HostTensor, 1>;
using KernelResult = std::optional<llvm::Expected<Results>>;

KernelResult evaluateElementwise(mlir::Operation *op, Operands in);
KernelResult evaluateShapeOp(mlir::Operation *op, Operands in);
KernelResult evaluateMathOp(mlir::Operation *op, Operands in);
KernelResult evaluateWindowOp(mlir::Operation *op, Operands in);

/// A zero-filled tensor of `value`'s type.
HostTensor emptyLike(mlir::Value value);

/// "'kgraph.gather' at loc(...): <message>" as an error.
llvm::Error kernelError(mlir::Operation *op, const llvm::Twine &message);

/// Strides for reading a tensor of shape `in` as if broadcast to `out`
/// (stride 0 on stretched and missing dims).
Shape broadcastStrides(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> out);

/// Visits every element of `shape` in row-major order, passing the running
/// linear index and, for each of the N stride vectors, the offset that the
/// element's multi-index has under those strides.
template <size_t N, typename Fn>
void forEachStrided(llvm::ArrayRef<int64_t> shape,
                    const std::array<Shape, N> &strides, Fn &&fn) {
  int64_t rank = static_cast<int64_t>(shape.size());
  int64_t total = kgraph::numElements(shape);
  Shape index(rank, 0);
  std::array<int64_t, N> offsets{};
  for (int64_t i = 0; i < total; ++i) {
    fn(i, offsets);
    for (int64_t d = rank - 1; d >= 0; --d) {
      ++index[d];
      for (size_t n = 0; n < N; ++n) {
        offsets[n] += strides[n][d];
      }
      if (index[d] < shape[d]) {
        break;
      }
      for (size_t n = 0; n < N; ++n) {
        offsets[n] -= strides[n][d] * shape[d];
      }
      index[d] = 0;
    }
  }
}

/// Splits `shape` around `dim` into (outer, size of dim, inner) so that the
/// element (o, k, i) sits at (o * size + k) * inner + i.
struct Lines {
  int64_t outer = 1, size = 1, inner = 1;
  int64_t at(int64_t o, int64_t k, int64_t i) const {
    return (o * size + k) * inner + i;
  }
};
Lines linesAlong(llvm::ArrayRef<int64_t> shape, int64_t dim);

} // namespace kiln::reference

#endif // KILN_COMPILER_REFERENCE_KERNELS_H
