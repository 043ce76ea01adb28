// RUN: kiln-opt %s --kgraph-plan-tiles --convert-kgraph-to-ktile --ktile-fuse-tensor-scalars --ktile-reuse-dead-tiles | FileCheck %s

// An embedding's gradient, one-hot(ids)^T . g, as decomposition writes it:
// the product computes each [128 x 512] slice of the one-hot matrix where
// it would have loaded it, as (column + offset) == ids[p], a tensor_scalar
// on a column iota kept for the whole product and the slice's ids as f32
// (loaded once per K slice). No [300 x 1000] matrix goes through HBM.
// CHECK-LABEL: func.func @embedding_gradient
// CHECK-NOT: 300x1000
// CHECK: ktile.dma_copy %[[IDS0:.*]], %arg0 {dst = #kisa.ap<sbuf, i32, p = 0:128, offset = 0, dims = [1 x 1]>, src = #kisa.ap<hbm, i32, p = 0:128, offset = 0, dims = [1 x 1], pstride = 1>}
// CHECK: ktile.tensor_copy %[[F0:.*]], %[[IDS0]] {dst = #kisa.ap<sbuf, f32
// CHECK: ktile.iota %[[COLS:.*]] {base = 0 : i64, dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 512]>, free_step = 1 : i64, partition_step = 0 : i64}
// CHECK: ktile.tensor_scalar %[[HOT0:.*]], %[[COLS]], %[[F0]] {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 512]>, op0 = "add", op1 = "eq", scalar0 = 0.000000e+00 : f64, scalar1 = 0.000000e+00 : f64, scalar_operands = 2 : i64
// CHECK: ktile.matmul %{{.*}}, %[[HOT0]], %{{.*}} {accumulate = false
// The second load block: the same ids, columns from 512 on.
// CHECK: ktile.tensor_scalar %{{.*}}, %[[COLS]], %[[F0]] {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 488]>, op0 = "add", op1 = "eq", scalar0 = 5.120000e+02 : f64
// CHECK-NOT: 300x1000
// CHECK-NOT: ktile.iota
// CHECK: return
func.func @embedding_gradient(%ids: tensor<300xi64>, %g: tensor<300x72xf32>) -> tensor<1000x72xf32> {
  %iota = kgraph.iota {dim = 0 : i64} : tensor<1000xi64>
  %col = kgraph.reshape %ids : tensor<300xi64> -> tensor<300x1xi64>
  %colb = kgraph.broadcast %col : tensor<300x1xi64> -> tensor<300x1000xi64>
  %row = kgraph.reshape %iota : tensor<1000xi64> -> tensor<1x1000xi64>
  %rowb = kgraph.broadcast %row : tensor<1x1000xi64> -> tensor<300x1000xi64>
  %eq = kgraph.compare "eq", %colb, %rowb {kgraph.fusion = 1 : i64} : tensor<300x1000xi64>, tensor<300x1000xi64>
  %hot = kgraph.cast %eq {kgraph.fusion = 1 : i64} : tensor<300x1000xi1> -> tensor<300x1000xf32>
  %dw = kgraph.matmul %hot, %g {transpose_lhs = true} : tensor<300x1000xf32>, tensor<300x72xf32> -> tensor<1000x72xf32>
  return %dw : tensor<1000x72xf32>
}

// Where the matrix is also a result, or the product reads its rows along M
// (an index_select), a loop nest computes and stores it as before.
// CHECK-LABEL: func.func @one_hot_also_returned
// CHECK: ktile.alloc : memref<300x1000xf32, "hbm">
// CHECK: ktile.tensor_tensor {{.*}} op = "eq"
// CHECK-NOT: op1 = "eq"
// CHECK: return
func.func @one_hot_also_returned(%ids: tensor<300xi64>, %g: tensor<300x72xf32>) -> (tensor<1000x72xf32>, tensor<300x1000xf32>) {
  %iota = kgraph.iota {dim = 0 : i64} : tensor<1000xi64>
  %col = kgraph.reshape %ids : tensor<300xi64> -> tensor<300x1xi64>
  %colb = kgraph.broadcast %col : tensor<300x1xi64> -> tensor<300x1000xi64>
  %row = kgraph.reshape %iota : tensor<1000xi64> -> tensor<1x1000xi64>
  %rowb = kgraph.broadcast %row : tensor<1x1000xi64> -> tensor<300x1000xi64>
  %eq = kgraph.compare "eq", %colb, %rowb {kgraph.fusion = 1 : i64} : tensor<300x1000xi64>, tensor<300x1000xi64>
  %hot = kgraph.cast %eq {kgraph.fusion = 1 : i64} : tensor<300x1000xi1> -> tensor<300x1000xf32>
  %dw = kgraph.matmul %hot, %g {transpose_lhs = true} : tensor<300x1000xf32>, tensor<300x72xf32> -> tensor<1000x72xf32>
  return %dw, %hot : tensor<1000x72xf32>, tensor<300x1000xf32>
}

// CHECK-LABEL: func.func @one_hot_rows_along_m
// CHECK: ktile.alloc : memref<300x1000xf32, "hbm">
// CHECK: ktile.tensor_tensor {{.*}} op = "eq"
// CHECK-NOT: op1 = "eq"
// CHECK: return
func.func @one_hot_rows_along_m(%ids: tensor<300xi64>, %w: tensor<1000x72xf32>) -> tensor<300x72xf32> {
  %iota = kgraph.iota {dim = 0 : i64} : tensor<1000xi64>
  %col = kgraph.reshape %ids : tensor<300xi64> -> tensor<300x1xi64>
  %colb = kgraph.broadcast %col : tensor<300x1xi64> -> tensor<300x1000xi64>
  %row = kgraph.reshape %iota : tensor<1000xi64> -> tensor<1x1000xi64>
  %rowb = kgraph.broadcast %row : tensor<1x1000xi64> -> tensor<300x1000xi64>
  %eq = kgraph.compare "eq", %rowb, %colb {kgraph.fusion = 1 : i64} : tensor<300x1000xi64>, tensor<300x1000xi64>
  %hot = kgraph.cast %eq {kgraph.fusion = 1 : i64} : tensor<300x1000xi1> -> tensor<300x1000xf32>
  %rows = kgraph.matmul %hot, %w : tensor<300x1000xf32>, tensor<1000x72xf32> -> tensor<300x72xf32>
  return %rows : tensor<300x72xf32>
}
