// RUN: kiln-opt %s --convert-ktile-to-kisa | FileCheck %s

// A 1 MiB load ([128 x 2048] f32) is cut along its partitions into four
// 256 KiB transfers on four queues: each moves 32 rows, the HBM side 32 rows
// (256 KiB) further on, the SBUF side 32 partitions further on. The exp
// waits for all four. The 4 KiB store stays whole.
// CHECK: kisa.dma_copy {dst = #kisa.ap<sbuf, f32, p = 0:32, offset = 0, dims = [1 x 2048]>, {{.*}}queue = 0 : i64{{.*}}src = #kisa.ap<hbm, f32, p = 0:32, offset = 0, dims = [1 x 2048], pstride = 2048>
// CHECK-NEXT: kisa.dma_copy {dst = #kisa.ap<sbuf, f32, p = 32:32, offset = 0, dims = [1 x 2048]>, {{.*}}queue = 1 : i64{{.*}}src = #kisa.ap<hbm, f32, p = 0:32, offset = 262144, dims = [1 x 2048], pstride = 2048>
// CHECK-NEXT: kisa.dma_copy {dst = #kisa.ap<sbuf, f32, p = 64:32, offset = 0, dims = [1 x 2048]>, {{.*}}queue = 2 : i64{{.*}}src = #kisa.ap<hbm, f32, p = 0:32, offset = 524288, dims = [1 x 2048], pstride = 2048>
// CHECK-NEXT: kisa.dma_copy {dst = #kisa.ap<sbuf, f32, p = 96:32, offset = 0, dims = [1 x 2048]>, {{.*}}queue = 3 : i64{{.*}}src = #kisa.ap<hbm, f32, p = 0:32, offset = 786432, dims = [1 x 2048], pstride = 2048>
// CHECK-NEXT: kisa.activation {{.*}}wait_sem = array<i64: {{[0-9]+}}, {{[0-9]+}}, {{[0-9]+}}, {{[0-9]+}}>, wait_value = array<i64: 1, 1, 1, 1>
// CHECK-NEXT: kisa.dma_copy {dst = #kisa.ap<hbm, f32, p = 0:128, offset = 1048576, dims = [1 x 8], pstride = 8>
// CHECK-NOT: kisa.dma_copy
module {
  func.func @big(%arg0: memref<128x2048xf32, "hbm">) -> memref<128x8xf32, "hbm"> attributes {ktile.argument_addresses = array<i64: 0>, ktile.hbm_bytes = 1052672 : i64} {
    %0 = ktile.alloc {address = 1048576 : i64} : memref<128x8xf32, "hbm">
    %1 = ktile.alloc {address = 0 : i64} : memref<128x2048xf32, "sbuf">
    ktile.dma_copy %1, %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 2048]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 2048], pstride = 2048>} : memref<128x2048xf32, "sbuf">, memref<128x2048xf32, "hbm">
    %2 = ktile.alloc {address = 8192 : i64} : memref<128x8xf32, "sbuf">
    ktile.activation %2, %1 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 8]>, func = "exp", src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 8]>} : memref<128x8xf32, "sbuf">, memref<128x2048xf32, "sbuf">
    ktile.dma_copy %0, %2 {dst = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 8], pstride = 8>, src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 8]>} : memref<128x8xf32, "hbm">, memref<128x8xf32, "sbuf">
    return %0 : memref<128x8xf32, "hbm">
  }
}
