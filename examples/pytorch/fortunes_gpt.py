"""Data-parallel training of a small Llama-style language model on fortunes.

    kiln precompile -- python3 -m kiln.torchrun --nproc_per_node 4 fortunes_gpt.py
    python3 -m kiln.torchrun --nproc_per_node 4 fortunes_gpt.py

A character-level causal transformer with Llama's architecture (RMSNorm,
rotary embeddings, grouped-query attention, SwiGLU) and its training
recipe (AdamW, warm-up then cosine learning rate, gradient clipping at
1.0, 2 micro-batches per update, optimizer state sharded over the workers
as ZeRO-1 shards it) learns the text of Debian's fortunes-min
(fortunes, literature, riddles). The last tenth of the text is held out: rank 0 reports its loss
(PyTorch on the CPU, with the trained parameters) against the loss of the
character frequencies alone, and a greedy sample of what the model learned.
"""

import argparse
import json
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

import kiln

CORPUS = ["/usr/share/games/fortunes/fortunes", "/usr/share/games/fortunes/literature",
          "/usr/share/games/fortunes/riddles"]
VOCAB = 96  # printable ASCII 32..126 and newline (0)


def encode(text):
    return torch.tensor([0 if c == "\n" else ord(c) - 31 for c in text
                         if c == "\n" or 32 <= ord(c) < 127], dtype=torch.int64)


def decode(ids):
    return "".join("\n" if i == 0 else chr(i + 31) for i in ids)


class RMSNorm(nn.Module):
    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    first, second = x.chunk(2, dim=-1)
    return torch.cat([-second, first], dim=-1)


class Attention(nn.Module):
    """Causal attention with rotary position embeddings; `kv_heads` key and
    value heads each serve a group of query heads."""

    def __init__(self, hidden, heads, kv_heads):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads
        self.q = nn.Linear(hidden, hidden, bias=False)
        self.kv = nn.Linear(hidden, 2 * kv_heads * self.head_dim, bias=False)
        self.o = nn.Linear(hidden, hidden, bias=False)

    def forward(self, x, cos, sin):
        b, s, h = x.shape
        q = self.q(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k, v = (t.view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
                for t in self.kv(x).chunk(2, dim=-1))
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        group = self.heads // self.kv_heads
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        causal = torch.ones(s, s, dtype=torch.bool).tril()
        attn = scores.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        return self.o((attn @ v).transpose(1, 2).reshape(b, s, h))


class Block(nn.Module):
    def __init__(self, hidden, heads, kv_heads, ffn):
        super().__init__()
        self.attn_norm, self.ffn_norm = RMSNorm(hidden), RMSNorm(hidden)
        self.attn = Attention(hidden, heads, kv_heads)
        self.gate_up = nn.Linear(hidden, 2 * ffn, bias=False)
        self.down = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.attn_norm(x), cos, sin)
        gate, up = self.gate_up(self.ffn_norm(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)


class CharLlama(nn.Module):
    """Llama's architecture at character scale: pre-RMSNorm blocks, rotary
    embeddings, grouped-query attention, SwiGLU, an untied output head."""

    def __init__(self, hidden, heads, kv_heads, layers, seq, ffn):
        super().__init__()
        self.tokens = nn.Embedding(VOCAB, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads, kv_heads, ffn)
                                    for _ in range(layers))
        self.norm = RMSNorm(hidden)
        self.head = nn.Linear(hidden, VOCAB, bias=False)
        head_dim = hidden // heads
        inverse = 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim))
        angles = torch.outer(torch.arange(seq).float(), inverse).repeat(1, 2)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, ids):
        s = ids.shape[1]
        x = self.tokens(ids)
        for block in self.blocks:
            x = block(x, self.cos[:s], self.sin[:s])
        return self.head(self.norm(x))


def lm_loss(logits, targets):
    return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))


def windows(ids, seq):
    n = (len(ids) - 1) // seq
    x = ids[: n * seq].view(n, seq)
    y = ids[1: n * seq + 1].view(n, seq)
    return torch.utils.data.TensorDataset(x, y)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=300, help="optimizer updates")
    parser.add_argument("--batch", type=int, default=4, help="per worker and micro-batch")
    parser.add_argument("--accumulate", type=int, default=2, help="micro-batches per update")
    parser.add_argument("--max-grad-norm", type=float, default=1.0)
    parser.add_argument("--warmup", type=int, default=30, help="warm-up updates")
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--kv-heads", type=int, default=2)
    parser.add_argument("--ffn", type=int, default=176)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--zero-stage", type=int, default=1, choices=(0, 1),
                        help="1: each worker holds 1/workers of the optimizer state")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoints")
    parser.add_argument("--every", type=int, default=100)
    parser.add_argument("--logdir")
    parser.add_argument("--print-every", type=int, default=50)
    parser.add_argument("--summary", help="rank 0 writes the results here as JSON")
    args = parser.parse_args()

    text = ""
    for path in CORPUS:
        try:
            with open(path, encoding="latin-1") as f:
                text += f.read()
        except OSError as error:
            raise SystemExit(f"fortunes_gpt: cannot read {path}: {error} "
                             "(apt-get install fortunes-min)")
    ids = encode(text)
    split = int(0.9 * len(ids))
    train, held_out = windows(ids[:split], args.seq), windows(ids[split:], args.seq)

    world = kiln.distributed.world()
    torch.manual_seed(args.seed)
    model = CharLlama(args.hidden, args.heads, args.kv_heads, args.layers, args.seq,
                      args.ffn)
    optimizer = kiln.optim.AdamW(lr=args.lr, weight_decay=0.01).with_schedule(
        kiln.optim.warmup_cosine(args.warmup, args.steps))
    step = kiln.compile_step(model, lm_loss, optimizer, max_grad_norm=args.max_grad_norm,
                             accumulation_steps=args.accumulate,
                             zero_stage=args.zero_stage, seed=args.seed)
    sampler = kiln.distributed.sampler(train, shuffle=True, seed=args.seed)
    loader = torch.utils.data.DataLoader(train, batch_size=args.batch, sampler=sampler,
                                         drop_last=True)
    checkpoints = (kiln.checkpoint.Checkpointer(args.checkpoints, args.every)
                   if args.checkpoints else None)
    metrics = kiln.metrics.Metrics(args.logdir, print_every=args.print_every)
    if world.rank == 0 and not kiln.collecting():
        print(f"fortunes_gpt: {sum(p.numel() for p in model.parameters()):,} parameters, "
              f"{len(ids):,} characters ({len(train)} training windows of {args.seq}), "
              f"{world.size} workers x batch {args.batch} x {args.accumulate} "
              f"micro-batches, {args.steps} updates, ZeRO stage {args.zero_stage}",
              flush=True)
    losses = kiln.loop.train(step, loader, args.steps, sampler=sampler,
                             checkpoints=checkpoints, metrics=metrics)
    metrics.close()
    if kiln.collecting():
        return
    compiles = kiln.loop.group_compiles(step)
    if world.rank != 0:
        return

    step.copy_to(model)
    with torch.no_grad():
        x, y = held_out.tensors
        held_out_loss = lm_loss(model(x), y).item()
        counts = torch.bincount(ids[:split], minlength=VOCAB).double() + 1
        unigram = -(counts / counts.sum()).log()[y.reshape(-1)].mean().item()
        sample = encode("A ")
        for _ in range(120):
            context = sample[-args.seq:].unsqueeze(0)
            sample = torch.cat([sample, model(context)[0, -1].argmax().view(1)])
    print(f"fortunes_gpt: held-out loss {held_out_loss:.3f} nats/char (character "
          f"frequencies alone: {unigram:.3f}); final training loss {losses[max(losses)]:.3f}")
    print("fortunes_gpt: greedy sample: " + repr(decode(sample.tolist())))
    print(f"fortunes_gpt: graphs compiled at train time: {compiles} "
          f"(all {world.size} workers)")
    modelled = step.last_stats["modelled_seconds"]
    print("fortunes_gpt: " + kiln.loop.modelled_summary(step, args.batch * world.size))
    if args.summary:
        with open(args.summary, "w") as f:
            json.dump({"held_out_loss": held_out_loss, "unigram_loss": unigram,
                       "compiles": compiles,
                       "losses": [losses[k] for k in sorted(losses)],
                       "modelled_seconds": modelled, "mfu": step.last_stats["mfu"]}, f)


if __name__ == "__main__":
    main()
