"""A tiny training script for precompile's end-to-end tests.

Trains an MLP for --steps steps with batch sizes cycling through --batches
(each size is its own graph), then prints one JSON line with the loss and
the cache counters of every graph it ran. --crash-after N exits with status
3 after N steps (a training script that dies during collection).
"""

import argparse
import json
import sys

import torch
import torch.nn.functional as F

import kiln
from models import MLP

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=4)
parser.add_argument("--batches", default="8,16")
parser.add_argument("--hidden", type=int, default=32)
parser.add_argument("--crash-after", type=int, default=-1)
parser.add_argument("--accumulate", type=int, default=1,
                    help="micro-batches per update (two graphs per batch size)")
args = parser.parse_args()

torch.manual_seed(0)
model = MLP(inputs=16, hidden=args.hidden, classes=4)
step = kiln.compile_step(model, F.cross_entropy, kiln.optim.SGD(lr=0.1, momentum=0.9),
                         accumulation_steps=args.accumulate, max_grad_norm=1.0)
sizes = [int(b) for b in args.batches.split(",")]
loss = None
for i in range(args.steps):
    if i == args.crash_after:
        print("crashing on purpose", file=sys.stderr)
        sys.exit(3)
    n = sizes[i % len(sizes)]
    loss = float(step(torch.randn(n, 16), torch.randint(0, 4, (n,))))
print(json.dumps({"loss": loss, "collecting": kiln.collecting(),
                  "keys": sorted(step.keys), "outcomes": step.outcomes,
                  "stats": step.cache_stats()}))
