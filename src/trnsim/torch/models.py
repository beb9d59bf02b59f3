"""Models defined here (nothing downloaded): a small GPT, a Llama-shaped model, and text data.

- ``GPT(GPTConfig)``: a character-level GPT-2-style decoder (learned positions, LayerNorm,
  GELU MLP, causal attention written as its math so every matmul is a plain ``bmm``).
- ``Llama(ModelArgs)``: the Llama architecture from a ``trnsim.workloads.ModelArgs`` (a preset
  such as ``llama-3-8b``, or a Hugging Face ``config.json`` read by
  ``trnsim.workloads.hf_config``): RMSNorm, rotary embeddings, grouped-query attention through
  ``scaled_dot_product_attention``, SwiGLU; random initialisation, meant for shapes-only runs
  (``profile_step``).
- ``corpus(n_chars, seed)``: English-like text made by a small stochastic grammar (subjects,
  verbs, objects, places and times), deterministic in ``seed``; ``batches`` cuts it into
  training batches of character ids.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from trnsim import inputs
from trnsim.errors import ConfigError
from trnsim.torch import _door
from trnsim.workloads import ModelArgs

torch = _door.torch()
nn = torch.nn
F = torch.nn.functional


@dataclass(frozen=True, slots=True)
class GPTConfig:
    """A small GPT. ``vocab`` is the character set size (``VOCAB`` by default)."""

    vocab: int = 0
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    seq_len: int = 32
    mlp_ratio: int = 4

    def __post_init__(self) -> None:
        if self.vocab == 0:
            object.__setattr__(self, "vocab", len(VOCAB))
        if self.vocab < 1:
            raise ConfigError(f"GPTConfig vocab must be >= 1, got {self.vocab}")
        for f, rule in (
            ("d_model", "gpt-width"),
            ("n_layers", "gpt-layers"),
            ("n_heads", "gpt-heads"),
            ("seq_len", "gpt-seq-len"),
        ):
            object.__setattr__(self, f, inputs.check(rule, getattr(self, f)))
        inputs.check_gpt_size(self.d_model, self.n_layers, self.seq_len)
        if self.d_model % self.n_heads:
            raise ConfigError(
                f"GPTConfig d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})"
            )


class Attention(nn.Module):
    def __init__(self, c: GPTConfig) -> None:
        super().__init__()
        self.n_heads = c.n_heads
        self.qkv = nn.Linear(c.d_model, 3 * c.d_model)
        self.proj = nn.Linear(c.d_model, c.d_model)
        mask = torch.ones(c.seq_len, c.seq_len, dtype=torch.bool).tril()
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        hd = C // self.n_heads
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_heads, hd).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = att.masked_fill(~self.mask[:T, :T], float("-inf"))
        y = torch.softmax(att, dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class MLP(nn.Module):
    def __init__(self, c: GPTConfig) -> None:
        super().__init__()
        self.fc = nn.Linear(c.d_model, c.mlp_ratio * c.d_model)
        self.out = nn.Linear(c.mlp_ratio * c.d_model, c.d_model)

    def forward(self, x):
        return self.out(F.gelu(self.fc(x)))


class Block(nn.Module):
    def __init__(self, c: GPTConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(c.d_model)
        self.attn = Attention(c)
        self.ln2 = nn.LayerNorm(c.d_model)
        self.mlp = MLP(c)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """A character-level GPT; ``forward(idx, targets=None)`` returns logits, or the mean
    cross-entropy loss when targets are given."""

    def __init__(self, c: GPTConfig, seed: int = 0) -> None:
        super().__init__()
        self.config = c
        gen = torch.Generator().manual_seed(seed)
        self.tok = nn.Embedding(c.vocab, c.d_model)
        self.pos = nn.Embedding(c.seq_len, c.d_model)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.n_layers))
        self.ln_f = nn.LayerNorm(c.d_model)
        self.head = nn.Linear(c.d_model, c.vocab, bias=False)
        with torch.no_grad():  # deterministic in ``seed`` (never the global generator)
            for mod in self.modules():
                if isinstance(mod, nn.LayerNorm):
                    mod.weight.fill_(1.0)
                    mod.bias.fill_(0.0)
                elif isinstance(mod, nn.Linear | nn.Embedding):
                    mod.weight.copy_(torch.randn(mod.weight.shape, generator=gen) * 0.02)
                    if getattr(mod, "bias", None) is not None:
                        mod.bias.fill_(0.0)

    def forward(self, idx, targets=None):
        T = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(T))
        for b in self.blocks:
            x = b(x)
        logits = self.head(self.ln_f(x))
        if targets is None:
            return logits
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


# ---------------------------------------------------------------------------------------------
# Llama from ModelArgs
# ---------------------------------------------------------------------------------------------


class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


def rotary_tables(seq_len: int, head_dim: int, theta: float = 500000.0):
    """cos and sin ``[seq_len, head_dim / 2]`` of rotary position embeddings (computed once,
    as torchtitan's ``precompute_freqs_cis``)."""
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    ang = torch.outer(torch.arange(seq_len, dtype=torch.float32), inv)
    return ang.cos(), ang.sin()


def rotary(x, cos, sin):
    """Rotary position embedding of ``x [B, H, T, D]`` (half-split pairs, as Llama)."""
    T, D = x.shape[-2], x.shape[-1]
    cos, sin = cos[:T].to(x.dtype), sin[:T].to(x.dtype)
    x1, x2 = x[..., : D // 2], x[..., D // 2 :]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self, m: ModelArgs) -> None:
        super().__init__()
        self.hd = m.head_dim
        self.q = nn.Linear(m.d_model, m.n_heads * m.head_dim, bias=m.bias)
        self.k = nn.Linear(m.d_model, m.n_kv_heads * m.head_dim, bias=m.bias)
        self.v = nn.Linear(m.d_model, m.n_kv_heads * m.head_dim, bias=m.bias)
        self.o = nn.Linear(m.n_heads * m.head_dim, m.d_model, bias=m.bias)

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        q = self.q(x).view(B, T, -1, self.hd).transpose(1, 2)  # local heads under TP
        k = self.k(x).view(B, T, -1, self.hd).transpose(1, 2)
        v = self.v(x).view(B, T, -1, self.hd).transpose(1, 2)
        q, k = rotary(q, cos, sin), rotary(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return self.o(y.transpose(1, 2).reshape(B, T, -1))


class LlamaMLP(nn.Module):
    def __init__(self, m: ModelArgs) -> None:
        super().__init__()
        self.gate = nn.Linear(m.d_model, m.d_ff, bias=False)
        self.up = nn.Linear(m.d_model, m.d_ff, bias=False)
        self.down = nn.Linear(m.d_ff, m.d_model, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class LlamaBlock(nn.Module):
    def __init__(self, m: ModelArgs) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(m.d_model)
        self.attn = LlamaAttention(m)
        self.ffn_norm = RMSNorm(m.d_model)
        self.mlp = LlamaMLP(m)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.mlp(self.ffn_norm(x))


class Llama(nn.Module):
    """A dense Llama-architecture decoder from ``ModelArgs`` (``forward(idx, targets)``)."""

    def __init__(self, m: ModelArgs) -> None:
        super().__init__()
        if m.is_moe or m.mla is not None or m.ffn != "swiglu" or m.norm != "rmsnorm":
            raise ConfigError(
                f"trnsim.torch.Llama builds dense SwiGLU/RMSNorm/GQA models; {m.name} is not one "
                "(pass your own nn.Module to profile_step instead)"
            )
        self.args = m
        self.embed = nn.Embedding(m.vocab, m.d_model)
        self.layers = nn.ModuleList(LlamaBlock(m) for _ in range(m.n_layers))
        self.norm = RMSNorm(m.d_model)
        self.head = nn.Linear(m.d_model, m.vocab, bias=False)
        cos, sin = rotary_tables(m.max_seq_len, m.head_dim)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    def forward(self, idx, targets=None):
        x = self.embed(idx)
        for layer in self.layers:
            x = layer(x, self.rope_cos, self.rope_sin)
        logits = self.head(self.norm(x))
        if targets is None:
            return logits
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


# ---------------------------------------------------------------------------------------------
# data: a generated corpus
# ---------------------------------------------------------------------------------------------

_SUBJECTS = (
    "the cat", "a dog", "the old man", "my sister", "the engineer", "a small bird",
    "the teacher", "our neighbour", "the robot", "a tired student",
)  # fmt: skip
_VERBS = ("sees", "likes", "builds", "finds", "paints", "carries", "moves", "reads")
_OBJECTS = (
    "a red box", "the green door", "two apples", "a long letter", "the blue chair",
    "an old map", "three stones", "the bright lamp",
)  # fmt: skip
_PLACES = ("in the garden", "at the station", "near the river", "on the hill", "at home")
_TIMES = ("today", "every morning", "at night", "on sunday", "after lunch")

VOCAB = sorted(set(" .,abcdefghijklmnopqrstuvwxyz"))


def corpus(n_chars: int = 200_000, seed: int = 0) -> str:
    """English-like sentences from a small grammar (module docstring)."""
    rng = np.random.default_rng(seed)
    out: list[str] = []
    size = 0
    while size < n_chars:
        s = f"{_SUBJECTS[rng.integers(len(_SUBJECTS))]} {_VERBS[rng.integers(len(_VERBS))]} "
        s += _OBJECTS[rng.integers(len(_OBJECTS))]
        if rng.random() < 0.6:
            s += " " + _PLACES[rng.integers(len(_PLACES))]
        if rng.random() < 0.4:
            s += ", " + _TIMES[rng.integers(len(_TIMES))]
        s += ". "
        out.append(s)
        size += len(s)
    return "".join(out)[:n_chars]


def encode(text: str):
    """Character ids (int64 tensor) of ``text`` in ``VOCAB``."""
    index = {c: i for i, c in enumerate(VOCAB)}
    return torch.tensor([index[c] for c in text], dtype=torch.long)


def batches(data, batch: int, seq_len: int, seed: int = 0):
    """An endless deterministic stream of (inputs, targets) ``[batch, seq_len]`` windows."""
    gen = torch.Generator().manual_seed(seed)
    n = data.numel() - seq_len - 1
    while True:
        starts = torch.randint(0, n, (batch,), generator=gen)
        x = torch.stack([data[s : s + seq_len] for s in starts])
        y = torch.stack([data[s + 1 : s + 1 + seq_len] for s in starts])
        yield x, y
