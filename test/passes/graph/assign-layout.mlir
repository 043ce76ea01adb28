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

// A sum over a middle dimension of few elements whose slices are long
// contiguous blocks (grouped-query attention's key gradient, summed over
// the 4 query heads of each key-value head) adds the slices elementwise,
// in f32 for bf16, and rounds once: no transpose.
// CHECK-LABEL: func.func @sum_of_slices
// CHECK-NOT: kgraph.transpose
// CHECK: %[[S0:.*]] = kgraph.slice %arg0 {limit = array<i64: 2, 1, 16, 8>, start = array<i64: 0, 0, 0, 0>
// CHECK: %[[C0:.*]] = kgraph.cast %[[S0]] : tensor<2x1x16x8xbf16> -> tensor<2x1x16x8xf32>
// CHECK: %[[S1:.*]] = kgraph.slice %arg0 {limit = array<i64: 2, 2, 16, 8>, start = array<i64: 0, 1, 0, 0>
// CHECK: %[[C1:.*]] = kgraph.cast %[[S1]]
// CHECK: %[[A1:.*]] = kgraph.add %[[C0]], %[[C1]]
// CHECK: kgraph.add %[[A1]]
// CHECK: %[[A3:.*]] = kgraph.add
// CHECK: %[[B:.*]] = kgraph.cast %[[A3]] : tensor<2x1x16x8xf32> -> tensor<2x1x16x8xbf16>
// CHECK: kgraph.reshape %[[B]] : tensor<2x1x16x8xbf16> -> tensor<2x16x8xbf16>
// CHECK-NOT: kgraph.reduce_sum
func.func @sum_of_slices(%g: tensor<2x4x16x8xbf16>) -> tensor<2x16x8xbf16> {
  %0 = kgraph.reduce_sum %g, [1] : tensor<2x4x16x8xbf16> -> tensor<2x16x8xbf16>
  return %0 : tensor<2x16x8xbf16>
}
