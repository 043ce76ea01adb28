"""Writes torchvision's ResNet-50 training step as a graph file for
kiln-bench-compile.

    PYTHONPATH=build/python /usr/bin/python3 bench/pytorch/ResNet50Graph.py OUT.kgraph.pb [--batch N] [--size S]
    build/bin/kiln-bench-compile --graph resnet50-step=OUT.kgraph.pb

The step is the TorchElastic workload's: 224x224 images, batch 32 per
NeuronCore, 1000 classes, SGD with momentum 0.9 and weight decay 1e-4, in
f32 (the bench compiles it with --auto-cast=bf16 as well). Tracing runs the
step on real tensors (a few minutes on a 2-core machine); the graph is
written once and reused.
"""

import sys

import torch
import torch.nn.functional as F
import torchvision

import kiln
from kiln.step import build_graph


def main():
    args = sys.argv[1:]
    batch, size = 32, 224
    for flag in ("--batch", "--size"):
        if flag in args:
            at = args.index(flag)
            value = int(args[at + 1])
            del args[at:at + 2]
            if flag == "--batch":
                batch = value
            else:
                size = value
    if len(args) != 1:
        sys.exit("usage: ResNet50Graph.py OUT.kgraph.pb [--batch N] [--size S]")
    torch.manual_seed(0)
    model = torchvision.models.resnet50()
    optimizer = kiln.optim.SGD(lr=0.1, momentum=0.9, weight_decay=1e-4)
    step = kiln.compile_step(model, F.cross_entropy, optimizer, name="resnet50-train")
    inputs = (torch.randn(batch, 3, size, size), torch.randint(0, 1000, (batch,)))
    graph = build_graph(step._spec, inputs)
    with open(args[0], "wb") as f:
        f.write(graph.SerializeToString(deterministic=True))
    print(f"{args[0]}: {len(graph.nodes)} nodes")


if __name__ == "__main__":
    main()
