"""Kiln's PyTorch front end.

    import kiln
    step = kiln.compile_step(model, torch.nn.functional.cross_entropy,
                             kiln.optim.AdamW(lr=1e-3))
    for x, y in loader:
        loss = step(x, y)
    step.copy_to(model)

docs/pytorch.md is the user guide; `kiln precompile -- python train.py`
fills the cache ahead of time.
"""

from . import checkpoint, distributed, loop, metrics, optim, parallel, rng
from ._kiln import KilnError, build_id, derive_key
from .aten_to_kgraph import SUPPORTED_OPS, ConversionError, UnsupportedOpError
from .step import CompiledStep, build_graph, collecting, compile_step

__all__ = [
    "compile_step", "CompiledStep", "optim", "distributed", "parallel", "rng", "checkpoint", "metrics", "loop", "collecting", "derive_key",
    "build_id", "KilnError", "UnsupportedOpError", "ConversionError",
    "SUPPORTED_OPS", "build_graph",
]
