"""Tensor-parallel training of a small Llama-style language model on fortunes.

    kiln precompile -- python3 -m kiln.torchrun --nproc_per_node 4 llama_tp.py
    python3 -m kiln.torchrun --nproc_per_node 4 llama_tp.py --tensor-parallel 2

The 4 workers are laid out as 2 tensor-parallel groups of 2 (each worker
holds half of every attention and feed-forward layer, of the vocabulary's
embedding rows and of the output head) times 2 data-parallel replicas,
with the optimizer state sharded over the replicas (ZeRO-1) and gradients
clipped to the whole model's norm: the recipe of Llama 2 pre-training on
Trainium, at character scale. Rank 0 gathers the shards into a whole model
and reports its held-out loss against the character frequencies alone.
docs/distributed.md, "Tensor parallelism", explains each piece.
"""

import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

import kiln

CORPUS = ["/usr/share/games/fortunes/fortunes", "/usr/share/games/fortunes/literature",
          "/usr/share/games/fortunes/riddles"]
VOCAB = 96  # printable ASCII 32..126 and newline (0); divisible by 2, 4, 8


def encode(text):
    return torch.tensor([0 if c == "\n" else ord(c) - 31 for c in text
                         if c == "\n" or 32 <= ord(c) < 127], dtype=torch.int64)


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
    """Causal grouped-query attention with rotary embeddings. Its projections
    are separate so that a tensor-parallel plan can split them by heads;
    `heads` and `kv_heads` are the heads this worker computes."""

    def __init__(self, hidden, heads, kv_heads):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads
        self.q = nn.Linear(hidden, heads * self.head_dim, bias=False)
        self.k = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.v = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.o = nn.Linear(heads * self.head_dim, hidden, bias=False)

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        q = self.q(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        group = self.heads // self.kv_heads
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        causal = torch.ones(s, s, dtype=torch.bool).tril()
        attn = scores.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        return self.o((attn @ v).transpose(1, 2).reshape(b, s, -1))


class Block(nn.Module):
    def __init__(self, hidden, heads, kv_heads, ffn):
        super().__init__()
        self.attn_norm, self.ffn_norm = RMSNorm(hidden), RMSNorm(hidden)
        self.attn = Attention(hidden, heads, kv_heads)
        self.gate = nn.Linear(hidden, ffn, bias=False)
        self.up = nn.Linear(hidden, ffn, bias=False)
        self.down = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.attn_norm(x), cos, sin)
        h = self.ffn_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class CharLlama(nn.Module):
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
        x = self.tokens(ids)
        for block in self.blocks:
            x = block(x, self.cos, self.sin)
        return self.head(self.norm(x))


#: Which layers split how: attention by heads, SwiGLU by its hidden
#: columns, the embedding and the head by vocabulary.
PLAN = {
    "tokens": "embedding",
    "blocks.*.attn.q": "column", "blocks.*.attn.k": "column",
    "blocks.*.attn.v": "column", "blocks.*.attn.o": "row",
    "blocks.*.attn": kiln.parallel.Divide("heads", "kv_heads"),
    "blocks.*.gate": "column", "blocks.*.up": "column", "blocks.*.down": "row",
    "head": "column",
}


def parallel_lm_loss(logits, targets):
    """Cross-entropy over the vocabulary split across the tensor group."""
    return kiln.parallel.parallel_cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                targets.reshape(-1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tensor-parallel", type=int, default=2)
    parser.add_argument("--steps", type=int, default=150, help="optimizer updates")
    parser.add_argument("--batch", type=int, default=8, help="per data-parallel replica")
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--kv-heads", type=int, default=2)
    parser.add_argument("--ffn", type=int, default=176)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    text = ""
    for path in CORPUS:
        try:
            with open(path, encoding="latin-1") as f:
                text += f.read()
        except OSError as error:
            raise SystemExit(f"llama_tp: cannot read {path}: {error} "
                             "(apt-get install fortunes-min)")
    ids = encode(text)
    split = int(0.9 * len(ids))
    n = (split - 1) // args.seq
    train = torch.utils.data.TensorDataset(ids[:n * args.seq].view(n, args.seq),
                                           ids[1:n * args.seq + 1].view(n, args.seq))

    kiln.parallel.initialize(tensor_parallel=args.tensor_parallel)
    torch.manual_seed(args.seed)
    model = CharLlama(args.hidden, args.heads, args.kv_heads, args.layers, args.seq,
                      args.ffn)
    kiln.parallel.parallelize(model, PLAN)
    optimizer = kiln.optim.AdamW(lr=args.lr, weight_decay=0.01).with_schedule(
        kiln.optim.warmup_cosine(15, args.steps))
    step = kiln.compile_step(model, parallel_lm_loss, optimizer, max_grad_norm=1.0,
                             zero_stage=1, seed=args.seed)
    # The workers of a tensor-parallel group take the same batches.
    sampler = kiln.distributed.sampler(train, shuffle=True, seed=args.seed)
    loader = torch.utils.data.DataLoader(train, batch_size=args.batch, sampler=sampler,
                                         drop_last=True)
    rank = kiln.distributed.world().rank
    if rank == 0 and not kiln.collecting():
        print(f"llama_tp: {kiln.distributed.world().size} workers as "
              f"{kiln.parallel.data_parallel_size()} data-parallel x "
              f"{kiln.parallel.tensor_parallel_size()} tensor-parallel, "
              f"{args.steps} updates of {args.batch * kiln.parallel.data_parallel_size()} "
              f"windows of {args.seq}", flush=True)
    metrics = kiln.metrics.Metrics(None, print_every=50)
    losses = kiln.loop.train(step, loader, args.steps, sampler=sampler, metrics=metrics)
    metrics.close()
    if kiln.collecting():
        return
    compiles = kiln.loop.group_compiles(step)
    state = step.state_dict()  # every rank: it gathers the shards
    if rank != 0:
        return
    whole = CharLlama(args.hidden, args.heads, args.kv_heads, args.layers, args.seq,
                      args.ffn)
    whole.load_state_dict({n: t for n, t in state.items() if n in whole.state_dict()},
                          strict=False)
    held = ids[split:]
    m = (len(held) - 1) // args.seq
    x, y = held[:m * args.seq].view(m, args.seq), held[1:m * args.seq + 1].view(m, args.seq)
    with torch.no_grad():
        held_out = F.cross_entropy(whole(x).reshape(-1, VOCAB), y.reshape(-1)).item()
    counts = torch.bincount(ids[:split], minlength=VOCAB).double() + 1
    unigram = -(counts / counts.sum()).log()[y.reshape(-1)].mean().item()
    print(f"llama_tp: held-out loss {held_out:.3f} nats/char (character frequencies "
          f"alone: {unigram:.3f}); final training loss {losses[max(losses)]:.3f}")
    print(f"llama_tp: graphs compiled at train time: {compiles}")
    print("llama_tp: " + kiln.loop.modelled_summary(
        step, args.batch * kiln.parallel.data_parallel_size()))


if __name__ == "__main__":
    main()
