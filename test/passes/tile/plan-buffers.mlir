// RUN: kiln-opt %s --kgraph-plan-tiles | FileCheck %s

// An updated parameter computed elementwise is computed into the
// parameter's buffer: a read through a transposed view (a linear layer's
// W^T) whose consumer runs before the update does not stop it.
// CHECK-LABEL: func.func @update_after_transposed_read
// CHECK: kgraph.mul %arg0, %{{.*}} {kgraph.in_place = array<i64: 0>}
func.func @update_after_transposed_read(%w: tensor<4x4xf32> {kgraph.name = "w", kgraph.role = "parameter"}, %x: tensor<4x4xf32> {kgraph.name = "x", kgraph.role = "batch_input"}) -> (tensor<4x4xf32> {kgraph.name = "y", kgraph.role = "metric"}, tensor<4x4xf32> {kgraph.aliases = 0 : i64, kgraph.name = "w", kgraph.role = "updated_parameter"}) {
  %wt = kgraph.transpose %w, [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
  %y = kgraph.matmul %x, %wt : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %k = kgraph.constant dense<0.5> : tensor<f32>
  %0 = kgraph.mul %w, %k : tensor<4x4xf32>, tensor<f32>
  return %y, %0 : tensor<4x4xf32>, tensor<4x4xf32>
}

// When that consumer runs after the update, the update gets a buffer of
// its own (the return copies it over the parameter).
// CHECK-LABEL: func.func @update_before_transposed_read
// CHECK-NOT: kgraph.in_place
// CHECK: return
func.func @update_before_transposed_read(%w: tensor<4x4xf32> {kgraph.name = "w", kgraph.role = "parameter"}, %x: tensor<4x4xf32> {kgraph.name = "x", kgraph.role = "batch_input"}) -> (tensor<4x4xf32> {kgraph.name = "y", kgraph.role = "metric"}, tensor<4x4xf32> {kgraph.aliases = 0 : i64, kgraph.name = "w", kgraph.role = "updated_parameter"}) {
  %wt = kgraph.transpose %w, [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
  %k = kgraph.constant dense<0.5> : tensor<f32>
  %0 = kgraph.mul %w, %k : tensor<4x4xf32>, tensor<f32>
  %y = kgraph.matmul %x, %wt : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  return %y, %0 : tensor<4x4xf32>, tensor<4x4xf32>
}

// Attention's backward concatenates the Q, K and V gradients, each a
// product seen through a head-merging transpose and reshape: the products
// are computed into their parts of the concat's buffer. An input that is
// also returned has a reader besides the concat and is copied.
// CHECK-LABEL: func.func @concat_of_products
// CHECK: kgraph.concat %{{.*}}, %{{.*}}, %{{.*}} {dim = 1 : i64, kgraph.into_slices = array<i64: 0, 1>}
func.func @concat_of_products(%a: tensor<2x128x64xf32>, %b: tensor<2x64x64xf32>) -> (tensor<128x384xf32>, tensor<128x128xf32>) {
  %p = kgraph.matmul %a, %b : tensor<2x128x64xf32>, tensor<2x64x64xf32> -> tensor<2x128x64xf32>
  %pt = kgraph.transpose %p, [1, 0, 2] : tensor<2x128x64xf32> -> tensor<128x2x64xf32>
  %pr = kgraph.reshape %pt : tensor<128x2x64xf32> -> tensor<128x128xf32>
  %q = kgraph.matmul %a, %b : tensor<2x128x64xf32>, tensor<2x64x64xf32> -> tensor<2x128x64xf32>
  %qt = kgraph.transpose %q, [1, 0, 2] : tensor<2x128x64xf32> -> tensor<128x2x64xf32>
  %qr = kgraph.reshape %qt : tensor<128x2x64xf32> -> tensor<128x128xf32>
  %r = kgraph.matmul %a, %b : tensor<2x128x64xf32>, tensor<2x64x64xf32> -> tensor<2x128x64xf32>
  %rt = kgraph.transpose %r, [1, 0, 2] : tensor<2x128x64xf32> -> tensor<128x2x64xf32>
  %rr = kgraph.reshape %rt : tensor<128x2x64xf32> -> tensor<128x128xf32>
  %c = kgraph.concat %pr, %qr, %rr {dim = 1} : (tensor<128x128xf32>, tensor<128x128xf32>, tensor<128x128xf32>) -> tensor<128x384xf32>
  return %c, %rr : tensor<128x384xf32>, tensor<128x128xf32>
}

// ZeRO-1's gathered parameters: one gathered alone is gathered straight
// into its buffer; one viewed out of a bucket's gather is copied there
// right after the gather, so the bucket's buffer dies there.
// CHECK-LABEL: func.func @gathered_parameters
// CHECK: kgraph.all_gather %{{.*}} {kgraph.in_place = array<i64: 0>} : tensor<2x4xf32> -> tensor<8x4xf32>
// CHECK: kgraph.reshape %{{.*}} {kgraph.copied_into = array<i64: 1>} : tensor<4x2xf32> -> tensor<8xf32>
func.func @gathered_parameters(%w: tensor<8x4xf32> {kgraph.name = "p.w", kgraph.role = "parameter"}, %b: tensor<8xf32> {kgraph.name = "p.b", kgraph.role = "parameter"}) -> (tensor<8x4xf32> {kgraph.aliases = 0 : i64, kgraph.name = "next.p.w", kgraph.role = "updated_parameter"}, tensor<8xf32> {kgraph.aliases = 1 : i64, kgraph.name = "next.p.b", kgraph.role = "updated_parameter"}) {
  %ws = kgraph.worker_shard %w : tensor<8x4xf32> -> tensor<2x4xf32>
  %bs = kgraph.worker_shard %b : tensor<8xf32> -> tensor<2xf32>
  %nw = kgraph.exp %ws : tensor<2x4xf32>
  %nb = kgraph.exp %bs : tensor<2xf32>
  %gw = kgraph.all_gather %nw : tensor<2x4xf32> -> tensor<8x4xf32>
  %gb = kgraph.all_gather %nb : tensor<2xf32> -> tensor<8xf32>
  %view = kgraph.reshape %gb : tensor<8xf32> -> tensor<4x2xf32>
  %back = kgraph.reshape %view : tensor<4x2xf32> -> tensor<8xf32>
  return %gw, %back : tensor<8x4xf32>, tensor<8xf32>
}
