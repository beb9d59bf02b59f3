"""Model architectures as data: dense decoder transformers and Mixture-of-Experts.

A ``ModelArgs`` knows nothing of chips, precisions or parallelism (STYLE 9): it is the shape of
the network. ``trnsim.workloads.graph`` expands it into ops with FLOPs and element counts;
``trnsim.perf`` maps those onto hardware with a parallel plan.

Parameter counts are derived from the shape, never typed in; the tests check every preset
against its published size. Conventions:

- Linear layers have no bias unless ``bias`` is set (GPT-3 and GPT-OSS attention have biases).
- ``ffn="swiglu"``: three matrices (gate, up: d x f; down: f x d). ``ffn="gelu"``: two (up, down).
- MoE layers: a router (d x E), ``n_experts`` routed experts of hidden size ``d_ff_expert``,
  ``top_k`` of them per token, and ``n_shared_experts`` always-on experts of the same size.
  The first ``n_dense_layers`` layers use a dense FFN of size ``d_ff`` (DeepSeek-V3).
- Attention is GQA (``n_kv_heads`` <= ``n_heads``; MHA when equal) or, with ``mla`` set,
  DeepSeek Multi-head Latent Attention (low-rank query and joint key/value compression).
- ``sliding_window``: the window of local-attention layers; ``local_layers_every``: every k-th
  layer is local (GPT-OSS alternates local and global: 2; Mistral-7B v0.1: all local: 1).
- Encoders (``causal=False``: BERT, ViT) attend to every position of the sequence; they have
  no autoregressive decoding. BERT adds token-type embeddings and an embedding LayerNorm, has
  no final norm (each post-LN block ends with its own), and its masked-LM head is a d x d
  transform and LayerNorm before the output layer tied to the word embeddings (the pooler and
  next-sentence classifier, 1 M parameters on one token per sequence, are not counted). A
  vision transformer (``patch_dim``) embeds each patch with a ``patch_dim`` x d linear layer
  (the class token's row included, 1 of 197 rows), adds a class token and learned positions,
  and classifies from the class token alone (``head_per_token=False``; ``vocab`` counts the
  classes).
- ``n_mtp_modules``: DeepSeek multi-token prediction (DeepSeek-V3 report, section 2.2): module
  k predicts token t + k + 1 from the previous depth's hidden state and the next token's
  embedding: two RMSNorms, a (2d x d) projection, one transformer block like the model's last
  ones, and the shared embedding and output head. The model's own size (``n_params``) does not
  count it (DeepSeek-V3's 671 B); ``n_mtp_params`` does. Training runs it on every token, so
  its matmuls and its second pass through the shared head are in ``n_matmul_params_active``.
- ``input_fusion`` (draft heads): the first layer's input is the concatenation of this many
  hidden states of the target, fused by a (k d x d) projection (EAGLE-3: 3).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from trnsim.errors import ConfigError
from trnsim.hw.registry import Registry

FfnKind = Literal["swiglu", "gelu"]
NormKind = Literal["rmsnorm", "layernorm"]


@dataclass(frozen=True, slots=True)
class MLAArgs:
    """DeepSeek Multi-head Latent Attention dimensions (DeepSeek-V3 report, section 2.1.1).

    Per layer: queries go d -> q_lora_rank -> n_heads x (qk_nope + qk_rope); keys and values
    are compressed jointly to ``kv_lora_rank`` (+ a shared ``qk_rope_head_dim`` RoPE key), which
    is all the KV cache holds: (kv_lora_rank + qk_rope_head_dim) elements per token per layer.
    """

    q_lora_rank: int
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int

    def __post_init__(self) -> None:
        for name in ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim"):
            if getattr(self, name) < 1:
                raise ConfigError(f"MLA {name} must be >= 1, got {getattr(self, name)}")

    @property
    def qk_head_dim(self) -> int:
        """Derived: the query/key head dimension = nope part + RoPE part."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim


@dataclass(frozen=True, slots=True)
class ModelArgs:
    """The shape of a decoder-only transformer (dense or MoE).

    Attributes:
        name: preset name.
        d_model: residual width.
        n_layers: transformer blocks.
        n_heads: query heads.
        n_kv_heads: key/value heads (GQA groups); equal to ``n_heads`` for MHA.
        d_ff: dense FFN hidden size (the FFN of every layer of a dense model, and of the first
            ``n_dense_layers`` of an MoE model).
        vocab: vocabulary size (embedding rows).
        head_dim: per-head dimension; defaults to ``d_model // n_heads``.
        ffn: ``"swiglu"`` (gate, up, down) or ``"gelu"`` (up, down).
        norm: ``"rmsnorm"`` (scale only) or ``"layernorm"`` (scale and bias).
        tied_embeddings: the LM head reuses the embedding matrix.
        learned_pos: rows of a learned position embedding (GPT-3); 0 for RoPE models.
        bias: linear layers carry biases (counted in parameters; negligible FLOPs).
        n_experts: routed experts per MoE layer (0 for a dense model).
        top_k: routed experts per token.
        n_shared_experts: always-active experts per MoE layer.
        d_ff_expert: hidden size of one expert (routed and shared).
        n_dense_layers: leading layers with a dense FFN in an MoE model.
        mla: Multi-head Latent Attention dimensions (None for GQA/MHA).
        sliding_window: window of local-attention layers (None: all layers global).
        local_layers_every: every k-th layer is local when ``sliding_window`` is set.
        max_seq_len: the context length the model was trained for.
        source: where the figures come from.
        causal: a decoder (causal attention); False: an encoder (every position sees every
            other; no autoregressive decoding).
        type_vocab: token-type (segment) embedding rows (BERT: 2).
        embedding_norm: a norm after the embeddings (BERT).
        final_norm: a norm after the last block (pre-LN models); False for post-LN BERT.
        head_transform: a d x d linear layer and a norm before the output layer (BERT's MLM
            head); its output-layer bias (``vocab``) is counted when ``bias`` is set.
        patch_dim: vision: input elements per patch (ViT-B/16: 3 x 16 x 16 = 768); the token
            embedding is a ``patch_dim`` x d linear layer plus a class token, and ``vocab``
            counts output classes.
        head_per_token: the output head runs on every token (language models, masked LM);
            False: on one token per sequence (a classifier on the class token).
        n_mtp_modules: multi-token-prediction modules (DeepSeek-V3: 1).
        input_fusion: hidden states concatenated into the first layer and fused by a
            (k d x d) projection (0: none; draft heads such as EAGLE-3: 3).
    """

    name: str
    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_ff: int
    vocab: int
    head_dim: int = 0
    ffn: FfnKind = "swiglu"
    norm: NormKind = "rmsnorm"
    tied_embeddings: bool = False
    learned_pos: int = 0
    bias: bool = False
    n_experts: int = 0
    top_k: int = 0
    n_shared_experts: int = 0
    d_ff_expert: int = 0
    n_dense_layers: int = 0
    mla: MLAArgs | None = None
    sliding_window: int | None = None
    local_layers_every: int = 1
    max_seq_len: int = 4096
    source: str = ""
    causal: bool = True
    type_vocab: int = 0
    embedding_norm: bool = False
    final_norm: bool = True
    head_transform: bool = False
    patch_dim: int = 0
    head_per_token: bool = True
    n_mtp_modules: int = 0
    input_fusion: int = 0

    def __post_init__(self) -> None:
        positive = ("d_model", "n_layers", "n_heads", "n_kv_heads", "vocab", "max_seq_len")
        for name in positive:
            if getattr(self, name) < 1:
                raise ConfigError(
                    f"model {self.name!r}: {name} must be >= 1, got {getattr(self, name)}"
                )
        if self.head_dim == 0:
            if self.d_model % self.n_heads:
                raise ConfigError(
                    f"model {self.name!r}: d_model ({self.d_model}) is not divisible by "
                    f"n_heads ({self.n_heads}); give head_dim explicitly"
                )
            object.__setattr__(self, "head_dim", self.d_model // self.n_heads)
        if self.n_heads % self.n_kv_heads:
            raise ConfigError(
                f"model {self.name!r}: n_heads ({self.n_heads}) must be a multiple of "
                f"n_kv_heads ({self.n_kv_heads})"
            )
        if self.ffn not in ("swiglu", "gelu"):
            raise ConfigError(f"model {self.name!r}: ffn must be swiglu or gelu, got {self.ffn!r}")
        if self.n_experts:
            if not 1 <= self.top_k <= self.n_experts:
                raise ConfigError(
                    f"model {self.name!r}: top_k ({self.top_k}) must be in 1..n_experts "
                    f"({self.n_experts})"
                )
            if self.d_ff_expert < 1:
                raise ConfigError(f"model {self.name!r}: an MoE model needs d_ff_expert >= 1")
            if not 0 <= self.n_dense_layers < self.n_layers:
                raise ConfigError(
                    f"model {self.name!r}: n_dense_layers ({self.n_dense_layers}) must be in "
                    f"0..n_layers-1 ({self.n_layers - 1})"
                )
        elif self.top_k or self.n_shared_experts or self.n_dense_layers:
            raise ConfigError(
                f"model {self.name!r}: top_k/n_shared_experts/n_dense_layers need n_experts > 0"
            )
        if self.n_dense_layers == 0 and not self.n_experts and self.d_ff < 1:
            raise ConfigError(f"model {self.name!r}: a dense model needs d_ff >= 1")
        if self.sliding_window is not None and self.sliding_window < 1:
            raise ConfigError(f"model {self.name!r}: sliding_window must be >= 1")
        for name in ("type_vocab", "patch_dim", "n_mtp_modules", "input_fusion", "learned_pos"):
            if getattr(self, name) < 0:
                raise ConfigError(
                    f"model {self.name!r}: {name} must be >= 0, got {getattr(self, name)}"
                )
        if self.input_fusion == 1:
            raise ConfigError(
                f"model {self.name!r}: input_fusion fuses k >= 2 hidden states (0: none), got 1"
            )
        if not self.causal and (self.n_experts or self.n_mtp_modules or self.sliding_window):
            raise ConfigError(
                f"model {self.name!r}: an encoder (causal=False) has no experts, MTP modules "
                "or sliding-window layers here"
            )

    # --- shape ----------------------------------------------------------------------------

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 0

    @property
    def n_moe_layers(self) -> int:
        """Derived: layers with an MoE FFN (all but the leading dense ones)."""
        return self.n_layers - self.n_dense_layers if self.is_moe else 0

    @property
    def n_local_layers(self) -> int:
        """Derived: sliding-window layers (every ``local_layers_every``-th layer)."""
        if self.sliding_window is None:
            return 0
        return self.n_layers // self.local_layers_every

    @property
    def q_dim(self) -> int:
        """Derived: query projection width = n_heads x (query head dim)."""
        if self.mla:
            return self.n_heads * self.mla.qk_head_dim
        return self.n_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """Derived: width of K (= width of V) for GQA = n_kv_heads x head_dim."""
        return self.n_kv_heads * self.head_dim

    @property
    def attn_out_dim(self) -> int:
        """Derived: width entering the output projection = n_heads x value head dim."""
        if self.mla:
            return self.n_heads * self.mla.v_head_dim
        return self.n_heads * self.head_dim

    @property
    def kv_cache_elems_per_token(self) -> int:
        """Derived: KV-cache elements per token, all layers.

        GQA: K and V, n_kv_heads x head_dim each, per layer. MLA: the compressed latent plus
        the shared RoPE key, (kv_lora_rank + qk_rope_head_dim) per layer. Sliding-window layers
        are counted in full here (the cache of a window layer is capped by ``kv_cache_elems``).
        """
        if self.mla:
            return self.n_layers * (self.mla.kv_lora_rank + self.mla.qk_rope_head_dim)
        return self.n_layers * 2 * self.kv_dim

    def kv_cache_elems(self, context: int) -> int:
        """KV-cache elements for one sequence of ``context`` tokens (window layers capped)."""
        per_layer = self.kv_cache_elems_per_token // self.n_layers
        local = self.n_local_layers
        window = min(context, self.sliding_window or context)
        return per_layer * (local * window + (self.n_layers - local) * context)

    # --- parameter counts -------------------------------------------------------------------

    @property
    def attn_params(self) -> int:
        """Parameters of one attention block (projections and their biases).

        GQA: Wq d x q_dim, Wk and Wv d x kv_dim, Wo q_dim x d.
        MLA: Wdq d x q_rank, q norm, Wuq q_rank x n_heads*(nope+rope); Wdkv d x (kv_rank+rope),
        kv norm, Wukv kv_rank x n_heads*(nope+v); Wo n_heads*v x d.
        """
        d = self.d_model
        if self.mla:
            m = self.mla
            q = d * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * self.q_dim
            kv = d * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank
            kv += m.kv_lora_rank * self.n_heads * (m.qk_nope_head_dim + m.v_head_dim)
            return q + kv + self.attn_out_dim * d
        weights = d * (self.q_dim + 2 * self.kv_dim) + self.q_dim * d
        biases = (self.q_dim + 2 * self.kv_dim + d) if self.bias else 0
        return weights + biases

    def ffn_params(self, d_ff: int) -> int:
        """Parameters of one FFN of hidden size ``d_ff``: 3 d f (SwiGLU) or 2 d f (GELU)."""
        mats = 3 if self.ffn == "swiglu" else 2
        biases = (d_ff * (mats - 1) + self.d_model) if self.bias else 0
        return mats * self.d_model * d_ff + biases

    @property
    def norm_params_per_layer(self) -> int:
        """Two norms per block: d (RMSNorm scale) or 2d (LayerNorm scale and bias) each."""
        return 2 * self.d_model * (2 if self.norm == "layernorm" else 1)

    @property
    def dense_layer_params(self) -> int:
        return self.attn_params + self.ffn_params(self.d_ff) + self.norm_params_per_layer

    @property
    def expert_params(self) -> int:
        """Parameters of one expert."""
        return self.ffn_params(self.d_ff_expert)

    @property
    def moe_layer_params(self) -> int:
        """Attention + router (d x E) + all experts (routed and shared) + norms."""
        router = self.d_model * self.n_experts
        experts = (self.n_experts + self.n_shared_experts) * self.expert_params
        return self.attn_params + router + experts + self.norm_params_per_layer

    @property
    def _norm_params(self) -> int:
        """One norm: d (RMSNorm scale) or 2d (LayerNorm scale and bias)."""
        return self.d_model * (2 if self.norm == "layernorm" else 1)

    @property
    def patch_embedding_params(self) -> int:
        """Vision: the patch projection (patch_dim x d, with its bias if ``bias``)."""
        if not self.patch_dim:
            return 0
        return (self.patch_dim + (1 if self.bias else 0)) * self.d_model

    @property
    def embedding_params(self) -> int:
        """Token embedding (vocab x d; vision: the patch projection and a class token) plus
        learned positions (learned_pos x d), token types (type_vocab x d) and the embedding
        norm."""
        d = self.d_model
        tokens = self.patch_embedding_params + d if self.patch_dim else self.vocab * d
        norm = self._norm_params if self.embedding_norm else 0
        return tokens + (self.learned_pos + self.type_vocab) * d + norm

    @property
    def head_transform_params(self) -> int:
        """BERT's MLM transform: a d x d linear layer (and bias) and a norm."""
        if not self.head_transform:
            return 0
        return self.d_model * self.d_model + (self.d_model if self.bias else 0) + self._norm_params

    @property
    def head_params(self) -> int:
        """The output head (d x vocab, 0 when tied; its bias with ``bias`` on encoders), the
        final norm and the head transform."""
        d, v = self.d_model, self.vocab
        weights = 0 if (self.tied_embeddings and not self.patch_dim) else v * d
        out_bias = v if (self.bias and not self.causal) else 0
        final = self._norm_params if self.final_norm else 0
        return weights + out_bias + final + self.head_transform_params

    @property
    def mtp_module_params(self) -> int:
        """One multi-token-prediction module: two norms (d each), the (2d x d) projection, one
        transformer block like the model's last ones, and its output norm (the embedding and
        the head are shared)."""
        d = self.d_model
        block = self.moe_layer_params if self.is_moe else self.dense_layer_params
        return 2 * d + 2 * d * d + block + d

    @property
    def n_mtp_params(self) -> int:
        """Derived: parameters of all MTP modules (not in ``n_params``)."""
        return self.n_mtp_modules * self.mtp_module_params

    @property
    def fusion_params(self) -> int:
        """The input-fusion projection of a draft head (k d x d), 0 without one."""
        return self.input_fusion * self.d_model * self.d_model

    @property
    def n_dense_ffn_layers(self) -> int:
        return self.n_dense_layers if self.is_moe else self.n_layers

    @property
    def layer_params(self) -> int:
        """Derived: all transformer blocks."""
        return (
            self.n_dense_ffn_layers * self.dense_layer_params
            + self.n_moe_layers * self.moe_layer_params
        )

    @property
    def expert_params_total(self) -> int:
        """Derived: routed-expert parameters of all MoE layers (what expert parallelism splits)."""
        return self.n_moe_layers * self.n_experts * self.expert_params

    @property
    def n_params(self) -> int:
        """Derived: total parameters (embeddings, fusion projection, blocks, head; MTP
        modules are counted apart, ``n_mtp_params``)."""
        return self.embedding_params + self.fusion_params + self.layer_params + self.head_params

    @property
    def n_active_params(self) -> int:
        """Derived: parameters used per token (routed experts counted top_k of n_experts)."""
        unused = self.n_moe_layers * (self.n_experts - self.top_k) * self.expert_params
        return self.n_params - unused

    @property
    def n_matmul_params_active(self) -> int:
        """Derived: active parameters that multiply activations (the N of '6N').

        The embedding lookup (and learned positions) is a gather, not a matmul: excluded (a
        vision model's patch projection is a matmul: included). The LM head is a matmul:
        included (with tied embeddings it is the embedding matrix, used once as a matmul), and
        so is BERT's head transform. Norm scales and biases are elementwise: excluded (they are
        < 0.1%). MTP modules (trained on every token): their projection and block, and one more
        pass through the shared head each.
        """
        d = self.d_model
        norms = self.n_layers * self.norm_params_per_layer
        norms += self._norm_params * int(self.final_norm)  # the embedding norm left with it
        if self.mla:  # the latent norms of MLA (q_lora_rank + kv_lora_rank scales per layer)
            norms += self.n_layers * (self.mla.q_lora_rank + self.mla.kv_lora_rank)
        head = self.vocab * d
        transform = d * d if self.head_transform else 0
        out_bias = self.vocab if (self.bias and not self.causal) else 0
        patch = self.patch_dim * d
        n = (
            self.n_active_params
            - self.embedding_params
            + patch
            - norms
            - (self.head_transform_params - transform)
            - out_bias
            + (head if (self.tied_embeddings and not self.patch_dim) else 0)
            - self._bias_params_active
        )
        return n + self.n_mtp_modules * self.mtp_matmul_params

    @property
    def mtp_matmul_params(self) -> int:
        """Matmul parameters one MTP module multiplies per token: its projection, its block's
        active matmuls, and the shared output head once more."""
        if not self.n_mtp_modules:
            return 0
        d = self.d_model
        layer = self.n_matmul_params_per_layer(moe=self.is_moe)
        return 2 * d * d + layer + self.vocab * d

    def n_matmul_params_per_layer(self, moe: bool) -> int:
        """Active matmul parameters of one block (attention, router and experts or FFN),
        without biases."""
        d = self.d_model
        if self.mla:
            a = self.mla
            attn = d * a.q_lora_rank + a.q_lora_rank * self.q_dim
            attn += d * (a.kv_lora_rank + a.qk_rope_head_dim)
            attn += a.kv_lora_rank * self.n_heads * (a.qk_nope_head_dim + a.v_head_dim)
            attn += self.attn_out_dim * d
        else:
            attn = d * (self.q_dim + 2 * self.kv_dim) + self.q_dim * d
        mats = 3 if self.ffn == "swiglu" else 2
        if moe:
            ffn = d * self.n_experts + (self.top_k + self.n_shared_experts) * mats * d * (
                self.d_ff_expert
            )
        else:
            ffn = mats * d * self.d_ff
        return attn + ffn

    @property
    def _bias_params_active(self) -> int:
        if not self.bias:
            return 0
        attn = self.q_dim + 2 * self.kv_dim + self.d_model
        mats = 3 if self.ffn == "swiglu" else 2
        dense = self.d_ff * (mats - 1) + self.d_model
        expert = self.d_ff_expert * (mats - 1) + self.d_model
        moe = (self.top_k + self.n_shared_experts) * expert
        return self.n_layers * attn + self.n_dense_ffn_layers * dense + self.n_moe_layers * moe


# =============================================================================================
# Presets
# =============================================================================================

MODELS: Registry[ModelArgs] = Registry("model preset")

_HF = "Hugging Face config.json of "


def _register(args: ModelArgs, *aliases: str) -> ModelArgs:
    return MODELS.register(args.name, args, aliases=aliases)


def _llama(
    name: str,
    d: int,
    layers: int,
    heads: int,
    kv: int,
    ff: int,
    vocab: int,
    ctx: int,
    src: str,
    *aliases: str,
) -> ModelArgs:
    return _register(
        ModelArgs(
            name=name,
            d_model=d,
            n_layers=layers,
            n_heads=heads,
            n_kv_heads=kv,
            d_ff=ff,
            vocab=vocab,
            max_seq_len=ctx,
            source=src,
        ),
        *aliases,
    )


_llama(
    "llama-2-7b",
    4096,
    32,
    32,
    32,
    11008,
    32000,
    4096,
    _HF + "meta-llama/Llama-2-7b-hf",
    "llama2-7b",
)
_llama(
    "llama-2-13b",
    5120,
    40,
    40,
    40,
    13824,
    32000,
    4096,
    _HF + "meta-llama/Llama-2-13b-hf",
    "llama2-13b",
)
_llama(
    "llama-2-70b",
    8192,
    80,
    64,
    8,
    28672,
    32000,
    4096,
    _HF + "meta-llama/Llama-2-70b-hf",
    "llama2-70b",
)
_llama(
    "llama-3-8b",
    4096,
    32,
    32,
    8,
    14336,
    128256,
    8192,
    _HF + "meta-llama/Meta-Llama-3-8B",
    "llama3-8b",
)
_llama(
    "llama-3-70b",
    8192,
    80,
    64,
    8,
    28672,
    128256,
    8192,
    _HF + "meta-llama/Meta-Llama-3-70B",
    "llama3-70b",
)
_llama(
    "llama-3.1-8b",
    4096,
    32,
    32,
    8,
    14336,
    128256,
    131072,
    _HF + "meta-llama/Llama-3.1-8B",
    "llama3.1-8b",
)
_llama(
    "llama-3.1-70b",
    8192,
    80,
    64,
    8,
    28672,
    128256,
    131072,
    _HF + "meta-llama/Llama-3.1-70B",
    "llama3.1-70b",
)
_llama(
    "llama-3.1-405b",
    16384,
    126,
    128,
    8,
    53248,
    128256,
    131072,
    _HF + "meta-llama/Llama-3.1-405B",
    "llama3.1-405b",
    "llama-405b",
)
_llama(
    "mistral-7b",
    4096,
    32,
    32,
    8,
    14336,
    32000,
    32768,
    _HF + "mistralai/Mistral-7B-Instruct-v0.2 (no sliding window in v0.2)",
    "mistral-7b-instruct-v0.2",
)
_llama(
    "codellama-13b",
    5120,
    40,
    40,
    40,
    13824,
    32016,
    16384,
    _HF + "codellama/CodeLlama-13b-hf",
    "code-llama-13b",
)
_register(
    ModelArgs(
        name="qwen3-32b",
        d_model=5120,
        n_layers=64,
        n_heads=64,
        n_kv_heads=8,
        head_dim=128,
        d_ff=25600,
        vocab=151936,
        max_seq_len=40960,
        source=_HF + "Qwen/Qwen3-32B",
    )
)

_llama(
    "llama-3.3-70b",
    8192,
    80,
    64,
    8,
    28672,
    128256,
    131072,
    _HF + "meta-llama/Llama-3.3-70B-Instruct",
    "llama3.3-70b",
)


def _qwen3_moe(
    name: str, hf: str, d: int, layers: int, heads: int, ff: int, expert_ff: int
) -> ModelArgs:
    """Qwen3 MoE: 128 routed experts, 8 per token, no shared expert, every layer sparse,
    4 KV heads of 128, vocabulary 151,936, 40,960 positions."""
    return _register(
        ModelArgs(
            name=name,
            d_model=d,
            n_layers=layers,
            n_heads=heads,
            n_kv_heads=4,
            head_dim=128,
            d_ff=ff,
            vocab=151936,
            n_experts=128,
            top_k=8,
            d_ff_expert=expert_ff,
            max_seq_len=40960,
            source=_HF + hf,
        )
    )


_qwen3_moe("qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B", 2048, 48, 32, 6144, 768)
_qwen3_moe("qwen3-235b-a22b", "Qwen/Qwen3-235B-A22B", 4096, 94, 64, 12288, 1536)

_NEMO = (
    "aws-neuron/neuronx-nemo-megatron nemo/examples/nlp/language_modeling/gpt_{}.sh "
    "(HS, N_LAYERS, N_AH; FFN_HS = 4 HS in test.sh; GPT-2 vocabulary padded to 50304)"
)


def _gpt3(name: str, d: int, layers: int, heads: int, size: str) -> ModelArgs:
    return _register(
        ModelArgs(
            name=name,
            d_model=d,
            n_layers=layers,
            n_heads=heads,
            n_kv_heads=heads,
            d_ff=4 * d,
            vocab=50304,
            ffn="gelu",
            norm="layernorm",
            tied_embeddings=True,
            learned_pos=2048,
            bias=True,
            max_seq_len=2048,
            source=_NEMO.format(size),
        )
    )


_gpt3("gpt3-23b", 8192, 28, 64, "23b")
_gpt3("gpt3-46b", 8192, 56, 64, "46b")
_gpt3("gpt3-175b", 12288, 96, 96, "175b")

_register(
    ModelArgs(
        name="mixtral-8x7b",
        d_model=4096,
        n_layers=32,
        n_heads=32,
        n_kv_heads=8,
        d_ff=14336,
        vocab=32000,
        n_experts=8,
        top_k=2,
        d_ff_expert=14336,
        max_seq_len=32768,
        source=_HF + "mistralai/Mixtral-8x7B-v0.1",
    ),
    "mixtral",
)

_register(
    ModelArgs(
        name="mixtral-8x22b",
        d_model=6144,
        n_layers=56,
        n_heads=48,
        n_kv_heads=8,
        d_ff=16384,
        vocab=32768,
        n_experts=8,
        top_k=2,
        d_ff_expert=16384,
        max_seq_len=65536,
        source=_HF + "mistralai/Mixtral-8x22B-v0.1",
    ),
)

_GPT_OSS = (
    _HF + "openai/gpt-oss-{} (alternating 128-token sliding-window and full attention; "
    "attention biases; expert biases and attention sinks not counted)"
)


def _gpt_oss(size: str, layers: int, experts: int) -> ModelArgs:
    """GPT-OSS 20B / 120B: the two sizes differ only in depth and expert count."""
    return _register(
        ModelArgs(
            name=f"gpt-oss-{size}",
            d_model=2880,
            n_layers=layers,
            n_heads=64,
            n_kv_heads=8,
            head_dim=64,
            d_ff=2880,
            vocab=201088,
            bias=True,
            n_experts=experts,
            top_k=4,
            d_ff_expert=2880,
            sliding_window=128,
            local_layers_every=2,
            max_seq_len=131072,
            source=_GPT_OSS.format(size),
        )
    )


_gpt_oss("120b", 36, 128)
_gpt_oss("20b", 24, 32)

_register(
    ModelArgs(
        name="deepseek-v3",
        d_model=7168,
        n_layers=61,
        n_heads=128,
        n_kv_heads=128,
        head_dim=128,
        d_ff=18432,
        vocab=129280,
        n_experts=256,
        top_k=8,
        n_shared_experts=1,
        d_ff_expert=2048,
        n_dense_layers=3,
        mla=MLAArgs(
            q_lora_rank=1536,
            kv_lora_rank=512,
            qk_nope_head_dim=128,
            qk_rope_head_dim=64,
            v_head_dim=128,
        ),
        max_seq_len=131072,
        n_mtp_modules=1,
        source=_HF + "deepseek-ai/DeepSeek-V3 (num_nextn_predict_layers 1: one multi-token-"
        "prediction module, counted apart in n_mtp_params; DeepSeek-V3 report section 2.2)",
    ),
    "deepseek-v3-671b",
)

# --- encoders ---------------------------------------------------------------------------------


def _bert(name: str, d: int, layers: int, heads: int, hf: str) -> ModelArgs:
    """BERT (Devlin et al. 2019) as HF ``BertForPreTraining`` runs it: post-LN blocks, GELU FFN
    of 4d, biases, 512 learned positions, 2 token types, an embedding LayerNorm, and the masked-
    LM head (d x d transform, LayerNorm, output layer tied to the word embeddings, with bias)
    on every token. Vocabulary 30,522 (uncased WordPiece)."""
    return _register(
        ModelArgs(
            name=name,
            d_model=d,
            n_layers=layers,
            n_heads=heads,
            n_kv_heads=heads,
            d_ff=4 * d,
            vocab=30522,
            ffn="gelu",
            norm="layernorm",
            tied_embeddings=True,
            learned_pos=512,
            bias=True,
            max_seq_len=512,
            causal=False,
            type_vocab=2,
            embedding_norm=True,
            final_norm=False,
            head_transform=True,
            source=_HF + hf + " (pooler and next-sentence head not counted)",
        )
    )


_bert("bert-large", 1024, 24, 16, "google-bert/bert-large-uncased")
_bert("bert-base", 768, 12, 12, "google-bert/bert-base-uncased")

_register(
    ModelArgs(
        name="vit-base-16",
        d_model=768,
        n_layers=12,
        n_heads=12,
        n_kv_heads=12,
        d_ff=3072,
        vocab=1000,
        ffn="gelu",
        norm="layernorm",
        learned_pos=197,
        bias=True,
        max_seq_len=197,
        causal=False,
        patch_dim=3 * 16 * 16,
        head_per_token=False,
        source=_HF + "google/vit-base-patch16-224 (224 x 224 images in 16 x 16 patches: 196 "
        "patches + a class token = 197 positions; ImageNet-1k head of 1,000 classes)",
    ),
    "vit-base",
    "vit-b-16",
)


# --- draft heads derived from a target ---------------------------------------------------------

#: EAGLE-3 heads predict over a reduced vocabulary mapped onto the target's (speculators
#: ``Eagle3SpeculatorConfig``, draft_vocab_size 32,000 for the Llama-3 heads).
EAGLE3_DRAFT_VOCAB = 32000


def eagle3_head(target: ModelArgs, vocab: int = EAGLE3_DRAFT_VOCAB) -> ModelArgs:
    """An EAGLE-3 draft head for ``target`` (Li et al. 2025, arXiv 2503.01840; aws-neuron-sdk
    vllm-neuron/docs/design/speculation/speculative_decoding_design.md): one decoder layer of
    the target's width, heads and dense FFN, fed the hidden states of three target layers fused
    by a (3d x d) projection, with its own output layer over ``vocab`` tokens. (Its attention
    also reads the token embedding beside the fused state, a second d-wide input to the QKV
    projection that is not counted.)"""
    return ModelArgs(
        name=f"{target.name}-eagle3",
        d_model=target.d_model,
        n_layers=1,
        n_heads=target.n_heads,
        n_kv_heads=target.n_kv_heads,
        head_dim=target.head_dim,
        d_ff=target.d_ff,
        vocab=min(vocab, target.vocab),
        ffn=target.ffn,
        norm=target.norm,
        max_seq_len=target.max_seq_len,
        input_fusion=3,
        source=f"EAGLE-3 head derived from {target.name} (arXiv 2503.01840)",
    )


def mtp_module(target: ModelArgs) -> ModelArgs:
    """One multi-token-prediction module of ``target`` as a one-layer model (DeepSeek-V3 report
    section 2.2): the (2d x d) projection of [hidden; embedding], one block like the target's
    last ones (its MoE included), and the shared output head. Its ``n_params`` counts the
    shared embedding and head, which serving already holds."""
    if not target.n_mtp_modules:
        raise ConfigError(f"model {target.name!r} has no multi-token-prediction modules")
    return dataclasses.replace(
        target,
        name=f"{target.name}-mtp",
        n_layers=1,
        n_dense_layers=0 if target.is_moe else target.n_dense_layers,
        n_mtp_modules=0,
        input_fusion=2,
        source=f"the multi-token-prediction module of {target.name}",
    )


def model(name: str) -> ModelArgs:
    """A model preset by name or alias; the error lists the valid names."""
    return MODELS.get(name)
