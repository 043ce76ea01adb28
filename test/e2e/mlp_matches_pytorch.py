#!/usr/bin/env python3
"""The MLP training step built in C++ matches PyTorch, step for step.

Builds the 2-layer MLP + cross-entropy + optimizer step with kiln-example-mlp,
runs it with `kiln interpret` for several steps (feeding each step's updated
parameters and optimizer state back in), and runs the same model with
torch.nn and torch.optim on the CPU, for SGD with momentum (plain, damped,
Nesterov), Adam and AdamW. Loss, updated parameters and optimizer state must
agree within 1e-5 relative (max abs difference over the tensor's max abs).
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

TOLERANCE = 1e-5
BATCH, FEATURES, HIDDEN, CLASSES = 8, 20, 16, 5
LR, STEPS = 1e-2, 4

# (name, kiln-example-mlp flags, torch optimizer factory, state names)
OPTIMIZERS = [
    ("sgd-momentum", ["--optimizer", "sgd", "--momentum", "0.9", "--weight-decay", "0.01"],
     lambda p: torch.optim.SGD(p, lr=LR, momentum=0.9, weight_decay=0.01),
     {"momentum": "momentum_buffer"}),
    ("sgd-dampened", ["--optimizer", "sgd", "--momentum", "0.8", "--dampening", "0.3",
                      "--weight-decay", "0"],
     lambda p: torch.optim.SGD(p, lr=LR, momentum=0.8, dampening=0.3),
     {"momentum": "momentum_buffer"}),
    ("sgd-nesterov", ["--optimizer", "sgd", "--momentum", "0.9", "--nesterov",
                      "--weight-decay", "0"],
     lambda p: torch.optim.SGD(p, lr=LR, momentum=0.9, nesterov=True),
     {"momentum": "momentum_buffer"}),
    ("adam", ["--optimizer", "adam", "--weight-decay", "0.01"],
     lambda p: torch.optim.Adam(p, lr=LR, weight_decay=0.01),
     {"m": "exp_avg", "v": "exp_avg_sq"}),
    ("adamw", ["--optimizer", "adamw", "--weight-decay", "0.01"],
     lambda p: torch.optim.AdamW(p, lr=LR, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01),
     {"m": "exp_avg", "v": "exp_avg_sq"}),
]


def relative_error(got, want):
    want = np.asarray(want, dtype=np.float64)
    got = np.asarray(got, dtype=np.float64)
    scale = max(np.max(np.abs(want)), 1e-30)
    return float(np.max(np.abs(got - want)) / scale)


def check(kiln, example, label, flags, make_optimizer, states):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(FEATURES, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, CLASSES)
    )
    optimizer = make_optimizer(model.parameters())
    names = ["w1", "b1", "w2", "b2"]
    params = dict(zip(names, model.parameters()))
    rng = np.random.default_rng(0)

    with tempfile.TemporaryDirectory() as work:
        graph = os.path.join(work, "mlp.kgraph.pb")
        subprocess.run([example, "--emit-graph", graph, "--batch", str(BATCH),
                        "--features", str(FEATURES), "--hidden", str(HIDDEN),
                        "--classes", str(CLASSES)] + flags, check=True)
        state = {n: p.detach().numpy().copy() for n, p in params.items()}
        for n in names:
            for s in states:
                state[s + "_" + n] = np.zeros_like(state[n])

        worst = 0.0
        for step in range(1, STEPS + 1):
            x = rng.standard_normal((BATCH, FEATURES)).astype(np.float32)
            y = rng.integers(0, CLASSES, BATCH).astype(np.int64)
            inputs = dict(state, x=x, y=y, lr=np.float32(LR), step=np.float32(step))
            in_path = os.path.join(work, "in.npz")
            out_path = os.path.join(work, "out.npz")
            np.savez(in_path, **inputs)
            subprocess.run([kiln, "interpret", graph, "--inputs", in_path,
                            "--outputs", out_path], check=True)
            got = dict(np.load(out_path))

            optimizer.zero_grad()
            logits = model(torch.from_numpy(x))
            loss = torch.nn.functional.cross_entropy(logits, torch.from_numpy(y))
            loss.backward()
            optimizer.step()
            correct = int((logits.argmax(1) == torch.from_numpy(y)).sum())

            checks = {"loss": loss.item()}
            for n in names:
                checks[n] = params[n].detach().numpy()
                for s, torch_name in states.items():
                    checks[s + "_" + n] = optimizer.state[params[n]][torch_name].numpy()
            for name, want in checks.items():
                err = relative_error(got[name], want)
                worst = max(worst, err)
                if err > TOLERANCE:
                    print(f"{label} step {step}: '{name}' differs from PyTorch by {err:.2e} "
                          f"relative (tolerance {TOLERANCE:.0e})")
                    return 1
            if int(got["correct"]) != correct:
                print(f"{label} step {step}: correct count {int(got['correct'])} != PyTorch's {correct}")
                return 1
            state = {k: got[k] for k in state}
        print(f"{label}: {STEPS} steps match PyTorch; last loss {float(got['loss']):.6f} "
              f"(PyTorch {loss.item():.6f}); worst relative error {worst:.2e}")
    return 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True, help="Kiln's build/bin directory")
    args = parser.parse_args()
    kiln = os.path.join(args.bin, "kiln")
    example = os.path.join(args.bin, "kiln-example-mlp")
    for label, flags, make_optimizer, states in OPTIMIZERS:
        if check(kiln, example, label, flags, make_optimizer, states):
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
