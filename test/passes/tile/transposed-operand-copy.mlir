// RUN: kiln-opt %s --kgraph-plan-tiles --convert-kgraph-to-ktile=sbuf-budget=2048 | FileCheck %s
// RUN: kiln-opt %s --kgraph-plan-tiles --convert-kgraph-to-ktile | FileCheck %s --check-prefix=KEPT
// RUN: kiln-opt %s --kgraph-plan-tiles "--convert-kgraph-to-ktile=sbuf-budget=2048 hbm-trades=false" | FileCheck %s --check-prefix=NOTRADE

// A weight stored [N, K] (a linear layer's, read transposed) is the moving
// operand, which only TensorE transposes bring K-major. The budget keeps
// neither all of it nor more than two row tiles of the stationary operand
// in SBUF, so four row blocks read it. The first block loads its rows,
// transposes them and stores the K-major slices into a copy ([256 x 600]
// bf16); the other three load the copy as it is, one DMA a slice, and
// never read the weight or transpose it again.
// CHECK-LABEL: func.func @transposed_weight
// CHECK: %[[COPY:[0-9]+]] = ktile.alloc : memref<256x600xbf16, "hbm">
// CHECK: ktile.dma_copy %[[ROWS:[0-9]+]], %arg1 {dst = #kisa.ap<sbuf, bf16, p = 0:128, offset = 0, dims = [1 x 256]>, src = #kisa.ap<hbm, bf16, p = 0:128, offset = 0, dims = [1 x 256], pstride = 256>}
// CHECK: ktile.transpose %{{[0-9]+}}, %[[ROWS]]
// CHECK: ktile.dma_copy %[[COPY]], %{{[0-9]+}} {dst = #kisa.ap<hbm, bf16, p = 0:128, offset = 0, dims = [1 x 512], pstride = 600>, src = #kisa.ap<sbuf, bf16, p = 0:128, offset = 0, dims = [1 x 512]>}
// CHECK: ktile.dma_copy %[[COPY]], %{{[0-9]+}} {dst = #kisa.ap<hbm, bf16, p = 0:128, offset = 153600, dims = [1 x 512], pstride = 600>
// CHECK: ktile.dma_copy %[[COPY]], %{{[0-9]+}} {dst = #kisa.ap<hbm, bf16, p = 0:128, offset = 1024, dims = [1 x 88], pstride = 600>
// CHECK-NOT: %arg1
// CHECK: ktile.dma_copy %{{[0-9]+}}, %[[COPY]] {dst = #kisa.ap<sbuf, bf16, p = 0:128, offset = 0, dims = [1 x 512]>, src = #kisa.ap<hbm, bf16, p = 0:128, offset = 0, dims = [1 x 512], pstride = 600>}
// CHECK-COUNT-2: ktile.dma_copy %{{[0-9]+}}, %[[COPY]] {dst = #kisa.ap<sbuf, bf16, p = 0:128, offset = 0, dims = [1 x 512]>, src = #kisa.ap<hbm, bf16, p = 0:128, offset = 0, dims = [1 x 512], pstride = 600>}
// CHECK-NOT: %arg1
// CHECK: return
func.func @transposed_weight(%x: tensor<1024x256xbf16>, %w: tensor<600x256xbf16>) -> tensor<1024x600xbf16> {
  %y = kgraph.matmul %x, %w {transpose_rhs = true} : tensor<1024x256xbf16>, tensor<600x256xbf16> -> tensor<1024x600xbf16>
  return %y : tensor<1024x600xbf16>
}

// With the default budget the whole weight fits K-major in SBUF: it is
// loaded and transposed once and kept for every row block, with no copy.
// KEPT-LABEL: func.func @transposed_weight
// KEPT-NOT: memref<256x600xbf16, "hbm">
// KEPT: return

// Without HBM trades (the compile's second try when the HBM plan
// overflows) every row block transposes the weight again: no copy.
// NOTRADE-LABEL: func.func @transposed_weight
// NOTRADE-NOT: memref<256x600xbf16, "hbm">
// NOTRADE: return

// A weight the batch dims broadcast is copied by the first batch element
// and read from the copy by every block of the others: ten transposes of
// it in all (five row tiles, two K slices), beside the sixteen of each
// element's own rows.
// CHECK-LABEL: func.func @broadcast_weight
// CHECK-COUNT-1: ktile.alloc : memref<256x600xbf16, "hbm">
// CHECK-NOT: ktile.alloc : memref<256x600xbf16, "hbm">
// CHECK-COUNT-42: ktile.transpose
// CHECK-NOT: ktile.transpose
// CHECK: return
func.func @broadcast_weight(%x: tensor<2x1024x256xbf16>, %w: tensor<600x256xbf16>) -> tensor<2x1024x600xbf16> {
  %y = kgraph.matmul %x, %w {transpose_rhs = true} : tensor<2x1024x256xbf16>, tensor<600x256xbf16> -> tensor<2x1024x600xbf16>
  return %y : tensor<2x1024x600xbf16>
}
