// RUN: kiln-opt %s --kgraph-plan-tiles --convert-kgraph-to-ktile --ktile-fuse-tensor-scalars --ktile-reuse-dead-tiles | FileCheck %s

// exp over x[200, 64]: the 12800 contiguous elements fold to [128 x 100]
// tiles. The matmul loads x row-major and transposes it on TensorE (K is
// innermost in HBM), both row tiles (128 and 72 rows) of the block first;
// then each moving tile of w serves both [<=128 x 96] PSUM accumulators.
// CHECK-LABEL: func.func @step
// CHECK-SAME: memref<200x64xf32, "hbm"> {kgraph.name = "x"
// CHECK: %[[T:.*]] = ktile.alloc : memref<200x64xf32, "hbm">
// CHECK: ktile.dma_copy {{.*}}src = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 100], pstride = 100>
// CHECK: ktile.activation {{.*}}func = "exp"
// CHECK: ktile.dma_copy %[[T]]
// CHECK: ktile.dma_copy {{.*}}src = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 64], pstride = 64>
// CHECK: ktile.transpose {{.*}}dst = #kisa.ap<psum, f32, p = 0:64, offset = 0, dims = [1 x 128]>
// CHECK: ktile.tensor_copy
// The second row tile: 72 rows from byte 128 * 64 * 4.
// CHECK: ktile.dma_copy {{.*}}src = #kisa.ap<hbm, f32, p = 0:72, offset = 32768, dims = [1 x 64], pstride = 64>
// CHECK: ktile.transpose
// CHECK: ktile.dma_copy {{.*}}src = #kisa.ap<hbm, f32, p = 0:64, offset = 0, dims = [1 x 96], pstride = 96>
// CHECK: ktile.matmul {{.*}}accumulate = false, dst = #kisa.ap<psum, f32, p = 0:128, offset = 0, dims = [1 x 96]>
// CHECK: ktile.matmul {{.*}}dst = #kisa.ap<psum, f32, p = 0:72, offset = 0, dims = [1 x 96]>
// CHECK: ktile.dma_copy {{.*}}dst = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 96], pstride = 96>
// CHECK: ktile.dma_copy {{.*}}dst = #kisa.ap<hbm, f32, p = 0:72, offset = 49152, dims = [1 x 96], pstride = 96>
// CHECK: return
func.func @step(%x: tensor<200x64xf32> {kgraph.name = "x", kgraph.role = "batch_input"}, %w: tensor<64x96xf32> {kgraph.name = "w", kgraph.role = "parameter"}) -> (tensor<200x96xf32> {kgraph.name = "y", kgraph.role = "metric"}) {
  %0 = kgraph.exp %x : tensor<200x64xf32>
  %1 = kgraph.matmul %0, %w : tensor<200x64xf32>, tensor<64x96xf32> -> tensor<200x96xf32>
  return %1 : tensor<200x96xf32>
}

// Per-head products ([40 x 16] . [16 x 40] for each of 2 x 3 heads): the
// three heads of a batch element share every step. One DMA loads their
// rows of x ([3 x 16] on the free axis, heads 640 elements apart) and three
// transposes fill one PSUM bank, which leaves in one copy; one DMA loads
// their y; the three products accumulate side by side in one PSUM bank,
// and one copy and one store move all three results.
// CHECK-LABEL: func.func @per_head
// CHECK: ktile.dma_copy %[[ROWS:.*]], %arg0 {dst = #kisa.ap<sbuf, bf16, p = 0:40, offset = 0, dims = [1 x 48]>, src = #kisa.ap<hbm, bf16, p = 0:40, offset = 0, dims = [640 x 3, 1 x 16], pstride = 16>}
// CHECK-COUNT-3: ktile.transpose %[[FLIPPED:.*]], %[[ROWS]]
// CHECK: ktile.tensor_copy %[[XT:.*]], %[[FLIPPED]] {dst = #kisa.ap<sbuf, bf16, p = 0:16, offset = 0, dims = [1 x 120]>
// CHECK: ktile.dma_copy %[[Y:.*]], %arg1 {dst = #kisa.ap<sbuf, bf16, p = 0:16, offset = 0, dims = [1 x 120]>, src = #kisa.ap<hbm, bf16, p = 0:16, offset = 0, dims = [640 x 3, 1 x 40], pstride = 40>}
// CHECK: ktile.matmul %[[ACC:.*]], %[[XT]], %[[Y]] {accumulate = false, dst = #kisa.ap<psum, f32, p = 0:40, offset = 0, dims = [1 x 40]>
// CHECK: ktile.matmul %[[ACC]], %[[XT]], %[[Y]] {accumulate = false, dst = #kisa.ap<psum, f32, p = 0:40, offset = 160, dims = [1 x 40]>, moving = #kisa.ap<sbuf, bf16, p = 0:16, offset = 80, dims = [1 x 40]>, stationary = #kisa.ap<sbuf, bf16, p = 0:16, offset = 80, dims = [1 x 40]>}
// CHECK: ktile.matmul %[[ACC]], %[[XT]], %[[Y]] {{.*}}offset = 320
// CHECK: ktile.tensor_copy %[[OUT:.*]], %[[ACC]] {dst = #kisa.ap<sbuf, bf16, p = 0:40, offset = 0, dims = [1 x 120]>
// CHECK: ktile.dma_copy %{{.*}}, %[[OUT]] {dst = #kisa.ap<hbm, bf16, p = 0:40, offset = 0, dims = [1600 x 3, 1 x 40], pstride = 40>
// CHECK: ktile.dma_copy %{{.*}}, %arg0 {{.*}}offset = 3840, dims = [640 x 3, 1 x 16]
// CHECK-COUNT-2: ktile.dma_copy
// CHECK-NOT: ktile.dma_copy
// CHECK: return
func.func @per_head(%x: tensor<2x3x40x16xbf16> {kgraph.name = "x", kgraph.role = "batch_input"}, %y: tensor<2x3x16x40xbf16> {kgraph.name = "y", kgraph.role = "batch_input"}) -> (tensor<2x3x40x40xbf16> {kgraph.name = "z", kgraph.role = "metric"}) {
  %0 = kgraph.matmul %x, %y : tensor<2x3x40x16xbf16>, tensor<2x3x16x40xbf16> -> tensor<2x3x40x40xbf16>
  return %0 : tensor<2x3x40x40xbf16>
}

// A fused bias add and scale over three row blocks: the bias (stride 0
// along the partitions) and the runtime scalar read alike in every block,
// so each is loaded once, before the first block, and kept; only x moves
// per block.
// CHECK-LABEL: func.func @kept_inputs
// CHECK: ktile.dma_copy %{{.*}}, %arg0 {{.*}}p = 0:128, offset = 0,
// CHECK: ktile.dma_copy %[[BIAS:.*]], %arg1 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 300]>
// CHECK: ktile.dma_copy %[[SCALE:.*]], %arg2 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1]>
// CHECK: ktile.dma_copy %{{.*}}, %arg0 {{.*}}offset = 153600
// CHECK-NOT: ktile.dma_copy {{.*}}, %arg1
// CHECK-NOT: ktile.dma_copy {{.*}}, %arg2
// CHECK: ktile.tensor_tensor %{{.*}}, %{{.*}}, %[[BIAS]] {dst = #kisa.ap<sbuf, f32, p = 0:44
// CHECK: ktile.tensor_scalar %{{.*}}, %{{.*}}, %[[SCALE]] {dst = #kisa.ap<sbuf, f32, p = 0:44
// CHECK: return
func.func @kept_inputs(%x: tensor<300x300xf32> {kgraph.name = "x", kgraph.role = "batch_input"}, %b: tensor<300xf32> {kgraph.name = "b", kgraph.role = "parameter"}, %s: tensor<f32> {kgraph.name = "s", kgraph.role = "batch_input"}) -> (tensor<300x300xf32> {kgraph.name = "y", kgraph.role = "metric"}) {
  %0 = kgraph.add %x, %b {kgraph.fusion = 0 : i64} : tensor<300x300xf32>, tensor<300xf32>
  %1 = kgraph.mul %0, %s {kgraph.fusion = 0 : i64} : tensor<300x300xf32>, tensor<f32>
  return %1 : tensor<300x300xf32>
}

// A one-hot compare against a broadcast iota: the iota's element is its
// index, so the loop nest computes the [128 x 1000] tile it needs with
// GpSimd's iota (every row alike: partition step 0, kept for both row
// blocks) instead of loading the iota buffer once per row block.
// CHECK-LABEL: func.func @one_hot
// CHECK: ktile.iota %[[IOTA:.*]] {base = 0 : i64, dst = #kisa.ap<sbuf, i32, p = 0:128, offset = 0, dims = [1 x 1000]>, free_step = 1 : i64, partition_step = 0 : i64}
// CHECK: ktile.tensor_tensor %{{.*}}, %{{.*}}, %[[IOTA]] {{.*}}op = "eq"
// CHECK: ktile.tensor_tensor %{{.*}}, %{{.*}}, %[[IOTA]] {{.*}}op = "eq"
// CHECK-NOT: ktile.dma_copy %{{.*}}, %{{.*}} {dst = #kisa.ap<sbuf, i32, p = 0:{{[0-9]+}}, offset = 0, dims = [1 x 1000]>
func.func @one_hot(%ids: tensor<200x1xi64>) -> tensor<200x1000xf32> {
  %i = kgraph.iota {dim = 0 : i64} : tensor<1000xi64>
  %r = kgraph.reshape %i : tensor<1000xi64> -> tensor<1x1000xi64>
  %b = kgraph.broadcast %r : tensor<1x1000xi64> -> tensor<200x1000xi64>
  %c = kgraph.broadcast %ids : tensor<200x1xi64> -> tensor<200x1000xi64>
  %h = kgraph.compare "eq", %c, %b {kgraph.fusion = 0 : i64} : tensor<200x1000xi64>, tensor<200x1000xi64>
  %f = kgraph.cast %h {kgraph.fusion = 0 : i64} : tensor<200x1000xi1> -> tensor<200x1000xf32>
  return %f : tensor<200x1000xf32>
}

// A bias gradient (a sum over rows, as layout assignment writes it) beside
// the weight gradient of the same dY: the product computes it from the dY
// tiles it holds, a column of ones moving against each stationary slice and
// accumulating over K, one PSUM column per row tile. dY is loaded once
// (two K slices), and the sums leave in one store per 128 features.
// CHECK-LABEL: func.func @bias_gradient
// CHECK: %[[SUMS:.*]] = ktile.alloc : memref<1x200xbf16, "hbm">
// CHECK: %[[ONES:.*]] = ktile.alloc : memref<128x1xbf16, "sbuf">
// CHECK-NEXT: ktile.memset %[[ONES]] {{.*}}value = 1.000000e+00
// CHECK-COUNT-2: ktile.dma_copy %{{.*}}, %arg0
// CHECK-NOT: ktile.dma_copy %{{.*}}, %arg0
// CHECK: ktile.matmul %[[ACC:.*]], %{{.*}}, %[[ONES]] {accumulate = false, dst = #kisa.ap<psum, f32, p = 0:128, offset = 0, dims = [1 x 1]>
// CHECK-NEXT: ktile.matmul %[[ACC]], %{{.*}}, %[[ONES]] {accumulate = true, dst = #kisa.ap<psum, f32, p = 0:128, offset = 0, dims = [1 x 1]>
// CHECK: ktile.matmul %[[ACC]], %{{.*}}, %[[ONES]] {accumulate = false, dst = #kisa.ap<psum, f32, p = 0:72, offset = 4, dims = [1 x 1]>
// CHECK: ktile.dma_copy %[[SUMS]], {{.*}}p = 0:128, offset = 0, dims = [1 x 1], pstride = 1>
// CHECK-NEXT: ktile.dma_copy %[[SUMS]], {{.*}}p = 0:72, offset = 256, dims = [1 x 1], pstride = 1>
// CHECK-NOT: ktile.matmul
// CHECK: return
func.func @bias_gradient(%g: tensor<256x200xbf16>, %x: tensor<256x300xbf16>) -> (tensor<200x300xbf16>, tensor<1x200xbf16>) {
  %ones = kgraph.constant dense<1.0> : tensor<1x256xbf16>
  %t = kgraph.transpose %g, [1, 0] : tensor<256x200xbf16> -> tensor<200x256xbf16>
  %dw = kgraph.matmul %t, %x : tensor<200x256xbf16>, tensor<256x300xbf16> -> tensor<200x300xbf16>
  %db = kgraph.matmul %ones, %g : tensor<1x256xbf16>, tensor<256x200xbf16> -> tensor<1x200xbf16>
  return %dw, %db : tensor<200x300xbf16>, tensor<1x200xbf16>
}

// An embedding lookup: per block of 128 tokens, their ids load one per
// partition and a gather DMA fetches the rows they pick (index_stride: the
// table's row stride; index_bound: its rows), which leave in one store.
// CHECK-LABEL: func.func @embedding
// CHECK: %[[IDS:.*]] = ktile.alloc : memref<128x1xi32, "sbuf">
// CHECK-NEXT: ktile.dma_copy %[[IDS]], %arg1 {{.*}}src = #kisa.ap<hbm, i32, p = 0:128, offset = 0, dims = [1 x 1], pstride = 1>}
// CHECK: ktile.dma_gather %[[ROWS:.*]], %arg0, %[[IDS]] {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 64]>, index_bound = 1000 : i64, index_stride = 64 : i64
// CHECK-NEXT: ktile.dma_copy %{{.*}}, %[[ROWS]] {dst = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 64], pstride = 64>
// CHECK: ktile.dma_gather {{.*}}p = 0:72
// CHECK-NOT: ktile.matmul
func.func @embedding(%w: tensor<1000x64xf32>, %ids: tensor<2x100xi64>) -> tensor<2x100x64xf32> {
  %0 = kgraph.embedding %w, %ids : tensor<1000x64xf32>, tensor<2x100xi64> -> tensor<2x100x64xf32>
  return %0 : tensor<2x100x64xf32>
}

// A sum over rows (layout assignment's ones[1, R] . V) of a value the loop
// nest computes: each tile of V, stationary, against a column of ones, one
// PSUM column per 128 columns accumulating over the row blocks (the first
// block starts it). V itself is not stored; the sums leave at the end.
// CHECK-LABEL: func.func @row_sum
// CHECK: %[[SUMS:.*]] = ktile.alloc : memref<128x3xf32, "psum">
// CHECK: ktile.activation %[[E:.*]], %{{.*}} {{.*}}func = "exp"
// CHECK: %[[ONES:.*]] = ktile.alloc : memref<128x1xf32, "sbuf">
// CHECK-NEXT: ktile.memset %[[ONES]] {{.*}}value = 1.000000e+00
// CHECK-NEXT: ktile.matmul %[[SUMS]], %[[E]], %[[ONES]] {accumulate = false, dst = #kisa.ap<psum, f32, p = 0:128, offset = 0, dims = [1 x 1]>
// CHECK-NEXT: ktile.matmul %[[SUMS]], %[[E]], %[[ONES]] {accumulate = false, dst = #kisa.ap<psum, f32, p = 0:128, offset = 4, dims = [1 x 1]>
// CHECK-NEXT: ktile.matmul %[[SUMS]], %[[E]], %[[ONES]] {accumulate = false, dst = #kisa.ap<psum, f32, p = 0:4, offset = 8, dims = [1 x 1]>
// CHECK: ktile.matmul %[[SUMS]], {{.*}} {accumulate = true, dst = #kisa.ap<psum, f32, p = 0:128, offset = 0, dims = [1 x 1]>, moving = #kisa.ap<sbuf, f32, p = 0:44
// CHECK-NOT: ktile.dma_copy %{{.*}}, %[[E]]
// CHECK: ktile.tensor_copy %[[OUT:.*]], %[[SUMS]]
// CHECK-NEXT: ktile.dma_copy %{{.*}}, %[[OUT]] {dst = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [128 x 2], pstride = 1>
// CHECK-NEXT: ktile.dma_copy %{{.*}}, %[[OUT]] {dst = #kisa.ap<hbm, f32, p = 0:4, offset = 1024
func.func @row_sum(%x: tensor<300x260xf32>) -> tensor<1x260xf32> {
  %e = kgraph.exp %x : tensor<300x260xf32>
  %ones = kgraph.constant dense<1.0> : tensor<1x300xf32>
  %s = kgraph.matmul %ones, %e : tensor<1x300xf32>, tensor<300x260xf32> -> tensor<1x260xf32>
  return %s : tensor<1x260xf32>
}

// An f32 value only bf16 matmul operands read (through a slice): its loop
// nest rounds each tile to bf16 on an engine and stores that, and the
// matmul loads bf16 without converting.
// CHECK-LABEL: func.func @narrowed_output
// CHECK: %[[E:.*]] = ktile.alloc : memref<128x256xbf16, "hbm">
// CHECK: ktile.activation %[[EXP:.*]], %{{.*}} {{.*}}func = "exp"
// CHECK: ktile.tensor_copy %[[NARROW:.*]], %[[EXP]] {dst = #kisa.ap<sbuf, bf16, p = 0:128, offset = 0, dims = [1 x 256]>, src = #kisa.ap<sbuf, f32
// CHECK-NEXT: ktile.dma_copy %[[E]], %[[NARROW]] {dst = #kisa.ap<hbm, bf16
// CHECK: ktile.dma_copy %{{.*}}, %[[E]] {dst = #kisa.ap<sbuf, bf16, p = 0:128, offset = 0, dims = [1 x 128]>, src = #kisa.ap<hbm, bf16, p = 0:128, offset = 0, dims = [1 x 128], pstride = 256>}
func.func @narrowed_output(%x: tensor<128x256xf32> {kgraph.name = "x", kgraph.role = "batch_input"}, %w: tensor<128x64xbf16> {kgraph.name = "w", kgraph.role = "parameter"}) -> (tensor<128x64xbf16> {kgraph.name = "y", kgraph.role = "metric"}) {
  %e = kgraph.exp %x : tensor<128x256xf32>
  %s = kgraph.slice %e {limit = array<i64: 128, 128>, start = array<i64: 0, 0>, stride = array<i64: 1, 1>} : tensor<128x256xf32> -> tensor<128x128xf32>
  %c = kgraph.cast %s : tensor<128x128xf32> -> tensor<128x128xbf16>
  %y = kgraph.matmul %c, %w : tensor<128x128xbf16>, tensor<128x64xbf16> -> tensor<128x64xbf16>
  return %y : tensor<128x64xbf16>
}

// A weight that fits in SBUF is loaded once and kept for every row block;
// the blocks are then two row tiles, not four: the next block's
// accumulators find free PSUM banks while this block's leave, and its rows
// are stored sooner for the ops that read them.
// CHECK-LABEL: func.func @kept_moving_blocks
// CHECK: ktile.dma_copy %[[W:.*]], %arg1
// CHECK-NOT: %arg1
// CHECK: ktile.matmul %{{.*}}, %{{.*}}, %[[W]]
// CHECK-NEXT: ktile.matmul %{{.*}}, %{{.*}}, %[[W]]
// CHECK-NOT: ktile.matmul
// CHECK: ktile.dma_copy %{{.*}}, %{{.*}} {dst = #kisa.ap<hbm, bf16, p = 0:128, offset = 65536
// CHECK: ktile.matmul %{{.*}}, %{{.*}}, %[[W]]
// CHECK-NEXT: ktile.matmul %{{.*}}, %{{.*}}, %[[W]]
// CHECK-NOT: ktile.matmul
// CHECK: ktile.dma_copy %{{.*}}, %{{.*}} {dst = #kisa.ap<hbm, bf16, p = 0:128, offset = 196608
// CHECK: ktile.matmul %{{.*}}, %{{.*}}, %[[W]]
// CHECK-NOT: ktile.matmul
// CHECK: return
func.func @kept_moving_blocks(%x: tensor<640x128xbf16>, %w: tensor<128x256xbf16>) -> tensor<640x256xbf16> {
  %0 = kgraph.matmul %x, %w : tensor<640x128xbf16>, tensor<128x256xbf16> -> tensor<640x256xbf16>
  return %0 : tensor<640x256xbf16>
}

// A moving operand with K innermost in HBM and slices wider than 128
// columns (a linear layer's weight, [out, in], read as w^T): the four
// 128-row blocks of a bank's width are loaded first, then each K slice's
// four transposes fill one PSUM bank, which leaves in one copy of 512
// columns rather than four of 128.
// CHECK-LABEL: func.func @k_innermost_wide_slices
// CHECK-COUNT-4: ktile.dma_copy %{{.*}}, %arg1 {dst = #kisa.ap<sbuf, bf16, p = 0:128, offset = 0, dims = [1 x 512]>
// CHECK: ktile.transpose %[[BANK:[0-9]+]], %{{.*}} {dst = #kisa.ap<psum, f32, p = 0:128, offset = 0, dims = [1 x 128]>, src = #kisa.ap<sbuf, bf16, p = 0:128, offset = 0, dims = [1 x 128]>}
// CHECK-NEXT: ktile.transpose %[[BANK]], %{{.*}} {dst = #kisa.ap<psum, f32, p = 0:128, offset = 512, dims = [1 x 128]>
// CHECK-NEXT: ktile.transpose %[[BANK]], %{{.*}} {dst = #kisa.ap<psum, f32, p = 0:128, offset = 1024, dims = [1 x 128]>
// CHECK-NEXT: ktile.transpose %[[BANK]], %{{.*}} {dst = #kisa.ap<psum, f32, p = 0:128, offset = 1536, dims = [1 x 128]>
// CHECK-NEXT: ktile.tensor_copy %{{.*}}, %[[BANK]] {dst = #kisa.ap<sbuf, bf16, p = 0:128, offset = 0, dims = [1 x 512]>, src = #kisa.ap<psum, f32, p = 0:128, offset = 0, dims = [1 x 512]>}
// CHECK-COUNT-3: ktile.tensor_copy %{{.*}} {dst = #kisa.ap<sbuf, bf16, p = 0:128, offset = 0, dims = [1 x 512]>, src = #kisa.ap<psum
// CHECK-COUNT-4: ktile.matmul
func.func @k_innermost_wide_slices(%x: tensor<128x512xbf16>, %w: tensor<512x512xbf16>) -> tensor<128x512xbf16> {
  %y = kgraph.matmul %x, %w {transpose_rhs = true} : tensor<128x512xbf16>, tensor<512x512xbf16> -> tensor<128x512xbf16>
  return %y : tensor<128x512xbf16>
}
