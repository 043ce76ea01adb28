//===- Passes.td - the tile phase (kgraph -> ktile) ------------------------===//

#ifndef KILN_PASSES_TILE_PASSES_TD
#define KILN_PASSES_TILE_PASSES_TD

include "mlir/Pass/PassBase.td"

def KGraphPlanMatmulOperands
    : Pass<"kgraph-plan-matmul-operands", "mlir::func::FuncOp"> {
  let summary = "Mark the ops a matmul's own instructions compute";
  let description = [{
    The first planning pass of the tile phase. It records `kgraph.fold` on
    each op whose work a matmul's instructions do, and takes it out of its
    fusion group: `"loads"` on a bf16 cast of an f32 value that only
    matmuls read (the loads round, unless the cast ends a group whose f32
    value nothing else reads: the group then stores the bf16 value);
    `"evacuation"` on the f32 cast that is a product's only reader (PSUM
    is f32 already); `"on_chip"` on a one-hot matrix, a group
    `cast(compare("eq", broadcast(indices [n, 1]), broadcast(iota [1, C])))`
    that only 2-D products read with its n rows along K (an embedding's
    gradient), and on its iota row if nothing else reads it: the products
    compute its tiles from the indices (C at most 2^24, exact in f32).
    `convert-kgraph-to-ktile` emits nothing for a folded op. An elementwise
    op's f32 results that only such bf16 casts read, directly or through
    views (attention's fused QKV projection), are listed in
    `kgraph.narrowed`: the op rounds them and stores bf16, half the bytes.
  }];
}

def ConvertKGraphToKTile : Pass<"convert-kgraph-to-ktile", "mlir::ModuleOp"> {
  let summary = "Tile every kgraph op into 128-partition tiles";
  let description = [{
    Every tensor becomes an HBM buffer: function arguments and results,
    constants (initialised buffers; splat constants become immediates), and
    intermediates (`ktile.alloc` in `"hbm"`, placed later by the HBM plan).
    `reshape`, `transpose`, `broadcast` and `slice` move no data: they are
    views whose strides the consumers' DMA access patterns apply (a reshape
    of a strided view is copied only when a run of the dimensions it merges
    does not step through memory as one). Every ktile op carries the
    location of the kgraph op it lowers.

    - **Elementwise ops and fusion groups** (`kgraph.fusion`): the iteration
      space is the result shape with dimensions collapsed where every operand
      allows it; the second-innermost dimension goes on the partitions (128 at
      a time), the innermost along the free axis in chunks sized so the
      group's tiles fit in SBUF twice over. When the innermost dimension
      is short (under 256 elements) and a neighbour fits beside it, the
      free axis spans both (a two-dimensional DMA pattern) and the
      partitions take the larger of the two dimensions above: merging or
      splitting attention heads is one DMA per 128 tokens, not one per
      token; short rows of a two-dimensional space go several to a
      partition ([R, C] as [R / g, g, C]), and an input broadcast along the
      rows (a per-row statistic) is loaded once per row and read with
      stride 0. Each input tile is loaded once (an input every row block
      reads alike, a bias or a scalar, once for all of them),
      every op of the group computes in SBUF, and only values used outside
      the group are stored; a group's last bf16 cast of a matmul operand is
      stored narrowed when nothing else reads its f32 input, and so is an
      f32 value that only bf16 matmul operands read through views (rounded
      on an engine, then stored). Reductions
      of group values over their trailing dimensions (directly or through
      a reshape that keeps the reduced elements trailing) fold in the loop
      nest as tiles are computed, the row blocks' results stored together;
      so do sums over its leading dimensions (`ones[1, R] . V`, a layer
      norm's weight gradient): each tile of V against a column of ones on
      TensorE, a PSUM column per 128 columns accumulating over the row
      blocks. A value only they read is not stored. Groups of one shape
      joined by such reductions and the elementwise ops on their results
      (a softmax's max, shift, exponential, sum and division; a layer
      norm's centring, variance, epsilon and reciprocal square root) form
      a row chain (with reductions of what a group reads that run before
      its values are read: a row max of the scores the group scales): where
      every iteration holds whole rows, one loop nest
      runs it all, a row's statistics kept one element per row in SBUF and
      read across the row with stride 0, so the values between the groups
      never go to HBM; statistics read later (a layer norm's reciprocal
      deviation, for the backward pass) are stored as reductions are. A
      chain is formed only when nothing outside it reads its values before
      its last op; where rows are too long for one iteration its parts run
      alone. Against a few rows per partition (up to 8, of at least 128
      columns), an op reading each row's statistic runs a row at a time, a
      `tensor_scalar` with the statistic as per-partition scalar, which
      ScalarE may run, not a `tensor_tensor` on the port VectorE and GpSimd
      share. An f32 cast of a bf16 tile copies nothing: its readers read
      the bf16 tile (the engines compute in f32). `dropout` is one of them: GpSimd's `random`
      draws each tile's numbers from the step's seed and the elements'
      row-major indices (offset by the stream), so the mask is the reference
      interpreter's whatever the tiling. In a chain, a square whose rows a
      sum of the chain folds (a layer norm's variance) is one ScalarE
      `activation` that also writes each row's sum (`reduce_dst`), not a
      `tensor_tensor` and a `tensor_reduce` on the SBUF port VectorE and
      GpSimd share. Likewise `(x * c) * x` or `(x * x) * c` in f32, with c
      an immediate >= 0 and the inner product read only there (AdamW's
      second moment): one `activation` squaring `x * sqrt(c)`.
    - **Reductions** over the trailing dimensions: rows on partitions, a
      `tensor_reduce` per free-axis chunk, and the chunk partials combined.
      Short rows go several to a partition (a load of ~256 KiB), one
      `tensor_reduce` folding the inner free dimension, and the results of
      up to 1024 columns of blocks leave in one store.
    - **Matmul**: `[128 x 512]` output tiles accumulated over 128-deep K
      slices in one PSUM bank (`accumulate` after the first slice). Both
      operands are loaded with K on the partitions; an operand stored with K
      innermost is loaded row-major, four K slices per DMA, and transposed
      on TensorE (the four into one PSUM bank; for slices wider than 128
      columns, each slice's transposes of a bank's width of blocks into
      one bank, which leaves in one copy) instead of read with
      element-sized DMA strides. Each moving slice serves a block of up to
      four row tiles, whose stationary slices stay in SBUF for every N tile
      when they fit (one DMA per K slice for the whole block when M is
      innermost); a moving operand of at most three quarters of the
      budget stays for every row block, in blocks of two row tiles (so
      that the next N tile's accumulators find free PSUM banks), two
      such blocks sharing each stationary DMA where M is innermost. One-tile products batched over heads go
      four consecutive batch elements per DMA, PSUM bank and store. bf16
      casts of f32 operands fold into the loads; a cast of the result back
      to f32 folds into the PSUM evacuation. An elementwise group that is
      the only user of a 2-D product, whose ops all have the product's
      shape and whose other inputs exist before the matmul, is the
      matmul's *epilogue*: it runs on each output tile as it leaves PSUM
      (a bias once per column tile), so the product never goes to HBM and
      back. A linear layer's bias and GELU and AdamW on a weight gradient
      (written over the weight, when its last read comes before the
      gradient) run this way, and row reductions of the group's values
      over the product's columns fold tile by tile. A row chain that
      reduces the last dimension of a batched product of one-tile elements
      (attention's scores and their softmax, forward and backward), reads
      the product alone and reads nothing computed after it, is that
      product's epilogue: it runs on the tile of four heads side by side
      as they leave PSUM, a row of each head on every partition, the
      dropout's numbers drawn a head at a time, and the scores never go
      to HBM. So is a row chain over the last dimension whose input a 2-D
      product's epilogue group computes (a layer norm after a linear
      layer's bias, dropout and residual add), with the ops between them
      (a reshape that keeps the rows, the mean's row sum and scale), when
      the rows are at most 1024 columns: the epilogue runs on spans of
      whole rows, the row values read later (the reciprocal deviation) are
      gathered a column per row tile, and the group's values are stored
      only if later ops read them. A group alone that reads row sums of
      such an epilogue group's values (a layer norm's backward after the
      next layer's input gradient) joins it the same way. A batched value `[..., G, M, N]` with short rows (under 512
      bytes, which move at half bandwidth) that only products read,
      directly or through views, is laid out `[..., M, G, N]` in HBM: the
      several elements along G that a tile holds are then one run per
      partition, for its store and for the products' loads (attention's
      bf16 probabilities as `[B, S, H, S]`, its context as the row-major
      `[B, S, H·D]` that the output projection reads). An epilogue whose
      stored values only leave the step (an optimizer update's) runs on
      spans of several PSUM banks, a row whole when the budget holds it,
      so that its loads and stores are one DMA per span. A row sum
      `ones[1, K] . dY` after a product `transpose(dY) . X` (a bias
      gradient beside its weight gradient) is computed by that product
      from the dY tiles it holds as stationary operand. A 2-D product's
      epilogue computes row sums of its values (through reshapes and the
      bf16 cast of the sum's loads) the same way as a loop nest, each tile
      against a column of ones, all sums in one PSUM tile; a group that
      only such sums read, and that reads only the epilogue's values and
      what exists by the product, joins the epilogue for them (a layer
      norm's bias and weight gradients in the backward pass). A one-hot operand,
      `compare("eq", indices [n, 1], iota [1, C])` cast to a float type
      (an embedding's gradient `one-hot(ids)^T . dY`, or a gather's) read
      by products only, with its n rows along K, is computed where it
      would be loaded: one `tensor_scalar` per slice, `(j + offset) ==
      ids[p]`, on a column iota kept for the product and the slice's ids
      as f32; the matrix itself is never built. A weight (an argument)
      that several 2-D products load through bf16 casts (the forward pass
      transposed, the backward as it is) is narrowed by the first
      product's loads, which also store the bf16 tiles into a bf16 copy of
      the weight's buffer; the later products read the copy (half the
      bytes, the same bits).
    - **Embedding** lookups: 128 token ids per block, one per partition,
      and a `dma_gather` per column chunk fetching the rows they pick.
      `scatter_rows` is the inverse: each block's rows load and a
      `dma_scatter` per column chunk writes them where their ids point,
      over the input's buffer when nothing else reads the input (the
      argument's, when the result is written over an argument and the
      input's elementwise producer can write there too), else over a copy.
    - **A whole-table update** (a group whose values go only into row
      scatters' inputs, kgraph-sparse-table-updates' zero-gradient half):
      its loop nest is cut at stores into 64 slices spread over the
      program from where it stands to the op computing the loss (without
      one, half the way to its first reader), each emitted between the ops
      there, and its SBUF buffers are marked `ktile.background` for the
      memory plan. Emitted whole at the step's start, its tiles would take
      every SBUF address in turn and the forward pass would wait behind it.
    - `iota` is GpSimd's index generator; `all_reduce` a collective on the
      HBM buffer; `concat` copies each input into its slice of the result,
      except inputs whose producer (a matmul or an elementwise group)
      reaches the concat through one-use reshapes and transposes only:
      those are computed straight into their slice, seen through the
      inverse views.

    The ktile-to-ktile rewrites that follow the lowering
    (`ktile-fuse-tensor-scalars`, `ktile-reuse-dead-tiles`) are passes of
    their own.

    An updated parameter or optimizer state (a result that aliases an
    argument) is written in place when its producer is an elementwise group
    that reads the argument tile for tile and nothing reads the argument
    later, directly or through views (a transposed weight); otherwise it is
    copied into the argument's buffer at the end.
  }];
  let dependentDialects = ["::kiln::ktile::KTileDialect",
                           "::kiln::kisa::KisaDialect"];
  let options = [
    Option<"target", "target", "std::string", "\"trn1\"", "The target">,
    Option<"sbufBudget", "sbuf-budget", "int64_t", "65536",
           "Bytes per partition one tile iteration may use (half of what "
           "double buffering needs)">,
  ];
}

def KTileFuseTensorScalars
    : Pass<"ktile-fuse-tensor-scalars", "mlir::func::FuncOp"> {
  let summary = "Join two tensor_scalars through an f32 tile into one";
  let description = [{
    `tensor_scalar` has two ALU stages, `dst = (src op0 s0) op1 s1`, but the
    lowering emits a group's ops one at a time. Two `tensor_scalar`s through
    an f32 tile that only the second reads (AdamW's `sqrt(v) / c + eps`, a
    layer norm's `1/n` and epsilon, a dropout mask's scaling) become one
    instruction with both stages, when at most one of them takes a
    per-partition scalar (the second's only on a floating-point source):
    the engines compute in f32, so the result is the same, and an engine
    pays one instruction's fixed cost and one pass over the elements
    instead of two. A first stage over a whole tile that several
    `tensor_scalar`s read in column ranges (scores divided by the scale,
    then each head's row max subtracted) joins each of them on its range,
    and the first stage's pass over the tile goes.
  }];
}

def KTileReuseDeadTiles : Pass<"ktile-reuse-dead-tiles", "mlir::func::FuncOp"> {
  let summary = "Write elementwise results over the tiles they read last";
  let description = [{
    An elementwise instruction (`tensor_tensor`, `tensor_scalar`,
    `activation`, `tensor_copy`) that reads an SBUF tile of its result's
    type for the last time, with the result's own access pattern, writes
    the result over it instead of a tile of its own: each element is read
    before it is written, and readers before it on other engines are
    ordered by the engine phase's write-after-read dependencies. A result
    that reads no such tile may take over a tile of its type that the op
    just before it read for the last time, when it reads that op's result
    (it waits for that op anyway). Fewer tiles per iteration let the memory
    plan's rotating SBUF hold more iterations at once, so loads run further
    ahead (AdamW's update allocated fifteen tiles per iteration, where
    about eight are ever live).
  }];
}

def KTilePlanMemory : Pass<"ktile-plan-memory", "mlir::ModuleOp"> {
  let summary = "Place SBUF, PSUM and HBM buffers by liveness";
  let description = [{
    Sets `address` on every `ktile.alloc`: a byte offset inside each
    partition for SBUF and PSUM, an offset in the program's HBM for HBM
    buffers, and `ktile.hbm_bytes` on the function.

    The placement walks the ops in program order with the live range of
    every buffer from upstream's liveness analysis (first to last use). SBUF
    is first-fit from a rotating start, so a buffer freed by one tile
    iteration is not the next one handed out: consecutive iterations get
    different buffers and the engine phase can overlap one iteration's loads
    with the previous one's compute (double buffering). PSUM buffers take
    whole 2 KiB banks. HBM intermediates reuse the space of dead ones;
    arguments, results and constants get fixed places first.

    Buffers marked `ktile.background` (a whole-table update spread over the
    forward pass) are placed in a region of their own at the top of SBUF,
    which the rest does not use until the last of them is dead: otherwise
    the forward pass's tiles, sharing their addresses, would wait for the
    update's. The region is a quarter more than the least they fit in,
    placed alone in program order, and at most a quarter of SBUF (beyond
    that they share SBUF with the rest).

    SBUF buffers no DMA reads or writes (copies out of PSUM, an elementwise
    group's temporaries) whose uses span at most 500 ops are placed in a
    region of their own at the bottom of SBUF, twice the least they fit in
    placed alone, at most a quarter of SBUF; one the region cannot take
    joins the rest. Loads and results then rotate through the shared region
    alone, so a load's tile does not wait for an engine still reading a
    temporary that had its address.

    When SBUF runs out (`sbuf-bytes` lowers the capacity, for tests and
    `kiln compile --sbuf-bytes`), the live buffer whose next use is furthest
    away (Belady) is spilled: a `dma_copy` stores it to an HBM scratch
    buffer in front of the allocation that needs its space, and a fresh
    buffer reloads it just before its next use, which reads the copy from
    then on; `ktile.spills` on the function counts them. The buffers one
    instruction reads together are never spilled for one another; when those alone do not fit, or PSUM (whose banks hold
    accumulators) is full, the error names the allocation and what is live.
  }];
  let options = [
    Option<"target", "target", "std::string", "\"trn1\"", "The target">,
    Option<"sbufBytes", "sbuf-bytes", "int64_t", "0",
           "SBUF bytes per partition to use (0: the target's capacity)">,
  ];
}

#endif // KILN_PASSES_TILE_PASSES_TD
