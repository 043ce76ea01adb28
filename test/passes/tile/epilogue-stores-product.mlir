// RUN: kiln-opt %s --kgraph-plan-tiles --convert-kgraph-to-ktile --ktile-fuse-tensor-scalars --ktile-reuse-dead-tiles | FileCheck %s

// A bf16 product whose epilogue (the bias and GELU of a linear layer) is
// its first reader, and which a later group reads too (the GELU's backward
// recomputing its input, see kgraph-rematerialize): the epilogue runs on
// the product's tiles as usual and also stores them, rounded to bf16 as
// the graph has them, once per tile; the later group loads them from there.
// Neither the product in f32 nor the GELU's input goes to HBM.
// CHECK-LABEL: func.func @product_read_later
// CHECK: %[[Y:.*]] = ktile.alloc : memref<200x300xf32, "hbm">
// CHECK-NEXT: %[[STORED:.*]] = ktile.alloc : memref<200x300xbf16, "hbm">
// CHECK: ktile.tensor_copy %[[P:.*]], %{{.*}} {dst = #kisa.ap<sbuf, bf16, p = 0:128, offset = 0, dims = [1 x 300]>, src = #kisa.ap<psum
// CHECK: ktile.activation %[[G:.*]], %{{.*}} {{.*}}func = "gelu"
// CHECK-NEXT: ktile.dma_copy %[[Y]], %[[G]]
// CHECK-NEXT: ktile.dma_copy %[[STORED]], %[[P]] {dst = #kisa.ap<hbm, bf16, p = 0:128, offset = 0, dims = [1 x 300], pstride = 300>
// CHECK: ktile.dma_copy %[[STORED]], %{{.*}} {dst = #kisa.ap<hbm, bf16, p = 0:72, offset = 76800, dims = [1 x 300], pstride = 300>
// CHECK-NEXT: %[[DH:.*]] = ktile.alloc : memref<200x300xf32, "hbm">
// CHECK-NEXT: %{{.*}} = ktile.alloc
// CHECK-NEXT: ktile.dma_copy %{{.*}}, %[[STORED]] {dst = #kisa.ap<sbuf, bf16
// CHECK: func = "gelu_derivative"
// CHECK: return %[[Y]], %[[DH]]
func.func @product_read_later(%x: tensor<200x64xbf16>, %w: tensor<64x300xbf16>, %b: tensor<300xf32>, %g: tensor<200x300xf32>) -> (tensor<200x300xf32>, tensor<200x300xf32>) {
  %p = kgraph.matmul %x, %w : tensor<200x64xbf16>, tensor<64x300xbf16> -> tensor<200x300xbf16>
  %wide = kgraph.cast %p {kgraph.fusion = 0 : i64} : tensor<200x300xbf16> -> tensor<200x300xf32>
  %h = kgraph.add %wide, %b {kgraph.fusion = 0 : i64} : tensor<200x300xf32>, tensor<300xf32>
  %y = kgraph.gelu %h {kgraph.fusion = 0 : i64} : tensor<200x300xf32>
  %wide2 = kgraph.cast %p {kgraph.fusion = 1 : i64} : tensor<200x300xbf16> -> tensor<200x300xf32>
  %h2 = kgraph.add %wide2, %b {kgraph.fusion = 1 : i64} : tensor<200x300xf32>, tensor<300xf32>
  %d = kgraph.gelu_backward %g, %h2 {kgraph.fusion = 1 : i64} : tensor<200x300xf32>
  return %y, %d : tensor<200x300xf32>, tensor<200x300xf32>
}
