"""Small models of the three families the front end must train exactly:
an MLP, a BERT-style classifier and a GPT-style causal language model.
Written the way PyTorch users write them (nn.Module, standard layers)."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint


class MLP(nn.Module):
    def __init__(self, inputs=64, hidden=128, classes=10):
        super().__init__()
        self.fc1 = nn.Linear(inputs, hidden)
        self.fc2 = nn.Linear(hidden, classes)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class SelfAttention(nn.Module):
    def __init__(self, hidden, heads, causal, dropout=0.0):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.causal = causal
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(x).split(h, dim=-1)
        q = q.view(b, s, self.heads, h // self.heads).transpose(1, 2)
        k = k.view(b, s, self.heads, h // self.heads).transpose(1, 2)
        v = v.view(b, s, self.heads, h // self.heads).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(h // self.heads)
        if self.causal:
            mask = torch.ones(s, s, dtype=torch.bool).tril()
            scores = scores.masked_fill(~mask, float("-inf"))
        attn = self.drop(scores.softmax(dim=-1))
        out = (attn @ v).transpose(1, 2).reshape(b, s, h)
        return self.proj(out)


class Block(nn.Module):
    def __init__(self, hidden, heads, causal, pre_norm, dropout=0.0):
        super().__init__()
        self.attn = SelfAttention(hidden, heads, causal, dropout)
        self.drop1 = nn.Dropout(dropout)
        self.drop2 = nn.Dropout(dropout)
        self.ln1 = nn.LayerNorm(hidden)
        self.ln2 = nn.LayerNorm(hidden)
        self.ff1 = nn.Linear(hidden, 4 * hidden)
        self.ff2 = nn.Linear(4 * hidden, hidden)
        self.pre_norm = pre_norm

    def forward(self, x):
        if self.pre_norm:  # GPT
            x = x + self.attn(self.ln1(x))
            return x + self.ff2(F.gelu(self.ff1(self.ln2(x)), approximate="tanh"))
        x = self.ln1(x + self.drop1(self.attn(x)))  # BERT
        return self.ln2(x + self.drop2(self.ff2(F.gelu(self.ff1(x)))))


class BertClassifier(nn.Module):
    def __init__(self, vocab=100, hidden=64, heads=4, layers=2, seq=16, classes=3,
                 dropout=0.0):
        super().__init__()
        self.tokens = nn.Embedding(vocab, hidden)
        self.positions = nn.Embedding(seq, hidden)
        self.ln = nn.LayerNorm(hidden)
        self.layers = nn.ModuleList(Block(hidden, heads, False, False, dropout)
                                    for _ in range(layers))
        self.pooler = nn.Linear(hidden, hidden)
        self.classifier = nn.Linear(hidden, classes)
        self.register_buffer("position_ids", torch.arange(seq))

    def forward(self, ids):
        x = self.ln(self.tokens(ids) + self.positions(self.position_ids))
        for layer in self.layers:
            x = layer(x)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        return self.classifier(pooled)


class GptLM(nn.Module):
    def __init__(self, vocab=96, hidden=64, heads=4, layers=2, seq=16):
        super().__init__()
        self.tokens = nn.Embedding(vocab, hidden)
        self.positions = nn.Embedding(seq, hidden)
        self.layers = nn.ModuleList(Block(hidden, heads, True, True) for _ in range(layers))
        self.ln = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, vocab, bias=False)
        self.register_buffer("position_ids", torch.arange(seq))

    def forward(self, ids):
        x = self.tokens(ids) + self.positions(self.position_ids)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.ln(x))


class EncoderLayer(nn.Module):
    """One BERT encoder layer (post-norm, GELU, dropout on the attention
    probabilities and both residual branches) with a classifier on the
    first position."""

    def __init__(self, hidden=256, heads=4, classes=4, dropout=0.1):
        super().__init__()
        self.layer = Block(hidden, heads, False, False, dropout)
        self.classifier = nn.Linear(hidden, classes)

    def forward(self, x):
        return self.classifier(self.layer(x)[:, 0])


class SeededDropout(nn.Module):
    """nn.Dropout with the masks of a Kiln step: dropout `stream` of the
    trace, at the seed `seed()` returns. An eager reference for steps whose
    dropouts Kiln draws."""

    def __init__(self, p, stream, seed):
        super().__init__()
        self.p, self.stream, self.seed = p, stream, seed

    def forward(self, x):
        import kiln
        mask = kiln.rng.dropout_mask(self.seed(), self.stream, x.shape, self.p)
        return x * mask.to(x.dtype) / (1 - self.p)


class ShardedSeededDropout(SeededDropout):
    """SeededDropout of an activation a tensor-parallel group splits into
    `shards` blocks along `dim` (attention probabilities by heads): each
    block with the masks its shard draws (kiln.distributed.shard_seed)."""

    def __init__(self, p, stream, seed, shards, dim):
        super().__init__(p, stream, seed)
        self.shards, self.dim = shards, dim

    def forward(self, x):
        import kiln
        blocks = []
        for shard, block in enumerate(x.chunk(self.shards, self.dim)):
            seed = kiln.distributed.shard_seed(self.seed(), shard)
            mask = kiln.rng.dropout_mask(seed, self.stream, block.shape, self.p)
            blocks.append(block * mask.to(x.dtype) / (1 - self.p))
        return torch.cat(blocks, self.dim)


def seed_dropouts(model, seed, *sample, shards=1):
    """Replaces every nn.Dropout of `model` with a SeededDropout, numbered in
    the order a forward pass on `sample` calls them, which is the trace's.
    With `shards` > 1, a dropout with a `split_dim` (of an activation a
    tensor-parallel group of `shards` workers splits) draws per-shard masks
    (ShardedSeededDropout)."""
    order = []
    hooks = [m.register_forward_hook(lambda m, i, o: order.append(m))
             for m in model.modules() if isinstance(m, nn.Dropout)]
    with torch.no_grad():
        model(*sample)
    for h in hooks:
        h.remove()
    stream_of = {id(m): k for k, m in enumerate(order)}
    for name, m in list(model.named_modules()):
        if isinstance(m, nn.Dropout):
            parent = model.get_submodule(name.rpartition(".")[0])
            split_dim = getattr(m, "split_dim", None)
            seeded = (ShardedSeededDropout(m.p, stream_of[id(m)], seed, shards, split_dim)
                      if shards > 1 and split_dim is not None
                      else SeededDropout(m.p, stream_of[id(m)], seed))
            setattr(parent, name.rpartition(".")[2], seeded)


def lm_loss(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


class SmallCNN(nn.Module):
    """Both pooling kinds, batch norm, a grouped strided convolution and a
    1-d one: the ops of a CNN step on a 1x16x16 input."""

    def __init__(self, classes=3):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
            nn.MaxPool2d(3, 2, 1))
        self.body = nn.Sequential(
            nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=2, bias=False),
            nn.BatchNorm2d(8), nn.ReLU(), nn.AvgPool2d(2, ceil_mode=True))
        self.line = nn.Conv1d(8, 4, 3, padding=2, dilation=2)
        self.head = nn.Linear(4, classes)

    def forward(self, x):
        x = self.body(self.stem(x))                 # [N, 8, 2, 2]
        x = self.line(x.flatten(2))                 # [N, 4, 4]
        return self.head(x.mean(-1))


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6, device=None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim, device=device))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotary_tables(seq, head_dim, base=10000.0):
    """cos and sin of rotary position embeddings, [seq, head_dim]."""
    inverse = 1.0 / (base ** (torch.arange(0, head_dim, 2).float() / head_dim))
    angles = torch.outer(torch.arange(seq).float(), inverse)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def rotate_half(x):
    first, second = x.chunk(2, dim=-1)
    return torch.cat([-second, first], dim=-1)


class GroupedQueryAttention(nn.Module):
    """Causal attention with rotary embeddings and `kv_heads` key-value heads
    shared by groups of query heads (Llama 2's GQA). `device="meta"` builds
    it without data (a large model traced for its graph)."""

    def __init__(self, hidden, heads, kv_heads, device=None, dropout=0.0):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads
        self.drop = _dropout(dropout)
        self.drop.split_dim = 1  # [batch, heads, query, key]: split by heads
        d = self.head_dim
        self.q = nn.Linear(hidden, heads * d, bias=False, device=device)
        self.k = nn.Linear(hidden, kv_heads * d, bias=False, device=device)
        self.v = nn.Linear(hidden, kv_heads * d, bias=False, device=device)
        self.o = nn.Linear(heads * d, hidden, bias=False, device=device)

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        q = self.q(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        group = self.heads // self.kv_heads
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        mask = torch.ones(s, s, dtype=torch.bool).tril()
        scores = scores.masked_fill(~mask, float("-inf"))
        out = (self.drop(scores.softmax(dim=-1)) @ v).transpose(1, 2).reshape(b, s, -1)
        return self.o(out)


def _dropout(p):
    return nn.Dropout(p) if p else nn.Identity()


class LlamaLayer(nn.Module):
    def __init__(self, hidden, heads, kv_heads, ffn, device=None, dropout=0.0):
        super().__init__()
        # Dropout of the attention's probabilities and of both residual
        # branches (Llama itself trains without).
        self.attn_drop, self.ffn_drop = _dropout(dropout), _dropout(dropout)
        self.attn_norm = RMSNorm(hidden, device=device)
        self.ffn_norm = RMSNorm(hidden, device=device)
        self.attn = GroupedQueryAttention(hidden, heads, kv_heads, device=device,
                                          dropout=dropout)
        self.gate = nn.Linear(hidden, ffn, bias=False, device=device)
        self.up = nn.Linear(hidden, ffn, bias=False, device=device)
        self.down = nn.Linear(ffn, hidden, bias=False, device=device)

    def forward(self, x, cos, sin):
        x = x + self.attn_drop(self.attn(self.attn_norm(x), cos, sin))
        h = self.ffn_norm(x)
        return x + self.ffn_drop(self.down(F.silu(self.gate(h)) * self.up(h)))


class LlamaLM(nn.Module):
    """A Llama-style causal language model: RMSNorm, rotary embeddings,
    SwiGLU, grouped-query attention, an untied output head. The default
    dimensions are not multiples of 128."""

    def __init__(self, vocab=75, hidden=48, heads=4, kv_heads=2, ffn=100,
                 layers=2, seq=12, checkpoint=False, dropout=0.0):
        super().__init__()
        self.tokens = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(LlamaLayer(hidden, heads, kv_heads, ffn, dropout=dropout)
                                    for _ in range(layers))
        self.norm = RMSNorm(hidden)
        self.head = nn.Linear(hidden, vocab, bias=False)
        self.checkpoint = checkpoint
        cos, sin = rotary_tables(seq, hidden // heads)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, ids):
        x = self.tokens(ids)
        for layer in self.layers:
            if self.checkpoint:  # activation checkpointing, reentrant by default
                x = torch.utils.checkpoint.checkpoint(
                    layer, x, self.cos, self.sin,
                    use_reentrant=self.checkpoint != "non-reentrant")
            else:
                x = layer(x, self.cos, self.sin)
        return self.head(self.norm(x))


def llama_tp_plan():
    """LlamaLM split by heads, SwiGLU columns and vocabulary (kiln.parallel);
    key-value heads fewer than the group are replicated."""
    import kiln
    kv_heads = kiln.parallel.HeadColumns("kv_heads")
    return {
        "tokens": "embedding",
        "layers.*.attn.q": "column", "layers.*.attn.k": kv_heads,
        "layers.*.attn.v": kv_heads, "layers.*.attn.o": "row",
        "layers.*.attn": kiln.parallel.Divide("heads", "kv_heads"),
        "layers.*.gate": "column", "layers.*.up": "column", "layers.*.down": "row",
        "head": "column",
    }


class LstmLM(nn.Module):
    def __init__(self, vocab=40, embed=24, hidden=36, layers=2):
        super().__init__()
        self.tokens = nn.Embedding(vocab, embed)
        self.lstm = nn.LSTM(embed, hidden, num_layers=layers, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, ids):
        out, _ = self.lstm(self.tokens(ids))
        return self.head(out)
