"""Training estimates: step time, tokens/s, sequences/s, MFU, memory, time/cost/energy to train.

One step of ``global_batch`` sequences of ``seq_len`` tokens, on ``plan.chips`` chips of
``system``. Per micro-batch on the slowest pipeline stage (``PassTime.stage``):

- forward ``F``: the op graph of ``micro_batch`` sequences timed by the compute model, / cp
  (context parallelism splits every op's tokens; weight reads are a small part in training).
- backward ``2F``: every matmul has an input-gradient and a weight-gradient matmul of the same
  size (the 4N of 6N); elementwise and attention backward are taken as twice their forward too.
- recomputation: full adds ``F``; selective adds the attention and elementwise forward ops.
- tensor parallelism per layer (Megatron): with sequence parallelism 2 all-gathers and 2
  reduce-scatters of the micro-batch activations (tokens x d) in the forward, the same in the
  backward (and again in a full recompute); without it, 2 all-reduces each way. Expert
  parallelism: an all-to-all dispatch and combine of tokens x top_k x d per MoE layer each way.
  Context parallelism: an all-gather of K and V per layer forward, all-gather + reduce-scatter
  backward. A fraction ``comm_overlap`` of this communication is hidden under compute.
- pipeline: one activation send forward and one gradient send backward per micro-batch and
  virtual stage; 1F1B takes ``(m + pp - 1)`` micro-batch slots, interleaved ``m + (pp-1)/v``
  (Narayanan et al. 2021), so the bubble is ``(pp - 1)`` (or ``(pp-1)/v``) slots.
- data parallelism: ZeRO-0 all-reduces the gradients; ZeRO-1/2 reduce-scatter the gradients
  and all-gather the updated weights; ZeRO-3 (FSDP) all-gathers the weights in every forward
  and backward and reduce-scatters gradients per micro-batch. Up to ``dp_overlap`` x one
  micro-batch backward (ZeRO-3: of all compute) hides it.
- optimizer: an HBM-bound pass over the rank's optimizer shard (read and write master
  weights and Adam moments, read gradients, write weights).

All collective times come from ``trnsim.fabric`` through ``trnsim.perf.comm``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trnsim import inputs
from trnsim.errors import ConfigError
from trnsim.hw import SystemSpec
from trnsim.hw import system as lookup_system
from trnsim.perf import comm
from trnsim.perf.compute import ComputeModel, Efficiency, pass_time
from trnsim.perf.cost import CostEstimate, CostInputs, run_cost
from trnsim.perf.memory import (
    DEFAULT_MEMORY,
    MemoryBreakdown,
    MemoryParams,
    params_per_rank,
    train_memory,
)
from trnsim.perf.plan import ParallelPlan
from trnsim.perf.precision import Precision, compute_dtype, precision
from trnsim.perf.stacks import SoftwareStack, resolve_stack
from trnsim.perf.table_model import default_model
from trnsim.workloads import ModelArgs, forward_graph, resolve_model, train_flops_per_token


@dataclass(frozen=True, slots=True)
class TrainEstimate:
    """A training estimate. Times in seconds, rates per second, memory in bytes per rank."""

    model: str
    system: str
    chips: int
    plan: ParallelPlan
    precision: str
    global_batch: int
    seq_len: int
    micro_batches: int
    step_time_s: float
    tokens_per_s: float
    seq_per_s: float
    mfu: float
    mfu_6n: float
    memory: MemoryBreakdown
    breakdown: dict[str, float]
    tokens_to_train: float | None
    time_to_train_s: float | None
    cost: CostEstimate | None
    assumptions: list[str] = field(default_factory=list)
    stack: str = ""

    @property
    def fits(self) -> bool:
        return self.memory.fits

    def as_dict(self) -> dict[str, Any]:
        """SI units throughout; keys documented in the README."""
        return {
            "model": self.model,
            "system": self.system,
            "stack": self.stack,
            "chips": self.chips,
            "plan": {
                "tp": self.plan.tp,
                "pp": self.plan.pp,
                "dp": self.plan.dp,
                "ep": self.plan.ep,
                "cp": self.plan.cp,
                "micro_batch": self.plan.micro_batch,
                "zero": self.plan.zero,
                "recompute": self.plan.recompute,
                "sequence_parallel": self.plan.sequence_parallel,
                "schedule": self.plan.schedule,
                "chunks": self.plan.chunks,
                "ranks_per_chip": self.plan.ranks_per_chip,
            },
            "precision": self.precision,
            "global_batch": self.global_batch,
            "seq_len": self.seq_len,
            "micro_batches": self.micro_batches,
            "fits": self.fits,
            "step_time_s": self.step_time_s,
            "tokens_per_s": self.tokens_per_s,
            "seq_per_s": self.seq_per_s,
            "mfu": self.mfu,
            "mfu_6n": self.mfu_6n,
            "memory_per_chip_bytes": self.memory.total * self.plan.ranks_per_chip,
            "memory_per_rank": self.memory.as_dict(),
            "breakdown_s": self.breakdown,
            "tokens_to_train": self.tokens_to_train,
            "time_to_train_s": self.time_to_train_s,
            "cost": self.cost.as_dict() if self.cost else None,
            "assumptions": self.assumptions,
        }


# The default global batch: at least DEFAULT_GLOBAL_BATCH sequences, and at least
# DEFAULT_TOKENS_PER_CHIP tokens per chip on large systems. Llama 3 405B trained with 16M tokens
# per step on 16,384 H100s, 1,024 tokens per GPU ("The Llama 3 Herd of Models",
# arXiv:2407.21783, Table 4); a fixed 1,024 sequences on 24,576 GPUs leaves each data-parallel
# rank a fraction of a micro-batch and the step is pipeline bubble and gradient sync.
DEFAULT_GLOBAL_BATCH = 1024
DEFAULT_TOKENS_PER_CHIP = 1024


def default_global_batch(chips: int, seq_len: int) -> int:
    """Sequences per step when the user gives none: 1,024, or, when chips x 1,024 tokens /
    seq_len is more, the smallest chips x 2^e (e may be negative while it divides the chips)
    at least that, so that the data-parallel degree of every plan of tp x pp x dp = chips with
    enough powers of two in tp x pp divides it; see above."""
    want = -(-chips * DEFAULT_TOKENS_PER_CHIP // seq_len)
    if want <= DEFAULT_GLOBAL_BATCH:
        return DEFAULT_GLOBAL_BATCH
    gb = chips
    while gb % 2 == 0 and gb // 2 >= want:
        gb //= 2
    while gb < want:
        gb *= 2
    return gb


def default_global_batch_note(chips: int, seq_len: int) -> str:
    gb = default_global_batch(chips, seq_len)
    return (
        f"global batch: {gb:,} sequences (default: {DEFAULT_GLOBAL_BATCH:,}, or "
        f"{DEFAULT_TOKENS_PER_CHIP:,} tokens per chip when that is more, as Llama 3 405B's 16M "
        "tokens on 16,384 GPUs, rounded up to chips x a power of two; --global-batch sets it)"
    )


def _resolve_system(system: SystemSpec | str) -> SystemSpec:
    return system if isinstance(system, SystemSpec) else lookup_system(system)


def estimate_training(
    model: ModelArgs | str,
    system: SystemSpec | str,
    plan: ParallelPlan,
    *,
    global_batch: int,
    seq_len: int,
    precision_name: str | Precision = "bf16",
    eff: Efficiency | None = None,
    compute_model: ComputeModel | None = None,
    memory_params: MemoryParams = DEFAULT_MEMORY,
    cost_inputs: CostInputs | None = None,
    tokens_to_train: float | None = None,
    validate: bool = True,
    stack: str | SoftwareStack | None = None,
) -> TrainEstimate:
    """Estimate one training step of ``model`` on ``plan.chips`` chips of ``system``.

    ``compute_model`` defaults to ``table_model.default_model`` (the kernel tables for
    Trainium chips, the roofline otherwise) and ``eff`` to that model's fitted training
    profile (``table_model.profiles_for``).
    Raises ``ConfigError`` for an invalid plan; an over-capacity plan is estimated but
    ``fits`` is False and the memory breakdown says by how much.
    """
    m = resolve_model(model)
    sysm = _resolve_system(system)
    prec = precision(precision_name)
    chips = plan.chips
    if validate:
        inputs.check_training(
            m, global_batch=global_batch, seq_len=seq_len, tokens_to_train=tokens_to_train
        )
        plan.check_model(m)
    micro_batches = plan.check_batch(global_batch, seq_len)
    chip = sysm.chip
    dtype, dtype_note = compute_dtype(chip, prec.compute)
    rpc = plan.ranks_per_chip
    cm = compute_model or default_model(chip, rpc)
    sw = resolve_stack(stack, chip, "train")
    stack_line = sw.describe() if eff is None else f"stack: {sw.name} with a given efficiency"
    eff = eff or sw.profile(cm)

    g = forward_graph(m, plan.micro_batch, seq_len, phase="train")
    pt = pass_time(
        g, plan.tp, plan.ep, plan.sequence_parallel, rpc, chip, prec, eff, cm, plan.moe_imbalance
    )
    stage_frac = -(-m.n_layers // plan.pp) / m.n_layers
    fwd = pt.stage(m, plan) / plan.cp
    bwd = 2 * fwd
    if plan.recompute == "full":
        recompute = fwd
    elif plan.recompute == "selective":
        recompute = pt.kind("attention", "vector") * stage_frac / plan.cp
    else:
        recompute = 0.0

    # --- per-micro-batch communication of one stage -----------------------------------------
    stage_layers = -(-m.n_layers // plan.pp)
    moe_layers = -(-m.n_moe_layers // plan.pp) if m.is_moe else 0
    tokens = plan.micro_batch * seq_len / plan.cp
    act = tokens * m.d_model * prec.act_bytes
    fwd_passes = 2 if plan.recompute == "full" else 1  # forward collectives run again
    tp_c = 0.0
    if plan.tp > 1:
        if plan.sequence_parallel:
            per = comm.tp_time("all-gather", act, plan, sysm) + comm.tp_time(
                "reduce-scatter", act, plan, sysm
            )
        else:
            per = comm.tp_time("all-reduce", act, plan, sysm)
        tp_c = 2 * per * (fwd_passes + 1) * stage_layers
    ep_c = 0.0
    if m.is_moe and plan.ep > 1:
        a2a = comm.moe_dispatch_bytes(tokens, m.top_k, m.d_model, prec.act_bytes, plan)
        ep_c = 2 * comm.ep_time("all-to-all", a2a, plan, sysm) * (fwd_passes + 1) * moe_layers
    cp_c = 0.0
    if plan.cp > 1:
        kv = plan.micro_batch * seq_len * 2 * m.kv_dim * prec.act_bytes / plan.tp
        ag = comm.cp_time("all-gather", kv, plan, sysm)
        cp_c = ag * fwd_passes + ag + comm.cp_time("reduce-scatter", kv, plan, sysm)
        cp_c *= stage_layers
    exposed = (tp_c + ep_c + cp_c) * (1 - eff.comm_overlap)
    p2p = 0.0
    if plan.pp > 1:
        send = act / (plan.tp if plan.sequence_parallel else 1)
        p2p = 2 * plan.chunks * comm.pp_time(send, plan, sysm)
    t_mb = fwd + bwd + recompute + exposed + p2p

    # --- pipeline -------------------------------------------------------------------------
    if plan.schedule == "interleaved":
        slots = micro_batches + (plan.pp - 1) / plan.chunks
    else:
        slots = micro_batches + plan.pp - 1
    t_pipe = slots * t_mb
    bubble = (slots - micro_batches) * t_mb

    # --- data parallelism and optimizer --------------------------------------------------------
    dense, experts = params_per_rank(m, plan)
    n_rank = dense + experts
    grads = n_rank * prec.grad_bytes
    weights = n_rank * prec.weight_bytes
    shard = plan.dp * plan.cp
    if plan.zero == 0:
        t_dp = comm.dp_time("all-reduce", grads, plan, sysm)
        exposed_dp = max(0.0, t_dp - eff.dp_overlap * bwd)
    elif plan.zero in (1, 2):
        t_dp = comm.dp_time("reduce-scatter", grads, plan, sysm) + comm.dp_time(
            "all-gather", weights, plan, sysm
        )
        exposed_dp = max(0.0, t_dp - eff.dp_overlap * bwd)
    else:
        per_mb = 2 * comm.dp_time("all-gather", weights, plan, sysm) + comm.dp_time(
            "reduce-scatter", grads, plan, sysm
        )
        t_dp = per_mb * micro_batches
        exposed_dp = max(0.0, t_dp - eff.dp_overlap * micro_batches * (fwd + bwd))
    opt_shard = shard if plan.zero >= 1 else 1
    opt_bytes = (
        n_rank
        / opt_shard
        * (2 * (prec.master_bytes + prec.optimizer_bytes) + prec.grad_bytes + prec.weight_bytes)
    )
    t_opt = opt_bytes / (chip.hbm_bw / rpc * eff.hbm)
    step = t_pipe + exposed_dp + t_opt

    # --- rates ----------------------------------------------------------------------------------
    tokens_step = global_batch * seq_len
    tok_s = tokens_step / step
    peak = chips * chip.peak(dtype)
    mfu = tok_s * train_flops_per_token(m, seq_len) / peak
    mfu_6n = tok_s * 6 * m.n_matmul_params_active / peak
    mem = train_memory(m, plan, chip, seq_len, micro_batches, prec, memory_params)

    ttt = cost = None
    if tokens_to_train:
        ttt = tokens_to_train / tok_s
        cost = run_cost(chip, chips, ttt, cost_inputs or CostInputs())
    breakdown = {
        "forward": fwd * micro_batches,
        "backward": bwd * micro_batches,
        "recompute": recompute * micro_batches,
        "tp_comm": tp_c * micro_batches,
        "ep_comm": ep_c * micro_batches,
        "cp_comm": cp_c * micro_batches,
        "comm_exposed": exposed * micro_batches,
        "pp_p2p": p2p * micro_batches,
        "pp_bubble": bubble,
        "dp_comm": t_dp,
        "dp_comm_exposed": exposed_dp,
        "optimizer": t_opt,
    }
    assumptions = [
        f"compute: {cm.name} model, efficiency "
        + ", ".join(f"{k}={v:g}" for k, v in eff.as_dict().items()),
        stack_line,
        f"peak: {chip.name} {dtype} {chip.peak(dtype) / 1e12:.0f} TFLOP/s per chip"
        + (f" ({dtype_note})" if dtype_note else ""),
        f"collectives: trnsim.fabric closed forms on {sysm.name} (TP packed, DP/PP strided)",
        "mfu counts 6N + causal attention FLOPs; mfu_6n counts 6N only",
        prec.training_state(),
    ]
    if rpc > 1:
        assumptions.append(f"{rpc} ranks per chip (each rank gets 1/{rpc} of a chip)")
    if not mem.fits:
        assumptions.insert(0, "OVER CAPACITY: " + mem.explain())
    inputs.check_finite(
        "training estimate",
        step_time_s=step,
        time_to_train_s=ttt,
        cost_usd=cost.usd if cost else None,
        energy_j=cost.energy_j if cost else None,
    )
    return TrainEstimate(
        model=m.name,
        system=sysm.name,
        chips=chips,
        plan=plan,
        precision=prec.name,
        global_batch=global_batch,
        seq_len=seq_len,
        micro_batches=micro_batches,
        step_time_s=step,
        tokens_per_s=tok_s,
        seq_per_s=global_batch / step,
        mfu=mfu,
        mfu_6n=mfu_6n,
        memory=mem,
        breakdown=breakdown,
        tokens_to_train=tokens_to_train,
        time_to_train_s=ttt,
        cost=cost,
        assumptions=assumptions,
        stack=sw.name,
    )


def plan_for_chips(
    chips: int, tp: int = 1, pp: int = 1, dp: int | None = None, **kw: Any
) -> ParallelPlan:
    """A plan whose DP degree fills ``chips`` (x ranks_per_chip) ranks when ``dp`` is None."""
    rpc = kw.get("ranks_per_chip", 1)
    cp = kw.get("cp", 1)
    ranks = chips * rpc
    if dp is None:
        if ranks % (tp * pp * cp):
            raise ConfigError(
                f"plan: chips({chips}) x ranks_per_chip({rpc}) = {ranks} is not divisible by "
                f"tp({tp}) * pp({pp}) * cp({cp}) = {tp * pp * cp}"
            )
        dp = ranks // (tp * pp * cp)
    plan = ParallelPlan(tp=tp, pp=pp, dp=dp, **kw)
    plan.check_chips(chips)
    return plan
