// RUN: kiln-opt %s --kgraph-assign-layout | FileCheck %s

// A sum over the rows is a ones-row matmul on TensorE.
// CHECK-LABEL: func.func @bias_gradient
// CHECK: %[[ONES:.*]] = kgraph.constant dense<1.000000e+00> : tensor<1x64xf32>
// CHECK: %[[P:.*]] = kgraph.matmul %[[ONES]], %arg0 : tensor<1x64xf32>, tensor<64x10xf32> -> tensor<1x10xf32>
// CHECK: kgraph.reshape %[[P]] : tensor<1x10xf32> -> tensor<10xf32>
// CHECK-NOT: reduce_sum
func.func @bias_gradient(%g: tensor<64x10xf32>) -> tensor<10xf32> {
  %0 = kgraph.reduce_sum %g, [0] : tensor<64x10xf32> -> tensor<10xf32>
  return %0 : tensor<10xf32>
}

// Any other reduction over leading dims moves them innermost first.
// CHECK-LABEL: func.func @max_over_middle
// CHECK: %[[T:.*]] = kgraph.transpose %arg0, [0, 2, 1]
// CHECK: kgraph.reduce_max %[[T]], [2]
func.func @max_over_middle(%x: tensor<2x5x7xf32>) -> tensor<2x7xf32> {
  %0 = kgraph.reduce_max %x, [1] : tensor<2x5x7xf32> -> tensor<2x7xf32>
  return %0 : tensor<2x7xf32>
}

// Trailing reductions stay as they are.
// CHECK-LABEL: func.func @rows
// CHECK: kgraph.reduce_sum %arg0, [1]
func.func @rows(%x: tensor<5x7xf32>) -> tensor<5xf32> {
  %0 = kgraph.reduce_sum %x, [1] : tensor<5x7xf32> -> tensor<5xf32>
  return %0 : tensor<5xf32>
}
