// RUN: kiln-opt %s -split-input-file -verify-diagnostics
// Every kisa verifier error, one case each.

// -----

// An engine that cannot run the opcode.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{'tensor_copy' cannot run on engine tensor}}
  kisa.tensor_copy {engine = "tensor", dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 8]>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 64, dims = [1 x 8]>}
}

// -----

// An engine name that does not exist.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{'engine' is 'fpu', not one of: tensor, vector, scalar, gpsimd, dma}}
  kisa.tensor_copy {engine = "fpu", dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 8]>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 64, dims = [1 x 8]>}
}

// -----

// DMA queues are numbered 0-15 on trn1.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{DMA queue 16 does not exist (16 queues)}}
  kisa.dma_copy {queue = 16, dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 8]>, src = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 8], pstride = 8>}
}

// -----

// A queue number outside a byte.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{'queue' 300 is out of range}}
  kisa.dma_copy {queue = 300, dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 8]>, src = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 8], pstride = 8>}
}

// -----

// An unknown ALU operation.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{'op' is 'xor', not one of: bypass, add, sub}}
  kisa.tensor_tensor {op = "xor", dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 8]>, lhs = #kisa.ap<sbuf, f32, p = 0:8, offset = 64, dims = [1 x 8]>, rhs = #kisa.ap<sbuf, f32, p = 0:8, offset = 128, dims = [1 x 8]>}
}

// -----

// An unknown activation function.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{'func' is 'softplus', not one of: identity, exp}}
  kisa.activation {func = "softplus", dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 8]>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 64, dims = [1 x 8]>}
}

// -----

// An all-gather's destination holds a whole number of its source.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{an all_gather's 'dst' holds a whole number of its 'src' (64 elements) of the same type, not 100}}
  kisa.collective {kind = "all_gather", dst = #kisa.ap<hbm, i32, p = 0:1, offset = 0, dims = [1 x 100]>, src = #kisa.ap<hbm, i32, p = 0:1, offset = 1024, dims = [1 x 64]>}
}

// -----

// A reduce-scatter's source holds a whole number of its destination.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{a reduce_scatter_sum's 'src' holds a whole number of its 'dst' (24 elements) of the same type, not 64}}
  kisa.collective {kind = "reduce_scatter_sum", dst = #kisa.ap<hbm, f32, p = 0:1, offset = 0, dims = [1 x 24]>, src = #kisa.ap<hbm, f32, p = 0:1, offset = 1024, dims = [1 x 64]>}
}

// -----

// A collective's group is the data-parallel (0) or tensor-parallel (1) one.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{a collective's group is 0 (data-parallel) or 1 (tensor-parallel), not 2}}
  kisa.collective {kind = "all_reduce_sum", group = 2, dst = #kisa.ap<hbm, f32, p = 0:1, offset = 0, dims = [1 x 64]>, src = #kisa.ap<hbm, f32, p = 0:1, offset = 1024, dims = [1 x 64]>}
}

// -----

// An unknown collective.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{'kind' is 'broadcast', not one of: all_reduce_sum}}
  kisa.collective {kind = "broadcast", dst = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 8], pstride = 8>, src = #kisa.ap<hbm, f32, p = 0:8, offset = 512, dims = [1 x 8], pstride = 8>}
}

// -----

// affine_select compares.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{'compare' must be a comparison}}
  kisa.affine_select {compare = "add", fill = 0.0, dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 8]>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 64, dims = [1 x 8]>}
}

// -----

// tensor_reduce reduces with add, max, min or mul.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{'op' must be a add, max, min or mul}}
  kisa.tensor_reduce {op = "sub", dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 1]>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 64, dims = [1 x 8]>}
}

// -----

// Waits come in (semaphore, value) pairs.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{'wait_sem' and 'wait_value' must have the same length}}
  kisa.memset {value = 0.0, wait_sem = array<i64: 0, 1>, wait_value = array<i64: 1>, dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 8]>}
}

// -----

// At most four waits.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{an instruction waits on at most 4 semaphores}}
  kisa.memset {value = 0.0, wait_sem = array<i64: 0, 0, 0, 0, 0>, wait_value = array<i64: 1, 1, 1, 1, 1>, dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 8]>}
}

// -----

// A wait value outside 32 bits.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{wait 0 is out of range}}
  kisa.memset {value = 0.0, wait_sem = array<i64: 0>, wait_value = array<i64: -1>, dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 8]>}
}

// -----

// At most four signals.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{an instruction signals at most 4 semaphores}}
  kisa.memset {value = 0.0, signal = array<i64: 0, 0, 0, 0, 0>, dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 8]>}
}

// -----

// A signal id outside 16 bits.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{signal 0 is out of range}}
  kisa.memset {value = 0.0, signal = array<i64: 70000>, dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 8]>}
}

// -----

// Waiting on a semaphore the program does not have.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{waits on semaphore 4, but the program has 4}}
  kisa.memset {value = 0.0, wait_sem = array<i64: 4>, wait_value = array<i64: 1>, dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 8]>}
}

// -----

// Signalling a semaphore the program does not have.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{signals semaphore 9, but the program has 4}}
  kisa.memset {value = 0.0, signal = array<i64: 9>, dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 8]>}
}

// -----

// A stride below zero.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{operand 'dst': dimension 0 has size 8 and stride -1; sizes must be >= 1, strides >= 0}}
  kisa.memset {value = 0.0, dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [-1 x 8]>}
}

// -----

// A size of zero.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{operand 'dst': dimension 0 has size 0 and stride 1}}
  kisa.memset {value = 0.0, dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 0]>}
}

// -----

// Absurd sizes are refused before any arithmetic overflows.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{operand 'dst': dimension 0 is absurdly large}}
  kisa.memset {value = 0.0, dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 99999999999]>}
}

// -----

// More partitions than the machine has.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{operand 'dst': 129 partitions is not in [1, 128]}}
  kisa.memset {value = 0.0, dst = #kisa.ap<sbuf, f32, p = 0:129, offset = 0, dims = [1 x 8]>}
}

// -----

// A negative offset.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{operand 'dst': offset or partition stride is out of range}}
  kisa.memset {value = 0.0, dst = #kisa.ap<sbuf, f32, p = 0:8, offset = -4, dims = [1 x 8]>}
}

// -----

// Partitions past the last one.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{operand 'dst': partitions [96, 160) exceed 128}}
  kisa.memset {value = 0.0, dst = #kisa.ap<sbuf, f32, p = 96:64, offset = 0, dims = [1 x 8]>}
}

// -----

// More than 64 partitions start at 0.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{operand 'dst': 65 partitions cannot start at partition 32}}
  kisa.memset {value = 0.0, dst = #kisa.ap<sbuf, f32, p = 32:65, offset = 0, dims = [1 x 8]>}
}

// -----

// 33 to 64 partitions start at 0 or 64.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{operand 'dst': 33 partitions cannot start at partition 32}}
  kisa.memset {value = 0.0, dst = #kisa.ap<sbuf, f32, p = 32:33, offset = 0, dims = [1 x 8]>}
}

// -----

// 32 or fewer start at a multiple of 32.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{operand 'dst': 8 partitions cannot start at partition 16}}
  kisa.memset {value = 0.0, dst = #kisa.ap<sbuf, f32, p = 16:8, offset = 0, dims = [1 x 8]>}
}

// -----

// Bytes past the end of an SBUF partition (192 KiB on trn1).
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{operand 'dst': bytes [196600, 196632) exceed the 196608 bytes of a sbuf partition}}
  kisa.memset {value = 0.0, dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 196600, dims = [1 x 8]>}
}

// -----

// Bytes past the end of the program's HBM.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{operand 'src': HBM bytes [65400, 65656) lie outside the program's 65536 bytes of HBM}}
  kisa.dma_copy {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 8]>, src = #kisa.ap<hbm, f32, p = 0:8, offset = 65400, dims = [1 x 8], pstride = 8>}
}

// -----

// Vector instructions touch at most 64 Ki SBUF elements.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{operand 'dst': 70000 free elements exceed the 65536 an instruction may touch in sbuf}}
  kisa.memset {value = 0.0, dst = #kisa.ap<sbuf, bf16, p = 0:1, offset = 0, dims = [1 x 70000]>}
}

// -----

// ... and at most 4 Ki PSUM elements.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{operand 'src': 4100 free elements exceed the 4096 an instruction may touch in psum}}
  kisa.tensor_copy {dst = #kisa.ap<sbuf, bf16, p = 0:1, offset = 0, dims = [1 x 4100]>, src = #kisa.ap<psum, bf16, p = 0:1, offset = 0, dims = [1 x 4100]>}
}

// -----

// TensorE writes only PSUM.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{operand 'dst': TensorE writes only PSUM}}
  kisa.transpose {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 8]>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 64, dims = [1 x 8]>}
}

// -----

// TensorE reads only SBUF.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{operand 'src': TensorE reads only SBUF}}
  kisa.transpose {dst = #kisa.ap<psum, f32, p = 0:8, offset = 0, dims = [1 x 8]>, src = #kisa.ap<psum, f32, p = 0:8, offset = 64, dims = [1 x 8]>}
}

// -----

// VectorE and ScalarE never touch HBM.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{operand 'src': vector engine cannot access HBM (use a DMA)}}
  kisa.tensor_copy {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 8]>, src = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 8], pstride = 8>}
}

// -----

// GpSimd never touches PSUM.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{operand 'src': GpSimd accesses only SBUF}}
  kisa.tensor_copy {engine = "gpsimd", dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 8]>, src = #kisa.ap<psum, f32, p = 0:8, offset = 0, dims = [1 x 8]>}
}

// -----

// DMA never touches PSUM.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{operand 'dst': DMA cannot access PSUM}}
  kisa.dma_copy {dst = #kisa.ap<psum, f32, p = 0:8, offset = 0, dims = [1 x 8]>, src = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 8], pstride = 8>}
}

// -----

// Collectives work on HBM buffers.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{operand 'dst': collectives work on HBM buffers}}
  kisa.collective {kind = "all_reduce_sum", dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 8]>, src = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 8], pstride = 8>}
}

// -----

// tensor_tensor reads at most one input from PSUM.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{tensor_tensor cannot read both inputs from PSUM}}
  kisa.tensor_tensor {op = "add", dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 8]>, lhs = #kisa.ap<psum, f32, p = 0:8, offset = 0, dims = [1 x 8]>, rhs = #kisa.ap<psum, f32, p = 0:8, offset = 64, dims = [1 x 8]>}
}

// -----

// DMA does not copy HBM to HBM.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{dma_copy moves HBM<->SBUF or SBUF<->SBUF, not HBM<->HBM}}
  kisa.dma_copy {dst = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 8], pstride = 8>, src = #kisa.ap<hbm, f32, p = 0:8, offset = 1024, dims = [1 x 8], pstride = 8>}
}

// -----

// Matmul contracts over equal partition counts.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{stationary and moving contract over their partitions: 16 vs 8}}
  kisa.matmul {dst = #kisa.ap<psum, f32, p = 0:8, offset = 0, dims = [1 x 8]>, stationary = #kisa.ap<sbuf, f32, p = 0:16, offset = 0, dims = [1 x 8]>, moving = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 8]>}
}

// -----

// N is at most 512 (one PSUM bank of f32).
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{matmul is 8 x 600; M must be <= 128 and N <= 512}}
  kisa.matmul {dst = #kisa.ap<psum, f32, p = 0:8, offset = 0, dims = [1 x 600]>, stationary = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 8]>, moving = #kisa.ap<sbuf, f32, p = 0:8, offset = 64, dims = [1 x 600]>}
}

// -----

// The result is [M x N].
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{operand 'dst' must be [M x N] = [8 x 8]}}
  kisa.matmul {dst = #kisa.ap<psum, f32, p = 0:8, offset = 0, dims = [1 x 4]>, stationary = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 8]>, moving = #kisa.ap<sbuf, f32, p = 0:8, offset = 64, dims = [1 x 8]>}
}

// -----

// Matmul accumulates in f32.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{operand 'dst': matmul accumulates in f32}}
  kisa.matmul {dst = #kisa.ap<psum, bf16, p = 0:8, offset = 0, dims = [1 x 8]>, stationary = #kisa.ap<sbuf, bf16, p = 0:8, offset = 0, dims = [1 x 8]>, moving = #kisa.ap<sbuf, bf16, p = 0:8, offset = 64, dims = [1 x 8]>}
}

// -----

// Matmul inputs are floating point.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{matmul inputs are floating point}}
  kisa.matmul {dst = #kisa.ap<psum, f32, p = 0:8, offset = 0, dims = [1 x 8]>, stationary = #kisa.ap<sbuf, i32, p = 0:8, offset = 0, dims = [1 x 8]>, moving = #kisa.ap<sbuf, i32, p = 0:8, offset = 64, dims = [1 x 8]>}
}

// -----

// f32 is not mixed with other input types.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{matmul cannot mix f32 with other input types}}
  kisa.matmul {dst = #kisa.ap<psum, f32, p = 0:8, offset = 0, dims = [1 x 8]>, stationary = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 8]>, moving = #kisa.ap<sbuf, bf16, p = 0:8, offset = 64, dims = [1 x 8]>}
}

// -----

// A TensorE result stays inside one PSUM bank.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{operand 'dst': bytes [2040, 2072) cross a PSUM bank boundary (banks are 2048 bytes)}}
  kisa.matmul {dst = #kisa.ap<psum, f32, p = 0:8, offset = 2040, dims = [1 x 8]>, stationary = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 8]>, moving = #kisa.ap<sbuf, f32, p = 0:8, offset = 64, dims = [1 x 8]>}
}

// -----

// A TensorE result is contiguous.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{operand 'dst': a TensorE result is one contiguous row per partition}}
  kisa.matmul {dst = #kisa.ap<psum, f32, p = 0:8, offset = 0, dims = [2 x 8]>, stationary = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 8]>, moving = #kisa.ap<sbuf, f32, p = 0:8, offset = 64, dims = [1 x 8]>}
}

// -----

// Transposes are at most 128 x 128.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{transpose is at most 128 x 128}}
  kisa.transpose {dst = #kisa.ap<psum, f32, p = 0:1, offset = 0, dims = [1 x 8]>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 200]>}
}

// -----

// A transpose's result has the source's shape swapped.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{operand 'dst' must be [4 x 8]}}
  kisa.transpose {dst = #kisa.ap<psum, f32, p = 0:8, offset = 0, dims = [1 x 8]>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 4]>}
}

// -----

// Transpose results are f32.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{operand 'dst': transpose results are f32}}
  kisa.transpose {dst = #kisa.ap<psum, bf16, p = 0:8, offset = 0, dims = [1 x 8]>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 8]>}
}

// -----

// Elementwise operands have the destination's shape.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{operand 'src' is [8 x 4] but 'dst' is [8 x 8]}}
  kisa.activation {func = "exp", dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 8]>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 64, dims = [1 x 4]>}
}

// -----

// An activation's row sums are [P x 1].
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{operand 'reduce_dst' must be [8 x 1]}}
  kisa.activation {func = "exp", dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 8]>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 64, dims = [1 x 8]>, reduce_dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 128, dims = [1 x 2]>}
}

// -----

// Activations work on floating point.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{activation works on floating point}}
  kisa.activation {func = "exp", dst = #kisa.ap<sbuf, i32, p = 0:8, offset = 0, dims = [1 x 8]>, src = #kisa.ap<sbuf, i32, p = 0:8, offset = 64, dims = [1 x 8]>}
}

// -----

// tensor_tensor's second input has the destination's shape too.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{operand 'rhs' is [4 x 8] but 'dst' is [8 x 8]}}
  kisa.tensor_tensor {op = "add", dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 8]>, lhs = #kisa.ap<sbuf, f32, p = 0:8, offset = 64, dims = [1 x 8]>, rhs = #kisa.ap<sbuf, f32, p = 0:4, offset = 128, dims = [1 x 8]>}
}

// -----

// tensor_reduce folds the innermost dimension.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{tensor_reduce folds the innermost dimension: 'dst' must be [8 x 1]}}
  kisa.tensor_reduce {op = "max", dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 2]>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 64, dims = [1 x 8]>}
}

// -----

// partition_reduce writes one partition.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{partition_reduce writes one partition of the source's free size}}
  kisa.partition_reduce {op = "add", dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 8]>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 64, dims = [1 x 8]>}
}

// -----

// partition_broadcast reads one partition.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{partition_broadcast reads one partition of the destination's free size}}
  kisa.partition_broadcast {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 8]>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 64, dims = [1 x 8]>}
}

// -----

// DMA moves as many elements as it reads.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{'dst' has 32 elements but 'src' has 64}}
  kisa.dma_copy {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 4]>, src = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 8], pstride = 8>}
}

// -----

// An unknown target.
// expected-error @+1 {{unknown target 'trn9' (trn1 or trn2)}}
kisa.program @p attributes {target = "trn9", hbm_bytes = 64, semaphores = 1} {
}

// -----

// HBM beyond a trn1 NeuronCore (half its chip's).
// expected-error @+1 {{hbm_bytes 68719476736 must be in [1, 17179869184]}}
kisa.program @p attributes {target = "trn1", hbm_bytes = 68719476736, semaphores = 1} {
}

// -----

// More semaphores than the machine has.
// expected-error @+1 {{semaphores 33 must be in [0, 32]}}
kisa.program @p attributes {target = "trn1", hbm_bytes = 64, semaphores = 33} {
}

// -----

// Buffer roles.
kisa.program @p attributes {target = "trn1", hbm_bytes = 64, semaphores = 1} {
  // expected-error @+1 {{role 'scratch' is not one of: input, output, inout, constant}}
  kisa.buffer "b" {offset = 0, dtype = f32, shape = array<i64: 4>, role = "scratch"}
}

// -----

// Buffer dtypes.
kisa.program @p attributes {target = "trn1", hbm_bytes = 64, semaphores = 1} {
  // expected-error @+1 {{dtype must be f32, bf16, f16 or i32}}
  kisa.buffer "b" {offset = 0, dtype = f64, shape = array<i64: 4>, role = "input"}
}

// -----

// Empty buffers.
kisa.program @p attributes {target = "trn1", hbm_bytes = 64, semaphores = 1} {
  // expected-error @+1 {{shape dimensions must be positive}}
  kisa.buffer "b" {offset = 0, dtype = f32, shape = array<i64: 0>, role = "input"}
}

// -----

// Buffers inside the program's HBM.
kisa.program @p attributes {target = "trn1", hbm_bytes = 64, semaphores = 1} {
  // expected-error @+1 {{bytes [32, 96) lie outside the program's HBM}}
  kisa.buffer "b" {offset = 32, dtype = f32, shape = array<i64: 16>, role = "input"}
}

// -----

// Constants have values.
kisa.program @p attributes {target = "trn1", hbm_bytes = 64, semaphores = 1} {
  // expected-error @+1 {{a constant buffer, and only a constant buffer, has a value}}
  kisa.buffer "b" {offset = 0, dtype = f32, shape = array<i64: 4>, role = "constant"}
}

// -----

// A constant's value fits its buffer.
kisa.program @p attributes {target = "trn1", hbm_bytes = 64, semaphores = 1} {
  // expected-error @+1 {{value must have the buffer's dtype and shape}}
  kisa.buffer "b" {offset = 0, dtype = f32, shape = array<i64: 4>, role = "constant", value = dense<1.0> : tensor<2xf32>}
}

// -----

// Access patterns have 1 to 4 free dimensions.
kisa.program @p attributes {target = "trn1", hbm_bytes = 64, semaphores = 1} {
  // expected-error @+1 {{an access pattern has 1 to 4 free dimensions}}
  kisa.memset {value = 0.0, dst = #kisa.ap<sbuf, f32, p = 0:1, offset = 0, dims = [1 x 1, 1 x 1, 1 x 1, 1 x 1, 1 x 1]>}
}

// -----

// Access-pattern dtypes.
kisa.program @p attributes {target = "trn1", hbm_bytes = 64, semaphores = 1} {
  // expected-error @+1 {{access pattern dtype must be f32, bf16, f16 or i32}}
  kisa.memset {value = 0.0, dst = #kisa.ap<sbuf, f64, p = 0:1, offset = 0, dims = [1 x 1]>}
}

// -----

// Memories.
kisa.program @p attributes {target = "trn1", hbm_bytes = 64, semaphores = 1} {
  // expected-error @+1 {{unknown memory 'dram' (hbm, sbuf or psum)}}
  kisa.memset {value = 0.0, dst = #kisa.ap<dram, f32, p = 0:1, offset = 0, dims = [1 x 1]>}
}

// -----

// The generator reads an i32 seed per partition.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{operand 'seed' must be an i32 SBUF tile of [8 x 1]}}
  kisa.random {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 8]>, seed = #kisa.ap<sbuf, f32, p = 0:8, offset = 64, dims = [1 x 1]>}
}

// -----

// Random numbers are floating point.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{operand 'dst': random numbers are floating point}}
  kisa.random {dst = #kisa.ap<sbuf, i32, p = 0:8, offset = 0, dims = [1 x 8]>, seed = #kisa.ap<sbuf, i32, p = 0:8, offset = 64, dims = [1 x 1]>}
}

// -----

// Counters are unsigned.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{'counter' must be >= 0}}
  kisa.random {counter = -1, dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 8]>, seed = #kisa.ap<sbuf, i32, p = 0:8, offset = 64, dims = [1 x 1]>}
}

// -----

// A group step is a counter step: a whole number (it travels in a double).
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{'group_step' must be a whole number below 2^53}}
  kisa.random {group_step = 1.5, dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [4 x 2, 1 x 4]>, seed = #kisa.ap<sbuf, i32, p = 0:8, offset = 64, dims = [1 x 1]>}
}

// -----

// Only GpSimd has the generator.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{'random' cannot run on engine vector}}
  kisa.random {engine = "vector", dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 8]>, seed = #kisa.ap<sbuf, i32, p = 0:8, offset = 64, dims = [1 x 1]>}
}

// -----

// ScalarE runs tensor_scalar's arithmetic, not integer work.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  kisa.tensor_scalar {engine = "scalar", op0 = "mul", scalar0 = 2.0, dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 8]>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 64, dims = [1 x 8]>}
  // expected-error @+1 {{tensor_scalar on the scalar engine works on floating point}}
  kisa.tensor_scalar {engine = "scalar", op0 = "add", scalar0 = 1.0, dst = #kisa.ap<sbuf, i32, p = 0:8, offset = 0, dims = [1 x 8]>, src = #kisa.ap<sbuf, i32, p = 0:8, offset = 64, dims = [1 x 8]>}
}

// -----

// Per-partition scalars: one column per scalar taken, one row per partition.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{operand 'scalars' must be an SBUF [8 x 1]}}
  kisa.tensor_scalar {op0 = "sub", scalar0 = 0.0, scalar_operands = 1, dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 8]>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 64, dims = [1 x 8]>, scalars = #kisa.ap<sbuf, f32, p = 0:8, offset = 128, dims = [1 x 2]>}
}

// -----

// scalar_operands names the scalars that come from 'scalars', and only then.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{scalar_operands must be 1, 2 or 3 exactly when operand 'scalars' is given}}
  kisa.tensor_scalar {op0 = "sub", scalar0 = 0.0, scalar_operands = 1, dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 8]>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 64, dims = [1 x 8]>}
}

// -----

// A gather's indices are i32, one per destination partition.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{operand 'indices' must be an i32 SBUF tile of [8 x 1]}}
  kisa.dma_gather {index_stride = 16, index_bound = 10, dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 16]>, src = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 16], pstride = 0>, indices = #kisa.ap<sbuf, f32, p = 0:8, offset = 64, dims = [1 x 1]>}
}

// -----

// Every row an index in [0, index_bound) can pick lies in HBM.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{operand 'src': HBM bytes [70336, 70400) lie outside the program's 65536 bytes of HBM (at index 1099)}}
  kisa.dma_gather {index_stride = 16, index_bound = 1100, dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 16]>, src = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 16], pstride = 0>, indices = #kisa.ap<sbuf, i32, p = 0:8, offset = 64, dims = [1 x 1]>}
}

// -----

// A gather reads HBM rows into SBUF.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{dma_gather reads rows of HBM into SBUF}}
  kisa.dma_gather {index_stride = 16, index_bound = 10, dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 16]>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 128, dims = [1 x 16]>, indices = #kisa.ap<sbuf, i32, p = 0:8, offset = 64, dims = [1 x 1]>}
}

// -----

kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{'index_stride' must be in [0, 2^32] and 'index_bound' in [1, 2^32]}}
  kisa.dma_gather {index_stride = 16, index_bound = 0, dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 16]>, src = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 16], pstride = 0>, indices = #kisa.ap<sbuf, i32, p = 0:8, offset = 64, dims = [1 x 1]>}
}

// -----

// A scatter writes SBUF rows into HBM.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{dma_scatter writes rows of SBUF into HBM}}
  kisa.dma_scatter {index_stride = 16, index_bound = 10, dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 128, dims = [1 x 16]>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 16]>, indices = #kisa.ap<sbuf, i32, p = 0:8, offset = 64, dims = [1 x 1]>}
}

// -----

// Every row an index in [0, index_bound) can pick lies in HBM.
kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{operand 'dst': HBM bytes [70336, 70400) lie outside the program's 65536 bytes of HBM (at index 1099)}}
  kisa.dma_scatter {index_stride = 16, index_bound = 1100, dst = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 16], pstride = 0>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 16]>, indices = #kisa.ap<sbuf, i32, p = 0:8, offset = 64, dims = [1 x 1]>}
}

// -----

kisa.program @p attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // expected-error @+1 {{operand 'indices' must be an i32 SBUF tile of [8 x 1]}}
  kisa.dma_scatter {index_stride = 16, index_bound = 10, dst = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 16], pstride = 0>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 16]>, indices = #kisa.ap<sbuf, i32, p = 0:4, offset = 64, dims = [1 x 1]>}
}
