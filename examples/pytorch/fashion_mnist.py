"""Data-parallel MLP (or CNN) training on Fashion-MNIST with Kiln.

    kiln precompile -- python3 -m kiln.torchrun --nproc_per_node 4 fashion_mnist.py
    python3 -m kiln.torchrun --nproc_per_node 4 fashion_mnist.py [--model resnet]

Each of the 4 workers trains on its shard of every global batch; the
compiled step averages the gradients through Gloo. Rank 0 prints the
training curve, then evaluates the trained parameters on the 10,000 test
images (PyTorch on the CPU) and reports how many graphs the workers compiled
at train time (none, after precompile). The data is Debian's
dataset-fashion-mnist. `--model resnet` trains a ResNet-style CNN instead:
a 3x3 stride-2 stem (28x28 to 14x14), a residual block, a strided
convolution and a second residual block at 7x7, each convolution followed
by batch norm (per-worker statistics, as DDP without SyncBatchNorm), and
a linear layer on the whole 7x7 feature map (where a garment's parts lie
matters: a global average, which discards it, costs about 0.8 points of
accuracy); Adam (betas 0.9, 0.99) with a warm-up then cosine learning
rate, and cross-entropy with label smoothing 0.1.
"""

import argparse
import functools
import gzip
import json
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import kiln

DATA = "/usr/share/datasets/fashion-mnist"


class MLP(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.fc1 = nn.Linear(784, hidden)
        self.fc2 = nn.Linear(hidden, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class Block(nn.Module):
    """Two 3x3 convolutions with batch norm, around a residual connection."""

    def __init__(self, channels):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(x + self.bn2(self.conv2(y)))


class ResNetSmall(nn.Module):
    def __init__(self, width=32):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(1, width, 3, stride=2, padding=1, bias=False),
            nn.BatchNorm2d(width), nn.ReLU())
        self.block1 = Block(width)
        self.down = nn.Sequential(
            nn.Conv2d(width, 2 * width, 3, stride=2, padding=1, bias=False),
            nn.BatchNorm2d(2 * width), nn.ReLU())
        self.block2 = Block(2 * width)
        self.fc = nn.Linear(2 * width * 7 * 7, 10)

    def forward(self, x):
        x = x.view(-1, 1, 28, 28)
        x = self.block2(self.down(self.block1(self.stem(x))))
        return self.fc(x.flatten(1))


def load(data, split):
    prefix = "train" if split == "train" else "t10k"
    try:
        with gzip.open(os.path.join(data, f"{prefix}-images-idx3-ubyte.gz")) as f:
            images = np.frombuffer(f.read(), np.uint8, offset=16)
        with gzip.open(os.path.join(data, f"{prefix}-labels-idx1-ubyte.gz")) as f:
            labels = np.frombuffer(f.read(), np.uint8, offset=8)
    except OSError as error:
        raise SystemExit(f"fashion_mnist: cannot read the dataset in {data}: {error} "
                         "(apt-get install dataset-fashion-mnist)")
    x = torch.from_numpy(images.reshape(-1, 784).astype(np.float32) / 255.0)
    x = (x - 0.2860) / 0.3530
    return torch.utils.data.TensorDataset(x, torch.from_numpy(labels.astype(np.int64)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=DATA)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--batch", type=int, default=32, help="per worker")
    parser.add_argument("--model", choices=["mlp", "resnet"], default="mlp")
    parser.add_argument("--hidden", type=int, default=128, help="the MLP's hidden width")
    parser.add_argument("--width", type=int, default=32, help="the CNN's first width")
    parser.add_argument("--lr", type=float,
                        help="Adam's learning rate (default: 1e-3 for the MLP, constant; "
                        "8e-3 for the CNN, warm-up then cosine)")
    parser.add_argument("--label-smoothing", type=float,
                        help="cross-entropy's label smoothing (default: 0 for the MLP, "
                        "0.1 for the CNN)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoints", help="checkpoint directory (resumes from it)")
    parser.add_argument("--every", type=int, default=250, help="checkpoint interval")
    parser.add_argument("--logdir", help="TensorBoard event files")
    parser.add_argument("--print-every", type=int, default=100)
    parser.add_argument("--summary", help="rank 0 writes the results here as JSON")
    args = parser.parse_args()

    world = kiln.distributed.world()
    torch.manual_seed(args.seed)
    cnn = args.model == "resnet"
    model = ResNetSmall(args.width) if cnn else MLP(args.hidden)
    args.lr = args.lr or (8e-3 if cnn else 1e-3)
    if args.label_smoothing is None:
        args.label_smoothing = 0.1 if cnn else 0.0
    # The CNN's short run (1.7 epochs) does better with Adam's second
    # moment averaged over fewer steps.
    optimizer = kiln.optim.Adam(lr=args.lr, betas=(0.9, 0.99) if cnn else (0.9, 0.999))
    if cnn:
        optimizer = optimizer.with_schedule(
            kiln.optim.warmup_cosine(max(1, args.steps // 20), args.steps, floor=0.02))
    loss = (functools.partial(F.cross_entropy, label_smoothing=args.label_smoothing)
            if args.label_smoothing else F.cross_entropy)
    step = kiln.compile_step(model, loss, optimizer, seed=args.seed)
    train = load(args.data, "train")
    sampler = kiln.distributed.sampler(train, shuffle=True, seed=args.seed)
    loader = torch.utils.data.DataLoader(train, batch_size=args.batch, sampler=sampler,
                                         drop_last=True)
    checkpoints = (kiln.checkpoint.Checkpointer(args.checkpoints, args.every)
                   if args.checkpoints else None)
    metrics = kiln.metrics.Metrics(args.logdir, print_every=args.print_every)
    if world.rank == 0 and not kiln.collecting():
        name = (f"ResNet-style CNN, width {args.width}" if cnn
                else f"MLP 784-{args.hidden}-10")
        schedule = (f", betas (0.9, 0.99), warm-up then cosine, label smoothing "
                    f"{args.label_smoothing}"
                    if cnn else "")
        print(f"fashion_mnist: {name}, {world.size} workers x batch "
              f"{args.batch}, {args.steps} steps, Adam lr {args.lr}{schedule}", flush=True)
    losses = kiln.loop.train(step, loader, args.steps, sampler=sampler,
                             checkpoints=checkpoints, metrics=metrics)
    metrics.close()
    if kiln.collecting():
        return

    compiles = kiln.loop.group_compiles(step)
    if world.rank != 0:
        return
    step.copy_to(model)  # the parameters, and batch norm's running statistics
    model.eval()
    test = load(args.data, "test")
    with torch.no_grad():
        predictions = model(test.tensors[0]).argmax(dim=1)
    accuracy = (predictions == test.tensors[1]).float().mean().item()
    modelled = step.last_stats["modelled_seconds"]
    global_batch = args.batch * world.size
    print(f"fashion_mnist: test accuracy {100 * accuracy:.2f}% after {args.steps} steps "
          f"(final loss {losses[max(losses)]:.4f})")
    print(f"fashion_mnist: graphs compiled at train time: {compiles} "
          f"(all {world.size} workers)")
    print("fashion_mnist: " + kiln.loop.modelled_summary(step, global_batch))
    if args.summary:
        with open(args.summary, "w") as f:
            json.dump({"accuracy": accuracy, "compiles": compiles,
                       "losses": [losses[k] for k in sorted(losses)],
                       "modelled_seconds": modelled, "mfu": step.last_stats["mfu"]}, f)


if __name__ == "__main__":
    main()
