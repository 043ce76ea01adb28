"""Training throughput: Kiln against PyTorch eager, and modelled trn1 figures.

    PYTHONPATH=build/python /usr/bin/python3 bench/pytorch/TrainingBench.py

For the two main-job models (the Fashion-MNIST MLP, batch 32, and the
fortunes character Llama, batch 8 x 32) and the Fashion-MNIST ResNet-style
CNN (`fashion_mnist.py --model resnet`, batch 32) on one worker of this
machine:

1. samples/s of a Kiln compiled step (the simulated NeuronCore, hazard
   checker off) against the same model, batch and optimizer trained by
   PyTorch eager on the CPU, measured in alternating rounds, and the ratio
   (goal: Kiln >= 1.0x);
2. the modelled trn1 step time, samples/s and MFU of one NeuronCore, and of
   each of 4 data-parallel NeuronCores (the step compiled for a group of 4,
   so it includes the gradient all-reduce at machine-model.md's cost);
3. how long the step's all-reduces are in flight (from its engine trace),
   and how much of that the engine schedule hides behind the backward
   pass: in-flight time minus what the 4-core step adds to the 1-core one.
"""

import argparse
import json
import os
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "examples", "pytorch"))
import kiln  # noqa: E402
from fashion_mnist import MLP, ResNetSmall  # noqa: E402
from fortunes_gpt import VOCAB, CharLlama, lm_loss  # noqa: E402


def models():
    torch.manual_seed(0)
    mlp_batch = (torch.randn(32, 784), torch.randint(0, 10, (32,)))
    gpt_batch = (torch.randint(0, VOCAB, (8, 32)), torch.randint(0, VOCAB, (8, 32)))
    return [
        ("mlp-784-128-10 b32", lambda: MLP(128), F.cross_entropy,
         lambda: kiln.optim.Adam(lr=1e-3), lambda p: torch.optim.Adam(p, lr=1e-3),
         mlp_batch),
        ("char-llama 2x64 b8x32", lambda: CharLlama(64, 4, 2, 2, 32, 176), lm_loss,
         lambda: kiln.optim.AdamW(lr=3e-3, weight_decay=0.01),
         lambda p: torch.optim.AdamW(p, lr=3e-3, weight_decay=0.01), gpt_batch),
        ("resnet-small-32 b32", lambda: ResNetSmall(32), F.cross_entropy,
         lambda: kiln.optim.Adam(lr=2e-3), lambda p: torch.optim.Adam(p, lr=2e-3),
         mlp_batch),
    ]


def eager_rate(make, loss_fn, make_opt, batch, steps):
    model = make()
    opt = make_opt(model.parameters())
    start = time.perf_counter()
    for _ in range(steps):
        opt.zero_grad()
        loss_fn(model(*batch[:-1]), batch[-1]).backward()
        opt.step()
    return steps * len(batch[0]) / (time.perf_counter() - start)


def kiln_rate(step, batch, steps):
    start = time.perf_counter()
    for _ in range(steps):
        step(*batch)
    return steps * len(batch[0]) / (time.perf_counter() - start)


def collective_seconds(trace_path):
    """Wall time during which at least one all-reduce is in flight."""
    with open(trace_path) as f:
        spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in json.load(f)["traceEvents"]
                       if e.get("ph") == "X" and e["name"] == "collective")
    total, end = 0.0, float("-inf")
    for a, b in spans:
        if b > end:
            total += b - max(a, end)
            end = b
    return total * 1e-6


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bucket-bytes", type=int, default=64 << 10,
                        help="gradient bucket of the 4-core compile (small models fit one "
                             "16 MiB bucket, which leaves nothing to overlap)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    cache = tempfile.mkdtemp(prefix="kiln-bench-")
    print(f"{'model':22} {'eager/s':>9} {'kiln/s':>9} {'kiln/eager':>10}   "
          f"{'trn1 1 core':>24}   {'trn1 4 cores (DP)':>30}   all-reduce in flight")
    for name, make, loss_fn, make_kopt, make_topt, batch in models():
        step = kiln.compile_step(make(), loss_fn, make_kopt(), cache_root=cache,
                                 data_parallel=False)
        dp = kiln.compile_step(make(), loss_fn, make_kopt(), cache_root=cache,
                               data_parallel=False,
                               flags=["--world-size=4", f"--bucket-bytes={args.bucket_bytes}"])
        step(*batch)
        eager, ours = [], []
        for _ in range(args.rounds):
            eager.append(eager_rate(make, loss_fn, make_topt, batch, args.steps))
            ours.append(kiln_rate(step, batch, args.steps))
        e, k = max(eager), max(ours)
        one = step.last_stats
        with tempfile.NamedTemporaryFile(suffix=".json") as trace:
            dp.trace_next(trace.name)
            dp(*batch)
            reduce_s = collective_seconds(trace.name)
        four = dp.last_stats
        exposed = four["modelled_seconds"] - one["modelled_seconds"]
        n = len(batch[0])
        print(f"{name:22} {e:9.0f} {k:9.0f} {k / e:9.2f}x   "
              f"{1e3 * one['modelled_seconds']:7.3f} ms {n / one['modelled_seconds']:8.0f}/s "
              f"{100 * one['mfu']:5.2f}%   "
              f"{1e3 * four['modelled_seconds']:7.3f} ms {4 * n / four['modelled_seconds']:9.0f}/s "
              f"{100 * four['mfu']:5.2f}%   "
              f"{1e6 * reduce_s:6.1f} us, {1e6 * max(0.0, reduce_s - exposed):6.1f} us hidden")


if __name__ == "__main__":
    main()
