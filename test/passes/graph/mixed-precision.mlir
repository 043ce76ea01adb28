// RUN: kiln-opt %s --kgraph-mixed-precision --cse | FileCheck %s

// CHECK-LABEL: func.func @mm
// CHECK: %[[A:.*]] = kgraph.cast %arg0 : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK: %[[B:.*]] = kgraph.cast %arg1 : tensor<8x3xf32> -> tensor<8x3xbf16>
// CHECK: %[[P:.*]] = kgraph.matmul %[[A]], %[[B]] : tensor<4x8xbf16>, tensor<8x3xbf16> -> tensor<4x3xbf16>
// CHECK: kgraph.cast %[[P]] : tensor<4x3xbf16> -> tensor<4x3xf32>
func.func @mm(%a: tensor<4x8xf32>, %b: tensor<8x3xf32>) -> tensor<4x3xf32> {
  %0 = kgraph.matmul %a, %b : tensor<4x8xf32>, tensor<8x3xf32> -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// A matmul operand that is a view of a value an elementwise op computes:
// the value is narrowed right after its op and the views follow, so the
// two matmuls reading it (directly and transposed) share one cast, which
// fusion puts in the op's group. A view of an argument keeps its cast at
// the matmul, for the load to perform. A bf16 product widened to f32 is
// not narrowed again: the product itself is the operand.
// CHECK-LABEL: func.func @views_of_computed
// CHECK: %[[G:.*]] = kgraph.gelu %arg0
// CHECK-NEXT: %[[C:.*]] = kgraph.cast %[[G]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK-NEXT: %[[W:.*]] = kgraph.transpose %arg1, [1, 0] : tensor<3x8xf32> -> tensor<8x3xf32>
// CHECK-NEXT: %[[WC:.*]] = kgraph.cast %[[W]] : tensor<8x3xf32> -> tensor<8x3xbf16>
// CHECK-NEXT: kgraph.matmul %[[C]], %[[WC]] : tensor<4x8xbf16>, tensor<8x3xbf16>
// CHECK-NOT: kgraph.cast %[[G]]
// CHECK: %[[T:.*]] = kgraph.transpose %[[C]], [1, 0] : tensor<4x8xbf16> -> tensor<8x4xbf16>
// CHECK: %[[P:.*]] = kgraph.matmul %[[T]], %{{.*}} : tensor<8x4xbf16>, tensor<4x5xbf16> -> tensor<8x5xbf16>
// CHECK-NOT: kgraph.cast %[[P]]
// CHECK: kgraph.matmul %[[P]], %{{.*}} : tensor<8x5xbf16>, tensor<5x2xbf16>
func.func @views_of_computed(%x: tensor<4x8xf32>, %w: tensor<3x8xf32>, %v: tensor<4x5xf32>, %u: tensor<5x2xf32>) -> (tensor<4x3xf32>, tensor<8x2xf32>) {
  %g = kgraph.gelu %x : tensor<4x8xf32>
  %wt = kgraph.transpose %w, [1, 0] : tensor<3x8xf32> -> tensor<8x3xf32>
  %0 = kgraph.matmul %g, %wt : tensor<4x8xf32>, tensor<8x3xf32> -> tensor<4x3xf32>
  %gt = kgraph.transpose %g, [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
  %1 = kgraph.matmul %gt, %v : tensor<8x4xf32>, tensor<4x5xf32> -> tensor<8x5xf32>
  %2 = kgraph.matmul %1, %u : tensor<8x5xf32>, tensor<5x2xf32> -> tensor<8x2xf32>
  return %0, %2 : tensor<4x3xf32>, tensor<8x2xf32>
}


// A concat that only matmuls read (attention's Q, K and V gradients) is
// rebuilt from its narrowed parts: a bf16 product goes in as it is, an
// elementwise value narrowed right after its op; the f32 concat is gone.
// CHECK-LABEL: func.func @concat_of_parts
// CHECK: %[[P:.*]] = kgraph.matmul %{{.*}} -> tensor<4x8xbf16>
// CHECK: %[[E:.*]] = kgraph.exp
// CHECK-NEXT: %[[EC:.*]] = kgraph.cast %[[E]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK: %[[C:.*]] = kgraph.concat %[[P]], %[[EC]] {dim = 1 : i64} : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x16xbf16>
// CHECK-NOT: tensor<4x16xf32>
// CHECK: kgraph.matmul %[[C]]
func.func @concat_of_parts(%a: tensor<4x3xf32>, %b: tensor<3x8xf32>, %x: tensor<4x8xf32>, %w: tensor<16x5xf32>) -> tensor<4x5xf32> {
  %p = kgraph.matmul %a, %b : tensor<4x3xf32>, tensor<3x8xf32> -> tensor<4x8xf32>
  %e = kgraph.exp %x : tensor<4x8xf32>
  %c = kgraph.concat %p, %e {dim = 1 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x16xf32>
  %y = kgraph.matmul %c, %w : tensor<4x16xf32>, tensor<16x5xf32> -> tensor<4x5xf32>
  return %y : tensor<4x5xf32>
}
