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

from trnsim.errors import ConfigError
from trnsim.hw import SystemSpec
from trnsim.perf.compute import ComputeModel, Efficiency
from trnsim.perf.cost import CostInputs, run_cost
from trnsim.perf.memory import DEFAULT_MEMORY, MemoryBreakdown, MemoryParams, infer_memory
from trnsim.perf.plan import ParallelPlan
from trnsim.perf.precision import Precision, compute_dtype, precision
from trnsim.perf.stacks import SoftwareStack, resolve_stack
from trnsim.perf.step import StepCost, comm_parts, decode_offsets
from trnsim.perf.table_model import default_model
from trnsim.perf.train import _resolve_system
from trnsim.workloads import ModelArgs, resolve_model

_comm_per_pass = comm_parts  # its name before trnsim.perf.step held it


@dataclass(frozen=True, slots=True)
class Speculative:
    """Speculative decoding inputs: the draft model, tokens it proposes per step, and the
    probability that each proposed token is accepted."""

    draft: ModelArgs | str
    tokens: int = 4
    acceptance: float = 0.7

    def __post_init__(self) -> None:
        if self.tokens < 1:
            raise ConfigError(f"speculative: tokens per step must be >= 1, got {self.tokens}")
        if not 0 <= self.acceptance <= 1:
            raise ConfigError(f"speculative: acceptance must be in [0, 1], got {self.acceptance}")

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
        plan.check_model(m)
    if batch < 1 or input_tokens < 1 or output_tokens < 1:
        raise ConfigError(
            f"inference: batch ({batch}), input_tokens ({input_tokens}) and output_tokens "
            f"({output_tokens}) must be >= 1"
        )
    chip = sysm.chip
    rpc = plan.ranks_per_chip
    cm = compute_model or default_model(chip, rpc)
    sw = resolve_stack(stack, chip, "serve")
    stack_line = sw.describe() if eff is None else f"stack: {sw.name} with a given efficiency"
    eff = eff or sw.profile(cm)
    dtype, dtype_note = compute_dtype(chip, prec.compute)
    draft = resolve_model(speculative.draft) if speculative else None
    if draft is not None and validate:
        plan.check_model(draft)
    # One step model for TTFT and TPOT, the one trnsim.serve runs every step with.
    sc = StepCost(
        m, sysm, plan, prec=prec, stack=sw, eff=eff, compute_model=cm, speculative=speculative
    )

    if not 0 <= prefix_hit < 1:
        raise ConfigError(f"inference: prefix_hit must be in [0, 1), got {prefix_hit}")
    new_tokens = max(1, round(input_tokens * (1 - prefix_hit)))
    pre = sc.prefill(batch, new_tokens, input_tokens)
    ttft = pre.total
    t_pre = pre.compute
    sp = sc.stack.sequence_parallel_prefill and plan.tp > 1 and input_tokens >= plan.tp
    pre_plan = plan.replace(sequence_parallel=sp)
    tp_c, ep_c, pp_c = comm_parts(m, pre_plan, sysm, batch * new_tokens, prec)

    plan_nosp = plan.replace(sequence_parallel=False)
    q = sc.spec_positions
    d_tp, d_ep, d_pp = comm_parts(m, plan_nosp, sysm, batch * q, prec)
    steps = [sc.decode(batch, input_tokens + 1 + off) for off in decode_offsets(output_tokens - 1)]
    per_step = sc.tokens_per_decode
    tpot = sum(s.total for s in steps) / len(steps) / per_step
    d_compute = sum(s.compute for s in steps) / len(steps) / per_step
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
        f"price {ci.price(chip)} USD/chip-h ({ci.price_source(chip)}); power "
        f"{ci.power(chip)} W/chip",
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
