// RUN: kiln-opt %s | kiln-opt | FileCheck %s
// The convolution, batch-norm and pooling ops parse, infer their result
// shapes, print and parse back.

// CHECK-LABEL: func.func @conv2d
func.func @conv2d(%x: tensor<2x4x9x9xf32>, %w: tensor<6x2x3x3xf32>, %b: tensor<6xf32>) {
  // Stride 2, padding 1: (9 + 2 - 2 - 1) / 2 + 1 = 5.
  // CHECK: kgraph.conv %{{.*}}, %{{.*}}, %{{.*}} {dilation = array<i64: 1, 1>, groups = 2 : i64, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>} : tensor<2x4x9x9xf32>, tensor<6x2x3x3xf32>, tensor<6xf32> -> tensor<2x6x5x5xf32>
  %y = kgraph.conv %x, %w, %b {stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 2} : tensor<2x4x9x9xf32>, tensor<6x2x3x3xf32>, tensor<6xf32> -> tensor<2x6x5x5xf32>
  // CHECK: kgraph.conv_input_grad {{.*}} -> tensor<2x4x9x9xf32>
  %gx = kgraph.conv_input_grad %y, %w {stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 2} : tensor<2x6x5x5xf32>, tensor<6x2x3x3xf32> -> tensor<2x4x9x9xf32>
  // Several input sizes give one output size: 10 also gives 5.
  // CHECK: kgraph.conv_input_grad {{.*}} -> tensor<2x4x10x10xf32>
  %gx10 = kgraph.conv_input_grad %y, %w {stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 2} : tensor<2x6x5x5xf32>, tensor<6x2x3x3xf32> -> tensor<2x4x10x10xf32>
  // CHECK: kgraph.conv_weight_grad {{.*}} -> tensor<6x2x3x3xf32>
  %gw = kgraph.conv_weight_grad %y, %x {stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 2} : tensor<2x6x5x5xf32>, tensor<2x4x9x9xf32> -> tensor<6x2x3x3xf32>
  return
}

// CHECK-LABEL: func.func @conv1d_dilated_depthwise
func.func @conv1d_dilated_depthwise(%x: tensor<1x3x13xbf16>, %w: tensor<3x1x5xbf16>) {
  // 13 - 2 * 4 = 5 positions.
  // CHECK: -> tensor<1x3x5xbf16>
  %y = kgraph.conv %x, %w {stride = array<i64: 1>, padding = array<i64: 0>, dilation = array<i64: 2>, groups = 3} : tensor<1x3x13xbf16>, tensor<3x1x5xbf16> -> tensor<1x3x5xbf16>
  return
}

// CHECK-LABEL: func.func @batch_norm
func.func @batch_norm(%x: tensor<4x3x5x5xf32>, %c: tensor<3xf32>) {
  // Momentum 0.1 and epsilon 1e-5 are the defaults.
  // CHECK: kgraph.batch_norm %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {training = true} : tensor<4x3x5x5xf32>, tensor<3xf32>
  %y, %mean, %rstd, %rm, %rv = kgraph.batch_norm %x, %c, %c, %c, %c {training = true} : tensor<4x3x5x5xf32>, tensor<3xf32>
  // CHECK: kgraph.batch_norm_backward {{.*}} {training = true} : tensor<4x3x5x5xf32>, tensor<3xf32>
  %gx, %gw, %gb = kgraph.batch_norm_backward %y, %x, %mean, %rstd, %c {training = true} : tensor<4x3x5x5xf32>, tensor<3xf32>
  %e:5 = kgraph.batch_norm %x, %c, %c, %c, %c {training = false, momentum = 0.0} : tensor<4x3x5x5xf32>, tensor<3xf32>
  return
}

// CHECK-LABEL: func.func @pooling
func.func @pooling(%x: tensor<2x3x7x7xf32>) {
  // ResNet's stem pool: 3x3, stride 2, padding 1 on 7: 4.
  // CHECK: kgraph.max_pool {{.*}} : tensor<2x3x7x7xf32> -> tensor<2x3x4x4xf32>
  %m = kgraph.max_pool %x {kernel = array<i64: 3, 3>, stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : tensor<2x3x7x7xf32> -> tensor<2x3x4x4xf32>
  // CHECK: kgraph.max_pool_backward {{.*}} : tensor<2x3x4x4xf32>, tensor<2x3x7x7xf32>
  %gm = kgraph.max_pool_backward %m, %x {kernel = array<i64: 3, 3>, stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : tensor<2x3x4x4xf32>, tensor<2x3x7x7xf32>
  // ceil_mode: 2x2 stride 2 on 7 gives 4, not 3.
  // CHECK: kgraph.avg_pool {{.*}} -> tensor<2x3x4x4xf32>
  %a = kgraph.avg_pool %x {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, ceil_mode = true} : tensor<2x3x7x7xf32> -> tensor<2x3x4x4xf32>
  // CHECK: kgraph.avg_pool_backward {{.*}} : tensor<2x3x4x4xf32> -> tensor<2x3x7x7xf32>
  %ga = kgraph.avg_pool_backward %a {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, ceil_mode = true} : tensor<2x3x4x4xf32> -> tensor<2x3x7x7xf32>
  return
}
