// RUN: kiln-opt %s --split-input-file --kgraph-recompute-checkpoints | FileCheck %s

// A checkpointed layer: a matmul and a tanh from its input, and its output
// the tanh squared. The backward pass reads the tanh (saved) and the input
// (kept). The matmul and the tanh are computed again right before the
// tanh's first reader, and both readers take the copy; the squaring, whose
// result is the call's output, is not. No marker is left.
// CHECK-LABEL: func.func @layer
// CHECK-NEXT: %[[H:.*]] = kgraph.matmul %arg0, %arg1
// CHECK-NEXT: %[[A:.*]] = kgraph.tanh %[[H]]
// CHECK-NEXT: %[[Y:.*]] = kgraph.mul %[[A]], %[[A]]
// CHECK-NEXT: %[[L:.*]] = kgraph.exp %[[Y]]
// CHECK-NEXT: %[[GY:.*]] = kgraph.mul %arg2, %[[L]]
// CHECK-NEXT: %[[H2:.*]] = kgraph.matmul %arg0, %arg1
// CHECK-NEXT: %[[A2:.*]] = kgraph.tanh %[[H2]]
// CHECK-NEXT: %[[GA:.*]] = kgraph.mul %[[GY]], %[[A2]]
// CHECK-NEXT: %[[GH:.*]] = kgraph.mul %[[GA]], %[[A2]]
// CHECK-NEXT: %[[XT:.*]] = kgraph.transpose %arg0
// CHECK-NEXT: kgraph.matmul %[[XT]], %[[GH]]
// CHECK-NOT: kgraph.checkpoint
func.func @layer(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %g: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8x8xf32>) {
  %x1 = kgraph.checkpoint %x {region = 0 : i64, side = "input"} : tensor<4x8xf32>
  %h = kgraph.matmul %x1, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %a = kgraph.tanh %h : tensor<4x8xf32>
  %y = kgraph.mul %a, %a : tensor<4x8xf32>, tensor<4x8xf32>
  %y1 = kgraph.checkpoint %y {region = 0 : i64, side = "output"} : tensor<4x8xf32>
  %l = kgraph.exp %y1 : tensor<4x8xf32>
  %gy = kgraph.mul %g, %l : tensor<4x8xf32>, tensor<4x8xf32>
  %ga = kgraph.mul %gy, %a : tensor<4x8xf32>, tensor<4x8xf32>
  %gh = kgraph.mul %ga, %a : tensor<4x8xf32>, tensor<4x8xf32>
  %xt = kgraph.transpose %x1, [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
  %dw = kgraph.matmul %xt, %gh : tensor<8x4xf32>, tensor<4x8xf32> -> tensor<8x8xf32>
  return %l, %dw : tensor<4x8xf32>, tensor<8x8xf32>
}

// -----

// Two calls in a row, the second reading the first's output. Each call's
// saved value is computed again before its own readers, from its own input:
// the second call's copy from the first call's output, which is kept.
// CHECK-LABEL: func.func @two_calls
// CHECK: %[[A:.*]] = kgraph.tanh %arg0
// CHECK-NEXT: %[[Y:.*]] = kgraph.exp %[[A]]
// CHECK-NEXT: %[[B:.*]] = kgraph.tanh %[[Y]]
// CHECK-NEXT: %[[Z:.*]] = kgraph.exp %[[B]]
// CHECK-NEXT: %[[B2:.*]] = kgraph.tanh %[[Y]]
// CHECK-NEXT: %[[G1:.*]] = kgraph.mul %[[Z]], %[[B2]]
// CHECK-NEXT: %[[A2:.*]] = kgraph.tanh %arg0
// CHECK-NEXT: kgraph.mul %[[G1]], %[[A2]]
// CHECK-NOT: kgraph.checkpoint
func.func @two_calls(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %x1 = kgraph.checkpoint %x {region = 0 : i64, side = "input"} : tensor<4x8xf32>
  %a = kgraph.tanh %x1 : tensor<4x8xf32>
  %y = kgraph.exp %a : tensor<4x8xf32>
  %y1 = kgraph.checkpoint %y {region = 0 : i64, side = "output"} : tensor<4x8xf32>
  %y2 = kgraph.checkpoint %y1 {region = 1 : i64, side = "input"} : tensor<4x8xf32>
  %b = kgraph.tanh %y2 : tensor<4x8xf32>
  %z = kgraph.exp %b : tensor<4x8xf32>
  %z1 = kgraph.checkpoint %z {region = 1 : i64, side = "output"} : tensor<4x8xf32>
  %g1 = kgraph.mul %z1, %b : tensor<4x8xf32>, tensor<4x8xf32>
  %g0 = kgraph.mul %g1, %a : tensor<4x8xf32>, tensor<4x8xf32>
  return %g0 : tensor<4x8xf32>
}

// -----

// A call whose backward pass reads only its input and output keeps nothing
// else: nothing is computed again, and the markers go.
// CHECK-LABEL: func.func @nothing_saved
// CHECK-NEXT: %[[A:.*]] = kgraph.exp %arg0
// CHECK-NEXT: %[[G:.*]] = kgraph.mul %[[A]], %arg0
// CHECK-NEXT: return %[[G]]
func.func @nothing_saved(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %x1 = kgraph.checkpoint %x {region = 3 : i64, side = "input"} : tensor<4x8xf32>
  %a = kgraph.exp %x1 : tensor<4x8xf32>
  %a1 = kgraph.checkpoint %a {region = 3 : i64, side = "output"} : tensor<4x8xf32>
  %g = kgraph.mul %a1, %x1 : tensor<4x8xf32>, tensor<4x8xf32>
  return %g : tensor<4x8xf32>
}

// -----

// A checkpointed call inside another: the outer call's recomputation
// computes the inner call's values too, its markers the identity.
// CHECK-LABEL: func.func @nested
// CHECK-NEXT: %[[A:.*]] = kgraph.tanh %arg0
// CHECK-NEXT: %[[B:.*]] = kgraph.exp %[[A]]
// CHECK-NEXT: %[[Y:.*]] = kgraph.tanh %[[B]]
// CHECK-NEXT: %[[A2:.*]] = kgraph.tanh %arg0
// CHECK-NEXT: %[[B2:.*]] = kgraph.exp %[[A2]]
// CHECK-NEXT: %[[G:.*]] = kgraph.mul %[[Y]], %[[B2]]
// CHECK-NEXT: kgraph.mul %[[G]], %[[A2]]
func.func @nested(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %x1 = kgraph.checkpoint %x {region = 0 : i64, side = "input"} : tensor<4x8xf32>
  %a = kgraph.tanh %x1 : tensor<4x8xf32>
  %a1 = kgraph.checkpoint %a {region = 1 : i64, side = "input"} : tensor<4x8xf32>
  %b = kgraph.exp %a1 : tensor<4x8xf32>
  %b1 = kgraph.checkpoint %b {region = 1 : i64, side = "output"} : tensor<4x8xf32>
  %y = kgraph.tanh %b1 : tensor<4x8xf32>
  %y1 = kgraph.checkpoint %y {region = 0 : i64, side = "output"} : tensor<4x8xf32>
  %g = kgraph.mul %y1, %b : tensor<4x8xf32>, tensor<4x8xf32>
  %g2 = kgraph.mul %g, %a : tensor<4x8xf32>, tensor<4x8xf32>
  return %g2 : tensor<4x8xf32>
}
