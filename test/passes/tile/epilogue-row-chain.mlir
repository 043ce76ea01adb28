// RUN: kiln-opt %s --kgraph-plan-tiles --convert-kgraph-to-ktile --ktile-fuse-tensor-scalars --ktile-reuse-dead-tiles | FileCheck %s

// A linear layer's bias and residual add (the product's epilogue group),
// then a layer norm over its rows, as in an encoder layer after attention.
// The layer norm is a row chain that runs in the product's epilogue, on
// spans of whole rows (768 columns: a 512- and a 256-column PSUM bank):
// the mean folds each row in one tensor_reduce, the centred values and
// their squares stay in SBUF, and the residual stream itself is never
// stored (nothing after the layer norm reads it). The reciprocal
// deviation, which a backward pass would read, is gathered a column per
// row tile and stored once.
// CHECK-LABEL: func.func @layer_norm_after_linear
// CHECK: %[[RSTD:.*]] = ktile.alloc : memref<2x128x1xf32, "hbm">
// CHECK: %[[Y:.*]] = ktile.alloc : memref<2x128x768xf32, "hbm">
// CHECK-NOT: memref<256x768xf32, "hbm">
// CHECK: %[[GATHERED:.*]] = ktile.alloc : memref<128x2xf32, "sbuf">
// CHECK: ktile.matmul {{.*}}dims = [1 x 512]>
// CHECK: ktile.matmul {{.*}}dims = [1 x 256]>
// CHECK: ktile.tensor_tensor %[[BIASED:.*]], %{{.*}}, %{{.*}} {{.*}}op = "add"
// CHECK: ktile.tensor_tensor %[[SUM:.*]], %{{.*}}, %[[BIASED]] {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 768]>, {{.*}}op = "add"
// CHECK: ktile.tensor_reduce %[[TOTAL:.*]], %[[SUM]] {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1]>, op = "add", src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 768]>}
// CHECK: ktile.tensor_scalar %[[MEAN:.*]], %[[TOTAL]] {{.*}}op0 = "mul"
// CHECK: ktile.tensor_scalar %[[C:.*]], %[[SUM]], %[[MEAN]] {{.*}}op0 = "sub"
// CHECK: ktile.activation %{{.*}}, %[[C]], %[[V:.*]] {{.*}}func = "square", reduce_dst
// CHECK: ktile.activation %[[R:.*]], %{{.*}} {{.*}}func = "rsqrt"
// CHECK: ktile.tensor_copy %[[GATHERED]], %[[R]] {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1]>
// CHECK: ktile.dma_copy %[[Y]], %{{.*}} {dst = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 768], pstride = 768>
// The second row tile.
// CHECK: ktile.tensor_copy %[[GATHERED]], %{{.*}} {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 4, dims = [1 x 1]>
// CHECK: ktile.dma_copy %[[Y]], %{{.*}} {dst = #kisa.ap<hbm, f32, p = 0:128, offset = 393216, dims = [1 x 768], pstride = 768>
// CHECK: ktile.dma_copy %[[RSTD]], %[[GATHERED]] {dst = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [128 x 2], pstride = 1>
func.func @layer_norm_after_linear(%x: tensor<256x64xf32> {kgraph.name = "x", kgraph.role = "batch_input"}, %w: tensor<64x768xf32> {kgraph.name = "w", kgraph.role = "parameter"}, %bias: tensor<768xf32> {kgraph.name = "bias", kgraph.role = "parameter"}, %res: tensor<256x768xf32> {kgraph.name = "residual", kgraph.role = "batch_input"}, %gamma: tensor<768xf32> {kgraph.name = "gamma", kgraph.role = "parameter"}) -> (tensor<2x128x768xf32> {kgraph.name = "y", kgraph.role = "metric"}, tensor<2x128x1xf32> {kgraph.name = "rstd", kgraph.role = "metric"}) {
  %inv = kgraph.constant dense<1.302083e-03> : tensor<f32>
  %eps = kgraph.constant dense<1.0e-05> : tensor<f32>
  %h = kgraph.matmul %x, %w : tensor<256x64xf32>, tensor<64x768xf32> -> tensor<256x768xf32>
  %hb = kgraph.add %bias, %h {kgraph.fusion = 0 : i64} : tensor<768xf32>, tensor<256x768xf32>
  %s = kgraph.add %res, %hb {kgraph.fusion = 0 : i64} : tensor<256x768xf32>, tensor<256x768xf32>
  %s3 = kgraph.reshape %s : tensor<256x768xf32> -> tensor<2x128x768xf32>
  %sum = kgraph.reduce_sum %s3, [2] {keepdim = true} : tensor<2x128x768xf32> -> tensor<2x128x1xf32>
  %mean = kgraph.mul %sum, %inv : tensor<2x128x1xf32>, tensor<f32>
  %c = kgraph.sub %s3, %mean {kgraph.fusion = 1 : i64} : tensor<2x128x768xf32>, tensor<2x128x1xf32>
  %sq = kgraph.mul %c, %c {kgraph.fusion = 1 : i64} : tensor<2x128x768xf32>, tensor<2x128x768xf32>
  %v = kgraph.reduce_sum %sq, [2] {keepdim = true} : tensor<2x128x768xf32> -> tensor<2x128x1xf32>
  %vm = kgraph.mul %v, %inv {kgraph.fusion = 2 : i64} : tensor<2x128x1xf32>, tensor<f32>
  %ve = kgraph.add %vm, %eps {kgraph.fusion = 2 : i64} : tensor<2x128x1xf32>, tensor<f32>
  %r = kgraph.rsqrt %ve {kgraph.fusion = 2 : i64} : tensor<2x128x1xf32>
  %n = kgraph.mul %c, %r {kgraph.fusion = 3 : i64} : tensor<2x128x768xf32>, tensor<2x128x1xf32>
  %y = kgraph.mul %n, %gamma {kgraph.fusion = 3 : i64} : tensor<2x128x768xf32>, tensor<768xf32>
  return %y, %r : tensor<2x128x768xf32>, tensor<2x128x1xf32>
}
