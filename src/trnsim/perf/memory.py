"""Memory per rank: weights, gradients, optimizer state, activations, KV cache, checked
against the rank's share of HBM. An over-capacity plan is reported as such (``fits`` is False
and ``explain()`` says by how much), never silently estimated.

Derivations:

- **Parameters per rank.** A pipeline stage holds ``ceil(L / pp)`` layers; non-expert weights
  of a layer are split over TP, routed-expert weights over TP x EP. The embedding (first stage)
  and LM head (last stage) are vocabulary-parallel over TP; the worst stage carries the larger
  of the two (both when pp = 1).
- **Training state** (ZeRO, Rajbhandari et al. 2020): weights ``w`` bytes, gradients ``g``,
  fp32 master + Adam moments ``m + o`` per parameter; ZeRO-1 shards ``m + o`` over the DP x CP
  ranks, ZeRO-2 also ``g``, ZeRO-3 (FSDP) also ``w`` and keeps two gathered layers (the current
  one and a prefetch).
- **Activations** (Korthikanti et al. 2022, "Reducing Activation Recomputation", Table 2,
  generalised to GQA/SwiGLU/MoE and flash attention, which stores no s x s scores). Per token
  and layer the backward needs: the two norm inputs and outputs (4 d, split over TP only with
  sequence parallelism), Q, K, V and the attention output (q + 2 kv + o), the FFN up/gate
  outputs and the activation output ((2 or 1) f + f; x top_k for routed experts). Selective
  recomputation drops the cheap-to-recompute ones (norm outputs, activation output, attention
  output); full recomputation keeps only each layer's input (d per token) plus one layer's
  full set while it is recomputed. The 1F1B schedule keeps ``min(pp, m)`` micro-batches in
  flight on the first stage; interleaving multiplies that by ``1 + (pp - 1) / (pp x chunks)``
  (Narayanan et al. 2021). The last stage also holds fp32 logits for the loss.
- **KV cache**: batch x cached tokens x KV elements per token (``ModelArgs.kv_cache_elems``),
  split over min(tp, n_kv_heads) ranks for GQA (KV heads are replicated beyond that) and not
  split for MLA (one shared latent), and over pipeline stages.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from trnsim.hw import ChipSpec
from trnsim.perf.plan import ParallelPlan
from trnsim.perf.precision import Precision
from trnsim.workloads import ModelArgs


@dataclass(frozen=True, slots=True)
class MemoryParams:
    """Inputs of the memory model with their defaults.

    ``reserved_fraction``: HBM kept by the runtime, collectives buffers and fragmentation
    (default 0.05, an assumption; frameworks typically lose 3-10%).
    ``logit_bytes``: bytes per logit held for the loss (fp32: 4).
    """

    reserved_fraction: float = 0.05
    logit_bytes: float = 4.0


DEFAULT_MEMORY = MemoryParams()


@dataclass(frozen=True, slots=True)
class MemoryBreakdown:
    """Bytes per rank by kind, and the rank's usable HBM."""

    weights: float
    gradients: float
    optimizer: float
    activations: float
    kv_cache: float
    capacity: float
    reserved: float

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.activations + self.kv_cache

    @property
    def usable(self) -> float:
        return self.capacity - self.reserved

    @property
    def fits(self) -> bool:
        return self.total <= self.usable

    @property
    def utilization(self) -> float:
        return self.total / self.capacity

    def explain(self) -> str:
        gb = 1e9
        parts = ", ".join(
            f"{f.name} {getattr(self, f.name) / gb:.1f} GB"
            for f in fields(self)
            if f.name not in ("capacity", "reserved") and getattr(self, f.name)
        )
        verdict = (
            "fits"
            if self.fits
            else f"DOES NOT FIT (over by {(self.total - self.usable) / gb:.1f} GB)"
        )
        return (
            f"{self.total / gb:.1f} GB per rank of {self.usable / gb:.1f} GB usable "
            f"({self.capacity / gb:.1f} GB HBM less {self.reserved / gb:.1f} GB reserved): "
            f"{verdict}; {parts}"
        )

    def as_dict(self) -> dict[str, float | bool]:
        d: dict[str, float | bool] = {f.name: getattr(self, f.name) for f in fields(self)}
        d.update(total=self.total, usable=self.usable, fits=self.fits)
        return d


def layers_per_stage(m: ModelArgs, plan: ParallelPlan) -> int:
    """Layers of the largest pipeline stage (``ParallelPlan.stage_layers``)."""
    return max(plan.stage_layers(m))


def _stage_params(
    m: ModelArgs, plan: ParallelPlan, stage: int, mtp: bool = False
) -> tuple[float, float]:
    """(non-expert, routed-expert) parameters held by one rank of pipeline stage ``stage``
    (``mtp``: the multi-token-prediction modules on the last stage, with the head)."""
    layers = plan.stage_layers(m)[stage]
    expert_per_layer = m.expert_params_total / m.n_layers
    other_per_layer = m.layer_params / m.n_layers - expert_per_layer
    head = m.head_params + (m.n_mtp_params if mtp else 0)
    if plan.pp == 1:
        ends = m.embedding_params + head
    else:
        ends = (m.embedding_params if stage == 0 else 0) + (head if stage == plan.pp - 1 else 0)
    dense = (layers * other_per_layer + ends) / plan.tp
    experts = layers * expert_per_layer / (plan.expert_tp * plan.ep)
    return dense, experts


def params_per_rank(m: ModelArgs, plan: ParallelPlan, mtp: bool = False) -> tuple[float, float]:
    """(non-expert, routed-expert) parameters held by one rank of the stage that holds the
    most. Non-expert weights are split over TP; routed experts over expert-TP x EP (``etp x
    ep``, ``ParallelPlan.expert_tp``). ``mtp`` (training): the multi-token-prediction modules
    sit with the head on the last stage."""
    return max(
        (_stage_params(m, plan, i, mtp) for i in plan.distinct_stages(m)),
        key=lambda de: de[0] + de[1],
    )


def rank_capacity(chip: ChipSpec, plan: ParallelPlan) -> float:
    return chip.hbm_bytes / plan.ranks_per_chip


def kv_shards(m: ModelArgs, tp: int) -> int:
    """Ranks a layer's KV cache is split over: min(tp, n_kv_heads) for GQA, 1 for MLA."""
    return 1 if m.mla else min(tp, m.n_kv_heads)


def head_padding(m: ModelArgs, tp: int) -> float:
    """Padded / real heads when n_heads is not a multiple of tp: ceil(h / tp) x tp / h."""
    return math.ceil(m.n_heads / tp) * tp / m.n_heads


def kv_padding(m: ModelArgs, tp: int) -> float:
    """The same for KV heads split over min(tp, n_kv_heads) ranks (1 for MLA)."""
    if m.mla:
        return 1.0
    shards = kv_shards(m, tp)
    return math.ceil(m.n_kv_heads / shards) * shards / m.n_kv_heads


def activation_elems_per_token_layer(m: ModelArgs, plan: ParallelPlan) -> float:
    """Saved activation elements per token per layer on one rank (see module docstring)."""
    gemm, other = saved_activation_elems(m, plan)
    return gemm + other


def saved_activation_elems(m: ModelArgs, plan: ParallelPlan) -> tuple[float, float]:
    """Saved activation elements per token per layer on one rank, split into (matmul inputs,
    the rest): matmul inputs are saved in their quantized form in low-precision training
    (``Precision.saved_gemm_bytes``). Matmul inputs: the two norm outputs (inputs of the QKV and
    FFN-up projections), the activation output (input of the down projection) and, in MoE
    layers, the permuted tokens entering the routed experts (top_k x d). The rest: the two norm
    inputs, Q, K, V and the attention output (flash attention's backward reads them), the FFN
    up/gate outputs and, in MoE layers, the routed experts' outputs (top_k x d, read by the
    backward of the probability-weighted combine)."""
    tp, sp = plan.tp, plan.sequence_parallel
    seq_div = tp if sp else 1
    gated = 2 if m.ffn == "swiglu" else 1
    if m.is_moe:
        moe_frac = m.n_moe_layers / m.n_layers
        f_eff = (1 - moe_frac) * m.d_ff + moe_frac * m.d_ff_expert * (m.top_k + m.n_shared_experts)
        routed = moe_frac * m.top_k * m.d_model  # permuted inputs, and again the outputs
    else:
        f_eff = m.d_ff
        routed = 0.0
    qkv = m.q_dim + 2 * (m.kv_dim if not m.mla else m.mla.kv_lora_rank)
    if plan.recompute == "full":
        return 0.0, m.d_model / seq_div
    if plan.recompute == "selective":
        return routed / tp, 2 * m.d_model / seq_div + (qkv + gated * f_eff + routed) / tp
    gemm = 2 * m.d_model / seq_div + (f_eff + routed) / tp
    other = 2 * m.d_model / seq_div + (qkv + m.attn_out_dim + gated * f_eff + routed) / tp
    return gemm, other


def activation_bytes_per_token_layer(m: ModelArgs, plan: ParallelPlan, prec: Precision) -> float:
    """Saved activation bytes per token per layer on one rank of a training step."""
    gemm, other = saved_activation_elems(m, plan)
    return gemm * prec.saved_gemm_elem_bytes + other * prec.act_bytes


def train_memory(
    m: ModelArgs,
    plan: ParallelPlan,
    chip: ChipSpec,
    seq_len: int,
    micro_batches: int,
    prec: Precision,
    params: MemoryParams = DEFAULT_MEMORY,
) -> MemoryBreakdown:
    """Memory per rank of a training step: the pipeline stage that needs the most (each
    stage holds its own layers' weights and state, the first the embedding, the last the head
    and the fp32 logits; stage i keeps ``min(pp - i, m)`` micro-batches in flight under 1F1B)."""
    return max(
        (
            _stage_memory(m, plan, chip, seq_len, micro_batches, prec, params, i)
            for i in plan.distinct_stages(m)
        ),
        key=lambda mb: mb.total,
    )


def _stage_memory(
    m: ModelArgs,
    plan: ParallelPlan,
    chip: ChipSpec,
    seq_len: int,
    micro_batches: int,
    prec: Precision,
    params: MemoryParams,
    stage: int,
) -> MemoryBreakdown:
    dense, experts = _stage_params(m, plan, stage, mtp=True)
    n = dense + experts
    shard = plan.dp * plan.cp
    eshard = plan.expert_dp
    w = n * prec.weight_bytes
    if plan.zero >= 3:
        layer = (m.layer_params / m.n_layers) / plan.tp * prec.weight_bytes
        w = (dense / shard + experts / eshard) * prec.weight_bytes + 2 * layer
    g = dense / (shard if plan.zero >= 2 else 1) + experts / (eshard if plan.zero >= 2 else 1)
    g *= prec.grad_bytes
    o = dense / (shard if plan.zero >= 1 else 1) + experts / (eshard if plan.zero >= 1 else 1)
    o *= prec.master_bytes + prec.optimizer_bytes
    tokens = plan.micro_batch * seq_len / plan.cp
    layers = plan.stage_layers(m)[stage]
    # Full recomputation of only ``recompute_layers`` layers (block method): the others keep
    # every activation.
    rc_layers = (
        layers
        if plan.recompute != "full" or not plan.recompute_layers
        else min(layers, plan.recompute_layers)
    )
    keep = plan if plan.recompute != "full" else plan.replace(recompute="none", recompute_layers=0)
    per_full = activation_bytes_per_token_layer(m, keep, prec) * tokens
    per_rc = (
        activation_bytes_per_token_layer(m, plan, prec) * tokens
        if plan.recompute == "full"
        else per_full
    )
    n_rc = rc_layers if plan.recompute == "full" else 0
    per_mb = per_rc * n_rc + per_full * (layers - n_rc)
    if plan.offload_layers:
        # the offloaded layers' activations live in host memory between forward and backward
        off = min(plan.offload_layers, layers)
        per_mb -= off * (per_rc if off <= n_rc else per_full)
    inflight = min(plan.pp - stage, micro_batches)
    if plan.schedule == "interleaved":
        inflight *= 1 + (plan.pp - 1) / (plan.pp * plan.chunks)
    act = max(per_mb, 0.0) * inflight
    if plan.recompute == "full":  # one layer's full working set while it is recomputed
        act += activation_elems_per_token_layer(m, keep) * tokens * prec.act_bytes
    if stage == plan.pp - 1:
        act += tokens * m.vocab / plan.tp * params.logit_bytes
    cap = rank_capacity(chip, plan)
    return MemoryBreakdown(w, g, o, act, 0.0, cap, cap * params.reserved_fraction)


def infer_memory(
    m: ModelArgs,
    plan: ParallelPlan,
    chip: ChipSpec,
    batch: int,
    context: int,
    prefill_tokens: int,
    prec: Precision,
    params: MemoryParams = DEFAULT_MEMORY,
) -> MemoryBreakdown:
    """Memory per rank when serving ``batch`` sequences of up to ``context`` tokens: weights,
    KV cache, and the prefill working set (one layer's activations for ``prefill_tokens``
    tokens per sequence, plus the last tokens' logits)."""
    dense, experts = params_per_rank(m, plan)
    w = (dense + experts) * prec.weight_bytes
    kv = batch * m.kv_cache_elems(context) * prec.kv_bytes / plan.pp
    kv *= kv_padding(m, plan.tp) / kv_shards(m, plan.tp)
    work_plan = plan.replace(recompute="none", sequence_parallel=False)
    act = activation_elems_per_token_layer(m, work_plan) * batch * prefill_tokens * prec.act_bytes
    act += batch * m.vocab / plan.tp * params.logit_bytes
    cap = rank_capacity(chip, plan)
    return MemoryBreakdown(w, 0.0, 0.0, act, kv, cap, cap * params.reserved_fraction)
