// RUN: kiln-opt %s --convert-kgraph-to-ktile | FileCheck %s

// Softmax's row maximum over 128 keys: a row is 512 bytes, so four rows go
// to each partition and one DMA loads 512 rows (256 KiB). One tensor_reduce
// folds the inner 128 of a [4 x 128] free axis, the eight blocks' results
// gather in one [128 x 32] tile, and a single store writes all 4096: row
// (512 b + 4 p + i) is column 4 b + i of partition p.
// CHECK-LABEL: func.func @softmax_rows
// CHECK: ktile.dma_copy %[[IN:.*]], %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 512]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 512], pstride = 512>}
// CHECK: ktile.tensor_reduce %[[RES:.*]], %[[IN]] {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 4]>, op = "max", src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [128 x 4, 1 x 128]>}
// CHECK-COUNT-7: ktile.tensor_reduce %[[RES]]
// CHECK: ktile.dma_copy %{{.*}}, %[[RES]] {dst = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [512 x 8, 1 x 4], pstride = 4>, src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 32]>}
// CHECK-NOT: ktile.dma_copy
// CHECK: return
func.func @softmax_rows(%x: tensor<8x4x128x128xf32> {kgraph.name = "x", kgraph.role = "batch_input"}) -> (tensor<8x4x128x1xf32> {kgraph.name = "y", kgraph.role = "metric"}) {
  %0 = kgraph.reduce_max %x, [3] {keepdim = true} : tensor<8x4x128x128xf32> -> tensor<8x4x128x1xf32>
  return %0 : tensor<8x4x128x1xf32>
}

// Rows of 768 are long enough alone: one row per partition, the two whole
// blocks' sums stored together (row 128 b + p is column b of partition p),
// then the 44 rows left over.
// CHECK-LABEL: func.func @ragged_rows
// CHECK: ktile.tensor_reduce %[[RES:.*]], %{{.*}} {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1]>, op = "add"
// CHECK: ktile.tensor_reduce %[[RES]], %{{.*}} {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 4, dims = [1 x 1]>, op = "add"
// CHECK: ktile.dma_copy %[[OUT:.*]], %[[RES]] {dst = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [128 x 2, 1 x 1], pstride = 1>
// CHECK: ktile.dma_copy %{{.*}}, %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:44, offset = 0, dims = [1 x 768]>, src = #kisa.ap<hbm, f32, p = 0:44, offset = 786432
// CHECK: ktile.dma_copy %[[OUT]], %{{.*}} {dst = #kisa.ap<hbm, f32, p = 0:44, offset = 1024, dims = [1 x 1], pstride = 1>
func.func @ragged_rows(%x: tensor<300x768xf32> {kgraph.name = "x", kgraph.role = "batch_input"}) -> (tensor<300x1xf32> {kgraph.name = "y", kgraph.role = "metric"}) {
  %0 = kgraph.reduce_sum %x, [1] {keepdim = true} : tensor<300x768xf32> -> tensor<300x1xf32>
  return %0 : tensor<300x1xf32>
}

// A row longer than a tile's free axis is reduced in chunks whose partial
// sums tensor_tensor combines.
// CHECK-LABEL: func.func @long_rows
// CHECK: ktile.tensor_reduce %[[A:.*]], %{{.*}} {{.*}}src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 4096]>
// CHECK: ktile.tensor_reduce %[[B:.*]], %{{.*}} {{.*}}src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 904]>
// CHECK: ktile.tensor_tensor %[[SUM:.*]], %[[A]], %[[B]]
// CHECK: ktile.dma_copy %{{.*}}, %[[SUM]]
func.func @long_rows(%x: tensor<128x5000xf32> {kgraph.name = "x", kgraph.role = "batch_input"}) -> (tensor<128xf32> {kgraph.name = "y", kgraph.role = "metric"}) {
  %0 = kgraph.reduce_sum %x, [1] : tensor<128x5000xf32> -> tensor<128xf32>
  return %0 : tensor<128xf32>
}
