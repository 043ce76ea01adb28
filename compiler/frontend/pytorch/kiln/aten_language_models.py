"""Converting the aten ops of Llama-style and recurrent language models.

SwiGLU's `silu` and its backward are sigmoid products; `unsafe_split` (an
LSTM's gate split) is `split`; `linalg_vector_norm` (gradient clipping,
LAMB's trust ratios) is a reduction. Grouped-query attention's
`repeat_interleave` traces to an index tensor built from constants and an
`index_select`, whose backward is `index_add`: the converter evaluates the
constant index tensor on the host and embeds it, so the graph gathers and
scatters along a fixed index.
"""

import math

import torch

from .aten_to_kgraph import ConversionError, _dims, _split, converts


@converts("silu")
def _silu(cx, node):
    dtype, shape = cx.out()
    x = cx.cast(cx.v(node.args[0]), dtype)
    return cx.binary("mul", x, cx.unary("sigmoid", x), dtype, shape)


@converts("silu_backward")
def _silu_backward(cx, node):
    # d/dx x·s(x) = s(x)·(1 + x·(1 - s(x)))
    dtype, shape = cx.out()
    grad = cx.cast(cx.v(node.args[0]), dtype)
    x = cx.cast(cx.v(node.args[1]), dtype)
    s = cx.unary("sigmoid", x)
    one_minus_s = cx.binary("sub", 1.0, s, dtype, shape)
    slope = cx.binary("add", 1.0, cx.binary("mul", x, one_minus_s, dtype, shape),
                      dtype, shape)
    return cx.binary("mul", grad, cx.binary("mul", s, slope, dtype, shape),
                     dtype, shape)


@converts("unsafe_split", "unsafe_split_with_sizes")
def _unsafe_split(cx, node):
    x = cx.v(node.args[0])
    dim = node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", 0)
    return _split(cx, x, dim, [shape[dim % x.rank] for _, shape in cx.outs()])


def _vector_norm(cx, x, order, dims, keepdim, dtype, shape):
    """The `order`-norm of `x` over `dims`, as torch.linalg.vector_norm."""
    def reduce(op, v):
        return cx.w.one(op, [v], dtype, shape, dims=dims, keepdim=keepdim)

    if order == 2:
        squares = cx.binary("mul", x, x, dtype, x.shape)
        return cx.w.one("sqrt", [reduce("reduce_sum", squares)], dtype, shape)
    magnitude = cx.w.one("abs", [x], dtype, x.shape)
    if order == math.inf:
        return reduce("reduce_max", magnitude)
    if order == -math.inf:
        return reduce("reduce_min", magnitude)
    if order == 0:
        zero = cx.broadcast(cx.scalar(0.0, dtype), x.shape)
        nonzero = cx.w.one("compare", [x, zero], torch.bool, x.shape,
                           direction="ne")
        return reduce("reduce_sum", cx.cast(nonzero, dtype))
    if order == 1:
        return reduce("reduce_sum", magnitude)
    powered = cx.binary("pow", magnitude, float(order), dtype, x.shape)
    return cx.binary("pow", reduce("reduce_sum", powered), 1.0 / order,
                     dtype, shape)


@converts("linalg_vector_norm")
def _linalg_vector_norm(cx, node):
    dtype, shape = cx.out()
    x = cx.cast(cx.v(node.args[0]), dtype)
    order = node.args[1] if len(node.args) > 1 else node.kwargs.get("ord", 2)
    dims = node.args[2] if len(node.args) > 2 else node.kwargs.get("dim")
    keepdim = node.args[3] if len(node.args) > 3 else node.kwargs.get("keepdim", False)
    if x.rank == 0:
        x, dims, keepdim = cx.reshape(x, (1,)), None, False
    dims = _dims(list(dims) if dims else None, x.rank)
    return _vector_norm(cx, x, float(order), dims, bool(keepdim), dtype, shape)


@converts("fill")
def _fill(cx, node):
    dtype, shape = cx.out()
    value = node.args[1]
    if isinstance(value, torch.fx.Node):
        return cx.broadcast(cx.cast(cx.v(value), dtype), shape)
    return cx.broadcast(cx.scalar(value, dtype), shape)


def host_value(cx, node):
    """The value of `node` computed on the host, when it depends on no graph
    input (an index tensor built from constants); None otherwise."""
    if not isinstance(node, torch.fx.Node):
        return node
    if node.op == "get_attr":
        return getattr(cx.gm, node.target)
    if node.op != "call_function":
        return None
    args = []
    for a in node.args:
        if isinstance(a, (list, tuple)):
            items = [host_value(cx, i) for i in a]
            if any(i is None for i in items):
                return None
            args.append(type(a)(items))
        else:
            v = host_value(cx, a)
            if v is None and a is not None:
                return None
            args.append(v)
    return node.target(*args, **node.kwargs)


@converts("repeat_interleave")
def _repeat_interleave(cx, node):
    # The index form: repeat_interleave(repeats) -> [0]*r0 + [1]*r1 + ...
    repeats = host_value(cx, node.args[0])
    if repeats is None:
        raise ConversionError("repeat_interleave with repeats computed from "
                              "the batch or the parameters is not supported")
    indices = torch.repeat_interleave(repeats, **node.kwargs)
    return cx.w.constant(indices.to(torch.int64))


@converts("index_add")
def _index_add(cx, node):
    # index_add(x, dim, index, source): x[index[i]] += source[i] along dim,
    # which is scatter_add with the index broadcast over source's shape.
    dtype, shape = cx.out()
    x = cx.v(node.args[0])
    dim = node.args[1] % max(x.rank, 1)
    index, source = cx.v(node.args[2]), cx.cast(cx.v(node.args[3]), dtype)
    alpha = node.kwargs.get("alpha", 1)
    if alpha != 1:
        source = cx.binary("mul", source, float(alpha), dtype, source.shape)
    lifted = [1] * source.rank
    lifted[dim] = index.shape[0]
    index = cx.broadcast(cx.reshape(index, lifted), source.shape)
    return cx.w.one("scatter_add", [x, index, source], dtype, shape, dim=dim)
