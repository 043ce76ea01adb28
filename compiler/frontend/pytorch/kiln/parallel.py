"""Tensor parallelism: the job's layout and Megatron-style sharded layers.

A job of ``WORLD_SIZE`` workers with tensor-parallel degree T is laid out
as WORLD_SIZE / T tensor-parallel groups of T consecutive ranks (so that a
group stays inside one instance, as Megatron and neuronx-distributed lay
them out); the workers at one place in their groups form a data-parallel
group. Each worker of a tensor-parallel group holds a shard of every
sharded layer; the data-parallel groups replicate those shards and average
their gradients as plain data parallelism does.

The layers follow Megatron's semantics:

* ``ColumnParallelLinear`` holds rows ``[r * out / T, (r + 1) * out / T)`` of
  the weight (and bias): each worker computes its slice of the output
  features. Its input's gradient is summed across the group.
* ``RowParallelLinear`` holds the matching columns of the weight: each
  worker's partial product is summed across the group (one all-reduce in
  the forward pass); the bias is replicated and added after the sum.
* ``ParallelEmbedding`` holds a block of the vocabulary's rows; a token
  outside the block looks up zeros, and the group's sum is the embedding.
* ``parallel_cross_entropy`` takes logits whose vocabulary is split across
  the group (a ``ColumnParallelLinear`` output head) and computes the
  loss without gathering the full logits.

The collectives these layers need are ops of the traced graph
(``kiln::all_reduce``, ``kiln::all_gather``, ``kiln::worker_shard`` with
group ``"tensor"``): ``compile_step`` compiles them into the step, which
runs them through the tensor-parallel group's communicator. On the host
(the trace's example run, eager calls) a group is one worker alone: the
all-reduce is the identity, a gather repeats its operand, a shard is the
first block. Run a tensor-parallel model through ``kiln.compile_step``.

docs/distributed.md, "Tensor parallelism", is the guide.
"""

import math
import os

import torch
import torch.nn.functional as F

from . import _kiln, distributed
from .aten_to_kgraph import _packet_name

TENSOR = "tensor"

#: The attribute a sharded parameter carries: the dimension its tensor-
#: parallel group splits (``compile_step`` and checkpoints read it).
PARTITION_DIM = "tensor_parallel_dim"

# ---------------------------------------------------------------------------
# The layout
# ---------------------------------------------------------------------------

_tensor_parallel = None


def initialize(tensor_parallel=1):
    """Lays this job out with tensor-parallel groups of `tensor_parallel`
    workers (it must divide the world size). Call it before building the
    model: the layers shard themselves by it. ``KILN_TENSOR_PARALLEL`` sets
    the default."""
    global _tensor_parallel
    size = distributed.world().size
    tensor_parallel = int(tensor_parallel)
    _kiln.layout_groups(size, tensor_parallel, distributed.world().rank)
    if _tensor_parallel not in (None, tensor_parallel) and distributed.has_communicators():
        raise RuntimeError(
            f"the job is already laid out with tensor-parallel groups of "
            f"{_tensor_parallel}; a process keeps one layout")
    _tensor_parallel = tensor_parallel


def tensor_parallel_size():
    """Workers of this worker's tensor-parallel group."""
    global _tensor_parallel
    if _tensor_parallel is None:
        initialize(int(os.environ.get("KILN_TENSOR_PARALLEL", "1") or 1))
    return _tensor_parallel


def groups():
    """(tensor-parallel group, data-parallel group): the job's ranks each
    holds, this worker among them."""
    w = distributed.world()
    return _kiln.layout_groups(w.size, tensor_parallel_size(), w.rank)


def tensor_parallel_rank():
    """This worker's place in its tensor-parallel group: which shard it holds."""
    return distributed.world().rank % tensor_parallel_size()


def data_parallel_size():
    return distributed.world().size // tensor_parallel_size()


def data_parallel_rank():
    """This worker's place in its data-parallel group: which part of each
    global batch it trains on."""
    return distributed.world().rank // tensor_parallel_size()


def group_size(group):
    return tensor_parallel_size() if group == TENSOR else data_parallel_size()


# ---------------------------------------------------------------------------
# Collectives as traced ops
# ---------------------------------------------------------------------------

# The kiln namespace has one defining library (distributed's).
_library = distributed._library
_library.define("all_reduce(Tensor x, str group) -> Tensor")
_library.define("all_gather(Tensor x, str group, int size) -> Tensor")
_library.define("worker_shard(Tensor x, str group, int size) -> Tensor")


def _gathered(x, size):
    return x.repeat(size, *([1] * (x.dim() - 1)))


def _first_block(x, size):
    return x[: x.shape[0] // size].clone()


# On the host a group is one worker alone (see the module's docstring);
# their meaning is the compiled one.
_library.impl("all_reduce", lambda x, group: x.clone(), "CPU")
_library.impl("all_gather", lambda x, group, size: _gathered(x, size), "CPU")
_library.impl("worker_shard", lambda x, group, size: _first_block(x, size), "CPU")
_library.impl("all_reduce", lambda x, group: torch.empty_like(x), "Meta")
_library.impl("all_gather", lambda x, group, size: x.new_empty(
    (x.shape[0] * size, *x.shape[1:])), "Meta")
_library.impl("worker_shard", lambda x, group, size: x.new_empty(
    (x.shape[0] // size, *x.shape[1:])), "Meta")


# Meta tensors have no autograd fallthrough in torch 1.13 (as for
# kiln::gradient); the autograd Functions below say how gradients flow.
for _name in ("all_reduce", "all_gather", "worker_shard"):
    _library.impl(_name, distributed.below_autograd(getattr(torch.ops.kiln, _name)),
                  "AutogradMeta")


def _all_reduce(x):
    return torch.ops.kiln.all_reduce(x, TENSOR)


def all_reduce_tensor_parallel(x):
    """`x` summed across the tensor-parallel group, in a traced step (no
    gradient flows through it)."""
    return _all_reduce(x)


def _gather_last(x):
    """The group's `x`s joined along the last dimension, in rank order."""
    size = tensor_parallel_size()
    moved = x.movedim(-1, 0).contiguous()
    return torch.ops.kiln.all_gather(moved, TENSOR, size).movedim(0, -1)


def _shard_last(x):
    """This worker's block of `x`'s last dimension."""
    size = tensor_parallel_size()
    moved = x.movedim(-1, 0).contiguous()
    return torch.ops.kiln.worker_shard(moved, TENSOR, size).movedim(0, -1)


class _CopyToGroup(torch.autograd.Function):
    """The identity; its gradient is summed across the group (each worker's
    shard of the next layer contributes part of it)."""

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad):
        return _all_reduce(grad)


class _ReduceFromGroup(torch.autograd.Function):
    """The group's sum of partial results; every worker then holds the
    whole, and its gradient passes through unchanged."""

    @staticmethod
    def forward(ctx, x):
        return _all_reduce(x)

    @staticmethod
    def backward(ctx, grad):
        return grad


class _GatherFromGroup(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return _gather_last(x)

    @staticmethod
    def backward(ctx, grad):
        return _shard_last(grad)


class _ScatterToGroup(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return _shard_last(x)

    @staticmethod
    def backward(ctx, grad):
        return _gather_last(grad)


def copy_to_tensor_parallel(x):
    return _CopyToGroup.apply(x)


def reduce_from_tensor_parallel(x):
    return _ReduceFromGroup.apply(x)


def gather_from_tensor_parallel(x):
    return _GatherFromGroup.apply(x)


def scatter_to_tensor_parallel(x):
    return _ScatterToGroup.apply(x)


# ---------------------------------------------------------------------------
# Layers
# ---------------------------------------------------------------------------

def _divide(n, what):
    size = tensor_parallel_size()
    if n % size:
        raise ValueError(f"{what} ({n}) is not divisible by the tensor-parallel "
                         f"size {size}")
    return n // size


def _shard_of(full, dim):
    """This worker's block of `full` along `dim`."""
    size = tensor_parallel_size()
    return full.chunk(size, dim)[tensor_parallel_rank()].clone()


def _parameter(tensor, dim):
    p = torch.nn.Parameter(tensor)
    if dim is not None:
        setattr(p, PARTITION_DIM, dim)
    return p


class ColumnParallelLinear(torch.nn.Module):
    """``y = x A^T + b`` with A's rows (the output features) split across
    the tensor-parallel group. With ``gather_output`` every worker gets the
    whole output; without it (the default) each keeps its slice, as the
    next layer (a RowParallelLinear, or parallel_cross_entropy) wants."""

    def __init__(self, in_features, out_features, bias=True,
                 gather_output=False, dtype=None, device=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.gather_output = gather_output
        local = _divide(out_features, "out_features")
        full = torch.empty(out_features, in_features, dtype=dtype, device=device)
        torch.nn.init.kaiming_uniform_(full, a=math.sqrt(5))
        self.weight = _parameter(_shard_of(full, 0), 0)
        if bias:
            bound = 1 / math.sqrt(in_features) if in_features else 0
            b = torch.empty(out_features, dtype=dtype, device=device).uniform_(
                -bound, bound)
            self.bias = _parameter(_shard_of(b, 0), 0)
        else:
            self.register_parameter("bias", None)
        assert self.weight.shape == (local, in_features)

    @classmethod
    def from_linear(cls, linear, gather_output=False):
        """This worker's shard of a whole ``torch.nn.Linear``."""
        layer = cls(linear.in_features, linear.out_features,
                    bias=linear.bias is not None, gather_output=gather_output,
                    dtype=linear.weight.dtype, device=linear.weight.device)
        with torch.no_grad():
            layer.weight.copy_(_shard_of(linear.weight, 0))
            if linear.bias is not None:
                layer.bias.copy_(_shard_of(linear.bias, 0))
        return layer

    def forward(self, x):
        y = F.linear(copy_to_tensor_parallel(x), self.weight, self.bias)
        return gather_from_tensor_parallel(y) if self.gather_output else y


class RowParallelLinear(torch.nn.Module):
    """``y = x A^T + b`` with A's columns (the input features) split across
    the tensor-parallel group: each worker multiplies its slice of the
    input (``input_is_parallel``, the default: a ColumnParallelLinear's
    output) and the group sums the partial products. The bias is whole on
    every worker."""

    def __init__(self, in_features, out_features, bias=True,
                 input_is_parallel=True, dtype=None, device=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.input_is_parallel = input_is_parallel
        _divide(in_features, "in_features")
        full = torch.empty(out_features, in_features, dtype=dtype, device=device)
        torch.nn.init.kaiming_uniform_(full, a=math.sqrt(5))
        self.weight = _parameter(_shard_of(full, 1), 1)
        if bias:
            bound = 1 / math.sqrt(in_features) if in_features else 0
            self.bias = _parameter(torch.empty(out_features, dtype=dtype, device=device)
                                   .uniform_(-bound, bound), None)
        else:
            self.register_parameter("bias", None)

    @classmethod
    def from_linear(cls, linear, input_is_parallel=True):
        layer = cls(linear.in_features, linear.out_features,
                    bias=linear.bias is not None,
                    input_is_parallel=input_is_parallel,
                    dtype=linear.weight.dtype, device=linear.weight.device)
        with torch.no_grad():
            layer.weight.copy_(_shard_of(linear.weight, 1))
            if linear.bias is not None:
                layer.bias.copy_(linear.bias)
        return layer

    def forward(self, x):
        if not self.input_is_parallel:
            x = scatter_to_tensor_parallel(x)
        y = reduce_from_tensor_parallel(F.linear(x, self.weight))
        return y + self.bias if self.bias is not None else y


class ReplicatedHeadsLinear(torch.nn.Module):
    """A linear layer whose outputs are `heads` heads, fewer than the
    tensor-parallel group (grouped-query attention's key-value heads at a
    larger tensor-parallel size), as Megatron and neuronx-distributed
    replicate them: every worker keeps the whole weight and computes the
    one head its block of query heads reads, head ``r // (size / heads)``
    on worker r. The weight's gradient is the sum over the workers that
    share each head, the same on every worker (a replicated parameter)."""

    def __init__(self, linear, heads):
        super().__init__()
        size = tensor_parallel_size()
        if size % heads:
            raise ValueError(f"{heads} heads cannot be replicated over a "
                             f"tensor-parallel group of {size} (its size must be "
                             f"a multiple of the head count)")
        if linear.out_features % heads:
            raise ValueError(f"{linear.out_features} output features are not "
                             f"{heads} heads of one size")
        self.heads, self.in_features = heads, linear.in_features
        self.out_features = linear.out_features // heads  # one head
        self.weight = torch.nn.Parameter(linear.weight.detach().clone())
        self.bias = (torch.nn.Parameter(linear.bias.detach().clone())
                     if linear.bias is not None else None)

    def _mine(self, whole):
        """This worker's head of `whole` (the heads along dimension 0)."""
        copies = tensor_parallel_size() // self.heads
        heads = whole.reshape(self.heads, -1).repeat_interleave(copies, 0)
        # The gradient, every worker's head gathered, is the whole on each.
        mine = scatter_to_tensor_parallel(heads.movedim(0, -1)).movedim(-1, 0)
        return mine.reshape(-1, *whole.shape[1:])

    def forward(self, x):
        bias = self._mine(self.bias) if self.bias is not None else None
        return F.linear(copy_to_tensor_parallel(x), self._mine(self.weight), bias)


class ParallelEmbedding(torch.nn.Module):
    """An embedding whose vocabulary's rows are split across the group:
    each worker looks up the tokens in its block (zeros for the others) and
    the group sums the lookups."""

    def __init__(self, num_embeddings, embedding_dim, dtype=None, device=None):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.rows = _divide(num_embeddings, "num_embeddings")
        full = torch.empty(num_embeddings, embedding_dim, dtype=dtype, device=device)
        torch.nn.init.normal_(full)
        self.weight = _parameter(_shard_of(full, 0), 0)

    @classmethod
    def from_embedding(cls, embedding):
        layer = cls(embedding.num_embeddings, embedding.embedding_dim,
                    dtype=embedding.weight.dtype, device=embedding.weight.device)
        with torch.no_grad():
            layer.weight.copy_(_shard_of(embedding.weight, 0))
        return layer

    def forward(self, ids):
        local, outside = _local_ids(ids, self.rows)
        looked_up = F.embedding(local, self.weight)
        looked_up = looked_up.masked_fill(outside.unsqueeze(-1), 0.0)
        return reduce_from_tensor_parallel(looked_up)


def _block_start(rows):
    """The first vocabulary row of this worker's block, as a traced value:
    the artifact serves every rank of the group, so the rank picks it when
    the step runs (a worker_shard of every block's start)."""
    size = tensor_parallel_size()
    # A constant of the graph, hence on the host even when the model's
    # tensors are meta tensors; one element, so it combines with any.
    starts = torch.arange(size, dtype=torch.int64) * rows
    return torch.ops.kiln.worker_shard(starts, TENSOR, size).reshape(())


def _local_ids(ids, rows):
    """`ids` relative to this worker's block of the vocabulary (0 where
    outside it), and where they are outside it."""
    start = _block_start(rows)
    local = ids - start
    outside = (local < 0) | (local >= rows)
    return local.masked_fill(outside, 0), outside


def parallel_cross_entropy(logits, target):
    """The mean cross-entropy of `logits` whose last dimension (the
    vocabulary) is split across the tensor-parallel group, as
    ``F.cross_entropy`` of the whole logits, without gathering them: the
    group shares each row's maximum, its sum of exponentials and the
    target's logit."""
    logits = logits.float()
    rows = logits.shape[-1]
    with torch.no_grad():
        local_max = logits.max(dim=-1).values
        # Every worker's row maxima, one block each: their maximum is the
        # whole row's (any shift gives the same loss; this one is stable).
        row_max = torch.ops.kiln.all_gather(
            local_max.unsqueeze(0), TENSOR, tensor_parallel_size()).max(dim=0).values
    shifted = logits - row_max.unsqueeze(-1)
    sum_exp = reduce_from_tensor_parallel(shifted.exp().sum(dim=-1))
    local, outside = _local_ids(target, rows)
    picked = shifted.gather(-1, local.unsqueeze(-1)).squeeze(-1)
    target_logit = reduce_from_tensor_parallel(picked.masked_fill(outside, 0.0))
    return (sum_exp.log() - target_logit).mean()


# ---------------------------------------------------------------------------
# Sharding a whole model
# ---------------------------------------------------------------------------

COLUMN, ROW, EMBEDDING = "column", "row", "embedding"


class Divide:
    """A plan entry: divides the module's integer attributes `names` (its
    head counts, say) by the tensor-parallel size, for a module whose
    forward reads them to reshape its sharded projections. A count a
    HeadColumns entry replicated (fewer heads than workers) becomes 1.
    Divide entries apply after every layer of the plan is converted."""

    def __init__(self, *names):
        self.names = names


class HeadColumns:
    """A plan entry for an nn.Linear whose outputs are heads, as many as
    its parent module's integer attribute `count` says (an attention's key
    or value projection, "kv_heads"): split across the group by heads, as
    "column" does, when the group's size divides the count; when there are
    fewer heads than workers, each worker keeps the whole weight and
    computes the one head its query heads read (ReplicatedHeadsLinear)."""

    def __init__(self, count):
        self.count = count


def parallelize(model, plan):
    """Shards `model` in place for this worker's tensor-parallel group, as
    `plan` says: {module name pattern (fnmatch, "layers.*.attn.q"): style},
    style ``"column"`` (an nn.Linear becomes a ColumnParallelLinear),
    ``"row"`` (a RowParallelLinear), ``"embedding"`` (an nn.Embedding
    becomes a ParallelEmbedding), ``HeadColumns(...)`` or ``Divide(...)``.
    Each shard is this worker's block of the whole module's weights, so
    every layout of one initialised model trains the same model. Returns
    `model`; a pattern that matches nothing is an error (a misspelt plan
    would silently leave layers whole)."""
    import fnmatch
    modules = dict(model.named_modules())
    matched = {}
    for pattern in plan:
        matched[pattern] = [n for n in modules if fnmatch.fnmatchcase(n, pattern)]
        if not matched[pattern]:
            raise ValueError(f"tensor-parallel plan: '{pattern}' matches no module "
                             f"of {type(model).__name__}")
    replicated = set()  # (parent module name, count attribute) of replicated heads
    for pattern, style in plan.items():
        if not isinstance(style, Divide):
            for name in matched[pattern]:
                _convert_layer(model, modules, name, pattern, style, replicated)
    for pattern, style in plan.items():
        if isinstance(style, Divide):
            for name in matched[pattern]:
                _divide_counts(modules[name], name, style, replicated)
    return model


def _convert_layer(model, modules, name, pattern, style, replicated):
    """Replaces module `name` by its shard as `style` says; records the
    head counts a HeadColumns entry replicated in `replicated`."""
    convert = {
        COLUMN: (torch.nn.Linear, ColumnParallelLinear.from_linear),
        ROW: (torch.nn.Linear, RowParallelLinear.from_linear),
        EMBEDDING: (torch.nn.Embedding, ParallelEmbedding.from_embedding),
    }
    module, (parent, _, leaf) = modules[name], name.rpartition(".")
    owner = modules[parent] if parent else model
    kind = style
    if isinstance(style, HeadColumns):
        heads, size = getattr(owner, style.count), tensor_parallel_size()
        if heads < size:
            _check_kind(name, module, torch.nn.Linear)
            setattr(owner, leaf, ReplicatedHeadsLinear(module, heads))
            replicated.add((parent, style.count))
            return
        _divide(heads, f"{parent}.{style.count}")
        kind = COLUMN
    if kind not in convert:
        raise ValueError(f"tensor-parallel plan: '{pattern}' has style "
                         f"{style!r} (column, row, embedding, HeadColumns or "
                         f"Divide)")
    module_kind, make = convert[kind]
    _check_kind(name, module, module_kind)
    setattr(owner, leaf, make(module))


def _divide_counts(module, name, divide, replicated):
    for attribute in divide.names:
        count = getattr(module, attribute)
        setattr(module, attribute, 1 if (name, attribute) in replicated
                else _divide(count, f"{name}.{attribute}"))


def _check_kind(name, module, kind):
    if not isinstance(module, kind):
        raise TypeError(f"tensor-parallel plan: '{name}' is a "
                        f"{type(module).__name__}, not an {kind.__name__}")


# ---------------------------------------------------------------------------
# Sharded state, whole in checkpoints
# ---------------------------------------------------------------------------

def partition_dims(model):
    """{parameter name: the dimension its group splits} for `model`'s
    sharded parameters."""
    return {name: getattr(p, PARTITION_DIM) for name, p in model.named_parameters()
            if getattr(p, PARTITION_DIM, None) is not None}


def gather_shards(shard, dim):
    """The whole tensor from every tensor-parallel worker's `shard` (every
    worker of the group must call it)."""
    if tensor_parallel_size() == 1:
        return shard
    moved = shard.movedim(dim, 0).contiguous()
    whole = distributed.all_gather_rows(moved, group=TENSOR)
    return whole.movedim(0, dim).contiguous()


def shard(whole, dim):
    """This worker's block of a whole tensor along `dim`."""
    return _shard_of(whole, dim)


# ---------------------------------------------------------------------------
# Values that differ across the group (dropout's seeds)
# ---------------------------------------------------------------------------

# Ops whose result takes only a shape (and a constant) from their tensor
# operand. empty_like is not one of them: dropout draws its mask into it
# (``torch.empty_like(x).bernoulli_(keep)``), so it stands for `x`.
_SHAPE_ONLY = {"zeros_like", "ones_like", "full_like", "new_zeros", "new_ones",
               "new_full", "scalar_tensor"}


def varying_across_group(gm, varying_inputs):
    """The nodes of traced step `gm` whose values can differ between the
    workers of a tensor-parallel group: those computed from one of
    `varying_inputs` (positions of placeholders: the sharded parameters) or
    from a worker's block (``kiln::worker_shard`` over the group), unless a
    collective of the group (``kiln::all_reduce``, ``kiln::all_gather``)
    has made them alike since. The rest the workers compute alike. Dropouts
    of the first kind draw per-shard masks (``distributed.shard_seed``);
    those of the second must draw the same masks on every worker."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    varying = {placeholders[i] for i in varying_inputs}
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        name = _packet_name(node.target)
        in_group = len(node.args) > 1 and node.args[1] == TENSOR
        if name == "worker_shard" and in_group:
            varying.add(node)
        elif name in ("all_reduce", "all_gather") and in_group:
            continue
        elif name not in _SHAPE_ONLY and any(a in varying for a in node.all_input_nodes):
            varying.add(node)
    return varying
