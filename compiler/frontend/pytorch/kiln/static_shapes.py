"""Library functions traced in a form kgraph can express.

A few torch functions are written in ways that a static-shape training
graph cannot follow, though what they compute can be: while a step is
traced, ``static_shapes()`` routes them to equivalent formulations.

* ``F.cross_entropy(..., label_smoothing=e)`` with class-index targets:
  torch 1.13 averages the smoothing term over the non-ignored targets with
  ``masked_select`` (its result's length depends on the labels, and its
  backward bakes the traced length in). The same loss is
  ``(1 - e) * nll + e / C * sum(smooth * valid) / sum(valid)``, where
  ``smooth`` is minus the sum of the log-probabilities over the classes and
  ``valid`` marks targets other than ``ignore_index``.
* ``repeat_interleave`` with a whole-number count along a dimension:
  torch builds an index tensor whose length it computes from the counts'
  values, which a meta or fake tensor (a model traced without its
  parameters' data) does not have. Each element repeated r times along
  ``dim`` is the tensor unsqueezed after ``dim``, expanded r times there and
  flattened back: a view whose shape the counts alone give.
* ``torch.utils.checkpoint.checkpoint``: the reentrant form (torch 1.13's
  default) runs its own backward, which ``torch.autograd.grad`` cannot
  enter (the checkpointed parameters' gradients would be lost), and the
  non-reentrant form's saved-tensor hooks fail under make_fx on scalar
  operands. Both are traced as a plain call of the function whose tensor
  arguments and results pass through ``kiln::checkpoint`` markers (the
  identity, numbered by call): the compiler recomputes the values the call
  computed where the backward pass reads them (kgraph.checkpoint,
  kgraph-recompute-checkpoints), so the step keeps only each call's inputs
  and outputs, as the checkpointed model would in eager PyTorch.
"""

import contextlib
import warnings

import torch
import torch.nn.functional as F
import torch.utils.checkpoint as checkpointing
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree

from . import distributed

_REDUCTIONS = ("none", "mean", "sum")


def label_smoothed_cross_entropy(logits, target, ignore_index, reduction,
                                 smoothing):
    """F.cross_entropy's label-smoothed loss for class-index targets, with
    static shapes (no weights)."""
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    log_probs = F.log_softmax(logits, dim=1)
    nll = F.nll_loss(log_probs, target, ignore_index=ignore_index,
                     reduction=reduction)
    valid = target != ignore_index
    smooth = -log_probs.sum(dim=1) * valid.to(log_probs.dtype)
    if reduction == "mean":
        smooth = smooth.sum() / valid.sum().to(log_probs.dtype)
    elif reduction == "sum":
        smooth = smooth.sum()
    classes = logits.shape[1]
    return (1 - smoothing) * nll + smooth * (smoothing / classes)


class _StaticShapes(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        rewrite = _REWRITES.get(func)
        if rewrite is not None:
            rewritten = rewrite(*args, **kwargs)
            if rewritten is not None:
                return rewritten
        return func(*args, **kwargs)


def _cross_entropy(input, target, weight=None, size_average=None,
                   ignore_index=-100, reduce=None, reduction="mean",
                   label_smoothing=0.0):
    if (label_smoothing == 0.0 or weight is not None or target.is_floating_point()
            or size_average is not None or reduce is not None or input.dim() < 2):
        return None  # torch's own trace is static, or the converter names the gap
    return label_smoothed_cross_entropy(input, target, ignore_index, reduction,
                                        label_smoothing)


def _repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    if not isinstance(repeats, int) or dim is None:
        return None  # per-element counts, or a flattened result: torch's own
    dim = dim % input.dim()
    shape = list(input.shape)
    expanded = input.unsqueeze(dim + 1).expand(*shape[:dim + 1], repeats, *shape[dim + 1:])
    return expanded.flatten(dim, dim + 1)


_REWRITES = {F.cross_entropy: _cross_entropy,
             torch.repeat_interleave: _repeat_interleave,
             torch.Tensor.repeat_interleave: _repeat_interleave}


# kiln::checkpoint(x, region, side): the identity, marking a tensor that
# enters ("input") or leaves ("output") checkpointed call number `region`.
_library = distributed._library  # the kiln namespace's defining library
_library.define("checkpoint(Tensor x, int region, str side) -> Tensor")
_library.impl("checkpoint", lambda x, region, side: x.clone(), "CPU")
_library.impl("checkpoint", lambda x, region, side: torch.empty_like(x), "Meta")
# _Boundary says how gradients flow.
_library.impl("checkpoint", distributed.below_autograd(torch.ops.kiln.checkpoint),
              "AutogradMeta")


class _Boundary(torch.autograd.Function):
    """A checkpointed call's boundary: the identity both ways."""

    @staticmethod
    def forward(ctx, x, region, side):
        return torch.ops.kiln.checkpoint(x, region, side)

    @staticmethod
    def backward(ctx, grad):
        return grad, None, None


_calls = [0]  # checkpointed calls traced so far in this trace


def _call(function, preserve_rng_state, *args, **kwargs):
    region = _calls[0]
    _calls[0] += 1

    def mark(side):
        return lambda x: (_Boundary.apply(x, region, side)
                          if isinstance(x, torch.Tensor) else x)

    args, kwargs = pytree.tree_map(mark("input"), (args, kwargs))
    results = pytree.tree_map(mark("output"), function(*args, **kwargs))
    if not any(isinstance(x, torch.Tensor) for x in pytree.tree_flatten(results)[0]):
        warnings.warn(f"torch.utils.checkpoint: {getattr(function, '__name__', function)} "
                      f"returns no tensor Kiln can see (in a tuple, list or dict); its "
                      f"values are kept, not recomputed", stacklevel=3)
    return results


@contextlib.contextmanager
def static_shapes():
    """Routes the functions above to their static-shape forms."""
    _calls[0] = 0
    saved = (checkpointing.CheckpointFunction.apply,
             checkpointing._checkpoint_without_reentrant)
    checkpointing.CheckpointFunction.apply = _call
    checkpointing._checkpoint_without_reentrant = _call
    try:
        with _StaticShapes():
            yield
    finally:
        (checkpointing.CheckpointFunction.apply,
         checkpointing._checkpoint_without_reentrant) = saved
