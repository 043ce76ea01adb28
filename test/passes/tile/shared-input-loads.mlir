// RUN: kiln-opt %s --kgraph-plan-tiles --convert-kgraph-to-ktile --ktile-fuse-tensor-scalars --ktile-reuse-dead-tiles | FileCheck %s

// Two inputs of a group that are the same elements of the same buffer (here
// two reshapes of one value; in BERT, a layer norm's backward reading its
// saved normalized input directly and through a view) share one load per
// tile, in a matmul's epilogue and in a loop nest of its own alike.
// CHECK-LABEL: func.func @epilogue_reads_one_value_twice
// CHECK: ktile.dma_copy %[[X:.*]], %arg2 {{.*}}offset = 0, dims = [1 x 64], pstride = 64>
// CHECK-NOT: ktile.dma_copy {{.*}}, %arg2
// CHECK: ktile.tensor_tensor %[[S:.*]], %{{.*}}, %[[X]] {{.*}}op = "add"
// CHECK: ktile.tensor_tensor %{{.*}}, %[[S]], %[[X]] {{.*}}op = "mul"
// CHECK: ktile.dma_copy %[[X2:.*]], %arg2 {{.*}}offset = 32768, dims = [1 x 64], pstride = 64>
// CHECK-NOT: ktile.dma_copy {{.*}}, %arg2
// CHECK: return
func.func @epilogue_reads_one_value_twice(%a: tensor<256x32xf32>, %b: tensor<32x64xf32>, %x: tensor<2x128x64xf32>) -> tensor<256x64xf32> {
  %p = kgraph.matmul %a, %b : tensor<256x32xf32>, tensor<32x64xf32> -> tensor<256x64xf32>
  %f1 = kgraph.reshape %x : tensor<2x128x64xf32> -> tensor<256x64xf32>
  %f2 = kgraph.reshape %x : tensor<2x128x64xf32> -> tensor<256x64xf32>
  %s = kgraph.add %p, %f1 {kgraph.fusion = 0 : i64} : tensor<256x64xf32>, tensor<256x64xf32>
  %t = kgraph.mul %s, %f2 {kgraph.fusion = 0 : i64} : tensor<256x64xf32>, tensor<256x64xf32>
  return %t : tensor<256x64xf32>
}

// CHECK-LABEL: func.func @group_reads_one_value_twice
// CHECK: ktile.dma_copy %[[Y:.*]], %arg0
// CHECK: ktile.dma_copy %[[X:.*]], %arg1
// CHECK-NOT: ktile.dma_copy {{.*}}, %arg1
// CHECK: ktile.tensor_tensor %[[S:.*]], %[[Y]], %[[X]] {{.*}}op = "add"
// CHECK: ktile.tensor_tensor %{{.*}}, %[[S]], %[[X]] {{.*}}op = "mul"
// CHECK: return
func.func @group_reads_one_value_twice(%y: tensor<256x64xf32>, %x: tensor<2x128x64xf32>) -> tensor<256x64xf32> {
  %f1 = kgraph.reshape %x : tensor<2x128x64xf32> -> tensor<256x64xf32>
  %f2 = kgraph.reshape %x : tensor<2x128x64xf32> -> tensor<256x64xf32>
  %s = kgraph.add %y, %f1 {kgraph.fusion = 0 : i64} : tensor<256x64xf32>, tensor<256x64xf32>
  %t = kgraph.mul %s, %f2 {kgraph.fusion = 0 : i64} : tensor<256x64xf32>, tensor<256x64xf32>
  return %t : tensor<256x64xf32>
}
