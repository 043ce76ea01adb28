"""A training loop for compiled steps: resume, data position, metrics.

``kiln.loop.train(step, loader, steps=N, ...)`` is what every data-parallel
example and test runs: it restores the newest checkpoint (if any) and skips
the batches that checkpoint had consumed, runs `step` on each batch until
N optimizer updates are done, records metrics, and checkpoints every
``checkpoints.every`` calls. With gradient accumulation over k
micro-batches each batch is a micro-batch and an update takes k calls;
losses, metrics and checkpoints count calls. In collection mode (``kiln
precompile``) it runs one update's calls, which is all it takes to record
the graphs, and returns.
"""

import torch

from . import distributed
from .step import collecting


def train(step, loader, steps, sampler=None, checkpoints=None, metrics=None,
          samples_per_step=None, trace_step=None, trace_path=None):
    """Trains until `step` has made `steps` updates; returns {call: loss}.

    `loader` yields batches (tuples passed to `step`); `sampler` (a
    DistributedSampler) is told the epoch so each epoch reshuffles the
    same way on every run. `samples_per_step` (default: the group's global
    batch) feeds samples/s.
    """
    losses = {}
    done = 0
    if checkpoints is not None:
        extra = checkpoints.restore(step)
        if extra:
            done = int(extra["step"])
            losses = {int(k): v for k, v in extra.get("losses", {}).items()}
            if distributed.world().rank == 0:
                print(f"kiln: resumed from the step-{done} checkpoint", flush=True)
    per_epoch = len(loader)
    if per_epoch == 0:
        raise ValueError("the data loader yields no batches for this worker")
    per_update = step.accumulation_steps
    calls = steps * per_update
    while done < calls:
        epoch, skip = divmod(done, per_epoch)
        if sampler is not None:
            sampler.set_epoch(epoch)
        for index, batch in enumerate(loader):
            if index < skip:
                continue  # consumed before the checkpoint
            if trace_path and done + 1 == trace_step:
                step.trace_next(trace_path)
            loss = float(step(*batch))
            done += 1
            losses[done] = loss
            if metrics is not None:
                size = samples_per_step or len(batch[0]) * distributed.group_size("data")
                metrics.step(done, loss, step.last_stats, samples=size)
            if collecting() and done >= per_update:
                return losses
            if checkpoints is not None and checkpoints.due(done):
                checkpoints.save(step, step=done, losses=losses)
            if done >= calls:
                break
    return losses


def group_compiles(step):
    """Graphs compiled at train time by every worker of the group together
    (zero after `kiln precompile`); every rank must call it."""
    mine = torch.tensor([float(step.cache_stats().get("compiles", 0))])
    return int(distributed.all_reduce(mine, mean=False, group="world").item())


def modelled_summary(step, samples_per_step):
    """One line of the last step's modelled target figures."""
    stats = step.last_stats
    seconds, cores = stats["modelled_seconds"], distributed.world().size
    return (f"modelled trn1 step {1e3 * seconds:.3f} ms = "
            f"{samples_per_step / seconds:,.0f} samples/s on {cores} NeuronCore"
            f"{'s' if cores > 1 else ''}, MFU {100 * stats['mfu']:.2f}%")
