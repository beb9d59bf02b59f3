"""Training estimates: step time, tokens/s, sequences/s, MFU, memory, time/cost/energy to train.

One step of ``global_batch`` sequences of ``seq_len`` tokens, on ``plan.chips`` chips of
``system`` (``step_model``). Per micro-batch and pipeline stage (``StageTimes``; stage i holds
``plan.stage_layers(m)[i]`` layers, the first the embedding, the last the LM head and loss):

- forward ``F``: the op graph of ``micro_batch`` sequences timed by the compute model, / cp
  (context parallelism splits every op's tokens; weight reads are a small part in training).
  MoE layers run their own operators (router, top-k, permute, grouped expert GEMMs,
  unpermute: ``trnsim.workloads.graph``); FP8/MXFP8 add a quantization kernel per matmul input.
- backward ``2F``: every matmul has an input-gradient and a weight-gradient matmul of the same
  size (the 4N of 6N); elementwise and attention backward are taken as twice their forward too.
- recomputation: full adds the layers' ``F`` (``recompute_layers`` of them per stage when
  given); selective adds the attention and elementwise forward ops.
- communication per layer: tensor parallelism (Megatron), with sequence parallelism 2
  all-gathers and 2 reduce-scatters of the micro-batch activations (tokens x d) in the forward,
  the same in the backward (and in a recomputed forward), without it 2 all-reduces each way;
  expert parallelism, an all-to-all dispatch and combine per MoE layer and pass over the EP
  group (``etp``-strided; one copy per routed expert, or per destination rank with the flex
  dispatcher); context parallelism, an all-gather of K and V per forward, all-gather +
  reduce-scatter in the backward; pipeline sends, one activation forward and one gradient
  backward per micro-batch and virtual stage.
- **overlap as time** (``hide``): each kind k hides at most ``eff.<k>_overlap`` of itself (the
  stack's stated capability, ``SoftwareStack.overlap``) and at most the compute it can run
  under: TP the stage's matmuls, CP its attention, EP the whole micro-batch's compute only with
  ``moe_a2a_overlap`` (Megatron's 1F1B all-to-all overlap; otherwise nothing), PP sends the
  micro-batch's compute; all kinds together at most the compute there is. So a collective
  longer than the compute it overlaps is charged at least its excess.
- dropless MoE with the all-to-all dispatcher: ``eff.moe_sync_s`` per MoE layer forward (the
  host synchronisation on the per-expert token counts and the launches it exposes).
- pipeline: the slowest stage's time ``t_max`` sets the steady state, the other stages' time
  the fill and drain, divided over the virtual stages: ``m x t_max + (sum t - t_max) / v``
  (even stages: ``(m + (pp - 1) / v)`` slots, Narayanan et al. 2021).
- data parallelism (per step): ZeRO-0 all-reduces the gradients under the last micro-batch's
  backward; ZeRO-1/2 reduce-scatter them there and all-gather the updated weights under the
  next step's first forward (``dp_overlap`` of each); non-expert tensors over the DP x CP
  group, routed experts over the expert-DP group. ZeRO-3 (FSDP) gathers each layer's weights in
  the forward and backward and reduce-scatters its gradients per micro-batch, each prefetched
  one layer ahead under the previous layer's compute; the step's first gather is exposed.
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
from trnsim.perf.compute import ComputeModel, Efficiency, PassTime, pass_time
from trnsim.perf.cost import CostEstimate, CostInputs, run_cost
from trnsim.perf.memory import (
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
    stage_layers: tuple[int, ...] = ()

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
                "etp": self.plan.expert_tp,
                "moe_capacity": self.plan.moe_capacity,
                "moe_dispatcher": self.plan.moe_dispatcher,
                "moe_a2a_overlap": self.plan.moe_a2a_overlap,
                "offload_layers": self.plan.offload_layers,
                "recompute_layers": self.plan.recompute_layers,
                "stage_layers": list(self.stage_layers),
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


@dataclass(frozen=True, slots=True)
class StageTimes:
    """One pipeline stage's times for one micro-batch (seconds). ``comm`` and ``hidden``: the
    communication of each kind (tp, ep, cp, pp) and how much of it compute hides."""

    layers: int
    forward: float
    backward: float
    recompute: float
    comm: tuple[tuple[str, float], ...]
    hidden: tuple[tuple[str, float], ...]
    moe_sync: float
    fsdp_comm: float
    fsdp_exposed: float
    exposed: float  # communication not hidden: sum(comm) - sum(hidden)
    total: float  # compute + exposed + moe_sync + fsdp_exposed

    @property
    def compute(self) -> float:
        return self.forward + self.backward + self.recompute

    def comm_of(self, kind: str) -> float:
        return dict(self.comm).get(kind, 0.0)


@dataclass(frozen=True, slots=True)
class StepTimes:
    """A training step: per-stage micro-batch times, the pipeline, data parallelism and the
    optimizer (``step_model``)."""

    stages: tuple[StageTimes, ...]
    micro_batches: int
    chunks: int
    pipeline_s: float
    dp_comm: float
    dp_exposed: float
    optimizer: float

    @property
    def step_s(self) -> float:
        return self.pipeline_s + self.dp_exposed + self.optimizer

    @property
    def slowest(self) -> StageTimes:
        return max(self.stages, key=lambda st: st.total)

    def breakdown(self) -> dict[str, float]:
        """Seconds per step by cause, for the slowest stage (plus the pipeline bubble, data
        parallelism and the optimizer)."""
        st, mb = self.slowest, self.micro_batches
        return {
            "forward": st.forward * mb,
            "backward": st.backward * mb,
            "recompute": st.recompute * mb,
            "tp_comm": st.comm_of("tp") * mb,
            "ep_comm": st.comm_of("ep") * mb,
            "cp_comm": st.comm_of("cp") * mb,
            "pp_p2p": st.comm_of("pp") * mb,
            "comm_exposed": st.exposed * mb,
            "moe_sync": st.moe_sync * mb,
            "fsdp_comm": st.fsdp_comm * mb,
            "fsdp_exposed": st.fsdp_exposed * mb,
            "pp_bubble": self.pipeline_s - st.total * mb,
            "dp_comm": self.dp_comm,
            "dp_comm_exposed": self.dp_exposed,
            "optimizer": self.optimizer,
        }


def hide(
    comm: dict[str, float], cap: dict[str, float], window: dict[str, float], compute: float
) -> dict[str, float]:
    """How much of each communication kind compute hides: at most the stack's fraction of it
    (``cap``, already multiplied out), at most the compute it can overlap (``window``), and
    all kinds together at most the compute there is (``compute``): every kind's hidden time
    is scaled down if they would need more. So a collective longer than the compute it
    overlaps is charged at least its excess."""
    hidden = {k: max(0.0, min(comm[k], cap.get(k, 0.0), window.get(k, 0.0))) for k in comm}
    total = sum(hidden.values())
    if total > compute > 0:
        hidden = {k: v * compute / total for k, v in hidden.items()}
    elif compute <= 0:
        hidden = dict.fromkeys(comm, 0.0)
    return hidden


def distinct_ranks(n_experts: int, top_k: int, ep: int) -> float:
    """Expected EP ranks a token's ``top_k`` distinct experts land on, the ``n_experts`` split
    evenly over ``ep`` ranks: ep x (1 - C(E - E/ep, k) / C(E, k))."""
    if ep <= 1:
        return 1.0
    per = n_experts // ep
    miss = 1.0
    for j in range(top_k):
        miss *= max(0.0, (n_experts - per - j) / (n_experts - j))
    return ep * (1.0 - miss)


def step_model(
    m: ModelArgs,
    sysm: SystemSpec,
    plan: ParallelPlan,
    pt: PassTime,
    prec: Precision,
    eff: Efficiency,
    seq_len: int,
    micro_batches: int,
) -> StepTimes:
    """The step of ``estimate_training`` (module docstring) from one forward pass's times."""
    chip, rpc, L = sysm.chip, plan.ranks_per_chip, m.n_layers
    stage_layers = plan.stage_layers(m)
    tokens = plan.micro_batch * seq_len / plan.cp
    act = tokens * m.d_model * prec.act_bytes
    per_layer = pt.layers / L / plan.cp
    mm_layer = pt.kind("matmul", "expert") / L / plan.cp
    attn_layer = pt.kind("attention") / L / plan.cp
    sel_layer = pt.kind("attention", "vector") / L / plan.cp
    moe_frac = m.n_moe_layers / L if m.is_moe else 0.0

    # --- communication of one layer and micro-batch -----------------------------------------
    tp_per = 0.0
    if plan.tp > 1:
        if plan.sequence_parallel:
            tp_per = comm.tp_time("all-gather", act, plan, sysm) + comm.tp_time(
                "reduce-scatter", act, plan, sysm
            )
        else:
            tp_per = comm.tp_time("all-reduce", act, plan, sysm)
        tp_per *= 2  # attention block and FFN block
    ep_per = 0.0
    if m.is_moe and plan.ep > 1:
        a2a = comm.moe_dispatch_bytes(tokens, m.top_k, m.d_model, prec.act_bytes, plan)
        if plan.moe_dispatcher == "flex":
            a2a *= distinct_ranks(m.n_experts, m.top_k, plan.ep) / m.top_k
        ep_per = 2 * comm.ep_time("all-to-all", a2a, plan, sysm)  # dispatch and combine
    cp_ag = cp_rs = 0.0
    if plan.cp > 1:
        kv = plan.micro_batch * seq_len * 2 * m.kv_dim * prec.act_bytes / plan.tp
        cp_ag = comm.cp_time("all-gather", kv, plan, sysm)
        cp_rs = comm.cp_time("reduce-scatter", kv, plan, sysm)
    p2p = 0.0
    if plan.pp > 1:
        send = act / (plan.tp if plan.sequence_parallel else 1)
        p2p = 2 * plan.chunks * comm.pp_time(send, plan, sysm)

    dense, experts = params_per_rank(m, plan, mtp=True)
    fsdp_layer = fsdp_first = 0.0
    if plan.zero >= 3:
        # Per layer and micro-batch: all-gather the layer's weights in the forward and in the
        # backward, reduce-scatter its gradients; each prefetched one layer ahead under the
        # previous layer's compute (the stack's dp_overlap of it), the first layer's gather
        # of each step exposed.
        w_layer = (dense + experts) / max(stage_layers) * prec.weight_bytes
        g_layer = (dense + experts) / max(stage_layers) * prec.grad_bytes
        ag = comm.dp_time("all-gather", w_layer, plan, sysm)
        rs = comm.dp_time("reduce-scatter", g_layer, plan, sysm)
        fsdp_layer, fsdp_first = (ag, ag + rs), ag

    stages = []
    alike: dict[tuple[int, bool, bool], StageTimes] = {}  # stages of one shape time alike
    for i, n_l in enumerate(stage_layers):
        shape = (n_l, i == 0, i == plan.pp - 1)
        if shape in alike:
            stages.append(alike[shape])
            continue
        ends = (pt.pre if i == 0 else 0.0) + (pt.post if i == plan.pp - 1 else 0.0)
        fwd = n_l * per_layer + ends / plan.cp
        bwd = 2 * fwd
        rc_l = n_l if not plan.recompute_layers else min(n_l, plan.recompute_layers)
        if plan.recompute == "full":
            rec = rc_l * per_layer
        elif plan.recompute == "selective":
            rec = n_l * sel_layer
        else:
            rec = 0.0
        passes = 2 + (rc_l / n_l if plan.recompute == "full" else 0.0)  # fwd, bwd, recompute
        moe_l = n_l * moe_frac
        comm_k = {
            "tp": tp_per * n_l * passes,
            "ep": ep_per * moe_l * passes,
            "cp": (cp_ag * (passes - 1) + cp_ag + cp_rs) * n_l,
            "pp": p2p,
        }
        compute = fwd + bwd + rec
        cap = {
            "tp": eff.tp_overlap * comm_k["tp"],
            "ep": eff.ep_overlap * comm_k["ep"],
            "cp": eff.cp_overlap * comm_k["cp"],
            "pp": eff.pp_overlap * comm_k["pp"],
        }
        window = {
            "tp": mm_layer * n_l * (3 + (passes - 2)),
            "ep": compute if plan.moe_a2a_overlap else 0.0,
            "cp": attn_layer * n_l * (3 + (passes - 2)),
            "pp": compute,
        }
        hidden = hide(comm_k, cap, window, compute)
        sync = 0.0
        if m.is_moe and plan.moe_capacity == 0 and plan.moe_dispatcher == "alltoall":
            sync = eff.moe_sync_s * moe_l * (passes - 1)  # each forward (and recompute)
        f_comm = f_exp = 0.0
        if plan.zero >= 3:
            ag, agrs = fsdp_layer
            f_comm = n_l * (ag + agrs)
            lf, lb = per_layer, 2 * per_layer
            f_exp = n_l * (
                max(0.0, ag - eff.dp_overlap * lf) + max(0.0, agrs - eff.dp_overlap * lb)
            )
        exposed = sum(comm_k.values()) - sum(hidden.values())
        alike[shape] = StageTimes(
            n_l,
            fwd,
            bwd,
            rec,
            tuple(comm_k.items()),
            tuple(hidden.items()),
            sync,
            f_comm,
            f_exp,
            exposed,
            compute + exposed + sync + f_exp,
        )
        stages.append(alike[shape])

    # --- pipeline: the slowest stage sets the steady state; the others' time fills and drains
    # it, divided over the virtual stages (Narayanan et al. 2021, interleaved 1F1B) ---------
    t = [st.total for st in stages]
    t_max = max(t)
    pipe = micro_batches * t_max + (sum(t) - t_max) / plan.chunks

    # --- data parallelism and optimizer ---------------------------------------------------
    # Non-expert weights and gradients sync over the DP x CP group, the routed experts' over
    # the expert-DP group (``ParallelPlan.expert_dp``); the two run one after the other.
    slow = stages[t.index(t_max)]

    def sync(op: str, dense_b: float, expert_b: float) -> float:
        out = comm.dp_time(op, dense_b, plan, sysm) if plan.dp * plan.cp > 1 else 0.0
        if expert_b > 0 and plan.expert_dp > 1:
            out += comm.edp_time(op, expert_b, plan, sysm)
        return out

    if plan.zero == 0:
        t_dp = sync("all-reduce", dense * prec.grad_bytes, experts * prec.grad_bytes)
        exposed_dp = max(0.0, t_dp - eff.dp_overlap * slow.backward)
    elif plan.zero in (1, 2):
        rs = sync("reduce-scatter", dense * prec.grad_bytes, experts * prec.grad_bytes)
        ag = sync("all-gather", dense * prec.weight_bytes, experts * prec.weight_bytes)
        t_dp = rs + ag
        # gradients reduce-scatter under the last micro-batch's backward, the updated weights
        # gather under the next step's first forward (Megatron's overlap_grad_reduce and
        # overlap_param_gather; the stack's dp_overlap of each)
        exposed_dp = max(0.0, rs - eff.dp_overlap * slow.backward) + max(
            0.0, ag - eff.dp_overlap * slow.forward
        )
    else:
        t_dp = fsdp_first
        exposed_dp = fsdp_first  # the first layer's gather of the step: nothing to hide under
    shard = plan.dp * plan.cp
    opt_shard = shard if plan.zero >= 1 else 1
    eshard = plan.expert_dp if plan.zero >= 1 else 1
    state = 2 * (prec.master_bytes + prec.optimizer_bytes) + prec.grad_bytes + prec.weight_bytes
    opt_bytes = (dense / opt_shard + experts / eshard) * state
    t_opt = opt_bytes / (chip.hbm_bw / rpc * eff.hbm)
    return StepTimes(tuple(stages), micro_batches, plan.chunks, pipe, t_dp, exposed_dp, t_opt)


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
    memory_params: MemoryParams | None = None,
    cost_inputs: CostInputs | None = None,
    tokens_to_train: float | None = None,
    validate: bool = True,
    stack: str | SoftwareStack | None = None,
) -> TrainEstimate:
    """Estimate one training step of ``model`` on ``plan.chips`` chips of ``system``.

    ``compute_model`` defaults to ``table_model.default_model`` (the kernel tables for
    Trainium chips, the roofline otherwise) and ``eff`` to the stack's profile for that
    model, chip family and precision (``SoftwareStack.profile``); ``memory_params`` to the
    stack's (``SoftwareStack.memory``, the same the planner checks plans with).
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
    stack_line = (
        sw.describe(chip, prec.name) if eff is None else f"stack: {sw.name} with a given efficiency"
    )
    eff = eff or sw.profile(cm, chip, prec.name)

    g = forward_graph(m, plan.micro_batch, seq_len, phase="train")
    pt = pass_time(
        g,
        plan.tp,
        plan.ep,
        plan.sequence_parallel,
        rpc,
        chip,
        prec,
        eff,
        cm,
        plan.moe_imbalance,
        etp=plan.etp,
        moe_capacity=plan.moe_capacity,
    )
    steps = step_model(m, sysm, plan, pt, prec, eff, seq_len, micro_batches)
    step = steps.step_s

    # --- rates ----------------------------------------------------------------------------------
    tokens_step = global_batch * seq_len
    tok_s = tokens_step / step
    peak = chips * chip.peak(dtype)
    mfu = tok_s * train_flops_per_token(m, seq_len) / peak
    mfu_6n = tok_s * 6 * m.n_matmul_params_active / peak
    mem = train_memory(m, plan, chip, seq_len, micro_batches, prec, memory_params or sw.memory)

    ttt = cost = None
    if tokens_to_train:
        ttt = tokens_to_train / tok_s
        cost = run_cost(chip, chips, ttt, cost_inputs or CostInputs())
    breakdown = steps.breakdown()
    assumptions = [
        f"compute: {cm.name} model, efficiency "
        + ", ".join(f"{k}={v:g}" for k, v in eff.as_dict().items()),
        stack_line,
        f"peak: {chip.name} {dtype} {chip.peak(dtype) / 1e12:.0f} TFLOP/s per chip"
        + (f" ({dtype_note})" if dtype_note else ""),
        f"collectives: trnsim.fabric closed forms on {sysm.name} (TP packed, DP/PP strided)",
        "overlap: per layer and micro-batch, each communication kind hides at most its stack's "
        "fraction of it and never more than the compute it overlaps (trnsim.perf.train)",
        "mfu counts 6N + causal attention FLOPs; mfu_6n counts 6N only",
        prec.training_state(),
    ]
    if plan.offload_layers:
        assumptions.append(
            f"activations of {plan.offload_layers} layers per stage offloaded to host memory; "
            "the transfers are assumed hidden under compute (no host-link model)"
        )
    if m.is_moe and plan.moe_capacity == 0 and eff.moe_sync_s and plan.moe_dispatcher == "alltoall":
        assumptions.append(
            f"dropless MoE, all-to-all dispatcher: {eff.moe_sync_s * 1e6:.0f} us host "
            "synchronisation per MoE layer forward (the stack's moe_sync_s)"
        )
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
        stage_layers=tuple(st.layers for st in steps.stages),
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
