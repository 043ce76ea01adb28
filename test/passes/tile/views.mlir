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
