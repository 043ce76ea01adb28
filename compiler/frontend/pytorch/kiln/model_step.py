"""The traced training step of ``compile_step(model, loss_fn, optimizer)``.

One function, traced per phase:

* forward (``model(*batch[:-1])``), the loss, and the gradients of every
  trained parameter;
* ``accumulate`` (gradient accumulation, all but the last micro-batch of
  an update): the gradients of ``loss / k`` are added to f32 accumulators,
  and nothing else changes;
* ``update``: the accumulated gradients plus this micro-batch's, marked for
  the data-parallel average (``mark_gradient``), clipped to a global L2
  norm as ``torch.nn.utils.clip_grad_norm_`` clips, and applied by the
  optimizer; the accumulators restart at zero.

Module buffers (batch norm's running statistics) are state the forward
updates in every phase.
"""

import contextlib

import torch
from torch.nn.utils.stateless import functional_call

from . import distributed, parallel
from .aten_to_kgraph import ConversionError

ACCUMULATE, UPDATE = "accumulate", "update"

#: The state name suffix of a parameter's gradient accumulator.
ACCUMULATOR = "accumulated_grad"

#: clip_grad_norm_'s guard against a zero norm.
CLIP_EPSILON = 1e-6


def clip_by_global_norm(grads, max_norm, sharded=None):
    """(clipped grads, the pre-clip global L2 norm), as
    ``torch.nn.utils.clip_grad_norm_(params, max_norm)`` computes them.
    Under tensor parallelism (`sharded`: which grads are a shard of their
    parameter's) the norm is the whole model's: the shards' squares are
    summed across the tensor-parallel group, the replicated parameters
    counted once."""
    norms = [torch.linalg.vector_norm(g.float()) for g in grads]
    if sharded and any(sharded):
        def squares(which):
            picked = [n for n, s in zip(norms, sharded) if s == which]
            return (torch.stack(picked) ** 2).sum() if picked else None
        local, replicated = squares(True), squares(False)
        total = parallel.all_reduce_tensor_parallel(local)
        if replicated is not None:
            total = total + replicated
        total = total.sqrt()
    else:
        total = torch.linalg.vector_norm(torch.stack(norms))
    coefficient = torch.clamp(max_norm / (total + CLIP_EPSILON), max=1.0)
    return [(g.float() * coefficient).to(g.dtype) for g in grads], total


def model_step(model, loss_fn, optimizer, buffer_names, accumulation=1,
               max_grad_norm=None):
    """The spec's `build`: the flat step function for a phase."""
    partition_dims = parallel.partition_dims(model)
    def build(pnames, fnames, snames, hnames, nbatch, phase):
        def flat_step(*flat):
            it = iter(flat)
            params = {n: next(it) for n in pnames}
            frozen = {n: next(it) for n in fnames}
            state = {n: next(it) for n in snames}
            hyper = {n: next(it) for n in hnames}
            batch = [next(it) for _ in range(nbatch)]
            leaves = {n: p.detach().requires_grad_(True) for n, p in params.items()}
            # Buffers are state the forward may update in place (batch
            # norm's running statistics); the step returns what they hold
            # after it.
            buffers = {n: state[n] for n in buffer_names}
            tensors = {**leaves, **frozen, **buffers}
            with _rnn_weights(model, tensors):
                out = functional_call(model, tensors, tuple(batch[:-1]))
            loss = loss_fn(out, batch[-1])
            scaled = loss / accumulation if accumulation > 1 else loss
            grads = torch.autograd.grad(scaled, list(leaves.values()), allow_unused=True)
            grads = dict(zip(pnames, grads))
            with torch.no_grad():
                if phase == ACCUMULATE:
                    outputs, new_state = _accumulate(grads, state)
                else:
                    outputs, new_state = _update(params, grads, state, hyper)
            new_state.update(buffers)
            return (loss.detach(), *outputs, *[new_state.get(n) for n in snames])

        def _accumulate(grads, state):
            new_state = {}
            for n, g in grads.items():
                if g is not None:
                    key = f"{n}.{ACCUMULATOR}"
                    new_state[key] = state[key] + g.float()
            return [None] * len(grads), new_state

        def _update(params, grads, state, hyper):
            trained = [n for n, g in grads.items() if g is not None]
            summed = []
            for n in trained:
                g = grads[n]
                if accumulation > 1:
                    g = (state[f"{n}.{ACCUMULATOR}"] + g.float()).to(g.dtype)
                summed.append(distributed.mark_gradient(g, "p." + n))
            metrics = []
            if max_grad_norm is not None:
                sharded = [n in partition_dims for n in trained]
                summed, norm = clip_by_global_norm(summed, max_grad_norm, sharded)
                metrics.append(norm)
            new_params, new_state = dict.fromkeys(grads), {}
            for n, g in zip(trained, summed):
                own = {s: state[f"{n}.{s}"] for s in optimizer.state_names}
                rule = optimizer.for_parameter(n)
                new_params[n], updated = rule.update(params[n], g, own, hyper)
                for s, v in updated.items():
                    new_state[f"{n}.{s}"] = v
                if accumulation > 1:
                    new_state[f"{n}.{ACCUMULATOR}"] = torch.zeros_like(
                        state[f"{n}.{ACCUMULATOR}"])
            return [*metrics, *new_params.values()], new_state
        return flat_step
    return build


def accumulators(trained):
    """The f32 gradient accumulators' initial state, by state name."""
    return {f"{n}.{ACCUMULATOR}": torch.zeros(p.shape, dtype=torch.float32)
            for n, p in trained.items()}


@contextlib.contextmanager
def _rnn_weights(model, tensors):
    """Points each recurrent module's cached weight list at `tensors`.

    nn.LSTM, nn.GRU and nn.RNN read their weights from `_flat_weights`, a
    list filled when the module was built, not through attribute lookup:
    functional_call's swapped parameters would not reach it, and the trace
    would hold the original weights as constants with no gradient.
    """
    saved = []
    for prefix, module in model.named_modules():
        if isinstance(module, torch.nn.RNNBase):
            saved.append((module, module._flat_weights))
            path = prefix + "." if prefix else ""
            module._flat_weights = [tensors.get(path + n, w) for n, w in
                                    zip(module._flat_weights_names,
                                        module._flat_weights)]
    try:
        yield
    finally:
        for module, weights in saved:
            module._flat_weights = weights


def check_parameters_traced(gm, model):
    """A parameter the trace captured as a constant would silently never
    train: the model reads it through a reference the step cannot swap."""
    trained = [(n, p) for n, p in model.named_parameters() if p.requires_grad and p.numel()]
    # Meta tensors (a model traced without its data) share one null address:
    # those are told apart by identity.
    pointers = {p.data_ptr(): n for n, p in trained if not p.is_meta}
    identities = {id(p): n for n, p in trained if p.is_meta}
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            value = getattr(gm, node.target)
            name = (identities.get(id(value)) if value.is_meta
                    else pointers.get(value.data_ptr()))
            if name is not None:
                raise ConversionError(
                    f"parameter '{name}' is read through a reference the step "
                    "cannot replace (a list or attribute the module filled "
                    "when it was built), so it would never train; read it "
                    "as a module attribute in forward()")
