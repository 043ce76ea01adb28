"""Writes a TinyLlama-1.1B-shaped training step as a graph file for
kiln-bench-compile, traced without the model's data.

    PYTHONPATH=build/python /usr/bin/python3 bench/pytorch/TinyLlamaGraph.py OUT.kgraph.pb [--layers N] [--seq S] [--no-checkpointing]
    build/bin/kiln-bench-compile --no-builtin --f32-only --world-size 32 --zero-stage 1 \\
        --graph tinyllama=OUT.kgraph.pb

The step is issue 39's large-model benchmark: TinyLlama-1.1B's shape (22
layers, hidden 2048, 32 heads with 4 key-value heads, SwiGLU 5632,
vocabulary 32000, sequence 2048, batch 1 per worker), the model kept in
bf16 with AdamW on f32 master weights (kiln.optim.MasterWeights),
clipping at 1.0 and every layer under activation checkpointing
(torch.utils.checkpoint; --no-checkpointing keeps every activation);
compiled for one worker of 32 with ZeRO-1 (the graph is the same for any
group: the group is a compile option). The parameters are meta tensors,
each layer built on the meta device: shapes without data, so tracing
needs no 4.4 GB of weights. It prints the tracing time and the process's
peak memory. --layers and --seq scale the step down.
"""

import argparse
import os
import resource
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import kiln

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "test", "e2e", "pytorch"))
import models  # noqa: E402

VOCAB, HIDDEN, HEADS, KV_HEADS, FFN = 32000, 2048, 32, 4, 5632


def tiny_llama(layers, seq, checkpointing):
    """TinyLlama's shape on meta tensors, in bf16."""
    model = models.LlamaLM(vocab=8, hidden=HIDDEN, heads=HEADS, kv_heads=KV_HEADS,
                           ffn=FFN, layers=0, seq=seq, checkpoint=checkpointing)
    model.tokens = nn.Embedding(VOCAB, HIDDEN, device="meta")
    model.head = nn.Linear(HIDDEN, VOCAB, bias=False, device="meta")
    for _ in range(layers):
        model.layers.append(models.LlamaLayer(HIDDEN, HEADS, KV_HEADS, FFN, device="meta"))
    return model.to(torch.bfloat16).to("meta")


def lm_loss(logits, target):
    return F.cross_entropy(logits.float().reshape(-1, VOCAB), target.reshape(-1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out")
    parser.add_argument("--layers", type=int, default=22)
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--no-checkpointing", action="store_true")
    args = parser.parse_args()
    start = time.perf_counter()
    model = tiny_llama(args.layers, args.seq, not args.no_checkpointing)
    optimizer = kiln.optim.MasterWeights(kiln.optim.AdamW(lr=3e-4))
    step = kiln.compile_step(model, lm_loss, optimizer, max_grad_norm=1.0,
                             name=f"tinyllama-{args.layers}x{args.seq}")
    built = time.perf_counter()
    ids = torch.zeros(1, args.seq, dtype=torch.int64, device="meta")
    graph = step.graph(ids, ids)
    traced = time.perf_counter()
    with open(args.out, "wb") as f:
        f.write(graph.SerializeToString(deterministic=True))
    parameters = sum(p.numel() for p in model.parameters())
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"tinyllama {args.layers} layers x sequence {args.seq}: {parameters:,} "
          f"parameters on meta tensors; built in {built - start:.1f} s, traced in "
          f"{traced - built:.1f} s; peak memory {peak:.0f} MB; {len(graph.nodes):,} "
          f"nodes -> {args.out}")


if __name__ == "__main__":
    main()
