// RUN: kiln-opt %s --kgraph-fuse-elementwise | FileCheck %s

// A chain of one shape is one group; the reduction ends it.
// CHECK-LABEL: func.func @chain
// CHECK: kgraph.mul {{.*}} {kgraph.fusion = 0 : i64}
// CHECK: kgraph.add {{.*}} {kgraph.fusion = 0 : i64}
// CHECK: kgraph.tanh {{.*}} {kgraph.fusion = 0 : i64}
// CHECK: kgraph.reduce_sum
// CHECK-NOT: kgraph.fusion
func.func @chain(%x: tensor<8x300xf32>, %b: tensor<300xf32>) -> tensor<8xf32> {
  %0 = kgraph.mul %x, %x : tensor<8x300xf32>, tensor<8x300xf32>
  %1 = kgraph.add %0, %b : tensor<8x300xf32>, tensor<300xf32>
  %2 = kgraph.tanh %1 : tensor<8x300xf32>
  %3 = kgraph.reduce_sum %2, [1] : tensor<8x300xf32> -> tensor<8xf32>
  return %3 : tensor<8xf32>
}

// The exp cannot join the first group: the reduction between them reads a
// group value, and the group is computed where its last op stands.
// CHECK-LABEL: func.func @blocked
// CHECK: %[[A:.*]] = kgraph.neg %arg0 {kgraph.fusion = 0 : i64}
// CHECK: kgraph.abs %[[A]] {kgraph.fusion = 0 : i64}
// CHECK: kgraph.reduce_max %[[A]]
// CHECK: kgraph.exp %[[A]] :
func.func @blocked(%x: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>) {
  %0 = kgraph.neg %x : tensor<4x4xf32>
  %1 = kgraph.abs %0 : tensor<4x4xf32>
  %2 = kgraph.reduce_max %0, [1] : tensor<4x4xf32> -> tensor<4xf32>
  %3 = kgraph.exp %0 : tensor<4x4xf32>
  return %1, %2, %3 : tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>
}
