// RUN: kiln-opt %s --kgraph-fuse-elementwise --kgraph-plan-tiles --convert-kgraph-to-ktile --ktile-fuse-tensor-scalars --ktile-reuse-dead-tiles | FileCheck %s
// RUN: kiln-opt %s --kgraph-fuse-elementwise --kgraph-plan-tiles --convert-kgraph-to-ktile=sbuf-budget=8192 --ktile-fuse-tensor-scalars --ktile-reuse-dead-tiles | FileCheck %s --check-prefix=SPANS

// A linear layer's bias and GELU run on each output tile as it leaves PSUM:
// the product never goes to HBM. The bias is loaded once per column tile
// (partition stride 0) and serves both row tiles; only the group's result
// is stored, one store per [128 x 512] tile. A later op reads that result,
// so the epilogue keeps to one PSUM bank at a time: the reader's first rows
// are ready sooner. The bias add and the GELU each write over the tile they
// read last, the product's copy out of PSUM.
// CHECK-LABEL: func.func @linear_gelu
// CHECK: ktile.matmul
// CHECK: ktile.tensor_copy %[[P:.*]], %{{.*}} {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 512]>, src = #kisa.ap<psum
// CHECK-NEXT: %[[B:.*]] = ktile.alloc : memref<128x512xf32, "sbuf">
// CHECK-NEXT: ktile.dma_copy %[[B]], %arg2 {{.*}}src = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 512]>}
// CHECK: ktile.tensor_tensor %[[P]], %[[P]], %[[B]] {{.*}}op = "add"
// CHECK-NEXT: ktile.activation %[[P]], %[[P]] {{.*}}func = "gelu"
// CHECK-NEXT: ktile.dma_copy %{{.*}}, %[[P]] {dst = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 512], pstride = 700>
// CHECK-COUNT-3: ktile.activation {{.*}}func = "gelu"
// CHECK-NEXT: ktile.dma_copy %{{.*}} {dst = #kisa.ap<hbm, f32, p = 0:72, offset = 360448, dims = [1 x 188], pstride = 700>
// CHECK-NOT: {dst = #kisa.ap<hbm, f32, {{.*}}pstride = 700>
// CHECK: return
func.func @linear_gelu(%x: tensor<200x300xf32>, %w: tensor<700x300xf32>, %b: tensor<700xf32>, %v: tensor<700x8xf32>) -> tensor<200x8xf32> {
  %t = kgraph.transpose %w, [1, 0] : tensor<700x300xf32> -> tensor<300x700xf32>
  %p = kgraph.matmul %x, %t : tensor<200x300xf32>, tensor<300x700xf32> -> tensor<200x700xf32>
  %a = kgraph.add %p, %b : tensor<200x700xf32>, tensor<700xf32>
  %g = kgraph.gelu %a : tensor<200x700xf32>
  %q = kgraph.matmul %g, %v : tensor<200x700xf32>, tensor<700x8xf32> -> tensor<200x8xf32>
  return %q : tensor<200x8xf32>
}

// An optimizer update's outputs are only the step's results: nothing
// waits for its first tiles, so the epilogue takes a row's 700 columns
// (two PSUM banks) at once, and each of its loads and stores is one DMA per
// row tile rather than one per bank.
// CHECK-LABEL: func.func @update_whole_rows
// CHECK: %[[P:.*]] = ktile.alloc : memref<128x700xf32, "sbuf">
// CHECK-NEXT: ktile.tensor_copy %[[P]], %{{.*}} {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 512]>, src = #kisa.ap<psum
// CHECK: ktile.tensor_copy %[[P]], %{{.*}} {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 2048, dims = [1 x 188]>, src = #kisa.ap<psum
// CHECK-NEXT: %[[W:.*]] = ktile.alloc : memref<128x700xf32, "sbuf">
// CHECK-NEXT: ktile.dma_copy %[[W]], %arg0 {{.*}}src = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 700], pstride = 700>}
// CHECK: ktile.tensor_tensor %[[N:.*]], %[[W]], %{{.*}} {{.*}}op = "sub"
// CHECK-NEXT: ktile.dma_copy %arg0, %[[N]] {dst = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 700], pstride = 700>
// CHECK: ktile.dma_copy %arg0, %{{.*}} {dst = #kisa.ap<hbm, f32, p = 0:2, offset = 358400, dims = [1 x 700], pstride = 700>
// CHECK-NOT: ktile.dma_copy %arg0
// CHECK: return
// With too small a budget for whole rows, each PSUM bank's products take
// the update alone.
// SPANS-LABEL: func.func @update_whole_rows
// SPANS: ktile.dma_copy %arg0, %{{.*}} {dst = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 512], pstride = 700>
// SPANS: ktile.dma_copy %arg0, %{{.*}} {dst = #kisa.ap<hbm, f32, p = 0:128, offset = 2048, dims = [1 x 188], pstride = 700>
// SPANS: return
func.func @update_whole_rows(
    %w: tensor<130x700xf32> {kgraph.name = "w", kgraph.role = "parameter"},
    %x: tensor<200x700xf32> {kgraph.name = "x", kgraph.role = "batch_input"},
    %dy: tensor<200x130xf32> {kgraph.name = "dy", kgraph.role = "batch_input"})
    -> (tensor<130x700xf32> {kgraph.aliases = 0 : i64, kgraph.name = "w", kgraph.role = "updated_parameter"}) {
  %dw = kgraph.matmul %dy, %x {transpose_lhs = true} : tensor<200x130xf32>, tensor<200x700xf32> -> tensor<130x700xf32>
  %lr = kgraph.constant dense<0.01> : tensor<f32>
  %s = kgraph.mul %dw, %lr : tensor<130x700xf32>, tensor<f32>
  %wn = kgraph.sub %w, %s : tensor<130x700xf32>, tensor<130x700xf32>
  return %wn : tensor<130x700xf32>
}

// An SGD step on a weight gradient, after the weight's last read: computed
// on the gradient's tiles and stored straight over the weight (%arg0).
// CHECK-LABEL: func.func @update_in_place
// CHECK: ktile.matmul
// CHECK: ktile.tensor_copy {{.*}}src = #kisa.ap<psum
// CHECK: ktile.dma_copy %{{.*}}, %arg0 {dst = #kisa.ap<sbuf
// CHECK: ktile.tensor_tensor {{.*}}op = "sub"
// CHECK-NEXT: ktile.dma_copy %arg0, %{{.*}} {dst = #kisa.ap<hbm
// CHECK: return %{{.*}}, %arg0
func.func @update_in_place(
    %w: tensor<130x300xf32> {kgraph.name = "w", kgraph.role = "parameter"},
    %x: tensor<200x300xf32> {kgraph.name = "x", kgraph.role = "batch_input"},
    %dy: tensor<200x130xf32> {kgraph.name = "dy", kgraph.role = "batch_input"})
    -> (tensor<200x300xf32> {kgraph.name = "dx", kgraph.role = "metric"},
        tensor<130x300xf32> {kgraph.aliases = 0 : i64, kgraph.name = "w", kgraph.role = "updated_parameter"}) {
  %dx = kgraph.matmul %dy, %w : tensor<200x130xf32>, tensor<130x300xf32> -> tensor<200x300xf32>
  %dw = kgraph.matmul %dy, %x {transpose_lhs = true} : tensor<200x130xf32>, tensor<200x300xf32> -> tensor<130x300xf32>
  %lr = kgraph.constant dense<0.01> : tensor<f32>
  %s = kgraph.mul %dw, %lr : tensor<130x300xf32>, tensor<f32>
  %wn = kgraph.sub %w, %s : tensor<130x300xf32>, tensor<130x300xf32>
  return %dx, %wn : tensor<200x300xf32>, tensor<130x300xf32>
}

// The group also needs a reduction of the product, which comes after the
// matmul: the product is stored, and the group's own loop nest reads it.
// CHECK-LABEL: func.func @needs_later_value
// CHECK: ktile.matmul
// CHECK: ktile.tensor_copy {{.*}}src = #kisa.ap<psum
// CHECK-NEXT: ktile.dma_copy %[[P:.*]], %{{.*}} {dst = #kisa.ap<hbm
// CHECK: ktile.tensor_reduce
// CHECK: ktile.dma_copy %{{.*}}, %[[P]] {dst = #kisa.ap<sbuf
// CHECK: ktile.tensor_scalar {{.*}}op0 = "div", scalar0 = 0.000000e+00 : f64, scalar_operands = 1 : i64, scalars = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1]>
func.func @needs_later_value(%x: tensor<200x300xf32>, %v: tensor<300x130xf32>) -> tensor<200x130xf32> {
  %p = kgraph.matmul %x, %v : tensor<200x300xf32>, tensor<300x130xf32> -> tensor<200x130xf32>
  %s = kgraph.reduce_sum %p, [1] {keepdim = true} : tensor<200x130xf32> -> tensor<200x1xf32>
  %d = kgraph.div %p, %s : tensor<200x130xf32>, tensor<200x1xf32>
  return %d : tensor<200x130xf32>
}

// A group ending in the bf16 cast of a matmul operand stores bf16 when
// nothing outside it reads the f32 value (the GELU: half the bytes out and
// into the matmul's loads); when something does (the exp is returned), the
// group stores the f32 value and the matmul's loads narrow it.
// CHECK-LABEL: func.func @narrowed_output
// CHECK: ktile.activation {{.*}}func = "gelu"
// CHECK: ktile.dma_copy %[[C:.*]], %{{.*}} {dst = #kisa.ap<hbm, bf16, {{.*}} : memref<256x96xbf16, "hbm">, memref<128x192xbf16, "sbuf">
// CHECK: ktile.dma_copy %{{.*}}, %[[C]] {dst = #kisa.ap<sbuf, bf16, {{.*}}src = #kisa.ap<hbm, bf16,
// CHECK: ktile.activation {{.*}}func = "exp"
// CHECK: ktile.dma_copy %[[E:.*]], %{{.*}} {dst = #kisa.ap<hbm, f32, {{.*}} : memref<256x96xf32, "hbm">
// CHECK: ktile.dma_copy %{{.*}}, %[[E]] {dst = #kisa.ap<sbuf, bf16, {{.*}}src = #kisa.ap<hbm, f32,
func.func @narrowed_output(%x: tensor<256x96xf32>, %v: tensor<256x96xf32>, %w: tensor<96x8xbf16>) -> (tensor<256x8xbf16>, tensor<256x8xbf16>, tensor<256x96xf32>) {
  %g = kgraph.gelu %x : tensor<256x96xf32>
  %c = kgraph.cast %g : tensor<256x96xf32> -> tensor<256x96xbf16>
  %m = kgraph.matmul %c, %w : tensor<256x96xbf16>, tensor<96x8xbf16> -> tensor<256x8xbf16>
  %e = kgraph.exp %v : tensor<256x96xf32>
  %d = kgraph.cast %e : tensor<256x96xf32> -> tensor<256x96xbf16>
  %n = kgraph.matmul %d, %w : tensor<256x96xbf16>, tensor<96x8xbf16> -> tensor<256x8xbf16>
  return %m, %n, %e : tensor<256x8xbf16>, tensor<256x8xbf16>, tensor<256x96xf32>
}

// A row reduction of an epilogue value (a layer norm's sum of the residual
// stream) folds the row's products as they leave PSUM; the exp only the
// reduction reads is never stored. The two row tiles' sums leave in two
// stores (the 72-row tile alone) after the last column tile. The values
// are only returned, so whole rows fold in one reduction each; with spans
// of one PSUM bank (the small budget), each span's fold is combined with
// the row's spans before.
// CHECK-LABEL: func.func @residual_row_sums
// CHECK: %[[SUMS:.*]] = ktile.alloc : memref<128x2xf32, "sbuf">
// CHECK: ktile.activation %[[E:.*]], %{{.*}}func = "exp"{{.*}}dims = [1 x 700]
// CHECK: ktile.tensor_reduce %[[SUMS]], %[[E]] {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1]>{{.*}}op = "add"
// CHECK: ktile.activation %[[E2:.*]], %{{.*}}func = "exp"{{.*}}dims = [1 x 700]
// CHECK: ktile.tensor_reduce %[[SUMS]], %[[E2]] {dst = #kisa.ap<sbuf, f32, p = 0:72, offset = 4, dims = [1 x 1]>{{.*}}op = "add"
// CHECK: ktile.dma_copy %[[OUT:.*]], %[[SUMS]] {dst = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 1], pstride = 1>
// CHECK-NEXT: ktile.dma_copy %[[OUT]], %[[SUMS]] {dst = #kisa.ap<hbm, f32, p = 0:72, offset = 512
// CHECK-NOT: ktile.dma_copy
// CHECK: return
// SPANS-LABEL: func.func @residual_row_sums
// SPANS: %[[SUMS:.*]] = ktile.alloc : memref<128x2xf32, "sbuf">
// SPANS: ktile.activation %[[E:.*]], %{{.*}}func = "exp"
// SPANS: ktile.tensor_reduce %[[FIRST:.*]], %[[E]] {{.*}}op = "add"
// SPANS: ktile.activation %[[E2:.*]], %{{.*}}func = "exp"{{.*}}dims = [1 x 188]
// SPANS: ktile.tensor_reduce %[[SECOND:.*]], %[[E2]] {{.*}}op = "add"
// SPANS-NEXT: ktile.tensor_tensor %[[SUMS]], %[[FIRST]], %[[SECOND]] {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1]>{{.*}}op = "add"
// SPANS: ktile.dma_copy %[[OUT:.*]], %[[SUMS]] {dst = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 1], pstride = 1>
// SPANS-NEXT: ktile.dma_copy %[[OUT]], %[[SUMS]] {dst = #kisa.ap<hbm, f32, p = 0:72, offset = 512
// SPANS-NOT: ktile.dma_copy
// SPANS: return
func.func @residual_row_sums(%x: tensor<200x300xf32>, %w: tensor<300x700xf32>, %r: tensor<200x700xf32>) -> (tensor<200x700xf32>, tensor<200x1xf32>) {
  %p = kgraph.matmul %x, %w : tensor<200x300xf32>, tensor<300x700xf32> -> tensor<200x700xf32>
  %a = kgraph.add %p, %r : tensor<200x700xf32>, tensor<200x700xf32>
  %e = kgraph.exp %a : tensor<200x700xf32>
  %s = kgraph.reduce_sum %e, [1] {keepdim = true} : tensor<200x700xf32> -> tensor<200x1xf32>
  return %a, %s : tensor<200x700xf32>, tensor<200x1xf32>
}

// A lone op reading a bf16 product (a GELU's backward on the product that
// computes its output gradient, in a model kept in bf16) is the product's
// epilogue too: each output tile leaves PSUM rounded to the product's
// bf16, the derivative multiplies it, and only the result is stored. The
// one HBM buffer the function allocates is its result.
// CHECK-LABEL: func.func @lone_reader
// CHECK: ktile.alloc : memref<200x300xbf16, "hbm">
// CHECK-NOT: memref<200x300xbf16, "hbm">
// CHECK: ktile.matmul
// CHECK: ktile.tensor_copy %[[D:.*]], %{{.*}} {dst = #kisa.ap<sbuf, bf16, p = 0:128, offset = 0, dims = [1 x 300]>, src = #kisa.ap<psum
// CHECK: ktile.activation %[[G:.*]], %{{.*}} {{.*}}func = "gelu_derivative"
// CHECK-NEXT: ktile.tensor_tensor %[[D]], %[[D]], %[[G]] {{.*}}op = "mul"
// CHECK-NEXT: ktile.dma_copy %{{.*}}, %[[D]] {dst = #kisa.ap<hbm, bf16, p = 0:128, offset = 0, dims = [1 x 300], pstride = 300>
// CHECK-NOT: ktile.alloc : memref<200x300xbf16, "hbm">
// CHECK: return
func.func @lone_reader(%dy: tensor<200x96xbf16>, %w: tensor<96x300xbf16>, %z: tensor<200x300xbf16>) -> tensor<200x300xbf16> {
  %p = kgraph.matmul %dy, %w : tensor<200x96xbf16>, tensor<96x300xbf16> -> tensor<200x300xbf16>
  %d = kgraph.gelu_backward %p, %z : tensor<200x300xbf16>
  return %d : tensor<200x300xbf16>
}
