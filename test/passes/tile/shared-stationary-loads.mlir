// RUN: kiln-opt %s --kgraph-plan-tiles --convert-kgraph-to-ktile --ktile-fuse-tensor-scalars --ktile-reuse-dead-tiles | FileCheck %s
// RUN: kiln-opt %s --kgraph-plan-tiles --convert-kgraph-to-ktile=sbuf-budget=1536 --ktile-fuse-tensor-scalars --ktile-reuse-dead-tiles | FileCheck %s --check-prefix=TIGHT

// A weight gradient's transposed activations (M innermost in HBM) with a
// small moving operand kept in SBUF: the blocks are two row tiles, but each
// DMA of the stationary operand loads four (512 columns, not 256), so its
// fixed cost is paid on twice the bytes; two blocks share it.
// CHECK-LABEL: func.func @shared_stationary_loads
// CHECK: ktile.dma_copy %[[S0:.*]], %arg0 {dst = #kisa.ap<sbuf, bf16, p = 0:128, offset = 0, dims = [1 x 512]>, src = #kisa.ap<hbm, bf16, p = 0:128, offset = 0, dims = [1 x 512], pstride = 1024>}
// CHECK-COUNT-2: ktile.matmul %{{.*}}, %[[S0]], %{{.*}}
// CHECK-NOT: %arg0
// CHECK-COUNT-2: ktile.matmul %{{.*}}, %[[S0]], %{{.*}}
// CHECK: ktile.dma_copy %[[S1:.*]], %arg0 {dst = #kisa.ap<sbuf, bf16, p = 0:128, offset = 0, dims = [1 x 512]>, src = #kisa.ap<hbm, bf16, p = 0:128, offset = 1024, dims = [1 x 512], pstride = 1024>}
// CHECK-COUNT-4: ktile.matmul %{{.*}}, %[[S1]], %{{.*}}
// CHECK-NOT: %arg0
// CHECK: return

// When the budget keeps only three row tiles of it, a load still covers
// whole blocks: one block of two per DMA, never a block's second tile
// beyond what was loaded.
// TIGHT-LABEL: func.func @shared_stationary_loads
// TIGHT-COUNT-4: ktile.dma_copy %{{.*}}, %arg0 {dst = #kisa.ap<sbuf, bf16, p = 0:128, offset = 0, dims = [1 x 256]>
// TIGHT-NOT: %arg0
// TIGHT: return
func.func @shared_stationary_loads(%dy: tensor<128x1024xbf16>, %x: tensor<128x256xbf16>) -> tensor<1024x256xbf16> {
  %g = kgraph.matmul %dy, %x {transpose_lhs = true} : tensor<128x1024xbf16>, tensor<128x256xbf16> -> tensor<1024x256xbf16>
  return %g : tensor<1024x256xbf16>
}
