"""Writes one tensor-parallel worker's Llama 2-7B training step as a graph
file for kiln-bench-compile, traced without the model's data.

    PYTHONPATH=build/python /usr/bin/python3 bench/pytorch/Llama2Graph.py OUT.kgraph.pb \\
        [--tensor-parallel 8] [--layers N] [--seq S]
    build/bin/kiln-bench-compile --no-builtin --f32-only --tensor-parallel 8 \\
        --world-size 16 --zero-stage 1 --graph llama2=OUT.kgraph.pb

The step is issue 40's benchmark: Llama 2-7B's shape (32 layers, hidden
4096, 32 heads, SwiGLU 11008, vocabulary 32000, sequence 4096, batch 1 per
replica), the model kept in bf16 with AdamW on f32 master weights
(kiln.optim.MasterWeights) and clipping at 1.0, every layer under
activation checkpointing, sharded by kiln.parallel for a tensor-parallel
group (attention by heads, SwiGLU by columns, embedding and head by
vocabulary). The graph is one worker's: every worker of the group runs
the same one. kiln-bench-compile compiles it for the layout (the
data-parallel group of ZeRO-1 is a compile option). The parameters are
meta tensors: tracing allocates none of the 13.5 GB of bf16 weights. It
prints the tracing time and the process's peak memory; --layers and --seq
scale the step down.
"""

import argparse
import os
import resource
import sys
import time

# One worker of a tensor-parallel group, described to kiln without a job:
# kiln.parallel shards by the group's size; nothing connects.
_parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
_parser.add_argument("out")
_parser.add_argument("--tensor-parallel", type=int, default=8)
_parser.add_argument("--layers", type=int, default=32)
_parser.add_argument("--seq", type=int, default=4096)
_parser.add_argument("--no-checkpointing", action="store_true")
ARGS = _parser.parse_args()
for _name in ("MASTER_ADDR", "MASTER_PORT", "KILN_RENDEZVOUS"):
    os.environ.pop(_name, None)
os.environ.update(RANK="0", WORLD_SIZE=str(ARGS.tensor_parallel))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

import kiln  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "test", "e2e", "pytorch"))
import models  # noqa: E402

VOCAB, HIDDEN, HEADS, KV_HEADS, FFN = 32000, 4096, 32, 32, 11008


def llama2_7b(layers, seq, checkpointing):
    """Llama 2-7B's shape on meta tensors, in bf16."""
    model = models.LlamaLM(vocab=8, hidden=HIDDEN, heads=HEADS, kv_heads=KV_HEADS,
                           ffn=FFN, layers=0, seq=seq, checkpoint=checkpointing)
    model.tokens = nn.Embedding(VOCAB, HIDDEN, device="meta")
    model.head = nn.Linear(HIDDEN, VOCAB, bias=False, device="meta")
    for _ in range(layers):
        model.layers.append(models.LlamaLayer(HIDDEN, HEADS, KV_HEADS, FFN, device="meta"))
    return model.to(torch.bfloat16).to("meta")


def main():
    start = time.perf_counter()
    kiln.parallel.initialize(tensor_parallel=ARGS.tensor_parallel)
    model = llama2_7b(ARGS.layers, ARGS.seq, not ARGS.no_checkpointing)
    whole = sum(p.numel() for p in model.parameters())
    kiln.parallel.parallelize(model, models.llama_tp_plan())
    optimizer = kiln.optim.MasterWeights(kiln.optim.AdamW(lr=3e-4))

    def loss(logits, target):
        return kiln.parallel.parallel_cross_entropy(
            logits.reshape(-1, logits.shape[-1]), target.reshape(-1))

    step = kiln.compile_step(model, loss, optimizer, max_grad_norm=1.0,
                             name=f"llama2-7b-{ARGS.layers}x{ARGS.seq}"
                                  f"-tp{ARGS.tensor_parallel}")
    built = time.perf_counter()
    ids = torch.zeros(1, ARGS.seq, dtype=torch.int64, device="meta")
    graph = step.graph(ids, ids)
    traced = time.perf_counter()
    with open(ARGS.out, "wb") as f:
        f.write(graph.SerializeToString(deterministic=True))
    shard = sum(p.numel() for p in model.parameters())
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"llama2-7b {ARGS.layers} layers x sequence {ARGS.seq}, tensor-parallel "
          f"{ARGS.tensor_parallel}: {whole:,} parameters, {shard:,} on this worker, on "
          f"meta tensors; built in {built - start:.1f} s, traced in "
          f"{traced - built:.1f} s; peak memory {peak:.0f} MB; {len(graph.nodes):,} "
          f"nodes -> {ARGS.out}")


if __name__ == "__main__":
    main()
