// RUN: kiln-opt %s | kiln-opt | FileCheck %s
// Every kgraph op parses, verifies, prints and parses back.

// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%a: tensor<4x8xf32>, %b: tensor<8xf32>, %i: tensor<4xi32>, %m: tensor<4x8xi1>) {
  // CHECK: kgraph.constant dense<1.000000e+00> : tensor<f32>
  %c = kgraph.constant dense<1.0> : tensor<f32>
  // CHECK: kgraph.iota {dim = 1 : i64} : tensor<4x8xi64>
  %iota = kgraph.iota {dim = 1} : tensor<4x8xi64>
  // CHECK: kgraph.neg %{{.*}} : tensor<4x8xf32>
  %0 = kgraph.neg %a : tensor<4x8xf32>
  // CHECK: kgraph.abs
  %1 = kgraph.abs %i : tensor<4xi32>
  // CHECK: kgraph.sign
  %2 = kgraph.sign %a : tensor<4x8xf32>
  // CHECK: kgraph.exp
  %3 = kgraph.exp %a : tensor<4x8xf32>
  // CHECK: kgraph.log
  %4 = kgraph.log %a : tensor<4x8xf32>
  // CHECK: kgraph.log1p
  %5 = kgraph.log1p %a : tensor<4x8xf32>
  // CHECK: kgraph.sqrt
  %6 = kgraph.sqrt %a : tensor<4x8xf32>
  // CHECK: kgraph.rsqrt
  %7 = kgraph.rsqrt %a : tensor<4x8xf32>
  // CHECK: kgraph.reciprocal
  %8 = kgraph.reciprocal %a : tensor<4x8xf32>
  // CHECK: kgraph.tanh
  %9 = kgraph.tanh %a : tensor<4x8xf32>
  // CHECK: kgraph.sigmoid
  %10 = kgraph.sigmoid %a : tensor<4x8xf32>
  // CHECK: kgraph.relu
  %11 = kgraph.relu %a : tensor<4x8xf32>
  // CHECK: kgraph.erf
  %12 = kgraph.erf %a : tensor<4x8xf32>
  // CHECK: kgraph.sin
  %13 = kgraph.sin %a : tensor<4x8xf32>
  // CHECK: kgraph.cos
  %14 = kgraph.cos %a : tensor<4x8xf32>
  // CHECK: kgraph.not %{{.*}} : tensor<4x8xi1>
  %15 = kgraph.not %m : tensor<4x8xi1>
  // CHECK: kgraph.gelu %{{.*}} {approximate = "tanh"} : tensor<4x8xf32>
  %16 = kgraph.gelu %a {approximate = "tanh"} : tensor<4x8xf32>
  // CHECK: kgraph.gelu %{{.*}} : tensor<4x8xf32>
  %17 = kgraph.gelu %a : tensor<4x8xf32>
  // CHECK: kgraph.add %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<8xf32>
  %18 = kgraph.add %a, %b : tensor<4x8xf32>, tensor<8xf32>
  // CHECK: kgraph.sub
  %19 = kgraph.sub %a, %c : tensor<4x8xf32>, tensor<f32>
  // CHECK: kgraph.mul
  %20 = kgraph.mul %a, %b : tensor<4x8xf32>, tensor<8xf32>
  // CHECK: kgraph.div
  %21 = kgraph.div %a, %b : tensor<4x8xf32>, tensor<8xf32>
  // CHECK: kgraph.pow
  %22 = kgraph.pow %a, %c : tensor<4x8xf32>, tensor<f32>
  // CHECK: kgraph.max
  %23 = kgraph.max %a, %b : tensor<4x8xf32>, tensor<8xf32>
  // CHECK: kgraph.min
  %24 = kgraph.min %a, %b : tensor<4x8xf32>, tensor<8xf32>
  // CHECK: kgraph.and
  %25 = kgraph.and %m, %m : tensor<4x8xi1>, tensor<4x8xi1>
  // CHECK: kgraph.or
  %26 = kgraph.or %m, %m : tensor<4x8xi1>, tensor<4x8xi1>
  // CHECK: kgraph.compare "lt", %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<4x8xf32>
  %27 = kgraph.compare "lt", %a, %0 : tensor<4x8xf32>, tensor<4x8xf32>
  // CHECK: kgraph.select %{{.*}}, %{{.*}}, %{{.*}} : tensor<4x8xi1>, tensor<4x8xf32>, tensor<f32>
  %28 = kgraph.select %27, %a, %c : tensor<4x8xi1>, tensor<4x8xf32>, tensor<f32>
  // CHECK: kgraph.cast %{{.*}} : tensor<4x8xf32> -> tensor<4x8xbf16>
  %29 = kgraph.cast %a : tensor<4x8xf32> -> tensor<4x8xbf16>
  return
}

// CHECK-LABEL: func.func @shapes
func.func @shapes(%a: tensor<4x8xf32>, %idx: tensor<4x2xi64>, %sel: tensor<3xi64>, %w: tensor<10x16xf32>, %tok: tensor<2x5xi64>, %g: tensor<2x5x16xf32>) {
  // CHECK: kgraph.reshape %{{.*}} : tensor<4x8xf32> -> tensor<2x16xf32>
  %0 = kgraph.reshape %a : tensor<4x8xf32> -> tensor<2x16xf32>
  // CHECK: kgraph.transpose %{{.*}}, [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
  %1 = kgraph.transpose %a, [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
  // CHECK: kgraph.broadcast %{{.*}} : tensor<4x8xf32> -> tensor<3x4x8xf32>
  %2 = kgraph.broadcast %a : tensor<4x8xf32> -> tensor<3x4x8xf32>
  // CHECK: kgraph.slice %{{.*}} {limit = array<i64: 4, 8>, start = array<i64: 1, 0>, stride = array<i64: 1, 2>} : tensor<4x8xf32> -> tensor<3x4xf32>
  %3 = kgraph.slice %a {start = array<i64: 1, 0>, limit = array<i64: 4, 8>, stride = array<i64: 1, 2>} : tensor<4x8xf32> -> tensor<3x4xf32>
  // CHECK: kgraph.concat %{{.*}}, %{{.*}} {dim = 1 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x16xf32>
  %4 = kgraph.concat %a, %a {dim = 1} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x16xf32>
  // CHECK: kgraph.gather %{{.*}}, %{{.*}} {dim = 1 : i64} : tensor<4x8xf32>, tensor<4x2xi64> -> tensor<4x2xf32>
  %5 = kgraph.gather %a, %idx {dim = 1} : tensor<4x8xf32>, tensor<4x2xi64> -> tensor<4x2xf32>
  // CHECK: kgraph.scatter_add %{{.*}}, %{{.*}}, %{{.*}} {dim = 1 : i64} : tensor<4x8xf32>, tensor<4x2xi64>, tensor<4x2xf32> -> tensor<4x8xf32>
  %6 = kgraph.scatter_add %a, %idx, %5 {dim = 1} : tensor<4x8xf32>, tensor<4x2xi64>, tensor<4x2xf32> -> tensor<4x8xf32>
  // CHECK: kgraph.index_select %{{.*}}, %{{.*}} {dim = 1 : i64} : tensor<4x8xf32>, tensor<3xi64> -> tensor<4x3xf32>
  %7 = kgraph.index_select %a, %sel {dim = 1} : tensor<4x8xf32>, tensor<3xi64> -> tensor<4x3xf32>
  // CHECK: kgraph.embedding %{{.*}}, %{{.*}} : tensor<10x16xf32>, tensor<2x5xi64> -> tensor<2x5x16xf32>
  %8 = kgraph.embedding %w, %tok : tensor<10x16xf32>, tensor<2x5xi64> -> tensor<2x5x16xf32>
  // CHECK: kgraph.embedding_backward %{{.*}}, %{{.*}} {num_weights = 10 : i64} : tensor<2x5x16xf32>, tensor<2x5xi64> -> tensor<10x16xf32>
  %9 = kgraph.embedding_backward %g, %tok {num_weights = 10} : tensor<2x5x16xf32>, tensor<2x5xi64> -> tensor<10x16xf32>
  return
}

// CHECK-LABEL: func.func @math
func.func @math(%a: tensor<2x4x8xf32>, %b: tensor<8x16xf32>, %w: tensor<16x8xf32>, %bias: tensor<16xf32>, %y: tensor<2xi64>, %seed: tensor<i64>) {
  // CHECK: kgraph.matmul %{{.*}}, %{{.*}} : tensor<2x4x8xf32>, tensor<8x16xf32> -> tensor<2x4x16xf32>
  %0 = kgraph.matmul %a, %b : tensor<2x4x8xf32>, tensor<8x16xf32> -> tensor<2x4x16xf32>
  // CHECK: kgraph.matmul %{{.*}}, %{{.*}} {transpose_rhs = true} : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
  %1 = kgraph.matmul %a, %w {transpose_rhs = true} : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
  // CHECK: kgraph.linear %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<16xf32> -> tensor<2x4x16xf32>
  %2 = kgraph.linear %a, %w, %bias : tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<16xf32> -> tensor<2x4x16xf32>
  // CHECK: kgraph.linear %{{.*}}, %{{.*}} : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
  %3 = kgraph.linear %a, %w : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
  // CHECK: kgraph.reduce_sum %{{.*}}, [1] {keepdim = true} : tensor<2x4x8xf32> -> tensor<2x1x8xf32>
  %4 = kgraph.reduce_sum %a, [1] {keepdim = true} : tensor<2x4x8xf32> -> tensor<2x1x8xf32>
  // CHECK: kgraph.reduce_mean %{{.*}}, [0, 2]
  %5 = kgraph.reduce_mean %a, [0, 2] : tensor<2x4x8xf32> -> tensor<4xf32>
  // CHECK: kgraph.reduce_max
  %6 = kgraph.reduce_max %a, [2] : tensor<2x4x8xf32> -> tensor<2x4xf32>
  // CHECK: kgraph.reduce_min
  %7 = kgraph.reduce_min %a, [] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  // CHECK: kgraph.argmax %{{.*}} {dim = 2 : i64} : tensor<2x4x8xf32> -> tensor<2x4xi64>
  %8 = kgraph.argmax %a {dim = 2} : tensor<2x4x8xf32> -> tensor<2x4xi64>
  // CHECK: kgraph.softmax %{{.*}} {dim = 2 : i64} : tensor<2x4x8xf32>
  %9 = kgraph.softmax %a {dim = 2} : tensor<2x4x8xf32>
  // CHECK: kgraph.log_softmax
  %10 = kgraph.log_softmax %a {dim = 2} : tensor<2x4x8xf32>
  // CHECK: kgraph.softmax_backward %{{.*}}, %{{.*}} {dim = 2 : i64} : tensor<2x4x8xf32>
  %11 = kgraph.softmax_backward %a, %9 {dim = 2} : tensor<2x4x8xf32>
  // CHECK: kgraph.log_softmax_backward
  %12 = kgraph.log_softmax_backward %a, %10 {dim = 2} : tensor<2x4x8xf32>
  return
}

// CHECK-LABEL: func.func @nn
func.func @nn(%x: tensor<2x4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>, %logits: tensor<3x5xf32>, %y: tensor<3xi64>, %seed: tensor<i64>) {
  // CHECK: kgraph.layer_norm %{{.*}}, %{{.*}}, %{{.*}} {normalized_rank = 1 : i64} : tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<2x4x8xf32>, tensor<2x4x1xf32>, tensor<2x4x1xf32>
  %out, %mean, %rstd = kgraph.layer_norm %x, %w, %b {normalized_rank = 1} : tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<2x4x8xf32>, tensor<2x4x1xf32>, tensor<2x4x1xf32>
  // CHECK: kgraph.layer_norm_backward
  %gx, %gw, %gb = kgraph.layer_norm_backward %out, %x, %mean, %rstd, %w {normalized_rank = 1} : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x1xf32>, tensor<2x4x1xf32>, tensor<8xf32> -> tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>
  // CHECK: kgraph.gelu_backward %{{.*}}, %{{.*}} {approximate = "tanh"} : tensor<2x4x8xf32>
  %0 = kgraph.gelu_backward %out, %x {approximate = "tanh"} : tensor<2x4x8xf32>
  // CHECK: kgraph.tanh_backward
  %1 = kgraph.tanh_backward %out, %x : tensor<2x4x8xf32>
  // CHECK: kgraph.sigmoid_backward
  %2 = kgraph.sigmoid_backward %out, %x : tensor<2x4x8xf32>
  // CHECK: kgraph.relu_backward
  %3 = kgraph.relu_backward %out, %x : tensor<2x4x8xf32>
  // CHECK: kgraph.nll_loss %{{.*}}, %{{.*}} : tensor<3x5xf32>, tensor<3xi64> -> tensor<f32>, tensor<f32>
  %loss, %total = kgraph.nll_loss %logits, %y : tensor<3x5xf32>, tensor<3xi64> -> tensor<f32>, tensor<f32>
  // CHECK: kgraph.nll_loss %{{.*}}, %{{.*}} {reduction = "none"} : tensor<3x5xf32>, tensor<3xi64> -> tensor<3xf32>, tensor<f32>
  %losses, %total2 = kgraph.nll_loss %logits, %y {reduction = "none"} : tensor<3x5xf32>, tensor<3xi64> -> tensor<3xf32>, tensor<f32>
  // CHECK: kgraph.nll_loss_backward
  %4 = kgraph.nll_loss_backward %loss, %logits, %y, %total : tensor<f32>, tensor<3x5xf32>, tensor<3xi64>, tensor<f32> -> tensor<3x5xf32>
  // CHECK: kgraph.dropout %{{.*}}, %{{.*}} {p = 1.000000e-01 : f64, stream = 2 : i64} : tensor<2x4x8xf32>, tensor<i64> -> tensor<2x4x8xf32>, tensor<2x4x8xi1>
  %d, %mask = kgraph.dropout %x, %seed {p = 0.1, stream = 2} : tensor<2x4x8xf32>, tensor<i64> -> tensor<2x4x8xf32>, tensor<2x4x8xi1>
  // CHECK: kgraph.all_reduce %{{.*}} {reduction = "mean"} : tensor<8xf32>
  %5 = kgraph.all_reduce %gw {reduction = "mean"} : tensor<8xf32>
  // CHECK: kgraph.gradient %{{.*}} {parameter = "p.w"} : tensor<8xf32>
  %6 = kgraph.gradient %gw {parameter = "p.w"} : tensor<8xf32>
  // CHECK: kgraph.checkpoint %{{.*}} {region = 2 : i64, side = "input"} : tensor<3xi64>
  %c = kgraph.checkpoint %y {region = 2, side = "input"} : tensor<3xi64>
  // CHECK: kgraph.all_gather %{{.*}} : tensor<3xi64> -> tensor<12xi64>
  %7 = kgraph.all_gather %y : tensor<3xi64> -> tensor<12xi64>
  // CHECK: kgraph.reduce_scatter %{{.*}} {reduction = "mean"} : tensor<8xf32> -> tensor<2xf32>
  %8 = kgraph.reduce_scatter %gw {reduction = "mean"} : tensor<8xf32> -> tensor<2xf32>
  // CHECK: kgraph.worker_shard %{{.*}} : tensor<8xf32> -> tensor<4xf32>
  %9 = kgraph.worker_shard %gw : tensor<8xf32> -> tensor<4xf32>
  // The tensor-parallel group is named; the data-parallel one is the default.
  // CHECK: kgraph.all_reduce %{{.*}} {group = "tensor"} : tensor<8xf32>
  %t0 = kgraph.all_reduce %gw {group = "tensor"} : tensor<8xf32>
  // CHECK: kgraph.worker_shard %{{.*}} {group = "tensor"} : tensor<8xf32> -> tensor<2xf32>
  %t1 = kgraph.worker_shard %gw {group = "tensor"} : tensor<8xf32> -> tensor<2xf32>
  // CHECK: kgraph.all_reduce %{{.*}} : tensor<8xf32>
  %t2 = kgraph.all_reduce %gw {group = "data"} : tensor<8xf32>
  return
}
