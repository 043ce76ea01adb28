// RUN: kiln-opt %s --kgraph-fuse-elementwise --kgraph-schedule-updates | FileCheck %s
// RUN: kiln-opt %s --kgraph-schedule-updates | FileCheck %s --check-prefix=ZERO

// A front end traces the optimizer after the backward pass. Each update
// moves up behind the last op it needs: w2's once its gradient exists and
// the backward pass's last read of w2 (dh = dy . w2) is done, before dw1 is
// even computed; the step scalar moves up with it. w1's update waits for
// dw1. The groups keep their members and their order.
// CHECK-LABEL: func.func @two_layers
// CHECK: %[[DW2:.*]] = kgraph.matmul %{{.*}}, %{{.*}} {transpose_lhs = true} : tensor<16x10xf32>, tensor<16x24xf32> -> tensor<10x24xf32>
// CHECK-NEXT: %[[DH:.*]] = kgraph.matmul %{{.*}}, %arg1 : tensor<16x10xf32>, tensor<10x24xf32> -> tensor<16x24xf32>
// CHECK-NEXT: %[[LR:.*]] = kgraph.mul %arg3, %arg3 : tensor<f32>
// CHECK-NEXT: %[[S2:.*]] = kgraph.mul %[[LR]], %[[DW2]] {kgraph.fusion = [[G2:[0-9]+]] : i64}
// CHECK-NEXT: %[[W2:.*]] = kgraph.sub %arg1, %[[S2]] {kgraph.fusion = [[G2]] : i64}
// CHECK-NEXT: %[[DW1:.*]] = kgraph.matmul %[[DH]], %arg2 {transpose_lhs = true}
// CHECK-NEXT: %[[S1:.*]] = kgraph.mul %[[LR]], %[[DW1]] {kgraph.fusion
// CHECK-NEXT: %[[W1:.*]] = kgraph.sub %arg0, %[[S1]] {kgraph.fusion
// CHECK-NEXT: return %{{.*}}, %[[W1]], %[[W2]]
func.func @two_layers(
    %w1: tensor<24x12xf32> {kgraph.name = "w1", kgraph.role = "parameter"},
    %w2: tensor<10x24xf32> {kgraph.name = "w2", kgraph.role = "parameter"},
    %x: tensor<16x12xf32> {kgraph.name = "x", kgraph.role = "batch_input"},
    %lr: tensor<f32> {kgraph.name = "lr", kgraph.role = "runtime_scalar"})
    -> (tensor<16x10xf32> {kgraph.name = "y", kgraph.role = "metric"},
        tensor<24x12xf32> {kgraph.aliases = 0 : i64, kgraph.name = "w1", kgraph.role = "updated_parameter"},
        tensor<10x24xf32> {kgraph.aliases = 1 : i64, kgraph.name = "w2", kgraph.role = "updated_parameter"}) {
  %t1 = kgraph.transpose %w1, [1, 0] : tensor<24x12xf32> -> tensor<12x24xf32>
  %h = kgraph.matmul %x, %t1 : tensor<16x12xf32>, tensor<12x24xf32> -> tensor<16x24xf32>
  %t2 = kgraph.transpose %w2, [1, 0] : tensor<10x24xf32> -> tensor<24x10xf32>
  %y = kgraph.matmul %h, %t2 : tensor<16x24xf32>, tensor<24x10xf32> -> tensor<16x10xf32>
  %dw2 = kgraph.matmul %y, %h {transpose_lhs = true} : tensor<16x10xf32>, tensor<16x24xf32> -> tensor<10x24xf32>
  %dh = kgraph.matmul %y, %w2 : tensor<16x10xf32>, tensor<10x24xf32> -> tensor<16x24xf32>
  %dw1 = kgraph.matmul %dh, %x {transpose_lhs = true} : tensor<16x24xf32>, tensor<16x12xf32> -> tensor<24x12xf32>
  %lrt = kgraph.mul %lr, %lr : tensor<f32>, tensor<f32>
  %s1 = kgraph.mul %lrt, %dw1 : tensor<f32>, tensor<24x12xf32>
  %w1n = kgraph.sub %w1, %s1 : tensor<24x12xf32>, tensor<24x12xf32>
  %s2 = kgraph.mul %lrt, %dw2 : tensor<f32>, tensor<10x24xf32>
  %w2n = kgraph.sub %w2, %s2 : tensor<10x24xf32>, tensor<10x24xf32>
  return %y, %w1n, %w2n : tensor<16x10xf32>, tensor<24x12xf32>, tensor<10x24xf32>
}

// An update that reads the argument another update overwrites, and the
// other way round, cannot both go first: the order stays as it was.
// CHECK-LABEL: func.func @crossed
// CHECK: kgraph.exp
// CHECK-NEXT: kgraph.add %arg0, %arg1
// CHECK-NEXT: kgraph.sub %arg1, %arg0
func.func @crossed(
    %a: tensor<4xf32> {kgraph.name = "a", kgraph.role = "parameter"},
    %b: tensor<4xf32> {kgraph.name = "b", kgraph.role = "parameter"})
    -> (tensor<4xf32> {kgraph.name = "e", kgraph.role = "metric"},
        tensor<4xf32> {kgraph.aliases = 0 : i64, kgraph.name = "a", kgraph.role = "updated_parameter"},
        tensor<4xf32> {kgraph.aliases = 1 : i64, kgraph.name = "b", kgraph.role = "updated_parameter"}) {
  %e = kgraph.exp %a : tensor<4xf32>
  %an = kgraph.add %a, %b : tensor<4xf32>, tensor<4xf32>
  %bn = kgraph.sub %b, %a : tensor<4xf32>, tensor<4xf32>
  return %e, %an, %bn : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// SGD with momentum on a flattened gradient: the new momentum (a group
// value, returned through a reshape) exists only once its group has run, at
// the group's last op, so the reshape that returns it must not move between
// the group's ops.
// CHECK-LABEL: func.func @value_of_a_group
// CHECK: %[[B:.*]] = kgraph.add %{{.*}}, %{{.*}} {kgraph.fusion = [[G:[0-9]+]] : i64}
// CHECK-NEXT: %[[U:.*]] = kgraph.mul %{{.*}}, %[[B]] {kgraph.fusion = [[G]] : i64}
// CHECK-NEXT: %[[S:.*]] = kgraph.sub %{{.*}}, %[[U]] {kgraph.fusion = [[G]] : i64}
// CHECK: kgraph.reshape %[[B]]
func.func @value_of_a_group(
    %w: tensor<256xf32> {kgraph.name = "w", kgraph.role = "parameter"},
    %m: tensor<16x16xf32> {kgraph.name = "m", kgraph.role = "optimizer_state"},
    %g: tensor<256xf32> {kgraph.name = "g", kgraph.role = "batch_input"},
    %lr: tensor<f32> {kgraph.name = "lr", kgraph.role = "runtime_scalar"})
    -> (tensor<256xf32> {kgraph.aliases = 0 : i64, kgraph.name = "w", kgraph.role = "updated_parameter"},
        tensor<16x16xf32> {kgraph.aliases = 1 : i64, kgraph.name = "m", kgraph.role = "updated_state"}) {
  %mf = kgraph.reshape %m : tensor<16x16xf32> -> tensor<256xf32>
  %b = kgraph.add %mf, %g : tensor<256xf32>, tensor<256xf32>
  %u = kgraph.mul %lr, %b : tensor<f32>, tensor<256xf32>
  %wn = kgraph.sub %w, %u : tensor<256xf32>, tensor<256xf32>
  %mn = kgraph.reshape %b : tensor<256xf32> -> tensor<16x16xf32>
  return %wn, %mn : tensor<256xf32>, tensor<16x16xf32>
}

// A data-parallel step (kgraph-data-parallel's form): w1's and w2's
// gradients share bucket A, w3's is a bucket of one. An update reading an
// all-reduced gradient waits for the next bucket's all-reduce as well, so
// that its loads do not stall the engines waiting for the collective in
// flight: w1's and w2's updates move up behind bucket B's all-reduce (the
// unpacking views move with them), not right behind bucket A's, and w3's,
// whose bucket is the last, right behind its own.
// CHECK-LABEL: func.func @buckets
// CHECK: kgraph.all_reduce %{{.*}} {reduction = "mean"} : tensor<768xf32>
// CHECK: %[[G3:.*]] = kgraph.matmul
// CHECK-NEXT: %[[B:.*]] = kgraph.all_reduce %[[G3]] {reduction = "mean"} : tensor<16x32xf32>
// CHECK-NEXT: kgraph.reshape
// CHECK-NEXT: kgraph.mul
// CHECK-NEXT: kgraph.sub %arg0
// CHECK-NEXT: kgraph.reshape
// CHECK-NEXT: kgraph.mul
// CHECK-NEXT: kgraph.sub %arg1
// CHECK-NEXT: kgraph.mul %[[B]]
// CHECK-NEXT: kgraph.sub %arg2
// CHECK-NEXT: return
func.func @buckets(
    %w1: tensor<16x16xf32> {kgraph.name = "w1", kgraph.role = "parameter"},
    %w2: tensor<16x32xf32> {kgraph.name = "w2", kgraph.role = "parameter"},
    %w3: tensor<16x32xf32> {kgraph.name = "w3", kgraph.role = "parameter"},
    %x: tensor<16x16xf32> {kgraph.name = "x", kgraph.role = "batch_input"},
    %y: tensor<16x32xf32> {kgraph.name = "y", kgraph.role = "batch_input"},
    %lr: tensor<f32> {kgraph.name = "lr", kgraph.role = "runtime_scalar"})
    -> (tensor<16x16xf32> {kgraph.aliases = 0 : i64, kgraph.name = "w1", kgraph.role = "updated_parameter"},
        tensor<16x32xf32> {kgraph.aliases = 1 : i64, kgraph.name = "w2", kgraph.role = "updated_parameter"},
        tensor<16x32xf32> {kgraph.aliases = 2 : i64, kgraph.name = "w3", kgraph.role = "updated_parameter"}) {
  %g1 = kgraph.matmul %x, %w1 {transpose_lhs = true} : tensor<16x16xf32>, tensor<16x16xf32> -> tensor<16x16xf32>
  %g2 = kgraph.matmul %x, %y {transpose_lhs = true} : tensor<16x16xf32>, tensor<16x32xf32> -> tensor<16x32xf32>
  %f1 = kgraph.reshape %g1 : tensor<16x16xf32> -> tensor<256xf32>
  %f2 = kgraph.reshape %g2 : tensor<16x32xf32> -> tensor<512xf32>
  %packed = kgraph.concat %f1, %f2 {dim = 0 : i64} : (tensor<256xf32>, tensor<512xf32>) -> tensor<768xf32>
  %a = kgraph.all_reduce %packed {reduction = "mean"} : tensor<768xf32>
  %s1 = kgraph.slice %a {limit = array<i64: 256>, start = array<i64: 0>, stride = array<i64: 1>} : tensor<768xf32> -> tensor<256xf32>
  %d1 = kgraph.reshape %s1 : tensor<256xf32> -> tensor<16x16xf32>
  %s2 = kgraph.slice %a {limit = array<i64: 768>, start = array<i64: 256>, stride = array<i64: 1>} : tensor<768xf32> -> tensor<512xf32>
  %d2 = kgraph.reshape %s2 : tensor<512xf32> -> tensor<16x32xf32>
  %g3 = kgraph.matmul %g1, %y : tensor<16x16xf32>, tensor<16x32xf32> -> tensor<16x32xf32>
  %b = kgraph.all_reduce %g3 {reduction = "mean"} : tensor<16x32xf32>
  %u1 = kgraph.mul %d1, %lr : tensor<16x16xf32>, tensor<f32>
  %w1n = kgraph.sub %w1, %u1 : tensor<16x16xf32>, tensor<16x16xf32>
  %u2 = kgraph.mul %d2, %lr : tensor<16x32xf32>, tensor<f32>
  %w2n = kgraph.sub %w2, %u2 : tensor<16x32xf32>, tensor<16x32xf32>
  %u3 = kgraph.mul %b, %lr : tensor<16x32xf32>, tensor<f32>
  %w3n = kgraph.sub %w3, %u3 : tensor<16x32xf32>, tensor<16x32xf32>
  return %w1n, %w2n, %w3n : tensor<16x16xf32>, tensor<16x32xf32>, tensor<16x32xf32>
}

// ZeRO-1: an update whose new parameter block is packed into an
// all-gather's bucket is an update like one that is returned: it follows
// the block of the gradient it reads, and the worker's block of the
// parameter moves with it (it reads only the argument).
// ZERO-LABEL: func.func @gathered_block
// ZERO: %[[MINE:.*]] = kgraph.worker_shard %arg0
// ZERO-NEXT: %[[G:.*]] = kgraph.reduce_scatter
// ZERO-NEXT: kgraph.sub %[[MINE]], %[[G]]
// ZERO-NEXT: kgraph.reshape
// ZERO-NEXT: kgraph.all_gather
func.func @gathered_block(
    %w: tensor<64x32xf32> {kgraph.name = "p.w", kgraph.role = "parameter"},
    %x: tensor<64x64xf32> {kgraph.name = "x", kgraph.role = "batch_input"})
    -> (tensor<64x32xf32> {kgraph.aliases = 0 : i64, kgraph.name = "next.p.w", kgraph.role = "updated_parameter"},
        tensor<64x64xf32> {kgraph.name = "y", kgraph.role = "metric"}) {
  %d = kgraph.exp %w : tensor<64x32xf32>
  %g = kgraph.reduce_scatter %d {reduction = "mean"} : tensor<64x32xf32> -> tensor<16x32xf32>
  %y = kgraph.matmul %x, %x : tensor<64x64xf32>, tensor<64x64xf32> -> tensor<64x64xf32>
  %mine = kgraph.worker_shard %w : tensor<64x32xf32> -> tensor<16x32xf32>
  %new = kgraph.sub %mine, %g : tensor<16x32xf32>, tensor<16x32xf32>
  %flat = kgraph.reshape %new : tensor<16x32xf32> -> tensor<512xf32>
  %all = kgraph.all_gather %flat : tensor<512xf32> -> tensor<2048xf32>
  %back = kgraph.reshape %all : tensor<2048xf32> -> tensor<64x32xf32>
  return %back, %y : tensor<64x32xf32>, tensor<64x64xf32>
}
