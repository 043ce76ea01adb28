// RUN: kiln-opt %s --kgraph-sparse-table-updates=world-size=4 --kgraph-data-parallel=world-size=4 | FileCheck %s

// A 256-row table (8 rows for each of the group's 32 tokens) trained by
// 4 workers, its gradient marked for averaging (SGD here for brevity). The
// indices of all 4 workers are gathered at the start (8 -> 32), and the
// picked rows of p are gathered at all of them. Each worker computes its
// own gradient at those 32 rows, E . dY with E[i, j] = all[i] == ids[j]
// ([32, 8] . [8, 4]), and marks that for averaging: the group's mean
// gradient there, which kgraph-data-parallel all-reduces (4 KiB, not the
// dense table's 4 KiB x 8). The dense gradient is gone.
// CHECK-LABEL: func.func @table_of_a_group
// CHECK: %[[IDS:.*]] = kgraph.reshape %arg2 : tensor<2x4xi64> -> tensor<8xi64>
// CHECK-NEXT: %[[ALL:.*]] = kgraph.all_gather %[[IDS]] : tensor<8xi64> -> tensor<32xi64>
// CHECK-NEXT: %[[P32:.*]] = kgraph.embedding %arg0, %[[ALL]] : tensor<256x4xf32>, tensor<32xi64> -> tensor<32x4xf32>
// CHECK-NOT: embedding_backward
// CHECK: %[[DY:.*]] = kgraph.reshape %arg3 : tensor<2x4x4xf32> -> tensor<8x4xf32>
// CHECK: %[[SAME:.*]] = kgraph.compare "eq", %{{.*}}, %{{.*}} : tensor<32x8xi64>, tensor<32x8xi64>
// CHECK-NEXT: %[[E:.*]] = kgraph.cast %[[SAME]] : tensor<32x8xi1> -> tensor<32x8xf32>
// CHECK-NEXT: %[[MINE:.*]] = kgraph.matmul %[[E]], %[[DY]] : tensor<32x8xf32>, tensor<8x4xf32> -> tensor<32x4xf32>
// CHECK-NEXT: %[[G32:.*]] = kgraph.all_reduce %[[MINE]] {reduction = "mean"} : tensor<32x4xf32>
// CHECK-NEXT: %[[S32:.*]] = kgraph.mul %[[G32]], %arg1 : tensor<32x4xf32>, tensor<f32>
// CHECK-NEXT: %[[P2R:.*]] = kgraph.sub %[[P32]], %[[S32]] : tensor<32x4xf32>, tensor<32x4xf32>
// CHECK-NEXT: %[[P:.*]] = kgraph.scatter_rows %arg0, %[[ALL]], %[[P2R]] : tensor<256x4xf32>, tensor<32xi64>, tensor<32x4xf32> -> tensor<256x4xf32>
// CHECK-NEXT: %[[LOSS:.*]] = kgraph.all_reduce %{{.*}} {reduction = "mean"} : tensor<f32>
// CHECK-NEXT: return %[[P]], %[[LOSS]]
func.func @table_of_a_group(
    %p: tensor<256x4xf32> {kgraph.name = "p", kgraph.role = "parameter"},
    %lr: tensor<f32> {kgraph.name = "lr", kgraph.role = "runtime_scalar"},
    %ids: tensor<2x4xi64> {kgraph.name = "ids", kgraph.role = "batch_input"},
    %dy: tensor<2x4x4xf32> {kgraph.name = "dy", kgraph.role = "batch_input"})
    -> (tensor<256x4xf32> {kgraph.aliases = 0 : i64, kgraph.name = "p", kgraph.role = "updated_parameter"},
        tensor<f32> {kgraph.name = "loss", kgraph.role = "loss"}) {
  %g = kgraph.embedding_backward %dy, %ids {num_weights = 256} : tensor<2x4x4xf32>, tensor<2x4xi64> -> tensor<256x4xf32>
  %loss = kgraph.reduce_sum %dy, [0, 1, 2] : tensor<2x4x4xf32> -> tensor<f32>
  %gm = kgraph.gradient %g {parameter = "p"} : tensor<256x4xf32>
  %step = kgraph.mul %gm, %lr : tensor<256x4xf32>, tensor<f32>
  %p2 = kgraph.sub %p, %step : tensor<256x4xf32>, tensor<256x4xf32>
  return %p2, %loss : tensor<256x4xf32>, tensor<f32>
}

// Beside a bias: the table's gradient in the group's rows shares the
// bias's bucket, like any gradient.
// CHECK-LABEL: func.func @table_beside_a_bias
// CHECK: %[[ALL:.*]] = kgraph.all_gather %{{.*}} : tensor<8xi64> -> tensor<32xi64>
// CHECK: %[[ROWS:.*]] = kgraph.matmul %{{.*}}, %{{.*}} : tensor<32x8xf32>, tensor<8x4xf32> -> tensor<32x4xf32>
// CHECK-NEXT: %[[FLAT:.*]] = kgraph.reshape %[[ROWS]] : tensor<32x4xf32> -> tensor<128xf32>
// CHECK-NEXT: %[[BUCKET:.*]] = kgraph.concat %{{.*}}, %[[FLAT]] {dim = 0 : i64} : (tensor<4xf32>, tensor<128xf32>) -> tensor<132xf32>
// CHECK-NEXT: kgraph.all_reduce %[[BUCKET]] {reduction = "mean"} : tensor<132xf32>
// CHECK-NOT: all_reduce
// CHECK: kgraph.scatter_rows %arg0, %[[ALL]]
func.func @table_beside_a_bias(
    %p: tensor<256x4xf32> {kgraph.name = "p", kgraph.role = "parameter"},
    %bias: tensor<4xf32> {kgraph.name = "b", kgraph.role = "parameter"},
    %lr: tensor<f32> {kgraph.name = "lr", kgraph.role = "runtime_scalar"},
    %ids: tensor<2x4xi64> {kgraph.name = "ids", kgraph.role = "batch_input"},
    %dy: tensor<2x4x4xf32> {kgraph.name = "dy", kgraph.role = "batch_input"})
    -> (tensor<256x4xf32> {kgraph.aliases = 0 : i64, kgraph.name = "p", kgraph.role = "updated_parameter"},
        tensor<4xf32> {kgraph.aliases = 1 : i64, kgraph.name = "b", kgraph.role = "updated_parameter"}) {
  %gb = kgraph.reduce_sum %dy, [0, 1] : tensor<2x4x4xf32> -> tensor<4xf32>
  %g = kgraph.embedding_backward %dy, %ids {num_weights = 256} : tensor<2x4x4xf32>, tensor<2x4xi64> -> tensor<256x4xf32>
  %gbm = kgraph.gradient %gb {parameter = "b"} : tensor<4xf32>
  %gm = kgraph.gradient %g {parameter = "p"} : tensor<256x4xf32>
  %step = kgraph.mul %gm, %lr : tensor<256x4xf32>, tensor<f32>
  %p2 = kgraph.sub %p, %step : tensor<256x4xf32>, tensor<256x4xf32>
  %bstep = kgraph.mul %gbm, %lr : tensor<4xf32>, tensor<f32>
  %b2 = kgraph.sub %bias, %bstep : tensor<4xf32>, tensor<4xf32>
  return %p2, %b2 : tensor<256x4xf32>, tensor<4xf32>
}

// 64 rows are fewer than eight for each of the group's 32 tokens: the
// dense gradient stays, data parallelism all-reduces it, and nothing is
// gathered.
// CHECK-LABEL: func.func @crowded_for_a_group
// CHECK-NOT: all_gather
// CHECK: %[[G:.*]] = kgraph.embedding_backward
// CHECK-NEXT: kgraph.all_reduce %[[G]] {reduction = "mean"} : tensor<64x4xf32>
// CHECK-NOT: scatter_rows
// CHECK: return
func.func @crowded_for_a_group(
    %p: tensor<64x4xf32> {kgraph.name = "p", kgraph.role = "parameter"},
    %lr: tensor<f32> {kgraph.name = "lr", kgraph.role = "runtime_scalar"},
    %ids: tensor<2x4xi64> {kgraph.name = "ids", kgraph.role = "batch_input"},
    %dy: tensor<2x4x4xf32> {kgraph.name = "dy", kgraph.role = "batch_input"})
    -> (tensor<64x4xf32> {kgraph.aliases = 0 : i64, kgraph.name = "p", kgraph.role = "updated_parameter"}) {
  %g = kgraph.embedding_backward %dy, %ids {num_weights = 64} : tensor<2x4x4xf32>, tensor<2x4xi64> -> tensor<64x4xf32>
  %gm = kgraph.gradient %g {parameter = "p"} : tensor<64x4xf32>
  %step = kgraph.mul %gm, %lr : tensor<64x4xf32>, tensor<f32>
  %p2 = kgraph.sub %p, %step : tensor<64x4xf32>, tensor<64x4xf32>
  return %p2 : tensor<64x4xf32>
}
