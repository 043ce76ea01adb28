"""A training loop for compiled steps: resume, data position, metrics.

``kiln.loop.train(step, loader, steps=N, ...)`` is what every data-parallel
example and test runs: it restores the newest checkpoint (if any) and skips
the samples that checkpoint had consumed (checkpoints record the
data-parallel size and the global sample position, so a run resumed at
another size continues the data order where it stopped, to within one
global batch, and says so on rank 0), runs `step` on each batch until
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
    replicas = distributed.group_size("data")
    per_epoch = len(loader)
    if per_epoch == 0:
        raise ValueError("the data loader yields no batches for this worker")
    # A loader without a batch_size (any iterable of batches) resumes by
    # calls, which is the same order while the size stays.
    global_batch = (getattr(loader, "batch_size", None) or 0) * replicas
    # Where the data order stands: the calls' worth of global batches
    # consumed, which a resize converts from the old global batch.
    position = 0
    resized = None
    if checkpoints is not None:
        extra = checkpoints.restore(step)
        if extra:
            done = int(extra["step"])
            losses = {int(k): v for k, v in extra.get("losses", {}).items()}
            saved_replicas = int(extra.get("world_size", replicas))
            samples = int(extra.get("samples", done * global_batch))
            position = samples // global_batch if global_batch else done
            if distributed.world().rank == 0:
                print(f"kiln: resumed from the step-{done} checkpoint", flush=True)
                if saved_replicas != replicas:
                    saved_batch = int(extra.get("global_batch", global_batch))
                    resized = (f"kiln: resized from {saved_replicas} to {replicas} "
                               f"data-parallel workers: resumed from the step-{done} "
                               f"checkpoint at sample {samples:,} of the data order "
                               f"(epoch {position // per_epoch}), global batch "
                               f"{saved_batch} -> {global_batch}")
                    print(resized, flush=True)
    per_update = step.accumulation_steps
    calls = steps * per_update
    while done < calls:
        epoch, skip = divmod(position, per_epoch)
        if sampler is not None:
            sampler.set_epoch(epoch)
        for index, batch in enumerate(loader):
            if index < skip:
                continue  # consumed before the checkpoint
            if trace_path and done + 1 == trace_step:
                step.trace_next(trace_path)
            loss = float(step(*batch))
            done += 1
            position += 1
            losses[done] = loss
            if resized:
                _report_resized_graph(step)
                resized = None
            if metrics is not None:
                size = samples_per_step or len(batch[0]) * replicas
                metrics.step(done, loss, step.last_stats, samples=size)
            if collecting() and done >= per_update:
                return losses
            if checkpoints is not None and checkpoints.due(done):
                checkpoints.save(step, step=done, losses=losses, world_size=replicas,
                                 samples=position * global_batch,
                                 global_batch=global_batch)
            if done >= calls:
                break
    return losses


def _report_resized_graph(step):
    """After a resize, says where the new size's graph came from."""
    stats = step.cache_stats()
    if stats.get("compiles", 0):
        print(f"kiln: the step's graph for this size was compiled at train time "
              f"({stats.get('compile_seconds', 0.0):.1f} s; kiln precompile "
              f"--world-sizes collects every size ahead)", flush=True)
    else:
        print("kiln: the step's graph for this size came from the cache", flush=True)


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
