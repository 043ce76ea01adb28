// RUN: kiln-opt %s --kgraph-plan-tiles --convert-kgraph-to-ktile --ktile-fuse-tensor-scalars --ktile-reuse-dead-tiles | FileCheck %s

// Reshape, transpose and broadcast move no data: the add reads x transposed
// (partition stride 1, free stride 5) and the bias with stride 0 along the
// partitions, loading one column per partition, which the add reads as
// one scalar per partition.
// CHECK-LABEL: func.func @views
// CHECK-NOT: ktile.view
// CHECK: ktile.dma_copy {{.*}}src = #kisa.ap<hbm, f32, p = 0:5, offset = 0, dims = [5 x 3], pstride = 1>
// CHECK: ktile.dma_copy {{.*}}dst = #kisa.ap<sbuf, f32, p = 0:5, offset = 0, dims = [1 x 1]>, src = #kisa.ap<hbm, f32, p = 0:5, offset = 0, dims = [1 x 1], pstride = 1>
// CHECK: ktile.tensor_scalar {{.*}}op0 = "add", scalar0 = 0.000000e+00 : f64, scalar_operands = 1 : i64, scalars = #kisa.ap<sbuf, f32, p = 0:5, offset = 0, dims = [1 x 1]>
func.func @views(%x: tensor<3x5xf32> {kgraph.name = "x"}, %b: tensor<5xf32> {kgraph.name = "b"}) -> (tensor<5x3xf32> {kgraph.name = "y"}) {
  %0 = kgraph.transpose %x, [1, 0] : tensor<3x5xf32> -> tensor<5x3xf32>
  %1 = kgraph.reshape %b : tensor<5xf32> -> tensor<5x1xf32>
  %2 = kgraph.add %0, %1 : tensor<5x3xf32>, tensor<5x1xf32>
  return %2 : tensor<5x3xf32>
}

// An updated parameter computed elementwise is written in place.
// CHECK-LABEL: func.func @update
// CHECK: ktile.tensor_scalar
// CHECK: ktile.dma_copy %arg0
// CHECK: return %arg0
func.func @update(%w: tensor<4x4xf32> {kgraph.name = "w", kgraph.role = "parameter"}) -> (tensor<4x4xf32> {kgraph.aliases = 0 : i64, kgraph.name = "w", kgraph.role = "updated_parameter"}) {
  %k = kgraph.constant dense<0.5> : tensor<f32>
  %0 = kgraph.mul %w, %k : tensor<4x4xf32>, tensor<f32>
  return %0 : tensor<4x4xf32>
}

// A parameter read through a transposed view (a linear layer's W^T) before
// its update is still updated in place: the view reads nothing itself, and
// its one consumer, the matmul, runs before the update.
// CHECK-LABEL: func.func @update_after_transposed_read
// CHECK: ktile.matmul
// CHECK: ktile.tensor_scalar
// CHECK: ktile.dma_copy %arg0
// CHECK: return %{{.*}}, %arg0
func.func @update_after_transposed_read(%w: tensor<4x4xf32> {kgraph.name = "w", kgraph.role = "parameter"}, %x: tensor<4x4xf32> {kgraph.name = "x", kgraph.role = "batch_input"}) -> (tensor<4x4xf32> {kgraph.name = "y", kgraph.role = "metric"}, tensor<4x4xf32> {kgraph.aliases = 0 : i64, kgraph.name = "w", kgraph.role = "updated_parameter"}) {
  %wt = kgraph.transpose %w, [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
  %y = kgraph.matmul %x, %wt : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %k = kgraph.constant dense<0.5> : tensor<f32>
  %0 = kgraph.mul %w, %k : tensor<4x4xf32>, tensor<f32>
  return %y, %0 : tensor<4x4xf32>, tensor<4x4xf32>
}

// When the transposed view's consumer runs after the update, writing in
// place would feed it the new weights: the update goes to a fresh buffer and
// the return copies it into the parameter's.
// CHECK-LABEL: func.func @update_before_transposed_read
// CHECK: ktile.tensor_scalar
// CHECK-NOT: ktile.dma_copy %arg0
// CHECK: ktile.matmul
// CHECK: ktile.dma_copy %arg0
// CHECK: return %{{.*}}, %arg0
func.func @update_before_transposed_read(%w: tensor<4x4xf32> {kgraph.name = "w", kgraph.role = "parameter"}, %x: tensor<4x4xf32> {kgraph.name = "x", kgraph.role = "batch_input"}) -> (tensor<4x4xf32> {kgraph.name = "y", kgraph.role = "metric"}, tensor<4x4xf32> {kgraph.aliases = 0 : i64, kgraph.name = "w", kgraph.role = "updated_parameter"}) {
  %wt = kgraph.transpose %w, [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
  %k = kgraph.constant dense<0.5> : tensor<f32>
  %0 = kgraph.mul %w, %k : tensor<4x4xf32>, tensor<f32>
  %y = kgraph.matmul %x, %wt : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  return %y, %0 : tensor<4x4xf32>, tensor<4x4xf32>
}

// Merging attention heads: [B, heads, S, d] transposed to [B, S, heads, d]
// and reshaped to [B*S, hidden] is copied, and the innermost dimension (a
// head's 64 features) is too short to be the free axis alone. The free
// axis spans heads and features — a [12 x 64] pattern on the source, one
// contiguous 768-element row on the destination — with S on the
// partitions: one DMA each way per 128 tokens, not one per token.
// CHECK-LABEL: func.func @merge_heads
// CHECK: ktile.dma_copy %[[T:.*]], %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 768]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [8192 x 12, 1 x 64], pstride = 64>}
// CHECK: ktile.dma_copy %{{.*}}, %[[T]] {dst = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 768], pstride = 768>
// CHECK: ktile.dma_copy {{.*}}offset = 393216, dims = [8192 x 12, 1 x 64], pstride = 64>
// CHECK: ktile.dma_copy {{.*}}offset = 393216, dims = [1 x 768], pstride = 768>
// CHECK-NOT: ktile.dma_copy
func.func @merge_heads(%x: tensor<2x12x128x64xf32> {kgraph.name = "x", kgraph.role = "batch_input"}) -> (tensor<256x768xf32> {kgraph.name = "y", kgraph.role = "metric"}) {
  %t = kgraph.transpose %x, [0, 2, 1, 3] : tensor<2x12x128x64xf32> -> tensor<2x128x12x64xf32>
  %y = kgraph.reshape %t : tensor<2x128x12x64xf32> -> tensor<256x768xf32>
  return %y : tensor<256x768xf32>
}

// Splitting heads out of the fused QKV projection: the slice [256, 768] of
// x (rows 2304 apart) reshapes to [2, 128, 12, 64] as a view — splitting a
// strided dimension moves nothing — and the transposed view is copied once,
// S on the partitions and [12 x 64] on the free axis.
// CHECK-LABEL: func.func @split_heads
// CHECK: ktile.dma_copy %[[T:.*]], %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 768]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 768], pstride = 2304>}
// CHECK: ktile.dma_copy %{{.*}}, %[[T]] {dst = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [8192 x 12, 1 x 64], pstride = 64>
// CHECK: ktile.dma_copy {{.*}}offset = 1179648, dims = [1 x 768], pstride = 2304>
// CHECK: ktile.dma_copy {{.*}}offset = 393216, dims = [8192 x 12, 1 x 64], pstride = 64>
// CHECK-NOT: ktile.dma_copy
func.func @split_heads(%x: tensor<256x2304xf32> {kgraph.name = "x", kgraph.role = "batch_input"}) -> (tensor<24x128x64xf32> {kgraph.name = "y", kgraph.role = "metric"}) {
  %q = kgraph.slice %x {start = array<i64: 0, 0>, limit = array<i64: 256, 768>, stride = array<i64: 1, 1>} : tensor<256x2304xf32> -> tensor<256x768xf32>
  %r = kgraph.reshape %q : tensor<256x768xf32> -> tensor<2x128x12x64xf32>
  %t = kgraph.transpose %r, [0, 2, 1, 3] : tensor<2x128x12x64xf32> -> tensor<2x12x128x64xf32>
  %y = kgraph.reshape %t : tensor<2x12x128x64xf32> -> tensor<24x128x64xf32>
  return %y : tensor<24x128x64xf32>
}

// Concatenated head merges (attention's backward joins the Q, K and V
// gradients): the per-head product stores straight into its slice of the
// concat's buffer (the slice seen through the inverse reshape and
// transpose: a batch element's three heads are 48 adjacent columns of a
// 144-column row), the exp stores into the next slice, and only the neg,
// which is also returned, is copied in. The concat's buffer is allocated
// where its first writer stands.
// CHECK-LABEL: func.func @concat_in_place
// CHECK: %[[Z:.*]] = ktile.alloc : memref<2x40x144xf32, "hbm">
// CHECK: ktile.matmul
// CHECK: ktile.dma_copy %[[Z]], %{{.*}} {dst = #kisa.ap<hbm, f32, p = 0:40, offset = 0, dims = [1 x 48], pstride = 144>
// CHECK: ktile.dma_copy %[[Z]], %{{.*}} {dst = #kisa.ap<hbm, f32, p = 0:40, offset = 23040, dims = [1 x 48], pstride = 144>
// CHECK: ktile.activation
// CHECK: ktile.dma_copy %[[Z]], %{{.*}} {dst = #kisa.ap<hbm, f32, p = 0:80, offset = 192, dims = [1 x 48], pstride = 144>
// CHECK: %[[N:.*]] = ktile.alloc : memref<2x40x48xf32, "hbm">
// CHECK: ktile.dma_copy %[[N]]
// CHECK: ktile.dma_copy %{{.*}}, %[[N]]
// CHECK: ktile.dma_copy %[[Z]], %{{.*}} {dst = #kisa.ap<hbm, f32, p = 0:80, offset = 384, dims = [1 x 48], pstride = 144>
// CHECK-NOT: ktile.dma_copy
// CHECK: return %[[Z]], %[[N]]
func.func @concat_in_place(%q: tensor<2x3x40x20xf32> {kgraph.name = "q", kgraph.role = "batch_input"}, %w: tensor<2x3x20x16xf32> {kgraph.name = "w", kgraph.role = "batch_input"}, %x: tensor<2x40x48xf32> {kgraph.name = "x", kgraph.role = "batch_input"}, %y: tensor<2x40x48xf32> {kgraph.name = "y", kgraph.role = "batch_input"}) -> (tensor<2x40x144xf32> {kgraph.name = "z", kgraph.role = "metric"}, tensor<2x40x48xf32> {kgraph.name = "n", kgraph.role = "metric"}) {
  %p = kgraph.matmul %q, %w : tensor<2x3x40x20xf32>, tensor<2x3x20x16xf32> -> tensor<2x3x40x16xf32>
  %t = kgraph.transpose %p, [0, 2, 1, 3] : tensor<2x3x40x16xf32> -> tensor<2x40x3x16xf32>
  %m = kgraph.reshape %t : tensor<2x40x3x16xf32> -> tensor<2x40x48xf32>
  %e = kgraph.exp %x : tensor<2x40x48xf32>
  %n = kgraph.neg %y : tensor<2x40x48xf32>
  %z = kgraph.concat %m, %e, %n {dim = 2 : i64} : (tensor<2x40x48xf32>, tensor<2x40x48xf32>, tensor<2x40x48xf32>) -> tensor<2x40x144xf32>
  return %z, %n : tensor<2x40x144xf32>, tensor<2x40x48xf32>
}

// A row sum (`ones[1, R] . V`, a bias's gradient) whose group's loop nest
// does not fold it runs as a product of its own, into its part of a
// concat (a data-parallel gradient bucket). The concat's buffer, which the
// loop nest was offered for the sum, stays for the product and the exp.
// CHECK-LABEL: func.func @row_sum_into_concat
// CHECK: %[[Z:.*]] = ktile.alloc : memref<2112xf32, "hbm">
// CHECK: ktile.matmul
// CHECK: ktile.dma_copy %[[Z]], %{{.*}} {dst = #kisa.ap<hbm, f32, p = 0:1, offset = 0, dims = [1 x 64]>
// CHECK: ktile.activation
// CHECK: ktile.dma_copy %[[Z]], %{{.*}} {dst = #kisa.ap<hbm, f32, p = 0:128, offset = 256, dims = [1 x 16], pstride = 16>
// CHECK-NOT: ktile.dma_copy
// CHECK: return %[[Z]]
func.func @row_sum_into_concat(%a: tensor<256x64xf32> {kgraph.name = "a", kgraph.role = "batch_input"}, %b: tensor<256x64xf32> {kgraph.name = "b", kgraph.role = "batch_input"}, %c: tensor<32x64xf32> {kgraph.name = "c", kgraph.role = "batch_input"}) -> (tensor<2112xf32> {kgraph.name = "z", kgraph.role = "metric"}) {
  %ones = kgraph.constant dense<1.0> : tensor<1x256xf32>
  %m = kgraph.mul %a, %b {kgraph.fusion = 0 : i64} : tensor<256x64xf32>, tensor<256x64xf32>
  %s = kgraph.matmul %ones, %m : tensor<1x256xf32>, tensor<256x64xf32> -> tensor<1x64xf32>
  %e = kgraph.exp %c {kgraph.fusion = 1 : i64} : tensor<32x64xf32>
  %sr = kgraph.reshape %s : tensor<1x64xf32> -> tensor<64xf32>
  %er = kgraph.reshape %e : tensor<32x64xf32> -> tensor<2048xf32>
  %z = kgraph.concat %sr, %er {dim = 0 : i64} : (tensor<64xf32>, tensor<2048xf32>) -> tensor<2112xf32>
  return %z : tensor<2112xf32>
}
