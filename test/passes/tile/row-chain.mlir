// RUN: kiln-opt %s --kgraph-plan-tiles --convert-kgraph-to-ktile --ktile-fuse-tensor-scalars --ktile-reuse-dead-tiles | FileCheck %s

// A softmax as fusion leaves it: the scaled scores, their row max, the
// shifted exponentials (one group), their row sum, the division. Rows of
// 128 go four to a partition, so every iteration holds whole rows: one
// loop nest loads the scores once and stores the probabilities once. Each
// row's max and sum stay in SBUF ([128 x 4], a column per row); the shift
// and the division run a row at a time, each a tensor_scalar reading its
// row's value as a per-partition scalar (ScalarE may run it), not one
// tensor_tensor reading the values across the rows (stride 0) on the
// port VectorE and GpSimd share.
// CHECK-LABEL: func.func @softmax
// CHECK: ktile.dma_copy %[[X:.*]], %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 512]>
// CHECK: ktile.tensor_scalar %[[S:.*]], %[[X]] {{.*}}op0 = "div", scalar0 = 8.0
// CHECK-NOT: ktile.dma_copy
// CHECK: ktile.tensor_reduce %[[MAX:.*]], %[[S]] {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 4]>, op = "max", src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [128 x 4, 1 x 128]>}
// CHECK-NOT: ktile.dma_copy
// CHECK: ktile.tensor_scalar %[[D:.*]], %[[S]], %[[MAX]] {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 128]>, op0 = "sub", {{.*}}scalars = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1]>
// CHECK-NOT: ktile.dma_copy
// CHECK: ktile.tensor_scalar %[[D]], %[[S]], %[[MAX]] {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 1536, dims = [1 x 128]>, op0 = "sub", {{.*}}scalars = #kisa.ap<sbuf, f32, p = 0:128, offset = 12, dims = [1 x 1]>
// CHECK-NOT: ktile.dma_copy
// CHECK: ktile.activation %[[E:.*]], %[[D]] {{.*}}func = "exp"
// CHECK-NOT: ktile.dma_copy
// CHECK: ktile.tensor_reduce %[[SUM:.*]], %[[E]] {{.*}}op = "add"
// CHECK-NOT: ktile.dma_copy
// CHECK-COUNT-4: ktile.tensor_scalar %[[P:[0-9]+]], %[[E]], %[[SUM]] {{.*}}op0 = "div"
// CHECK: ktile.dma_copy %{{.*}}, %[[P]] {dst = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 512], pstride = 512>
// CHECK-NOT: ktile.dma_copy
// CHECK: return
func.func @softmax(%x: tensor<512x128xf32> {kgraph.name = "x", kgraph.role = "batch_input"}) -> (tensor<512x128xf32> {kgraph.name = "p", kgraph.role = "metric"}) {
  %c = kgraph.constant dense<8.0> : tensor<f32>
  %s = kgraph.div %x, %c : tensor<512x128xf32>, tensor<f32>
  %m = kgraph.reduce_max %s, [1] {keepdim = true} : tensor<512x128xf32> -> tensor<512x1xf32>
  %d = kgraph.sub %s, %m {kgraph.fusion = 0 : i64} : tensor<512x128xf32>, tensor<512x1xf32>
  %e = kgraph.exp %d {kgraph.fusion = 0 : i64} : tensor<512x128xf32>
  %z = kgraph.reduce_sum %e, [1] {keepdim = true} : tensor<512x128xf32> -> tensor<512x1xf32>
  %p = kgraph.div %e, %z : tensor<512x128xf32>, tensor<512x1xf32>
  return %p : tensor<512x128xf32>
}

// A layer norm's variance and scaling: the centred input never leaves
// SBUF. The ops on the variance (a group of [256, 1]) run on one element
// per row; the reciprocal deviation, which the backward pass reads, is
// gathered a column per row block and stored once after the loop.
// CHECK-LABEL: func.func @layer_norm
// CHECK: %[[RSTD:.*]] = ktile.alloc : memref<256x1xf32, "hbm">
// CHECK: %[[Y:.*]] = ktile.alloc : memref<256x768xf32, "hbm">
// CHECK: %[[GATHERED:.*]] = ktile.alloc : memref<128x2xf32, "sbuf">
// CHECK: ktile.tensor_scalar %[[C:.*]], %{{.*}}, %{{.*}} {{.*}}op0 = "sub"
// CHECK-NOT: ktile.dma_copy
// The squares and their row sums: one ScalarE activation, not a
// tensor_tensor and a tensor_reduce on the port VectorE and GpSimd share.
// CHECK: ktile.activation %{{.*}}, %[[C]], %[[V:.*]] {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 768]>, func = "square", reduce_dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1]>, src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 768]>}
// CHECK-NOT: ktile.tensor_reduce
// CHECK-NOT: ktile.dma_copy
// The variance's 1/n and the epsilon: one tensor_scalar, two stages.
// CHECK: ktile.tensor_scalar %[[VE:.*]], %[[V]] {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1]>, op0 = "mul", op1 = "add"
// CHECK-NOT: ktile.dma_copy
// CHECK: ktile.activation %[[R:.*]], %[[VE]] {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1]>, func = "rsqrt"
// CHECK-NOT: ktile.dma_copy
// CHECK: ktile.tensor_scalar %[[OUT:.*]], %[[C]], %[[R]] {{.*}}op0 = "mul"
// CHECK: ktile.dma_copy %[[Y]], %[[OUT]] {dst = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 768], pstride = 768>
// CHECK: ktile.tensor_copy %[[GATHERED]], %[[R]] {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1]>
// CHECK: ktile.tensor_copy %[[GATHERED]], %{{.*}} {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 4, dims = [1 x 1]>
// CHECK: ktile.dma_copy %[[RSTD]], %[[GATHERED]] {dst = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [128 x 2], pstride = 1>
// CHECK: return %[[Y]], %[[RSTD]]
func.func @layer_norm(%x: tensor<256x768xf32> {kgraph.name = "x", kgraph.role = "batch_input"}, %mean: tensor<256x1xf32> {kgraph.name = "mean", kgraph.role = "batch_input"}) -> (tensor<256x768xf32> {kgraph.name = "y", kgraph.role = "metric"}, tensor<256x1xf32> {kgraph.name = "rstd", kgraph.role = "metric"}) {
  %n = kgraph.constant dense<0.00130208337> : tensor<f32>
  %eps = kgraph.constant dense<1.0e-5> : tensor<f32>
  %c = kgraph.sub %x, %mean {kgraph.fusion = 0 : i64} : tensor<256x768xf32>, tensor<256x1xf32>
  %sq = kgraph.mul %c, %c {kgraph.fusion = 0 : i64} : tensor<256x768xf32>, tensor<256x768xf32>
  %v = kgraph.reduce_sum %sq, [1] {keepdim = true} : tensor<256x768xf32> -> tensor<256x1xf32>
  %vm = kgraph.mul %v, %n {kgraph.fusion = 1 : i64} : tensor<256x1xf32>, tensor<f32>
  %ve = kgraph.add %vm, %eps {kgraph.fusion = 1 : i64} : tensor<256x1xf32>, tensor<f32>
  %r = kgraph.rsqrt %ve {kgraph.fusion = 1 : i64} : tensor<256x1xf32>
  %y = kgraph.mul %c, %r : tensor<256x768xf32>, tensor<256x1xf32>
  return %y, %r : tensor<256x768xf32>, tensor<256x1xf32>
}

// Rows of 5000 f32 do not fit one iteration (two chunks of 2500): the
// loop nest declines, and the parts run as they would alone. The
// exponentials go to HBM with their sums folded on the way, and a second
// loop nest reads them back to divide.
// CHECK-LABEL: func.func @long_rows
// CHECK: ktile.activation %[[E1:.*]], %{{.*}} {{.*}}func = "exp"
// CHECK: ktile.dma_copy %[[EXP:.*]], %[[E1]] {dst = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 2500], pstride = 5000>
// CHECK: ktile.tensor_tensor %[[Z:.*]], %{{.*}}, %{{.*}} {{.*}}op = "add"
// CHECK: ktile.dma_copy %[[SUMS:.*]], %[[Z]]
// CHECK: ktile.dma_copy %{{.*}}, %[[EXP]]
// CHECK: ktile.dma_copy %{{.*}}, %[[SUMS]]
// CHECK: ktile.tensor_scalar {{.*}}op0 = "div"
func.func @long_rows(%x: tensor<128x5000xf32> {kgraph.name = "x", kgraph.role = "batch_input"}) -> (tensor<128x5000xf32> {kgraph.name = "p", kgraph.role = "metric"}) {
  %e = kgraph.exp %x : tensor<128x5000xf32>
  %z = kgraph.reduce_sum %e, [1] {keepdim = true} : tensor<128x5000xf32> -> tensor<128x1xf32>
  %p = kgraph.div %e, %z : tensor<128x5000xf32>, tensor<128x1xf32>
  return %p : tensor<128x5000xf32>
}

// A matmul between the groups reads the exponentials: the chain would run
// after it, so there is none. The exponentials are stored for the matmul
// and read back by the division.
// CHECK-LABEL: func.func @read_between
// CHECK: ktile.activation %[[E:.*]], %{{.*}} {{.*}}func = "exp"
// CHECK: ktile.dma_copy %[[EXP:.*]], %[[E]]
// CHECK: ktile.matmul
// CHECK: ktile.dma_copy %{{.*}}, %[[EXP]]
// CHECK: ktile.tensor_scalar {{.*}}op0 = "div"
func.func @read_between(%x: tensor<128x128xf32> {kgraph.name = "x", kgraph.role = "batch_input"}, %w: tensor<128x128xf32> {kgraph.name = "w", kgraph.role = "parameter"}) -> (tensor<128x128xf32> {kgraph.name = "p", kgraph.role = "metric"}, tensor<128x128xf32> {kgraph.name = "q", kgraph.role = "metric"}) {
  %e = kgraph.exp %x : tensor<128x128xf32>
  %z = kgraph.reduce_sum %e, [1] {keepdim = true} : tensor<128x128xf32> -> tensor<128x1xf32>
  %q = kgraph.matmul %e, %w : tensor<128x128xf32>, tensor<128x128xf32> -> tensor<128x128xf32>
  %p = kgraph.div %e, %z : tensor<128x128xf32>, tensor<128x1xf32>
  return %p, %q : tensor<128x128xf32>, tensor<128x128xf32>
}
