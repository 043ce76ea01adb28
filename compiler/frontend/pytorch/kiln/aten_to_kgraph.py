"""Converting a functional aten graph (from tracing.py) to a kgraph graph.

One converter per aten op packet, registered with @converts. Each receives a
Context (the writer, values of earlier nodes) and the fx node, and returns
the node's kgraph value (or a tuple, for ops with several results). The
result dtype and shape come from the trace's tensor metadata, so converters
only decide *how* to compute, never *what shape* comes out.

kgraph is stricter than aten in a few places the converters absorb: binary
ops need one element type (scalars become rank-0 constants, operands are
cast to the result dtype); compare needs equal types (operands broadcast);
aten's views are kgraph reshapes, transposes, broadcasts and slices.

`SUPPORTED_OPS` lists the packets (docs/pytorch.md has the table).
"""

import math
import operator

import torch

from .graph_writer import GraphWriter, Value
from .tracing import user_frame

aten = torch.ops.aten

_CONVERTERS = {}


def converts(*names):
    def register(fn):
        for name in names:
            _CONVERTERS[name] = fn
        return fn
    return register


class UnsupportedOpError(TypeError):
    """An aten op with no kgraph conversion; names the op and model line."""


class ConversionError(ValueError):
    """An op Kiln converts, used in a way kgraph cannot express."""


def _meta(node):
    meta = node.meta.get("tensor_meta")
    if meta is None:
        raise ConversionError(f"{node.target}: the trace recorded no shape")
    return meta


def _float_dtype(dtype):
    return dtype in (torch.float32, torch.bfloat16, torch.float16)


class Context:
    def __init__(self, writer: GraphWriter, seed: Value = None,
                 shard_seed: Value = None, varying=frozenset()):
        self.w = writer
        self.values = {}
        # Dropouts of the fx nodes in `varying` (values that differ across a
        # tensor-parallel group) draw with `shard_seed`, the others `seed`.
        self.seed = seed
        self.shard_seed = shard_seed
        self.varying = varying
        self.rng_streams = 0
        self.node = None
        self.gm = None            # the fx graph being converted

    # -- values -------------------------------------------------------------

    def v(self, arg):
        if isinstance(arg, Value):
            return arg
        if isinstance(arg, torch.fx.Node):
            value = self.values[arg]
            if isinstance(value, tuple):
                raise ConversionError(f"{arg} has several results; expected one")
            if not isinstance(value, Value):
                raise ConversionError(f"{arg} is {value!r}: not a tensor Kiln holds")
            return value
        raise ConversionError(f"expected a tensor, got {arg!r}")

    def out(self):
        """(dtype, shape) of the current node's single result."""
        meta = _meta(self.node)
        return meta.dtype, tuple(meta.shape)

    def outs(self):
        return [(m.dtype, tuple(m.shape)) for m in _meta(self.node)]

    def scalar(self, x, dtype):
        return self.w.constant(torch.tensor(x, dtype=dtype))

    def tensor_or_scalar(self, x, dtype):
        if isinstance(x, (torch.fx.Node, Value)):
            return self.cast(self.v(x), dtype)
        if isinstance(x, float) and math.isinf(x):
            # Device select computes t*c + f*(1-c): an infinite fill would
            # turn masked-out lanes into NaN, so it is the largest finite
            # value instead, which softmax and max treat the same way.
            x = math.copysign(torch.finfo(dtype).max, x) if _float_dtype(dtype) else x
        return self.scalar(x, dtype)

    # -- shape ops ----------------------------------------------------------

    def cast(self, v, dtype):
        if v.dtype == dtype:
            return v
        return self.w.one("cast", [v], dtype, v.shape)

    def reshape(self, v, shape):
        shape = tuple(shape)
        if v.shape == shape:
            return v
        return self.w.one("reshape", [v], v.dtype, shape)

    def transpose(self, v, perm):
        perm = [p % v.rank for p in perm] if v.rank else []
        if perm == list(range(v.rank)):
            return v
        shape = [v.shape[p] for p in perm]
        return self.w.one("transpose", [v], v.dtype, shape, permutation=perm)

    def broadcast(self, v, shape):
        shape = tuple(shape)
        if v.shape == shape:
            return v
        return self.w.one("broadcast", [v], v.dtype, shape)

    def binary(self, op, a, b, dtype=None, shape=None):
        out_dtype, out_shape = self.out() if dtype is None else (dtype, shape)
        return self.w.one(op, [self.tensor_or_scalar(a, out_dtype),
                               self.tensor_or_scalar(b, out_dtype)],
                          out_dtype, out_shape)

    def unary(self, op, x, **attrs):
        dtype, shape = self.out()
        return self.w.one(op, [self.cast(self.v(x), dtype)], dtype, shape,
                          **attrs)


def _dims(dims, rank):
    if dims is None:
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    return sorted(d % rank for d in dims) if rank else []


# ---------------------------------------------------------------------------
# Aliases, copies and views
# ---------------------------------------------------------------------------

@converts("detach", "alias", "clone", "lift_fresh_copy", "contiguous",
          "lift_fresh")
def _identity(cx, node):
    return cx.v(node.args[0])


@converts("gradient")
def _gradient(cx, node):
    # kiln.gradient (distributed.mark_gradient): averaged across the
    # data-parallel group by the compiler, the identity for one worker.
    x = cx.v(node.args[0])
    return cx.w.one("gradient", [x], x.dtype, x.shape, parameter=node.args[1])


@converts("checkpoint")
def _checkpoint(cx, node):
    # kiln.checkpoint (a torch.utils.checkpoint call's boundary, see
    # static_shapes): the compiler recomputes what the call computed.
    x = cx.v(node.args[0])
    return cx.w.one("checkpoint", [x], x.dtype, x.shape, region=node.args[1],
                    side=node.args[2])


@converts("all_reduce")
def _all_reduce(cx, node):
    # kiln.all_reduce (kiln.parallel): a sum across the named group.
    x = cx.v(node.args[0])
    return cx.w.one("all_reduce", [x], x.dtype, x.shape, reduction="sum",
                    group=node.args[1])


@converts("all_gather", "worker_shard")
def _group_blocks(cx, node):
    # kiln.all_gather / kiln.worker_shard (kiln.parallel): the group's
    # operands joined along the first dimension, or this worker's block.
    x = cx.v(node.args[0])
    dtype, shape = cx.out()
    return cx.w.one(node.target.overloadpacket.__name__, [x], dtype, shape,
                    group=node.args[1])


@converts("_to_copy", "to")
def _to_copy(cx, node):
    dtype, _ = cx.out()
    return cx.cast(cx.v(node.args[0]), dtype)


@converts("copy")
def _copy(cx, node):
    dtype, shape = cx.out()
    return cx.broadcast(cx.cast(cx.v(node.args[1]), dtype), shape)


@converts("view", "_unsafe_view", "_reshape_alias", "reshape", "unsqueeze",
          "squeeze", "flatten",
          "unflatten", "view_as", "reshape_as")
def _reshape(cx, node):
    return cx.reshape(cx.v(node.args[0]), cx.out()[1])


@converts("t")
def _t(cx, node):
    x = cx.v(node.args[0])
    return cx.transpose(x, [1, 0]) if x.rank == 2 else x


@converts("transpose")
def _transpose(cx, node):
    x = cx.v(node.args[0])
    a, b = node.args[1] % max(x.rank, 1), node.args[2] % max(x.rank, 1)
    perm = list(range(x.rank))
    perm[a], perm[b] = perm[b], perm[a]
    return cx.transpose(x, perm)


@converts("permute")
def _permute(cx, node):
    return cx.transpose(cx.v(node.args[0]), list(node.args[1]))


@converts("expand", "expand_as", "broadcast_to")
def _expand(cx, node):
    x = cx.v(node.args[0])
    _, shape = cx.out()
    # aten.expand may add leading dims; kgraph broadcast follows NumPy rules.
    return cx.broadcast(x, shape)


@converts("slice")
def _slice(cx, node):
    x = cx.v(node.args[0])
    dim = node.args[1] if len(node.args) > 1 else 0
    start = node.args[2] if len(node.args) > 2 else None
    end = node.args[3] if len(node.args) > 3 else None
    step = node.args[4] if len(node.args) > 4 else 1
    dim %= x.rank
    size = x.shape[dim]
    start, end, _ = slice(start, end, step).indices(size)
    end = max(end, start)
    starts = [0] * x.rank
    limits = list(x.shape)
    strides = [1] * x.rank
    starts[dim], limits[dim], strides[dim] = start, end, step
    if start == 0 and end == size and step == 1:
        return x
    return cx.w.one("slice", [x], x.dtype, cx.out()[1], start=starts,
                    limit=limits, stride=strides)


@converts("select")
def _select(cx, node):
    x = cx.v(node.args[0])
    dim, index = node.args[1] % x.rank, node.args[2] % x.shape[node.args[1] % x.rank]
    starts, limits = [0] * x.rank, list(x.shape)
    starts[dim], limits[dim] = index, index + 1
    kept = list(x.shape)
    kept[dim] = 1
    sliced = cx.w.one("slice", [x], x.dtype, kept, start=starts, limit=limits,
                      stride=[1] * x.rank)
    return cx.reshape(sliced, cx.out()[1])


def _pad(cx, g, dim, before, after):
    """`g` with `before` and `after` zeros along `dim` (slice backwards)."""
    pieces = []
    for size in (before, None, after):
        if size is None:
            pieces.append(g)
        elif size > 0:
            shape = list(g.shape)
            shape[dim] = size
            pieces.append(cx.broadcast(cx.scalar(0, g.dtype), shape))
    if len(pieces) == 1:
        return g
    shape = list(g.shape)
    shape[dim] = g.shape[dim] + before + after
    return cx.w.one("concat", pieces, g.dtype, shape, dim=dim)


@converts("select_backward")
def _select_backward(cx, node):
    grad, sizes, dim, index = cx.v(node.args[0]), list(node.args[1]), node.args[2], node.args[3]
    dim %= len(sizes)
    index %= sizes[dim]
    kept = list(sizes)
    kept[dim] = 1
    return _pad(cx, cx.reshape(grad, kept), dim, index, sizes[dim] - index - 1)


@converts("slice_backward")
def _slice_backward(cx, node):
    grad, sizes, dim, start, end, step = node.args[:6]
    grad = cx.v(grad)
    dim %= len(sizes)
    start, end, _ = slice(start, end, step).indices(sizes[dim])
    if step != 1:
        raise ConversionError("the backward of a strided slice is not supported")
    return _pad(cx, grad, dim, start, sizes[dim] - start - grad.shape[dim])


def _split(cx, x, dim, sizes):
    dim %= x.rank
    parts, offset = [], 0
    for size in sizes:
        starts, limits = [0] * x.rank, list(x.shape)
        starts[dim], limits[dim] = offset, offset + size
        shape = list(x.shape)
        shape[dim] = size
        parts.append(cx.w.one("slice", [x], x.dtype, shape, start=starts,
                              limit=limits, stride=[1] * x.rank))
        offset += size
    return tuple(parts)


@converts("split", "split_with_sizes")
def _split_op(cx, node):
    x = cx.v(node.args[0])
    dim = node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", 0)
    return _split(cx, x, dim, [shape[dim % x.rank] for _, shape in cx.outs()])


@converts("unbind")
def _unbind(cx, node):
    x = cx.v(node.args[0])
    dim = (node.args[1] if len(node.args) > 1 else 0) % x.rank
    parts = _split(cx, x, dim, [1] * x.shape[dim])
    return tuple(cx.reshape(p, shape) for p, (_, shape) in zip(parts, cx.outs()))


@converts("cat")
def _cat(cx, node):
    dtype, shape = cx.out()
    inputs = [cx.cast(cx.v(a), dtype) for a in node.args[0]]
    inputs = [v for v in inputs if v.numel() > 0 or len(inputs) == 1]
    dim = (node.args[1] if len(node.args) > 1 else 0) % len(shape)
    if len(inputs) == 1:
        return inputs[0]
    return cx.w.one("concat", inputs, dtype, shape, dim=dim)


@converts("stack")
def _stack(cx, node):
    dtype, shape = cx.out()
    dim = (node.args[1] if len(node.args) > 1 else 0) % len(shape)
    pieces = []
    for a in node.args[0]:
        v = cx.cast(cx.v(a), dtype)
        s = list(v.shape)
        s.insert(dim, 1)
        pieces.append(cx.reshape(v, s))
    if len(pieces) == 1:
        return pieces[0]
    return cx.w.one("concat", pieces, dtype, shape, dim=dim)


# ---------------------------------------------------------------------------
# Elementwise
# ---------------------------------------------------------------------------

def _alpha(cx, node, b):
    alpha = node.kwargs.get("alpha", 1)
    if alpha == 1:
        return b
    dtype, _ = cx.out()
    if isinstance(b, (int, float)):
        return b * alpha
    bv = cx.tensor_or_scalar(b, dtype)
    return cx.binary("mul", bv, alpha, dtype, bv.shape)


@converts("add")
def _add(cx, node):
    return cx.binary("add", node.args[0], _alpha(cx, node, node.args[1]))


@converts("sub")
def _sub(cx, node):
    return cx.binary("sub", node.args[0], _alpha(cx, node, node.args[1]))


@converts("rsub")
def _rsub(cx, node):
    return cx.binary("sub", _alpha(cx, node, node.args[1]), node.args[0])


@converts("mul")
def _mul(cx, node):
    return cx.binary("mul", node.args[0], node.args[1])


@converts("div")
def _div(cx, node):
    if node.kwargs.get("rounding_mode") is not None:
        raise ConversionError("div with a rounding mode is not supported")
    return cx.binary("div", node.args[0], node.args[1])


@converts("maximum", "max_other")
def _maximum(cx, node):
    return cx.binary("max", node.args[0], node.args[1])


@converts("minimum")
def _minimum(cx, node):
    return cx.binary("min", node.args[0], node.args[1])


@converts("pow")
def _pow(cx, node):
    base, exponent = node.args[0], node.args[1]
    if isinstance(exponent, (int, float)) and exponent == 2:
        return cx.binary("mul", base, base)
    if isinstance(exponent, (int, float)) and exponent == 1:
        return cx.tensor_or_scalar(base, cx.out()[0])
    if isinstance(exponent, (int, float)) and exponent == 0.5:
        return cx.unary("sqrt", base)
    return cx.binary("pow", base, exponent)


_UNARY = {
    "neg": "neg", "exp": "exp", "log": "log", "log1p": "log1p", "sqrt": "sqrt",
    "rsqrt": "rsqrt", "reciprocal": "reciprocal", "tanh": "tanh",
    "sigmoid": "sigmoid", "relu": "relu", "erf": "erf", "sin": "sin",
    "cos": "cos", "abs": "abs", "sign": "sign", "logical_not": "not",
    "bitwise_not": "not",
}


@converts(*_UNARY)
def _unary(cx, node):
    name = node.target.overloadpacket.__name__
    if name == "bitwise_not" and cx.out()[0] != torch.bool:
        raise ConversionError("bitwise_not is supported on bool tensors only")
    if name == "logical_not":
        x = cx.v(node.args[0])
        return cx.w.one("not", [cx.cast(x, torch.bool)], torch.bool, x.shape)
    return cx.unary(_UNARY[name], node.args[0])


@converts("gelu")
def _gelu(cx, node):
    return cx.unary("gelu", node.args[0],
                    approximate=node.kwargs.get("approximate", "none"))


@converts("clamp", "clamp_min", "clamp_max", "hardtanh")
def _clamp(cx, node):
    name = node.target.overloadpacket.__name__
    dtype, shape = cx.out()
    x = cx.tensor_or_scalar(node.args[0], dtype)
    if name == "clamp_max":
        lo, hi = None, node.args[1]
    elif name == "hardtanh":
        lo = node.args[1] if len(node.args) > 1 else -1.0
        hi = node.args[2] if len(node.args) > 2 else 1.0
    else:
        lo = node.args[1] if len(node.args) > 1 else node.kwargs.get("min")
        hi = node.args[2] if len(node.args) > 2 else node.kwargs.get("max")
    if lo is not None:
        x = cx.binary("max", x, lo, dtype, shape)
    if hi is not None:
        x = cx.binary("min", x, hi, dtype, shape)
    return x


_COMPARE = {"eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt",
            "ge": "ge"}


@converts(*_COMPARE)
def _compare(cx, node):
    a, b = node.args[0], node.args[1]
    _, shape = cx.out()
    types = [cx.v(x).dtype for x in (a, b) if isinstance(x, torch.fx.Node)]
    dtype = torch.promote_types(*types) if len(types) == 2 else types[0]
    if not isinstance(b, torch.fx.Node) and isinstance(b, float) and not _float_dtype(dtype):
        dtype = torch.float32
    av = cx.broadcast(cx.tensor_or_scalar(a, dtype), shape)
    bv = cx.broadcast(cx.tensor_or_scalar(b, dtype), shape)
    return cx.w.one("compare", [av, bv], torch.bool, shape,
                    direction=_COMPARE[node.target.overloadpacket.__name__])


@converts("logical_and", "logical_or", "bitwise_and", "bitwise_or")
def _logical(cx, node):
    name = node.target.overloadpacket.__name__
    if cx.out()[0] != torch.bool:
        raise ConversionError(f"{name} is supported on bool tensors only")
    op = "and" if name.endswith("and") else "or"
    return cx.binary(op, node.args[0], node.args[1])


@converts("where")
def _where(cx, node):
    dtype, shape = cx.out()
    condition = cx.cast(cx.v(node.args[0]), torch.bool)
    return cx.w.one("select", [condition,
                               cx.tensor_or_scalar(node.args[1], dtype),
                               cx.tensor_or_scalar(node.args[2], dtype)],
                    dtype, shape)


@converts("masked_fill")
def _masked_fill(cx, node):
    dtype, shape = cx.out()
    condition = cx.cast(cx.v(node.args[1]), torch.bool)
    return cx.w.one("select", [condition,
                               cx.tensor_or_scalar(node.args[2], dtype),
                               cx.v(node.args[0])], dtype, shape)


# ---------------------------------------------------------------------------
# Creation
# ---------------------------------------------------------------------------

def _filled(cx, value):
    dtype, shape = cx.out()
    return cx.broadcast(cx.scalar(value, dtype), shape)


@converts("zeros", "zeros_like", "new_zeros", "empty_like", "new_empty",
          "empty")
def _zeros(cx, node):
    return _filled(cx, 0)


@converts("ones", "ones_like", "new_ones")
def _ones(cx, node):
    return _filled(cx, 1)


@converts("full", "new_full")
def _full(cx, node):
    return _filled(cx, node.args[1])


@converts("full_like")
def _full_like(cx, node):
    return _filled(cx, node.args[1])


@converts("scalar_tensor")
def _scalar_tensor(cx, node):
    return _filled(cx, node.args[0])


@converts("arange")
def _arange(cx, node):
    dtype, shape = cx.out()
    args = [a for a in node.args]
    start, step = 0, 1
    if len(args) >= 2:
        start = args[0]
    if len(args) >= 3:
        step = args[2]
    iota = cx.w.one("iota", [], dtype, shape, dim=0)
    if step != 1:
        iota = cx.binary("mul", iota, step, dtype, shape)
    if start != 0:
        iota = cx.binary("add", iota, start, dtype, shape)
    return iota


@converts("tril", "triu")
def _triangle(cx, node):
    x = cx.v(node.args[0])
    diagonal = node.args[1] if len(node.args) > 1 else 0
    dtype, shape = cx.out()
    grid = tuple(shape[-2:])
    rows = cx.w.one("iota", [], torch.int32, grid, dim=0)
    cols = cx.w.one("iota", [], torch.int32, grid, dim=1)
    offset = cx.binary("sub", cols, rows, torch.int32, grid)
    direction = "le" if node.target.overloadpacket.__name__ == "tril" else "ge"
    keep = cx.w.one("compare", [offset, cx.broadcast(cx.scalar(diagonal, torch.int32), grid)],
                    torch.bool, grid, direction=direction)
    return cx.w.one("select", [keep, x, cx.scalar(0, dtype)], dtype, shape)


# ---------------------------------------------------------------------------
# Linear algebra
# ---------------------------------------------------------------------------

def _matmul(cx, a, b):
    dtype, shape = cx.out()
    return cx.w.one("matmul", [cx.cast(a, dtype), cx.cast(b, dtype)], dtype,
                    shape)


@converts("mm", "bmm", "matmul")
def _mm(cx, node):
    return _matmul(cx, cx.v(node.args[0]), cx.v(node.args[1]))


@converts("addmm", "baddbmm")
def _addmm(cx, node):
    dtype, shape = cx.out()
    product = _matmul(cx, cx.v(node.args[1]), cx.v(node.args[2]))
    alpha = node.kwargs.get("alpha", 1)
    beta = node.kwargs.get("beta", 1)
    if alpha != 1:
        product = cx.binary("mul", product, alpha, dtype, shape)
    if beta == 0:
        return product
    bias = cx.v(node.args[0])
    if beta != 1:
        bias = cx.binary("mul", bias, beta, dtype, bias.shape)
    return cx.binary("add", bias, product, dtype, shape)


# ---------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------

def _reduce(cx, op, x, dims, keepdim):
    dtype, shape = cx.out()
    x = cx.cast(cx.v(x), dtype)
    dims = _dims(dims, x.rank)
    if not dims:
        return cx.reshape(x, shape)
    return cx.w.one(op, [x], dtype, shape, dims=dims, keepdim=bool(keepdim))


@converts("sum")
def _sum(cx, node):
    dims = node.args[1] if len(node.args) > 1 else None
    keepdim = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
    if dims is not None and len(dims) == 0:
        dims = None  # aten: an empty dim list sums everything
    return _reduce(cx, "reduce_sum", node.args[0], dims, keepdim)


@converts("mean")
def _mean(cx, node):
    dims = node.args[1] if len(node.args) > 1 else None
    keepdim = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
    return _reduce(cx, "reduce_mean", node.args[0], dims, keepdim)


@converts("amax")
def _amax(cx, node):
    dims = node.args[1] if len(node.args) > 1 else None
    keepdim = node.args[2] if len(node.args) > 2 else False
    return _reduce(cx, "reduce_max", node.args[0], dims or None, keepdim)


@converts("amin")
def _amin(cx, node):
    dims = node.args[1] if len(node.args) > 1 else None
    keepdim = node.args[2] if len(node.args) > 2 else False
    return _reduce(cx, "reduce_min", node.args[0], dims or None, keepdim)


@converts("argmax")
def _argmax(cx, node):
    x = cx.v(node.args[0])
    dim = node.args[1] if len(node.args) > 1 else None
    keepdim = node.args[2] if len(node.args) > 2 else False
    dtype, shape = cx.out()
    if dim is None:
        x, dim = cx.reshape(x, [x.numel()]), 0
    return cx.w.one("argmax", [x], dtype, shape, dim=dim % x.rank,
                    keepdim=bool(keepdim))


@converts("max")
def _max(cx, node):
    x = cx.v(node.args[0])
    if len(node.args) == 1:  # max of everything
        return cx.w.one("reduce_max", [x], x.dtype, (), dims=list(range(x.rank)))
    if isinstance(node.args[1], torch.fx.Node):  # elementwise max.other
        return cx.binary("max", node.args[0], node.args[1])
    dim = node.args[1] % x.rank
    keepdim = bool(node.args[2]) if len(node.args) > 2 else False
    (vdtype, vshape), (idtype, ishape) = cx.outs()
    values = cx.w.one("reduce_max", [x], vdtype, vshape, dims=[dim],
                      keepdim=keepdim)
    indices = cx.w.one("argmax", [x], idtype, ishape, dim=dim, keepdim=keepdim)
    return values, indices


# ---------------------------------------------------------------------------
# Indexing
# ---------------------------------------------------------------------------

@converts("embedding")
def _embedding(cx, node):
    dtype, shape = cx.out()
    return cx.w.one("embedding", [cx.v(node.args[0]), cx.v(node.args[1])],
                    dtype, shape)


@converts("embedding_dense_backward")
def _embedding_backward(cx, node):
    dtype, shape = cx.out()
    grad, indices = cx.v(node.args[0]), cx.v(node.args[1])
    if len(node.args) > 4 and node.args[4]:
        raise ConversionError("embedding with scale_grad_by_freq is not supported")
    return cx.w.one("embedding_backward", [grad, indices], dtype, shape,
                    num_weights=int(node.args[2]), padding_idx=int(node.args[3]))


@converts("index_select", "gather")
def _index_select(cx, node):
    # Both take (input, dim, index); kgraph names the op the same way.
    dtype, shape = cx.out()
    x = cx.v(node.args[0])
    return cx.w.one(node.target.overloadpacket.__name__,
                    [x, cx.v(node.args[2])], dtype, shape,
                    dim=node.args[1] % x.rank)


@converts("scatter_add")
def _scatter_add(cx, node):
    dtype, shape = cx.out()
    x = cx.v(node.args[0])
    return cx.w.one("scatter_add", [x, cx.v(node.args[2]),
                                    cx.cast(cx.v(node.args[3]), dtype)],
                    dtype, shape, dim=node.args[1] % x.rank)


# ---------------------------------------------------------------------------
# Neural-network ops and their backwards
# ---------------------------------------------------------------------------

@converts("_softmax", "_log_softmax")
def _softmax(cx, node):
    dtype, shape = cx.out()
    x = cx.cast(cx.v(node.args[0]), dtype)
    op = "softmax" if node.target.overloadpacket.__name__ == "_softmax" else "log_softmax"
    return cx.w.one(op, [x], dtype, shape, dim=node.args[1] % max(x.rank, 1))


@converts("_softmax_backward_data", "_log_softmax_backward_data")
def _softmax_backward(cx, node):
    dtype, shape = cx.out()
    grad = cx.cast(cx.v(node.args[0]), dtype)
    out = cx.cast(cx.v(node.args[1]), dtype)
    op = ("softmax_backward" if node.target.overloadpacket.__name__ ==
          "_softmax_backward_data" else "log_softmax_backward")
    return cx.w.one(op, [grad, out], dtype, shape,
                    dim=node.args[2] % max(out.rank, 1))


def _weight_or(cx, arg, value, dtype, shape):
    if arg is not None:
        return cx.v(arg)
    return cx.broadcast(cx.scalar(value, dtype), shape)


@converts("native_layer_norm")
def _layer_norm(cx, node):
    x = cx.v(node.args[0])
    normalized = list(node.args[1])
    weight = _weight_or(cx, node.args[2], 1.0, x.dtype, normalized)
    bias = _weight_or(cx, node.args[3], 0.0, x.dtype, normalized)
    results = cx.w.node("layer_norm", [x, weight, bias], cx.outs(),
                        normalized_rank=len(normalized),
                        epsilon=float(node.args[4]))
    return tuple(results)


@converts("native_layer_norm_backward")
def _layer_norm_backward(cx, node):
    grad, x = cx.v(node.args[0]), cx.v(node.args[1])
    normalized = list(node.args[2])
    mean, rstd = cx.v(node.args[3]), cx.v(node.args[4])
    weight = _weight_or(cx, node.args[5], 1.0, x.dtype, normalized)
    results = []
    for meta in _meta(node):
        results.append((meta.dtype, tuple(meta.shape)) if meta is not None
                       else (x.dtype, tuple(normalized)))
    # aten leaves out the gradients its mask does not ask for; kgraph always
    # computes all three, and unused ones are dead code.
    results[0] = (x.dtype, x.shape)
    results[1] = (x.dtype, tuple(normalized))
    results[2] = (x.dtype, tuple(normalized))
    return tuple(cx.w.node("layer_norm_backward", [grad, x, mean, rstd, weight],
                           results, normalized_rank=len(normalized)))


@converts("gelu_backward")
def _gelu_backward(cx, node):
    dtype, shape = cx.out()
    return cx.w.one("gelu_backward", [cx.v(node.args[0]), cx.v(node.args[1])],
                    dtype, shape,
                    approximate=node.kwargs.get("approximate", "none"))


@converts("threshold_backward")
def _threshold_backward(cx, node):
    dtype, shape = cx.out()
    return cx.w.one("relu_backward", [cx.v(node.args[0]), cx.v(node.args[1])],
                    dtype, shape, threshold=float(node.args[2]))


@converts("tanh_backward", "sigmoid_backward")
def _activation_backward(cx, node):
    dtype, shape = cx.out()
    return cx.w.one(node.target.overloadpacket.__name__,
                    [cx.v(node.args[0]), cx.v(node.args[1])], dtype, shape)


_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


@converts("nll_loss_forward")
def _nll_loss(cx, node):
    x, target, weight, reduction, ignore = node.args[:5]
    if weight is not None:
        raise ConversionError("nll_loss with class weights is not supported")
    return tuple(cx.w.node("nll_loss", [cx.v(x), cx.v(target)], cx.outs(),
                           reduction=_REDUCTIONS[reduction],
                           ignore_index=int(ignore)))


@converts("nll_loss_backward")
def _nll_loss_backward(cx, node):
    grad, x, target, weight, reduction, ignore, total = node.args[:7]
    if weight is not None:
        raise ConversionError("nll_loss with class weights is not supported")
    dtype, shape = cx.out()
    return cx.w.one("nll_loss_backward",
                    [cx.v(grad), cx.v(x), cx.v(target), cx.v(total)], dtype,
                    shape, reduction=_REDUCTIONS[reduction],
                    ignore_index=int(ignore))


# ---------------------------------------------------------------------------
# Random: seeded kgraph dropout
# ---------------------------------------------------------------------------

def _dropout(cx, x, p, source):
    """Dropout of `x`, whose mask has fx node `source`'s shape; it draws
    per-shard masks when `source` differs across the tensor-parallel
    group."""
    seed = cx.shard_seed if source in cx.varying else cx.seed
    if seed is None:
        raise ConversionError("a random op without the step's seed input")
    stream = cx.rng_streams
    cx.rng_streams += 1
    return cx.w.node("dropout", [x, seed],
                     [(x.dtype, x.shape), (torch.bool, x.shape)],
                     p=float(p), stream=stream)


@converts("native_dropout")
def _native_dropout(cx, node):
    x, p = cx.v(node.args[0]), node.args[1]
    train = node.args[2] if len(node.args) > 2 else True
    if not train or p == 0:
        return x, cx.broadcast(cx.scalar(True, torch.bool), x.shape)
    return tuple(_dropout(cx, x, p, node.args[0]))


@converts("native_dropout_backward")
def _native_dropout_backward(cx, node):
    dtype, shape = cx.out()
    grad, mask, scale = cx.v(node.args[0]), cx.v(node.args[1]), node.args[2]
    kept = cx.binary("mul", grad, cx.cast(mask, dtype), dtype, shape)
    return cx.binary("mul", kept, float(scale), dtype, shape)


@converts("bernoulli")
def _bernoulli(cx, node):
    # x.bernoulli_(keep) is how torch 1.13's dropout draws its mask.
    dtype, shape = cx.out()
    keep = node.args[1] if len(node.args) > 1 else node.kwargs.get("p", 0.5)
    if not isinstance(keep, (int, float)):
        raise ConversionError("bernoulli with a tensor of probabilities is not supported")
    if keep >= 1:
        return _filled(cx, 1)
    if keep <= 0:
        return _filled(cx, 0)
    ones = cx.broadcast(cx.scalar(1.0, torch.float32), shape)
    _, mask = _dropout(cx, ones, 1.0 - keep, node.args[0])
    return cx.cast(mask, dtype)


RANDOM_OPS = {"bernoulli", "native_dropout"}

# Convolutional networks' and language models' converters register
# themselves on import.
from . import aten_language_models, aten_windows  # noqa: E402,F401

SUPPORTED_OPS = sorted(_CONVERTERS)


def _packet_name(target):
    packet = getattr(target, "overloadpacket", None)
    if packet is None:
        return None
    name = packet.__name__
    return name[:-1] if name.endswith("_") and not name.startswith("_") else name


def random_sources(gm):
    """The fx nodes whose shapes `gm`'s random ops draw masks of (their
    first operands), in trace order."""
    return [n.args[0] for n in gm.graph.nodes
            if n.op == "call_function" and _packet_name(n.target) in RANDOM_OPS]


def convert_nodes(cx, gm, placeholders):
    """Converts every node of `gm`; returns the kgraph values of its outputs.

    `placeholders` are the kgraph values of the graph's inputs, in order.
    """
    cx.gm = gm
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for node, value in zip(phs, placeholders):
        cx.values[node] = value
    outputs = None
    for node in gm.graph.nodes:
        cx.node = node
        if node.op == "placeholder":
            continue
        if node.op == "output":
            outputs = node.args[0]
            continue
        if node.op == "get_attr":
            cx.values[node] = cx.w.constant(getattr(gm, node.target))
            continue
        if node.target is operator.getitem:
            cx.values[node] = cx.values[node.args[0]][node.args[1]]
            continue
        name = _packet_name(node.target)
        converter = _CONVERTERS.get(name)
        where = user_frame(node.stack_trace)
        cx.w.location = _location(where)
        if converter is None:
            raise UnsupportedOpError(
                f"Kiln cannot convert the aten op '{node.target}' "
                f"(from {where or 'an unknown line'}); see docs/pytorch.md "
                "for the supported ops")
        try:
            cx.values[node] = converter(cx, node)
        except (ConversionError, TypeError, ValueError, KeyError,
                IndexError) as error:
            if isinstance(error, UnsupportedOpError):
                raise
            raise ConversionError(
                f"cannot convert '{node.target}' (from {where or 'an unknown line'}): "
                f"{error}") from error
    flat = []
    for out in outputs:
        flat.append(cx.v(out) if out is not None else None)
    return flat


def _location(frame):
    # 'File "x.py", line 12, in forward' -> ("x.py", 12, "forward")
    if not frame:
        return None
    try:
        parts = frame.split(",")
        file = parts[0].split('"')[1]
        line = int(parts[1].strip().split()[1])
        function = parts[2].strip().split()[1] if len(parts) > 2 else ""
        return file, line, function
    except (IndexError, ValueError):
        return None
