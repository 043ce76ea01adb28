// RUN: kiln-opt %s -canonicalize -split-input-file | FileCheck %s
// kgraph folders and canonicalization patterns.

// x * 1, x + 0, x - 0 and x / 1 fold to x when the result type is x's.
// CHECK-LABEL: func.func @identities
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NEXT: return %[[X]], %[[X]], %[[X]], %[[X]], %[[X]]
func.func @identities(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %one = kgraph.constant dense<1.0> : tensor<f32>
  %zero = kgraph.constant dense<0.0> : tensor<8xf32>
  %0 = kgraph.mul %x, %one : tensor<4x8xf32>, tensor<f32>
  %1 = kgraph.mul %one, %x : tensor<f32>, tensor<4x8xf32>
  %2 = kgraph.add %x, %zero : tensor<4x8xf32>, tensor<8xf32>
  %3 = kgraph.sub %x, %zero : tensor<4x8xf32>, tensor<8xf32>
  %4 = kgraph.div %x, %one : tensor<4x8xf32>, tensor<f32>
  return %0, %1, %2, %3, %4 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// An identity that would change the result type (x broadcast by the splat)
// is kept.
// CHECK-LABEL: func.func @broadcasting_identity_kept
// CHECK: kgraph.mul
func.func @broadcasting_identity_kept(%x: tensor<8xf32>) -> tensor<4x8xf32> {
  %one = kgraph.constant dense<1.0> : tensor<4x8xf32>
  %0 = kgraph.mul %x, %one : tensor<8xf32>, tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Multiplying by 2 is not an identity.
// CHECK-LABEL: func.func @not_identity
// CHECK: kgraph.mul
func.func @not_identity(%x: tensor<4xf32>) -> tensor<4xf32> {
  %two = kgraph.constant dense<2.0> : tensor<f32>
  %0 = kgraph.mul %x, %two : tensor<4xf32>, tensor<f32>
  return %0 : tensor<4xf32>
}

// -----

// Integer identities fold too.
// CHECK-LABEL: func.func @integer_identity
// CHECK-NEXT: return %arg0
func.func @integer_identity(%x: tensor<4xi64>) -> tensor<4xi64> {
  %one = kgraph.constant dense<1> : tensor<i64>
  %0 = kgraph.mul %x, %one : tensor<4xi64>, tensor<i64>
  return %0 : tensor<4xi64>
}

// -----

// neg(neg(x)) is x.
// CHECK-LABEL: func.func @double_negation
// CHECK-NEXT: return %arg0
func.func @double_negation(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = kgraph.neg %x : tensor<4xf32>
  %1 = kgraph.neg %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// A transpose of a transpose composes; the identity permutation vanishes.
// CHECK-LABEL: func.func @transposes
// CHECK-NEXT: %[[T:.*]] = kgraph.transpose %arg0, [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
// CHECK-NEXT: return %arg0, %[[T]]
func.func @transposes(%x: tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<4x2x3xf32>) {
  %0 = kgraph.transpose %x, [1, 0, 2] : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
  %1 = kgraph.transpose %0, [1, 0, 2] : tensor<3x2x4xf32> -> tensor<2x3x4xf32>
  %2 = kgraph.transpose %0, [2, 1, 0] : tensor<3x2x4xf32> -> tensor<4x2x3xf32>
  return %1, %2 : tensor<2x3x4xf32>, tensor<4x2x3xf32>
}

// -----

// Reshape chains collapse to one reshape; a reshape to the same type vanishes.
// CHECK-LABEL: func.func @reshapes
// CHECK-NEXT: %[[R:.*]] = kgraph.reshape %arg0 : tensor<4x6xf32> -> tensor<24xf32>
// CHECK-NEXT: return %[[R]], %arg0
func.func @reshapes(%x: tensor<4x6xf32>) -> (tensor<24xf32>, tensor<4x6xf32>) {
  %0 = kgraph.reshape %x : tensor<4x6xf32> -> tensor<2x12xf32>
  %1 = kgraph.reshape %0 : tensor<2x12xf32> -> tensor<24xf32>
  %2 = kgraph.reshape %x : tensor<4x6xf32> -> tensor<4x6xf32>
  return %1, %2 : tensor<24xf32>, tensor<4x6xf32>
}

// -----

// Shape ops and casts of splat constants become constants.
// CHECK-LABEL: func.func @constant_shapes
// CHECK-DAG: kgraph.constant dense<3.000000e+00> : tensor<4x8xf32>
// CHECK-DAG: kgraph.constant dense<3.000000e+00> : tensor<32xf32>
// CHECK-DAG: kgraph.constant dense<3.000000e+00> : tensor<bf16>
// CHECK-NOT: kgraph.broadcast
// CHECK-NOT: kgraph.cast
func.func @constant_shapes() -> (tensor<4x8xf32>, tensor<32xf32>, tensor<bf16>) {
  %c = kgraph.constant dense<3.0> : tensor<f32>
  %0 = kgraph.broadcast %c : tensor<f32> -> tensor<4x8xf32>
  %1 = kgraph.reshape %0 : tensor<4x8xf32> -> tensor<32xf32>
  %2 = kgraph.cast %c : tensor<f32> -> tensor<bf16>
  return %0, %1, %2 : tensor<4x8xf32>, tensor<32xf32>, tensor<bf16>
}

// -----

// Broadcast and cast to their own type vanish.
// CHECK-LABEL: func.func @no_op_shapes
// CHECK-NEXT: return %arg0, %arg0
func.func @no_op_shapes(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = kgraph.broadcast %x : tensor<4xf32> -> tensor<4xf32>
  %1 = kgraph.cast %x : tensor<4xf32> -> tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}

// -----

// The collective is never removed, even when its result is unused.
// CHECK-LABEL: func.func @all_reduce_kept
// CHECK: kgraph.all_reduce
func.func @all_reduce_kept(%x: tensor<4xf32>) {
  %0 = kgraph.all_reduce %x : tensor<4xf32>
  return
}

// -----

// Pure ops with unused results are removed.
// CHECK-LABEL: func.func @dead_code
// CHECK-NEXT: return
func.func @dead_code(%x: tensor<4xf32>) {
  %0 = kgraph.exp %x : tensor<4xf32>
  return
}

// -----

// Attention's batched products merge batch and heads, [8, 12] -> 96, on
// operands that are heads transposed out of a projection. The matmul takes
// the unmerged operands instead (its batch dimensions may have any
// strides, so nothing is copied contiguous), the merge moves to its result,
// and the reshape back to [8, 12] cancels against it.
// CHECK-LABEL: func.func @unmerged_batch
// CHECK-SAME: (%[[Q:.*]]: tensor<8x12x128x64xf32>, %[[K:.*]]: tensor<8x12x64x128xf32>)
// CHECK-NEXT: %[[P:.*]] = kgraph.matmul %[[Q]], %[[K]] : tensor<8x12x128x64xf32>, tensor<8x12x64x128xf32> -> tensor<8x12x128x128xf32>
// CHECK-NEXT: return %[[P]]
func.func @unmerged_batch(%q: tensor<8x12x128x64xf32>, %k: tensor<8x12x64x128xf32>) -> tensor<8x12x128x128xf32> {
  %0 = kgraph.reshape %q : tensor<8x12x128x64xf32> -> tensor<96x128x64xf32>
  %1 = kgraph.reshape %k : tensor<8x12x64x128xf32> -> tensor<96x64x128xf32>
  %2 = kgraph.matmul %0, %1 : tensor<96x128x64xf32>, tensor<96x64x128xf32> -> tensor<96x128x128xf32>
  %3 = kgraph.reshape %2 : tensor<96x128x128xf32> -> tensor<8x12x128x128xf32>
  return %3 : tensor<8x12x128x128xf32>
}

// -----

// The backward's products read the merged operands transposed: the
// transpose moves inside the merge (it keeps the merged dimension first),
// and then the matmul unmerges as above. An operand that no reshape merged
// is split to the same batch shape (a view, never a copy); transpose_lhs
// survives, and a rank-2 operand stays shared by every batch.
// CHECK-LABEL: func.func @unmerged_transposed
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x5x4xf32>, %[[G:.*]]: tensor<6x5x7xf32>, %[[W:.*]]: tensor<5x9xf32>)
// CHECK-DAG: %[[XT:.*]] = kgraph.transpose %[[X]], [0, 1, 3, 2] : tensor<2x3x5x4xf32> -> tensor<2x3x4x5xf32>
// CHECK-DAG: %[[GS:.*]] = kgraph.reshape %[[G]] : tensor<6x5x7xf32> -> tensor<2x3x5x7xf32>
// CHECK-DAG: %[[P:.*]] = kgraph.matmul %[[XT]], %[[GS]] : tensor<2x3x4x5xf32>, tensor<2x3x5x7xf32> -> tensor<2x3x4x7xf32>
// CHECK-DAG: %[[R:.*]] = kgraph.reshape %[[P]] : tensor<2x3x4x7xf32> -> tensor<6x4x7xf32>
// CHECK-DAG: %[[Q:.*]] = kgraph.matmul %[[X]], %[[W]] {transpose_lhs = true} : tensor<2x3x5x4xf32>, tensor<5x9xf32> -> tensor<2x3x4x9xf32>
// CHECK-DAG: %[[S:.*]] = kgraph.reshape %[[Q]] : tensor<2x3x4x9xf32> -> tensor<6x4x9xf32>
// CHECK: return %[[R]], %[[S]]
func.func @unmerged_transposed(%x: tensor<2x3x5x4xf32>, %g: tensor<6x5x7xf32>, %w: tensor<5x9xf32>) -> (tensor<6x4x7xf32>, tensor<6x4x9xf32>) {
  %0 = kgraph.reshape %x : tensor<2x3x5x4xf32> -> tensor<6x5x4xf32>
  %1 = kgraph.transpose %0, [0, 2, 1] : tensor<6x5x4xf32> -> tensor<6x4x5xf32>
  %2 = kgraph.matmul %1, %g : tensor<6x4x5xf32>, tensor<6x5x7xf32> -> tensor<6x4x7xf32>
  %3 = kgraph.matmul %0, %w {transpose_lhs = true} : tensor<6x5x4xf32>, tensor<5x9xf32> -> tensor<6x4x9xf32>
  return %2, %3 : tensor<6x4x7xf32>, tensor<6x4x9xf32>
}

// -----

// A product of merged heads that one reader sees with a leading unit
// dimension added (attention backward's dP = dO . V^T under grouped-query
// attention, [32, S, S] read as [1, 32, S, S]) is computed at that rank:
// its rank-3 operand gains the unit dimension, its rank-2 one stays
// shared, and the reader that wanted the merged shape reads a reshape.
// CHECK-LABEL: func.func @unit_batch_dims_added
// CHECK-SAME: (%[[G:.*]]: tensor<6x5x7xf32>, %[[W:.*]]: tensor<7x9xf32>, %[[P:.*]]: tensor<1x6x5x9xf32>)
// CHECK: %[[GU:.*]] = kgraph.reshape %[[G]] : tensor<6x5x7xf32> -> tensor<1x6x5x7xf32>
// CHECK: %[[D:.*]] = kgraph.matmul %[[GU]], %[[W]] : tensor<1x6x5x7xf32>, tensor<7x9xf32> -> tensor<1x6x5x9xf32>
// CHECK: %[[M:.*]] = kgraph.reshape %[[D]] : tensor<1x6x5x9xf32> -> tensor<6x5x9xf32>
// CHECK: %[[S:.*]] = kgraph.sub %[[D]], %[[P]]
// CHECK: return %[[M]], %[[S]]
func.func @unit_batch_dims_added(%g: tensor<6x5x7xf32>, %w: tensor<7x9xf32>, %p: tensor<1x6x5x9xf32>) -> (tensor<6x5x9xf32>, tensor<1x6x5x9xf32>) {
  %0 = kgraph.matmul %g, %w : tensor<6x5x7xf32>, tensor<7x9xf32> -> tensor<6x5x9xf32>
  %1 = kgraph.reshape %0 : tensor<6x5x9xf32> -> tensor<1x6x5x9xf32>
  %2 = kgraph.sub %1, %p : tensor<1x6x5x9xf32>, tensor<1x6x5x9xf32>
  return %0, %2 : tensor<6x5x9xf32>, tensor<1x6x5x9xf32>
}

// -----

// When the operands merge batch dimensions as well, the product unmerges
// them (it reads them where they lie) rather than adding the unit
// dimension, and the reshapes of its result compose into one.
// CHECK-LABEL: func.func @unit_dims_on_merged_heads
// CHECK-SAME: (%[[Q:.*]]: tensor<2x3x5x4xf32>, %[[K:.*]]: tensor<2x3x4x5xf32>)
// CHECK-NEXT: %[[P:.*]] = kgraph.matmul %[[Q]], %[[K]] : tensor<2x3x5x4xf32>, tensor<2x3x4x5xf32> -> tensor<2x3x5x5xf32>
// CHECK-NEXT: %[[R:.*]] = kgraph.reshape %[[P]] : tensor<2x3x5x5xf32> -> tensor<1x6x5x5xf32>
// CHECK-NEXT: return %[[R]]
func.func @unit_dims_on_merged_heads(%q: tensor<2x3x5x4xf32>, %k: tensor<2x3x4x5xf32>) -> tensor<1x6x5x5xf32> {
  %0 = kgraph.reshape %q : tensor<2x3x5x4xf32> -> tensor<6x5x4xf32>
  %1 = kgraph.reshape %k : tensor<2x3x4x5xf32> -> tensor<6x4x5xf32>
  %2 = kgraph.matmul %0, %1 : tensor<6x5x4xf32>, tensor<6x4x5xf32> -> tensor<6x5x5xf32>
  %3 = kgraph.reshape %2 : tensor<6x5x5xf32> -> tensor<1x6x5x5xf32>
  return %3 : tensor<1x6x5x5xf32>
}

// -----

// A row's max (or min) of x scaled by a positive constant is taken on x
// and scaled after: rounding is monotone, so the bits are the same, and a
// softmax over scaled scores folds the max on the scores themselves.
// CHECK-LABEL: func.func @reduce_before_positive_scale
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-DAG: %[[C:.*]] = kgraph.constant dense<8.000000e+00> : tensor<f32>
// CHECK-DAG: %[[H:.*]] = kgraph.constant dense<5.000000e-01> : tensor<f32>
// CHECK-DAG: %[[S:.*]] = kgraph.div %[[X]], %[[C]]
// CHECK-DAG: %[[M:.*]] = kgraph.reduce_max %[[X]], [1] {keepdim = true}
// CHECK-DAG: %[[MS:.*]] = kgraph.div %[[M]], %[[C]] : tensor<4x1xf32>, tensor<f32>
// CHECK-DAG: %[[N:.*]] = kgraph.reduce_min %[[X]], [0, 1] :
// CHECK-DAG: %[[NS:.*]] = kgraph.mul %[[N]], %[[H]] : tensor<f32>, tensor<f32>
// CHECK: return %[[S]], %[[MS]], %[[NS]]
func.func @reduce_before_positive_scale(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x1xf32>, tensor<f32>) {
  %c = kgraph.constant dense<8.0> : tensor<f32>
  %h = kgraph.constant dense<0.5> : tensor<f32>
  %s = kgraph.div %x, %c : tensor<4x8xf32>, tensor<f32>
  %m = kgraph.reduce_max %s, [1] {keepdim = true} : tensor<4x8xf32> -> tensor<4x1xf32>
  %t = kgraph.mul %h, %x : tensor<f32>, tensor<4x8xf32>
  %n = kgraph.reduce_min %t, [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %s, %m, %n : tensor<4x8xf32>, tensor<4x1xf32>, tensor<f32>
}

// -----

// Not when the order could change: a negative or zero scale, a runtime
// one, the constant divided by x, or x broadcast by the scale.
// CHECK-LABEL: func.func @reduce_of_other_scales_kept
// CHECK-COUNT-5: kgraph.reduce_max %{{[0-9]+}}
func.func @reduce_of_other_scales_kept(%x: tensor<4x8xf32>, %r: tensor<f32>, %v: tensor<8xf32>) -> (tensor<4x1xf32>, tensor<4x1xf32>, tensor<4x1xf32>, tensor<4x1xf32>, tensor<4x1xf32>) {
  %neg = kgraph.constant dense<-2.0> : tensor<f32>
  %zero = kgraph.constant dense<0.0> : tensor<f32>
  %big = kgraph.constant dense<2.0> : tensor<4x8xf32>
  %0 = kgraph.mul %x, %neg : tensor<4x8xf32>, tensor<f32>
  %1 = kgraph.mul %x, %zero : tensor<4x8xf32>, tensor<f32>
  %2 = kgraph.div %x, %r : tensor<4x8xf32>, tensor<f32>
  %3 = kgraph.div %neg, %x : tensor<f32>, tensor<4x8xf32>
  %4 = kgraph.div %v, %big : tensor<8xf32>, tensor<4x8xf32>
  %m0 = kgraph.reduce_max %0, [1] {keepdim = true} : tensor<4x8xf32> -> tensor<4x1xf32>
  %m1 = kgraph.reduce_max %1, [1] {keepdim = true} : tensor<4x8xf32> -> tensor<4x1xf32>
  %m2 = kgraph.reduce_max %2, [1] {keepdim = true} : tensor<4x8xf32> -> tensor<4x1xf32>
  %m3 = kgraph.reduce_max %3, [1] {keepdim = true} : tensor<4x8xf32> -> tensor<4x1xf32>
  %m4 = kgraph.reduce_max %4, [1] {keepdim = true} : tensor<4x8xf32> -> tensor<4x1xf32>
  return %m0, %m1, %m2, %m3, %m4 : tensor<4x1xf32>, tensor<4x1xf32>, tensor<4x1xf32>, tensor<4x1xf32>, tensor<4x1xf32>
}

// -----

// Attention's scores scaled by 1/8, a power of two: the product of Q / 8
// and K^T, the smaller input scaled (exactly the same values); and the
// backward's scaled score gradient times K (through a reshape that merges
// the batch, which then unmerges): the gradient times K / 8.
// CHECK-LABEL: func.func @power_of_two_scale_moves_to_smaller_input
// CHECK-DAG: %[[EIGHTH:.*]] = kgraph.constant dense<1.250000e-01> : tensor<f32>
// CHECK-DAG: %[[Q8:.*]] = kgraph.mul %arg0, %[[EIGHTH]] : tensor<2x1024x16xf32>, tensor<f32>
// CHECK-DAG: %[[S:.*]] = kgraph.matmul %[[Q8]], %arg1 : tensor<2x1024x16xf32>, tensor<2x16x1024xf32>
// CHECK-DAG: %[[K:.*]] = kgraph.reshape %arg3 : tensor<2x1024x16xf32> -> tensor<1x2x1024x16xf32>
// CHECK-DAG: %[[K8:.*]] = kgraph.mul %[[K]], %[[EIGHTH]] : tensor<1x2x1024x16xf32>, tensor<f32>
// CHECK-DAG: %[[DQ:.*]] = kgraph.matmul %arg2, %[[K8]]
// CHECK-DAG: %[[R:.*]] = kgraph.reshape %[[DQ]]
// CHECK-NOT: kgraph.div
// CHECK: return %[[S]], %[[R]]
func.func @power_of_two_scale_moves_to_smaller_input(%q: tensor<2x1024x16xf32>, %kt: tensor<2x16x1024xf32>, %g: tensor<1x2x1024x1024xf32>, %k: tensor<2x1024x16xf32>) -> (tensor<2x1024x1024xf32>, tensor<2x1024x16xf32>) {
  %c = kgraph.constant dense<8.0> : tensor<f32>
  %p = kgraph.matmul %q, %kt : tensor<2x1024x16xf32>, tensor<2x16x1024xf32> -> tensor<2x1024x1024xf32>
  %s = kgraph.div %p, %c : tensor<2x1024x1024xf32>, tensor<f32>
  %gs = kgraph.div %g, %c : tensor<1x2x1024x1024xf32>, tensor<f32>
  %gm = kgraph.reshape %gs : tensor<1x2x1024x1024xf32> -> tensor<2x1024x1024xf32>
  %dq = kgraph.matmul %gm, %k : tensor<2x1024x1024xf32>, tensor<2x1024x16xf32> -> tensor<2x1024x16xf32>
  return %s, %dq : tensor<2x1024x1024xf32>, tensor<2x1024x16xf32>
}

// -----

// Kept: a scale that is not a power of two (rounding would differ), an
// input not 4 times smaller (a short sequence's scores, [1024, 1024]
// against a head of 512), a product read twice, a scaled tensor under
// 2^20 elements, a negative factor (the sign of a zero product), an f16
// product (its 5-bit exponent underflows), and a scaled gradient that a
// non-product also reads (moving it would add a pass, not take one away).
// CHECK-LABEL: func.func @other_product_scales_kept
// CHECK-COUNT-7: kgraph.div
func.func @other_product_scales_kept(%q: tensor<2x1024x512xf32>, %kt: tensor<2x512x1024xf32>, %b: tensor<1024x8xf32>, %c: tensor<64x8xf32>, %h: tensor<1024x8xf16>, %g: tensor<1024x1024xf32>) -> (tensor<2x1024x1024xf32>, tensor<1024x1024xf32>, tensor<1024x1024xf32>, tensor<64x64xf32>, tensor<1024x1024xf32>, tensor<1024x1024xf16>, tensor<1024x8xf32>, tensor<1024x1024xf32>) {
  %three = kgraph.constant dense<3.0> : tensor<f32>
  %eight = kgraph.constant dense<8.0> : tensor<f32>
  %minus = kgraph.constant dense<-8.0> : tensor<f32>
  %eighth = kgraph.constant dense<8.0> : tensor<f16>
  %p = kgraph.matmul %q, %kt : tensor<2x1024x512xf32>, tensor<2x512x1024xf32> -> tensor<2x1024x1024xf32>
  %s = kgraph.div %p, %eight : tensor<2x1024x1024xf32>, tensor<f32>
  %bt = kgraph.transpose %b, [1, 0] : tensor<1024x8xf32> -> tensor<8x1024xf32>
  %r = kgraph.matmul %b, %bt : tensor<1024x8xf32>, tensor<8x1024xf32> -> tensor<1024x1024xf32>
  %t = kgraph.div %r, %three : tensor<1024x1024xf32>, tensor<f32>
  %u = kgraph.div %r, %eight : tensor<1024x1024xf32>, tensor<f32>
  %ct = kgraph.transpose %c, [1, 0] : tensor<64x8xf32> -> tensor<8x64xf32>
  %w = kgraph.matmul %c, %ct : tensor<64x8xf32>, tensor<8x64xf32> -> tensor<64x64xf32>
  %v = kgraph.div %w, %eight : tensor<64x64xf32>, tensor<f32>
  %r2 = kgraph.matmul %b, %bt : tensor<1024x8xf32>, tensor<8x1024xf32> -> tensor<1024x1024xf32>
  %n = kgraph.div %r2, %minus : tensor<1024x1024xf32>, tensor<f32>
  %ht = kgraph.transpose %h, [1, 0] : tensor<1024x8xf16> -> tensor<8x1024xf16>
  %hh = kgraph.matmul %h, %ht : tensor<1024x8xf16>, tensor<8x1024xf16> -> tensor<1024x1024xf16>
  %f = kgraph.div %hh, %eighth : tensor<1024x1024xf16>, tensor<f16>
  %gs = kgraph.div %g, %eight : tensor<1024x1024xf32>, tensor<f32>
  %dg = kgraph.matmul %gs, %b : tensor<1024x1024xf32>, tensor<1024x8xf32> -> tensor<1024x8xf32>
  return %s, %t, %u, %v, %n, %f, %dg, %gs : tensor<2x1024x1024xf32>, tensor<1024x1024xf32>, tensor<1024x1024xf32>, tensor<64x64xf32>, tensor<1024x1024xf32>, tensor<1024x1024xf16>, tensor<1024x8xf32>, tensor<1024x1024xf32>
}
