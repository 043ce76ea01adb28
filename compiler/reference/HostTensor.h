//===- HostTensor.h - tensors of the reference interpreter ------*- C++ -*-===//

#ifndef KILN_COMPILER_REFERENCE_HOSTTENSOR_H
#define KILN_COMPILER_REFERENCE_HOSTTENSOR_H

#include "compiler/graph/kgraph.pb.h"
#include "dialects/kgraph/KGraphShapes.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace kiln::reference {

using kgraph::Shape;

/// A dense row-major tensor on the host. Every dtype is held as double: each
/// f32, bf16, f16, i32 and i1 value, and every i64 up to 2^53 (any index or
/// count a graph uses), is exact in a double, so one storage type serves all
/// ops while the value itself is always one the dtype can represent.
struct HostTensor {
  proto::DType dtype = proto::F32;
  Shape shape;
  std::vector<double> data;

  HostTensor() = default;
  HostTensor(proto::DType dtype, Shape shape, double fill = 0.0);

  int64_t numElements() const { return static_cast<int64_t>(data.size()); }
  /// "f32[4, 8]"
  std::string typeString() const;

  /// From little-endian raw bytes of `dtype` (i1 as one byte per element).
  static llvm::Expected<HostTensor> fromRaw(proto::DType dtype, Shape shape,
                                            llvm::StringRef bytes);
  /// Little-endian raw bytes of the tensor's dtype.
  std::string toRaw() const;
};

/// Rounds `value` to the nearest value of `dtype`: f32 and f16 round to
/// nearest even, bf16 rounds the f32 value to nearest even, integers truncate
/// toward zero and wrap to their width, i1 tests for non-zero.
double roundTo(proto::DType dtype, double value);

bool isFloat(proto::DType dtype);

} // namespace kiln::reference

#endif // KILN_COMPILER_REFERENCE_HOSTTENSOR_H
