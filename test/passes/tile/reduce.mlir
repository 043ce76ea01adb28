// RUN: kiln-opt %s --kgraph-plan-tiles --convert-kgraph-to-ktile --ktile-fuse-tensor-scalars --ktile-reuse-dead-tiles | FileCheck %s

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

// A layer norm's variance: the reduction of the group's square runs in the
// group's loop nest, folding each row block's tile as it is computed; the
// square is never stored, nor read back. The two row blocks' sums gather
// in one [128 x 2] tile and leave in one store.
// CHECK-LABEL: func.func @fused_into_group
// CHECK: %[[OUT:.*]] = ktile.alloc : memref<2x128x1xf32, "hbm">
// CHECK-NEXT: %[[SUMS:.*]] = ktile.alloc : memref<128x2xf32, "sbuf">
// CHECK: ktile.tensor_tensor %[[SQ:.*]], %[[D:.*]], %[[D]] {{.*}}op = "mul"
// CHECK-NEXT: ktile.tensor_reduce %[[SUMS]], %[[SQ]] {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1]>, op = "add"
// CHECK: ktile.tensor_reduce %[[SUMS]], %{{.*}} {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 4, dims = [1 x 1]>, op = "add"
// CHECK-NEXT: ktile.dma_copy %[[OUT]], %[[SUMS]] {dst = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [128 x 2], pstride = 1>
// CHECK-NOT: ktile.dma_copy
// CHECK: return %[[OUT]]
func.func @fused_into_group(%x: tensor<2x128x768xf32>, %m: tensor<2x128x1xf32>) -> tensor<2x128x1xf32> {
  %d = kgraph.sub %x, %m {kgraph.fusion = 0 : i64} : tensor<2x128x768xf32>, tensor<2x128x1xf32>
  %s = kgraph.mul %d, %d {kgraph.fusion = 0 : i64} : tensor<2x128x768xf32>, tensor<2x128x768xf32>
  %v = kgraph.reduce_sum %s, [2] {keepdim = true} : tensor<2x128x768xf32> -> tensor<2x128x1xf32>
  return %v : tensor<2x128x1xf32>
}

// Columns in three chunks: each chunk's fold combines with those before,
// in the first chunk's tile (an elementwise result written over the source
// it reads last), which holds the gathered results at the end. Each
// chunk's exp overwrites the loaded tile it reads. The reduction reads the
// group value through a reshape whose reduced elements are the group's
// trailing ones ([8, 10000] -> [8, 100, 100], reducing the last two); a
// reshape that regroups them ([8, 10000] -> [16, 5000]) leaves its
// reduction to load the stored value.
// CHECK-LABEL: func.func @chunks_and_reshapes
// CHECK: ktile.activation %[[X:.*]], %[[X]] {{.*}}func = "exp"
// CHECK: ktile.dma_copy %[[E:.*]], %[[X]] {dst = #kisa.ap<hbm
// CHECK: ktile.tensor_reduce %[[MAXES:.*]], %[[X]] {{.*}}op = "max"
// CHECK: ktile.tensor_reduce %[[SECOND:.*]], %{{.*}}op = "max"
// CHECK: ktile.tensor_tensor %[[MAXES]], %[[MAXES]], %[[SECOND]] {{.*}}op = "max"
// CHECK: ktile.tensor_reduce %[[THIRD:.*]], %{{.*}}op = "max"
// CHECK-NEXT: ktile.tensor_tensor %[[MAXES]], %[[MAXES]], %[[THIRD]] {{.*}}op = "max"
// CHECK-NEXT: ktile.dma_copy %{{.*}}, %[[MAXES]] {dst = #kisa.ap<hbm
// CHECK: ktile.dma_copy %{{.*}}, %[[E]] {dst = #kisa.ap<sbuf
// CHECK: ktile.tensor_reduce {{.*}}op = "min"
func.func @chunks_and_reshapes(%x: tensor<8x10000xf32>) -> (tensor<8x1x1xf32>, tensor<16x1xf32>) {
  %e = kgraph.exp %x : tensor<8x10000xf32>
  %a = kgraph.reshape %e : tensor<8x10000xf32> -> tensor<8x100x100xf32>
  %m = kgraph.reduce_max %a, [1, 2] {keepdim = true} : tensor<8x100x100xf32> -> tensor<8x1x1xf32>
  %b = kgraph.reshape %e : tensor<8x10000xf32> -> tensor<16x5000xf32>
  %n = kgraph.reduce_min %b, [1] {keepdim = true} : tensor<16x5000xf32> -> tensor<16x1xf32>
  return %m, %n : tensor<8x1x1xf32>, tensor<16x1xf32>
}

// A softmax's exp and row sums over rows of 128 keys: eight rows go to
// each partition ([1024, 128] seen as [128, 8, 128]), so one iteration
// covers all 1024 rows. The row maxima are loaded once per row, eight per
// partition, and each is read against its row's 128 keys as a
// per-partition scalar, a row at a time; the sums fold each run of 128
// and leave in one store, eight per partition.
// CHECK-LABEL: func.func @short_rows
// CHECK: ktile.dma_copy %[[X:.*]], %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1024]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 1024], pstride = 1024>}
// CHECK: ktile.dma_copy %[[M:.*]], %arg1 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 8]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 8], pstride = 8>}
// CHECK: ktile.tensor_scalar %{{.*}}, %[[X]], %[[M]] {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 128]>, op0 = "sub", {{.*}}scalars = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1]>
// CHECK-COUNT-7: ktile.tensor_scalar %{{.*}}, %[[X]], %[[M]] {{.*}}op0 = "sub"
// CHECK: ktile.activation %[[E:.*]], %{{.*}}func = "exp"
// CHECK: ktile.tensor_reduce %[[S:.*]], %[[E]] {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 8]>, op = "add", src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [128 x 8, 1 x 128]>}
// CHECK: ktile.dma_copy %{{.*}}, %[[S]] {dst = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 8], pstride = 8>
func.func @short_rows(%x: tensor<8x128x128xf32>, %m: tensor<8x128x1xf32>) -> (tensor<8x128x128xf32>, tensor<8x128x1xf32>) {
  %d = kgraph.sub %x, %m {kgraph.fusion = 0 : i64} : tensor<8x128x128xf32>, tensor<8x128x1xf32>
  %e = kgraph.exp %d {kgraph.fusion = 0 : i64} : tensor<8x128x128xf32>
  %s = kgraph.reduce_sum %e, [2] {keepdim = true} : tensor<8x128x128xf32> -> tensor<8x128x1xf32>
  return %e, %s : tensor<8x128x128xf32>, tensor<8x128x1xf32>
}

// Batch norm's statistics: a sum over [N, H, W] per channel of an NCHW
// value, which layout assignment writes as a transpose putting the
// channels first. The transpose is a view, not a copy: each channel's
// elements are two evenly strided runs (8 images 3136 apart, 196
// contiguous pixels each), loaded as two free dims straight from x.
// CHECK-LABEL: func.func @channel_sums
// CHECK-NOT: ktile.dma_copy %{{.*}}, %{{.*}} {dst = #kisa.ap<hbm, f32, p = 0:16, offset = 0, dims = [1 x 1568]
// CHECK: ktile.dma_copy %[[IN:.*]], %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:16, offset = 0, dims = [1 x 1568]>, src = #kisa.ap<hbm, f32, p = 0:16, offset = 0, dims = [1 x 1, 3136 x 8, 1 x 196], pstride = 196>}
// CHECK: ktile.tensor_reduce %[[RES:.*]], %[[IN]] {dst = #kisa.ap<sbuf, f32, p = 0:16, offset = 0, dims = [1 x 1]>, op = "add", src = #kisa.ap<sbuf, f32, p = 0:16, offset = 0, dims = [1 x 1568]>}
// CHECK: ktile.dma_copy %{{.*}}, %[[RES]]
// CHECK-NEXT: return
func.func @channel_sums(%x: tensor<8x16x14x14xf32> {kgraph.name = "x", kgraph.role = "batch_input"}) -> (tensor<16x1x1x1xf32> {kgraph.name = "y", kgraph.role = "metric"}) {
  %0 = kgraph.transpose %x, [1, 0, 2, 3] : tensor<8x16x14x14xf32> -> tensor<16x8x14x14xf32>
  %1 = kgraph.reduce_sum %0, [1, 2, 3] {keepdim = true} : tensor<16x8x14x14xf32> -> tensor<16x1x1x1xf32>
  return %1 : tensor<16x1x1x1xf32>
}

// Runs as long as a chunk: 4 images of 64x64 pixels per channel load one
// image (16 KiB a partition) at a time, and the partial sums combine.
// CHECK-LABEL: func.func @channel_sums_in_chunks
// CHECK: ktile.dma_copy %{{.*}}, %arg0 {{.*}}src = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 1, 1 x 4096], pstride = 4096>}
// CHECK: ktile.tensor_reduce %[[ACC:.*]], %
// CHECK: ktile.dma_copy %{{.*}}, %arg0 {{.*}}src = #kisa.ap<hbm, f32, p = 0:8, offset = 131072, dims = [1 x 1, 1 x 4096], pstride = 4096>}
// CHECK: ktile.tensor_reduce
// CHECK: ktile.tensor_tensor %[[ACC]], %[[ACC]], %{{.*}} {{.*}}op = "add"
// CHECK-COUNT-2: offset = {{262144|393216}}, dims = [1 x 1, 1 x 4096]
func.func @channel_sums_in_chunks(%x: tensor<4x8x64x64xf32> {kgraph.name = "x", kgraph.role = "batch_input"}) -> (tensor<8x1x1x1xf32> {kgraph.name = "y", kgraph.role = "metric"}) {
  %0 = kgraph.transpose %x, [1, 0, 2, 3] : tensor<4x8x64x64xf32> -> tensor<8x4x64x64xf32>
  %1 = kgraph.reduce_sum %0, [1, 2, 3] {keepdim = true} : tensor<8x4x64x64xf32> -> tensor<8x1x1x1xf32>
  return %1 : tensor<8x1x1x1xf32>
}

// A whole-tensor sum (a gradient norm's squares) has one row: its 1000 x
// 2048 elements spread over 128 partitions, 16000 consecutive ones each,
// loaded and folded in chunks of 4096 columns whose partials combine. A
// TensorE transpose gathers the 128 partials on one partition for the last
// fold, which leaves in one store.
// CHECK-LABEL: func.func @whole_tensor_sum
// CHECK: ktile.dma_copy %[[IN:.*]], %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 4096]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 4096], pstride = 16000>}
// CHECK: ktile.tensor_reduce %[[ACC:.*]], %[[IN]] {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1]>, op = "add", src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 4096]>}
// CHECK: ktile.dma_copy %{{.*}}, %arg0 {{.*}}src = #kisa.ap<hbm, f32, p = 0:128, offset = 16384, dims = [1 x 4096], pstride = 16000>}
// CHECK: ktile.tensor_tensor
// CHECK: ktile.dma_copy %{{.*}}, %arg0 {{.*}}src = #kisa.ap<hbm, f32, p = 0:128, offset = 49152, dims = [1 x 3712], pstride = 16000>}
// CHECK: ktile.tensor_reduce %[[LAST:.*]], %{{.*}} {{.*}}dims = [1 x 3712]>}
// CHECK-NEXT: ktile.tensor_tensor %[[SUM:.*]], %{{.*}}, %[[LAST]] {{.*}}op = "add"
// CHECK: ktile.transpose %[[T:.*]], %[[SUM]] {dst = #kisa.ap<psum, f32, p = 0:1, offset = 0, dims = [1 x 128]>, src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1]>}
// CHECK: ktile.tensor_reduce %[[R:.*]], %[[T]] {dst = #kisa.ap<sbuf, f32, p = 0:1, offset = 0, dims = [1 x 1]>, op = "add", src = #kisa.ap<psum, f32, p = 0:1, offset = 0, dims = [1 x 128]>}
// CHECK-NEXT: ktile.dma_copy %{{.*}}, %[[R]] {dst = #kisa.ap<hbm, f32, p = 0:1, offset = 0, dims = [1 x 1]
// CHECK-NEXT: return
func.func @whole_tensor_sum(%x: tensor<1000x2048xf32> {kgraph.name = "x", kgraph.role = "batch_input"}) -> (tensor<f32> {kgraph.name = "y", kgraph.role = "metric"}) {
  %0 = kgraph.reduce_sum %x, [0, 1] : tensor<1000x2048xf32> -> tensor<f32>
  return %0 : tensor<f32>
}

// Too few elements to spread (64 columns): one partition folds them.
// CHECK-LABEL: func.func @short_whole_tensor_max
// CHECK: ktile.tensor_reduce %{{.*}}, %{{.*}} {dst = #kisa.ap<sbuf, f32, p = 0:1, offset = 0, dims = [1 x 1]>, op = "max", src = #kisa.ap<sbuf, f32, p = 0:1, offset = 0, dims = [1 x 64]>}
// CHECK-NOT: ktile.transpose
func.func @short_whole_tensor_max(%x: tensor<64xf32> {kgraph.name = "x", kgraph.role = "batch_input"}) -> (tensor<f32> {kgraph.name = "y", kgraph.role = "metric"}) {
  %0 = kgraph.reduce_max %x, [0] : tensor<64xf32> -> tensor<f32>
  return %0 : tensor<f32>
}

// A softmax's row chain over rows of 1024 keys: ScalarE writes each
// row's sum of the exponentials as it computes them (`reduce_dst`), so no
// tensor_reduce queues for the port VectorE and GpSimd share. (Rows under
// 512 columns keep the tensor_reduce: see @short_rows.)
// CHECK-LABEL: func.func @long_row_softmax
// CHECK: ktile.tensor_reduce %[[M:.*]], %{{.*}} {{.*}}op = "max"
// CHECK: ktile.activation %[[E:.*]], %{{.*}}, %[[S:.*]] {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1024]>, func = "exp", reduce_dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1]>
// CHECK-NOT: ktile.tensor_reduce
// CHECK: ktile.tensor_scalar %{{.*}}, %[[E]], %[[S]] {{.*}}op0 = "div"
func.func @long_row_softmax(%x: tensor<128x1024xf32> {kgraph.name = "x", kgraph.role = "batch_input"}) -> (tensor<128x1024xf32> {kgraph.name = "p", kgraph.role = "metric"}) {
  %m = kgraph.reduce_max %x, [1] {keepdim = true} : tensor<128x1024xf32> -> tensor<128x1xf32>
  %d = kgraph.sub %x, %m {kgraph.fusion = 0 : i64} : tensor<128x1024xf32>, tensor<128x1xf32>
  %e = kgraph.exp %d {kgraph.fusion = 0 : i64} : tensor<128x1024xf32>
  %s = kgraph.reduce_sum %e, [1] {keepdim = true} : tensor<128x1024xf32> -> tensor<128x1xf32>
  %p = kgraph.div %e, %s {kgraph.fusion = 1 : i64} : tensor<128x1024xf32>, tensor<128x1xf32>
  return %p : tensor<128x1024xf32>
}
