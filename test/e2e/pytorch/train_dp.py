"""A data-parallel training worker for the distributed tests: an MLP with
Adam on a fixed synthetic dataset, sharded with DistributedSampler
semantics, checkpointed every few steps, losses written as JSON by rank 0.

    python3 -m kiln.torchrun --nproc_per_node 4 train_dp.py --batch 8 --steps 20 --out r.json
"""

import argparse
import json
import os
import time

import torch
import torch.nn.functional as F

import kiln
from models import MLP

parser = argparse.ArgumentParser()
parser.add_argument("--batch", type=int, required=True, help="per worker")
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--out")
parser.add_argument("--checkpoints")
parser.add_argument("--every", type=int, default=5)
parser.add_argument("--logdir")
parser.add_argument("--step-delay", type=float, default=0.0,
                    help="seconds to sleep after each step (gives a test time to kill)")
parser.add_argument("--trace")
args = parser.parse_args()

world = kiln.distributed.world()
torch.manual_seed(1234 + world.rank)  # different on purpose: rank 0's wins
model = MLP(inputs=32, hidden=64, classes=10)
step = kiln.compile_step(model, F.cross_entropy, kiln.optim.Adam(lr=1e-2), seed=7)

generator = torch.Generator().manual_seed(99)
x = torch.randn(512, 32, generator=generator)
y = (x[:, :10].argmax(dim=1) + (x[:, 10] > 0).long()) % 10
dataset = torch.utils.data.TensorDataset(x, y)
sampler = kiln.distributed.sampler(dataset, shuffle=True, seed=5)
loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch, sampler=sampler,
                                     drop_last=True)

checkpoints = kiln.checkpoint.Checkpointer(args.checkpoints, args.every) if args.checkpoints else None
done, losses = 0, {}
if checkpoints:
    extra = checkpoints.restore(step)
    if extra:
        done, losses = extra["step"], {int(k): v for k, v in extra["losses"].items()}
        print(f"rank {world.rank}: resumed at step {done}", flush=True)

metrics = kiln.metrics.Metrics(args.logdir, print_every=5,
                               samples_per_step=args.batch * world.size)
per_epoch = len(loader)
while done < args.steps:
    epoch, skip = divmod(done, per_epoch)
    sampler.set_epoch(epoch)
    for i, (xb, yb) in enumerate(loader):
        if i < skip:
            continue  # the data position a checkpoint restored
        if args.trace and done == 1:
            step.trace_next(args.trace)
        loss = float(step(xb, yb))
        done += 1
        losses[done] = loss
        metrics.step(done, loss, step.last_stats)
        if kiln.collecting():
            break
        if checkpoints and checkpoints.due(done):
            checkpoints.save(step, step=done, losses=losses)
        if args.step_delay:
            time.sleep(args.step_delay)
        if done >= args.steps:
            break
    if kiln.collecting():
        break
metrics.close()

if world.rank == 0 and args.out:
    params = step.parameters()
    with open(args.out, "w") as f:
        json.dump({"losses": [losses[k] for k in sorted(losses)],
                   "checksum": float(sum(p.double().sum() for p in params.values())),
                   "stats": step.cache_stats(), "world": world.size}, f)
