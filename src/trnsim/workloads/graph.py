"""Layer -> op graph: every op of a forward pass with its FLOPs and element counts.

The graph is hardware- and precision-free: ops count FLOPs and *elements* (weights read,
activations read and written, KV-cache read); ``trnsim.perf`` turns elements into bytes with a
precision and FLOPs into time with a compute model. ``Op.bytes`` does the conversion for a given
set of element sizes.

Derivations (forward pass, T tokens, d = d_model):

- **Matmul**: an [T, k] x [k, n] product is T*k*n multiply-accumulates = 2*T*k*n FLOPs (one
  multiply and one add per MAC). Summed over every weight matrix, a forward pass is
  2 * T * N_mm FLOPs, N_mm = active matmul parameters (``ModelArgs.n_matmul_params_active``).
  Backward is twice the forward (one matmul for the input gradient, one for the weight
  gradient), hence the familiar **6 N FLOPs per trained token**; the tests check this identity.
- **Attention** (the part not in N): scores Q K^T are 2*d_qk FLOPs per (query, key) pair per
  head, and P V another 2*d_v per pair per head: 2*(d_qk + d_v)*heads FLOPs per pair
  (= 4*d per pair for MHA with d_qk = d_v = d/heads). Causal attention over a sequence of s
  tokens has s*(s+1)/2 pairs (flash-style kernels skip the masked half; we count only the
  visible pairs, as the PaLM/MFU convention does not, so "MFU" here excludes attention and
  "HFU"-style totals include it). Sliding-window layers see at most ``w`` keys per query.
  Softmax (exp, max, sum, scale: ~5 FLOPs per pair per head) runs on the vector engines and is
  counted as vector work, not matmul FLOPs.
- **Elementwise ops** (norms, RoPE, activations, residual adds): a few FLOPs per element;
  modelled by bytes moved (they are bandwidth-bound on every chip in the catalog).
- **MoE**: the router is a d x E matmul; each token visits ``top_k`` routed experts and every
  shared expert, so expert FLOPs are 2 * T * (top_k + shared) * expert_params. The weights
  *read* are those of the experts touched by at least one token: with T*top_k uniform picks
  from E experts, E * (1 - (1 - top_k/E)^T) experts are touched (decode with a small batch
  reads only a few experts; a long prefill reads them all). Training graphs also carry the
  MoE layer's own operators as Megatron-Core runs them (``moe/router.py``, ``token_dispatcher.py``,
  ``moe_utils.py`` permute/unpermute): the top-k over the router's logits (softmax, top-k and
  the probabilities: reads T x E, writes T x top_k values and indices), the permutation that
  gathers one copy of each token per routed expert, grouped by expert (reads T x d, writes
  T x top_k x d), and the unpermutation that scatters the experts' outputs back and sums them
  weighted by the probabilities (reads T x top_k x d, writes T x d). They move bytes and do no
  matmul FLOPs.
- **Embedding** is a gather (T x d elements read), not a matmul; the LM head is a d x vocab
  matmul on the tokens whose logits are needed (all tokens in training, the last per sequence
  at inference). A vision transformer's patch embedding is a matmul (T x patch_dim x d); a
  classifier's head runs on one token per sequence (the class token) in every phase.
- **Encoders** (BERT, ViT) attend to all s x s pairs (no causal mask) and have no decode phase.
- **Multi-token prediction** (DeepSeek-V3, section 2.2): in training, each MTP module runs on
  every token: two norms, the (2d x d) projection of [hidden; next token's embedding], one
  block, and the shared output head again (``mtp`` layer group and ``mtp_head`` ops). Serving
  runs the modules only as a speculative draft (``trnsim.perf.infer``).
- **Input fusion** (draft heads: EAGLE-3): a (k d x d) projection of k concatenated hidden
  states before the first block (``fusion_proj``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from trnsim.errors import ConfigError
from trnsim.workloads.transformer import ModelArgs

OpKind = Literal["matmul", "attention", "vector", "gather", "expert"]
Phase = Literal["train", "prefill", "decode"]

# How tensor parallelism divides an op:
#   "tp"   - split over the TP group (column/row-parallel matmuls, attention heads)
#   "seq"  - split over the TP group only with sequence parallelism (norms, residuals, dropout)
#   "ep"   - routed experts: split over EP x TP (experts over EP, each expert over TP)
#   "none" - replicated on every rank of the TP group (router, embedding gather)
Shard = Literal["tp", "seq", "ep", "none"]

OP_KINDS: frozenset[str] = frozenset({"matmul", "attention", "vector", "gather", "expert"})
MATMUL_KINDS: frozenset[str] = frozenset({"matmul", "expert"})


@dataclass(frozen=True, slots=True)
class Op:
    """One op of a forward pass of one layer (or of the model head/tail).

    ``flops``: matmul-engine FLOPs (2 per MAC); ``vector_elems``: elements the vector/scalar
    engines process (softmax, norms, activations); ``weight_elems``: parameters read;
    ``act_elems``: activation elements read plus written; ``kv_elems``: KV-cache elements read.
    ``tp_width``: for matmuls whose weight tensor parallelism splits along one hidden dimension
    (the FFN width), that dimension's full size (0: not recorded); a rank holds
    ``tp_width / tp`` of it, which the compute model rounds up to the Tensor-engine tile.
    """

    name: str
    kind: OpKind
    shard: Shard
    flops: float = 0.0
    weight_elems: float = 0.0
    act_elems: float = 0.0
    kv_elems: float = 0.0
    vector_elems: float = 0.0
    tp_width: int = 0

    def bytes(self, weight_bytes: float, act_bytes: float, kv_bytes: float) -> float:
        """Bytes moved to and from HBM at the given element sizes."""
        return (
            self.weight_elems * weight_bytes + self.act_elems * act_bytes + self.kv_elems * kv_bytes
        )


@dataclass(frozen=True, slots=True)
class LayerGroup:
    """``count`` identical layers (same ops): e.g. the dense and the MoE layers of DeepSeek-V3,
    or the local and global layers of GPT-OSS."""

    name: str
    count: int
    ops: tuple[Op, ...]

    @property
    def flops(self) -> float:
        return self.count * sum(op.flops for op in self.ops)


@dataclass(frozen=True, slots=True)
class Graph:
    """A forward pass: ``pre`` ops (embedding), layer groups, ``post`` ops (final norm, head).

    ``tokens``: tokens processed (batch x new tokens per sequence); ``batch``: sequences.
    """

    model: ModelArgs
    phase: Phase
    batch: int
    tokens: int
    context: int
    pre: tuple[Op, ...]
    groups: tuple[LayerGroup, ...]
    post: tuple[Op, ...]

    @property
    def flops(self) -> float:
        """Total matmul FLOPs of the forward pass (matmuls + attention)."""
        return (
            sum(op.flops for op in self.pre)
            + sum(g.flops for g in self.groups)
            + sum(op.flops for op in self.post)
        )

    def flops_of(self, *kinds: str) -> float:
        """Forward FLOPs of the ops of the given kinds."""
        total = sum(op.flops for op in (*self.pre, *self.post) if op.kind in kinds)
        for g in self.groups:
            total += g.count * sum(op.flops for op in g.ops if op.kind in kinds)
        return total

    def all_ops(self) -> list[tuple[Op, int]]:
        """(op, multiplicity) for every op of the pass."""
        out = [(op, 1) for op in self.pre]
        for g in self.groups:
            out.extend((op, g.count) for op in g.ops)
        out.extend((op, 1) for op in self.post)
        return out


@dataclass(frozen=True, slots=True)
class SeqGroup:
    """``count`` sequences of one step, each computing ``q_len`` new tokens at the end of
    ``context`` tokens (the new ones included; a float for the mean context of a group of
    decode sequences, whose attention is linear in it). ``decode``: the sequences read the KV
    cache of their whole context (a decode step) rather than of the ``context - q_len`` tokens
    before a prefill chunk."""

    count: int
    q_len: int
    context: float
    decode: bool


def attention_pairs(q_len: int, context: int, window: int | None) -> float:
    """Visible (query, key) pairs for ``q_len`` new queries at the end of ``context`` tokens.

    Query i (0-based among the new ones) sits at position p = context - q_len + i and sees keys
    0..p (causal), i.e. p + 1 keys, capped at ``window`` for sliding-window layers. Summed in
    closed form: for prefill (q_len = context = s) this is s(s+1)/2; for one decode step it is
    the context length.
    """
    start = context - q_len  # position of the first new query
    first, last = start + 1, context  # keys seen by the first and the last new query
    if window is None or window >= last:
        return (first + last) * q_len / 2
    if window <= first:
        return float(window * q_len)
    # keys grow from `first` up to `window`, then stay at `window`
    ramp = window - first + 1
    return (first + window) * ramp / 2 + window * (q_len - ramp)


def visible_pairs(m: ModelArgs, q_len: int, context: int, window: int | None) -> float:
    """(query, key) pairs one sequence's new queries attend to: every pair of the context for
    an encoder, else ``attention_pairs`` (causal, windowed)."""
    if not m.causal:
        return float(q_len * context)
    return attention_pairs(q_len, context, window)


def expected_experts_touched(assignments: float, n_experts: int, top_k: int) -> float:
    """Expected distinct experts chosen by ``assignments / top_k`` tokens picking ``top_k`` each.

    Uniform routing: an expert is missed by one token with probability (1 - top_k/E), so it is
    touched with probability 1 - (1 - top_k/E)^tokens.
    """
    tokens = assignments / top_k
    return n_experts * (1.0 - (1.0 - top_k / n_experts) ** tokens)


def _kv_per_token(m: ModelArgs) -> int:
    """KV-cache elements per token and layer: the MLA latent plus its RoPE key, or K and V."""
    if m.mla:
        return m.mla.kv_lora_rank + m.mla.qk_rope_head_dim
    return 2 * m.kv_dim


def attention_op(m: ModelArgs, tokens: float, seqs: tuple[SeqGroup, ...], window: int | None) -> Op:
    """The attention core (scores and P.V) of one layer over the sequences ``seqs`` (``tokens``
    new tokens in all): 2 (d_qk + d_v) FLOPs per visible (query, key) pair per head (module
    docstring; ``visible_pairs``: all of them for an encoder). Flash-style kernels keep the
    scores on chip; the HBM traffic is Q, K, V and the
    output for the new tokens plus the KV cache the sequences read: a decode step reads the
    cached keys and values of its whole (windowed) context, a prefill chunk those of the
    tokens before it (none for a whole prompt)."""
    if m.mla:
        d_qk, d_v = m.mla.qk_head_dim, m.mla.v_head_dim
    else:
        d_qk = d_v = m.head_dim
    kv_per_token = _kv_per_token(m)
    pairs = 0.0
    kv_tokens = 0.0
    for s in seqs:
        pairs += s.count * visible_pairs(m, s.q_len, s.context, window)
        cached = s.context if s.decode else s.context - s.q_len
        kv_tokens += s.count * (min(cached, window) if window else cached)
    return Op(
        "attention",
        "attention",
        "tp",
        flops=2 * (d_qk + d_v) * m.n_heads * pairs,
        act_elems=tokens * (m.q_dim + kv_per_token + m.attn_out_dim),
        kv_elems=kv_tokens * kv_per_token,
        vector_elems=m.n_heads * pairs,
    )


def _attention_ops(
    m: ModelArgs, tokens: int, seqs: tuple[SeqGroup, ...], window: int | None
) -> list[Op]:
    d, T = m.d_model, tokens
    ops: list[Op] = [Op("attn_norm", "vector", "seq", act_elems=2 * T * d, vector_elems=T * d)]
    if m.mla:
        a = m.mla
        q_w = d * a.q_lora_rank + a.q_lora_rank * m.q_dim
        kv_w = d * (a.kv_lora_rank + a.qk_rope_head_dim)
        up_w = a.kv_lora_rank * m.n_heads * (a.qk_nope_head_dim + a.v_head_dim)
        # Latent projections are computed for the new tokens; the key/value up-projection of
        # the whole context is absorbed into the query/output projections at decode (the
        # DeepSeek "weight absorption" trick) and applied to the new tokens at prefill.
        ops.append(
            Op(
                "q_proj",
                "matmul",
                "tp",
                flops=2 * T * q_w,
                weight_elems=q_w,
                act_elems=T * (d + m.q_dim),
            )
        )
        ops.append(
            Op(
                "kv_down",
                "matmul",
                "none",
                flops=2 * T * kv_w,
                weight_elems=kv_w,
                act_elems=T * (d + a.kv_lora_rank + a.qk_rope_head_dim),
            )
        )
        ops.append(
            Op(
                "kv_up",
                "matmul",
                "tp",
                flops=2 * T * up_w,
                weight_elems=up_w,
                act_elems=T * (a.kv_lora_rank + m.n_heads * (a.qk_nope_head_dim + a.v_head_dim)),
            )
        )
    else:
        w = d * (m.q_dim + 2 * m.kv_dim)
        ops.append(
            Op(
                "qkv_proj",
                "matmul",
                "tp",
                flops=2 * T * w,
                weight_elems=w,
                act_elems=T * (d + m.q_dim + 2 * m.kv_dim),
            )
        )
    ops.append(
        Op(
            "rope",
            "vector",
            "tp",
            act_elems=2 * T * (m.q_dim + m.kv_dim),
            vector_elems=T * (m.q_dim + m.kv_dim),
        )
    )
    ops.append(attention_op(m, T, seqs, window))
    ops.append(
        Op(
            "o_proj",
            "matmul",
            "tp",
            flops=2 * T * m.attn_out_dim * d,
            weight_elems=m.attn_out_dim * d,
            act_elems=T * (m.attn_out_dim + d),
        )
    )
    ops.append(Op("attn_residual", "vector", "seq", act_elems=3 * T * d, vector_elems=T * d))
    return ops


def _ffn_ops(m: ModelArgs, tokens: int, moe: bool, phase: Phase = "train") -> list[Op]:
    d, T = m.d_model, tokens
    gated = m.ffn == "swiglu"
    ops: list[Op] = [Op("ffn_norm", "vector", "seq", act_elems=2 * T * d, vector_elems=T * d)]

    def ffn(prefix: str, f: int, toks: float, shard: Shard, kind: OpKind, wscale: float = 1.0):
        up = (2 if gated else 1) * d * f
        return [
            Op(
                f"{prefix}_up",
                kind,
                shard,
                flops=2 * toks * up,
                weight_elems=up * wscale,
                act_elems=toks * (d + up // d),
                tp_width=f,
            ),
            Op(
                f"{prefix}_act",
                "vector",
                shard,
                act_elems=toks * f * (3 if gated else 2),
                vector_elems=toks * f,
            ),
            Op(
                f"{prefix}_down",
                kind,
                shard,
                flops=2 * toks * f * d,
                weight_elems=f * d * wscale,
                act_elems=toks * (f + d),
                tp_width=f,
            ),
        ]

    if not moe:
        ops += ffn("ffn", m.d_ff, T, "tp", "matmul")
    else:
        E, k = m.n_experts, m.top_k
        ops.append(
            Op(
                "router",
                "matmul",
                "none",
                flops=2 * T * d * E,
                weight_elems=d * E,
                act_elems=T * (d + E),
                vector_elems=T * E,
            )
        )
        if phase == "train":
            ops.append(
                Op(
                    "moe_topk",
                    "vector",
                    "seq",
                    act_elems=T * (E + 2 * k),
                    vector_elems=T * E,
                )
            )
            ops.append(
                Op(
                    "moe_permute",
                    "vector",
                    "seq",
                    act_elems=T * d * (1 + k),
                    vector_elems=T * k * d,
                )
            )
        # Expert weights read: those of the experts touched (see module docstring), as a
        # fraction of all E experts' weights.
        touched = expected_experts_touched(T * k, E, k) / E
        ops += ffn("expert", m.d_ff_expert, T * k, "ep", "expert", wscale=E * touched)
        if phase == "train":
            ops.append(
                Op(
                    "moe_unpermute",
                    "vector",
                    "seq",
                    act_elems=T * d * (1 + k),
                    vector_elems=T * k * d,
                )
            )
        if m.n_shared_experts:
            ops += ffn("shared", m.d_ff_expert * m.n_shared_experts, T, "tp", "matmul")
    ops.append(Op("ffn_residual", "vector", "seq", act_elems=3 * T * d, vector_elems=T * d))
    return ops


@lru_cache(maxsize=4096)
def forward_graph(
    m: ModelArgs, batch: int, q_len: int, context: int | None = None, phase: Phase = "train"
) -> Graph:
    """The forward pass of ``batch`` sequences, ``q_len`` new tokens each, at the end of a
    ``context``-token context (``context`` defaults to ``q_len``: training and prefill).

    Training and prefill: ``q_len = context = s``; one decode step: ``q_len = 1`` and ``context``
    the tokens cached so far plus the new one. Logits: every token in training, the last token
    of each sequence at inference. (``step_graph`` with one ``SeqGroup``.)
    """
    context = q_len if context is None else context
    if batch < 1 or q_len < 1:
        raise ConfigError(f"forward_graph: batch ({batch}) and q_len ({q_len}) must be >= 1")
    if context < q_len:
        raise ConfigError(f"forward_graph: context ({context}) must be >= q_len ({q_len})")
    if phase not in ("train", "prefill", "decode"):
        raise ConfigError(f"forward_graph: phase must be train, prefill or decode, got {phase!r}")
    if phase == "decode" and not m.causal:
        raise ConfigError(
            f"forward_graph: {m.name} is an encoder (bidirectional attention): it has no "
            "autoregressive decode phase"
        )
    return step_graph(m, (SeqGroup(batch, q_len, context, phase == "decode"),), phase)


def step_graph(m: ModelArgs, seqs: tuple[SeqGroup, ...], phase: Phase = "prefill") -> Graph:
    """The forward pass of one step over sequences of different shapes (``SeqGroup``s: a
    serving engine's batch mixes prefill chunks and decode steps, each at its own context).
    Every op but attention depends only on the tokens of the step (``sum(count x q_len)``);
    attention sums its pairs and cached tokens over the groups (``attention_op``). Logits:
    every token in training (of models with a per-token head), one per sequence otherwise.
    ``Graph.batch`` is the number of sequences and ``Graph.context`` the longest context."""
    if not seqs or any(s.count < 1 or s.q_len < 1 or s.context < s.q_len for s in seqs):
        raise ConfigError(
            f"step_graph: every group needs count >= 1, q_len >= 1, context >= q_len, got {seqs}"
        )
    batch = sum(s.count for s in seqs)
    T, d = sum(s.count * s.q_len for s in seqs), m.d_model
    context = max(s.context for s in seqs)
    pre = _embedding_ops(m, T)
    groups: list[LayerGroup] = []
    for a_name, a_count, window in attention_kinds(m):
        attn = _attention_ops(m, T, seqs, window)
        dense = m.n_dense_ffn_layers * a_count // m.n_layers
        moe = a_count - dense
        for f_name, count, is_moe in (("dense", dense, False), ("moe", moe, True)):
            if count:
                ops = tuple(attn + _ffn_ops(m, T, is_moe, phase))
                groups.append(LayerGroup(f"{a_name}-{f_name}", count, ops))
    logit_tokens = T if (phase == "train" and m.head_per_token) else batch
    post = _head_ops(m, logit_tokens, "")
    if phase == "train" and m.n_mtp_modules:
        # Each MTP module: the norms of [hidden; next embedding] and their (2d x d) projection,
        # one block like the last ones (attention + MoE or dense FFN), then the shared head.
        is_moe = m.is_moe
        mtp = [
            Op("mtp_norms", "vector", "seq", act_elems=4 * T * d, vector_elems=2 * T * d),
            Op(
                "mtp_proj",
                "matmul",
                "none",
                flops=2 * T * 2 * d * d,
                weight_elems=2 * d * d,
                act_elems=T * 3 * d,
            ),
            *_attention_ops(m, T, seqs, None),
            *_ffn_ops(m, T, is_moe),
        ]
        groups.append(LayerGroup("mtp", m.n_mtp_modules, tuple(mtp)))
        post = post + _head_ops(m, T, "mtp_") * m.n_mtp_modules
    return Graph(m, phase, batch, T, context, pre, tuple(groups), post)


def _embedding_ops(m: ModelArgs, T: int) -> tuple[Op, ...]:
    """The embedding: a gather of T rows (token, position and type embeddings), or a vision
    model's patch projection (a T x patch_dim x d matmul); the embedding norm (BERT); a draft
    head's input-fusion projection (k d x d)."""
    d = m.d_model
    if m.patch_dim:
        p = m.patch_dim
        ops = [
            Op(
                "patch_embedding",
                "matmul",
                "none",
                flops=2 * T * p * d,
                weight_elems=p * d,
                act_elems=T * (p + d),
            )
        ]
    else:
        ops = [Op("embedding", "gather", "none", weight_elems=T * d, act_elems=T * d)]
    if m.embedding_norm:
        ops.append(Op("embedding_norm", "vector", "seq", act_elems=2 * T * d, vector_elems=T * d))
    if m.input_fusion:
        k = m.input_fusion
        ops.append(
            Op(
                "fusion_proj",
                "matmul",
                "none",
                flops=2 * T * k * d * d,
                weight_elems=k * d * d,
                act_elems=T * (k + 1) * d,
            )
        )
    return tuple(ops)


def _head_ops(m: ModelArgs, tokens: int, prefix: str) -> tuple[Op, ...]:
    """The final norm (if any), BERT's head transform, and the output layer on ``tokens``."""
    d, V = m.d_model, m.vocab
    ops = []
    if m.final_norm:
        ops.append(
            Op(f"{prefix}final_norm", "vector", "seq", act_elems=2 * tokens * d,
               vector_elems=tokens * d)
        )  # fmt: skip
    if m.head_transform:
        ops.append(
            Op(
                f"{prefix}head_transform",
                "matmul",
                "tp",
                flops=2 * tokens * d * d,
                weight_elems=d * d,
                act_elems=2 * tokens * d,
                vector_elems=2 * tokens * d,
            )
        )
    ops.append(
        Op(
            f"{prefix}lm_head",
            "matmul",
            "tp",
            flops=2 * tokens * d * V,
            weight_elems=d * V,
            act_elems=tokens * (d + V),
            vector_elems=tokens * V,
        )
    )
    return tuple(ops)


def attention_kinds(m: ModelArgs) -> list[tuple[str, int, int | None]]:
    """(name, layers, window) of the model's attention kinds: global layers (no window) and,
    for sliding-window models, the local ones. Layers are split into (attention kind) x (ffn
    kind) groups assuming local layers are spread evenly over dense and MoE layers (exact for
    every preset: none mixes both features)."""
    local = m.n_local_layers
    kinds: list[tuple[str, int, int | None]] = [("global", m.n_layers - local, None)]
    if local:
        kinds.append(("local", local, m.sliding_window))
    return kinds


def train_flops_per_token(m: ModelArgs, seq_len: int, include_attention: bool = True) -> float:
    """Model FLOPs per trained token: 6 N_mm (forward 2N + backward 4N) plus, optionally,
    3x the forward attention FLOPs per token."""
    g = forward_graph(m, 1, seq_len, phase="train")
    attn = g.flops_of("attention") / g.tokens if include_attention else 0.0
    return 6 * m.n_matmul_params_active + 3 * attn
