// RUN: kiln-opt %s --kgraph-plan-tiles --convert-kgraph-to-ktile | FileCheck %s

// Each collective becomes one collective instruction on whole HBM buffers;
// one of the tensor-parallel group says so (group 1), the data-parallel
// group's is the instruction's default.

// CHECK-LABEL: func.func @row_parallel
func.func @row_parallel(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>) -> (tensor<8x32xf32>, tensor<8x32xf32>) {
  %p = kgraph.matmul %x, %w : tensor<8x16xf32>, tensor<16x32xf32> -> tensor<8x32xf32>
  // CHECK: ktile.collective {{.*}}group = 1 : i64, kind = "all_reduce_sum"
  %y = kgraph.all_reduce %p {group = "tensor"} : tensor<8x32xf32>
  // CHECK: ktile.collective
  // CHECK-NOT: group
  // CHECK-SAME: kind = "all_reduce_mean"
  %m = kgraph.all_reduce %y {reduction = "mean"} : tensor<8x32xf32>
  return %y, %m : tensor<8x32xf32>, tensor<8x32xf32>
}

// CHECK-LABEL: func.func @vocabulary_block
func.func @vocabulary_block(%starts: tensor<4xi32>, %v: tensor<8x4xf32>) -> (tensor<1xi32>, tensor<32x4xf32>) {
  // CHECK: ktile.collective {{.*}}group = 1 : i64, kind = "worker_shard"
  %mine = kgraph.worker_shard %starts {group = "tensor"} : tensor<4xi32> -> tensor<1xi32>
  // CHECK: ktile.collective {{.*}}group = 1 : i64, kind = "all_gather"
  %all = kgraph.all_gather %v {group = "tensor"} : tensor<8x4xf32> -> tensor<32x4xf32>
  return %mine, %all : tensor<1xi32>, tensor<32x4xf32>
}
