// RUN: kiln-opt %s --kgraph-plan-tiles --convert-kgraph-to-ktile --ktile-fuse-tensor-scalars --ktile-reuse-dead-tiles | FileCheck %s

// A weight read through bf16 casts by a forward product (transposed, by
// two products sharing the cast) and a backward one (as it is): the first
// product's loads narrow it and also store the bf16 rows into a copy of
// the weight's buffer; the later products read the copy, half the bytes,
// and never the f32 weight.
// CHECK-LABEL: func.func @weight_read_three_times
// CHECK: %[[COPY:.*]] = ktile.alloc : memref<200x300xbf16, "hbm">
// CHECK: ktile.dma_copy %[[R0:.*]], %arg1 {dst = #kisa.ap<sbuf, bf16, p = 0:128, offset = 0, dims = [1 x 256]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 256], pstride = 300>}
// CHECK-NEXT: ktile.dma_copy %[[COPY]], %[[R0]] {dst = #kisa.ap<hbm, bf16, p = 0:128, offset = 0, dims = [1 x 256], pstride = 300>, src = #kisa.ap<sbuf, bf16, p = 0:128, offset = 0, dims = [1 x 256]>}
// CHECK-COUNT-3: ktile.dma_copy %[[COPY]], %{{.*}} {dst = #kisa.ap<hbm, bf16
// CHECK-NOT: %arg1
// CHECK-NOT: ktile.alloc : memref<200x300xbf16
// CHECK: ktile.dma_copy %{{.*}}, %[[COPY]] {dst = #kisa.ap<sbuf, bf16, p = 0:128, offset = 0, dims = [1 x 300]>, src = #kisa.ap<hbm, bf16, p = 0:128, offset = 0, dims = [1 x 300], pstride = 300>}
// CHECK-NOT: %arg1
// CHECK-NOT: ktile.alloc : memref<200x300xbf16
// CHECK: ktile.dma_copy %{{.*}}, %[[COPY]] {dst = #kisa.ap<sbuf, bf16, p = 0:128, offset = 0, dims = [1 x 256]>
// CHECK-NOT: %arg1
// CHECK-NOT: ktile.alloc : memref<200x300xbf16
// CHECK: return
func.func @weight_read_three_times(%x: tensor<64x300xf32>, %w: tensor<200x300xf32>, %g: tensor<64x200xf32>, %x2: tensor<16x300xf32>) -> (tensor<64x200xf32>, tensor<64x300xf32>, tensor<16x200xf32>) {
  %xb = kgraph.cast %x : tensor<64x300xf32> -> tensor<64x300xbf16>
  %wt = kgraph.transpose %w, [1, 0] : tensor<200x300xf32> -> tensor<300x200xf32>
  %wtb = kgraph.cast %wt : tensor<300x200xf32> -> tensor<300x200xbf16>
  %y = kgraph.matmul %xb, %wtb : tensor<64x300xbf16>, tensor<300x200xbf16> -> tensor<64x200xbf16>
  %yf = kgraph.cast %y : tensor<64x200xbf16> -> tensor<64x200xf32>
  %gb = kgraph.cast %g : tensor<64x200xf32> -> tensor<64x200xbf16>
  %wb = kgraph.cast %w : tensor<200x300xf32> -> tensor<200x300xbf16>
  %dx = kgraph.matmul %gb, %wb : tensor<64x200xbf16>, tensor<200x300xbf16> -> tensor<64x300xbf16>
  %dxf = kgraph.cast %dx : tensor<64x300xbf16> -> tensor<64x300xf32>
  %x2b = kgraph.cast %x2 : tensor<16x300xf32> -> tensor<16x300xbf16>
  %y2 = kgraph.matmul %x2b, %wtb : tensor<16x300xbf16>, tensor<300x200xbf16> -> tensor<16x200xbf16>
  %y2f = kgraph.cast %y2 : tensor<16x200xbf16> -> tensor<16x200xf32>
  return %yf, %dxf, %y2f : tensor<64x200xf32>, tensor<64x300xf32>, tensor<16x200xf32>
}

// A weight one product reads is loaded narrowed and not copied.
// CHECK-LABEL: func.func @weight_read_once
// CHECK-NOT: bf16, "hbm">
// CHECK: return
func.func @weight_read_once(%x: tensor<64x300xf32>, %w: tensor<200x300xf32>) -> tensor<64x200xf32> {
  %xb = kgraph.cast %x : tensor<64x300xf32> -> tensor<64x300xbf16>
  %wt = kgraph.transpose %w, [1, 0] : tensor<200x300xf32> -> tensor<300x200xf32>
  %wtb = kgraph.cast %wt : tensor<300x200xf32> -> tensor<300x200xbf16>
  %y = kgraph.matmul %xb, %wtb : tensor<64x300xbf16>, tensor<300x200xbf16> -> tensor<64x200xbf16>
  %yf = kgraph.cast %y : tensor<64x200xbf16> -> tensor<64x200xf32>
  return %yf : tensor<64x200xf32>
}
