"""A data-parallel CNN worker for the distributed tests: the small CNN
(batch norm, both poolings) with SGD on a fixed synthetic dataset. Rank 0
also trains the same model eagerly as DDP without SyncBatchNorm would:
each worker's shard through its own batch statistics, the gradients
averaged, the running statistics rank 0's. It writes both loss
trajectories and both final states as JSON.

    python3 -m kiln.torchrun --nproc_per_node 4 train_cnn_dp.py --out r.json
"""

import argparse
import copy
import json

import torch
import torch.nn.functional as F

import kiln
from models import SmallCNN

parser = argparse.ArgumentParser()
parser.add_argument("--batch", type=int, default=8, help="per worker")
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--out", required=True)
args = parser.parse_args()

world = kiln.distributed.world()
torch.manual_seed(1234)
model = SmallCNN()
optimizer = kiln.optim.SGD(lr=0.05, momentum=0.9)
eager = copy.deepcopy(model)
step = kiln.compile_step(model, F.cross_entropy, optimizer)

generator = torch.Generator().manual_seed(99)
x = torch.randn(args.batch * world.size * args.steps, 1, 16, 16, generator=generator)
y = (x.mean(dim=(1, 2, 3)) > 0).long() + (x[:, 0, 0, 0] > 0).long()


def shard(rank, i):
    """Worker `rank`'s batch of step i: every world.size-th sample."""
    rows = torch.arange(i * args.batch * world.size + rank,
                        (i + 1) * args.batch * world.size, world.size)
    return x[rows], y[rows]


def eager_step(torch_opt, i):
    """One DDP step of all the workers: per-shard statistics, averaged
    gradients, rank 0's running statistics."""
    torch_opt.zero_grad()
    buffers = {n: b.clone() for n, b in eager.named_buffers()}
    kept, losses = None, []
    for rank in range(world.size):
        with torch.no_grad():
            for n, b in eager.named_buffers():
                b.copy_(buffers[n])
        inputs, labels = shard(rank, i)
        loss = F.cross_entropy(eager(inputs), labels)
        (loss / world.size).backward()
        losses.append(float(loss))
        if rank == 0:
            kept = {n: b.clone() for n, b in eager.named_buffers()}
    with torch.no_grad():
        for n, b in eager.named_buffers():
            b.copy_(kept[n])
    torch_opt.step()
    return sum(losses) / len(losses)


torch_opt = kiln.optim.torch_optimizer(optimizer, eager.parameters())
compiled, expected = [], []
for i in range(args.steps):
    compiled.append(float(step(*shard(world.rank, i))))
    if world.rank == 0:
        expected.append(eager_step(torch_opt, i))

if world.rank == 0:
    step.copy_to(model)
    difference = {n: float((a.double() - b.double()).abs().max())
                  for (n, a), b in zip(model.state_dict().items(),
                                       eager.state_dict().values())}
    with open(args.out, "w") as f:
        json.dump({"compiled": compiled, "eager": expected,
                   "difference": difference, "world": world.size}, f)
