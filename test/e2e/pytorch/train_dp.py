"""A data-parallel training worker for the distributed tests: an MLP with
Adam on a fixed synthetic dataset, sharded with DistributedSampler
semantics, checkpointed every few steps, losses written as JSON by rank 0.

    python3 -m kiln.torchrun --nproc_per_node 4 train_dp.py --batch 8 --steps 20 --out r.json
"""

import argparse
import hashlib
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
parser.add_argument("--out", help="rank 0's results (JSON); with {rank}, every rank's")
parser.add_argument("--checkpoints")
parser.add_argument("--every", type=int, default=5)
parser.add_argument("--logdir")
parser.add_argument("--step-delay", type=float, default=0.0,
                    help="seconds to sleep after each step (gives a test time to kill)")
parser.add_argument("--trace")
parser.add_argument("--pid-dir", help="each rank writes its pid here (for kill tests)")
parser.add_argument("--bf16", action="store_true",
                    help="keep the model and its inputs in bf16 (model.to(torch.bfloat16))")
parser.add_argument("--master-weights", action="store_true",
                    help="with --bf16: Adam on f32 copies (kiln.optim.MasterWeights)")
parser.add_argument("--tokens", action="store_true",
                    help="train a bag of token embeddings (a 1200-row table) instead")
args = parser.parse_args()


class TokenBag(torch.nn.Module):
    """Token embeddings averaged over a sequence of 4, then a linear layer:
    a table with more than 8 rows for each token of 4 workers' batches of 8,
    whose update the compiler splits by row."""

    def __init__(self, vocab=1200, width=16, classes=10):
        super().__init__()
        self.tokens = torch.nn.Embedding(vocab, width)
        self.out = torch.nn.Linear(width, classes)
        # Small rows, so that Adam's steps move them far: the loss falls
        # only if the table learns.
        with torch.no_grad():
            self.tokens.weight.mul_(0.05)

    def forward(self, ids):
        return self.out(self.tokens(ids).mean(dim=1))


world = kiln.distributed.world()
if args.pid_dir:
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    with open(os.path.join(args.pid_dir, f"pid-{world.rank}-{restart}"), "w") as f:
        f.write(str(os.getpid()))
torch.manual_seed(1234 + world.rank)  # different on purpose: rank 0's wins
model = TokenBag() if args.tokens else MLP(inputs=32, hidden=64, classes=10)
if args.bf16:
    model = model.to(torch.bfloat16)
optimizer = kiln.optim.Adam(lr=1e-2)
if args.master_weights:
    optimizer = kiln.optim.MasterWeights(optimizer)
step = kiln.compile_step(model, F.cross_entropy, optimizer, seed=7)

generator = torch.Generator().manual_seed(99)
if args.tokens:
    # Sequences of one token among the table's first 60, repeated: each
    # step's tokens pick rows many times over, and the model learns fast.
    x = torch.randint(0, 60, (512, 1), generator=generator).repeat(1, 4)
    y = x[:, 0] % 10
else:
    x = torch.randn(512, 32, generator=generator)
    if args.bf16:
        x = x.to(torch.bfloat16)
    y = (x[:, :10].argmax(dim=1) + (x[:, 10] > 0).long()) % 10
dataset = torch.utils.data.TensorDataset(x, y)
sampler = kiln.distributed.sampler(dataset, shuffle=True, seed=5)
loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch, sampler=sampler,
                                     drop_last=True)

checkpoints = kiln.checkpoint.Checkpointer(args.checkpoints, args.every) if args.checkpoints else None
metrics = kiln.metrics.Metrics(args.logdir, print_every=5)


class Slow:
    """The loader, slowed down so a test has time to kill a worker."""

    def __init__(self, loader):
        self.loader = loader
        self.batch_size = loader.batch_size

    def __len__(self):
        return len(self.loader)

    def __iter__(self):
        for batch in self.loader:
            time.sleep(args.step_delay)
            yield batch


losses = kiln.loop.train(step, Slow(loader) if args.step_delay else loader, args.steps,
                         sampler=sampler, checkpoints=checkpoints, metrics=metrics,
                         trace_step=2 if args.trace else None, trace_path=args.trace)
metrics.close()
if args.pid_dir:
    open(os.path.join(args.pid_dir, f"done-{world.rank}"), "w").close()

if args.out and ("{rank}" in args.out or world.rank == 0):
    params = step.parameters()
    digest = hashlib.sha256()
    for name in sorted(params):
        digest.update(params[name].contiguous().view(torch.uint8).numpy().tobytes())
    with open(args.out.format(rank=world.rank), "w") as f:
        json.dump({"losses": [losses[k] for k in sorted(losses)],
                   "checksum": float(sum(p.double().sum() for p in params.values())),
                   "digest": digest.hexdigest(),
                   "stats": step.cache_stats(), "world": world.size}, f)
