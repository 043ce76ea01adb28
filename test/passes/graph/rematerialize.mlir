// RUN: kiln-opt %s --kgraph-rematerialize | FileCheck %s

// A dropout's scaled mask (group 0) is read by a forward group through a
// reshape (group 1) and by a backward op in no group. Each reader gets its
// own copy of the mask's computation in its shape and group (the backward
// op starts group 2); the original, read by nothing, is gone.
// A constant in the reader's shape goes beside the original, at the top:
// defined after a matmul, it would keep the reader's group from being the
// matmul's epilogue.
// CHECK-LABEL: func.func @mask_read_twice
// CHECK-NEXT: %[[FLAT_ONES:.*]] = kgraph.constant dense<1.000000e+00> : tensor<6x8xf32>
// CHECK-NEXT: %[[ONES:.*]] = kgraph.constant dense<1.000000e+00> : tensor<2x3x8xf32>
// CHECK-NEXT: %[[KEEP:.*]] = kgraph.constant dense<0.899999976> : tensor<f32>
// CHECK: %{{.*}}, %[[M1:.*]] = kgraph.dropout %[[FLAT_ONES]], %arg3 {kgraph.fusion = 1 : i64, p = 1.000000e-01 : f64, stream = 3 : i64} : tensor<6x8xf32>
// CHECK: %[[F1:.*]] = kgraph.cast %[[M1]] {kgraph.fusion = 1 : i64}
// CHECK: %[[S1:.*]] = kgraph.div %[[F1]], %[[KEEP]] {kgraph.fusion = 1 : i64}
// CHECK: kgraph.mul %arg0, %[[S1]] {kgraph.fusion = 1 : i64}
// CHECK: kgraph.matmul
// CHECK: %{{.*}}, %[[M2:.*]] = kgraph.dropout %[[ONES]], %arg3 {kgraph.fusion = 2 : i64, p = 1.000000e-01 : f64, stream = 3 : i64} : tensor<2x3x8xf32>
// CHECK: %[[F2:.*]] = kgraph.cast %[[M2]] {kgraph.fusion = 2 : i64}
// CHECK: %[[S2:.*]] = kgraph.div %[[F2]], %[[KEEP]] {kgraph.fusion = 2 : i64}
// CHECK: kgraph.mul %arg2, %[[S2]] {kgraph.fusion = 2 : i64}
// CHECK-NOT: kgraph.dropout
// CHECK: return
func.func @mask_read_twice(%x: tensor<6x8xf32>, %w: tensor<8x8xf32>, %g: tensor<2x3x8xf32>, %seed: tensor<i64>) -> (tensor<6x8xf32>, tensor<2x3x8xf32>) {
  %ones = kgraph.constant dense<1.0> : tensor<2x3x8xf32>
  %keep = kgraph.constant dense<0.9> : tensor<f32>
  %d, %m = kgraph.dropout %ones, %seed {kgraph.fusion = 0 : i64, p = 0.1 : f64, stream = 3 : i64} : tensor<2x3x8xf32>, tensor<i64> -> tensor<2x3x8xf32>, tensor<2x3x8xi1>
  %mf = kgraph.cast %m {kgraph.fusion = 0 : i64} : tensor<2x3x8xi1> -> tensor<2x3x8xf32>
  %scaled = kgraph.div %mf, %keep {kgraph.fusion = 0 : i64} : tensor<2x3x8xf32>, tensor<f32>
  %flat = kgraph.reshape %scaled : tensor<2x3x8xf32> -> tensor<6x8xf32>
  %y = kgraph.mul %x, %flat {kgraph.fusion = 1 : i64} : tensor<6x8xf32>, tensor<6x8xf32>
  %z = kgraph.tanh %y {kgraph.fusion = 1 : i64} : tensor<6x8xf32>
  %p = kgraph.matmul %z, %w : tensor<6x8xf32>, tensor<8x8xf32> -> tensor<6x8xf32>
  %dg = kgraph.mul %g, %scaled : tensor<2x3x8xf32>, tensor<2x3x8xf32>
  return %p, %dg : tensor<6x8xf32>, tensor<2x3x8xf32>
}

// Two readers in one group share one copy, made before the first. A reader
// that is no elementwise op (the reduction) keeps the original.
// CHECK-LABEL: func.func @one_copy_per_group
// CHECK: kgraph.dropout {{.*}} {kgraph.fusion = 0 : i64
// CHECK: kgraph.reduce_sum
// CHECK: kgraph.dropout {{.*}} {kgraph.fusion = 1 : i64
// CHECK-NOT: kgraph.dropout
// CHECK: return
func.func @one_copy_per_group(%x: tensor<4x4xf32>, %seed: tensor<i64>) -> (tensor<4x4xf32>, tensor<4xf32>) {
  %ones = kgraph.constant dense<1.0> : tensor<4x4xf32>
  %d, %m = kgraph.dropout %ones, %seed {kgraph.fusion = 0 : i64, p = 0.5 : f64} : tensor<4x4xf32>, tensor<i64> -> tensor<4x4xf32>, tensor<4x4xi1>
  %mf = kgraph.cast %m {kgraph.fusion = 0 : i64} : tensor<4x4xi1> -> tensor<4x4xf32>
  %r = kgraph.reduce_sum %mf, [1] : tensor<4x4xf32> -> tensor<4xf32>
  %a = kgraph.mul %x, %mf {kgraph.fusion = 1 : i64} : tensor<4x4xf32>, tensor<4x4xf32>
  %b = kgraph.add %a, %mf {kgraph.fusion = 1 : i64} : tensor<4x4xf32>, tensor<4x4xf32>
  return %b, %r : tensor<4x4xf32>, tensor<4xf32>
}

// A dropout of an argument is not made of constants and seeds alone: its
// mask stays where it is computed, and so do values read in their own group.
// CHECK-LABEL: func.func @kept
// CHECK: %{{.*}}, %[[M:.*]] = kgraph.dropout %arg0, %arg1 {kgraph.fusion = 0 : i64
// CHECK: %[[F:.*]] = kgraph.cast %[[M]] {kgraph.fusion = 0 : i64}
// CHECK: kgraph.mul %[[F]], %{{.*}} {kgraph.fusion = 1 : i64}
// CHECK-NOT: kgraph.dropout
func.func @kept(%x: tensor<4x4xf32>, %seed: tensor<i64>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %d, %m = kgraph.dropout %x, %seed {kgraph.fusion = 0 : i64, p = 0.5 : f64} : tensor<4x4xf32>, tensor<i64> -> tensor<4x4xf32>, tensor<4x4xi1>
  %mf = kgraph.cast %m {kgraph.fusion = 0 : i64} : tensor<4x4xi1> -> tensor<4x4xf32>
  %a = kgraph.add %d, %mf {kgraph.fusion = 0 : i64} : tensor<4x4xf32>, tensor<4x4xf32>
  %r = kgraph.reduce_sum %a, [1] {keepdim = true} : tensor<4x4xf32> -> tensor<4x1xf32>
  %b = kgraph.mul %mf, %r {kgraph.fusion = 1 : i64} : tensor<4x4xf32>, tensor<4x1xf32>
  %c = kgraph.exp %b {kgraph.fusion = 1 : i64} : tensor<4x4xf32>
  return %a, %c : tensor<4x4xf32>, tensor<4x4xf32>
}

// A GELU's f32 input (a bf16 product widened, plus a bias), which its
// backward reads in a later group: that group computes it again from the
// product, which the product's epilogue then stores in bf16, instead of
// reading 4 bytes per element that the forward stored. The copy reads the
// product through a reshape in the reader's shape; the bias broadcasts
// alike in both.
// CHECK-LABEL: func.func @gelu_input_from_bf16_product
// CHECK: %[[P:.*]] = kgraph.matmul
// CHECK: %[[H:.*]] = kgraph.add %arg2, %{{.*}} {kgraph.fusion = 0 : i64}
// CHECK: kgraph.gelu %[[H]] {kgraph.fusion = 0 : i64}
// CHECK: %[[FLAT:.*]] = kgraph.reshape %[[P]] : tensor<4x128xbf16> -> tensor<2x2x128xbf16>
// CHECK-NEXT: %[[WIDE:.*]] = kgraph.cast %[[FLAT]] {kgraph.fusion = 1 : i64} : tensor<2x2x128xbf16> -> tensor<2x2x128xf32>
// CHECK-NEXT: %[[H2:.*]] = kgraph.add %arg2, %[[WIDE]] {kgraph.fusion = 1 : i64} : tensor<128xf32>, tensor<2x2x128xf32>
// CHECK-NEXT: kgraph.gelu_backward %arg3, %[[H2]] {kgraph.fusion = 1 : i64}
func.func @gelu_input_from_bf16_product(%x: tensor<4x8xbf16>, %w: tensor<8x128xbf16>, %bias: tensor<128xf32>, %g: tensor<2x2x128xf32>) -> (tensor<4x128xf32>, tensor<2x2x128xf32>) {
  %p = kgraph.matmul %x, %w : tensor<4x8xbf16>, tensor<8x128xbf16> -> tensor<4x128xbf16>
  %wide = kgraph.cast %p {kgraph.fusion = 0 : i64} : tensor<4x128xbf16> -> tensor<4x128xf32>
  %h = kgraph.add %bias, %wide {kgraph.fusion = 0 : i64} : tensor<128xf32>, tensor<4x128xf32>
  %y = kgraph.gelu %h {kgraph.fusion = 0 : i64} : tensor<4x128xf32>
  %hr = kgraph.reshape %h : tensor<4x128xf32> -> tensor<2x2x128xf32>
  %dh = kgraph.gelu_backward %g, %hr {kgraph.fusion = 1 : i64} : tensor<2x2x128xf32>
  return %y, %dh : tensor<4x128xf32>, tensor<2x2x128xf32>
}

// A layer norm's output (x_hat * gamma + beta), which the residual add in
// another group reads, with x_hat in HBM anyway (the backward reads it):
// recomputing it there would save its store but read as many bytes, and
// make the forward pass's latency-bound groups longer (the BERT-base step
// measured 20.13 ms against 19.80). And a value that a matmul reads as well
// stays in HBM whatever its other readers do: so no copy for them either.
// CHECK-LABEL: func.func @kept_in_hbm
// CHECK: %[[Y:.*]] = kgraph.add %{{.*}}, %arg2 {kgraph.fusion = 0 : i64}
// CHECK: kgraph.add %[[Y]], %arg3 {kgraph.fusion = 1 : i64}
// CHECK: %[[T:.*]] = kgraph.cast %arg5 {kgraph.fusion = 2 : i64}
// CHECK: kgraph.matmul %[[T]]
// CHECK: kgraph.exp %[[T]] {kgraph.fusion = 3 : i64}
func.func @kept_in_hbm(%xhat: tensor<4x8xf32>, %gamma: tensor<8xf32>, %beta: tensor<8xf32>, %r: tensor<4x8xf32>, %w: tensor<8x8xf32>, %xb: tensor<4x8xbf16>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %s = kgraph.mul %xhat, %gamma {kgraph.fusion = 0 : i64} : tensor<4x8xf32>, tensor<8xf32>
  %y = kgraph.add %s, %beta {kgraph.fusion = 0 : i64} : tensor<4x8xf32>, tensor<8xf32>
  %sum = kgraph.add %y, %r {kgraph.fusion = 1 : i64} : tensor<4x8xf32>, tensor<4x8xf32>
  %t = kgraph.cast %xb {kgraph.fusion = 2 : i64} : tensor<4x8xbf16> -> tensor<4x8xf32>
  %p = kgraph.matmul %t, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %e = kgraph.exp %t {kgraph.fusion = 3 : i64} : tensor<4x8xf32>
  return %xhat, %sum, %p, %e : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}
