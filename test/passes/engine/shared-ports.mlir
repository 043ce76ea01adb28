// RUN: kiln-opt %s --convert-ktile-to-kisa | FileCheck %s

// Shared ports. A tensor_tensor (on GpSimd) and a tensor_reduce (VectorE
// only) read one loaded tile and nothing else: no data orders them, but on
// trn1 VectorE and GpSimd share an SBUF port. The machine gives the port to
// whichever engine's next instruction is ready first; the schedule gave it
// to the tensor_tensor, so the tensor_reduce waits for the tensor_tensor's
// signal (which also covers the load it reads: no second wait).
// CHECK: kisa.dma_copy {dst = #kisa.ap<sbuf, {{.*}}signal = array<i64: [[LOAD:[0-9]+]]>
// CHECK-NEXT: kisa.tensor_tensor {{{.*}}engine = "gpsimd", {{.*}}signal = array<i64: [[GPSIMD:[0-9]+]]>, wait_sem = array<i64: [[LOAD]]>, wait_value = array<i64: 1>}
// CHECK-NEXT: kisa.tensor_reduce {{{.*}}wait_sem = array<i64: [[GPSIMD]]>, wait_value = array<i64: 1>}
module {
  func.func @ports(%arg0: memref<8x512xf32, "hbm">) -> (memref<8x512xf32, "hbm">, memref<8x1xf32, "hbm">) attributes {ktile.argument_addresses = array<i64: 0>, ktile.hbm_bytes = 65536 : i64} {
    %0 = ktile.alloc {address = 16384 : i64} : memref<8x512xf32, "hbm">
    %r = ktile.alloc {address = 32768 : i64} : memref<8x1xf32, "hbm">
    %1 = ktile.alloc {address = 0 : i64} : memref<8x512xf32, "sbuf">
    ktile.dma_copy %1, %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 512]>, src = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 512], pstride = 512>} : memref<8x512xf32, "sbuf">, memref<8x512xf32, "hbm">
    %2 = ktile.alloc {address = 2048 : i64} : memref<8x512xf32, "sbuf">
    ktile.tensor_tensor %2, %1, %1 {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 512]>, op = "add", lhs = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 512]>, rhs = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 512]>} : memref<8x512xf32, "sbuf">, memref<8x512xf32, "sbuf">, memref<8x512xf32, "sbuf">
    %3 = ktile.alloc {address = 4096 : i64} : memref<8x1xf32, "sbuf">
    ktile.tensor_reduce %3, %1 {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 1]>, op = "add", src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 512]>} : memref<8x1xf32, "sbuf">, memref<8x512xf32, "sbuf">
    ktile.dma_copy %0, %2 {dst = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 512], pstride = 512>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 512]>} : memref<8x512xf32, "hbm">, memref<8x512xf32, "sbuf">
    ktile.dma_copy %r, %3 {dst = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 1], pstride = 1>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 1]>} : memref<8x1xf32, "hbm">, memref<8x1xf32, "sbuf">
    return %0, %r : memref<8x512xf32, "hbm">, memref<8x1xf32, "hbm">
  }
}
