"""Data parallelism: the worker group, gradient markers, sharding and seeds.

Every worker of a data-parallel job runs the same compiled step on its own
shard of each global batch. The step's graph marks each parameter's
gradient (``mark_gradient``); compiled for a group of N, those marks become
bucketed all-reduces (mean) that run through the group's communicator
(Gloo), so every worker applies the same update and the parameters stay
identical. The loss a step returns is the group's mean.

The group comes from the launcher's environment: torchrun's RANK,
WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, mpirun's OMPI_*/PMI_*
variables, or KILN_RENDEZVOUS=file:<dir> for a file store on shared
storage. docs/distributed.md is the guide.
"""

import collections

import torch

from . import _kiln

_library = torch.library.Library("kiln", "DEF")
_library.define("gradient(Tensor grad, str parameter) -> Tensor")
# On the host (the trace's example run) it is the identity; its meaning is
# the compiled one.
_library.impl("gradient", lambda grad, parameter: grad.clone(), "CPU")
# A model traced without its parameters' data (meta tensors) has shapes
# only. torch 1.13 has no autograd fallthrough for meta tensors: this one
# passes the call on below autograd, where the trace records it.
_library.impl("gradient", lambda grad, parameter: torch.empty_like(grad), "Meta")


def below_autograd(op):
    """`op` called below autograd: the AutogradMeta kernel of a kiln op
    (torch 1.13 has no autograd fallthrough for meta tensors), which
    passes the call on to where the trace records it."""
    def call(*args):
        guard = torch._C._AutoDispatchBelowAutograd()  # while it lives
        try:
            return op(*args)
        finally:
            del guard
    return call


_library.impl("gradient", below_autograd(torch.ops.kiln.gradient), "AutogradMeta")


def mark_gradient(grad, parameter):
    """Marks `grad` as the gradient of `parameter` (an input name, "p.w").

    ``compile_step(model, ...)`` marks every gradient itself; a pure step
    function marks its own, between ``torch.autograd.grad`` and the update,
    to be data-parallel.
    """
    return torch.ops.kiln.gradient(grad, parameter)


World = collections.namedtuple("World", "rank size local_rank launcher")


_world = None


def world():
    """This worker's place in its group, from the launcher's environment.

    Connects to nothing; a process without launcher variables is rank 0 of 1.
    Read once: a launcher sets the variables before the process starts.
    """
    global _world
    if _world is None:
        w = _kiln.world()
        _world = World(w["rank"], w["size"], w["local_rank"], w["launcher"])
    return _world


_communicators = {}


def has_communicators():
    """Whether this process has joined its groups."""
    return bool(_communicators)


def _layout():
    from . import parallel  # the layout lives with the layers it shards
    return parallel


def communicator(group="data"):
    """The communicator of this worker's `group`, joined on first use
    (rendezvous with every other rank; an error names the ranks that never
    arrived): "data" (the data-parallel group: the whole job without tensor
    parallelism), "tensor" (kiln.parallel's tensor-parallel group) or
    "world"."""
    if group not in ("data", "tensor", "world"):
        raise ValueError(f"no group '{group}' (data, tensor or world)")
    if "world" not in _communicators:
        _communicators["world"] = _kiln.connect()
    if group not in _communicators:
        world_communicator = _communicators["world"]
        tensor, data = _layout().groups()
        # Every rank joins both of its groups, in one order. Without tensor
        # parallelism the data-parallel group is the whole job.
        _communicators["tensor"] = world_communicator.subgroup(tensor, "tensor")
        _communicators["data"] = (world_communicator if len(tensor) == 1
                                  else world_communicator.subgroup(data, "data"))
    return _communicators[group]


def group_rank(group="data"):
    """This worker's rank in its `group`."""
    layout = _layout()
    if group == "tensor":
        return layout.tensor_parallel_rank()
    if group == "data":
        return layout.data_parallel_rank()
    return world().rank


def group_size(group="data"):
    layout = _layout()
    if group == "world":
        return world().size
    return layout.group_size(group)


def all_reduce(tensor, mean=True, group="data"):
    """`tensor` (float32) summed or averaged over `group`, on every rank."""
    flat = tensor.detach().to(torch.float32).contiguous().reshape(-1)
    if group_size(group) == 1:
        return flat.reshape(tensor.shape).clone()
    data = communicator(group).all_reduce(flat.numpy().tobytes(), mean)
    return torch.frombuffer(bytearray(data), dtype=torch.float32).reshape(tensor.shape)


def broadcast(tensor, root=0, group="data"):
    """The `tensor` of `group`'s rank `root`, on every rank of it (same
    shape and dtype)."""
    if group_size(group) == 1:
        return tensor
    t = tensor.detach().contiguous()
    flat = t.reshape(-1)  # a 0-d tensor cannot be viewed as bytes
    raw = flat.view(torch.uint8) if t.dtype != torch.bool else flat.to(torch.uint8)
    data = communicator(group).broadcast(raw.numpy().tobytes(), root)
    out = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    if t.dtype == torch.bool:
        return out.to(torch.bool).reshape(t.shape)
    return out.view(t.dtype).reshape(t.shape)


def all_gather_rows(tensor, group="data"):
    """Every rank's `tensor` (one shape and dtype on all), joined along the
    first dimension in rank order, on every rank of `group`."""
    size = group_size(group)
    if size == 1:
        return tensor
    t = tensor.detach().contiguous()
    data = communicator(group).all_gather(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    out = torch.frombuffer(bytearray(data), dtype=torch.uint8).view(t.dtype)
    return out.reshape(size * t.shape[0], *t.shape[1:])


def rows_of_rank(tensor, rows, group="data"):
    """This rank's block of `rows` rows of `tensor`: ZeRO-1's share of a
    tensor whose first dimension the group splits evenly."""
    rank = group_rank(group)
    return tensor[rank * rows:(rank + 1) * rows]


def barrier():
    if world().size > 1:
        communicator("world").barrier()


def sampler(dataset, shuffle=True, seed=0, drop_last=True):
    """torch's DistributedSampler for this worker: a disjoint shard of every
    epoch for each data-parallel rank (the workers of one tensor-parallel
    group train on the same one), reshuffled per epoch from `seed` (call
    ``set_epoch``)."""
    return torch.utils.data.distributed.DistributedSampler(
        dataset, num_replicas=group_size("data"), rank=group_rank("data"),
        shuffle=shuffle, seed=seed, drop_last=drop_last)


_MASK64 = (1 << 64) - 1


def _splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def worker_seed(seed, rank, step):
    """The RNG seed of `rank`'s step `step`: distinct streams per worker and
    step, all derived from one seed, so a run repeats bit for bit for a fixed
    world size. 31 bits: the device holds integers as i32, and the seed only
    keys a 64-bit counter-based generator, so distinct steps still draw
    independent masks."""
    return _splitmix64(_splitmix64(_splitmix64(seed) ^ rank) ^ step) >> 33


def shard_seed(step_seed, shard):
    """The seed of the dropouts whose input differs between the workers of
    a tensor-parallel group (attention probabilities split by heads, say)
    for the worker holding shard `shard`, from its replica's step seed:
    each shard draws its own masks, as Megatron's model-parallel RNG
    tracker does, while the dropouts of values the group holds alike keep
    `step_seed` (their masks must agree). 31 bits, as `worker_seed`."""
    return _splitmix64(_splitmix64(step_seed) ^ (shard + 1)) >> 33
