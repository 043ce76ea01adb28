//===- Kernels.h - fast paths for the common instructions -------*- C++ -*-===//
//
// The element-at-a-time semantics (Semantics.cpp) are the specification: they
// read every element through its dtype, as a double, checking that it was
// written. The kernels here compute the same results for the instructions
// training steps spend their time in, moving whole contiguous runs as f32 and
// multiplying with oneDNN's GEMM. They give up (and the specification runs)
// when an operand holds unwritten memory, so NaN-on-unwritten still holds, or
// when an operand is an integer tile.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SIM_KERNELS_H
#define KILN_RUNTIME_SIM_KERNELS_H

#include "runtime/sim/Semantics.h"

/// The hot loops are built for AVX-512, AVX2 and baseline x86-64, and the
/// loader picks the widest the host runs: Debian's compiler flags target
/// baseline x86-64, whose SSE2 is a quarter of what these hosts have.
#if defined(__x86_64__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define KILN_VECTOR_CLONES                                                     \
  __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
#endif
#ifndef KILN_VECTOR_CLONES
#define KILN_VECTOR_CLONES
#endif

namespace kiln::sim {

/// Executes `inst` with a fast kernel. Returns false, having changed nothing,
/// when no kernel applies.
bool executeFast(MachineState &m, const isa::Instruction &inst);

/// Kernels that read and write f32 tiles where they lie (RowKernels.cpp),
/// tried before the ones that go through scratch; each returns false,
/// having changed nothing, when its operands are not such tiles.
namespace in_place {
bool copy(MachineState &m, const isa::Instruction &inst);
bool tensorTensor(MachineState &m, const isa::Instruction &inst);
bool tensorScalar(MachineState &m, const isa::Instruction &inst);
bool activation(MachineState &m, const isa::Instruction &inst);
bool tensorReduce(MachineState &m, const isa::Instruction &inst);
bool matmul(MachineState &m, const isa::Instruction &inst);
bool transpose(MachineState &m, const isa::Instruction &inst);
bool memset(MachineState &m, const isa::Instruction &inst);
} // namespace in_place

/// A tile as f32 in (partition, free) order; false if an element is
/// unwritten or the tile is an integer tile.
bool gatherFloats(const MachineState &m, const isa::AccessPattern &ap,
                  float *out);
/// Writes f32 values into a tile, rounding to its dtype like scatter().
void scatterFloats(MachineState &m, const isa::AccessPattern &ap,
                   const float *values);

/// C[m x n] = A^T B (+ C when `accumulate`), A [k x m], B [k x n] and C
/// row-major f32 with rows `lda`, `ldb`, `ldc` floats apart: TensorE's
/// stationary-transposed product. Small products run in the specification's
/// order, so bit for bit as it does and without a GEMM call's fixed cost;
/// larger ones in oneDNN's GEMM.
void matmulF32(const float *a, int64_t lda, const float *b, int64_t ldb,
               float *c, int64_t ldc, int64_t k, int64_t m, int64_t n,
               bool accumulate);

} // namespace kiln::sim

#endif // KILN_RUNTIME_SIM_KERNELS_H
