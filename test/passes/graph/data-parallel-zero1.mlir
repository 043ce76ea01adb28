// RUN: kiln-opt %s --split-input-file --kgraph-data-parallel="world-size=4 shard-optimizer-state=1" | FileCheck %s
// RUN: kiln-opt %s --split-input-file --kgraph-data-parallel="world-size=4 shard-optimizer-state=1 bucket-bytes=512" | FileCheck %s --check-prefix=HALF

// ZeRO-1 over 4 workers. %w (8x12) and %b (8) have momentum updates whose
// state becomes blocks of 2 rows; %c (3x8) stays whole (4 does not divide
// 3 rows): its gradient is all-reduced and its state keeps every row.
// w's and b's gradients share one reduce-scatter bucket ([4, 24] and
// [4, 2] joined along the second dimension); the clipping norm's sums
// become the blocks' sums plus an all-reduce (sum); the parameters' blocks
// come from worker_shard and their updated blocks are gathered in one
// all-gather.
// CHECK-LABEL: func.func @step
// CHECK-SAME: %arg3: tensor<2x12xf32> {kgraph.name = "s.w.m"
// CHECK-SAME: %arg4: tensor<2xf32> {kgraph.name = "s.b.m"
// CHECK-SAME: %arg5: tensor<3x8xf32> {kgraph.name = "s.c.m"
// CHECK-SAME: -> (tensor<8x12xf32>
// CHECK-SAME: tensor<2x12xf32> {kgraph.aliases = 3
// CHECK-SAME: tensor<2xf32> {kgraph.aliases = 4
// CHECK-SAME: tensor<3x8xf32> {kgraph.aliases = 5
// CHECK: %[[RW:.*]] = kgraph.reshape %{{.*}} : tensor<8x12xf32> -> tensor<4x24xf32>
// CHECK: %[[RB:.*]] = kgraph.reshape %{{.*}} : tensor<8xf32> -> tensor<4x2xf32>
// CHECK: %[[CAT:.*]] = kgraph.concat %[[RW]], %[[RB]] {dim = 1 : i64} : (tensor<4x24xf32>, tensor<4x2xf32>) -> tensor<4x26xf32>
// CHECK: %[[RS:.*]] = kgraph.reduce_scatter %[[CAT]] {reduction = "mean"} : tensor<4x26xf32> -> tensor<1x26xf32>
// CHECK: %[[GW:.*]] = kgraph.reshape %{{.*}} : tensor<1x24xf32> -> tensor<2x12xf32>
// CHECK: %[[GB:.*]] = kgraph.reshape %{{.*}} : tensor<1x2xf32> -> tensor<2xf32>
// CHECK: %[[GC:.*]] = kgraph.all_reduce %{{.*}} {reduction = "mean"} : tensor<3x8xf32>
// CHECK: %[[SQ:.*]] = kgraph.mul %[[GW]], %[[GW]] : tensor<2x12xf32>, tensor<2x12xf32>
// CHECK: %[[PART:.*]] = kgraph.reduce_sum %[[SQ]], [0, 1] : tensor<2x12xf32> -> tensor<f32>
// CHECK: %[[NORM:.*]] = kgraph.all_reduce %[[PART]] : tensor<f32>
// CHECK: %[[CLIPPED:.*]] = kgraph.mul %[[GW]], %{{.*}} : tensor<2x12xf32>, tensor<f32>
// CHECK: %[[M:.*]] = kgraph.add %arg3, %[[CLIPPED]] : tensor<2x12xf32>, tensor<2x12xf32>
// CHECK: %[[MINE:.*]] = kgraph.worker_shard %arg0 : tensor<8x12xf32> -> tensor<2x12xf32>
// CHECK: %[[NW:.*]] = kgraph.sub %[[MINE]], %[[M]] : tensor<2x12xf32>, tensor<2x12xf32>
// CHECK: %[[NB:.*]] = kgraph.sub %{{.*}}, %{{.*}} : tensor<2xf32>, tensor<2xf32>
// CHECK: %[[FW:.*]] = kgraph.reshape %[[NW]] : tensor<2x12xf32> -> tensor<24xf32>
// CHECK: %[[CAT2:.*]] = kgraph.concat %[[FW]], %[[NB]] {dim = 0 : i64} : (tensor<24xf32>, tensor<2xf32>) -> tensor<26xf32>
// CHECK: %[[ALL:.*]] = kgraph.all_gather %[[CAT2]] : tensor<26xf32> -> tensor<104xf32>
// CHECK: %[[VIEW:.*]] = kgraph.reshape %[[ALL]] : tensor<104xf32> -> tensor<4x26xf32>
// CHECK: kgraph.slice %[[VIEW]] {limit = array<i64: 4, 24>, start = array<i64: 0, 0>, stride = array<i64: 1, 1>}
// CHECK: kgraph.slice %[[VIEW]] {limit = array<i64: 4, 26>, start = array<i64: 0, 24>, stride = array<i64: 1, 1>}
// CHECK: kgraph.sub %arg2, %{{.*}} : tensor<3x8xf32>, tensor<3x8xf32>
// CHECK-NOT: kgraph.gradient
// A gradient of half a bucket or more (w's 384 bytes of 512) is
// reduce-scattered alone, not copied into a joined bucket.
// HALF-LABEL: func.func @step
// HALF: kgraph.reduce_scatter %{{.*}} {reduction = "mean"} : tensor<8x12xf32> -> tensor<2x12xf32>
// HALF: kgraph.reduce_scatter %{{.*}} {reduction = "mean"} : tensor<8xf32> -> tensor<2xf32>
func.func @step(%w: tensor<8x12xf32> {kgraph.name = "p.w", kgraph.role = "parameter"},
                %b: tensor<8xf32> {kgraph.name = "p.b", kgraph.role = "parameter"},
                %c: tensor<3x8xf32> {kgraph.name = "p.c", kgraph.role = "parameter"},
                %mw: tensor<8x12xf32> {kgraph.name = "s.w.m", kgraph.role = "optimizer_state"},
                %mb: tensor<8xf32> {kgraph.name = "s.b.m", kgraph.role = "optimizer_state"},
                %mc: tensor<3x8xf32> {kgraph.name = "s.c.m", kgraph.role = "optimizer_state"},
                %lr: tensor<f32> {kgraph.name = "h.lr", kgraph.role = "hyper_parameter"})
    -> (tensor<8x12xf32> {kgraph.aliases = 0 : i64, kgraph.name = "next.p.w", kgraph.role = "updated_parameter"},
        tensor<8xf32> {kgraph.aliases = 1 : i64, kgraph.name = "next.p.b", kgraph.role = "updated_parameter"},
        tensor<3x8xf32> {kgraph.aliases = 2 : i64, kgraph.name = "next.p.c", kgraph.role = "updated_parameter"},
        tensor<8x12xf32> {kgraph.aliases = 3 : i64, kgraph.name = "next.s.w.m", kgraph.role = "updated_state"},
        tensor<8xf32> {kgraph.aliases = 4 : i64, kgraph.name = "next.s.b.m", kgraph.role = "updated_state"},
        tensor<3x8xf32> {kgraph.aliases = 5 : i64, kgraph.name = "next.s.c.m", kgraph.role = "updated_state"}) {
  %dw = kgraph.exp %w : tensor<8x12xf32>
  %db = kgraph.exp %b : tensor<8xf32>
  %dc = kgraph.exp %c : tensor<3x8xf32>
  %gw = kgraph.gradient %dw {parameter = "p.w"} : tensor<8x12xf32>
  %gb = kgraph.gradient %db {parameter = "p.b"} : tensor<8xf32>
  %gc = kgraph.gradient %dc {parameter = "p.c"} : tensor<3x8xf32>
  %sq = kgraph.mul %gw, %gw : tensor<8x12xf32>, tensor<8x12xf32>
  %norm2 = kgraph.reduce_sum %sq, [0, 1] : tensor<8x12xf32> -> tensor<f32>
  %coef = kgraph.rsqrt %norm2 : tensor<f32>
  %cw = kgraph.mul %gw, %coef : tensor<8x12xf32>, tensor<f32>
  %nmw = kgraph.add %mw, %cw : tensor<8x12xf32>, tensor<8x12xf32>
  %nw = kgraph.sub %w, %nmw : tensor<8x12xf32>, tensor<8x12xf32>
  %nmb = kgraph.add %mb, %gb : tensor<8xf32>, tensor<8xf32>
  %step = kgraph.mul %nmb, %lr : tensor<8xf32>, tensor<f32>
  %nb = kgraph.sub %b, %step : tensor<8xf32>, tensor<8xf32>
  %nmc = kgraph.add %mc, %gc : tensor<3x8xf32>, tensor<3x8xf32>
  %nc = kgraph.sub %c, %nmc : tensor<3x8xf32>, tensor<3x8xf32>
  return %nw, %nb, %nc, %nmw, %nmb, %nmc : tensor<8x12xf32>, tensor<8xf32>, tensor<3x8xf32>, tensor<8x12xf32>, tensor<8xf32>, tensor<3x8xf32>
}

// -----

// An update whose value something else reads (here a metric output) keeps
// its parameter whole.
// CHECK-LABEL: func.func @read_elsewhere
// CHECK-SAME: %arg1: tensor<8xf32>
// CHECK: kgraph.all_reduce %{{.*}} {reduction = "mean"} : tensor<8xf32>
// CHECK-NOT: reduce_scatter
// CHECK-NOT: worker_shard
func.func @read_elsewhere(%w: tensor<8xf32> {kgraph.name = "p.w", kgraph.role = "parameter"},
                          %m: tensor<8xf32> {kgraph.name = "s.w.m", kgraph.role = "optimizer_state"})
    -> (tensor<8xf32> {kgraph.aliases = 0 : i64, kgraph.name = "next.p.w", kgraph.role = "updated_parameter"},
        tensor<8xf32> {kgraph.aliases = 1 : i64, kgraph.name = "next.s.w.m", kgraph.role = "updated_state"},
        tensor<8xf32> {kgraph.name = "seen", kgraph.role = "metric"}) {
  %d = kgraph.exp %w : tensor<8xf32>
  %g = kgraph.gradient %d {parameter = "p.w"} : tensor<8xf32>
  %nm = kgraph.add %m, %g : tensor<8xf32>, tensor<8xf32>
  %nw = kgraph.sub %w, %nm : tensor<8xf32>, tensor<8xf32>
  return %nw, %nm, %nm : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// A global clipping norm over two sharded parameters: each worker sums
// its blocks of both gradients' squares, and one all-reduce adds the two
// sums (not one each); the norm's first reader, which stood between the
// two sums, follows it.
// CHECK-LABEL: func.func @global_norm
// CHECK: %[[SW:.*]] = kgraph.reduce_sum %{{.*}}, [0, 1] : tensor<2x12xf32> -> tensor<f32>
// CHECK: %[[SB:.*]] = kgraph.reduce_sum %{{.*}}, [0] : tensor<2xf32> -> tensor<f32>
// CHECK: %[[FW:.*]] = kgraph.reshape %[[SW]] : tensor<f32> -> tensor<1xf32>
// CHECK: %[[FB:.*]] = kgraph.reshape %[[SB]] : tensor<f32> -> tensor<1xf32>
// CHECK: %[[BOTH:.*]] = kgraph.concat %[[FW]], %[[FB]] {dim = 0 : i64}
// CHECK: %[[TOTAL:.*]] = kgraph.all_reduce %[[BOTH]] : tensor<2xf32>
// CHECK: kgraph.slice %[[TOTAL]]
// CHECK: kgraph.slice %[[TOTAL]]
// CHECK: %[[NORM:.*]] = kgraph.add
// CHECK: kgraph.rsqrt %[[NORM]]
// CHECK-NOT: kgraph.all_reduce {{.*}} : tensor<f32>
func.func @global_norm(%w: tensor<8x12xf32> {kgraph.name = "p.w", kgraph.role = "parameter"},
                       %b: tensor<8xf32> {kgraph.name = "p.b", kgraph.role = "parameter"})
    -> (tensor<8x12xf32> {kgraph.aliases = 0 : i64, kgraph.name = "next.p.w", kgraph.role = "updated_parameter"},
        tensor<8xf32> {kgraph.aliases = 1 : i64, kgraph.name = "next.p.b", kgraph.role = "updated_parameter"}) {
  %dw = kgraph.exp %w : tensor<8x12xf32>
  %db = kgraph.exp %b : tensor<8xf32>
  %gw = kgraph.gradient %dw {parameter = "p.w"} : tensor<8x12xf32>
  %gb = kgraph.gradient %db {parameter = "p.b"} : tensor<8xf32>
  %sqw = kgraph.mul %gw, %gw : tensor<8x12xf32>, tensor<8x12xf32>
  %nw = kgraph.reduce_sum %sqw, [0, 1] : tensor<8x12xf32> -> tensor<f32>
  %half = kgraph.constant dense<0.5> : tensor<f32>
  %nw2 = kgraph.mul %nw, %half : tensor<f32>, tensor<f32>
  %sqb = kgraph.mul %gb, %gb : tensor<8xf32>, tensor<8xf32>
  %nb = kgraph.reduce_sum %sqb, [0] : tensor<8xf32> -> tensor<f32>
  %norm = kgraph.add %nw2, %nb : tensor<f32>, tensor<f32>
  %coef = kgraph.rsqrt %norm : tensor<f32>
  %cw = kgraph.mul %gw, %coef : tensor<8x12xf32>, tensor<f32>
  %cb = kgraph.mul %gb, %coef : tensor<8xf32>, tensor<f32>
  %uw = kgraph.sub %w, %cw : tensor<8x12xf32>, tensor<8x12xf32>
  %ub = kgraph.sub %b, %cb : tensor<8xf32>, tensor<8xf32>
  return %uw, %ub : tensor<8x12xf32>, tensor<8xf32>
}
