// RUN: kiln-opt %s --kgraph-plan-tiles | FileCheck %s

// A linear layer's weight and bias gradients: the bias gradient, a sum of
// dY over rows, is computed beside the weight gradient dY^T . X from the
// dY tiles that product holds.
// CHECK-LABEL: func.func @bias_beside_weight_gradient
// CHECK: kgraph.matmul %{{.*}}, %arg1 {kgraph.product = 0 : i64}
// CHECK: kgraph.matmul %{{.*}}, %arg0 {kgraph.sum_beside = 0 : i64}
func.func @bias_beside_weight_gradient(%dy: tensor<256x64xf32>, %x: tensor<256x32xf32>) -> (tensor<64x32xf32>, tensor<1x64xf32>) {
  %ones = kgraph.constant dense<1.0> : tensor<1x256xf32>
  %dyt = kgraph.transpose %dy, [1, 0] : tensor<256x64xf32> -> tensor<64x256xf32>
  %dw = kgraph.matmul %dyt, %x : tensor<64x256xf32>, tensor<256x32xf32> -> tensor<64x32xf32>
  %db = kgraph.matmul %ones, %dy : tensor<1x256xf32>, tensor<256x64xf32> -> tensor<1x64xf32>
  return %dw, %db : tensor<64x32xf32>, tensor<1x64xf32>
}

// A sum before the product that reads dY^T is not computed beside it.
// CHECK-LABEL: func.func @sum_before_product
// CHECK: kgraph.matmul %{{.*}}, %arg0 :
// CHECK: kgraph.matmul %{{.*}}, %arg1 :
// CHECK-NOT: kgraph.sum_beside
// CHECK: return
func.func @sum_before_product(%dy: tensor<256x64xf32>, %x: tensor<256x32xf32>) -> (tensor<64x32xf32>, tensor<1x64xf32>) {
  %ones = kgraph.constant dense<1.0> : tensor<1x256xf32>
  %db = kgraph.matmul %ones, %dy : tensor<1x256xf32>, tensor<256x64xf32> -> tensor<1x64xf32>
  %dyt = kgraph.transpose %dy, [1, 0] : tensor<256x64xf32> -> tensor<64x256xf32>
  %dw = kgraph.matmul %dyt, %x : tensor<64x256xf32>, tensor<256x32xf32> -> tensor<64x32xf32>
  return %dw, %db : tensor<64x32xf32>, tensor<1x64xf32>
}

// A layer norm's weight gradient: the sum over rows of dY * x_hat, which
// a group computes just before, is a candidate for the group's loop nest;
// so is a sum through a reshape of a lone op's value of the sum's width. A
// sum of a value computed after it, or of another width, is not.
// CHECK-LABEL: func.func @sums_in_loop_nests
// CHECK: kgraph.matmul %{{.*}}, %{{.*}} {kgraph.sum_in_loop_nest}
// CHECK: kgraph.matmul %{{.*}}, %{{.*}} {kgraph.sum_in_loop_nest}
// CHECK: kgraph.matmul %{{.*}}, %arg0 :
// CHECK: return
func.func @sums_in_loop_nests(%dy: tensor<128x64xf32>, %xhat: tensor<128x64xf32>, %z: tensor<2x64x64xf32>) -> (tensor<1x64xf32>, tensor<1x64xf32>, tensor<1x64xf32>) {
  %ones = kgraph.constant dense<1.0> : tensor<1x128xf32>
  %p = kgraph.mul %dy, %xhat {kgraph.fusion = 0 : i64} : tensor<128x64xf32>, tensor<128x64xf32>
  %q = kgraph.add %p, %xhat {kgraph.fusion = 0 : i64} : tensor<128x64xf32>, tensor<128x64xf32>
  %dg = kgraph.matmul %ones, %q : tensor<1x128xf32>, tensor<128x64xf32> -> tensor<1x64xf32>
  %e = kgraph.exp %z : tensor<2x64x64xf32>
  %er = kgraph.reshape %e : tensor<2x64x64xf32> -> tensor<128x64xf32>
  %de = kgraph.matmul %ones, %er : tensor<1x128xf32>, tensor<128x64xf32> -> tensor<1x64xf32>
  %dd = kgraph.matmul %ones, %dy : tensor<1x128xf32>, tensor<128x64xf32> -> tensor<1x64xf32>
  return %dg, %de, %dd : tensor<1x64xf32>, tensor<1x64xf32>, tensor<1x64xf32>
}

// Batch norm's per-channel sum of a convolution's output (as layout
// assignment writes it: a sum over all but the first dim of the
// channels-first transpose) is computed by the convolution as its tiles
// leave PSUM; so is one of an input gradient's, and one of a bf16
// convolution's output through the f32 cast its evacuation performs. A sum
// over fewer dims is not, nor one of a bf16 result the evacuation rounds.
// CHECK-LABEL: func.func @channel_sums_beside_convolutions
// CHECK: kgraph.conv %arg0, %arg1 {{{.*}}kgraph.product = 0 : i64
// CHECK: kgraph.reduce_sum %{{.*}}, [1, 2, 3] {keepdim = true, kgraph.sum_beside = 0 : i64}
// CHECK: kgraph.reduce_sum %{{.*}}, [2, 3] {keepdim = true} :
// CHECK: kgraph.conv_input_grad %arg2, %arg1 {{{.*}}kgraph.product = 1 : i64
// CHECK: kgraph.reduce_sum %{{.*}}, [1, 2, 3] {kgraph.sum_beside = 1 : i64}
// CHECK: kgraph.conv %{{.*}}, %{{.*}} {{{.*}}kgraph.product = 2 : i64
// CHECK: kgraph.cast %{{.*}} {kgraph.fold = "evacuation"}
// CHECK: kgraph.reduce_sum %{{.*}}, [1, 2, 3] {kgraph.sum_beside = 2 : i64}
// CHECK: kgraph.conv %arg3, %arg4
// CHECK-NOT: kgraph.product
// CHECK: kgraph.reduce_sum %{{.*}}, [1, 2, 3] :
// CHECK: return
func.func @channel_sums_beside_convolutions(%x: tensor<2x3x6x6xf32>, %w: tensor<4x3x3x3xf32>, %g: tensor<2x4x6x6xf32>, %xb: tensor<2x3x6x6xbf16>, %wb: tensor<4x3x3x3xbf16>) -> (tensor<4x1x1x1xf32>, tensor<4x2x1x1xf32>, tensor<3xf32>, tensor<4xf32>, tensor<4xbf16>) {
  %y = kgraph.conv %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32> -> tensor<2x4x6x6xf32>
  %yt = kgraph.transpose %y, [1, 0, 2, 3] : tensor<2x4x6x6xf32> -> tensor<4x2x6x6xf32>
  %ys = kgraph.reduce_sum %yt, [1, 2, 3] {keepdim = true} : tensor<4x2x6x6xf32> -> tensor<4x1x1x1xf32>
  %yr = kgraph.reduce_sum %yt, [2, 3] {keepdim = true} : tensor<4x2x6x6xf32> -> tensor<4x2x1x1xf32>
  %gx = kgraph.conv_input_grad %g, %w {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : tensor<2x4x6x6xf32>, tensor<4x3x3x3xf32> -> tensor<2x3x6x6xf32>
  %gxt = kgraph.transpose %gx, [1, 0, 2, 3] : tensor<2x3x6x6xf32> -> tensor<3x2x6x6xf32>
  %gxs = kgraph.reduce_sum %gxt, [1, 2, 3] : tensor<3x2x6x6xf32> -> tensor<3xf32>
  %xc = kgraph.cast %x : tensor<2x3x6x6xf32> -> tensor<2x3x6x6xbf16>
  %wc = kgraph.cast %w : tensor<4x3x3x3xf32> -> tensor<4x3x3x3xbf16>
  %yb = kgraph.conv %xc, %wc {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : tensor<2x3x6x6xbf16>, tensor<4x3x3x3xbf16> -> tensor<2x4x6x6xbf16>
  %ybf = kgraph.cast %yb : tensor<2x4x6x6xbf16> -> tensor<2x4x6x6xf32>
  %ybt = kgraph.transpose %ybf, [1, 0, 2, 3] : tensor<2x4x6x6xf32> -> tensor<4x2x6x6xf32>
  %ybs = kgraph.reduce_sum %ybt, [1, 2, 3] : tensor<4x2x6x6xf32> -> tensor<4xf32>
  %yn = kgraph.conv %xb, %wb {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : tensor<2x3x6x6xbf16>, tensor<4x3x3x3xbf16> -> tensor<2x4x6x6xbf16>
  %ynt = kgraph.transpose %yn, [1, 0, 2, 3] : tensor<2x4x6x6xbf16> -> tensor<4x2x6x6xbf16>
  %yns = kgraph.reduce_sum %ynt, [1, 2, 3] : tensor<4x2x6x6xbf16> -> tensor<4xbf16>
  return %ys, %yr, %gxs, %ybs, %yns : tensor<4x1x1x1xf32>, tensor<4x2x1x1xf32>, tensor<3xf32>, tensor<4xf32>, tensor<4xbf16>
}
