"""Inference estimates: prefill (TTFT), decode (TPOT), throughput, KV cache, cost per token.

A replica serves ``batch`` sequences of ``input_tokens`` prompt tokens and ``output_tokens``
generated tokens on ``tp x pp`` ranks (``dp`` replicas side by side):

- **TTFT** = the prefill forward pass of batch x input_tokens tokens (op graph timed by the
  compute model) through all ``pp`` stages in turn, plus 2 all-reduces per layer of the
  activations (tokens x d; Megatron row-parallel outputs), one all-to-all dispatch and combine
  per MoE layer with ``ep > 1`` (``comm.moe_dispatch_bytes``: top_k x tokens x d, the busiest
  rank's share), and ``pp - 1`` point-to-point sends. The first token comes out
  of the prefill pass.
- **TPOT** = one decode step (batch new tokens, reading weights and the KV cache of the whole
  context so far), averaged over the generation: the mean of the step time at the midpoints of
  four equal segments of the context range [input + 1, input + output] (exact where the step
  time is linear in the context, which it is between roofline kinks).
- **Throughput** (output tokens/s, all replicas): dp x batch x output / (TTFT + output x TPOT),
  a request at a time per replica (no continuous batching); ``decode_tokens_per_s``: the steady
  decode rate dp x batch / TPOT.
- **Memory**: weights + KV cache for ``input + output`` tokens (or ``max_seq_len``) per sequence +
  the prefill working set, per rank, against HBM.

A fraction ``comm_overlap`` of the tensor/expert-parallel communication is hidden under compute.

As the serving stacks run it (``trnsim.perf.stacks``): a stack with ``sequence_parallel_prefill``
(NxD Inference) runs the prefill's norms and residuals split over the TP ranks and its TP
all-reduces as reduce-scatter + all-gather; the stack's profile says whether attention keeps
its scores on chip (flash-style kernels: ``score_bytes`` 0); a stack with ``moe_prefill_block``
(NxD Inference) runs the prefill's routed experts as a blockwise matmul whose statically
provisioned blocks, padding included, are all computed (``trnsim.perf.compute.moe_blocks``).

- **Prefix caching** (``prefix_hit``: the fraction of each prompt already in the KV cache): the
  prefill computes only the uncached ``(1 - hit) x input`` tokens, attending to the whole prompt.
- **Speculative decoding** (``Speculative``: a draft model proposes ``tokens`` tokens per step,
  each accepted with probability ``acceptance``): one step is ``tokens`` draft decode steps plus
  one target forward over ``tokens + 1`` positions, and yields
  ``(1 - a^(tokens+1)) / (1 - a)`` tokens on average (Leviathan et al. 2023, eq. 1), so
  TPOT = step time / expected tokens. The draft runs on the same ranks with the same TP, and
  its KV cache and weights are added to memory; the verify step's logits are counted for the
  last position only (the LM head is weight-bound at these sizes).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from trnsim import inputs
from trnsim.hw import SystemSpec
from trnsim.perf import comm
from trnsim.perf.compute import ComputeModel, Efficiency, pass_time
from trnsim.perf.cost import CostInputs, power_line, price_line, run_cost
from trnsim.perf.memory import DEFAULT_MEMORY, MemoryBreakdown, MemoryParams, infer_memory
from trnsim.perf.plan import ParallelPlan
from trnsim.perf.precision import Precision, compute_dtype, precision
from trnsim.perf.stacks import SoftwareStack, resolve_stack
from trnsim.perf.table_model import default_model
from trnsim.perf.train import _resolve_system
from trnsim.workloads import ModelArgs, forward_graph, resolve_model

DECODE_POINTS = 4


@dataclass(frozen=True, slots=True)
class Speculative:
    """Speculative decoding inputs: the draft model, tokens it proposes per step, and the
    probability that each proposed token is accepted."""

    draft: ModelArgs | str
    tokens: int = 4
    acceptance: float = 0.7

    def __post_init__(self) -> None:
        inputs.check("spec-tokens", self.tokens)
        inputs.check("spec-acceptance", self.acceptance)

    @property
    def expected_tokens(self) -> float:
        """Tokens produced per step: sum of a^i for i = 0..tokens (the bonus token included)."""
        a, g = self.acceptance, self.tokens
        return float(g + 1) if a >= 1 else (1 - a ** (g + 1)) / (1 - a)


@dataclass(frozen=True, slots=True)
class InferEstimate:
    """An inference estimate (one replica's latencies, all replicas' throughput)."""

    model: str
    system: str
    chips: int
    plan: ParallelPlan
    precision: str
    batch: int
    input_tokens: int
    output_tokens: int
    ttft_s: float
    tpot_s: float
    e2e_latency_s: float
    throughput_tokens_per_s: float
    decode_tokens_per_s: float
    memory: MemoryBreakdown
    breakdown: dict[str, float]
    usd_per_million_tokens: float | None
    joules_per_token: float | None
    assumptions: list[str] = field(default_factory=list)
    stack: str = ""

    @property
    def fits(self) -> bool:
        return self.memory.fits

    def as_dict(self) -> dict[str, Any]:
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
                "ranks_per_chip": self.plan.ranks_per_chip,
            },
            "precision": self.precision,
            "batch": self.batch,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "fits": self.fits,
            "ttft_s": self.ttft_s,
            "tpot_s": self.tpot_s,
            "e2e_latency_s": self.e2e_latency_s,
            "throughput_tokens_per_s": self.throughput_tokens_per_s,
            "decode_tokens_per_s": self.decode_tokens_per_s,
            "memory_per_chip_bytes": self.memory.total * self.plan.ranks_per_chip,
            "kv_cache_per_chip_bytes": self.memory.kv_cache * self.plan.ranks_per_chip,
            "memory_per_rank": self.memory.as_dict(),
            "breakdown_s": self.breakdown,
            "usd_per_million_tokens": self.usd_per_million_tokens,
            "joules_per_token": self.joules_per_token,
            "assumptions": self.assumptions,
        }


def _comm_per_pass(
    m: ModelArgs, plan: ParallelPlan, sysm: SystemSpec, tokens: int, prec: Precision
) -> tuple[float, float, float]:
    """(tp, ep, pp) communication seconds of one forward pass over ``tokens`` tokens."""
    act = tokens * m.d_model * prec.act_bytes
    tp_c = 0.0
    if plan.tp > 1 and plan.sequence_parallel:
        # sequence parallel: each all-reduce becomes a reduce-scatter and an all-gather
        tp_c = (
            2
            * m.n_layers
            * (
                comm.tp_time("reduce-scatter", act, plan, sysm)
                + comm.tp_time("all-gather", act, plan, sysm)
            )
        )
    elif plan.tp > 1:
        tp_c = 2 * m.n_layers * comm.tp_time("all-reduce", act, plan, sysm)
    ep_c = 0.0
    if m.is_moe and plan.ep > 1:
        a2a = comm.moe_dispatch_bytes(tokens, m.top_k, m.d_model, prec.act_bytes, plan)
        ep_c = 2 * m.n_moe_layers * comm.ep_time("all-to-all", a2a, plan, sysm)
    pp_c = (plan.pp - 1) * comm.pp_time(act, plan, sysm)
    return tp_c, ep_c, pp_c


def estimate_inference(
    model: ModelArgs | str,
    system: SystemSpec | str,
    plan: ParallelPlan,
    *,
    batch: int,
    input_tokens: int,
    output_tokens: int,
    precision_name: str | Precision = "bf16",
    max_seq_len: int | None = None,
    eff: Efficiency | None = None,
    compute_model: ComputeModel | None = None,
    memory_params: MemoryParams = DEFAULT_MEMORY,
    cost_inputs: CostInputs | None = None,
    validate: bool = True,
    stack: str | SoftwareStack | None = None,
    speculative: Speculative | None = None,
    prefix_hit: float = 0.0,
) -> InferEstimate:
    """Estimate serving ``model`` on ``plan.chips`` chips of ``system`` (see module doc)."""
    m = resolve_model(model)
    sysm = _resolve_system(system)
    prec = precision(precision_name)
    if validate:
        inputs.check_inference(
            m,
            batch=batch,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            max_seq_len=max_seq_len,
            prefix_hit=prefix_hit,
        )
        plan.check_model(m)
    chip = sysm.chip
    rpc = plan.ranks_per_chip
    cm = compute_model or default_model(chip, rpc)
    sw = resolve_stack(stack, chip, "serve")
    stack_line = sw.describe() if eff is None else f"stack: {sw.name} with a given efficiency"
    eff = eff or sw.profile(cm)
    dtype, dtype_note = compute_dtype(chip, prec.compute)
    plan_nosp = plan.replace(sequence_parallel=False)

    sp = sw.sequence_parallel_prefill and plan.tp > 1 and input_tokens >= plan.tp

    def pass_total(g, seq_par: bool = False, block: int = 0) -> float:
        pt = pass_time(
            g, plan.tp, plan.ep, seq_par, rpc, chip, prec, eff, cm, plan.moe_imbalance, block
        )
        return pt.layers + pt.pre + pt.post

    new_tokens = max(1, round(input_tokens * (1 - prefix_hit)))
    pre_g = forward_graph(m, batch, new_tokens, input_tokens, phase="prefill")
    t_pre = pass_total(pre_g, sp, sw.moe_prefill_block)
    pre_plan = plan.replace(sequence_parallel=sp)
    tp_c, ep_c, pp_c = _comm_per_pass(m, pre_plan, sysm, batch * new_tokens, prec)
    ttft = t_pre + (tp_c + ep_c) * (1 - eff.comm_overlap) + pp_c + eff.step_overhead_s

    steps = []
    d_tp, d_ep, d_pp = _comm_per_pass(m, plan_nosp, sysm, batch, prec)
    d_comm = (d_tp + d_ep) * (1 - eff.comm_overlap) + d_pp
    d_compute = 0.0
    draft = resolve_model(speculative.draft) if speculative else None
    if draft is not None and validate:
        inputs.check_speculative(speculative, draft, m, output_tokens)
        plan.check_model(draft)
    q = speculative.tokens + 1 if speculative else 1
    if speculative:
        d_tp, d_ep, d_pp = _comm_per_pass(m, plan_nosp, sysm, batch * q, prec)
        d_comm = (d_tp + d_ep) * (1 - eff.comm_overlap) + d_pp
        dr = _comm_per_pass(draft, plan_nosp, sysm, batch, prec)
        d_comm += speculative.tokens * ((dr[0] + dr[1]) * (1 - eff.comm_overlap) + dr[2])
    for i in range(DECODE_POINTS):
        ctx = input_tokens + 1 + round((i + 0.5) * (output_tokens - 1) / DECODE_POINTS)
        t = pass_total(forward_graph(m, batch, q, max(ctx, q), phase="decode"))
        if speculative:
            t += speculative.tokens * pass_total(forward_graph(draft, batch, 1, ctx, "decode"))
        d_compute += t / DECODE_POINTS
        steps.append(t + d_comm + eff.step_overhead_s)
    per_step = speculative.expected_tokens if speculative else 1.0
    tpot = sum(steps) / len(steps) / per_step
    d_compute /= per_step
    e2e = ttft + output_tokens * tpot
    thr = plan.dp * batch * output_tokens / e2e
    dec = plan.dp * batch / tpot
    context = max_seq_len or input_tokens + output_tokens
    mem = infer_memory(m, plan, chip, batch, context, input_tokens, prec, memory_params)
    if draft is not None:
        dmem = infer_memory(draft, plan, chip, batch, context, 1, prec, memory_params)
        mem = replace(
            mem, weights=mem.weights + dmem.weights, kv_cache=mem.kv_cache + dmem.kv_cache
        )
    ci = cost_inputs or CostInputs()
    cost = run_cost(chip, plan.chips, 1.0, ci)  # one second of the whole deployment
    usd_m = cost.usd / thr * 1e6 if cost.usd is not None else None
    jpt = cost.energy_j / thr if cost.energy_j is not None else None
    breakdown = {
        "prefill_compute": t_pre,
        "prefill_tp_comm": tp_c,
        "prefill_ep_comm": ep_c,
        "prefill_pp_p2p": pp_c,
        "decode_compute": d_compute,
        "decode_tp_comm": d_tp,
        "decode_ep_comm": d_ep,
        "decode_pp_p2p": d_pp,
    }
    assumptions = [
        f"compute: {cm.name} model, serve efficiency "
        + ", ".join(f"{k}={v:g}" for k, v in eff.as_dict().items()),
        stack_line,
        f"peak: {chip.name} {dtype} {chip.peak(dtype) / 1e12:.0f} TFLOP/s per chip"
        + (f" ({dtype_note})" if dtype_note else ""),
        f"weights {prec.weight_bytes:g} B, activations {prec.act_bytes:g} B, KV cache "
        f"{prec.kv_bytes:g} B per element ({prec.name}{': ' + prec.note if prec.note else ''})",
        f"{price_line(ci, chip)}; {power_line(ci, chip)}",
    ]
    if prefix_hit:
        assumptions.append(
            f"prefix caching: {prefix_hit:.0%} of each prompt cached, {new_tokens} of "
            f"{input_tokens} tokens prefilled"
        )
    if speculative:
        assumptions.append(
            f"speculative decoding: draft {draft.name}, {speculative.tokens} tokens per step, "
            f"acceptance {speculative.acceptance:g} -> {per_step:.2f} tokens per step"
        )
    if not mem.fits:
        assumptions.insert(0, "OVER CAPACITY: " + mem.explain())
    inputs.check_finite("serving estimate", ttft_s=ttft, tpot_s=tpot, usd_per_million_tokens=usd_m)
    return InferEstimate(
        model=m.name,
        system=sysm.name,
        chips=plan.chips,
        plan=plan,
        precision=prec.name,
        batch=batch,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        ttft_s=ttft,
        tpot_s=tpot,
        e2e_latency_s=e2e,
        throughput_tokens_per_s=thr,
        decode_tokens_per_s=dec,
        memory=mem,
        breakdown=breakdown,
        usd_per_million_tokens=usd_m,
        joules_per_token=jpt,
        assumptions=assumptions,
        stack=sw.name,
    )
