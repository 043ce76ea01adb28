"""A data-parallel worker for the ZeRO-1 tests: the same MLP trained by two
compiled steps side by side, one with its optimizer state sharded
(zero_stage=1) and one with every worker holding all of it, on one
synthetic dataset, with AdamW (or LAMB), clipping and 2 micro-batches per
update.

    python3 -m kiln.torchrun --nproc_per_node 4 train_zero_dp.py --out r.json \\
        --save-at 10 --checkpoint c.pt
    python3 -m kiln.torchrun --nproc_per_node 2 train_zero_dp.py --out s.json \\
        --resume c.pt --updates 5

Rank 0 writes both loss trajectories, both steps' HBM plans and the
optimizer state's bytes as JSON; `--save-at U` saves the sharded step's
checkpoint after update U (every rank gathers, rank 0 writes), and
`--resume` starts both steps from one.
"""

import argparse
import json

import torch
import torch.nn.functional as F

import kiln
from models import MLP

parser = argparse.ArgumentParser()
parser.add_argument("--batch", type=int, default=4, help="per worker and micro-batch")
parser.add_argument("--updates", type=int, default=20)
parser.add_argument("--save-at", type=int, default=0)
parser.add_argument("--checkpoint")
parser.add_argument("--resume")
parser.add_argument("--hidden", type=int, default=256)
parser.add_argument("--bucket-bytes", type=int, default=4096)
parser.add_argument("--lamb", action="store_true")
parser.add_argument("--out", required=True)
args = parser.parse_args()

ACCUMULATE = 2
world = kiln.distributed.world()
torch.manual_seed(1234)
model = MLP(inputs=24, hidden=args.hidden, classes=8)


def compiled_step(zero_stage):
    optimizer = (kiln.optim.LAMB(lr=2e-2, no_decay=("bias",)) if args.lamb
                 else kiln.optim.AdamW(lr=1e-2))
    return kiln.compile_step(model, F.cross_entropy, optimizer,
                             max_grad_norm=0.5, accumulation_steps=ACCUMULATE,
                             zero_stage=zero_stage, name=f"zero{zero_stage}",
                             flags=[f"--bucket-bytes={args.bucket_bytes}"])


sharded, whole = compiled_step(1), compiled_step(0)
first = 0
if args.resume:
    saved = torch.load(args.resume)
    for step in (sharded, whole):
        step.load_checkpoint_state(saved)
    first = saved["steps"]

generator = torch.Generator().manual_seed(99)
# One dataset whatever the group's size, so that a resumed run sees data
# like the run that saved.
samples = max(4096, args.batch * world.size * ACCUMULATE * (first + args.updates))
x = torch.randn(samples, 24, generator=generator)
y = (x @ torch.randn(24, 8, generator=generator)).argmax(dim=1)


def shard(i):
    """This worker's micro-batch i: every world.size-th sample."""
    rows = torch.arange(i * args.batch * world.size + world.rank,
                        (i + 1) * args.batch * world.size, world.size)
    return x[rows], y[rows]


losses = {"sharded": [], "whole": []}
for u in range(first, first + args.updates):
    for j in range(ACCUMULATE):
        batch = shard(u * ACCUMULATE + j)
        losses["sharded"].append(float(sharded(*batch)))
        losses["whole"].append(float(whole(*batch)))
    if args.save_at and u + 1 == args.save_at:
        state = sharded.checkpoint_state()  # every rank: it gathers the blocks
        if world.rank == 0:
            torch.save(state, args.checkpoint)

state_bytes = sum(t.numel() * t.element_size() for n, t in whole.state_dict().items()
                  if n.endswith(("exp_avg", "exp_avg_sq")))
gathered = sharded.state_dict()
if world.rank == 0:
    difference = max(float((gathered[n] - t).abs().max())
                     for n, t in whole.state_dict().items())
    with open(args.out, "w") as f:
        json.dump({**losses, "world": world.size, "difference": difference,
                   "hbm": {"sharded": sharded.hbm_bytes, "whole": whole.hbm_bytes},
                   "optimizer_state_bytes": state_bytes,
                   "grad_norm": [sharded.metrics["grad_norm"], whole.metrics["grad_norm"]]},
                  f)
