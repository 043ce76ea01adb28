"""Writes the BERT-base training step as a graph file for kiln-bench-compile.

    PYTHONPATH=build/python /usr/bin/python3 bench/pytorch/BertBaseGraph.py OUT.kgraph.pb [--bf16 [--master-weights]] [--vocab N]
    build/bin/kiln-bench-compile --graph bert-base-step=OUT.kgraph.pb

The step is issue 4's compile-time benchmark: 12 encoder layers, hidden 768,
12 heads, sequence 128, batch 8 per worker, vocabulary 30522, dropout 0.1,
AdamW, in f32 (the bench compiles it with --auto-cast=bf16 as well). With
--bf16 the model is kept in bf16 instead (model.to(torch.bfloat16), the
numerics of Neuron's XLA_DOWNCAST_BF16=1): parameters, activations and AdamW
state all bf16; compile that one with --f32-only (no auto-cast). With
--master-weights as well, AdamW runs on f32 copies of the bf16 parameters
with f32 state (kiln.optim.MasterWeights). --vocab
sets the vocabulary (a multilingual model's 250002: a table 8 times
BERT's, whose update is what data-parallel steps end with). Tracing
runs the step on real tensors and takes a few minutes on a 2-core machine;
the graph is written once and reused.
"""

import os
import sys

import torch
import torch.nn.functional as F

import kiln
from kiln.step import build_graph

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "test", "e2e", "pytorch"))
import models  # noqa: E402


def main():
    args = sys.argv[1:]
    bf16 = "--bf16" in args
    if bf16:
        args.remove("--bf16")
    master_weights = "--master-weights" in args
    if master_weights:
        args.remove("--master-weights")
    vocab = 30522
    if "--vocab" in args:
        at = args.index("--vocab")
        vocab = int(args[at + 1])
        del args[at:at + 2]
    if len(args) != 1 or (master_weights and not bf16):
        sys.exit("usage: BertBaseGraph.py OUT.kgraph.pb [--bf16 [--master-weights]] [--vocab N]")
    torch.manual_seed(0)
    model = models.BertClassifier(vocab=vocab, hidden=768, heads=12, layers=12,
                                  seq=128, classes=2, dropout=0.1)
    if bf16:
        model = model.to(torch.bfloat16)
    optimizer = kiln.optim.AdamW(lr=1e-4)
    if master_weights:
        optimizer = kiln.optim.MasterWeights(optimizer)
    step = kiln.compile_step(model, F.cross_entropy, optimizer, name="bert-base-train")
    batch = (torch.randint(0, vocab, (8, 128)), torch.randint(0, 2, (8,)))
    graph = build_graph(step._spec, batch)
    with open(args[0], "wb") as f:
        f.write(graph.SerializeToString())
    print(f"{args[0]}: {len(graph.nodes)} nodes")


if __name__ == "__main__":
    main()
