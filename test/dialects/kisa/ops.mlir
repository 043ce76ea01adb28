// RUN: kiln-opt %s | kiln-opt | FileCheck %s
// Every kisa op parses, verifies, prints and parses back.

// CHECK-LABEL: kisa.program @all_ops
// CHECK-SAME: hbm_bytes = 65536 : i64, semaphores = 4 : i64
kisa.program @all_ops attributes {target = "trn1", hbm_bytes = 65536, semaphores = 4} {
  // CHECK: kisa.buffer "x" {dtype = bf16, offset = 0 : i64, role = "input", shape = array<i64: 4, 8>}
  kisa.buffer "x" {offset = 0, dtype = bf16, shape = array<i64: 4, 8>, role = "input"}
  // CHECK: kisa.buffer "c" {dtype = f32, offset = 1024 : i64, role = "constant", shape = array<i64: 2>, value = dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>}
  kisa.buffer "c" {offset = 1024, dtype = f32, shape = array<i64: 2>, role = "constant", value = dense<[1.0, 2.0]> : tensor<2xf32>}
  // CHECK: kisa.dma_copy {dst = #kisa.ap<sbuf, bf16, p = 0:4, offset = 0, dims = [1 x 8]>, queue = 3 : i64, signal = array<i64: 0>, src = #kisa.ap<hbm, bf16, p = 0:4, offset = 0, dims = [1 x 8], pstride = 8>}
  kisa.dma_copy {queue = 3, signal = array<i64: 0>, dst = #kisa.ap<sbuf, bf16, p = 0:4, offset = 0, dims = [1 x 8]>, src = #kisa.ap<hbm, bf16, p = 0:4, offset = 0, dims = [1 x 8], pstride = 8>}
  // CHECK: kisa.matmul {accumulate = true
  kisa.matmul {accumulate = true, wait_sem = array<i64: 0>, wait_value = array<i64: 1>, dst = #kisa.ap<psum, f32, p = 0:8, offset = 0, dims = [1 x 8]>, stationary = #kisa.ap<sbuf, bf16, p = 0:4, offset = 0, dims = [1 x 8]>, moving = #kisa.ap<sbuf, bf16, p = 0:4, offset = 0, dims = [1 x 8]>}
  // CHECK: kisa.transpose
  kisa.transpose {dst = #kisa.ap<psum, f32, p = 0:8, offset = 2048, dims = [1 x 4]>, src = #kisa.ap<sbuf, bf16, p = 0:4, offset = 0, dims = [1 x 8]>}
  // CHECK: kisa.activation {bias = 5.000000e-01 : f64, dst = {{.*}}, func = "gelu_tanh", reduce_dst = {{.*}}, scale = 2.000000e+00 : f64
  kisa.activation {func = "gelu_tanh", scale = 2.0, bias = 0.5, dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 64, dims = [1 x 8]>, src = #kisa.ap<psum, f32, p = 0:8, offset = 0, dims = [1 x 8]>, reduce_dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 128, dims = [1 x 1]>}
  // CHECK: kisa.tensor_tensor {dst = {{.*}}, engine = "gpsimd", lhs = {{.*}}, op = "max"
  kisa.tensor_tensor {engine = "gpsimd", op = "max", dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 256, dims = [1 x 8]>, lhs = #kisa.ap<sbuf, f32, p = 0:8, offset = 64, dims = [1 x 8]>, rhs = #kisa.ap<sbuf, f32, p = 0:8, offset = 128, dims = [0 x 8]>}
  // CHECK: kisa.tensor_scalar {dst = {{.*}}, op0 = "mul", op1 = "add", scalar0 = 3.000000e+00 : f64, scalar1 = 1.000000e+00 : f64
  kisa.tensor_scalar {op0 = "mul", scalar0 = 3.0, op1 = "add", scalar1 = 1.0, dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 256, dims = [1 x 8]>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 256, dims = [1 x 8]>}
  // CHECK: kisa.tensor_scalar {dst = {{.*}}, op0 = "sub", op1 = "mul", scalar0 = 0.000000e+00 : f64, scalar1 = 2.000000e+00 : f64, scalar_operands = 1 : i64, scalars = #kisa.ap<sbuf, f32, p = 0:8, offset = 128, dims = [1 x 1]>
  kisa.tensor_scalar {op0 = "sub", scalar0 = 0.0, op1 = "mul", scalar1 = 2.0, scalar_operands = 1, dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 256, dims = [1 x 8]>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 256, dims = [1 x 8]>, scalars = #kisa.ap<sbuf, f32, p = 0:8, offset = 128, dims = [1 x 1]>}
  // CHECK: kisa.tensor_reduce {dst = {{.*}}, op = "add"
  kisa.tensor_reduce {op = "add", dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 512, dims = [1 x 2]>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 256, dims = [4 x 2, 1 x 4]>}
  // CHECK: kisa.tensor_copy {dst = {{.*}}, engine = "scalar"
  kisa.tensor_copy {engine = "scalar", dst = #kisa.ap<sbuf, bf16, p = 0:8, offset = 768, dims = [1 x 8]>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 256, dims = [1 x 8]>}
  // CHECK: kisa.iota {base = 1 : i64, dst = {{.*}}, free_step = 1 : i64, partition_step = 8 : i64}
  kisa.iota {base = 1, partition_step = 8, free_step = 1, dst = #kisa.ap<sbuf, i32, p = 0:8, offset = 1024, dims = [1 x 8]>}
  // CHECK: kisa.random {counter = 7 : i64, dst = {{.*}}, free_step = 1 : i64, partition_step = 8 : i64, seed = #kisa.ap<sbuf, i32, p = 0:8, offset = 1056, dims = [1 x 1]>}
  kisa.random {counter = 7, partition_step = 8, free_step = 1, dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 1024, dims = [1 x 8]>, seed = #kisa.ap<sbuf, i32, p = 0:8, offset = 1056, dims = [1 x 1]>}
  // CHECK: kisa.random {counter = 7 : i64, dst = {{.*}}dims = [4 x 2, 1 x 4]>, free_step = 1 : i64, group_step = 1.200000e+01 : f64, partition_step = 8 : i64
  kisa.random {counter = 7, partition_step = 8, free_step = 1, group_step = 12.0, dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 1024, dims = [4 x 2, 1 x 4]>, seed = #kisa.ap<sbuf, i32, p = 0:8, offset = 1056, dims = [1 x 1]>}
  // CHECK: kisa.dma_gather {dst = {{.*}}, index_bound = 100 : i64, index_stride = 16 : i64, indices = #kisa.ap<sbuf, i32, p = 0:8, offset = 1056, dims = [1 x 1]>, src = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 16]>}
  kisa.dma_gather {index_stride = 16, index_bound = 100, dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 1024, dims = [1 x 16]>, src = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 16], pstride = 0>, indices = #kisa.ap<sbuf, i32, p = 0:8, offset = 1056, dims = [1 x 1]>}
  // CHECK: kisa.dma_scatter {dst = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 16]>, index_bound = 100 : i64, index_stride = 16 : i64, indices = {{.*}}, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 1024, dims = [1 x 16]>}
  kisa.dma_scatter {index_stride = 16, index_bound = 100, dst = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 16], pstride = 0>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 1024, dims = [1 x 16]>, indices = #kisa.ap<sbuf, i32, p = 0:8, offset = 1056, dims = [1 x 1]>}
  // CHECK: kisa.memset {dst = {{.*}}, engine = "vector", value = -1.000000e+00 : f64}
  kisa.memset {engine = "vector", value = -1.0, dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 1024, dims = [1 x 8]>}
  // CHECK: kisa.affine_select {compare = "ge", dst = {{.*}}, fill = -1.000000e+04 : f64, free_step = -1 : i64, partition_step = 1 : i64
  kisa.affine_select {compare = "ge", fill = -10000.0, partition_step = 1, free_step = -1, dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 1024, dims = [1 x 8]>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 256, dims = [1 x 8]>}
  // CHECK: kisa.partition_reduce {dst = {{.*}}, op = "add"
  kisa.partition_reduce {op = "add", dst = #kisa.ap<sbuf, f32, p = 0:1, offset = 2048, dims = [1 x 8]>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 256, dims = [1 x 8]>}
  // CHECK: kisa.partition_broadcast
  kisa.partition_broadcast {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 2048, dims = [1 x 8]>, src = #kisa.ap<sbuf, f32, p = 0:1, offset = 2048, dims = [1 x 8]>}
  // CHECK: kisa.collective {dst = {{.*}}, kind = "all_reduce_mean", queue = 5 : i64
  kisa.collective {kind = "all_reduce_mean", queue = 5, dst = #kisa.ap<hbm, f32, p = 0:1, offset = 4096, dims = [1 x 64]>, src = #kisa.ap<hbm, f32, p = 0:1, offset = 8192, dims = [1 x 64]>}
  // CHECK: kisa.collective {dst = {{.*}}, kind = "all_gather"
  kisa.collective {kind = "all_gather", queue = 5, dst = #kisa.ap<hbm, i32, p = 0:1, offset = 12288, dims = [1 x 256]>, src = #kisa.ap<hbm, i32, p = 0:1, offset = 8192, dims = [1 x 64]>}
  // CHECK: kisa.collective {dst = {{.*}}, kind = "reduce_scatter_mean"
  kisa.collective {kind = "reduce_scatter_mean", queue = 5, dst = #kisa.ap<hbm, f32, p = 0:1, offset = 4096, dims = [1 x 16]>, src = #kisa.ap<hbm, f32, p = 0:1, offset = 8192, dims = [1 x 64]>}
  // CHECK: kisa.collective {dst = {{.*}}, group = 1 : i64, kind = "all_reduce_sum"
  kisa.collective {kind = "all_reduce_sum", group = 1, queue = 5, dst = #kisa.ap<hbm, f32, p = 0:1, offset = 4096, dims = [1 x 64]>, src = #kisa.ap<hbm, f32, p = 0:1, offset = 8192, dims = [1 x 64]>}
  // CHECK: kisa.collective {dst = {{.*}}, kind = "worker_shard"
  kisa.collective {kind = "worker_shard", queue = 5, dst = #kisa.ap<hbm, f32, p = 0:1, offset = 4096, dims = [1 x 16]>, src = #kisa.ap<hbm, f32, p = 0:1, offset = 8192, dims = [1 x 64]>}
}
