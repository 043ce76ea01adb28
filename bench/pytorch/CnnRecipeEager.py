"""The main job's Fashion-MNIST CNN recipe in eager PyTorch, for choosing it.

    PYTHONPATH=build/python /usr/bin/python3 bench/pytorch/CnnRecipeEager.py \
        --steps 800 --lr 8e-3 --beta2 0.99 --label-smoothing 0.1

Trains `examples/pytorch/fashion_mnist.py`'s ResNet-style CNN on the CPU as
the main job's 4 data-parallel workers do: global batches of 4 x 32, each
worker's 32 samples through the model on their own (batch norm's statistics
per worker, as DDP without SyncBatchNorm), the gradients averaged; Adam
with a warm-up then cosine learning rate (kiln.optim.warmup_cosine's
formula). Prints the test accuracy, so that a recipe can be tried in a
couple of minutes instead of a main-job run. One thread.
"""

import argparse
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..",
                                "examples", "pytorch"))
import fashion_mnist  # noqa: E402

WORKERS, BATCH = 4, 32


def warmup_cosine(steps, floor=0.02):
    """The factor kiln.optim.warmup_cosine applies at each step."""
    warm = max(1, steps // 20)

    def factor(step):
        if step < warm:
            return (step + 1) / warm
        progress = (step - warm) / max(1, steps - warm)
        return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))
    return factor


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=800)
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--lr", type=float, default=8e-3)
    parser.add_argument("--beta2", type=float, default=0.99, help="Adam's second beta")
    parser.add_argument("--label-smoothing", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    model = fashion_mnist.ResNetSmall(args.width)
    train = fashion_mnist.load(fashion_mnist.DATA, "train")
    test = fashion_mnist.load(fashion_mnist.DATA, "test")
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, betas=(0.9, args.beta2))
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_cosine(args.steps))
    shuffle = torch.Generator().manual_seed(args.seed)
    order, at = torch.randperm(len(train), generator=shuffle), 0
    start = time.time()
    for _ in range(args.steps):
        if at + WORKERS * BATCH > len(order):
            order, at = torch.randperm(len(train), generator=shuffle), 0
        batch = order[at:at + WORKERS * BATCH]
        at += WORKERS * BATCH
        x, y = train.tensors[0][batch], train.tensors[1][batch]
        optimizer.zero_grad()
        loss = sum(F.cross_entropy(model(x[w * BATCH:(w + 1) * BATCH]),
                                   y[w * BATCH:(w + 1) * BATCH],
                                   label_smoothing=args.label_smoothing)
                   for w in range(WORKERS)) / WORKERS
        loss.backward()
        optimizer.step()
        schedule.step()
    model.eval()
    with torch.no_grad():
        predictions = model(test.tensors[0]).argmax(dim=1)
    accuracy = (predictions == test.tensors[1]).float().mean().item()
    print(f"CNN width {args.width}, {args.steps} steps of {WORKERS} x {BATCH}, Adam "
          f"{args.lr}, betas (0.9, {args.beta2}), label smoothing {args.label_smoothing}: test accuracy "
          f"{100 * accuracy:.2f}% ({time.time() - start:.0f} s)")


if __name__ == "__main__":
    main()
