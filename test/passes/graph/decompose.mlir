// RUN: kiln-opt %s --kgraph-decompose | FileCheck %s

// CHECK-LABEL: func.func @linear
// CHECK: %[[X:.*]] = kgraph.reshape %arg0 : tensor<2x3x8xf32> -> tensor<6x8xf32>
// CHECK: %[[Y:.*]] = kgraph.matmul %[[X]], %arg1 {transpose_rhs = true}
// CHECK: %[[B:.*]] = kgraph.reshape %arg2 : tensor<5xf32> -> tensor<1x5xf32>
// CHECK: %[[S:.*]] = kgraph.add %[[Y]], %[[B]]
// CHECK: kgraph.reshape %[[S]] : tensor<6x5xf32> -> tensor<2x3x5xf32>
// CHECK-NOT: kgraph.linear
func.func @linear(%x: tensor<2x3x8xf32>, %w: tensor<5x8xf32>, %b: tensor<5xf32>) -> tensor<2x3x5xf32> {
  %0 = kgraph.linear %x, %w, %b : tensor<2x3x8xf32>, tensor<5x8xf32>, tensor<5xf32> -> tensor<2x3x5xf32>
  return %0 : tensor<2x3x5xf32>
}

// Softmax: the max-subtracted exponentials over their sum.
// CHECK-LABEL: func.func @softmax
// CHECK: %[[M:.*]] = kgraph.reduce_max %arg0, [1] {keepdim = true}
// CHECK: %[[D:.*]] = kgraph.sub %arg0, %[[M]]
// CHECK: %[[E:.*]] = kgraph.exp %[[D]]
// CHECK: %[[S:.*]] = kgraph.reduce_sum %[[E]], [1] {keepdim = true}
// CHECK: kgraph.div %[[E]], %[[S]]
func.func @softmax(%x: tensor<4x10xf32>) -> tensor<4x10xf32> {
  %0 = kgraph.softmax %x {dim = 1 : i64} : tensor<4x10xf32>
  return %0 : tensor<4x10xf32>
}

// Embedding stays: the tile phase looks rows up with gather DMAs.
// CHECK-LABEL: func.func @embedding
// CHECK-NEXT: kgraph.embedding %arg0, %arg1 : tensor<50x16xf32>, tensor<2x3xi64> -> tensor<2x3x16xf32>
// CHECK-NEXT: return
func.func @embedding(%w: tensor<50x16xf32>, %ids: tensor<2x3xi64>) -> tensor<2x3x16xf32> {
  %0 = kgraph.embedding %w, %ids : tensor<50x16xf32>, tensor<2x3xi64> -> tensor<2x3x16xf32>
  return %0 : tensor<2x3x16xf32>
}

// Embedding's gradient: the one-hot matrix, transposed, times the output
// gradient's rows. With a padding row, those tokens' gradient rows are
// zeroed ([6, 16]) rather than their one-hot rows ([6, 50]); without one
// (padding_idx -1, the default) there is no mask at all.
// CHECK-LABEL: func.func @embedding_backward
// CHECK: %[[H:.*]] = kgraph.cast %{{.*}} : tensor<6x50xi1> -> tensor<6x50xf32>
// CHECK: kgraph.compare "ne"
// CHECK: %[[G:.*]] = kgraph.mul %{{.*}}, %{{.*}} : tensor<6x16xf32>, tensor<6x1xf32>
// CHECK: kgraph.matmul %[[H]], %[[G]] {transpose_lhs = true} : tensor<6x50xf32>, tensor<6x16xf32> -> tensor<50x16xf32>
func.func @embedding_backward(%g: tensor<2x3x16xf32>, %ids: tensor<2x3xi64>) -> tensor<50x16xf32> {
  %0 = kgraph.embedding_backward %g, %ids {num_weights = 50, padding_idx = 0} : tensor<2x3x16xf32>, tensor<2x3xi64> -> tensor<50x16xf32>
  return %0 : tensor<50x16xf32>
}
// CHECK-LABEL: func.func @embedding_backward_without_padding
// CHECK-NOT: kgraph.compare "ne"
// CHECK-NOT: kgraph.mul
// CHECK: kgraph.matmul %{{.*}}, %{{.*}} {transpose_lhs = true}
func.func @embedding_backward_without_padding(%g: tensor<2x3x16xf32>, %ids: tensor<2x3xi64>) -> tensor<50x16xf32> {
  %0 = kgraph.embedding_backward %g, %ids {num_weights = 50} : tensor<2x3x16xf32>, tensor<2x3xi64> -> tensor<50x16xf32>
  return %0 : tensor<50x16xf32>
}

// nll_loss: each target looks its class id up in the ids [C, 1] (an
// embedding, whose gather DMA refuses a target outside [0, C)) where the
// targets are defined, before the log-softmax; the one-hot rows
// compare the ids looked up with the ids, and the loss is their masked
// product with the log-probabilities. An ignored target (-100) looks up
// class 0 instead: the targets times the 0/1 mask.
// CHECK-LABEL: func.func @nll_loss
// CHECK: %[[KEEP:.*]] = kgraph.compare "ne", %arg1
// CHECK: %[[MASK:.*]] = kgraph.cast %[[KEEP]] : tensor<8xi1> -> tensor<8xi64>
// CHECK: %[[LOOKED:.*]] = kgraph.mul %arg1, %[[MASK]] : tensor<8xi64>, tensor<8xi64>
// CHECK: %[[IDS:.*]] = kgraph.iota {dim = 0 : i64} : tensor<4xf32>
// CHECK: %[[TABLE:.*]] = kgraph.reshape %[[IDS]] : tensor<4xf32> -> tensor<4x1xf32>
// CHECK: %[[CHECKED:.*]] = kgraph.embedding %[[TABLE]], %[[LOOKED]] : tensor<4x1xf32>, tensor<8xi64> -> tensor<8x1xf32>
// CHECK: kgraph.reduce_max %arg0
// CHECK: %[[ROW:.*]] = kgraph.reshape %[[IDS]] : tensor<4xf32> -> tensor<1x4xf32>
// CHECK: %[[C:.*]] = kgraph.broadcast %[[CHECKED]]
// CHECK: %[[R:.*]] = kgraph.broadcast %[[ROW]]
// CHECK: kgraph.compare "eq", %[[C]], %[[R]] : tensor<8x4xf32>, tensor<8x4xf32>
// CHECK-NOT: kgraph.nll_loss
func.func @nll_loss(%x: tensor<8x4xf32>, %y: tensor<8xi64>) -> tensor<f32> {
  %lp = kgraph.log_softmax %x {dim = 1} : tensor<8x4xf32>
  %loss, %total = kgraph.nll_loss %lp, %y : tensor<8x4xf32>, tensor<8xi64> -> tensor<f32>, tensor<f32>
  return %loss : tensor<f32>
}
// An ignored class within [0, C) is looked up as it is.
// CHECK-LABEL: func.func @nll_loss_ignoring_a_class
// CHECK-NOT: kgraph.mul
// CHECK: kgraph.embedding %{{.*}}, %arg1 : tensor<4x1xf32>, tensor<8xi64> -> tensor<8x1xf32>
func.func @nll_loss_ignoring_a_class(%lp: tensor<8x4xf32>, %y: tensor<8xi64>) -> tensor<f32> {
  %loss, %total = kgraph.nll_loss %lp, %y {ignore_index = 0 : i64} : tensor<8x4xf32>, tensor<8xi64> -> tensor<f32>, tensor<f32>
  return %loss : tensor<f32>
}

// A 2-D iota is a 1-D one, reshaped and broadcast.
// CHECK-LABEL: func.func @iota
// CHECK: %[[I:.*]] = kgraph.iota {dim = 0 : i64} : tensor<7xf32>
// CHECK: %[[R:.*]] = kgraph.reshape %[[I]] : tensor<7xf32> -> tensor<1x7xf32>
// CHECK: kgraph.broadcast %[[R]] : tensor<1x7xf32> -> tensor<3x7xf32>
func.func @iota() -> tensor<3x7xf32> {
  %0 = kgraph.iota {dim = 1 : i64} : tensor<3x7xf32>
  return %0 : tensor<3x7xf32>
}

// CHECK-LABEL: func.func @mean
// CHECK: %[[S:.*]] = kgraph.reduce_sum %arg0, [1]
// CHECK: %[[K:.*]] = kgraph.constant dense<2.500000e-01> : tensor<f32>
// CHECK: kgraph.mul %[[S]], %[[K]]
func.func @mean(%x: tensor<3x4xf32>) -> tensor<3xf32> {
  %0 = kgraph.reduce_mean %x, [1] : tensor<3x4xf32> -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// A layer norm's backward, one op per statement in a fixed order: the
// graph (and so the artifact) must not depend on the order in which the
// compiler that built Kiln evaluates a call's arguments (GCC and clang
// differ; a nested `sub(sub(...), mul(...))` made them apart).
// CHECK-LABEL: func.func @layer_norm_backward
// CHECK: %[[XHAT:.*]] = kgraph.mul %{{.*}}, %arg3
// CHECK: %[[DXHAT:.*]] = kgraph.mul %arg0, %arg4
// CHECK: %[[SUMD:.*]] = kgraph.reduce_sum %[[DXHAT]], [1] {keepdim = true}
// CHECK: %[[MEAND:.*]] = kgraph.mul %[[SUMD]]
// CHECK: %[[DX:.*]] = kgraph.mul %[[DXHAT]], %[[XHAT]]
// CHECK: %[[SUMDX:.*]] = kgraph.reduce_sum %[[DX]], [1] {keepdim = true}
// CHECK: %[[MEANDX:.*]] = kgraph.mul %[[SUMDX]]
// CHECK-NEXT: %[[CENTRED:.*]] = kgraph.sub %[[DXHAT]], %[[MEAND]]
// CHECK-NEXT: %[[ALONG:.*]] = kgraph.mul %[[XHAT]], %[[MEANDX]]
// CHECK-NEXT: %[[DIFF:.*]] = kgraph.sub %[[CENTRED]], %[[ALONG]]
// CHECK-NEXT: kgraph.mul %arg3, %[[DIFF]]
func.func @layer_norm_backward(%g: tensor<4x8xf32>, %x: tensor<4x8xf32>, %mean: tensor<4x1xf32>, %rstd: tensor<4x1xf32>, %w: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %dx, %dw, %db = kgraph.layer_norm_backward %g, %x, %mean, %rstd, %w {normalized_rank = 1 : i64} : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>, tensor<8xf32> -> tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
  return %dx, %dw, %db : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
}
