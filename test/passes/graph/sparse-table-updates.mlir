// RUN: kiln-opt %s --kgraph-sparse-table-updates | FileCheck %s

// AdamW on a 64-row table that 8 tokens pick from. The batch's rows of p,
// m and v are gathered where the indices exist, before anything writes.
// The whole table is updated with a zero gradient: the products with it
// and the sums with them are gone, so m and v only decay. The picked rows
// are updated with E . dY (E[i, j] = ids[i] == ids[j]) and written over
// the whole-table results.
// CHECK-LABEL: func.func @adamw_table
// CHECK: %[[IDS:.*]] = kgraph.reshape %arg4 : tensor<2x4xi64> -> tensor<8xi64>
// CHECK-NEXT: %[[M8:.*]] = kgraph.embedding %arg1, %[[IDS]] : tensor<64x4xf32>, tensor<8xi64> -> tensor<8x4xf32>
// CHECK-NEXT: %[[V8:.*]] = kgraph.embedding %arg2, %[[IDS]]
// CHECK-NEXT: %[[P8:.*]] = kgraph.embedding %arg0, %[[IDS]]
// CHECK-NOT: embedding_backward
// CHECK: %[[SAME:.*]] = kgraph.compare "eq"
// CHECK-NEXT: %[[E:.*]] = kgraph.cast %[[SAME]] : tensor<8x8xi1> -> tensor<8x8xf32>
// CHECK-NEXT: %[[G8:.*]] = kgraph.matmul %[[E]], %{{.*}} : tensor<8x8xf32>, tensor<8x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[MD8:.*]] = kgraph.mul %[[M8]], %{{.*}} : tensor<8x4xf32>, tensor<f32>
// CHECK-NEXT: %[[MG8:.*]] = kgraph.mul %[[G8]], %{{.*}} : tensor<8x4xf32>, tensor<f32>
// CHECK-NEXT: %[[M2R:.*]] = kgraph.add %[[MD8]], %[[MG8]]
// CHECK: %[[V2R:.*]] = kgraph.add
// CHECK: %[[P2R:.*]] = kgraph.sub %[[P8]], %{{.*}} : tensor<8x4xf32>, tensor<8x4xf32>
// CHECK-NEXT: %[[MDECAY:.*]] = kgraph.mul %arg1, %{{.*}} : tensor<64x4xf32>, tensor<f32>
// CHECK-NEXT: %[[VDECAY:.*]] = kgraph.mul %arg2, %{{.*}} : tensor<64x4xf32>, tensor<f32>
// CHECK-NEXT: %[[ROOT:.*]] = kgraph.sqrt %[[VDECAY]]
// CHECK-NEXT: %[[DEN:.*]] = kgraph.add %[[ROOT]], %{{.*}} : tensor<64x4xf32>, tensor<f32>
// CHECK-NEXT: %[[Q:.*]] = kgraph.div %[[MDECAY]], %[[DEN]]
// CHECK-NEXT: %[[STEP:.*]] = kgraph.mul %[[Q]], %arg3
// CHECK-NEXT: %[[PNEW:.*]] = kgraph.sub %arg0, %[[STEP]]
// CHECK-NEXT: %[[M:.*]] = kgraph.scatter_rows %[[MDECAY]], %[[IDS]], %[[M2R]] : tensor<64x4xf32>, tensor<8xi64>, tensor<8x4xf32> -> tensor<64x4xf32>
// CHECK-NEXT: %[[V:.*]] = kgraph.scatter_rows %[[VDECAY]], %[[IDS]], %[[V2R]]
// CHECK-NEXT: %[[P:.*]] = kgraph.scatter_rows %[[PNEW]], %[[IDS]], %[[P2R]]
// CHECK-NEXT: return %[[P]], %[[M]], %[[V]]
func.func @adamw_table(
    %p: tensor<64x4xf32> {kgraph.name = "p", kgraph.role = "parameter"},
    %m: tensor<64x4xf32> {kgraph.name = "m", kgraph.role = "optimizer_state"},
    %v: tensor<64x4xf32> {kgraph.name = "v", kgraph.role = "optimizer_state"},
    %lr: tensor<f32> {kgraph.name = "lr", kgraph.role = "runtime_scalar"},
    %ids: tensor<2x4xi64> {kgraph.name = "ids", kgraph.role = "batch_input"},
    %dy: tensor<2x4x4xf32> {kgraph.name = "dy", kgraph.role = "batch_input"})
    -> (tensor<64x4xf32> {kgraph.aliases = 0 : i64, kgraph.name = "p", kgraph.role = "updated_parameter"},
        tensor<64x4xf32> {kgraph.aliases = 1 : i64, kgraph.name = "m", kgraph.role = "updated_state"},
        tensor<64x4xf32> {kgraph.aliases = 2 : i64, kgraph.name = "v", kgraph.role = "updated_state"}) {
  %b1 = kgraph.constant dense<0.9> : tensor<f32>
  %c1 = kgraph.constant dense<0.1> : tensor<f32>
  %b2 = kgraph.constant dense<0.999> : tensor<f32>
  %c2 = kgraph.constant dense<0.001> : tensor<f32>
  %eps = kgraph.constant dense<1.0e-8> : tensor<f32>
  %g = kgraph.embedding_backward %dy, %ids {num_weights = 64} : tensor<2x4x4xf32>, tensor<2x4xi64> -> tensor<64x4xf32>
  %md = kgraph.mul %m, %b1 : tensor<64x4xf32>, tensor<f32>
  %mg = kgraph.mul %g, %c1 : tensor<64x4xf32>, tensor<f32>
  %m2 = kgraph.add %md, %mg : tensor<64x4xf32>, tensor<64x4xf32>
  %vd = kgraph.mul %v, %b2 : tensor<64x4xf32>, tensor<f32>
  %gc = kgraph.mul %g, %c2 : tensor<64x4xf32>, tensor<f32>
  %gg = kgraph.mul %gc, %g : tensor<64x4xf32>, tensor<64x4xf32>
  %v2 = kgraph.add %vd, %gg : tensor<64x4xf32>, tensor<64x4xf32>
  %root = kgraph.sqrt %v2 : tensor<64x4xf32>
  %den = kgraph.add %root, %eps : tensor<64x4xf32>, tensor<f32>
  %q = kgraph.div %m2, %den : tensor<64x4xf32>, tensor<64x4xf32>
  %step = kgraph.mul %q, %lr : tensor<64x4xf32>, tensor<f32>
  %p2 = kgraph.sub %p, %step : tensor<64x4xf32>, tensor<64x4xf32>
  return %p2, %m2, %v2 : tensor<64x4xf32>, tensor<64x4xf32>, tensor<64x4xf32>
}

// A table with fewer than eight rows per token keeps its update whole.
// CHECK-LABEL: func.func @crowded_table
// CHECK: kgraph.embedding_backward
// CHECK-NOT: scatter_rows
func.func @crowded_table(%p: tensor<16x4xf32>, %lr: tensor<f32>,
                         %ids: tensor<2x4xi64>, %dy: tensor<2x4x4xf32>)
    -> tensor<16x4xf32> {
  %g = kgraph.embedding_backward %dy, %ids {num_weights = 16} : tensor<2x4x4xf32>, tensor<2x4xi64> -> tensor<16x4xf32>
  %step = kgraph.mul %g, %lr : tensor<16x4xf32>, tensor<f32>
  %p2 = kgraph.sub %p, %step : tensor<16x4xf32>, tensor<16x4xf32>
  return %p2 : tensor<16x4xf32>
}

// A gradient read by anything but the update's elementwise ops (here a
// reduction, as a gradient norm would) keeps its update whole.
// CHECK-LABEL: func.func @gradient_read_elsewhere
// CHECK: kgraph.embedding_backward
// CHECK-NOT: scatter_rows
func.func @gradient_read_elsewhere(%p: tensor<64x4xf32>, %lr: tensor<f32>,
                                   %ids: tensor<2x4xi64>, %dy: tensor<2x4x4xf32>)
    -> (tensor<64x4xf32>, tensor<f32>) {
  %g = kgraph.embedding_backward %dy, %ids {num_weights = 64} : tensor<2x4x4xf32>, tensor<2x4xi64> -> tensor<64x4xf32>
  %norm = kgraph.reduce_sum %g, [0, 1] : tensor<64x4xf32> -> tensor<f32>
  %step = kgraph.mul %g, %lr : tensor<64x4xf32>, tensor<f32>
  %p2 = kgraph.sub %p, %step : tensor<64x4xf32>, tensor<64x4xf32>
  return %p2, %norm : tensor<64x4xf32>, tensor<f32>
}
