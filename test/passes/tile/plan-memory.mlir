// RUN: kiln-opt %s --ktile-plan-memory | FileCheck %s
// RUN: not kiln-opt %s --ktile-plan-memory=sbuf-bytes=2560 2>&1 | FileCheck %s --check-prefix=SMALL

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
// scratch), the second live tile does not fit: a clear error, no spill.
// SMALL: error: 'ktile.alloc' op needs 512 bytes per partition of sbuf but 512 of 512 are live here
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
