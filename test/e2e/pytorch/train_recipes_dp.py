"""A data-parallel worker for the recipe tests: an MLP trained with
gradient accumulation and clipping (AdamW or LAMB) on a fixed synthetic
dataset. Rank 0 also trains the same model eagerly as DDP with `no_sync`
would: every worker's micro-batches backward (loss / k / workers) into
one set of gradients, clip_grad_norm_, then the optimizer. It writes both
loss trajectories (the group's mean per micro-batch) and the largest
parameter difference as JSON.

    python3 -m kiln.torchrun --nproc_per_node 4 train_recipes_dp.py --out r.json
"""

import argparse
import copy
import json

import torch
import torch.nn.functional as F

import kiln
from models import MLP
from test_recipes import eager_lamb

parser = argparse.ArgumentParser()
parser.add_argument("--batch", type=int, default=4, help="per worker and micro-batch")
parser.add_argument("--updates", type=int, default=8)
parser.add_argument("--accumulate", type=int, default=2)
parser.add_argument("--max-norm", type=float, default=0.5)
parser.add_argument("--lamb", action="store_true")
parser.add_argument("--out", required=True)
args = parser.parse_args()

world = kiln.distributed.world()
torch.manual_seed(1234)
model = MLP(inputs=24, hidden=32, classes=5)
eager = copy.deepcopy(model)
if args.lamb:
    optimizer = kiln.optim.LAMB(lr=2e-2, no_decay=("bias",))
    decays = [not n.endswith("bias") for n, _ in eager.named_parameters()]
    eager_update = eager_lamb(list(eager.parameters()), 2e-2, (0.9, 0.999), 1e-6,
                              0.01, decays)
else:
    optimizer = kiln.optim.AdamW(lr=1e-2)
    eager_update = kiln.optim.torch_optimizer(optimizer, eager.parameters()).step
step = kiln.compile_step(model, F.cross_entropy, optimizer, max_grad_norm=args.max_norm,
                         accumulation_steps=args.accumulate)

micro_batches = args.updates * args.accumulate
generator = torch.Generator().manual_seed(99)
x = torch.randn(args.batch * world.size * micro_batches, 24, generator=generator)
y = (x @ torch.randn(24, 5, generator=generator)).argmax(dim=1)


def shard(rank, i):
    """Worker `rank`'s micro-batch i: every world.size-th sample."""
    rows = torch.arange(i * args.batch * world.size + rank,
                        (i + 1) * args.batch * world.size, world.size)
    return x[rows], y[rows]


def eager_update_of(u):
    """One update of every worker's k micro-batches; the group's mean loss
    of each micro-batch."""
    eager.zero_grad()
    means = []
    for j in range(args.accumulate):
        i = u * args.accumulate + j
        losses = []
        for rank in range(world.size):
            loss = F.cross_entropy(eager(shard(rank, i)[0]), shard(rank, i)[1])
            (loss / args.accumulate / world.size).backward()
            losses.append(float(loss))
        means.append(sum(losses) / len(losses))
    torch.nn.utils.clip_grad_norm_(eager.parameters(), args.max_norm)
    eager_update()
    return means


compiled, expected = [], []
for u in range(args.updates):
    for j in range(args.accumulate):
        compiled.append(float(step(*shard(world.rank, u * args.accumulate + j))))
    if world.rank == 0:
        expected.extend(eager_update_of(u))

if world.rank == 0:
    trained = step.parameters()
    difference = max(float((trained[n] - p.detach()).abs().max())
                     for n, p in eager.named_parameters())
    with open(args.out, "w") as f:
        json.dump({"compiled": compiled, "eager": expected, "difference": difference,
                   "world": world.size, "graphs": len(step.keys)}, f)
