// RUN: kiln-opt %s --convert-kgraph-to-ktile | FileCheck %s

// Reshape, transpose and broadcast move no data: the add reads x transposed
// (partition stride 1, free stride 5) and the bias with stride 0 along the
// partitions, loading one column per partition.
// CHECK-LABEL: func.func @views
// CHECK-NOT: ktile.view
// CHECK: ktile.dma_copy {{.*}}src = #kisa.ap<hbm, f32, p = 0:5, offset = 0, dims = [5 x 3], pstride = 1>
// CHECK: ktile.dma_copy {{.*}}dst = #kisa.ap<sbuf, f32, p = 0:5, offset = 0, dims = [1 x 1]>, src = #kisa.ap<hbm, f32, p = 0:5, offset = 0, dims = [1 x 1], pstride = 1>
// CHECK: ktile.tensor_tensor {{.*}}op = "add", rhs = #kisa.ap<sbuf, f32, p = 0:5, offset = 0, dims = [0 x 3]>
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
