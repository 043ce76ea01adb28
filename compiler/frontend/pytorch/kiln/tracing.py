"""Tracing a training step into one flat, functional aten graph.

Two passes, as functorch's AOT tools do on torch 1.13:

1. ``make_fx`` runs the step once on real tensors and records every aten op
   the dispatcher sees -- forward, the backward that ``torch.autograd.grad``
   runs, and the optimizer update -- into an ``fx.GraphModule``. Each node
   keeps the Python stack of the model line that produced it.
2. ``functionalize`` re-traces that graph, replacing in-place and aliasing
   ops (``relu_``, ``add_``, views written through) with pure ones, so that
   every node is a value-semantics op the converter can map to kgraph.

While the first pass runs, two library functions are traced in a form
with the same values and static shapes (``static_shapes.py``):
label-smoothed cross-entropy, whose torch implementation selects the
non-ignored targets with ``masked_select`` (a data-dependent shape), and
reentrant activation checkpointing, which ``torch.autograd.grad`` cannot
differentiate through.

The step function receives and returns flat tuples of tensors; the callers
in ``step.py`` flatten dictionaries of parameters and state around it.
"""

import contextlib
import os
import sys

import torch
import torch.fx
import torch.fx.traceback as fx_traceback
from torch.fx.experimental.proxy_tensor import PythonKeyTracer, make_fx
import functorch
from functorch import functionalize
from torch.fx.passes.shape_prop import ShapeProp

from .static_shapes import static_shapes


@contextlib.contextmanager
def _recording_stack_traces():
    saved = PythonKeyTracer.record_stack_traces
    PythonKeyTracer.record_stack_traces = True
    try:
        yield
    finally:
        PythonKeyTracer.record_stack_traces = saved


class _StackPreservingInterpreter(torch.fx.Interpreter):
    """Runs a traced graph so that a re-trace inherits each node's stack."""

    def run_node(self, node):
        with fx_traceback.append_stack_trace(node.stack_trace):
            return super().run_node(node)


def trace(fn, example_args):
    """The functional aten graph of ``fn(*example_args)``.

    ``fn`` takes and returns flat tuples of tensors. The example arguments
    fix every shape and dtype; the graph is valid for exactly those.
    """
    with _recording_stack_traces(), static_shapes():
        recorded = make_fx(fn)(*example_args)

    def replay(*args):
        return _StackPreservingInterpreter(recorded).run(*args)

    with fx_traceback.override_stack_trace():
        functional = make_fx(functionalize(replay))(*example_args)
    functional.graph.eliminate_dead_code()
    functional.recompile()
    # Shapes and dtypes of every result, tuples included (make_fx records
    # only single-tensor results).
    ShapeProp(functional).propagate(*example_args)
    return functional


# Frames in these directories are library frames, not the model's.
_LIBRARY_DIRS = tuple(
    os.path.dirname(os.path.abspath(module.__file__)) + os.sep
    for module in (torch, functorch, sys.modules[__name__.rpartition(".")[0]])
)


def _frame_file(frame):
    return frame.split('"')[1] if frame.count('"') >= 2 else ""


def user_frame(stack_trace):
    """The innermost frame of a node's stack outside torch and Kiln.

    Stacks are recorded innermost first, as 'File "f.py", line 12, in fn'.
    """
    if not stack_trace:
        return None
    lines = [l.strip() for l in stack_trace.splitlines()]
    frames = [l for l in lines if l.startswith('File "')]
    for frame in frames:
        path = _frame_file(frame)
        if path.startswith("<"):
            continue  # generated code (fx, lambdas compiled from strings)
        if not os.path.abspath(path).startswith(_LIBRARY_DIRS):
            return frame
    return frames[-1] if frames else None
