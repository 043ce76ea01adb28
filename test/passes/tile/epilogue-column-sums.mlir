// RUN: kiln-opt %s --kgraph-plan-tiles --convert-kgraph-to-ktile --ktile-fuse-tensor-scalars --ktile-reuse-dead-tiles | FileCheck %s

// A layer norm's parameter gradients in a backward pass, as layout
// assignment writes them: sums over rows, `ones[1, M] . V`, of dY (beta's,
// through the bf16 cast the sum's loads would do) and of dY * x_hat
// (gamma's, a group of its own that only the sum reads). dY is a value of
// the product's epilogue; the second group joins the epilogue, which folds
// both sums on TensorE from its tiles as they pass: each 128 columns of a
// value, rounded to bf16, against a column of ones, into one PSUM tile of
// a column per 128 product columns and sum, over the row tiles (the first
// row tile starts each column). At the end the sums leave PSUM once each.
// Neither dY nor dY * x_hat goes to HBM.
// CHECK-LABEL: func.func @parameter_gradients
// CHECK: %[[T:.*]] = ktile.alloc : memref<200x256xf32, "hbm">
// CHECK-NEXT: %[[GAMMA:.*]] = ktile.alloc : memref<1x256xf32, "hbm">
// CHECK-NEXT: %[[BETA:.*]] = ktile.alloc : memref<1x256xf32, "hbm">
// CHECK-NEXT: %[[SUMS:.*]] = ktile.alloc : memref<128x4xf32, "psum">
// CHECK-NEXT: %[[ONES:.*]] = ktile.alloc : memref<128x1xbf16, "sbuf">
// CHECK-NEXT: ktile.memset %[[ONES]] {{.*}}value = 1.000000e+00 : f64}
// CHECK-NOT: ktile.alloc : memref<{{.*}}, "hbm">
// CHECK: ktile.tensor_tensor %[[DY:.*]], %{{.*}}, %{{.*}} {{.*}}op = "add"
// CHECK-NEXT: %{{.*}} = ktile.alloc
// CHECK-NEXT: ktile.activation %{{.*}}, %[[DY]] {{.*}}func = "tanh"
// CHECK: ktile.tensor_tensor %[[DYX:.*]], %[[DY]], %{{.*}} {{.*}}op = "mul"
// CHECK: ktile.tensor_copy %[[GB:.*]], %[[DYX]] {dst = #kisa.ap<sbuf, bf16
// CHECK-NEXT: ktile.matmul %[[SUMS]], %[[GB]], %[[ONES]] {accumulate = false, dst = #kisa.ap<psum, f32, p = 0:128, offset = 0, dims = [1 x 1]>
// CHECK-NEXT: ktile.matmul %[[SUMS]], %[[GB]], %[[ONES]] {accumulate = false, dst = #kisa.ap<psum, f32, p = 0:128, offset = 4, dims = [1 x 1]>
// CHECK: ktile.tensor_copy %[[DYB:.*]], %[[DY]] {dst = #kisa.ap<sbuf, bf16
// CHECK-NEXT: ktile.matmul %[[SUMS]], %[[DYB]], %[[ONES]] {accumulate = false, dst = #kisa.ap<psum, f32, p = 0:128, offset = 8, dims = [1 x 1]>
// CHECK-NEXT: ktile.matmul %[[SUMS]], %[[DYB]], %[[ONES]] {accumulate = false, dst = #kisa.ap<psum, f32, p = 0:128, offset = 12, dims = [1 x 1]>
// CHECK-NEXT: ktile.dma_copy %[[T]]
// The second row tile (72 rows) accumulates.
// CHECK: ktile.matmul %[[SUMS]], %{{.*}}, %[[ONES]] {accumulate = true, dst = #kisa.ap<psum, f32, p = 0:128, offset = 0, dims = [1 x 1]>, moving = #kisa.ap<sbuf, bf16, p = 0:72
// CHECK: ktile.tensor_copy %[[G:.*]], %[[SUMS]] {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 2]>, src = #kisa.ap<psum, f32, p = 0:128, offset = 0, dims = [1 x 2]>}
// CHECK-NEXT: ktile.dma_copy %[[GAMMA]], %[[G]] {dst = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [128 x 2], pstride = 1>
// CHECK: ktile.tensor_copy %[[B:.*]], %[[SUMS]] {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 2]>, src = #kisa.ap<psum, f32, p = 0:128, offset = 8, dims = [1 x 2]>}
// CHECK-NEXT: ktile.dma_copy %[[BETA]], %[[B]]
// CHECK-NOT: ktile.matmul
// CHECK: return %[[T]], %[[GAMMA]], %[[BETA]]
func.func @parameter_gradients(%g: tensor<200x64xbf16>, %w: tensor<64x256xbf16>, %r: tensor<200x256xf32>, %xhat: tensor<2x100x256xf32>) -> (tensor<200x256xf32>, tensor<1x256xf32>, tensor<1x256xf32>) {
  %ones = kgraph.constant dense<1.0> : tensor<1x200xbf16>
  %p = kgraph.matmul %g, %w : tensor<200x64xbf16>, tensor<64x256xbf16> -> tensor<200x256xbf16>
  %pf = kgraph.cast %p {kgraph.fusion = 0 : i64} : tensor<200x256xbf16> -> tensor<200x256xf32>
  %dy = kgraph.add %pf, %r {kgraph.fusion = 0 : i64} : tensor<200x256xf32>, tensor<200x256xf32>
  %t = kgraph.tanh %dy {kgraph.fusion = 0 : i64} : tensor<200x256xf32>
  %xr = kgraph.reshape %xhat : tensor<2x100x256xf32> -> tensor<200x256xf32>
  %dyx = kgraph.mul %dy, %xr {kgraph.fusion = 1 : i64} : tensor<200x256xf32>, tensor<200x256xf32>
  %dyxb = kgraph.cast %dyx {kgraph.fusion = 1 : i64} : tensor<200x256xf32> -> tensor<200x256xbf16>
  %sg = kgraph.matmul %ones, %dyxb : tensor<1x200xbf16>, tensor<200x256xbf16> -> tensor<1x256xbf16>
  %sgf = kgraph.cast %sg : tensor<1x256xbf16> -> tensor<1x256xf32>
  %dyb = kgraph.cast %dy : tensor<200x256xf32> -> tensor<200x256xbf16>
  %sb = kgraph.matmul %ones, %dyb : tensor<1x200xbf16>, tensor<200x256xbf16> -> tensor<1x256xbf16>
  %sbf = kgraph.cast %sb : tensor<1x256xbf16> -> tensor<1x256xf32>
  return %t, %sgf, %sbf : tensor<200x256xf32>, tensor<1x256xf32>, tensor<1x256xf32>
}
