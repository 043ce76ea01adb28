// RUN: kiln-opt %s --ktile-plan-memory | FileCheck %s
// RUN: not kiln-opt %s --ktile-plan-memory=sbuf-bytes=2560 2>&1 | FileCheck %s --check-prefix=SMALL
// RUN: kiln-opt %s --ktile-plan-memory=sbuf-bytes=3584 | FileCheck %s --check-prefix=SPILL

// Arguments first, then results, then intermediates reusing dead space.
// On-chip buffers rotate: the second iteration's tiles do not reuse the
// first's, though they are free, so loads can overlap compute.
// CHECK-LABEL: func.func @rotate
// CHECK-SAME: ktile.argument_addresses = array<i64: 0>
// CHECK-SAME: ktile.hbm_bytes = 8192
// CHECK: ktile.alloc {address = 4096 : i64} : memref<8x128xf32, "hbm">
// CHECK: ktile.alloc {address = 0 : i64} : memref<8x128xf32, "sbuf">
// CHECK: ktile.alloc {address = 512 : i64} : memref<8x128xf32, "sbuf">
// CHECK: ktile.alloc {address = 1024 : i64} : memref<8x128xf32, "sbuf">
// CHECK: ktile.alloc {address = 1536 : i64} : memref<8x128xf32, "sbuf">
// With room for one tile (2 KiB of the 2.5 KiB go to the engine phase's
// scratch), the second tile does not fit, and spilling cannot help: the
// activation reads the first while it writes the second.
// SMALL: error: 'ktile.alloc' op needs 512 bytes per partition of sbuf but 512 of 512 are live here and the same instruction needs them
func.func @rotate(%x: memref<8x128xf32, "hbm">) -> memref<8x128xf32, "hbm"> {
  %y = ktile.alloc : memref<8x128xf32, "hbm">
  %a = ktile.alloc : memref<8x128xf32, "sbuf">
  ktile.dma_copy %a, %x {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>, src = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>} : memref<8x128xf32, "sbuf">, memref<8x128xf32, "hbm">
  %b = ktile.alloc : memref<8x128xf32, "sbuf">
  ktile.activation %b, %a {func = "exp", dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "sbuf">, memref<8x128xf32, "sbuf">
  ktile.dma_copy %y, %b {dst = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "hbm">, memref<8x128xf32, "sbuf">
  %c = ktile.alloc : memref<8x128xf32, "sbuf">
  ktile.dma_copy %c, %x {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>, src = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>} : memref<8x128xf32, "sbuf">, memref<8x128xf32, "hbm">
  %d = ktile.alloc : memref<8x128xf32, "sbuf">
  ktile.activation %d, %c {func = "exp", dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "sbuf">, memref<8x128xf32, "sbuf">
  ktile.dma_copy %y, %d {dst = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "hbm">, memref<8x128xf32, "sbuf">
  return %y : memref<8x128xf32, "hbm">
}

// Room for three tiles: %d needs a fourth while %a, %b and %c are live.
// %a, used again furthest away, is stored to an HBM scratch buffer in front
// of %d's allocation (its space goes to %d) and reloaded into a fresh tile
// just before the multiply, which reads the copy.
// SPILL-LABEL: func.func @spill
// SPILL-SAME: ktile.spills = 1
// SPILL: %[[A:.*]] = ktile.alloc {address = 0 : i64} : memref<8x128xf32, "sbuf">
// SPILL: ktile.activation %[[B:.*]], %[[A]]
// SPILL: ktile.activation %[[C:.*]], %[[B]]
// SPILL: %[[S:.*]] = ktile.alloc {address = {{[0-9]+}} : i64, name = "spill"} : memref<8x128xf32, "hbm">
// SPILL-NEXT: ktile.dma_copy %[[S]], %[[A]]
// SPILL-NEXT: %[[D:.*]] = ktile.alloc {address = 0 : i64}
// SPILL-NEXT: ktile.tensor_tensor %[[D]], %[[B]], %[[C]]
// SPILL-NEXT: %[[E:.*]] = ktile.alloc
// SPILL-NEXT: %[[A2:.*]] = ktile.alloc {address = 1024 : i64} : memref<8x128xf32, "sbuf">
// SPILL-NEXT: ktile.dma_copy %[[A2]], %[[S]]
// SPILL-NEXT: ktile.tensor_tensor %[[E]], %[[A2]], %[[D]]
func.func @spill(%x: memref<8x128xf32, "hbm">) -> memref<8x128xf32, "hbm"> {
  %y = ktile.alloc : memref<8x128xf32, "hbm">
  %a = ktile.alloc : memref<8x128xf32, "sbuf">
  ktile.dma_copy %a, %x {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>, src = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>} : memref<8x128xf32, "sbuf">, memref<8x128xf32, "hbm">
  %b = ktile.alloc : memref<8x128xf32, "sbuf">
  ktile.activation %b, %a {func = "exp", dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "sbuf">, memref<8x128xf32, "sbuf">
  %c = ktile.alloc : memref<8x128xf32, "sbuf">
  ktile.activation %c, %b {func = "tanh", dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "sbuf">, memref<8x128xf32, "sbuf">
  %d = ktile.alloc : memref<8x128xf32, "sbuf">
  ktile.tensor_tensor %d, %b, %c {op = "add", dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>, lhs = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>, rhs = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "sbuf">, memref<8x128xf32, "sbuf">, memref<8x128xf32, "sbuf">
  %e = ktile.alloc : memref<8x128xf32, "sbuf">
  ktile.tensor_tensor %e, %a, %d {op = "mul", dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>, lhs = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>, rhs = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "sbuf">, memref<8x128xf32, "sbuf">, memref<8x128xf32, "sbuf">
  ktile.dma_copy %y, %e {dst = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "hbm">, memref<8x128xf32, "sbuf">
  return %y : memref<8x128xf32, "hbm">
}

// Buffers only engines touch, used over a short stretch (%b and %e, each
// read by the next activation), get a region of their own at the bottom
// of SBUF, twice the least they fit placed alone: loads and results (%a,
// %c, %d, %f, %g) rotate through the rest above it, so a load's tile
// never waits for an engine that reads a temporary there.
// CHECK-LABEL: func.func @local_region
// CHECK: ktile.alloc {address = 1024 : i64} : memref<8x128xf32, "sbuf">
// CHECK-NEXT: ktile.dma_copy
// CHECK-NEXT: ktile.alloc {address = 0 : i64} : memref<8x128xf32, "sbuf">
// CHECK: ktile.alloc {address = 1536 : i64}
// CHECK: ktile.alloc {address = 2048 : i64}
// CHECK-NEXT: ktile.dma_copy
// CHECK-NEXT: ktile.alloc {address = 512 : i64} : memref<8x128xf32, "sbuf">
// CHECK: ktile.alloc {address = 2560 : i64}
// CHECK: ktile.alloc {address = 3072 : i64}
func.func @local_region(%x: memref<8x128xf32, "hbm">) -> memref<8x128xf32, "hbm"> {
  %y = ktile.alloc : memref<8x128xf32, "hbm">
  %a = ktile.alloc : memref<8x128xf32, "sbuf">
  ktile.dma_copy %a, %x {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>, src = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>} : memref<8x128xf32, "sbuf">, memref<8x128xf32, "hbm">
  %b = ktile.alloc : memref<8x128xf32, "sbuf">
  ktile.activation %b, %a {func = "exp", dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "sbuf">, memref<8x128xf32, "sbuf">
  %c = ktile.alloc : memref<8x128xf32, "sbuf">
  ktile.activation %c, %b {func = "tanh", dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "sbuf">, memref<8x128xf32, "sbuf">
  ktile.dma_copy %y, %c {dst = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "hbm">, memref<8x128xf32, "sbuf">
  %d = ktile.alloc : memref<8x128xf32, "sbuf">
  ktile.dma_copy %d, %x {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>, src = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>} : memref<8x128xf32, "sbuf">, memref<8x128xf32, "hbm">
  %e = ktile.alloc : memref<8x128xf32, "sbuf">
  ktile.activation %e, %d {func = "exp", dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "sbuf">, memref<8x128xf32, "sbuf">
  %f = ktile.alloc : memref<8x128xf32, "sbuf">
  ktile.activation %f, %e {func = "tanh", dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "sbuf">, memref<8x128xf32, "sbuf">
  ktile.dma_copy %y, %f {dst = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "hbm">, memref<8x128xf32, "sbuf">
  %g = ktile.alloc : memref<8x128xf32, "sbuf">
  ktile.activation %g, %e {func = "exp", dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "sbuf">, memref<8x128xf32, "sbuf">
  ktile.dma_copy %y, %g {dst = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "hbm">, memref<8x128xf32, "sbuf">
  return %y : memref<8x128xf32, "hbm">
}

// HBM intermediates rotate through four times the most that is live at
// once (one 4 KiB buffer here): the fifth reuses the first's space, dead
// since its read. The operands of a collective keep space of their own,
// like the argument and the result, below the intermediates.
// CHECK-LABEL: func.func @hbm_rotation
// CHECK-SAME: ktile.hbm_bytes = 28672
// CHECK: ktile.alloc {address = 4096 : i64} : memref<8x128xf32, "hbm">
// CHECK: ktile.alloc {address = 8192 : i64} : memref<8x128xf32, "hbm">
// CHECK: ktile.alloc {address = 12288 : i64} : memref<8x128xf32, "hbm">
// CHECK: ktile.alloc {address = 16384 : i64} : memref<8x128xf32, "hbm">
// CHECK: ktile.alloc {address = 20480 : i64} : memref<8x128xf32, "hbm">
// CHECK: ktile.alloc {address = 24576 : i64} : memref<8x128xf32, "hbm">
// CHECK: ktile.alloc {address = 12288 : i64} : memref<8x128xf32, "hbm">
func.func @hbm_rotation(%x: memref<8x128xf32, "hbm">) -> memref<8x128xf32, "hbm"> {
  %y = ktile.alloc : memref<8x128xf32, "hbm">
  %g = ktile.alloc : memref<8x128xf32, "hbm">
  ktile.collective %g, %x {kind = "all_reduce_sum", dst = #kisa.ap<hbm, f32, p = 0:1, offset = 0, dims = [1 x 1024], pstride = 1024>, src = #kisa.ap<hbm, f32, p = 0:1, offset = 0, dims = [1 x 1024], pstride = 1024>} : memref<8x128xf32, "hbm">, memref<8x128xf32, "hbm">
  %s = ktile.alloc : memref<8x128xf32, "sbuf">
  ktile.dma_copy %s, %g {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>, src = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>} : memref<8x128xf32, "sbuf">, memref<8x128xf32, "hbm">
  %t0 = ktile.alloc : memref<8x128xf32, "hbm">
  ktile.dma_copy %t0, %s {dst = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "hbm">, memref<8x128xf32, "sbuf">
  ktile.dma_copy %s, %t0 {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>, src = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>} : memref<8x128xf32, "sbuf">, memref<8x128xf32, "hbm">
  %t1 = ktile.alloc : memref<8x128xf32, "hbm">
  ktile.dma_copy %t1, %s {dst = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "hbm">, memref<8x128xf32, "sbuf">
  ktile.dma_copy %s, %t1 {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>, src = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>} : memref<8x128xf32, "sbuf">, memref<8x128xf32, "hbm">
  %t2 = ktile.alloc : memref<8x128xf32, "hbm">
  ktile.dma_copy %t2, %s {dst = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "hbm">, memref<8x128xf32, "sbuf">
  ktile.dma_copy %s, %t2 {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>, src = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>} : memref<8x128xf32, "sbuf">, memref<8x128xf32, "hbm">
  %t3 = ktile.alloc : memref<8x128xf32, "hbm">
  ktile.dma_copy %t3, %s {dst = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "hbm">, memref<8x128xf32, "sbuf">
  ktile.dma_copy %s, %t3 {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>, src = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>} : memref<8x128xf32, "sbuf">, memref<8x128xf32, "hbm">
  %t4 = ktile.alloc : memref<8x128xf32, "hbm">
  ktile.dma_copy %t4, %s {dst = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "hbm">, memref<8x128xf32, "sbuf">
  ktile.dma_copy %s, %t4 {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>, src = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>} : memref<8x128xf32, "sbuf">, memref<8x128xf32, "hbm">
  ktile.dma_copy %y, %s {dst = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "hbm">, memref<8x128xf32, "sbuf">
  return %y : memref<8x128xf32, "hbm">
}

// A tensor-parallel collective's result is read at once: its operands are
// intermediates like any (the all-reduce's result first in the rotation,
// its space reused by the fourth buffer after it), where a data-parallel
// one's keep space of their own (above).
// CHECK-LABEL: func.func @tensor_parallel_operands_rotate
// CHECK-SAME: ktile.hbm_bytes = 24576
// CHECK: ktile.alloc {address = 4096 : i64} : memref<8x128xf32, "hbm">
// CHECK: ktile.alloc {address = 8192 : i64} : memref<8x128xf32, "hbm">
// CHECK: ktile.alloc {address = 12288 : i64} : memref<8x128xf32, "hbm">
// CHECK: ktile.alloc {address = 16384 : i64} : memref<8x128xf32, "hbm">
// CHECK: ktile.alloc {address = 20480 : i64} : memref<8x128xf32, "hbm">
// CHECK: ktile.alloc {address = 8192 : i64} : memref<8x128xf32, "hbm">
// CHECK: ktile.alloc {address = 12288 : i64} : memref<8x128xf32, "hbm">
func.func @tensor_parallel_operands_rotate(%x: memref<8x128xf32, "hbm">) -> memref<8x128xf32, "hbm"> {
  %y = ktile.alloc : memref<8x128xf32, "hbm">
  %g = ktile.alloc : memref<8x128xf32, "hbm">
  ktile.collective %g, %x {group = 1 : i64, kind = "all_reduce_sum", dst = #kisa.ap<hbm, f32, p = 0:1, offset = 0, dims = [1 x 1024], pstride = 1024>, src = #kisa.ap<hbm, f32, p = 0:1, offset = 0, dims = [1 x 1024], pstride = 1024>} : memref<8x128xf32, "hbm">, memref<8x128xf32, "hbm">
  %s = ktile.alloc : memref<8x128xf32, "sbuf">
  ktile.dma_copy %s, %g {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>, src = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>} : memref<8x128xf32, "sbuf">, memref<8x128xf32, "hbm">
  %t0 = ktile.alloc : memref<8x128xf32, "hbm">
  ktile.dma_copy %t0, %s {dst = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "hbm">, memref<8x128xf32, "sbuf">
  ktile.dma_copy %s, %t0 {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>, src = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>} : memref<8x128xf32, "sbuf">, memref<8x128xf32, "hbm">
  %t1 = ktile.alloc : memref<8x128xf32, "hbm">
  ktile.dma_copy %t1, %s {dst = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "hbm">, memref<8x128xf32, "sbuf">
  ktile.dma_copy %s, %t1 {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>, src = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>} : memref<8x128xf32, "sbuf">, memref<8x128xf32, "hbm">
  %t2 = ktile.alloc : memref<8x128xf32, "hbm">
  ktile.dma_copy %t2, %s {dst = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "hbm">, memref<8x128xf32, "sbuf">
  ktile.dma_copy %s, %t2 {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>, src = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>} : memref<8x128xf32, "sbuf">, memref<8x128xf32, "hbm">
  %t3 = ktile.alloc : memref<8x128xf32, "hbm">
  ktile.dma_copy %t3, %s {dst = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "hbm">, memref<8x128xf32, "sbuf">
  ktile.dma_copy %s, %t3 {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>, src = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>} : memref<8x128xf32, "sbuf">, memref<8x128xf32, "hbm">
  %t4 = ktile.alloc : memref<8x128xf32, "hbm">
  ktile.dma_copy %t4, %s {dst = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "hbm">, memref<8x128xf32, "sbuf">
  ktile.dma_copy %s, %t4 {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>, src = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>} : memref<8x128xf32, "sbuf">, memref<8x128xf32, "hbm">
  ktile.dma_copy %y, %s {dst = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "hbm">, memref<8x128xf32, "sbuf">
  return %y : memref<8x128xf32, "hbm">
}
