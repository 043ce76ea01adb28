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
// Seventeen 1 MiB loads at once on sixteen queues: a piece placed while
// every other free queue has another load to take takes its siblings back
// (four pieces would only add three fixed costs), so sixteen loads go whole,
// one per queue. The last, alone when the queues free up, is cut in four.
// That schedule ends sooner than the one with every load in four pieces
// (about 53 against 59 us), so it is the one kept.
// CHECK-LABEL: kisa.program @busy
// CHECK-COUNT-16: kisa.dma_copy {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = {{[0-9]+}}, dims = [1 x 2048]>, {{.*}}src = #kisa.ap<hbm, f32, p = 0:128,
// CHECK-NEXT: kisa.dma_copy {dst = #kisa.ap<sbuf, f32, p = 0:32, offset = 122880, dims = [1 x 2048]>, {{.*}}queue = 0 : i64
// CHECK-NEXT: kisa.dma_copy {dst = #kisa.ap<sbuf, f32, p = 32:32, offset = 122880, dims = [1 x 2048]>, {{.*}}queue = 1 : i64
// CHECK-NEXT: kisa.dma_copy {dst = #kisa.ap<sbuf, f32, p = 64:32, offset = 122880, dims = [1 x 2048]>, {{.*}}queue = 2 : i64
// CHECK-NEXT: kisa.dma_copy {dst = #kisa.ap<sbuf, f32, p = 96:32, offset = 122880, dims = [1 x 2048]>, {{.*}}queue = 3 : i64
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
  func.func @busy(%arg0: memref<17x128x2048xf32, "hbm">) -> memref<128x8xf32, "hbm"> attributes {ktile.argument_addresses = array<i64: 0>, ktile.hbm_bytes = 17829888 : i64} {
    %0 = ktile.alloc {address = 17825792 : i64} : memref<128x8xf32, "hbm">
    %t0 = ktile.alloc {address = 0 : i64} : memref<128x2048xf32, "sbuf">
    ktile.dma_copy %t0, %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 2048]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 2048], pstride = 2048>} : memref<128x2048xf32, "sbuf">, memref<17x128x2048xf32, "hbm">
    %t1 = ktile.alloc {address = 8192 : i64} : memref<128x2048xf32, "sbuf">
    ktile.dma_copy %t1, %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 2048]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 262144, dims = [1 x 2048], pstride = 2048>} : memref<128x2048xf32, "sbuf">, memref<17x128x2048xf32, "hbm">
    %t2 = ktile.alloc {address = 16384 : i64} : memref<128x2048xf32, "sbuf">
    ktile.dma_copy %t2, %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 2048]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 524288, dims = [1 x 2048], pstride = 2048>} : memref<128x2048xf32, "sbuf">, memref<17x128x2048xf32, "hbm">
    %t3 = ktile.alloc {address = 24576 : i64} : memref<128x2048xf32, "sbuf">
    ktile.dma_copy %t3, %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 2048]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 786432, dims = [1 x 2048], pstride = 2048>} : memref<128x2048xf32, "sbuf">, memref<17x128x2048xf32, "hbm">
    %t4 = ktile.alloc {address = 32768 : i64} : memref<128x2048xf32, "sbuf">
    ktile.dma_copy %t4, %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 2048]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 1048576, dims = [1 x 2048], pstride = 2048>} : memref<128x2048xf32, "sbuf">, memref<17x128x2048xf32, "hbm">
    %t5 = ktile.alloc {address = 40960 : i64} : memref<128x2048xf32, "sbuf">
    ktile.dma_copy %t5, %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 2048]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 1310720, dims = [1 x 2048], pstride = 2048>} : memref<128x2048xf32, "sbuf">, memref<17x128x2048xf32, "hbm">
    %t6 = ktile.alloc {address = 49152 : i64} : memref<128x2048xf32, "sbuf">
    ktile.dma_copy %t6, %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 2048]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 1572864, dims = [1 x 2048], pstride = 2048>} : memref<128x2048xf32, "sbuf">, memref<17x128x2048xf32, "hbm">
    %t7 = ktile.alloc {address = 57344 : i64} : memref<128x2048xf32, "sbuf">
    ktile.dma_copy %t7, %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 2048]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 1835008, dims = [1 x 2048], pstride = 2048>} : memref<128x2048xf32, "sbuf">, memref<17x128x2048xf32, "hbm">
    %t8 = ktile.alloc {address = 65536 : i64} : memref<128x2048xf32, "sbuf">
    ktile.dma_copy %t8, %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 2048]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 2097152, dims = [1 x 2048], pstride = 2048>} : memref<128x2048xf32, "sbuf">, memref<17x128x2048xf32, "hbm">
    %t9 = ktile.alloc {address = 73728 : i64} : memref<128x2048xf32, "sbuf">
    ktile.dma_copy %t9, %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 2048]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 2359296, dims = [1 x 2048], pstride = 2048>} : memref<128x2048xf32, "sbuf">, memref<17x128x2048xf32, "hbm">
    %t10 = ktile.alloc {address = 81920 : i64} : memref<128x2048xf32, "sbuf">
    ktile.dma_copy %t10, %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 2048]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 2621440, dims = [1 x 2048], pstride = 2048>} : memref<128x2048xf32, "sbuf">, memref<17x128x2048xf32, "hbm">
    %t11 = ktile.alloc {address = 90112 : i64} : memref<128x2048xf32, "sbuf">
    ktile.dma_copy %t11, %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 2048]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 2883584, dims = [1 x 2048], pstride = 2048>} : memref<128x2048xf32, "sbuf">, memref<17x128x2048xf32, "hbm">
    %t12 = ktile.alloc {address = 98304 : i64} : memref<128x2048xf32, "sbuf">
    ktile.dma_copy %t12, %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 2048]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 3145728, dims = [1 x 2048], pstride = 2048>} : memref<128x2048xf32, "sbuf">, memref<17x128x2048xf32, "hbm">
    %t13 = ktile.alloc {address = 106496 : i64} : memref<128x2048xf32, "sbuf">
    ktile.dma_copy %t13, %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 2048]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 3407872, dims = [1 x 2048], pstride = 2048>} : memref<128x2048xf32, "sbuf">, memref<17x128x2048xf32, "hbm">
    %t14 = ktile.alloc {address = 114688 : i64} : memref<128x2048xf32, "sbuf">
    ktile.dma_copy %t14, %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 2048]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 3670016, dims = [1 x 2048], pstride = 2048>} : memref<128x2048xf32, "sbuf">, memref<17x128x2048xf32, "hbm">
    %t15 = ktile.alloc {address = 122880 : i64} : memref<128x2048xf32, "sbuf">
    ktile.dma_copy %t15, %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 2048]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 3932160, dims = [1 x 2048], pstride = 2048>} : memref<128x2048xf32, "sbuf">, memref<17x128x2048xf32, "hbm">
    %t16 = ktile.alloc {address = 131072 : i64} : memref<128x2048xf32, "sbuf">
    ktile.dma_copy %t16, %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 2048]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 4194304, dims = [1 x 2048], pstride = 2048>} : memref<128x2048xf32, "sbuf">, memref<17x128x2048xf32, "hbm">
    ktile.dma_copy %0, %t16 {dst = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 8], pstride = 8>, src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 8]>} : memref<128x8xf32, "hbm">, memref<128x2048xf32, "sbuf">
    return %0 : memref<128x8xf32, "hbm">
  }
}
