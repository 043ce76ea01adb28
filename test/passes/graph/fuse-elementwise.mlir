// RUN: kiln-opt %s --kgraph-fuse-elementwise | FileCheck %s

// A chain of one shape is one group; the reduction ends it.
// CHECK-LABEL: func.func @chain
// CHECK: kgraph.mul {{.*}} {kgraph.fusion = 0 : i64}
// CHECK: kgraph.add {{.*}} {kgraph.fusion = 0 : i64}
// CHECK: kgraph.tanh {{.*}} {kgraph.fusion = 0 : i64}
// CHECK: kgraph.reduce_sum
// CHECK-NOT: kgraph.fusion
func.func @chain(%x: tensor<8x300xf32>, %b: tensor<300xf32>) -> tensor<8xf32> {
  %0 = kgraph.mul %x, %x : tensor<8x300xf32>, tensor<8x300xf32>
  %1 = kgraph.add %0, %b : tensor<8x300xf32>, tensor<300xf32>
  %2 = kgraph.tanh %1 : tensor<8x300xf32>
  %3 = kgraph.reduce_sum %2, [1] : tensor<8x300xf32> -> tensor<8xf32>
  return %3 : tensor<8xf32>
}

// The exp joins the first group although a reduction of a group value
// stands between them (the group is computed where its last op stands):
// nothing the group needs reads the reduction, so it moves below the exp,
// where the tile phase folds it into the group's loop nest.
// CHECK-LABEL: func.func @made_room
// CHECK: %[[A:.*]] = kgraph.neg %arg0 {kgraph.fusion = 0 : i64}
// CHECK: kgraph.abs %[[A]] {kgraph.fusion = 0 : i64}
// CHECK: kgraph.exp %[[A]] {kgraph.fusion = 0 : i64}
// CHECK: kgraph.reduce_max %[[A]]
func.func @made_room(%x: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>) {
  %0 = kgraph.neg %x : tensor<4x4xf32>
  %1 = kgraph.abs %0 : tensor<4x4xf32>
  %2 = kgraph.reduce_max %0, [1] : tensor<4x4xf32> -> tensor<4xf32>
  %3 = kgraph.exp %0 : tensor<4x4xf32>
  return %1, %2, %3 : tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>
}

// Here the sub needs the reduction (a softmax's max): it cannot join the
// group that the reduction reads, and nothing moves.
// CHECK-LABEL: func.func @blocked
// CHECK: %[[A:.*]] = kgraph.neg %arg0 {kgraph.fusion = 0 : i64}
// CHECK: kgraph.abs %[[A]] {kgraph.fusion = 0 : i64}
// CHECK: %[[M:.*]] = kgraph.reduce_max %[[A]]
// CHECK: kgraph.sub %[[A]], %{{.*}} :
func.func @blocked(%x: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %0 = kgraph.neg %x : tensor<4x4xf32>
  %1 = kgraph.abs %0 : tensor<4x4xf32>
  %2 = kgraph.reduce_max %0, [1] {keepdim = true} : tensor<4x4xf32> -> tensor<4x1xf32>
  %3 = kgraph.sub %0, %2 : tensor<4x4xf32>, tensor<4x1xf32>
  return %1, %3 : tensor<4x4xf32>, tensor<4x4xf32>
}

// AdamW's update: chains that start at different arguments (weight decay,
// the two moments) meet, and every op joins one group, merging the groups
// of its operands: p, g, m and v are read once and p', m', v' written once.
// CHECK-LABEL: func.func @adamw
// CHECK-COUNT-12: {kgraph.fusion = 0 : i64}
// CHECK-NOT: kgraph.fusion
func.func @adamw(%p: tensor<64x96xf32>, %g: tensor<64x96xf32>, %m: tensor<64x96xf32>, %v: tensor<64x96xf32>, %lr: tensor<f32>) -> (tensor<64x96xf32>, tensor<64x96xf32>, tensor<64x96xf32>) {
  %b1 = kgraph.constant dense<0.9> : tensor<f32>
  %c1 = kgraph.constant dense<0.1> : tensor<f32>
  %b2 = kgraph.constant dense<0.999> : tensor<f32>
  %c2 = kgraph.constant dense<0.001> : tensor<f32>
  %decay = kgraph.constant dense<0.99> : tensor<f32>
  %0 = kgraph.mul %p, %decay : tensor<64x96xf32>, tensor<f32>
  %1 = kgraph.mul %m, %b1 : tensor<64x96xf32>, tensor<f32>
  %2 = kgraph.mul %g, %c1 : tensor<64x96xf32>, tensor<f32>
  %3 = kgraph.add %1, %2 : tensor<64x96xf32>, tensor<64x96xf32>
  %4 = kgraph.mul %v, %b2 : tensor<64x96xf32>, tensor<f32>
  %5 = kgraph.mul %g, %g : tensor<64x96xf32>, tensor<64x96xf32>
  %6 = kgraph.mul %5, %c2 : tensor<64x96xf32>, tensor<f32>
  %7 = kgraph.add %4, %6 : tensor<64x96xf32>, tensor<64x96xf32>
  %8 = kgraph.sqrt %7 : tensor<64x96xf32>
  %9 = kgraph.div %3, %8 : tensor<64x96xf32>, tensor<64x96xf32>
  %10 = kgraph.mul %9, %lr : tensor<64x96xf32>, tensor<f32>
  %11 = kgraph.sub %0, %10 : tensor<64x96xf32>, tensor<64x96xf32>
  return %11, %3, %7 : tensor<64x96xf32>, tensor<64x96xf32>, tensor<64x96xf32>
}

// The same update with its gradient unpacked from a bucket of all-reduced
// gradients (kgraph-data-parallel): a flat slice seen in the parameter's
// shape. The reshape stays where it is, so every op computes in [64, 96]
// beside the parameter and its state and the update is one group; sunk, it
// took the gradient's ops into [6144] and split the update in two shapes.
// CHECK-LABEL: func.func @adamw_from_bucket
// CHECK: %[[G:.*]] = kgraph.reshape %{{.*}} : tensor<6144xf32> -> tensor<64x96xf32>
// CHECK-NOT: kgraph.reshape
// CHECK-COUNT-8: {kgraph.fusion = 0 : i64} : tensor<64x96xf32>
// CHECK-NOT: kgraph.fusion = 1
func.func @adamw_from_bucket(%p: tensor<64x96xf32>, %bucket: tensor<6240xf32>, %m: tensor<64x96xf32>, %v: tensor<64x96xf32>, %lr: tensor<f32>) -> (tensor<64x96xf32>, tensor<64x96xf32>, tensor<64x96xf32>) {
  %b1 = kgraph.constant dense<0.9> : tensor<f32>
  %c1 = kgraph.constant dense<0.1> : tensor<f32>
  %b2 = kgraph.constant dense<0.999> : tensor<f32>
  %c2 = kgraph.constant dense<0.001> : tensor<f32>
  %reduced = kgraph.all_reduce %bucket {reduction = "mean"} : tensor<6240xf32>
  %flat = kgraph.slice %reduced {limit = array<i64: 6144>, start = array<i64: 0>, stride = array<i64: 1>} : tensor<6240xf32> -> tensor<6144xf32>
  %g = kgraph.reshape %flat : tensor<6144xf32> -> tensor<64x96xf32>
  %1 = kgraph.mul %m, %b1 : tensor<64x96xf32>, tensor<f32>
  %2 = kgraph.mul %g, %c1 : tensor<64x96xf32>, tensor<f32>
  %3 = kgraph.add %1, %2 : tensor<64x96xf32>, tensor<64x96xf32>
  %4 = kgraph.mul %v, %b2 : tensor<64x96xf32>, tensor<f32>
  %5 = kgraph.mul %g, %g : tensor<64x96xf32>, tensor<64x96xf32>
  %6 = kgraph.mul %5, %c2 : tensor<64x96xf32>, tensor<f32>
  %7 = kgraph.add %4, %6 : tensor<64x96xf32>, tensor<64x96xf32>
  %8 = kgraph.sqrt %7 : tensor<64x96xf32>
  %9 = kgraph.div %3, %8 : tensor<64x96xf32>, tensor<64x96xf32>
  %10 = kgraph.mul %9, %lr : tensor<64x96xf32>, tensor<f32>
  %11 = kgraph.sub %p, %10 : tensor<64x96xf32>, tensor<64x96xf32>
  return %11, %3, %7 : tensor<64x96xf32>, tensor<64x96xf32>, tensor<64x96xf32>
}

// A linear layer's bias add on the 2-D product, then GELU on the 3-D
// activations: the reshape between them moves below the GELU (and its
// gradient's, whose operands are both reshaped from [256, 96]), so the add
// and the GELU are one group, and the reshape back to 2-D for the next
// matmul cancels. The bias keeps its place: [96] broadcasts alike over
// [256, 96] and [2, 128, 96]. The bf16 cast of a matmul operand is not
// moved, so the matmul's load still performs it.
// CHECK-LABEL: func.func @through_reshapes
// CHECK: %[[ADD:.*]] = kgraph.add %arg1, %arg0 {kgraph.fusion = [[G:[0-9]+]] : i64} : tensor<96xf32>, tensor<256x96xf32>
// CHECK: %[[GELU:.*]] = kgraph.gelu %[[ADD]] {kgraph.fusion = [[G]] : i64} : tensor<256x96xf32>
// CHECK: kgraph.gelu_backward %arg2, %[[ADD]] {kgraph.fusion = [[G]] : i64} : tensor<256x96xf32>
// CHECK: %[[R:.*]] = kgraph.reshape %arg3 : tensor<2x128x96xf32> -> tensor<256x96xf32>
// CHECK: %[[C:.*]] = kgraph.cast %[[R]] : tensor<256x96xf32> -> tensor<256x96xbf16>
// CHECK: kgraph.matmul %[[C]]
func.func @through_reshapes(%y: tensor<256x96xf32>, %b: tensor<96xf32>, %g: tensor<256x96xf32>, %h: tensor<2x128x96xf32>, %w: tensor<96x8xbf16>) -> (tensor<256x96xf32>, tensor<256x96xf32>, tensor<256x8xbf16>) {
  %0 = kgraph.add %b, %y : tensor<96xf32>, tensor<256x96xf32>
  %1 = kgraph.reshape %0 : tensor<256x96xf32> -> tensor<2x128x96xf32>
  %2 = kgraph.gelu %1 : tensor<2x128x96xf32>
  %3 = kgraph.reshape %2 : tensor<2x128x96xf32> -> tensor<256x96xf32>
  %4 = kgraph.reshape %g : tensor<256x96xf32> -> tensor<2x128x96xf32>
  %5 = kgraph.gelu_backward %4, %1 : tensor<2x128x96xf32>
  %6 = kgraph.reshape %5 : tensor<2x128x96xf32> -> tensor<256x96xf32>
  %7 = kgraph.reshape %h : tensor<2x128x96xf32> -> tensor<256x96xf32>
  %8 = kgraph.cast %7 : tensor<256x96xf32> -> tensor<256x96xbf16>
  %9 = kgraph.matmul %8, %w : tensor<256x96xbf16>, tensor<96x8xbf16> -> tensor<256x8xbf16>
  return %3, %6, %9 : tensor<256x96xf32>, tensor<256x96xf32>, tensor<256x8xbf16>
}

// The bf16 cast of a computed value (mixed precision narrows a GELU's
// output right after it, on the 3-D activations) sinks the reshape like any
// elementwise op and joins the GELU's group, which then stores bf16; the
// cast of the reshaped argument stays for the matmul's load to perform.
// CHECK-LABEL: func.func @narrowed_in_group
// CHECK: %[[G:.*]] = kgraph.gelu %arg0 {kgraph.fusion = [[ID:[0-9]+]] : i64} : tensor<256x96xf32>
// CHECK: %[[C:.*]] = kgraph.cast %[[G]] {kgraph.fusion = [[ID]] : i64} : tensor<256x96xf32> -> tensor<256x96xbf16>
// CHECK: kgraph.matmul %[[C]], %arg2
// CHECK: %[[R:.*]] = kgraph.reshape %arg1 : tensor<2x128x96xf32> -> tensor<256x96xf32>
// CHECK: %[[A:.*]] = kgraph.cast %[[R]] : tensor<256x96xf32> -> tensor<256x96xbf16>
// CHECK: kgraph.matmul %[[A]], %arg2
func.func @narrowed_in_group(%y: tensor<256x96xf32>, %h: tensor<2x128x96xf32>, %w: tensor<96x8xbf16>) -> (tensor<256x8xbf16>, tensor<256x8xbf16>) {
  %0 = kgraph.gelu %y : tensor<256x96xf32>
  %1 = kgraph.reshape %0 : tensor<256x96xf32> -> tensor<2x128x96xf32>
  %2 = kgraph.cast %1 : tensor<2x128x96xf32> -> tensor<2x128x96xbf16>
  %3 = kgraph.reshape %2 : tensor<2x128x96xbf16> -> tensor<256x96xbf16>
  %4 = kgraph.matmul %3, %w : tensor<256x96xbf16>, tensor<96x8xbf16> -> tensor<256x8xbf16>
  %5 = kgraph.reshape %h : tensor<2x128x96xf32> -> tensor<256x96xf32>
  %6 = kgraph.cast %5 : tensor<256x96xf32> -> tensor<256x96xbf16>
  %7 = kgraph.matmul %6, %w : tensor<256x96xbf16>, tensor<96x8xbf16> -> tensor<256x8xbf16>
  return %4, %7 : tensor<256x8xbf16>, tensor<256x8xbf16>
}

// A linear layer's product seen as [2, 3, 8] (batch, sequence, features):
// the reshape sinks below the dropout (its random numbers follow the
// row-major index, which a reshape keeps) and below the residual add, whose
// other operand, computed by an elementwise op, is seen in [6, 8] instead.
// Bias add, dropout and residual add are one group; the exp keeps its
// shape, and the mask's reshape moves down to its user so that it does not
// stand between the group's ops.
// CHECK-LABEL: func.func @residual_after_linear
// CHECK: %[[A:.*]] = kgraph.add %arg0, %arg1 {kgraph.fusion = [[G:[0-9]+]] : i64} : tensor<6x8xf32>, tensor<8xf32>
// CHECK: kgraph.dropout %[[A]], %arg3 {kgraph.fusion = [[G]] : i64, p = 1.000000e-01 : f64} : tensor<6x8xf32>
// CHECK: %[[E:.*]] = kgraph.exp %arg2 : tensor<2x3x8xf32>
// CHECK: %[[F:.*]] = kgraph.reshape %[[E]] : tensor<2x3x8xf32> -> tensor<6x8xf32>
// CHECK: kgraph.add %{{.*}}, %[[F]] {kgraph.fusion = [[G]] : i64} : tensor<6x8xf32>
// CHECK: kgraph.reshape %{{.*}} : tensor<6x8xf32> -> tensor<2x3x8xf32>
func.func @residual_after_linear(%p: tensor<6x8xf32>, %b: tensor<8xf32>, %r: tensor<2x3x8xf32>, %seed: tensor<i64>) -> (tensor<2x3x8xf32>, tensor<2x3x8xi1>) {
  %a = kgraph.add %p, %b : tensor<6x8xf32>, tensor<8xf32>
  %s = kgraph.reshape %a : tensor<6x8xf32> -> tensor<2x3x8xf32>
  %d, %m = kgraph.dropout %s, %seed {p = 0.1 : f64} : tensor<2x3x8xf32>, tensor<i64> -> tensor<2x3x8xf32>, tensor<2x3x8xi1>
  %e = kgraph.exp %r : tensor<2x3x8xf32>
  %y = kgraph.add %d, %e : tensor<2x3x8xf32>, tensor<2x3x8xf32>
  return %y, %m : tensor<2x3x8xf32>, tensor<2x3x8xi1>
}

// An op alone in its group that reads a product is marked all the same:
// the tile phase computes a marked group on the product's output tiles as
// they leave PSUM (its epilogue), so the product is not stored and read
// back. A lone cast of a product stays unmarked (the product's stores and
// the loads of its readers narrow or widen it), and so does a lone op that
// reads no product.
// CHECK-LABEL: func.func @lone_product_readers
// CHECK: %[[P:.*]] = kgraph.matmul
// CHECK: kgraph.gelu_backward %[[P]], %arg2 {kgraph.fusion = 0 : i64}
// CHECK: %[[Q:.*]] = kgraph.matmul
// CHECK: kgraph.add %[[Q]], %arg3 {kgraph.fusion = 1 : i64}
// CHECK: kgraph.cast %[[Q]] :
// CHECK: kgraph.neg %arg2 :
// CHECK-NOT: kgraph.fusion
func.func @lone_product_readers(%dy: tensor<200x96xbf16>, %w: tensor<96x300xbf16>, %z: tensor<200x300xbf16>, %b: tensor<300xf32>, %x: tensor<200x96xf32>, %v: tensor<96x300xf32>)
    -> (tensor<200x300xbf16>, tensor<200x300xf32>, tensor<200x300xbf16>, tensor<200x300xbf16>) {
  %p = kgraph.matmul %dy, %w : tensor<200x96xbf16>, tensor<96x300xbf16> -> tensor<200x300xbf16>
  %d = kgraph.gelu_backward %p, %z : tensor<200x300xbf16>
  %q = kgraph.matmul %x, %v : tensor<200x96xf32>, tensor<96x300xf32> -> tensor<200x300xf32>
  %a = kgraph.add %q, %b : tensor<200x300xf32>, tensor<300xf32>
  %c = kgraph.cast %q : tensor<200x300xf32> -> tensor<200x300xbf16>
  %n = kgraph.neg %z : tensor<200x300xbf16>
  return %d, %a, %c, %n : tensor<200x300xbf16>, tensor<200x300xf32>, tensor<200x300xbf16>, tensor<200x300xbf16>
}
