"""compile_step: a PyTorch training step, traced, cached and run by Kiln.

A CompiledStep owns one runtime Session per graph: per batch signature
(shapes and dtypes) and phase. The first call with a new signature traces
and converts the step, derives its cache key and loads (or compiles) its
artifact. With gradient accumulation over k micro-batches a step has two
phases: k - 1 calls run the "accumulate" graph (forward, backward, the
gradients added to accumulators) and every k-th runs the "update" graph
(the same, then the data-parallel average, clipping and the optimizer).

Parameters and optimizer state live on the simulated device, updated in
place by each step. Each tensor is tracked where its current value lives:
a graph's session receives the tensors it reads only when another graph
has changed them since, and they come back to the host only when asked
(state_dict(), copy_to()).

In collection mode (KILN_EXTRACT_GRAPHS_ONLY=1, set by `kiln precompile`)
the session records the graph instead of compiling it, and calls return
zero-filled outputs without running anything.
"""

import os
import struct

import torch
from torch.nn.utils.stateless import functional_call

from . import _kiln
from . import distributed, parallel
from . import kgraph_pb2 as pb
from .aten_to_kgraph import Context, convert_nodes, random_sources
from .graph_writer import TORCH_DTYPES, GraphWriter
from .model_step import (ACCUMULATE, UPDATE, accumulators,
                         check_parameters_traced, model_step)
from .optim import Optimizer
from .tracing import trace


def _tensor_bytes(t):
    """`t`'s elements as a contiguous buffer (a numpy view where `t` is
    one already): the session copies them straight into simulated HBM.
    A batch takes the first path every step, so it calls no torch op: each
    costs microseconds once a step's simulation has left the caches cold."""
    if (t.dtype not in (torch.bfloat16, torch.bool) and not t.requires_grad
            and t.device.type == "cpu" and t.is_contiguous()):
        return t.numpy()
    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy()
    if t.dtype == torch.bool:
        return t.to(torch.uint8).numpy()
    return t.numpy()


def _tensor_from(data, dtype, shape):
    if dtype == torch.bool:
        return torch.frombuffer(bytearray(data), dtype=torch.uint8).to(torch.bool).reshape(shape)
    if dtype == torch.bfloat16:
        return torch.frombuffer(bytearray(data), dtype=torch.int16).view(torch.bfloat16).reshape(shape)
    if not data:
        return torch.zeros(shape, dtype=dtype)
    # The bytearray is the tensor's own copy: it lives as long as the tensor.
    return torch.frombuffer(bytearray(data), dtype=dtype).reshape(shape)


def _check_batch(batch):
    batch = tuple(torch.as_tensor(b) for b in batch)
    for i, t in enumerate(batch):
        if t.dtype not in TORCH_DTYPES.values():
            raise TypeError(f"batch input {i} is {t.dtype}; Kiln steps take float32, "
                            "bfloat16, float16, int32, int64 and bool tensors")
    return batch


def _signature(batch):
    return tuple((tuple(t.shape), t.dtype) for t in batch)


class _Spec:
    """What a step is made of, independent of the batch shapes."""

    def __init__(self, name, params, state, hyper, build):
        self.name = name
        self.params = params      # name -> initial tensor (updated by the step)
        self.frozen = {}          # name -> tensor (read, never updated)
        self.buffers = set()      # the state names that are module buffers
        self.state = state        # name -> initial tensor
        self.hyper = hyper        # step -> {name: float}
        self.build = build        # returns the flat step function
        self.model = None         # the nn.Module of compile_step(model, ...)
        self.accumulation = 1     # micro-batches per optimizer update
        self.accumulators = set() # the state names holding summed gradients
        self.metrics = ()         # names of the update graph's metric outputs
        # Tensor parallelism: parameter or state name -> the dimension its
        # tensor-parallel group splits (kiln.parallel's sharded layers).
        self.partition_dims = {}

    def state_for(self, phase):
        """The state tensors the `phase` graph reads: all for an update; the
        accumulators and module buffers for an accumulation."""
        if phase == UPDATE:
            return list(self.state)
        return [n for n in self.state if n in self.accumulators or n in self.buffers]

class CompiledStep:
    def __init__(self, spec, flags, cache_root, check_hazards, seed,
                 data_parallel=None, zero_stage=0):
        self._spec = spec
        self.world = distributed.world()
        self.tensor_parallel = parallel.tensor_parallel_size()
        replicas = distributed.group_size("data")
        if data_parallel is None:
            data_parallel = replicas > 1
        self.data_parallel = bool(data_parallel) and replicas > 1
        self._flags = list(flags)
        if self.data_parallel:
            self._flags.append(f"--world-size={replicas}")
            if zero_stage:
                self._flags.append(f"--zero-stage={zero_stage}")
        if self.tensor_parallel > 1:
            self._flags.append(f"--tensor-parallel={self.tensor_parallel}")
        self._communicator = None
        self._trace_path = ""
        self._cache_root = cache_root or ""
        self._check_hazards = check_hazards
        self._seed = int(seed)
        self._sessions = {}       # (signature, phase) -> _Compiled
        self._last = None         # the _Compiled that ran last
        self._host = {**spec.params, **spec.state}
        # name -> the _Compiled whose devices hold its current value; empty:
        # the host's copy is current.
        self._fresh = {name: set() for name in self._host}
        self.steps = 0            # optimizer updates
        self.micro_steps = 0      # calls (micro-batches)
        self.last_stats = None
        self.metrics = {}         # the last update's metrics (grad_norm)
        self._synchronized = False

    # -- public -------------------------------------------------------------

    def __call__(self, *batch):
        """Runs one training step on `batch` (one micro-batch, with gradient
        accumulation); returns its loss (a 0-d tensor)."""
        batch = _check_batch(batch)
        micro = self.micro_steps + 1
        updates = micro % self._spec.accumulation == 0
        compiled = self._compiled_for(batch, UPDATE if updates else ACCUMULATE)
        # The step counts once it has run: a step that stops with an error (a
        # label out of range, say) leaves the schedule and the per-step seeds
        # where they were, as eager PyTorch leaves its optimizer's state.
        self._bind_state(compiled)
        session = compiled.session
        for name, value in self._spec.hyper(self.steps + 1).items():
            session.set_input("h." + name, struct.pack("<f", value))
        for i, tensor in enumerate(batch):
            session.set_input(f"b.{i}", _tensor_bytes(tensor))
        if compiled.has_seed:
            # The workers of a tensor-parallel group hold one replica: they
            # draw the same masks.
            seed = distributed.worker_seed(self._seed, distributed.group_rank("data"),
                                           micro)
            session.set_input("seed", struct.pack("<q", seed))
        if compiled.has_shard_seed:
            # Dropouts of values split across the group: per-shard masks.
            shard = distributed.shard_seed(seed, distributed.group_rank("tensor"))
            session.set_input("shard_seed", struct.pack("<q", shard))
        self.last_stats = session.run(self._trace_path)
        self._last = compiled
        for name in compiled.updates:
            self._fresh[name] = {compiled}
        self.micro_steps = micro
        if updates:
            self.steps += 1
            self.metrics = {m: float(self._output(compiled, m))
                            for m in self._spec.metrics}
        self._trace_path = ""
        return self._output(compiled, "loss")

    def trace_next(self, path):
        """Writes the next step's engine timelines to `path` (a Chrome/Perfetto
        trace: open it at ui.perfetto.dev)."""
        self._trace_path = str(path)

    def checkpoint_state(self):
        """Everything needed to resume: parameters, optimizer state, the step
        count (which drives schedules and per-step seeds) and the seed."""
        return {"state": self.state_dict(), "steps": self.steps,
                "micro_steps": self.micro_steps, "seed": self._seed}

    def load_checkpoint_state(self, saved):
        """Resumes from checkpoint_state(); the next step is saved["steps"]+1.
        The checkpoint holds whole tensors: a tensor-parallel worker takes
        its shard of each, whatever layout saved them."""
        missing = set(self._host) - set(saved["state"])
        if missing:
            raise KeyError(f"the checkpoint lacks {sorted(missing)[:3]}")
        for name in self._host:
            want = self._whole_shape(name)
            got = saved["state"][name]
            if tuple(got.shape) != want or got.dtype != self._host[name].dtype:
                raise ValueError(f"checkpoint tensor '{name}' is {got.dtype}"
                                 f"{tuple(got.shape)}, the step has "
                                 f"{self._host[name].dtype}{want}")
        self._host = {name: self._shard(name, saved["state"][name])
                      for name in self._host}
        self._fresh = {name: set() for name in self._host}
        self._synchronized = True
        self.steps = int(saved["steps"])
        self.micro_steps = int(saved.get(
            "micro_steps", self.steps * self._spec.accumulation))
        self._seed = int(saved["seed"])

    def state_dict(self):
        """Current parameters and optimizer state, by name, on the host:
        whole tensors, gathered from the shards of ZeRO-1 and tensor
        parallelism (every rank must call it)."""
        return {name: self._whole(name) for name in self._host}

    def parameters(self):
        """The current parameters, by name (whole on every rank; under
        tensor parallelism every rank must call it)."""
        return {name: self._whole(name) for name in self._spec.params}

    def copy_to(self, model):
        """Copies the trained parameters and the buffers the step updates
        (batch norm's running statistics) into `model` (same names; a
        tensor-parallel model's own shards)."""
        values = {name: self._value(name) for name in
                  [*self._spec.params, *self._spec.buffers]}
        with torch.no_grad():
            for name, t in [*model.named_parameters(), *model.named_buffers()]:
                if name in values:
                    t.copy_(values[name])

    @property
    def accumulation_steps(self):
        """Micro-batches (calls) per optimizer update."""
        return self._spec.accumulation

    @property
    def key(self):
        """The cache key of the most recently used graph."""
        return self._last.session.key if self._last else None

    @property
    def keys(self):
        return [c.session.key for c in self._sessions.values()]

    @property
    def outcomes(self):
        """How each graph's artifact was obtained: hit, compiled, collected."""
        return {c.session.key: c.session.outcome for c in self._sessions.values()}

    @property
    def hbm_bytes(self):
        """The largest HBM plan of the step's graphs: bytes a worker's
        NeuronCore needs (0 before the first call and when collecting)."""
        return max((c.session.hbm_bytes for c in self._sessions.values()), default=0)

    def cache_stats(self):
        """This step's cache counters, summed over its graphs."""
        total = {}
        for c in self._sessions.values():
            for k, v in c.session.cache_stats().items():
                total[k] = total.get(k, 0) + v
        return total

    def graph(self, *batch):
        """The kgraph protobuf for `batch`'s signature (traced, not compiled)."""
        batch = _check_batch(batch)
        compiled = self._sessions.get((_signature(batch), UPDATE))
        return compiled.graph if compiled else build_graph(self._spec, batch)

    # -- internals ----------------------------------------------------------

    def _compiled_for(self, batch, phase=UPDATE):
        signature = (_signature(batch), phase)
        compiled = self._sessions.get(signature)
        if compiled is None:
            graph = build_graph(self._spec, batch, phase)
            communicator = tensor_communicator = None
            if not collecting():
                if self.data_parallel:
                    communicator = distributed.communicator("data")
                if self.tensor_parallel > 1:
                    tensor_communicator = distributed.communicator("tensor")
            compiled = _Compiled(graph, self._flags, self._cache_root,
                                 self._check_hazards, communicator,
                                 tensor_communicator)
            self._sessions[signature] = compiled
        return compiled

    def _bind_state(self, compiled):
        """Gives `compiled` the current value of every tensor it reads."""
        if not collecting() and not self._synchronized:
            self._synchronize()
        for name in compiled.reads:
            holders = self._fresh[name]
            if compiled in holders:
                continue
            input_name = _input_name(self._spec, name)
            value = self._value(name)
            rows = compiled.block_rows(input_name)
            if rows is not None:
                value = distributed.rows_of_rank(value, rows)
            compiled.session.set_input(input_name, _tensor_bytes(value))
            holders.add(compiled)
        if not compiled.frozen_bound:
            for name, tensor in self._spec.frozen.items():
                compiled.session.set_input("f." + name, _tensor_bytes(tensor))
            compiled.frozen_bound = True

    def _value(self, name):
        """The current value of parameter or state tensor `name`. ZeRO-1's
        optimizer state is gathered from every worker: every rank must ask
        for it (state_dict, checkpoint_state)."""
        holders = self._fresh[name]
        if not holders:
            return self._host[name].clone()
        # Whole where some graph holds it whole (a parameter, an accumulator).
        compiled = min(holders, key=lambda c: c.block_rows(_input_name(self._spec, name)) is not None)
        input_name = _input_name(self._spec, name)
        dtype, shape = compiled.inputs[input_name]
        value = _tensor_from(compiled.session.read(input_name), dtype, shape)
        if compiled.block_rows(input_name) is not None:
            value = distributed.all_gather_rows(value)
        return value

    def _synchronize(self):
        """As DDP does: every replica starts from the first one's values,
        whatever each initialised; within a tensor-parallel group, each
        shard is its own and the tensors every worker holds whole
        (replicated) are the group's first worker's."""
        if self.data_parallel:
            self._host = {n: distributed.broadcast(t) for n, t in self._host.items()}
        if self.tensor_parallel > 1:
            self._host = {n: t if n in self._spec.partition_dims
                          else distributed.broadcast(t, group="tensor")
                          for n, t in self._host.items()}
        self._synchronized = True

    def _whole(self, name):
        """`name`'s current value, gathered from its tensor-parallel shards."""
        value = self._value(name)
        dim = self._spec.partition_dims.get(name)
        return value if dim is None else parallel.gather_shards(value, dim)

    def _whole_shape(self, name):
        shape = list(self._host[name].shape)
        dim = self._spec.partition_dims.get(name)
        if dim is not None:
            shape[dim] *= self.tensor_parallel
        return tuple(shape)

    def _shard(self, name, whole):
        dim = self._spec.partition_dims.get(name)
        return whole.clone() if dim is None else parallel.shard(whole, dim)

    def _output(self, compiled, name):
        return _tensor_from(compiled.session.read(name), *compiled.outputs[name])


class _Compiled:
    def __init__(self, graph, flags, cache_root, check_hazards, communicator,
                 tensor_communicator):
        self.graph = graph
        self.inputs = {i.name: (TORCH_DTYPES[i.type.dtype], tuple(i.type.shape))
                       for i in graph.inputs}
        self.outputs = {}
        for o in graph.outputs:
            self.outputs[o.name] = self._value_type(graph, o.value)
        self.has_seed = "seed" in self.inputs
        self.has_shard_seed = "shard_seed" in self.inputs
        # The parameter and state tensors (by spec name) the graph reads and
        # the ones it updates.
        self.reads = [i.name[2:] for i in graph.inputs
                      if i.name[:2] in ("p.", "s.")]
        self.updates = [o.name[len("next.") + 2:] for o in graph.outputs
                        if o.name.startswith("next.")]
        self.frozen_bound = False
        self.session = _kiln.Session(graph.SerializeToString(deterministic=True),
                                     flags, cache_root, check_hazards,
                                     communicator, tensor_communicator)
        # ZeRO-1: the optimizer state the artifact holds a block of rows of.
        self._blocks = {}
        for name in self.reads:
            input_name = ("p." if f"p.{name}" in self.inputs else "s.") + name
            dtype, whole = self.inputs[input_name]
            shape = tuple(self.session.shape(input_name))
            if shape != whole:
                self._blocks[input_name] = shape[0]
                self.inputs[input_name] = (dtype, shape)

    def block_rows(self, input_name):
        """Rows of this worker's block of `input_name`; None if whole."""
        return self._blocks.get(input_name)

    @staticmethod
    def _value_type(graph, value):
        if value < len(graph.inputs):
            t = graph.inputs[value].type
        else:
            index = value - len(graph.inputs)
            for node in graph.nodes:
                if index < len(node.results):
                    t = node.results[index]
                    break
                index -= len(node.results)
        return TORCH_DTYPES[t.dtype], tuple(t.shape)


def _input_name(spec, name):
    return ("p." if name in spec.params else "s.") + name


def build_graph(spec, batch, phase=UPDATE):
    """Traces the step's `phase` for `batch` and converts it: a
    kgraph_pb2.Graph."""
    pnames, fnames = list(spec.params), list(spec.frozen)
    snames = spec.state_for(phase)
    hnames = sorted(spec.hyper(1))
    hyper = {n: torch.tensor(v, dtype=torch.float32) for n, v in spec.hyper(1).items()}
    example = ([spec.params[n] for n in pnames] + [spec.frozen[n] for n in fnames] +
               [spec.state[n] for n in snames] + [hyper[n] for n in hnames] +
               list(batch))
    example = [t.detach().clone() for t in example]
    flat_step = spec.build(pnames, fnames, snames, hnames, len(batch), phase)
    gm = trace(flat_step, example)
    if spec.model is not None:
        check_parameters_traced(gm, spec.model)

    writer = GraphWriter(spec.name if phase == UPDATE else f"{spec.name}.{phase}")
    values = []
    roles = ([("p." + n, pb.PARAMETER) for n in pnames] +
             [("f." + n, pb.PARAMETER) for n in fnames] +
             [("s." + n, pb.BUFFER if n in spec.buffers else pb.OPTIMIZER_STATE)
              for n in snames] +
             [("h." + n, pb.HYPER_PARAMETER) for n in hnames] +
             [(f"b.{i}", pb.BATCH_INPUT) for i in range(len(batch))])
    for (name, role), tensor in zip(roles, example):
        values.append(writer.input(name, tensor.dtype, tensor.shape, role))
    seed = shard_seed = None
    varying = frozenset()
    sources = random_sources(gm)
    if sources:
        seed = writer.input("seed", torch.int64, (), pb.RNG_SEED)
    if sources and parallel.tensor_parallel_size() > 1:
        sharded = [i for i, (name, _) in enumerate(roles)
                   if name[:2] in ("p.", "f.") and name[2:] in spec.partition_dims]
        varying = parallel.varying_across_group(gm, sharded)
        if any(s in varying for s in sources):
            shard_seed = writer.input("shard_seed", torch.int64, (), pb.RNG_SEED)
    outputs = convert_nodes(Context(writer, seed, shard_seed, varying), gm, values)

    # flat outputs: loss, the metrics, then each updated parameter and state
    # tensor (None where the step leaves it unchanged).
    writer.output("loss", outputs[0], pb.LOSS)
    metrics = spec.metrics if phase == UPDATE else ()
    for name, value in zip(metrics, outputs[1:]):
        writer.output(name, value, pb.METRIC)
    updated = outputs[1 + len(metrics):]
    for i, name in enumerate(pnames):
        if updated[i] is not None:
            writer.output("next.p." + name, updated[i], pb.UPDATED_PARAMETER, i)
    for j, name in enumerate(snames):
        value = updated[len(pnames) + j]
        # A buffer the step leaves alone comes back as its own input.
        if value is not None and value is not values[len(pnames) + len(fnames) + j]:
            index = len(pnames) + len(fnames) + j
            writer.output("next.s." + name, value, pb.UPDATED_STATE, index)
    return writer.graph


def _function_step(fn):
    def build(pnames, fnames, snames, hnames, nbatch, phase):
        def flat_step(*flat):
            it = iter(flat)
            params = {n: next(it) for n in pnames}
            state = {n: next(it) for n in snames}
            batch = [next(it) for _ in range(nbatch)]
            loss, new_params, new_state = fn(params, state, *batch)
            return (loss, *[new_params.get(n) for n in pnames],
                    *[new_state.get(n) for n in snames])
        return flat_step
    return build


def compile_step(model_or_fn, loss_fn=None, optimizer=None, *, params=None,
                 state=None, name=None, flags=(), cache_root=None,
                 check_hazards=False, seed=0, data_parallel=None,
                 max_grad_norm=None, accumulation_steps=1, zero_stage=0):
    """Compiles a training step with Kiln and returns a callable.

    Two forms:

    * ``compile_step(model, loss_fn, optimizer)``: one step is forward
      (``out = model(*batch[:-1])``), ``loss = loss_fn(out, batch[-1])``,
      backward, and the optimizer's update (``kiln.optim.SGD``, ``Adam``,
      ``AdamW``). The model's parameters are the initial values; parameters
      with ``requires_grad=False`` are inputs that never change; buffers
      are state the step carries over (batch norm's running statistics).
    * ``compile_step(fn, params=..., state=...)`` for any pure function
      ``fn(params, state, *batch) -> (loss, new_params, new_state)`` over
      dicts of tensors; ``params`` and ``state`` are the initial values.

    The returned CompiledStep runs ``step(*batch) -> loss``; the graph for a
    batch signature is traced on its first call. ``flags`` are compile
    options (as ``kiln compile`` takes them, e.g. ``["--auto-cast=bf16"]``)
    on top of KILN_CC_FLAGS; ``cache_root`` defaults to KILN_CACHE_URL.

    Under a launcher with WORLD_SIZE > 1 (torchrun, mpirun) the step is
    data-parallel unless ``data_parallel=False``: compiled for the group,
    its gradients averaged across the workers, its loss the group's mean,
    its initial parameters rank 0's. Each worker passes its own shard of the
    global batch (``kiln.distributed.sampler``).

    For a model, ``max_grad_norm`` clips the (averaged) gradients to that
    global L2 norm as ``torch.nn.utils.clip_grad_norm_`` does; the pre-clip
    norm of each update is ``step.metrics["grad_norm"]``.
    ``accumulation_steps=k`` makes each call one micro-batch: the gradients
    of k calls (of ``loss / k``) are summed and the k-th call averages them
    across the workers, clips and updates, as an eager loop with DDP's
    ``no_sync`` does. Each call returns its micro-batch's (unscaled) loss.

    ``zero_stage=1`` (data-parallel steps) shards the optimizer state as
    ZeRO-1 does: each worker holds and updates a block of rows of every
    parameter whose first dimension the group divides, gradients are
    reduce-scattered and the updated blocks all-gathered. ``state_dict()``
    and ``checkpoint_state()`` return whole tensors (every rank must call
    them), so a checkpoint resumes with any number of workers.
    """
    if zero_stage not in (0, 1):
        raise ValueError(f"zero_stage is {zero_stage}; Kiln shards optimizer "
                         "state (1) or not (0)")
    if isinstance(model_or_fn, torch.nn.Module):
        model = model_or_fn
        if loss_fn is None or not isinstance(optimizer, Optimizer):
            raise TypeError("compile_step(model, loss_fn, optimizer): give a loss "
                            "function and a kiln.optim optimizer")
        trained = {n: p.detach().clone() for n, p in model.named_parameters()
                   if p.requires_grad}
        frozen = {n: p.detach().clone() for n, p in model.named_parameters()
                  if not p.requires_grad}
        buffers = {n: b.detach().clone() for n, b in model.named_buffers()}
        accumulation_steps = int(accumulation_steps)
        if accumulation_steps < 1:
            raise ValueError(f"accumulation_steps is {accumulation_steps}; "
                             "give 1 or more micro-batches per update")
        if max_grad_norm is not None and not float(max_grad_norm) > 0:
            raise ValueError(f"max_grad_norm is {max_grad_norm}; give a "
                             "positive norm or None")
        init_state = dict(buffers)
        for n, p in trained.items():
            for s, v in optimizer.init_state(p).items():
                init_state[f"{n}.{s}"] = v
        summed = accumulators(trained) if accumulation_steps > 1 else {}
        init_state.update(summed)
        spec = _Spec(name or type(model).__name__, trained, init_state,
                     optimizer.hyper_parameters,
                     model_step(model, loss_fn, optimizer, list(buffers),
                                accumulation_steps,
                                None if max_grad_norm is None else float(max_grad_norm)))
        spec.frozen = frozen
        spec.buffers = set(buffers)
        spec.model = model
        spec.accumulation = accumulation_steps
        spec.accumulators = set(summed)
        spec.metrics = ("grad_norm",) if max_grad_norm is not None else ()
        spec.partition_dims = _partition_dims(model, init_state)
    elif callable(model_or_fn):
        if max_grad_norm is not None or accumulation_steps != 1:
            raise TypeError("max_grad_norm and accumulation_steps apply to "
                            "compile_step(model, ...); a step function clips "
                            "and accumulates itself")
        if params is None:
            raise TypeError("compile_step(fn, params=..., state=...): give the "
                            "initial parameters")
        spec = _Spec(name or getattr(model_or_fn, "__name__", "step"),
                     {n: t.detach().clone() for n, t in params.items()},
                     {n: t.detach().clone() for n, t in (state or {}).items()},
                     lambda step: {}, _function_step(model_or_fn))
    else:
        raise TypeError("compile_step takes an nn.Module or a step function")
    return CompiledStep(spec, flags, cache_root, check_hazards, seed, data_parallel,
                        zero_stage)


def _partition_dims(model, state):
    """The dimension each sharded parameter's tensor-parallel group splits,
    and its optimizer state's (the state tensors named after it, of its
    shape)."""
    dims = parallel.partition_dims(model)
    params = dict(model.named_parameters())
    for name in state:
        owner = max((p for p in dims if name.startswith(p + ".")), key=len, default=None)
        if owner is not None and state[name].shape == params[owner].shape:
            dims[name] = dims[owner]
    return dims


def collecting():
    """Whether this process is collecting graphs for `kiln precompile`."""
    return os.environ.get("KILN_EXTRACT_GRAPHS_ONLY") == "1"
