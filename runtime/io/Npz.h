//===- Npz.h - NumPy .npy and .npz files ------------------------*- C++ -*-===//
//
// The interchange format for tensors between Kiln's tools and Python: inputs
// and outputs of `kiln interpret` and `kiln run` are .npz archives (or single
// .npy arrays). The zip container is handled by libzip.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_IO_NPZ_H
#define KILN_RUNTIME_IO_NPZ_H

#include "compiler/graph/kgraph.pb.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::io {

/// One array: dtype, shape and little-endian row-major bytes (i1 as one byte
/// per element). NumPy has no bfloat16, so bf16 never appears here: callers
/// write bf16 tensors as f32, whose values they represent exactly.
struct NpyArray {
  std::string name;
  proto::DType dtype = proto::F32;
  std::vector<int64_t> shape;
  std::string data;
};

/// Parses one .npy payload; `origin` names it in errors.
llvm::Expected<NpyArray> parseNpy(llvm::StringRef bytes,
                                  llvm::StringRef origin);
/// Serializes one array as .npy (format 1.0).
std::string serializeNpy(const NpyArray &array);

/// Reads every array of a .npz archive, or the single array of a .npy file
/// (named after the file's stem).
llvm::Expected<std::vector<NpyArray>> readArrays(llvm::StringRef path);
/// Writes arrays as an uncompressed .npz archive (as numpy.savez does), or a
/// single array as .npy when the path ends in .npy. The file appears
/// atomically.
llvm::Error writeArrays(llvm::StringRef path,
                        const std::vector<NpyArray> &arrays);

} // namespace kiln::io

#endif // KILN_RUNTIME_IO_NPZ_H
