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
