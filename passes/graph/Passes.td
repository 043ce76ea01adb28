//===- Passes.td - the graph phase (kgraph -> kgraph) ----------------------===//

#ifndef KILN_PASSES_GRAPH_PASSES_TD
#define KILN_PASSES_GRAPH_PASSES_TD

include "mlir/Pass/PassBase.td"

def KGraphDataParallel : Pass<"kgraph-data-parallel", "mlir::func::FuncOp"> {
  let summary = "Average gradients, the loss and metrics across the workers";
  let description = [{
    Data parallelism: every worker runs the same step on its own shard of
    the batch, and the parameters stay identical because every worker applies
    the *mean* gradient. With `world-size` above 1 this pass replaces the
    `kgraph.gradient` markers with `all_reduce` (mean) ops:

    - **Buckets.** The gradients are taken in program order (the order the
      backward pass produces them) and packed into buckets of at most
      `bucket-bytes` (one gradient larger than that is a bucket of its own),
      as PyTorch's DDP does: each gradient is flattened, the bucket's
      gradients are concatenated, one `all_reduce` averages the bucket, and
      slices of its result replace the gradients. Buckets follow the order
      in which the gradients are *produced* (front ends mark them all after
      the backward pass), and a bucket is reduced right after its last
      gradient is produced, so its collective depends on nothing later in
      the backward pass; the engine phase's list scheduler then overlaps it
      with the rest of the backward pass. A bucket of one
      gradient is reduced in place, without the copies.
    - **Loss and metrics.** Outputs whose role is `loss` or `metric` are
      averaged too, so that every worker (and rank 0's log) sees the
      group's figure rather than its own shard's.

    - **ZeRO-1** (`shard-optimizer-state`). Each worker of a group of W
      holds rows `[r * d/W, (r + 1) * d/W)` of a parameter's optimizer
      state (its first dimension `d` split in W blocks) and updates only
      those rows: the optimizer state per worker is 1/W of the whole. The
      gradient is reduce-scattered (mean) instead of all-reduced, in
      buckets like the all-reduces (a gradient of half a bucket or more
      alone: a joined bucket's parts are strided, so its gradients are
      copied in), so the worker receives the average of its block; the update (the optimizer's elementwise formula) is
      recomputed on blocks, reading the parameter's block with
      `worker_shard`, and each whole sum of the update's values (a
      clipping or LAMB trust-ratio norm) becomes the sum of the worker's
      block plus an `all_reduce` (sum) of those. The updated blocks are
      all-gathered, again in buckets, into the new parameter. Optimizer
      state arguments and their results become blocks
      (`tensor<d/W x ...>`), which the runtime slices and joins. A
      parameter stays whole (all-reduced, its state whole) when W does not
      divide its first dimension or its update reads or writes anything
      else (a matmul, a reshape, a metric output, another parameter's
      values).

    With `world-size` 1 the markers are replaced by their operands and
    nothing else changes. Either way no `kgraph.gradient` remains. (An
    embedding table's gradient that `kgraph-sparse-table-updates` averaged
    over its picked rows, before this pass, has no marker left.)
  }];
  let options = [
    Option<"worldSize", "world-size", "int64_t", "1",
           "Workers of the data-parallel group">,
    Option<"bucketBytes", "bucket-bytes", "int64_t", "16777216",
           "The largest bucket of gradients reduced by one collective">,
    Option<"shardOptimizerState", "shard-optimizer-state", "bool", "false",
           "ZeRO-1: each worker holds and updates a block of rows of every "
           "parameter's optimizer state">,
  ];
}

def KGraphSparseTableUpdates : Pass<"kgraph-sparse-table-updates",
                                   "mlir::func::FuncOp"> {
  let summary = "Update an embedding table early, and its batch's rows again at the end";
  let description = [{
    An embedding table's gradient (`embedding_backward`) is zero in every
    row no token of the batch picks, but an optimizer such as AdamW still
    changes those rows (weight decay, decaying moments), so its update reads
    and writes the whole table and its state after the last gradient: for
    BERT-base's 30522 x 768 table, 0.56 GB as the step's tail. When the
    gradient is read only by elementwise ops of the table's shape (the
    update), and those read, besides the gradient, only arguments of the
    table's shape (the table and its moments) and values alike for every
    row (the step's scalars), and their values go nowhere but to the
    function's results, the pass rewrites the update as:

    - the same ops over the whole table with a zero gradient, which depend
      on nothing the step computes (kgraph-schedule-updates moves them to
      the step's start, and the tile phase spreads their loop nest over the
      forward pass, where the DMA queues have room); for a row no token
      picks this is exactly the update. The arithmetic the zero makes
      trivial is left out: a product with it is zero, a sum with it or a
      difference less it the other operand (only a zero's sign can differ
      from computing it), so AdamW's moments only decay and it runs two
      `tensor_tensor`s an element instead of four;
    - the picked rows of each table-shaped argument, gathered (`embedding`)
      as soon as the indices exist, before the first update writes;
    - the same ops over those rows ([tokens, D]) with their gradient rows,
      `E . dY` where `E[i, j] = (indices[i] == indices[j])`: row i gets the
      sum over every token that picks its row, as the scatter-add does
      (padding tokens contribute nothing);
    - each result the whole-table update with those rows written over it
      (`scatter_rows`; tokens that pick one row write the same values).

    With `world-size` above 1 and a gradient marked for averaging
    (`kgraph.gradient`; the pass runs before `kgraph-data-parallel`), the
    rows that change are those any worker's batch picks: the indices are
    gathered from every worker (`all_gather`, at the step's start, a few
    kilobytes), the picked rows of the table and its state are gathered at
    all of them, and each worker computes its own gradient in those rows,
    `E . dY` with `E[i, j] = (all[i] == indices[j])`, which it marks for
    averaging in place of the dense gradient: `kgraph-data-parallel`
    buckets and all-reduces `[group tokens, D]` instead of the table. The
    dense gradient and its one-hot product are gone. Rows that several
    workers pick are updated alike and written alike.

    A table needs at least eight rows per token the update covers (the
    group's tokens when averaged) to be split: the whole-table half slows
    the forward pass it is spread over, and the picked half, whose row
    scatters (128 rows each, one after another) end the step, grows with
    the tokens. Measured on BERT-base (30522 rows, 1024 tokens a worker),
    the split gains at 30 rows a token (one worker) and 15 (two workers)
    and loses at 7.5 (four); a position table keeps its update whole.
  }];
  let options = [
    Option<"worldSize", "world-size", "int64_t", "1",
           "Workers of the data-parallel group">,
  ];
}

def KGraphDecompose : Pass<"kgraph-decompose", "mlir::func::FuncOp"> {
  let summary = "Rewrite composite ops into the primitives the tile phase tiles";
  let description = [{
    After this pass a function holds only the ops the tile phase lowers
    directly: constants, elementwise arithmetic and activation functions,
    `compare`/`select`/`cast`, the data-movement ops (`reshape`, `transpose`,
    `broadcast`, `slice`, `concat`), `reduce_sum`/`reduce_max`/`reduce_min`,
    `matmul`, 1-D `iota`, `gelu_backward`, `dropout`, `embedding` (gather
    DMAs) and `all_reduce`.

    - `linear` becomes a 2-D `matmul` with the weight read transposed, plus a
      broadcast bias add.
    - `softmax`, `log_softmax` and their backwards, `layer_norm` and its
      backward become the max-subtracted row reductions and elementwise ops
      that define them.
    - Indexing (`gather`, `scatter_add`, `index_select`,
      `embedding_backward`, `nll_loss`, its backward, `argmax`) becomes
      one-hot arithmetic: a comparison of the indices with an `iota` gives a
      0/1 matrix that a `matmul` or a masked reduction contracts, at
      TensorE's full rate. `embedding` stays: a lookup of whole rows is a
      gather DMA (`dma_gather`), which reads only the rows it picks. An
      `nll_loss` target first looks its class id up in the ids `[C, 1]`
      with an `embedding` (an ignored target looks up class 0), and the
      one-hot rows compare the ids looked up: the gather checks the
      targets.
    - `reduce_mean` is a sum times 1/n; `pow` is `exp(y log x)` (squares and
      square roots are spotted); the activation backwards are their formulas.

    Each rewrite computes what the reference interpreter computes for the op,
    up to f32 re-association. Where the engines cannot check (an index of
    `gather`, `index_select`, `scatter_add` or `embedding_backward` out of
    range), the compiled step yields a zero row where the interpreter
    reports an error; the gathers of an embedding and of an `nll_loss`'s
    targets stop the program with an error naming the index, as the
    interpreter does.
  }];
}

def KGraphAssignLayout : Pass<"kgraph-assign-layout", "mlir::func::FuncOp"> {
  let summary = "Choose which axis lives on the partitions for reductions";
  let description = [{
    The tile phase puts the leading (row) dimensions of every tensor on the
    128 partitions and the innermost dimension along the free axis, so a
    reduction over trailing dimensions is a free-axis `tensor_reduce`. This
    pass rewrites the reductions that are not:

    - a sum over *leading* dimensions (bias gradients, `sum(dim=0)`) becomes
      a `matmul` of a ones row with the tensor, which contracts the rows on
      TensorE instead of reading the tensor with element-sized strides;
    - a sum over one middle dimension of at most 16 elements whose slices
      are blocks of at least 128 contiguous elements (grouped-query
      attention's key and value gradients, summed over the query heads of
      each key-value head) adds the slices elementwise, in f32 for 16-bit
      floats, rounded once: one fusion group that loads each slice as it
      lies;
    - any other reduction gets an explicit `transpose` that moves the reduced
      dimensions innermost.
  }];
}

def KGraphRecomputeCheckpoints : Pass<"kgraph-recompute-checkpoints",
                                      "mlir::func::FuncOp"> {
  let summary = "Recompute what checkpointed functions computed, for the backward pass";
  let description = [{
    A checkpointed call (`torch.utils.checkpoint`) is the ops between its
    `kgraph.checkpoint` input and output markers that its inputs reach. Each
    value such a call computes that ops after the call read (its backward
    pass) is computed again, with the part of the call it needs, right
    before the first of those readers, which then read the copies; the
    originals die with the forward pass, so the step keeps only each call's
    inputs and outputs through it. Every marker is then replaced by its
    operand. It runs after the last common-subexpression elimination, which
    would merge the copies with the originals again, and before fusion,
    which groups the copies with the backward ops that read them.
  }];
}

def KGraphFuseElementwise : Pass<"kgraph-fuse-elementwise", "mlir::func::FuncOp"> {
  let summary = "Group elementwise chains so their intermediates stay in SBUF";
  let description = [{
    Marks maximal groups of elementwise ops of one result shape with a
    common `kgraph.fusion` id. The tile phase lowers a group as one loop
    nest: each tile of the group's inputs is loaded once, every op of the
    chain runs on it in SBUF, and only values used outside the group are
    stored to HBM. Operands from outside the group may broadcast (they are
    loaded with stride-0 access patterns). An op joins the groups of all its
    operands of its shape, merging them into one, when the merged group can
    run at the position of its last op: no op outside the group that comes
    before that position uses a group value. Chains that start apart and
    meet (AdamW's weight decay, first and second moments meeting in the
    parameter update) so become one loop nest. Ops standing in the way (a
    reduction of a group value before an op that wants to join) move below
    that op when nothing the group computes needs them and none belongs to
    a group of several ops; the tile phase then folds such a reduction in
    the group's loop nest. Reshapes first move below elementwise ops whose
    full-shape operands they all reshape (operands of lower rank stay when
    they broadcast alike in both shapes; a cast of a reshaped argument or
    concat stays, since a matmul's load performs it, while a cast of a
    computed value sinks and joins its producer's group), so a front end's
    reshapes between 2-D products and 3-D activations do not cut chains.
    A reshape of a slice stays: a data-parallel step's gradient, unpacked
    from its all-reduced bucket, is read in its parameter's shape, so the
    optimizer's update stays one group beside the parameter and its state.
    Groups of one op are marked only when the op reads a matmul's product
    and is not a cast: the tile phase then computes it on the product's
    output tiles as they leave PSUM (a GELU's backward, a bias add), so the
    product does not go to HBM and back; a lone cast of a product is left
    to the product's stores and its readers' loads.
  }];
  let options = [
    Option<"maxOps", "max-ops", "int64_t", "64",
           "The largest group, in ops (bounds the SBUF working set)">,
  ];
}

def KGraphRematerialize : Pass<"kgraph-rematerialize", "mlir::func::FuncOp"> {
  let summary = "Recompute values made of constants and seeds where they are read";
  let description = [{
    A value computed by elementwise ops (and reshapes) from splat constants
    and scalars alone is cheap to compute and costs an HBM round trip to
    keep: a dropout's keep-mask, scaled to f32, which the forward pass
    computes and the backward pass reads again. After fusion, every
    elementwise op that reads such a value computed outside its fusion group
    gets a copy of the value's computation in its own group (in the op's
    shape: a reshape moves nothing, and dropout's numbers follow the
    row-major index, so the values are the same); a reader in no group
    starts one. Originals nothing reads any more are erased. The mask then
    never goes to HBM: each group draws the random numbers it needs.

    Then a group value that other groups' elementwise ops read (and nothing
    else outside its group) is computed again in each of those groups when
    that reads fewer bytes: its computation, up to four elementwise ops of
    its own group, has as other operands only leaves, arguments that are
    row vectors along its last dimension, values in HBM anyway (arguments,
    values other groups read), and matmul products of a narrower type
    (whose epilogue then stores them). A GELU's f32 input, a bias plus a
    bf16 product, which the GELU's backward reads, is so read as the bf16
    product and the bias instead.
  }];
}

def KGraphMixedPrecision : Pass<"kgraph-mixed-precision", "mlir::func::FuncOp"> {
  let summary = "bf16 matmul inputs with f32 accumulation";
  let description = [{
    Casts both operands of every f32 `matmul` to bf16 and the result back to
    f32. The tile phase folds the casts into the DMA loads (which convert on
    the fly) and writes the f32 PSUM accumulator straight out, so the
    product is accumulated in f32 from bf16 inputs, as TensorE does at its
    full bf16 rate. An operand that is a reshape or transpose of a value an
    elementwise op computes is narrowed right after that op, the views
    following: matmuls reading the value through different views share
    one cast (after CSE), which fusion puts in the producer's group so that
    it stores bf16. A bf16 product widened to f32 and used as an operand
    is not narrowed again. Enabled by `--auto-cast=bf16`.
  }];
  let dependentDialects = [];
}

def KGraphScheduleUpdates : Pass<"kgraph-schedule-updates", "mlir::func::FuncOp"> {
  let summary = "Move each state update right behind the last op it needs";
  let description = [{
    The tile phase lowers ops in program order, and a front end traces the
    optimizer after the whole backward pass: every parameter's update
    would wait for the last gradient and run as one tail of elementwise
    work (a sixth of BERT-base's step) while TensorE and the DMA queues
    idle. This pass reorders the function so that each *update* follows
    the last op it needs, where the engine phase's scheduler overlaps it
    with the rest of the backward pass; the gradient it consumes also dies
    sooner, which shortens its HBM live range.

    - An update is an op, or a fusion group taken whole, whose results are
      returned and used nowhere else (AdamW's new parameter and moments),
      or only merged into a returned result by `scatter_rows` (the two
      halves kgraph-sparse-table-updates splits a table's update into), or
      packed into an `all_gather`'s bucket (ZeRO-1's updated parameter
      blocks, which kgraph-data-parallel gathers).
    - It follows the ops that define its operands (for a value of a fusion
      group, the group's last op: the tile phase computes a group where its
      last op stands), and, for a result the function writes over an
      argument (`kgraph.aliases`), every other read of that argument, direct
      or through views and casts, so the tile phase can still update it in
      place.
    - Units whose results are small (at most 128 elements: the optimizer's
      step scalars) and constants move up with the update that needs them,
      and so do the views (slice, reshape) that unpack a gradient from its
      all-reduced bucket in a data-parallel step, and ZeRO-1's reads of a
      worker's block of a parameter (`worker_shard`).
    - An update that reads an all-reduced gradient also follows the next
      bucket's `all_reduce`, if there is one. Right behind its own, its
      first loads would wait for the collective in flight and hold up the
      in-order engine streams behind them; a bucket's worth of backward pass
      later the collective is done (BERT-base at 4 workers: 16.0 ms a step
      against 17.6 ms right behind its own and 17.1 ms with every update at
      the end).

    Everything else keeps its relative order; the pass changes no op. When
    two updates would wait for each other, the order stays as it was.
  }];
}

#endif // KILN_PASSES_GRAPH_PASSES_TD
