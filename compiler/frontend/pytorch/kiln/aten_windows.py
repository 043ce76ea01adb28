"""Converting the aten ops of convolutional networks to kgraph.

Convolution, batch normalisation and pooling (and their backwards) each map
to one kgraph op of the same meaning (see docs/dialects/kgraph.md);
adaptive average pooling becomes an average pool where its windows are
even, and a product with a constant pooling matrix where they are not.

Batch norm in training updates its running statistics in place
(`native_batch_norm` mutates its `running_mean` and `running_var`
arguments, which torch 1.13's functionalization leaves alone). kgraph is
pure: `kgraph.batch_norm` returns the next running statistics, and the
converter rebinds the buffers' fx nodes to them, so every later use --
the step's outputs included -- sees the updated values, as eager PyTorch
does.
"""

import torch

from .aten_to_kgraph import ConversionError, converts, _weight_or

# --------------------------------------------------------------------------
# Convolution
# --------------------------------------------------------------------------


def _window_attrs(node_args, spatial):
    stride, padding, dilation = (list(a) for a in node_args)
    if len(stride) == 1 and spatial == 2:
        stride, padding, dilation = stride * 2, padding * 2, dilation * 2
    return dict(stride=stride, padding=padding, dilation=dilation)


def _check_conv(transposed, output_padding, spatial):
    if transposed:
        raise ConversionError("transposed convolution is not supported yet")
    if spatial not in (1, 2):
        raise ConversionError(f"{spatial}-d convolution is not supported "
                              "(1-d and 2-d are)")
    if any(output_padding):
        raise ConversionError("output_padding is not supported")


@converts("convolution")
def _convolution(cx, node):
    x, w, bias, stride, padding, dilation, transposed, output_padding, groups = \
        node.args[:9]
    x, w = cx.v(x), cx.v(w)
    spatial = x.rank - 2
    _check_conv(transposed, output_padding, spatial)
    dtype, shape = cx.out()
    operands = [cx.cast(x, dtype), cx.cast(w, dtype)]
    if bias is not None:
        operands.append(cx.cast(cx.v(bias), dtype))
    return cx.w.one("conv", operands, dtype, shape, groups=int(groups),
                    **_window_attrs((stride, padding, dilation), spatial))


@converts("convolution_backward")
def _convolution_backward(cx, node):
    (grad, x, w, bias_sizes, stride, padding, dilation, transposed,
     output_padding, groups, mask) = node.args[:11]
    grad, x, w = cx.v(grad), cx.v(x), cx.v(w)
    spatial = x.rank - 2
    _check_conv(transposed, output_padding, spatial)
    attrs = dict(groups=int(groups),
                 **_window_attrs((stride, padding, dilation), spatial))
    results = [None, None, None]
    if mask[0]:
        results[0] = cx.w.one("conv_input_grad", [grad, w], x.dtype, x.shape,
                              **attrs)
    if mask[1]:
        results[1] = cx.w.one("conv_weight_grad", [grad, x], w.dtype, w.shape,
                              **attrs)
    if mask[2]:
        dims = [0] + list(range(2, grad.rank))
        results[2] = cx.w.one("reduce_sum", [grad], grad.dtype,
                              (grad.shape[1],), dims=dims, keepdim=False)
    return tuple(results)


# --------------------------------------------------------------------------
# Batch normalisation
# --------------------------------------------------------------------------


def _per_channel(cx, arg, value, x):
    return _weight_or(cx, arg, value, x.dtype, (x.shape[1],))


@converts("native_batch_norm")
def _batch_norm(cx, node):
    x_node, w, b, rm_node, rv_node, training, momentum, eps = node.args[:8]
    x = cx.v(x_node)
    if training and momentum is None:
        raise ConversionError(
            "batch norm with momentum=None (a cumulative average) is not "
            "supported; give the module a momentum")
    weight, bias = _per_channel(cx, w, 1.0, x), _per_channel(cx, b, 0.0, x)
    tracked = rm_node is not None and rv_node is not None
    if not training and not tracked:
        raise ConversionError("batch norm in eval mode needs running statistics")
    running_mean = _per_channel(cx, rm_node, 0.0, x)
    running_var = _per_channel(cx, rv_node, 1.0, x)
    channel = (x.dtype, (x.shape[1],))
    y, mean, rstd, next_mean, next_var = cx.w.node(
        "batch_norm", [x, weight, bias, running_mean, running_var],
        [(x.dtype, x.shape), channel, channel, channel, channel],
        training=bool(training), momentum=float(momentum or 0.0),
        epsilon=float(eps))
    if training and tracked:
        # The in-place update eager PyTorch makes (see the module docstring).
        cx.values[rm_node] = next_mean
        cx.values[rv_node] = next_var
    return (y, mean, rstd)


@converts("native_batch_norm_backward")
def _batch_norm_backward(cx, node):
    grad, x, w, rm, rv, save_mean, save_rstd, training, eps = node.args[:9]
    grad, x = cx.v(grad), cx.v(x)
    weight = _per_channel(cx, w, 1.0, x)
    if training:
        mean, rstd = cx.v(save_mean), cx.v(save_rstd)
    else:
        # Eval mode saves nothing: the running statistics normalised.
        channel = (x.shape[1],)
        mean = cx.v(rm)
        shifted = cx.w.one("add", [cx.v(rv), cx.scalar(float(eps), x.dtype)],
                           x.dtype, channel)
        rstd = cx.w.one("rsqrt", [shifted], x.dtype, channel)
    return tuple(cx.w.node("batch_norm_backward", [grad, x, mean, rstd, weight],
                           [(x.dtype, x.shape), (x.dtype, (x.shape[1],)),
                            (x.dtype, (x.shape[1],))],
                           training=bool(training)))


# --------------------------------------------------------------------------
# Pooling
# --------------------------------------------------------------------------


def _pair(values, spatial, default=None):
    values = list(values) if values else list(default)
    return values * spatial if len(values) == 1 else values


def _max_pool_attrs(args, spatial):
    kernel = _pair(args[0], spatial)
    stride = _pair(args[1] if len(args) > 1 else [], spatial, kernel)
    padding = _pair(args[2] if len(args) > 2 else [0], spatial)
    dilation = _pair(args[3] if len(args) > 3 else [1], spatial)
    ceil = bool(args[4]) if len(args) > 4 else False
    return dict(kernel=kernel, stride=stride, padding=padding,
                dilation=dilation, ceil_mode=ceil)


@converts("max_pool2d_with_indices")
def _max_pool(cx, node):
    x = cx.v(node.args[0])
    dtype, shape = cx.outs()[0]
    y = cx.w.one("max_pool", [x], dtype, shape,
                 **_max_pool_attrs(node.args[1:], x.rank - 2))
    # The indices only feed the backward, which recomputes the choice.
    return (y, _IndicesNotKept(node))


class _IndicesNotKept:
    """max_pool2d_with_indices' indices, which kgraph does not materialise."""

    def __init__(self, node):
        self.node = node

    def __repr__(self):
        return ("the indices of max_pool2d_with_indices (Kiln keeps the pooled "
                "values; only its backward may read the indices)")


@converts("max_pool2d_with_indices_backward")
def _max_pool_backward(cx, node):
    grad, x = cx.v(node.args[0]), cx.v(node.args[1])
    return cx.w.one("max_pool_backward", [grad, x], x.dtype, x.shape,
                    **_max_pool_attrs(node.args[2:7], x.rank - 2))


def _avg_pool_attrs(args, spatial):
    kernel = _pair(args[0], spatial)
    stride = _pair(args[1] if len(args) > 1 else [], spatial, kernel)
    padding = _pair(args[2] if len(args) > 2 else [0], spatial)
    ceil = bool(args[3]) if len(args) > 3 else False
    include_pad = bool(args[4]) if len(args) > 4 else True
    divisor = args[5] if len(args) > 5 else None
    return dict(kernel=kernel, stride=stride, padding=padding, ceil_mode=ceil,
                count_include_pad=include_pad, divisor=int(divisor or 0))


@converts("avg_pool2d")
def _avg_pool(cx, node):
    x = cx.v(node.args[0])
    dtype, shape = cx.out()
    return cx.w.one("avg_pool", [x], dtype, shape,
                    **_avg_pool_attrs(node.args[1:], x.rank - 2))


@converts("avg_pool2d_backward")
def _avg_pool_backward(cx, node):
    grad = cx.v(node.args[0])
    x_dtype, x_shape = cx.out()
    return cx.w.one("avg_pool_backward", [grad], x_dtype, x_shape,
                    **_avg_pool_attrs(node.args[2:8], grad.rank - 2))


def _adaptive_windows(size, out):
    """PyTorch's adaptive pooling windows: [floor(i*size/out), ceil((i+1)*size/out))."""
    return [((i * size) // out, -((-(i + 1) * size) // out)) for i in range(out)]


def _pooling_matrix(cx, size, out, dtype):
    """[size, out]: column i averages window i of the input."""
    matrix = torch.zeros(size, out, dtype=torch.float32)
    for i, (start, end) in enumerate(_adaptive_windows(size, out)):
        matrix[start:end, i] = 1.0 / (end - start)
    return cx.w.constant(matrix.to(dtype))


def _adaptive_by_matrices(cx, x, out_sizes, backward=False, grad=None):
    """Adaptive average pooling (or its backward) as one product per
    spatial dim with a constant pooling matrix: exact for uneven windows."""
    value = grad if backward else x
    spatial = x.rank - 2
    for d in range(spatial):
        dim = 2 + d
        size, out = x.shape[dim], out_sizes[d]
        matrix = _pooling_matrix(cx, size, out, x.dtype)
        if backward:
            matrix = cx.transpose(matrix, [1, 0])
        # Move dim last, multiply, move it back.
        perm = [i for i in range(value.rank) if i != dim] + [dim]
        moved = cx.transpose(value, perm)
        rows = 1
        for s in moved.shape[:-1]:
            rows *= s
        flat = cx.reshape(moved, (rows, moved.shape[-1]))
        n = matrix.shape[1]
        product = cx.w.one("matmul", [flat, matrix], x.dtype, (rows, n))
        product = cx.reshape(product, moved.shape[:-1] + (n,))
        inverse = [perm.index(i) for i in range(value.rank)]
        value = cx.transpose(product, inverse)
    return value


def _even_windows(x, out_sizes):
    return all(x.shape[2 + d] % o == 0 for d, o in enumerate(out_sizes))


@converts("_adaptive_avg_pool2d")
def _adaptive_avg_pool(cx, node):
    x = cx.v(node.args[0])
    out_sizes = _pair(node.args[1], x.rank - 2)
    dtype, shape = cx.out()
    if _even_windows(x, out_sizes):
        kernel = [x.shape[2 + d] // o for d, o in enumerate(out_sizes)]
        return cx.w.one("avg_pool", [x], dtype, shape, kernel=kernel,
                        stride=kernel, padding=[0] * len(kernel))
    return _adaptive_by_matrices(cx, x, out_sizes)


@converts("_adaptive_avg_pool2d_backward")
def _adaptive_avg_pool_backward(cx, node):
    grad, x = cx.v(node.args[0]), cx.v(node.args[1])
    out_sizes = list(grad.shape[2:])
    if _even_windows(x, out_sizes):
        kernel = [x.shape[2 + d] // o for d, o in enumerate(out_sizes)]
        return cx.w.one("avg_pool_backward", [grad], x.dtype, x.shape,
                        kernel=kernel, stride=kernel, padding=[0] * len(kernel))
    return _adaptive_by_matrices(cx, x, out_sizes, backward=True, grad=grad)
