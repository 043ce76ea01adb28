// RUN: kiln-opt %s --convert-kgraph-to-ktile | FileCheck %s

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
