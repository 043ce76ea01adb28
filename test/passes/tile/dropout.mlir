// RUN: kiln-opt %s --kgraph-plan-tiles --convert-kgraph-to-ktile --ktile-fuse-tensor-scalars --ktile-reuse-dead-tiles | FileCheck %s

// Dropout is an elementwise loop nest with GpSimd's counter-based `random`.
// x[4, 300] folds to [120 x 10] tiles; element (p, i) of the tile is
// row-major element 10 p + i, drawn from counter stream * 2^40 + 10 p + i.
// The 0-d seed (i32 on the device) is loaded onto every partition with
// stride 0. One tensor_scalar gives the keep-mask (u >= p), another the mask
// scaled by the f32 1 / (1 - p), which multiplies x.
// CHECK-LABEL: func.func @flat
// CHECK: %[[X:.*]] = ktile.alloc : memref<120x10xf32, "sbuf">
// CHECK: ktile.dma_copy %[[X]], %arg0 {{.*}}pstride = 10>
// CHECK: %[[S:.*]] = ktile.alloc : memref<120x1xi32, "sbuf">
// CHECK: ktile.dma_copy %[[S]], %arg1 {dst = #kisa.ap<sbuf, i32, p = 0:120, offset = 0, dims = [1 x 1]>, src = #kisa.ap<hbm, i32, p = 0:120, offset = 0, dims = [1 x 1]>}
// CHECK: ktile.random %[[U:.*]], %[[S]] {counter = 2199023255552 : i64, {{.*}}free_step = 1 : i64, partition_step = 10 : i64
// CHECK: ktile.tensor_scalar %[[M:.*]], %[[U]] {{{.*}}op0 = "ge", scalar0 = 2.500000e-01 : f64
// CHECK: ktile.tensor_scalar %[[K:.*]], %[[U]] {{{.*}}op0 = "ge", op1 = "mul", scalar0 = 2.500000e-01 : f64, scalar1 = 1.3333333730697632 : f64
// CHECK: ktile.tensor_tensor %[[Y:.*]], %[[X]], %[[K]] {{{.*}}op = "mul"
// CHECK: ktile.dma_copy %{{.*}}, %[[Y]]
// CHECK: ktile.dma_copy %{{.*}}, %[[M]]
func.func @flat(%x: tensor<4x300xf32> {kgraph.name = "x", kgraph.role = "batch_input"}, %s: tensor<i64> {kgraph.name = "seed", kgraph.role = "rng_seed"}) -> (tensor<4x300xf32> {kgraph.name = "y", kgraph.role = "metric"}, tensor<4x300xi1> {kgraph.name = "mask", kgraph.role = "metric"}) {
  %y, %m = kgraph.dropout %x, %s {p = 0.25 : f64, stream = 2 : i64} : tensor<4x300xf32>, tensor<i64> -> tensor<4x300xf32>, tensor<4x300xi1>
  return %y, %m : tensor<4x300xf32>, tensor<4x300xi1>
}

// A transposed input does not fold: rows follow the output's first axis
// (partition_step 300 in the output's row-major order) while x is read
// with stride 4. p = 0.1 is not exact in f32, so the threshold is the
// multiple of 2^-24 that the 24-bit uniform numbers compare alike with.
// The unused mask is not computed.
// CHECK-LABEL: func.func @transposed
// CHECK: ktile.dma_copy {{.*}}src = #kisa.ap<hbm, f32, p = 0:4, offset = 0, dims = [4 x 300], pstride = 1>
// CHECK: ktile.random {{.*}}counter = 0 : i64, {{.*}}free_step = 1 : i64, partition_step = 300 : i64
// CHECK-NOT: scalar0 = 0.10000002384185791 : f64, src
// CHECK: ktile.tensor_scalar {{.*}}op0 = "ge", op1 = "mul", scalar0 = 0.10000002384185791 : f64, scalar1 = 1.1111111640930176 : f64
func.func @transposed(%x: tensor<300x4xf32> {kgraph.name = "x", kgraph.role = "batch_input"}, %s: tensor<i64> {kgraph.name = "seed", kgraph.role = "rng_seed"}) -> (tensor<4x300xf32> {kgraph.name = "y", kgraph.role = "metric"}) {
  %t = kgraph.transpose %x, [1, 0] : tensor<300x4xf32> -> tensor<4x300xf32>
  %y, %m = kgraph.dropout %t, %s {p = 0.1 : f64} : tensor<4x300xf32>, tensor<i64> -> tensor<4x300xf32>, tensor<4x300xi1>
  return %y : tensor<4x300xf32>
}
