// RUN: kiln-opt %s --kgraph-plan-tiles --convert-kgraph-to-ktile --ktile-fuse-tensor-scalars --ktile-reuse-dead-tiles | FileCheck %s

// Attention's scores [B, H, S, S] = Q . K^T and their softmax and dropout,
// as fusion leaves them: the scaled scores, their row max, the shifted
// exponentials, their row sum, the division, the dropout and the bf16
// cast for the next product. The row chain is the epilogue of the batched
// product: four heads leave PSUM side by side in one tile, each partition
// holding one row of each, and the chain runs on that tile. The scores
// never go to HBM; what leaves is what later ops read (the probabilities
// for the backward pass, the dropped ones in bf16), one DMA each per four
// heads.
// CHECK-LABEL: func.func @scores_softmax
// CHECK-COUNT-4: ktile.matmul %[[ACC:[0-9]+]]
// CHECK-NOT: ktile.dma_copy %{{.*}}, %[[ACC]]
// CHECK: ktile.tensor_copy %[[P:.*]], %[[ACC]] {dst = #kisa.ap<sbuf, bf16, p = 0:128, offset = 0, dims = [1 x 512]>, src = #kisa.ap<psum, f32
// The f32 cast of the bf16 product copies nothing: the division reads it.
// CHECK: ktile.tensor_scalar %[[S:.*]], %[[P]] {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 512]>, op0 = "div", scalar0 = 8.0{{.*}}src = #kisa.ap<sbuf, bf16
// Each head's rows fold alone, and each row's max is read against its
// 128 keys as a per-partition scalar, a head at a time.
// CHECK: ktile.tensor_reduce %[[MAX:.*]], %[[S]] {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 4]>, op = "max", src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [128 x 4, 1 x 128]>}
// CHECK: ktile.tensor_scalar %[[D:.*]], %[[S]], %[[MAX]] {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 128]>, op0 = "sub"
// CHECK: ktile.tensor_scalar %[[D]], %[[S]], %[[MAX]] {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 1536, dims = [1 x 128]>, op0 = "sub", {{.*}}scalars = #kisa.ap<sbuf, f32, p = 0:128, offset = 12, dims = [1 x 1]>
// CHECK: ktile.activation %[[E:.*]], %[[D]] {{.*}}func = "exp"
// CHECK: ktile.tensor_reduce %[[SUM:.*]], %[[E]] {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 4]>, op = "add"
// CHECK-COUNT-4: ktile.tensor_scalar %[[PROB:[0-9]+]], %[[E]], %[[SUM]] {{.*}}op0 = "div"
// The dropout's counters follow each head's elements: its rows 128 apart,
// the heads 128 x 128 apart. One draw for the four heads, each a run of
// 128 of its destination, the counter stepping 128 x 128 - 128 more from
// one head to the next.
// CHECK: ktile.random %[[U:[0-9]+]], %{{.*}} {counter = 3298534883328 : i64, dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [128 x 4, 1 x 128]>, free_step = 1 : i64, group_step = 1.625600e+04 : f64, partition_step = 128
// CHECK-NOT: ktile.random
// CHECK-NOT: ktile.dma_copy
// CHECK: ktile.dma_copy %{{.*}}, %[[PROB]] {dst = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [16384 x 4, 1 x 128], pstride = 128>
// CHECK: ktile.dma_copy %{{.*}}, %{{.*}} {dst = #kisa.ap<hbm, bf16, p = 0:128, offset = 0, dims = [16384 x 4, 1 x 128], pstride = 128>
// The next four heads (the second batch element's; HBM offsets in bytes).
// CHECK: ktile.dma_copy %{{.*}}, %arg0 {{.*}}offset = 65536
// CHECK: ktile.random %{{.*}} {counter = 3298534948864 : i64
// CHECK: ktile.dma_copy %{{.*}} {dst = #kisa.ap<hbm, f32, p = 0:128, offset = 262144, dims = [16384 x 4, 1 x 128]
func.func @scores_softmax(%q: tensor<2x4x128x64xbf16> {kgraph.name = "q", kgraph.role = "batch_input"}, %k: tensor<2x4x64x128xbf16> {kgraph.name = "k", kgraph.role = "batch_input"}, %seed: tensor<i64> {kgraph.name = "seed", kgraph.role = "rng_seed"}) -> (tensor<2x4x128x128xf32> {kgraph.name = "p", kgraph.role = "metric"}, tensor<2x4x128x128xbf16> {kgraph.name = "dropped", kgraph.role = "metric"}) {
  %c = kgraph.constant dense<8.0> : tensor<f32>
  %x = kgraph.matmul %q, %k : tensor<2x4x128x64xbf16>, tensor<2x4x64x128xbf16> -> tensor<2x4x128x128xbf16>
  %xf = kgraph.cast %x {kgraph.fusion = 0 : i64} : tensor<2x4x128x128xbf16> -> tensor<2x4x128x128xf32>
  %s = kgraph.div %xf, %c {kgraph.fusion = 0 : i64} : tensor<2x4x128x128xf32>, tensor<f32>
  %m = kgraph.reduce_max %s, [3] {keepdim = true} : tensor<2x4x128x128xf32> -> tensor<2x4x128x1xf32>
  %d = kgraph.sub %s, %m {kgraph.fusion = 1 : i64} : tensor<2x4x128x128xf32>, tensor<2x4x128x1xf32>
  %e = kgraph.exp %d {kgraph.fusion = 1 : i64} : tensor<2x4x128x128xf32>
  %z = kgraph.reduce_sum %e, [3] {keepdim = true} : tensor<2x4x128x128xf32> -> tensor<2x4x128x1xf32>
  %p = kgraph.div %e, %z {kgraph.fusion = 2 : i64} : tensor<2x4x128x128xf32>, tensor<2x4x128x1xf32>
  %o, %mask = kgraph.dropout %p, %seed {kgraph.fusion = 2 : i64, p = 0.25 : f64, stream = 3 : i64} : tensor<2x4x128x128xf32>, tensor<i64> -> tensor<2x4x128x128xf32>, tensor<2x4x128x128xi1>
  %ob = kgraph.cast %o {kgraph.fusion = 2 : i64} : tensor<2x4x128x128xf32> -> tensor<2x4x128x128xbf16>
  return %p, %ob : tensor<2x4x128x128xf32>, tensor<2x4x128x128xbf16>
}

// The same softmax when the scores are also returned: the product is
// stored, and the chain is a loop nest of its own that loads it back.
// CHECK-LABEL: func.func @scores_read_elsewhere
// CHECK: ktile.tensor_copy %[[OUT:.*]], %{{.*}} {dst = #kisa.ap<sbuf, bf16, p = 0:128, offset = 0, dims = [1 x 512]>, src = #kisa.ap<psum
// CHECK-NEXT: ktile.dma_copy %{{.*}}, %[[OUT]] {dst = #kisa.ap<hbm, bf16
// CHECK: ktile.tensor_reduce {{.*}}op = "max"
func.func @scores_read_elsewhere(%q: tensor<2x4x128x64xbf16> {kgraph.name = "q", kgraph.role = "batch_input"}, %k: tensor<2x4x64x128xbf16> {kgraph.name = "k", kgraph.role = "batch_input"}) -> (tensor<2x4x128x128xf32> {kgraph.name = "p", kgraph.role = "metric"}, tensor<2x4x128x128xbf16> {kgraph.name = "scores", kgraph.role = "metric"}) {
  %x = kgraph.matmul %q, %k : tensor<2x4x128x64xbf16>, tensor<2x4x64x128xbf16> -> tensor<2x4x128x128xbf16>
  %xf = kgraph.cast %x {kgraph.fusion = 0 : i64} : tensor<2x4x128x128xbf16> -> tensor<2x4x128x128xf32>
  %m = kgraph.reduce_max %xf, [3] {keepdim = true} : tensor<2x4x128x128xf32> -> tensor<2x4x128x1xf32>
  %d = kgraph.sub %xf, %m {kgraph.fusion = 1 : i64} : tensor<2x4x128x128xf32>, tensor<2x4x128x1xf32>
  %e = kgraph.exp %d {kgraph.fusion = 1 : i64} : tensor<2x4x128x128xf32>
  %z = kgraph.reduce_sum %e, [3] {keepdim = true} : tensor<2x4x128x128xf32> -> tensor<2x4x128x1xf32>
  %p = kgraph.div %e, %z {kgraph.fusion = 2 : i64} : tensor<2x4x128x128xf32>, tensor<2x4x128x1xf32>
  return %p, %x : tensor<2x4x128x128xf32>, tensor<2x4x128x128xbf16>
}

// Short rows that only products read are stored with the heads inside the
// rows: the bf16 probabilities (rows of 256 bytes, half bandwidth) as
// [B, S, H, S], so that the epilogue's four heads are one 1 KiB run per
// partition, and so are the context product's loads of them; the context
// [B, H, S, D] as [B, S, H, D], which the output projection then reads as
// the row-major [B·S, H·D] it merges the heads into.
// CHECK-LABEL: func.func @context
// CHECK: %[[P:.*]] = ktile.alloc : memref<2x128x4x128xbf16, "hbm">
// CHECK: ktile.dma_copy %[[P]], %{{.*}} {dst = #kisa.ap<hbm, bf16, p = 0:128, offset = 0, dims = [1 x 512], pstride = 512>
// CHECK: %[[C:.*]] = ktile.alloc : memref<2x128x4x64xbf16, "hbm">
// CHECK: ktile.dma_copy %{{.*}}, %[[P]] {dst = #kisa.ap<sbuf, bf16, p = 0:128, offset = 0, dims = [1 x 512]>, src = #kisa.ap<hbm, bf16, p = 0:128, offset = 0, dims = [1 x 512], pstride = 512>
// CHECK: ktile.dma_copy %[[C]], %{{.*}} {dst = #kisa.ap<hbm, bf16, p = 0:128, offset = 0, dims = [1 x 256], pstride = 256>
// CHECK: ktile.dma_copy %{{.*}}, %[[C]] {dst = #kisa.ap<sbuf, bf16, p = 0:128, offset = 0, dims = [1 x 256]>, src = #kisa.ap<hbm, bf16, p = 0:128, offset = 0, dims = [1 x 256], pstride = 256>
func.func @context(%q: tensor<2x4x128x64xbf16> {kgraph.name = "q", kgraph.role = "batch_input"}, %k: tensor<2x4x64x128xbf16> {kgraph.name = "k", kgraph.role = "batch_input"}, %v: tensor<2x4x128x64xbf16> {kgraph.name = "v", kgraph.role = "batch_input"}, %w: tensor<256x256xbf16> {kgraph.name = "w", kgraph.role = "parameter"}) -> (tensor<256x256xbf16> {kgraph.name = "y", kgraph.role = "metric"}) {
  %x = kgraph.matmul %q, %k : tensor<2x4x128x64xbf16>, tensor<2x4x64x128xbf16> -> tensor<2x4x128x128xbf16>
  %xf = kgraph.cast %x {kgraph.fusion = 0 : i64} : tensor<2x4x128x128xbf16> -> tensor<2x4x128x128xf32>
  %m = kgraph.reduce_max %xf, [3] {keepdim = true} : tensor<2x4x128x128xf32> -> tensor<2x4x128x1xf32>
  %d = kgraph.sub %xf, %m {kgraph.fusion = 1 : i64} : tensor<2x4x128x128xf32>, tensor<2x4x128x1xf32>
  %e = kgraph.exp %d {kgraph.fusion = 1 : i64} : tensor<2x4x128x128xf32>
  %z = kgraph.reduce_sum %e, [3] {keepdim = true} : tensor<2x4x128x128xf32> -> tensor<2x4x128x1xf32>
  %p = kgraph.div %e, %z {kgraph.fusion = 2 : i64} : tensor<2x4x128x128xf32>, tensor<2x4x128x1xf32>
  %pb = kgraph.cast %p {kgraph.fusion = 2 : i64} : tensor<2x4x128x128xf32> -> tensor<2x4x128x128xbf16>
  %c = kgraph.matmul %pb, %v : tensor<2x4x128x128xbf16>, tensor<2x4x128x64xbf16> -> tensor<2x4x128x64xbf16>
  %t = kgraph.transpose %c, [0, 2, 1, 3] : tensor<2x4x128x64xbf16> -> tensor<2x128x4x64xbf16>
  %r = kgraph.reshape %t : tensor<2x128x4x64xbf16> -> tensor<256x256xbf16>
  %y = kgraph.matmul %r, %w : tensor<256x256xbf16>, tensor<256x256xbf16> -> tensor<256x256xbf16>
  return %y : tensor<256x256xbf16>
}

// The softmax as canonicalization leaves scaled scores (kgraph's
// ReduceBeforePositiveScale): each row's max folded on the bf16 scores
// themselves (VectorE folds bf16 at twice the rate), then scaled, four
// elements a partition. The scaling's only readers are the subtractions of
// each head's max, so each takes it as its first stage: no pass over the
// tile scales the scores.
// CHECK-LABEL: func.func @max_on_scores
// CHECK: ktile.tensor_copy %[[P:.*]], %{{.*}} {dst = #kisa.ap<sbuf, bf16, p = 0:128, offset = 0, dims = [1 x 512]>, src = #kisa.ap<psum
// CHECK-NOT: op0 = "div"
// CHECK: ktile.tensor_reduce %[[MAX:.*]], %[[P]] {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 4]>, op = "max", src = #kisa.ap<sbuf, bf16, p = 0:128, offset = 0, dims = [128 x 4, 1 x 128]>}
// CHECK: ktile.tensor_scalar %[[MAX]], %[[MAX]] {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 4]>, op0 = "div", scalar0 = 8.0
// CHECK-NOT: op0 = "div"
// CHECK: ktile.tensor_scalar %[[D:.*]], %[[P]], %[[MAX]] {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 128]>, op0 = "div", op1 = "sub", scalar0 = 8.0{{.*}}scalar_operands = 2 : i64, scalars = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1]>, src = #kisa.ap<sbuf, bf16, p = 0:128, offset = 0, dims = [1 x 128]>}
// CHECK-NEXT: ktile.tensor_scalar %[[D]], %[[P]], %[[MAX]] {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 512, dims = [1 x 128]>, op0 = "div", op1 = "sub"{{.*}}scalars = #kisa.ap<sbuf, f32, p = 0:128, offset = 4, dims = [1 x 1]>, src = #kisa.ap<sbuf, bf16, p = 0:128, offset = 256, dims = [1 x 128]>}
// CHECK-NEXT: ktile.tensor_scalar %[[D]], %[[P]], %[[MAX]] {{.*}}offset = 1024{{.*}}op0 = "div", op1 = "sub"
// CHECK-NEXT: ktile.tensor_scalar %[[D]], %[[P]], %[[MAX]] {{.*}}offset = 1536{{.*}}op0 = "div", op1 = "sub"
// CHECK: ktile.activation %{{.*}}, %[[D]] {{.*}}func = "exp"
func.func @max_on_scores(%q: tensor<2x4x128x64xbf16> {kgraph.name = "q", kgraph.role = "batch_input"}, %k: tensor<2x4x64x128xbf16> {kgraph.name = "k", kgraph.role = "batch_input"}) -> (tensor<2x4x128x128xf32> {kgraph.name = "p", kgraph.role = "metric"}) {
  %c = kgraph.constant dense<8.0> : tensor<f32>
  %x = kgraph.matmul %q, %k : tensor<2x4x128x64xbf16>, tensor<2x4x64x128xbf16> -> tensor<2x4x128x128xbf16>
  %xf = kgraph.cast %x {kgraph.fusion = 0 : i64} : tensor<2x4x128x128xbf16> -> tensor<2x4x128x128xf32>
  %s = kgraph.div %xf, %c {kgraph.fusion = 0 : i64} : tensor<2x4x128x128xf32>, tensor<f32>
  %m0 = kgraph.reduce_max %xf, [3] {keepdim = true} : tensor<2x4x128x128xf32> -> tensor<2x4x128x1xf32>
  %m = kgraph.div %m0, %c : tensor<2x4x128x1xf32>, tensor<f32>
  %d = kgraph.sub %s, %m {kgraph.fusion = 1 : i64} : tensor<2x4x128x128xf32>, tensor<2x4x128x1xf32>
  %e = kgraph.exp %d {kgraph.fusion = 1 : i64} : tensor<2x4x128x128xf32>
  %z = kgraph.reduce_sum %e, [3] {keepdim = true} : tensor<2x4x128x128xf32> -> tensor<2x4x128x1xf32>
  %p = kgraph.div %e, %z {kgraph.fusion = 2 : i64} : tensor<2x4x128x128xf32>, tensor<2x4x128x1xf32>
  return %p : tensor<2x4x128x128xf32>
}

// In f32 the max is folded on the product itself, which the group only
// reads: the chain takes a reduction of its group's input as it takes one
// of its values, and stays the product's epilogue (the scores are not
// stored and loaded back).
// CHECK-LABEL: func.func @max_on_f32_product
// CHECK-COUNT-4: ktile.matmul %[[ACC:[0-9]+]]
// CHECK: ktile.tensor_copy %[[S:.*]], %[[ACC]]
// CHECK: ktile.tensor_reduce %{{.*}}, %[[S]] {{.*}}op = "max", src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [128 x 4, 1 x 128]>}
// CHECK-NOT: ktile.dma_copy %{{.*}}, %[[S]] {
func.func @max_on_f32_product(%q: tensor<2x4x128x64xf32> {kgraph.name = "q", kgraph.role = "batch_input"}, %k: tensor<2x4x64x128xf32> {kgraph.name = "k", kgraph.role = "batch_input"}) -> (tensor<2x4x128x128xf32> {kgraph.name = "p", kgraph.role = "metric"}) {
  %c = kgraph.constant dense<8.0> : tensor<f32>
  %x = kgraph.matmul %q, %k : tensor<2x4x128x64xf32>, tensor<2x4x64x128xf32> -> tensor<2x4x128x128xf32>
  %s = kgraph.div %x, %c {kgraph.fusion = 0 : i64} : tensor<2x4x128x128xf32>, tensor<f32>
  %m0 = kgraph.reduce_max %x, [3] {keepdim = true} : tensor<2x4x128x128xf32> -> tensor<2x4x128x1xf32>
  %m = kgraph.div %m0, %c : tensor<2x4x128x1xf32>, tensor<f32>
  %d = kgraph.sub %s, %m {kgraph.fusion = 1 : i64} : tensor<2x4x128x128xf32>, tensor<2x4x128x1xf32>
  %e = kgraph.exp %d {kgraph.fusion = 1 : i64} : tensor<2x4x128x128xf32>
  %z = kgraph.reduce_sum %e, [3] {keepdim = true} : tensor<2x4x128x128xf32> -> tensor<2x4x128x1xf32>
  %p = kgraph.div %e, %z {kgraph.fusion = 2 : i64} : tensor<2x4x128x128xf32>, tensor<2x4x128x1xf32>
  return %p : tensor<2x4x128x128xf32>
}

// Heads of 256 queries over 640 keys: more than one tile per element, so
// the chain runs on each row tile's whole rows, gathered in SBUF from the
// product's two PSUM tiles (512 and 128 columns). The causal mask, built
// after the product, is computed from each element's position (its rows
// restart with each head), in place on the scaled scores: columns every
// row of the tile keeps need nothing, those none keeps a memset, and only
// the 127 between go through affine_select. The scores never go to HBM.
// CHECK-LABEL: func.func @long_rows
// CHECK: ktile.tensor_copy %[[SPAN:[0-9]+]], %{{.*}} {dst = #kisa.ap<sbuf, bf16, p = 0:128, offset = 0, dims = [1 x 512]>, src = #kisa.ap<psum
// CHECK-NOT: ktile.dma_copy %{{.*}}, %[[SPAN]]
// CHECK: ktile.tensor_copy %[[SPAN]], %{{.*}} {dst = #kisa.ap<sbuf, bf16, p = 0:128, offset = 1024, dims = [1 x 128]>, src = #kisa.ap<psum
// CHECK: ktile.tensor_scalar %[[S:[0-9]+]], %[[SPAN]] {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 640]>, op0 = "div"
// CHECK-NEXT: ktile.affine_select %[[S]], %[[S]] {base = 1 : i64, compare = "le", dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 1540, dims = [1 x 127]>
// CHECK-NEXT: ktile.memset %[[S]] {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 2048, dims = [1 x 128]>
// CHECK: ktile.tensor_reduce {{.*}}op = "max", src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 640]>
// CHECK: ktile.dma_copy %[[P:[0-9]+]], %{{.*}} {dst = #kisa.ap<hbm, bf16, p = 0:128, offset = 0, dims = [1 x 640], pstride = 640>
// The second row tile (rows 128 to 255 of the first head) keeps its first
// 513 columns and fills none.
// CHECK: ktile.affine_select {{.*}}offset = 2052, dims = [1 x 127]>
// CHECK-NOT: ktile.memset
// CHECK: ktile.dma_copy %[[P]], %{{.*}} {dst = #kisa.ap<hbm, bf16, p = 0:128, offset = 163840, dims = [1 x 640]
// The second head's first rows.
// CHECK: ktile.affine_select {{.*}}offset = 1540, dims = [1 x 127]>
// CHECK: ktile.memset
// CHECK: ktile.dma_copy %[[P]], %{{.*}} {dst = #kisa.ap<hbm, bf16, p = 0:128, offset = 327680, dims = [1 x 640]
func.func @long_rows(%q: tensor<1x2x256x64xbf16> {kgraph.name = "q", kgraph.role = "batch_input"}, %k: tensor<1x2x64x640xbf16> {kgraph.name = "k", kgraph.role = "batch_input"}) -> (tensor<1x2x256x640xbf16> {kgraph.name = "p", kgraph.role = "metric"}) {
  %c = kgraph.constant dense<8.0> : tensor<f32>
  %lowest = kgraph.constant dense<-1.0e30> : tensor<f32>
  %x = kgraph.matmul %q, %k : tensor<1x2x256x64xbf16>, tensor<1x2x64x640xbf16> -> tensor<1x2x256x640xbf16>
  %ri = kgraph.iota {dim = 0 : i64} : tensor<256xi32>
  %rr = kgraph.reshape %ri : tensor<256xi32> -> tensor<256x1xi32>
  %rows = kgraph.broadcast %rr : tensor<256x1xi32> -> tensor<256x640xi32>
  %ci = kgraph.iota {dim = 0 : i64} : tensor<640xi32>
  %cr = kgraph.reshape %ci : tensor<640xi32> -> tensor<1x640xi32>
  %cols = kgraph.broadcast %cr : tensor<1x640xi32> -> tensor<256x640xi32>
  %ahead = kgraph.sub %cols, %rows {kgraph.fusion = 3 : i64} : tensor<256x640xi32>, tensor<256x640xi32>
  %bound = kgraph.constant dense<384> : tensor<256x640xi32>
  %future = kgraph.compare "gt", %ahead, %bound {kgraph.fusion = 3 : i64} : tensor<256x640xi32>, tensor<256x640xi32>
  %xf = kgraph.cast %x {kgraph.fusion = 0 : i64} : tensor<1x2x256x640xbf16> -> tensor<1x2x256x640xf32>
  %s = kgraph.div %xf, %c {kgraph.fusion = 0 : i64} : tensor<1x2x256x640xf32>, tensor<f32>
  %sm = kgraph.select %future, %lowest, %s {kgraph.fusion = 0 : i64} : tensor<256x640xi1>, tensor<f32>, tensor<1x2x256x640xf32>
  %m = kgraph.reduce_max %sm, [3] {keepdim = true} : tensor<1x2x256x640xf32> -> tensor<1x2x256x1xf32>
  %d = kgraph.sub %sm, %m {kgraph.fusion = 1 : i64} : tensor<1x2x256x640xf32>, tensor<1x2x256x1xf32>
  %e = kgraph.exp %d {kgraph.fusion = 1 : i64} : tensor<1x2x256x640xf32>
  %z = kgraph.reduce_sum %e, [3] {keepdim = true} : tensor<1x2x256x640xf32> -> tensor<1x2x256x1xf32>
  %p = kgraph.div %e, %z {kgraph.fusion = 2 : i64} : tensor<1x2x256x640xf32>, tensor<1x2x256x1xf32>
  %pb = kgraph.cast %p {kgraph.fusion = 2 : i64} : tensor<1x2x256x640xf32> -> tensor<1x2x256x640xbf16>
  return %pb : tensor<1x2x256x640xbf16>
}
