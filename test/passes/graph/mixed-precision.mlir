// RUN: kiln-opt %s --kgraph-mixed-precision | FileCheck %s

// CHECK-LABEL: func.func @mm
// CHECK: %[[A:.*]] = kgraph.cast %arg0 : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK: %[[B:.*]] = kgraph.cast %arg1 : tensor<8x3xf32> -> tensor<8x3xbf16>
// CHECK: %[[P:.*]] = kgraph.matmul %[[A]], %[[B]] : tensor<4x8xbf16>, tensor<8x3xbf16> -> tensor<4x3xbf16>
// CHECK: kgraph.cast %[[P]] : tensor<4x3xbf16> -> tensor<4x3xf32>
func.func @mm(%a: tensor<4x8xf32>, %b: tensor<8x3xf32>) -> tensor<4x3xf32> {
  %0 = kgraph.matmul %a, %b : tensor<4x8xf32>, tensor<8x3xf32> -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}
