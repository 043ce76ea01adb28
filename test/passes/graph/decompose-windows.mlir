// RUN: kiln-opt %s --kgraph-decompose | FileCheck %s
// Convolution biases, batch norm and pooling become primitives; the
// convolution itself stays for the tile phase.

// CHECK-LABEL: func.func @conv_bias
func.func @conv_bias(%x: tensor<1x2x5x5xf32>, %w: tensor<4x2x3x3xf32>, %b: tensor<4xf32>) -> tensor<1x4x3x3xf32> {
  // CHECK: %[[Y:.*]] = kgraph.conv %{{.*}}, %{{.*}} {{{.*}}} : tensor<1x2x5x5xf32>, tensor<4x2x3x3xf32> -> tensor<1x4x3x3xf32>
  // CHECK: %[[B:.*]] = kgraph.reshape %{{.*}} : tensor<4xf32> -> tensor<1x4x1x1xf32>
  // CHECK: kgraph.add %[[Y]], %[[B]]
  %y = kgraph.conv %x, %w, %b {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>} : tensor<1x2x5x5xf32>, tensor<4x2x3x3xf32>, tensor<4xf32> -> tensor<1x4x3x3xf32>
  return %y : tensor<1x4x3x3xf32>
}

// CHECK-LABEL: func.func @batch_norm
func.func @batch_norm(%x: tensor<2x3x4x4xf32>, %c: tensor<3xf32>) -> (tensor<2x3x4x4xf32>, tensor<3xf32>) {
  // The statistics are sums over every dim but the channels.
  // CHECK: kgraph.reduce_sum %{{.*}}, [0, 2, 3] {keepdim = true}
  // CHECK: kgraph.rsqrt
  // CHECK-NOT: kgraph.batch_norm
  %y:5 = kgraph.batch_norm %x, %c, %c, %c, %c {training = true} : tensor<2x3x4x4xf32>, tensor<3xf32>
  return %y#0, %y#3 : tensor<2x3x4x4xf32>, tensor<3xf32>
}

// In eval mode the per-channel values are computed where the running
// statistics are (here the function's start), before the convolution
// whose output is normalised, so that the convolution's epilogue can
// apply them.
// CHECK-LABEL: func.func @eval_batch_norm_after_conv
// CHECK: kgraph.rsqrt
// CHECK: kgraph.conv
// CHECK: kgraph.sub
// CHECK-NOT: kgraph.batch_norm
func.func @eval_batch_norm_after_conv(%x: tensor<2x3x4x4xf32>, %w: tensor<3x3x1x1xf32>, %c: tensor<3xf32>) -> tensor<2x3x4x4xf32> {
  %y = kgraph.conv %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>} : tensor<2x3x4x4xf32>, tensor<3x3x1x1xf32> -> tensor<2x3x4x4xf32>
  %n:5 = kgraph.batch_norm %y, %c, %c, %c, %c {training = false} : tensor<2x3x4x4xf32>, tensor<3xf32>
  return %n#0 : tensor<2x3x4x4xf32>
}

// CHECK-LABEL: func.func @max_pool
func.func @max_pool(%x: tensor<1x1x4x4xf32>) -> tensor<1x1x2x2xf32> {
  // Padding with the lowest float, then one strided slice per tap.
  // CHECK: kgraph.constant dense<-3.40282347E+38> : tensor<1x1x1x4xf32>
  // CHECK: kgraph.concat
  // CHECK: kgraph.slice %{{.*}} {limit = array<i64: 1, 1, 3, 3>, start = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1, 2, 2>}
  // CHECK-COUNT-8: kgraph.max
  %y = kgraph.max_pool %x {kernel = array<i64: 3, 3>, stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : tensor<1x1x4x4xf32> -> tensor<1x1x2x2xf32>
  return %y : tensor<1x1x2x2xf32>
}
