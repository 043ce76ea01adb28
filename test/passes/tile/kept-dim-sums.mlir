// RUN: kiln-opt %s --kgraph-plan-tiles --convert-kgraph-to-ktile | FileCheck %s

// Batch norm's variance: the squares of the centred activation summed over
// [N, H, W] per channel, read through a transpose that puts the channels
// first. The group's loop nest (channels on the partitions, an image per
// iteration) folds each tile's rows into a column of its own and the
// columns once at the end: the squares never reach HBM, and nothing reads
// them back.
// CHECK-LABEL: func.func @variance
// CHECK: ktile.tensor_tensor %[[SQ:.*]], %{{.*}}, %{{.*}} {{{.*}}op = "mul"
// CHECK: ktile.tensor_reduce %[[COLS:.*]], %[[SQ]] {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 1]>, op = "add", src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 400]>}
// CHECK-COUNT-3: ktile.tensor_reduce %[[COLS]], %{{.*}} {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = {{4|8|12}}, dims = [1 x 1]>
// CHECK: ktile.tensor_reduce %[[SUM:.*]], %[[COLS]] {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 1]>, op = "add", src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 4]>}
// CHECK: ktile.dma_copy %{{.*}}, %[[SUM]] {dst = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 1], pstride = 1>
// CHECK-NOT: ktile.dma_copy
// CHECK: return
func.func @variance(%x: tensor<4x8x20x20xf32> {kgraph.name = "x", kgraph.role = "batch_input"}, %m: tensor<1x8x1x1xf32> {kgraph.name = "m", kgraph.role = "batch_input"}) -> (tensor<8x1x1x1xf32> {kgraph.name = "v", kgraph.role = "metric"}) {
  %0 = kgraph.sub %x, %m {kgraph.fusion = 0 : i64} : tensor<4x8x20x20xf32>, tensor<1x8x1x1xf32>
  %1 = kgraph.mul %0, %0 {kgraph.fusion = 0 : i64} : tensor<4x8x20x20xf32>, tensor<4x8x20x20xf32>
  %2 = kgraph.transpose %1, [1, 0, 2, 3] : tensor<4x8x20x20xf32> -> tensor<8x4x20x20xf32>
  %3 = kgraph.reduce_sum %2, [1, 2, 3] {keepdim = true} : tensor<8x4x20x20xf32> -> tensor<8x1x1x1xf32>
  return %3 : tensor<8x1x1x1xf32>
}

// The channels off the partitions (more images than channels put the
// images there): the sum runs alone after the group, which stores the
// squares.
// CHECK-LABEL: func.func @channels_not_on_partitions
// CHECK: ktile.tensor_tensor {{.*}}op = "mul"
// CHECK: ktile.dma_copy %[[SQUARES:.*]], %{{.*}} {dst = #kisa.ap<hbm
// CHECK: ktile.dma_copy %{{.*}}, %[[SQUARES]] {dst = #kisa.ap<sbuf
// CHECK: ktile.tensor_reduce
func.func @channels_not_on_partitions(%x: tensor<64x4x5x5xf32> {kgraph.name = "x", kgraph.role = "batch_input"}, %m: tensor<1x4x1x1xf32> {kgraph.name = "m", kgraph.role = "batch_input"}) -> (tensor<4x1x1x1xf32> {kgraph.name = "v", kgraph.role = "metric"}) {
  %0 = kgraph.sub %x, %m {kgraph.fusion = 0 : i64} : tensor<64x4x5x5xf32>, tensor<1x4x1x1xf32>
  %1 = kgraph.mul %0, %0 {kgraph.fusion = 0 : i64} : tensor<64x4x5x5xf32>, tensor<64x4x5x5xf32>
  %2 = kgraph.transpose %1, [1, 0, 2, 3] : tensor<64x4x5x5xf32> -> tensor<4x64x5x5xf32>
  %3 = kgraph.reduce_sum %2, [1, 2, 3] {keepdim = true} : tensor<4x64x5x5xf32> -> tensor<4x1x1x1xf32>
  return %3 : tensor<4x1x1x1xf32>
}
