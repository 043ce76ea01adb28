// RUN: kiln-opt %s --kgraph-plan-tiles | FileCheck %s

// Attention's scores and their softmax: the groups joined by the row max
// and the row sum are one row chain (0) over the scores' last dimension,
// which the batched product computes on its output tiles.
// CHECK-LABEL: func.func @scores_softmax
// CHECK-SAME: kgraph.row_chains = [{from = 3 : i64, shape = array<i64: 2, 4, 128, 128>}]
// CHECK: kgraph.matmul %arg0, %arg1 {kgraph.chain_epilogue = 0 : i64
// CHECK: kgraph.cast %{{.*}} {kgraph.fusion = 0 : i64, kgraph.row_chain = 0 : i64}
// CHECK: kgraph.reduce_max %{{.*}}, [3] {keepdim = true, kgraph.row_chain = 0 : i64}
// CHECK: kgraph.reduce_sum %{{.*}}, [3] {keepdim = true, kgraph.row_chain = 0 : i64}
// CHECK: kgraph.div %{{.*}}, %{{.*}} {kgraph.fusion = 2 : i64, kgraph.row_chain = 0 : i64}
func.func @scores_softmax(%q: tensor<2x4x128x64xbf16>, %k: tensor<2x4x64x128xbf16>) -> tensor<2x4x128x128xf32> {
  %x = kgraph.matmul %q, %k : tensor<2x4x128x64xbf16>, tensor<2x4x64x128xbf16> -> tensor<2x4x128x128xbf16>
  %xf = kgraph.cast %x {kgraph.fusion = 0 : i64} : tensor<2x4x128x128xbf16> -> tensor<2x4x128x128xf32>
  %m = kgraph.reduce_max %xf, [3] {keepdim = true} : tensor<2x4x128x128xf32> -> tensor<2x4x128x1xf32>
  %d = kgraph.sub %xf, %m {kgraph.fusion = 1 : i64} : tensor<2x4x128x128xf32>, tensor<2x4x128x1xf32>
  %e = kgraph.exp %d {kgraph.fusion = 1 : i64} : tensor<2x4x128x128xf32>
  %z = kgraph.reduce_sum %e, [3] {keepdim = true} : tensor<2x4x128x128xf32> -> tensor<2x4x128x1xf32>
  %p = kgraph.div %e, %z {kgraph.fusion = 2 : i64} : tensor<2x4x128x128xf32>, tensor<2x4x128x1xf32>
  return %p : tensor<2x4x128x128xf32>
}

// The same softmax when the scores are also returned: the chain is a loop
// nest of its own, not the product's epilogue.
// CHECK-LABEL: func.func @scores_returned
// CHECK-SAME: kgraph.row_chains = [{from = 3 : i64
// CHECK-NOT: kgraph.chain_epilogue
// CHECK: kgraph.reduce_max %{{.*}}, [3] {keepdim = true, kgraph.row_chain = 0 : i64}
// CHECK: return
func.func @scores_returned(%q: tensor<2x4x128x64xbf16>, %k: tensor<2x4x64x128xbf16>) -> (tensor<2x4x128x128xf32>, tensor<2x4x128x128xbf16>) {
  %x = kgraph.matmul %q, %k : tensor<2x4x128x64xbf16>, tensor<2x4x64x128xbf16> -> tensor<2x4x128x128xbf16>
  %xf = kgraph.cast %x {kgraph.fusion = 0 : i64} : tensor<2x4x128x128xbf16> -> tensor<2x4x128x128xf32>
  %m = kgraph.reduce_max %xf, [3] {keepdim = true} : tensor<2x4x128x128xf32> -> tensor<2x4x128x1xf32>
  %d = kgraph.sub %xf, %m {kgraph.fusion = 1 : i64} : tensor<2x4x128x128xf32>, tensor<2x4x128x1xf32>
  %e = kgraph.exp %d {kgraph.fusion = 1 : i64} : tensor<2x4x128x128xf32>
  %z = kgraph.reduce_sum %e, [3] {keepdim = true} : tensor<2x4x128x128xf32> -> tensor<2x4x128x1xf32>
  %p = kgraph.div %e, %z {kgraph.fusion = 2 : i64} : tensor<2x4x128x128xf32>, tensor<2x4x128x1xf32>
  return %p, %x : tensor<2x4x128x128xf32>, tensor<2x4x128x128xbf16>
}

// A layer norm's parameter gradients after a product: the group reading
// the product (0) is its epilogue; the group that only the scale
// gradient's row sum reads joins it, and the epilogue folds both row sums;
// the reshape of x_hat, which stands after the product, is lowered before
// it.
// CHECK-LABEL: func.func @parameter_gradients
// CHECK: kgraph.matmul %arg0, %arg1 {kgraph.epilogue = 0 : i64, kgraph.product = 0 : i64}
// CHECK: kgraph.reshape %arg3 {kgraph.early_for = array<i64: 0>}
// CHECK: kgraph.mul %{{.*}}, %{{.*}} {kgraph.fusion = 1 : i64, kgraph.joins_epilogue = 0 : i64}
// CHECK: kgraph.cast %{{.*}} {kgraph.fusion = 1 : i64, kgraph.joins_epilogue = 0 : i64}
// CHECK: kgraph.matmul %{{.*}}, %{{.*}} {kgraph.sum_in_epilogue = 0 : i64}
// CHECK: kgraph.matmul %{{.*}}, %{{.*}} {kgraph.sum_in_epilogue = 0 : i64}
func.func @parameter_gradients(%g: tensor<200x64xbf16>, %w: tensor<64x256xbf16>, %r: tensor<200x256xf32>, %xhat: tensor<2x100x256xf32>) -> (tensor<200x256xf32>, tensor<1x256xf32>, tensor<1x256xf32>) {
  %ones = kgraph.constant dense<1.0> : tensor<1x200xbf16>
  %p = kgraph.matmul %g, %w : tensor<200x64xbf16>, tensor<64x256xbf16> -> tensor<200x256xbf16>
  %pf = kgraph.cast %p {kgraph.fusion = 0 : i64} : tensor<200x256xbf16> -> tensor<200x256xf32>
  %dy = kgraph.add %pf, %r {kgraph.fusion = 0 : i64} : tensor<200x256xf32>, tensor<200x256xf32>
  %t = kgraph.tanh %dy {kgraph.fusion = 0 : i64} : tensor<200x256xf32>
  %xr = kgraph.reshape %xhat : tensor<2x100x256xf32> -> tensor<200x256xf32>
  %dyx = kgraph.mul %dy, %xr {kgraph.fusion = 1 : i64} : tensor<200x256xf32>, tensor<200x256xf32>
  %dyxb = kgraph.cast %dyx {kgraph.fusion = 1 : i64} : tensor<200x256xf32> -> tensor<200x256xbf16>
  %sg = kgraph.matmul %ones, %dyxb : tensor<1x200xbf16>, tensor<200x256xbf16> -> tensor<1x256xbf16>
  %sgf = kgraph.cast %sg : tensor<1x256xbf16> -> tensor<1x256xf32>
  %dyb = kgraph.cast %dy : tensor<200x256xf32> -> tensor<200x256xbf16>
  %sb = kgraph.matmul %ones, %dyb : tensor<1x200xbf16>, tensor<200x256xbf16> -> tensor<1x256xbf16>
  %sbf = kgraph.cast %sb : tensor<1x256xbf16> -> tensor<1x256xf32>
  return %t, %sgf, %sbf : tensor<200x256xf32>, tensor<1x256xf32>, tensor<1x256xf32>
}

// A convolution computes the group reading its output on each block as it
// leaves PSUM: a bias and ReLU (the bias's reshape, which stands after the
// convolution, is lowered before it), and ReLU's backward on an input
// gradient (here a product with a tensor of its shape). A convolution whose output another group reads too, or whose
// group reads a value computed after it, keeps its plain evacuation.
// CHECK-LABEL: func.func @convolution_epilogues
// CHECK: kgraph.conv %arg0, %arg1 {{{.*}}kgraph.epilogue = 0 : i64, kgraph.product = [[BIASED:[0-9]+]] : i64
// CHECK: kgraph.reshape %arg2 {kgraph.early_for = array<i64: [[BIASED]]>}
// CHECK: kgraph.conv_input_grad %arg3, %arg1 {{{.*}}kgraph.epilogue = 2 : i64
// CHECK: kgraph.conv %arg0, %arg1 {dilation
// CHECK-NOT: kgraph.epilogue
// CHECK: kgraph.conv %arg4, %arg1 {dilation
// CHECK-NOT: kgraph.epilogue
// CHECK: return
func.func @convolution_epilogues(%x: tensor<2x3x6x6xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4xf32>, %dy: tensor<2x4x6x6xf32>, %x2: tensor<2x3x6x6xf32>) -> (tensor<2x4x6x6xf32>, tensor<2x3x6x6xf32>, tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>) {
  %y = kgraph.conv %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32> -> tensor<2x4x6x6xf32>
  %br = kgraph.reshape %b : tensor<4xf32> -> tensor<1x4x1x1xf32>
  %yb = kgraph.add %y, %br {kgraph.fusion = 0 : i64} : tensor<2x4x6x6xf32>, tensor<1x4x1x1xf32>
  %yr = kgraph.relu %yb {kgraph.fusion = 0 : i64} : tensor<2x4x6x6xf32>
  %gx = kgraph.conv_input_grad %dy, %w {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : tensor<2x4x6x6xf32>, tensor<4x3x3x3xf32> -> tensor<2x3x6x6xf32>
  %gr = kgraph.mul %gx, %x {kgraph.fusion = 2 : i64} : tensor<2x3x6x6xf32>, tensor<2x3x6x6xf32>
  %y2 = kgraph.conv %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 2, 2>, dilation = array<i64: 2, 2>} : tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32> -> tensor<2x4x6x6xf32>
  %a = kgraph.neg %y2 {kgraph.fusion = 3 : i64} : tensor<2x4x6x6xf32>
  %c = kgraph.exp %y2 {kgraph.fusion = 4 : i64} : tensor<2x4x6x6xf32>
  %y3 = kgraph.conv %x2, %w {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32> -> tensor<2x4x6x6xf32>
  %later = kgraph.exp %yr : tensor<2x4x6x6xf32>
  %d = kgraph.add %y3, %later {kgraph.fusion = 5 : i64} : tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>
  return %yr, %gr, %a, %c, %d : tensor<2x4x6x6xf32>, tensor<2x3x6x6xf32>, tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>
}
