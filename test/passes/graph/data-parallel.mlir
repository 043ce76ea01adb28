// RUN: kiln-opt %s --split-input-file --kgraph-data-parallel="world-size=4 bucket-bytes=4096" | FileCheck %s
// RUN: kiln-opt %s --split-input-file --kgraph-data-parallel="world-size=1" | FileCheck %s --check-prefix=SINGLE

// Two small gradients share a bucket: flattened, concatenated, averaged by
// one all-reduce where the second is produced, and sliced back. The third
// (4 KiB on its own) is a bucket of one, reduced in place. The loss is
// averaged too; the updated parameter is not.
// CHECK-LABEL: func.func @step
// CHECK: %[[G0:.*]] = kgraph.mul %arg0, %arg0
// CHECK: %[[G1:.*]] = kgraph.add %arg1, %arg1
// CHECK: %[[F0:.*]] = kgraph.reshape %[[G0]] : tensor<4x8xf32> -> tensor<32xf32>
// CHECK: %[[CAT:.*]] = kgraph.concat %[[F0]], %[[G1]] {dim = 0 : i64} : (tensor<32xf32>, tensor<8xf32>) -> tensor<40xf32>
// CHECK: %[[AR:.*]] = kgraph.all_reduce %[[CAT]] {reduction = "mean"} : tensor<40xf32>
// CHECK: %[[S0:.*]] = kgraph.slice %[[AR]] {limit = array<i64: 32>, start = array<i64: 0>, stride = array<i64: 1>}
// CHECK: %[[R0:.*]] = kgraph.reshape %[[S0]] : tensor<32xf32> -> tensor<4x8xf32>
// CHECK: %[[S1:.*]] = kgraph.slice %[[AR]] {limit = array<i64: 40>, start = array<i64: 32>, stride = array<i64: 1>}
// CHECK: %[[G2:.*]] = kgraph.exp %arg2 : tensor<32x32xf32>
// CHECK: %[[AR2:.*]] = kgraph.all_reduce %[[G2]] {reduction = "mean"} : tensor<32x32xf32>
// CHECK: %[[U:.*]] = kgraph.sub %arg0, %[[R0]]
// CHECK: %[[L:.*]] = kgraph.all_reduce %arg3 {reduction = "mean"} : tensor<f32>
// CHECK: return %[[U]], %[[L]]
// CHECK-NOT: kgraph.gradient
// SINGLE-LABEL: func.func @step
// SINGLE-NOT: kgraph.all_reduce
// SINGLE-NOT: kgraph.gradient
// SINGLE: %[[G0:.*]] = kgraph.mul %arg0, %arg0
// SINGLE: kgraph.sub %arg0, %[[G0]]
func.func @step(%w: tensor<4x8xf32> {kgraph.name = "p.w", kgraph.role = "parameter"},
                %b: tensor<8xf32> {kgraph.name = "p.b", kgraph.role = "parameter"},
                %v: tensor<32x32xf32> {kgraph.name = "p.v", kgraph.role = "parameter"},
                %loss: tensor<f32> {kgraph.name = "b.0", kgraph.role = "batch_input"})
    -> (tensor<4x8xf32> {kgraph.name = "next.p.w", kgraph.role = "updated_parameter"},
        tensor<f32> {kgraph.name = "loss", kgraph.role = "loss"},
        tensor<8xf32>, tensor<32x32xf32>) {
  %dw = kgraph.mul %w, %w : tensor<4x8xf32>, tensor<4x8xf32>
  %gw = kgraph.gradient %dw {parameter = "p.w"} : tensor<4x8xf32>
  %db = kgraph.add %b, %b : tensor<8xf32>, tensor<8xf32>
  %gb = kgraph.gradient %db {parameter = "p.b"} : tensor<8xf32>
  %dv = kgraph.exp %v : tensor<32x32xf32>
  %gv = kgraph.gradient %dv {parameter = "p.v"} : tensor<32x32xf32>
  %nw = kgraph.sub %w, %gw : tensor<4x8xf32>, tensor<4x8xf32>
  return %nw, %loss, %gb, %gv : tensor<4x8xf32>, tensor<f32>, tensor<8xf32>, tensor<32x32xf32>
}

// -----

// A gradient used before the next one is produced closes its bucket: a
// later reduction would not dominate that use.
// CHECK-LABEL: func.func @early_use
// CHECK: %[[A:.*]] = kgraph.all_reduce %arg0 {reduction = "mean"} : tensor<8xf32>
// CHECK-NEXT: kgraph.neg %[[A]]
// CHECK-NEXT: %[[B:.*]] = kgraph.exp %arg1
// CHECK-NEXT: kgraph.all_reduce %[[B]] {reduction = "mean"} : tensor<8xf32>
func.func @early_use(%a: tensor<8xf32>, %b: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %ga = kgraph.gradient %a {parameter = "p.a"} : tensor<8xf32>
  %n = kgraph.neg %ga : tensor<8xf32>
  %db = kgraph.exp %b : tensor<8xf32>
  %gb = kgraph.gradient %db {parameter = "p.b"} : tensor<8xf32>
  return %n, %gb : tensor<8xf32>, tensor<8xf32>
}

// -----

// Markers come after the whole backward pass; each bucket is reduced where
// its gradients are produced, before the rest of the backward pass.
// CHECK-LABEL: func.func @late_markers
// CHECK: %[[D1:.*]] = kgraph.exp %arg0
// CHECK-NEXT: kgraph.all_reduce %[[D1]]
// CHECK: kgraph.tanh
// CHECK: kgraph.all_reduce
func.func @late_markers(%a: tensor<32x32xf32>) -> (tensor<32x32xf32>, tensor<32x32xf32>) {
  %d1 = kgraph.exp %a : tensor<32x32xf32>
  %d2 = kgraph.tanh %d1 : tensor<32x32xf32>
  %g1 = kgraph.gradient %d1 {parameter = "p.a"} : tensor<32x32xf32>
  %g2 = kgraph.gradient %d2 {parameter = "p.b"} : tensor<32x32xf32>
  return %g1, %g2 : tensor<32x32xf32>, tensor<32x32xf32>
}
