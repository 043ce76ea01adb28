// RUN: kiln-opt %s | kiln-opt | FileCheck %s
// ktile ops print and parse back unchanged.

// CHECK-LABEL: func.func @exp_rows
// CHECK: ktile.alloc : memref<128x512xf32, "sbuf">
// CHECK: ktile.alloc {name = "y"} : memref<128x512xf32, "hbm">
// CHECK: ktile.dma_copy
// CHECK-SAME: pstride = 512
// CHECK: ktile.activation
// CHECK-SAME: func = "exp"
// CHECK: ktile.view
func.func @exp_rows(%x: memref<128x512xf32, "hbm">) -> memref<65536xf32, "hbm"> {
  %t = ktile.alloc : memref<128x512xf32, "sbuf">
  %y = ktile.alloc {name = "y"} : memref<128x512xf32, "hbm">
  ktile.dma_copy %t, %x {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 512]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 512], pstride = 512>} : memref<128x512xf32, "sbuf">, memref<128x512xf32, "hbm">
  ktile.activation %t, %t {func = "exp", dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 512]>, src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 512]>} : memref<128x512xf32, "sbuf">, memref<128x512xf32, "sbuf">
  ktile.dma_copy %y, %t {dst = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 512], pstride = 512>, src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 512]>} : memref<128x512xf32, "hbm">, memref<128x512xf32, "sbuf">
  %flat = ktile.view %y : memref<128x512xf32, "hbm"> to memref<65536xf32, "hbm">
  return %flat : memref<65536xf32, "hbm">
}

// CHECK-LABEL: func.func @matmul_tile
// CHECK: ktile.matmul
// CHECK-SAME: accumulate = true
// CHECK: ktile.tensor_copy
func.func @matmul_tile() {
  %a = ktile.alloc : memref<128x128xbf16, "sbuf">
  %b = ktile.alloc : memref<128x512xbf16, "sbuf">
  %c = ktile.alloc : memref<128x512xf32, "psum">
  %o = ktile.alloc : memref<128x512xf32, "sbuf">
  ktile.matmul %c, %a, %b {accumulate = true, dst = #kisa.ap<psum, f32, p = 0:128, offset = 0, dims = [1 x 512]>, stationary = #kisa.ap<sbuf, bf16, p = 0:128, offset = 0, dims = [1 x 128]>, moving = #kisa.ap<sbuf, bf16, p = 0:128, offset = 0, dims = [1 x 512]>} : memref<128x512xf32, "psum">, memref<128x128xbf16, "sbuf">, memref<128x512xbf16, "sbuf">
  ktile.tensor_copy %o, %c {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 512]>, src = #kisa.ap<psum, f32, p = 0:128, offset = 0, dims = [1 x 512]>} : memref<128x512xf32, "sbuf">, memref<128x512xf32, "psum">
  return
}

// CHECK-LABEL: func.func @random_tile
// CHECK: ktile.random %{{.*}}, %{{.*}} {counter = 1099511627776 : i64, dst = {{.*}}, free_step = 1 : i64, partition_step = 64 : i64, seed = #kisa.ap<sbuf, i32, p = 0:128, offset = 0, dims = [1 x 1]>}
func.func @random_tile() {
  %u = ktile.alloc : memref<128x64xf32, "sbuf">
  %s = ktile.alloc : memref<128x1xi32, "sbuf">
  ktile.random %u, %s {counter = 1099511627776, partition_step = 64, free_step = 1, dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 64]>, seed = #kisa.ap<sbuf, i32, p = 0:128, offset = 0, dims = [1 x 1]>} : memref<128x64xf32, "sbuf">, memref<128x1xi32, "sbuf">
  return
}

// CHECK-LABEL: func.func @gather_rows
// CHECK: ktile.dma_gather %{{.*}}, %arg0, %{{.*}} {dst = {{.*}}, index_bound = 1000 : i64, index_stride = 64 : i64, indices = #kisa.ap<sbuf, i32, p = 0:128, offset = 0, dims = [1 x 1]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 64]>}
func.func @gather_rows(%w: memref<1000x64xf32, "hbm">) {
  %rows = ktile.alloc : memref<128x64xf32, "sbuf">
  %ids = ktile.alloc : memref<128x1xi32, "sbuf">
  ktile.dma_gather %rows, %w, %ids {index_stride = 64, index_bound = 1000, dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 64]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 64]>, indices = #kisa.ap<sbuf, i32, p = 0:128, offset = 0, dims = [1 x 1]>} : memref<128x64xf32, "sbuf">, memref<1000x64xf32, "hbm">, memref<128x1xi32, "sbuf">
  return
}

// CHECK-LABEL: func.func @scatter_rows
// CHECK: ktile.dma_scatter %arg0, %{{.*}}, %{{.*}} {dst = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 64]>, index_bound = 1000 : i64, index_stride = 64 : i64
func.func @scatter_rows(%w: memref<1000x64xf32, "hbm">) {
  %rows = ktile.alloc : memref<128x64xf32, "sbuf">
  %ids = ktile.alloc : memref<128x1xi32, "sbuf">
  ktile.dma_scatter %w, %rows, %ids {index_stride = 64, index_bound = 1000, dst = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 64]>, src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 64]>, indices = #kisa.ap<sbuf, i32, p = 0:128, offset = 0, dims = [1 x 1]>} : memref<1000x64xf32, "hbm">, memref<128x64xf32, "sbuf">, memref<128x1xi32, "sbuf">
  return
}
