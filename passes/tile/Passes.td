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
    value nothing else reads: the group then stores the bf16 value; with
    `conv-input-copies`, also when only convolutions read the cast: the
    group stores the bf16 copy beside the f32 value others read);
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
  let options = [
    Option<"convInputCopies", "conv-input-copies", "bool", /*default=*/"true",
           "Store bf16 copies of the f32 activations convolutions read (more "
           "HBM; the compiler drops them where the plan would overflow)">
  ];
}

def KGraphPlanRowSums : Pass<"kgraph-plan-row-sums", "mlir::func::FuncOp"> {
  let summary = "Plan where each sum over rows is computed";
  let description = [{
    Layout assignment writes a sum over rows as `ones[1, R] . V`. Run alone,
    it would read V back from HBM; this pass plans it where V's tiles
    already are. A bias gradient `ones[1, K] . dY` after the weight
    gradient `transpose(dY) . X` is computed by that product from the dY
    tiles it holds as stationary operand: the product is labelled
    `kgraph.product = N` and the sum gets `kgraph.sum_beside = N`. A sum
    of a value that an elementwise group (or a lone elementwise op) of V's
    shape computes before it gets `kgraph.sum_in_loop_nest`: the group's
    loop nest (or a matmul's epilogue it joins) folds it tile by tile when
    its layout allows, and it runs alone otherwise. Batch norm's sum of a
    convolution's f32 output per channel (`reduce_sum` over all but the
    first dim of its channels-first transpose) is computed by the
    convolution as its tiles leave PSUM: the convolution is labelled and
    the sum gets `kgraph.sum_beside`.
  }];
}

def KGraphPlanEpilogues
    : Pass<"kgraph-plan-epilogues", "mlir::func::FuncOp"> {
  let summary = "Plan what matmuls and convolutions compute on their output tiles, and row chains";
  let description = [{
    Groups of one shape joined by reductions over their trailing
    dimensions and the ops on those reductions (a softmax, a layer norm)
    become row chains, one loop nest over whole rows (`kgraph.row_chain = K`,
    each chain's `from` and `shape` in the function's `kgraph.row_chains`).
    A matmul computes on its output tiles, as they leave PSUM, the fusion
    group that alone reads a 2-D product (`kgraph.epilogue = G`: a bias and
    activation, AdamW on a weight gradient), or a chain over the last
    dimension of a batched product (of one-tile elements, or of elements
    in whole row tiles with rows of up to 4096 keys) or of a 2-D product's
    epilogue values (`kgraph.chain_epilogue = K`: attention's softmax, a
    layer norm after a linear layer), with the row sums of its
    values (`kgraph.sum_in_epilogue = N` on the sum, N the product's
    `kgraph.product` label) and the groups only those sums read
    (`kgraph.joins_epilogue = N`). A convolution (or input gradient)
    computes the fusion group that alone reads its output on each block of
    it (`kgraph.epilogue = G`: a bias and ReLU, eval-mode batch norm, ReLU's
    backward), when the group's other inputs are there by the convolution.
    Views an epilogue reads that stand after the product are lowered before
    it (`kgraph.early_for = [N...]`).
    docs/compiler.md ("Tile phase") gives the conditions of each.
  }];
  let options = [
    Option<"target", "target", "std::string", "\"trn1\"",
           "The target (its PSUM bank bounds an epilogue's row sums)">,
  ];
}

def KGraphPlanBuffers : Pass<"kgraph-plan-buffers", "mlir::func::FuncOp"> {
  let summary = "Plan results computed into arguments' and concats' buffers";
  let description = [{
    An updated parameter or optimizer state (a result that aliases an
    argument) is computed straight into the argument's buffer when its
    producer is an elementwise group or a row scatter and every other read
    of the argument, through views too, happens before it (with the
    epilogue plan deciding where each op's reads happen): `kgraph.in_place
    = array<i64: A...>`, the argument of each result (-1: none). A concat
    input whose producer (a matmul or an elementwise group) reaches it
    through one-use reshapes and transposes only is computed straight into
    its part of the concat's buffer, seen through the inverse views
    (attention's backward merges the Q, K and V gradients without a copy):
    `kgraph.into_slices = array<i64: I...>` on the concat.
  }];
}

def ConvertKGraphToKTile : Pass<"convert-kgraph-to-ktile", "mlir::ModuleOp"> {
  let summary = "Tile every kgraph op into 128-partition tiles";
  let description = [{
    Every tensor becomes an HBM buffer: function arguments and results,
    constants (initialised buffers; splat constants become immediates), and
    intermediates (`ktile.alloc` in `"hbm"`, placed later by
    `ktile-plan-memory`). `reshape`, `transpose`, `broadcast` and `slice`
    move no data: they are views whose strides the consumers' DMA access
    patterns apply. Each op is lowered by its family: an elementwise fusion
    group (`kgraph.fusion`) or row chain as one loop nest of 128-partition
    tiles, a reduction, a matmul as `[128 x 512]` PSUM tiles over 128-deep
    K slices (with an elementwise group or a row chain as its epilogue on
    each output tile), a gather or scatter by indexed DMAs, a collective.
    Ops another op's instructions compute (`kgraph.fold`) emit nothing, and
    values in `kgraph.narrowed` are stored in bf16. Every ktile op carries
    the location of the kgraph op it lowers. docs/compiler.md ("Tile
    phase") describes each layout and fusion the lowering applies, with
    what it saves on the BERT-base step.
  }];
  let dependentDialects = ["::kiln::ktile::KTileDialect",
                           "::kiln::kisa::KisaDialect"];
  let options = [
    Option<"target", "target", "std::string", "\"trn1\"", "The target">,
    Option<"sbufBudget", "sbuf-budget", "int64_t", "65536",
           "Bytes per partition one tile iteration may use (half of what "
           "double buffering needs)">,
    Option<"hbmTrades", "hbm-trades", "bool", /*default=*/"true",
           "Trade HBM for speed: a weight that several row blocks of a "
           "product read transposed is transposed once into an HBM copy">,
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
    whole 2 KiB banks. Arguments, results, constants and the operands of
    collectives get fixed places first; the other HBM intermediates rotate
    through an arena four times the most that is ever live at once, so a
    dead one's space is reused only after several times the live bytes
    have been placed since.

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

    An HBM plan larger than a core's share of the target's HBM (the
    chip's divided by its cores; or `hbm-bytes`) is an error
    that names the function, its need and the ways to shrink it, and marks
    the module `kiln.hbm_overflow`: the compile driver then plans again
    without the planning passes' trades of HBM for speed.
  }];
  let options = [
    Option<"target", "target", "std::string", "\"trn1\"", "The target">,
    Option<"sbufBytes", "sbuf-bytes", "int64_t", "0",
           "SBUF bytes per partition to use (0: the target's capacity)">,
    Option<"hbmBytes", "hbm-bytes", "int64_t", "0",
           "HBM bytes to use (0: the target's capacity)">,
  ];
}

#endif // KILN_PASSES_TILE_PASSES_TD
