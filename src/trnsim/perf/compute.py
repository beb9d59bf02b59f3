"""Compute time of ops on one rank: the ``ComputeModel`` protocol and its roofline version.

``ComputeModel.op_time(work, chip, prec)`` times one op as one rank runs it (``RankWork``: the
op's FLOPs and bytes after the parallel plan has split it, and the matmul row count). The
cluster model only talks to this protocol, so the core timing model (issue: per-op cost tables
derived from NKI kernels timed by ``trnsim.core``) can replace the roofline without touching
``train``/``infer``: a ``TableComputeModel`` would look ``work.op`` and its shape up in a table.

``RooflineComputeModel`` (the model until those tables exist), per op on one rank::

    t = max(flops / (P x e_k x rows / (rows + r_half)),        # Tensor engine, kind k
            (bytes + scores x b_s) / (B x e_hbm)               # HBM: weights, activations,
            + kv_bytes / (B x e_kv))                           #   scores, KV cache
        + t_op                                                 # fixed cost per op

P: the chip's published dense peak for the compute dtype / ranks per chip; B: HBM bandwidth /
ranks per chip (both from ``trnsim.hw``, never typed here). ``e_k``: the efficiency of matmuls
(``matmul``) or attention (``attention``); ``rows / (rows + r_half)``: small matmuls (few tokens)
fill the systolic array poorly; ``t_op``: launch/synchronisation cost per op; ``b_s``: HBM
bytes per attention score (0 for flash attention). Elementwise ops
have no Tensor-engine FLOPs, so they are HBM-bound.

On chips whose family has a GEMM efficiency surface (``trnsim.perf.gemm``: NVIDIA Hopper and
Blackwell) the small-matmul term is the surface's shape factor of the rank's matmul shape
``s(m, n, k)`` instead of ``rows / (rows + r_half)``; routed-expert (grouped) matmuls pass the
tokens of one expert as ``m`` and are further scaled by ``grouped``::

    e_matmul = matmul x s(m, n, k)            e_expert = matmul x grouped x s(m_e, n, k)

All parameters are fields of ``Efficiency``: inputs with documented defaults, fitted once
(globally, never per row) by ``trnsim.perf.calibrate`` and stored in ``FITTED`` with the
measurements they came from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from functools import lru_cache
from typing import Protocol

from trnsim.errors import ConfigError
from trnsim.hw import ChipSpec
from trnsim.perf.gemm import surface_for
from trnsim.perf.memory import head_padding, kv_padding, kv_shards
from trnsim.perf.plan import ParallelPlan
from trnsim.perf.precision import Precision, compute_dtype
from trnsim.workloads import Graph, Op, expected_experts_touched
from trnsim.workloads.graph import MATMUL_KINDS


@dataclass(frozen=True, slots=True)
class Efficiency:
    """Efficiency parameters of one software stack (fractions of hardware peaks, overheads).

    Attributes:
        matmul: fraction of the Tensor-engine peak reached by large matmuls.
        attention: fraction of the peak reached by attention (scores and P.V with softmax).
        hbm: fraction of HBM bandwidth reached streaming weights and activations.
        kv_hbm: fraction of HBM bandwidth reached reading the KV cache.
        half_rows: matmul rows (tokens) at which a matmul reaches half of ``matmul``.
        op_overhead_s: fixed time per op (kernel launch, semaphores, DMA set-up).
        comm_overlap: fraction of tensor/expert/context-parallel communication hidden under
            compute (0: on the critical path).
        dp_overlap: fraction of one micro-batch's backward pass that can hide the data-parallel
            gradient synchronisation (bucketed all-reduce overlapping the last backward).
        score_bytes: HBM bytes moved per attention score (query-key pair and head): 0 for
            flash-style kernels that keep scores on chip; an implementation that writes the
            score matrix, reads it for the softmax and again for P.V moves several times the
            fp32 score size.
        kernel_matmul: fraction of the speed of the NKI kernel in the compute tables that the
            software stack's matmuls reach (``TableComputeModel`` only; the roofline uses
            ``matmul`` and ``half_rows`` instead).
        step_overhead_s: fixed time per serving forward pass (prefill or one decode step): the
            serving stack's host work (scheduling, sampling, graph launch). Inference only.
        prefill_overhead_s: fixed time a prefill (context-encoding) pass adds beyond
            ``step_overhead_s``: the host preparing and copying the prompt, running a separate
            context-encoding graph, sampling the first token. Inference only.
        draft_step_overhead_s: fixed time of each draft step of speculative decoding beyond
            the draft's own ops and collectives (an EAGLE head or draft model invoked once per
            proposed token: its launch, hidden-state hand-over and sampling). Inference only.
        tp_overlap, ep_overlap, cp_overlap, pp_overlap: (training) the fraction of the
            tensor-, expert-, context- and pipeline-parallel communication the stack can run
            concurrently with compute. What it hides is also capped by the compute it can
            overlap (``trnsim.perf.train``): a collective longer than that compute is charged
            at least its excess. ``comm_overlap`` is the serving stacks' single fraction.
        grouped: fraction of the dense matmul efficiency that routed-expert grouped GEMMs
            reach at the same per-expert shape (1: as a dense GEMM of that shape).
        moe_sync_s: (training) host-device synchronisation per MoE layer and forward pass of
            dropless routing with the all-to-all dispatcher (the per-expert token counts are
            copied to the host to size the all-to-all; the device idles until the host has
            launched the rest of the layer). Not charged with a fixed capacity or the flex
            dispatcher (its layout stays on the device).
        expert_overhead_s: fixed time per local expert of each routed-expert matmul (a
            grouped GEMM run as one kernel per expert, as Transformer Engine's GroupedLinear
            does, pays a launch and set-up per expert).
    """

    matmul: float = 0.6
    attention: float = 0.4
    hbm: float = 0.7
    kv_hbm: float = 0.5
    half_rows: float = 32.0
    op_overhead_s: float = 5e-6
    comm_overlap: float = 0.0
    dp_overlap: float = 1.0
    score_bytes: float = 0.0
    kernel_matmul: float = 1.0
    step_overhead_s: float = 0.0
    tp_overlap: float = 0.0
    ep_overlap: float = 0.0
    cp_overlap: float = 0.0
    pp_overlap: float = 0.0
    grouped: float = 1.0
    moe_sync_s: float = 0.0
    expert_overhead_s: float = 0.0
    prefill_overhead_s: float = 0.0
    draft_step_overhead_s: float = 0.0

    def __post_init__(self) -> None:
        for f in ("matmul", "attention", "hbm", "kv_hbm", "kernel_matmul", "grouped"):
            v = getattr(self, f)
            if not 0 < v <= 1:
                raise ConfigError(f"efficiency {f} must be in (0, 1], got {v}")
        for f in OVERLAP_FIELDS:
            v = getattr(self, f)
            if not 0 <= v <= 1:
                raise ConfigError(f"efficiency {f} must be in [0, 1], got {v}")
        nonneg = (
            "half_rows",
            "op_overhead_s",
            "score_bytes",
            "step_overhead_s",
            "moe_sync_s",
            "expert_overhead_s",
            "prefill_overhead_s",
            "draft_step_overhead_s",
        )
        for f in nonneg:
            v = getattr(self, f)
            if not 0 <= v < math.inf:
                raise ConfigError(f"efficiency {f} must be finite and >= 0, got {v}")

    def as_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


OVERLAP_FIELDS = (
    "comm_overlap",
    "dp_overlap",
    "tp_overlap",
    "ep_overlap",
    "cp_overlap",
    "pp_overlap",
)


@dataclass(frozen=True, slots=True)
class Profiles:
    """One ``Efficiency`` per software stack: ``train`` (NxD / NeMo-Megatron training) and
    ``serve`` (Transformers-NeuronX inference: prefill and decode). One global set each;
    ``source`` says what they were fitted to."""

    train: Efficiency = field(default_factory=Efficiency)
    serve: Efficiency = field(default_factory=Efficiency)
    source: str = "defaults (not fitted)"


# Fitted by `trnsim validate --fit` (trnsim.perf.calibrate.fit) to calibration/trainium.md
# sections B + B2 (training: train) and C (inference TTFT and TPOT p50: serve), with the
# Tensor-engine tile padding of TP-split FFN widths (``tile_padding``) in the model. See
# benchmarks/RESULTS.md for the per-row errors these values give.
FITTED = Profiles(
    train=Efficiency(
        matmul=0.450,
        attention=0.183,
        hbm=0.999,
        kv_hbm=0.5,
        half_rows=32.0,
        op_overhead_s=5e-6,
        comm_overlap=0.0,
        dp_overlap=1.0,
    ),
    serve=Efficiency(
        matmul=0.195,
        attention=0.0522,
        hbm=0.791,
        kv_hbm=0.457,
        half_rows=1.83,
        op_overhead_s=3.14e-6,
        comm_overlap=0.010,
        dp_overlap=1.0,
        score_bytes=64.0,
    ),
    source="fitted to shared/calibration/trainium.md B + B2 (train: 20 rows, seq/s) and C "
    "(serve: 36 rows, TTFT and TPOT p50) by trnsim.perf.calibrate.fit (mean |log error|)",
)


@dataclass(frozen=True, slots=True)
class RankWork:
    """One op as one rank executes it: FLOPs, HBM bytes, KV-cache bytes, matmul rows, and
    attention scores (query-key pairs x heads).

    Matmuls also carry their shape on the rank: ``count`` products ``[m, k] x [k, n]`` (one,
    or the rank's experts for routed experts), before any tile padding (0: not a matmul)."""

    op: Op
    flops: float
    bytes: float
    kv_bytes: float
    rows: float
    scores: float = 0.0
    m: float = 0.0
    k: float = 0.0
    n: float = 0.0
    count: float = 0.0


class ComputeModel(Protocol):
    """Times one op on one rank. Implementations: ``RooflineComputeModel``; later a table
    model built from the core timing model."""

    name: str

    def op_time(self, work: RankWork, chip: ChipSpec, prec: Precision, eff: Efficiency) -> float:
        """Seconds for ``work`` on one rank of ``chip`` at precision ``prec``."""
        ...


@dataclass(frozen=True, slots=True)
class RooflineComputeModel:
    """The documented roofline (module docstring) with explicit efficiency factors."""

    ranks_per_chip: int = 1
    name: str = "roofline"

    def op_time(self, work: RankWork, chip: ChipSpec, prec: Precision, eff: Efficiency) -> float:
        peak = _peak(chip, prec.compute) / self.ranks_per_chip
        t_c = 0.0
        if work.flops:
            if work.op.kind == "attention":
                e = eff.attention
            else:
                e = eff.matmul * matmul_shape_factor(work, chip, eff)
            t_c = work.flops / (peak * e)
        t = max(t_c, memory_time(work, chip, eff, self.ranks_per_chip)) + eff.op_overhead_s
        if work.op.kind == "expert":
            t += work.count * eff.expert_overhead_s
        return t


def matmul_shape_factor(work: RankWork, chip: ChipSpec, eff: Efficiency) -> float:
    """The fraction of ``matmul`` a matmul of this shape reaches (module docstring): the chip
    family's GEMM surface where there is one (x ``grouped`` for routed experts), else the
    ``half_rows`` small-matmul term."""
    surf = surface_for(chip.family)
    if surf is not None and work.count:
        f = surf.shape_factor(work.m, work.n, work.k)
        return f * (eff.grouped if work.op.kind == "expert" else 1.0)
    if eff.half_rows:
        return work.rows / (work.rows + eff.half_rows)
    return 1.0


def memory_time(work: RankWork, chip: ChipSpec, eff: Efficiency, ranks_per_chip: int) -> float:
    """The HBM term of the roofline: weights, activations and attention scores at ``hbm`` of
    the rank's bandwidth share, the KV cache at ``kv_hbm``."""
    bw = chip.hbm_bw / ranks_per_chip
    t_m = (work.bytes + work.scores * eff.score_bytes) / (bw * eff.hbm)
    return t_m + work.kv_bytes / (bw * eff.kv_hbm)


@lru_cache(maxsize=256)
def _peak(chip: ChipSpec, dtype: str) -> float:
    return chip.peak(compute_dtype(chip, dtype)[0])


def tile_padding(width: float, tile: int) -> float:
    """FLOP inflation of a matmul whose per-rank weight dimension ``width`` is cut into
    ``tile``-wide pieces: ``ceil(width / tile) * tile / width`` (1 when ``tile`` is 0).

    The Tensor engine is a 128 x 128 systolic array: one ``nc_matmul`` takes a stationary
    operand of at most 128 (contraction) x 128 (output) elements, so every weight tile
    occupies the whole array and a dimension that is not a multiple of 128 pays for the
    padding of its last tile (NKI ISA ``nc_matmul``: K, M <= 128; the NKI matmul tutorial
    tiles both weight dimensions by 128). Tensor parallelism makes this visible: the 14,336
    FFN columns of Llama-3.1-8B over TP 32 are 448 per rank, run as 4 tiles of 128 (+14 %).
    """
    if not tile or width <= 0:
        return 1.0
    return math.ceil(width / tile - 1e-9) * tile / width


def rank_work(
    op: Op, g: Graph, plan: ParallelPlan, prec: Precision, tile: int = 0, moe_block: int = 0
) -> RankWork:
    """Split one op of graph ``g`` over the plan (see ``trnsim.workloads.graph.Shard``).

    ``tp`` ops: FLOPs, weights and activations / tp; the KV cache / min(tp, n_kv_heads) (KV
    heads are replicated beyond that; MLA's latent is not split). ``seq`` ops: / tp with
    sequence parallelism, else replicated. ``ep`` (routed experts): every rank computes its
    share of the routed tokens (FLOPs / tp); it holds E / ep experts, of which those touched by
    the ep x T x top_k assignments of its EP group are read. ``none``: replicated.

    ``tile`` (the Tensor-engine array size, 0 for none): matmul FLOPs of ops that record the
    width TP splits (``Op.tp_width``: the FFN) are inflated by ``tile_padding(tp_width / tp)``.

    ``moe_block`` (0: none): routed experts run as a blockwise matmul with a static shape, as
    NxD Inference's prefill does (``moe_blocks``): the EP group's assignments are mapped to
    ``ceil(assignments / block) + E - 1`` blocks of ``block`` rows, one expert per block, and
    every provisioned block is computed, padding included.
    """
    m = g.model
    tp = plan.tp
    w, a, kv = op.weight_elems, op.act_elems, op.kv_elems
    flops = op.flops
    rows = float(g.tokens)
    scores = op.vector_elems if op.kind == "attention" else 0.0
    if op.shard == "tp":
        pad = head_padding(m, tp) if op.name in HEAD_OPS else 1.0
        flops, w, a = flops * pad / tp, w * pad / tp, a * pad / tp
        scores = scores * pad / tp
        kv = kv * kv_padding(m, tp) / kv_shards(m, tp)
    elif op.shard == "seq":
        if plan.sequence_parallel:
            a = a / tp
    elif op.shard == "ep":
        # The EP group (``ep`` groups of ``etp`` ranks, each rank with 1/tp of the tokens: the
        # expert grid of ``ParallelPlan``) holds T x top_k x ep x etp / tp assignments; they
        # touch E(1 - (1 - k/E)^tokens) distinct experts, 1/ep of them on this rank, each split
        # over etp ranks; each touched expert runs one matmul sized by its own tokens
        # (assignments / touched), never a full kernel call for a fraction of a row. The busiest
        # rank (moe_imbalance x the mean tokens) sets the layer's time; with a capacity factor
        # c every expert's buffer is padded to c x the mean (static shapes, overflow dropped).
        E, k = m.n_experts, m.top_k
        etp = plan.expert_tp
        assignments = g.tokens * k
        group = assignments * plan.ep * etp / tp
        touched = expected_experts_touched(group, E, k)
        local = touched / plan.ep
        w = w / expected_experts_touched(assignments, E, k) * local / etp
        load = plan.moe_capacity or plan.moe_imbalance
        rows = group / touched * load  # tokens per touched expert
        if moe_block and assignments:
            blocks = moe_blocks(assignments * plan.ep, E, moe_block) / plan.ep
            flops = max(flops * load, blocks * moe_block * flops / assignments)
            rows = float(moe_block)
        else:
            flops = flops * load
        flops, a = flops / tp, a * load / tp
    shape = _matmul_shape(op, g, flops, w, rows, plan.expert_tp if op.shard == "ep" else tp)
    if op.tp_width and op.shard in ("tp", "ep"):
        flops *= tile_padding(op.tp_width / tp, tile)
    byts = w * prec.weight_bytes + a * prec.act_bytes
    return RankWork(op, flops, byts, kv * prec.kv_bytes, max(rows, 1.0), scores, *shape)


def moe_blocks(assignments: float, n_experts: int, block: int) -> float:
    """Blocks a dropless blockwise MoE matmul provisions for ``assignments`` token-expert pairs:
    ``ceil(assignments / block) + (n_experts - 1)``, enough for any routing with one expert per
    block (aws-neuron-sdk libraries/nxd-inference/developer_guides/moe-arch-deep-dive.rst,
    "Blockwise matrix multiplication solution")."""
    return math.ceil(assignments / block - 1e-9) + n_experts - 1


HEAD_OPS = frozenset({"qkv_proj", "q_proj", "kv_up", "rope", "attention", "o_proj"})
# Matmuls whose output (N) is the model width d; every other matmul of the graph reads the
# hidden state, so its contraction (K) is d (MLA's kv_up contracts over the KV latent; MLA's
# q_proj, two chained projections, is taken as one with K = d).
N_IS_D_OPS = frozenset({"o_proj", "ffn_down", "expert_down", "shared_down"})


def _matmul_shape(
    op: Op, g: Graph, flops: float, w: float, rows: float, tp: int
) -> tuple[float, float, float, float]:
    """(m, k, n, count) of a matmul op on one rank (zeros for other ops). ``flops`` and ``w``
    are the rank's FLOPs and weight elements (before tile padding); ``rows`` its tokens;
    ``tp`` the ranks one weight is split over (``etp`` for routed experts)."""
    if op.kind not in MATMUL_KINDS or not flops or not op.weight_elems:
        return 0.0, 0.0, 0.0, 0.0
    m = g.model
    if op.shard == "ep":
        per = op.flops / (2 * g.tokens * m.top_k) / tp  # one expert's weights on this rank
        mm = max(rows, 1e-9)
    else:
        per = w
        mm = flops / (2 * per)
    if op.name in N_IS_D_OPS:
        k, n = per / m.d_model, float(m.d_model)
    elif op.name == "kv_up" and m.mla:
        k = float(m.mla.kv_lora_rank)
        n = per / k
    else:
        k, n = float(m.d_model), per / m.d_model
    return mm, k, n, flops / (2 * mm * k * n)


@dataclass(frozen=True, slots=True)
class PassTime:
    """Times of one forward pass on one rank, all layers of the model (``layers``) and the
    embedding/head ends; ``by_kind`` splits ``layers`` by op kind."""

    layers: float
    pre: float
    post: float
    by_kind: tuple[tuple[str, float], ...]
    n_ops_per_layer: float

    def kind(self, *kinds: str) -> float:
        return sum(t for k, t in self.by_kind if k in kinds)


@lru_cache(maxsize=8192)
def pass_time(
    g: Graph,
    tp: int,
    ep: int,
    sequence_parallel: bool,
    ranks_per_chip: int,
    chip: ChipSpec,
    prec: Precision,
    eff: Efficiency,
    model: ComputeModel | None = None,
    moe_imbalance: float = 1.0,
    moe_block: int = 0,
    *,
    etp: int | None = None,
    moe_capacity: float = 0.0,
) -> PassTime:
    """Forward-pass time of graph ``g`` on one rank (cached: planners call it many times);
    ``moe_block``: routed experts as a blockwise matmul of that block size (``rank_work``);
    ``etp``, ``moe_capacity``: the plan's expert grid and capacity (``ParallelPlan``).

    Training graphs in a precision that quantizes matmul inputs (``Precision.quantize_bytes``:
    FP8, MXFP8) also pay one HBM-bound quantization kernel per matmul input (m x k x count
    elements), recorded as kind ``quantize`` (the backward, taken as twice the forward,
    quantizes the output gradients likewise)."""
    cm = model or RooflineComputeModel(ranks_per_chip)
    plan = rank_plan(tp, ep, sequence_parallel, ranks_per_chip, moe_imbalance, etp, moe_capacity)
    tile = chip_tile(chip)
    quant = prec.quantize_bytes if g.phase == "train" else 0.0
    by_kind: dict[str, float] = {}
    layers = 0.0
    n_ops = 0
    for grp in g.groups:
        for op in grp.ops:
            work = rank_work(op, g, plan, prec, tile, moe_block)
            t = cm.op_time(work, chip, prec, eff) * grp.count
            by_kind[op.kind] = by_kind.get(op.kind, 0.0) + t
            layers += t
            n_ops += grp.count
            if quant and work.count:
                tq = quantize_time(work, chip, eff, ranks_per_chip, quant) * grp.count
                by_kind["quantize"] = by_kind.get("quantize", 0.0) + tq
                layers += tq
                n_ops += grp.count
    pre = sum(cm.op_time(rank_work(op, g, plan, prec, tile), chip, prec, eff) for op in g.pre)
    post = sum(cm.op_time(rank_work(op, g, plan, prec, tile), chip, prec, eff) for op in g.post)
    return PassTime(layers, pre, post, tuple(sorted(by_kind.items())), n_ops / g.model.n_layers)


@lru_cache(maxsize=256)
def rank_plan(
    tp: int,
    ep: int,
    sequence_parallel: bool,
    ranks_per_chip: int,
    moe_imbalance: float = 1.0,
    etp: int | None = None,
    moe_capacity: float = 0.0,
) -> ParallelPlan:
    """The plan ``rank_work`` splits ops by (only its TP, EP, expert grid, sequence
    parallelism, ranks per chip, MoE imbalance and capacity matter for one rank's ops)."""
    return ParallelPlan(
        tp=tp,
        dp=ep * (etp or tp),
        ep=ep,
        sequence_parallel=sequence_parallel,
        ranks_per_chip=ranks_per_chip,
        moe_imbalance=moe_imbalance,
        etp=etp,
        moe_capacity=moe_capacity,
    )


def chip_tile(chip: ChipSpec) -> int:
    """Tensor-engine tile of Trainium chips (chips without a NeuronCore spec: no tile padding)."""
    return chip.core.tensor.rows if chip.core is not None else 0


def op_seconds(
    op: Op,
    g: Graph,
    plan: ParallelPlan,
    chip: ChipSpec,
    prec: Precision,
    eff: Efficiency,
    model: ComputeModel,
    moe_block: int = 0,
) -> float:
    """Seconds of one op of graph ``g`` on one rank, as ``pass_time`` times it (``plan`` from
    ``rank_plan``): for callers that re-time one op of a pass whose other ops they keep (a
    serving step's attention, the only op that depends on each sequence's context)."""
    work = rank_work(op, g, plan, prec, chip_tile(chip), moe_block)
    return model.op_time(work, chip, prec, eff)


def quantize_time(
    work: RankWork, chip: ChipSpec, eff: Efficiency, ranks_per_chip: int, bytes_per_elem: float
) -> float:
    """One quantization kernel of a matmul's input (m x k x count elements, ``bytes_per_elem``
    HBM bytes each: ``Precision.quantize_bytes``), HBM-bound, plus the fixed cost per op."""
    bw = chip.hbm_bw / ranks_per_chip
    return work.m * work.k * work.count * bytes_per_elem / (bw * eff.hbm) + eff.op_overhead_s
