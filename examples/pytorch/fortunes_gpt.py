"""Data-parallel training of a small GPT-style language model on fortunes.

    kiln precompile -- python3 -m kiln.torchrun --nproc_per_node 4 fortunes_gpt.py
    python3 -m kiln.torchrun --nproc_per_node 4 fortunes_gpt.py

A character-level causal transformer (pre-norm blocks, tanh-GELU MLPs,
AdamW) learns the text of Debian's fortunes-min (fortunes, literature,
riddles). The last tenth of the text is held out: rank 0 reports its loss
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


class Attention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = (t.view(b, s, self.heads, h // self.heads).transpose(1, 2)
                   for t in self.qkv(x).split(h, dim=-1))
        scores = q @ k.transpose(-2, -1) / math.sqrt(h // self.heads)
        causal = torch.ones(s, s, dtype=torch.bool).tril()
        attn = scores.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(b, s, h))


class Block(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.attn = Attention(hidden, heads)
        self.ff1, self.ff2 = nn.Linear(hidden, 4 * hidden), nn.Linear(4 * hidden, hidden)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.ff2(F.gelu(self.ff1(self.ln2(x)), approximate="tanh"))


class CharGPT(nn.Module):
    def __init__(self, hidden, heads, layers, seq):
        super().__init__()
        self.tokens = nn.Embedding(VOCAB, hidden)
        self.positions = nn.Embedding(seq, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, VOCAB, bias=False)
        self.register_buffer("position_ids", torch.arange(seq))

    def forward(self, ids):
        x = self.tokens(ids) + self.positions(self.position_ids[: ids.shape[1]])
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def lm_loss(logits, targets):
    return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))


def windows(ids, seq):
    n = (len(ids) - 1) // seq
    x = ids[: n * seq].view(n, seq)
    y = ids[1: n * seq + 1].view(n, seq)
    return torch.utils.data.TensorDataset(x, y)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=8, help="per worker")
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--lr", type=float, default=3e-3)
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
    model = CharGPT(args.hidden, args.heads, args.layers, args.seq)
    step = kiln.compile_step(model, lm_loss, kiln.optim.AdamW(lr=args.lr, weight_decay=0.01),
                             seed=args.seed)
    sampler = kiln.distributed.sampler(train, shuffle=True, seed=args.seed)
    loader = torch.utils.data.DataLoader(train, batch_size=args.batch, sampler=sampler,
                                         drop_last=True)
    checkpoints = (kiln.checkpoint.Checkpointer(args.checkpoints, args.every)
                   if args.checkpoints else None)
    metrics = kiln.metrics.Metrics(args.logdir, print_every=args.print_every)
    if world.rank == 0 and not kiln.collecting():
        print(f"fortunes_gpt: {sum(p.numel() for p in model.parameters()):,} parameters, "
              f"{len(ids):,} characters ({len(train)} training windows of {args.seq}), "
              f"{world.size} workers x batch {args.batch}, {args.steps} steps", flush=True)
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
