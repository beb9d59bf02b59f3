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
- **Speculative decoding** (``Speculative``): a draft proposes ``tokens`` tokens per step and
  the target verifies them in one forward pass over ``tokens + 1`` positions. The draft is a
  separate model (``draft``), an EAGLE-3 head on the target (``"eagle3"``: one decoder layer
  fed the fused hidden states of three target layers, ``trnsim.workloads.eagle3_head``) or
  the target's own multi-token-prediction modules (``"mtp"``, DeepSeek-V3). Acceptance is a
  modelled quantity: the draft's i-th token is accepted with probability ``p_i`` (all before it
  accepted), and a step yields ``1 + sum_i p_i`` tokens (the bonus token included; vLLM's
  "acceptance length"). Given one per-token rate ``a``, ``p_i = a^i``: ``(1 - a^(g+1)) /
  (1 - a)`` (Leviathan et al. 2023, eq. 1); given measured per-position rates (vLLM's
  "per-position acceptance"), those. Without either, the method's sourced rate
  (``ACCEPTANCE``). One step costs ``tokens`` draft steps (each its ops and collectives plus
  the stack's ``draft_step_overhead_s``: the launch, hidden-state hand-over and sampling of an
  EAGLE-style draft), then the verify pass; TPOT = step time / expected tokens. The draft also
  runs its own prefill over the prompt (TTFT). It runs on the same ranks with the same TP, and
  its weights (an MTP module's shared embedding and head excluded) and KV cache are added to
  memory; the verify step's logits are counted for the last position only (the LM head is
  weight-bound at these sizes).
- **Maximum-throughput batch** (``max_batch``): the largest batch whose weights, KV cache for
  ``input + output`` tokens and prefill working set fit, capped at ``MAX_BATCH_CAP`` (as
  ``trtllm-bench`` sizes its batch from the KV cache the free memory holds).

Encoders (BERT, ViT) have no autoregressive decoding: ``estimate_inference`` refuses them.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from trnsim import inputs
from trnsim.errors import ConfigError
from trnsim.hw import SystemSpec
from trnsim.perf.compute import ComputeModel, Efficiency
from trnsim.perf.cost import CostInputs, power_line, price_line, run_cost
from trnsim.perf.memory import DEFAULT_MEMORY, MemoryBreakdown, MemoryParams, infer_memory
from trnsim.perf.plan import ParallelPlan
from trnsim.perf.precision import Precision, compute_dtype, precision, with_kv_cache
from trnsim.perf.stacks import SoftwareStack, resolve_stack
from trnsim.perf.step import StepCost, base_precision, comm_parts, decode_offsets
from trnsim.perf.table_model import default_model
from trnsim.perf.train import _resolve_system
from trnsim.workloads import ModelArgs, eagle3_head, mtp_module, resolve_model

_comm_per_pass = comm_parts  # its name before trnsim.perf.step held it
#: The largest batch ``max_batch`` returns (``trtllm-bench`` caps its batch at 4,096:
#: NVIDIA/TensorRT-LLM tensorrt_llm/bench/build/tuning.py ``finetune_setting``).
MAX_BATCH_CAP = 4096

SpecMethod = Literal["draft", "eagle3", "mtp"]
SPEC_METHODS: tuple[str, ...] = ("eagle3", "mtp")  # draft names that are methods, not models


@dataclass(frozen=True, slots=True)
class Acceptance:
    """A per-token acceptance rate of a speculative method, and where it comes from."""

    rate: float
    source: str


_NEURON_SDK = "aws-neuron-sdk @ 81ce03ae vllm-neuron/docs/tutorials/"
#: Per-token acceptance rates by method (the conditional probability that the next proposed
#: token is accepted when all before it were).
ACCEPTANCE: dict[str, Acceptance] = {
    "eagle3": Acceptance(
        0.86,
        _NEURON_SDK + "tutorial-eagle3-speculative-decoding-llama-3-1.md (Llama-3.1-8B-Instruct "
        "with the RedHatAI EAGLE3 head, 3 tokens: per-position acceptance 86.5 / 72.5 / 63.5 %, "
        "= a, a^2, a^3 with a = 0.635^(1/3) = 0.86, derived)",
    ),
    "mtp": Acceptance(
        0.875,
        "DeepSeek-V3 Technical Report (arXiv 2412.19437) section 5.4.3: the acceptance rate of "
        "the second token's prediction is 85-90 % (midpoint)",
    ),
    "draft": Acceptance(
        0.7,
        "assumed: no published acceptance for an arbitrary draft/target pair (give the rate "
        "measured for the pair)",
    ),
}


@dataclass(frozen=True, slots=True)
class Speculative:
    """Speculative decoding inputs (module docstring).

    Attributes:
        draft: the draft model (a preset, a config path or ``ModelArgs``), ``"eagle3"`` (an
            EAGLE-3 head on the target) or ``"mtp"`` (the target's MTP modules).
        tokens: tokens the draft proposes per step (at most the MTP modules for ``"mtp"``).
        acceptance: per-token acceptance rate ``a`` (None: the method's, ``ACCEPTANCE``).
        per_position: measured probabilities that position 1..``tokens`` is accepted (vLLM's
            per-position acceptance); overrides ``acceptance``.
    """

    draft: ModelArgs | str
    tokens: int = 4
    acceptance: float | None = None
    per_position: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        inputs.check("spec-tokens", self.tokens)
        inputs.check_optional("spec-acceptance", self.acceptance)
        p = tuple(self.per_position)
        if p:
            if len(p) != self.tokens:
                raise ConfigError(
                    f"speculative: per_position gives {len(p)} rates for {self.tokens} tokens"
                )
            if not all(isinstance(x, int | float) and 0 <= x <= 1 for x in p):
                raise ConfigError(f"speculative: per_position rates must be in [0, 1], got {p}")
            if any(b > a_ + 1e-12 for a_, b in itertools.pairwise(p)):
                raise ConfigError(
                    "speculative: per_position rates must not increase (position i is accepted "
                    f"only if every earlier one is), got {p}"
                )

    @property
    def method(self) -> SpecMethod:
        """``eagle3``, ``mtp`` or ``draft`` (a separate draft model)."""
        d = self.draft
        return d if isinstance(d, str) and d in SPEC_METHODS else "draft"  # type: ignore[return-value]

    @property
    def rate(self) -> float:
        """The per-token acceptance rate in use (given, or the method's)."""
        return ACCEPTANCE[self.method].rate if self.acceptance is None else self.acceptance

    @property
    def positions(self) -> tuple[float, ...]:
        """P(position i accepted), i = 1..tokens: measured, or a^i."""
        if self.per_position:
            return tuple(float(x) for x in self.per_position)
        return tuple(self.rate**i for i in range(1, self.tokens + 1))

    @property
    def expected_tokens(self) -> float:
        """Tokens produced per step: 1 (the target's own token) + sum of P(position i)."""
        return 1.0 + sum(self.positions)

    @property
    def acceptance_source(self) -> str:
        if self.per_position:
            return "measured per-position acceptance (given)"
        if self.acceptance is not None:
            return "given"
        return ACCEPTANCE[self.method].source

    def draft_model(self, target: ModelArgs) -> ModelArgs:
        """The draft's architecture: the given model, an EAGLE-3 head, or one MTP module."""
        if self.method == "eagle3":
            return eagle3_head(target)
        if self.method == "mtp":
            if self.tokens > target.n_mtp_modules:
                raise ConfigError(
                    f"speculative: mtp drafts one token per MTP module; {target.name} has "
                    f"{target.n_mtp_modules}, asked for {self.tokens} tokens per step"
                )
            return mtp_module(target)
        return resolve_model(self.draft)


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
    kv_cache_dtype: str | None = None,
    max_prefill_tokens: int | None = None,
) -> InferEstimate:
    """Estimate serving ``model`` on ``plan.chips`` chips of ``system`` (see module doc);
    ``kv_cache_dtype`` (bf16, fp16, fp8; None: the precision's) stores the KV cache apart;
    ``max_prefill_tokens`` (an engine's token budget per forward pass, TensorRT-LLM's
    ``max_num_tokens``; None: the whole batch's prompts at once) bounds the prefill working set
    held in memory (the prefill's time is the same work in chunks)."""
    m = resolve_model(model)
    sysm = _resolve_system(system)
    prec = with_kv_cache(precision(precision_name), kv_cache_dtype)
    if not m.causal:
        raise ConfigError(
            f"inference: {m.name} is an encoder (bidirectional attention): it has no "
            "autoregressive decoding to estimate (time its forward pass with trnsim train's "
            "graph, or serve a decoder)"
        )
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
    eff = eff or sw.profile(cm, chip, base_precision(prec))
    dtype, dtype_note = compute_dtype(chip, prec.compute)
    draft = speculative.draft_model(m) if speculative else None
    if draft is not None and validate:
        if speculative.method == "draft":  # smaller, the same vocabulary (rule draft-model)
            inputs.check_speculative(speculative, draft, m, output_tokens)
        plan.check_model(draft)
    # One step model for TTFT and TPOT, the one trnsim.serve runs every step with.
    sc = StepCost(
        m, sysm, plan, prec=prec, stack=sw, eff=eff, compute_model=cm, speculative=speculative
    )
    new_tokens = max(1, round(input_tokens * (1 - prefix_hit)))
    pre = sc.prefill(batch, new_tokens, input_tokens)
    ttft = pre.total
    t_pre = pre.compute
    t_draft_pre = pre.draft + pre.draft_comm  # the draft runs over the prompt too
    sp = sc.stack.sequence_parallel_prefill and plan.tp > 1 and input_tokens >= plan.tp
    pre_plan = plan.replace(sequence_parallel=sp)
    tp_c, ep_c, pp_c = comm_parts(m, pre_plan, sysm, batch * new_tokens, prec)

    plan_nosp = plan.replace(sequence_parallel=False)
    q = sc.spec_positions
    d_tp, d_ep, d_pp = comm_parts(m, plan_nosp, sysm, batch * q, prec)
    steps = [sc.decode(batch, input_tokens + 1 + off) for off in decode_offsets(output_tokens - 1)]
    per_step = sc.tokens_per_decode
    tpot = sum(s.total for s in steps) / len(steps) / per_step
    d_compute = sum(s.compute + s.draft for s in steps) / len(steps) / per_step
    e2e = ttft + output_tokens * tpot
    thr = plan.dp * batch * output_tokens / e2e
    dec = plan.dp * batch / tpot
    context = max_seq_len or input_tokens + output_tokens
    work = _prefill_tokens_per_seq(batch, input_tokens, max_prefill_tokens)
    mem = infer_memory(m, plan, chip, batch, context, work, prec, memory_params)
    if draft is not None:
        dmem = infer_memory(draft, plan, chip, batch, context, 1, prec, memory_params)
        dw = dmem.weights
        if speculative.method == "mtp":  # the MTP module shares the target's embedding/head
            shared = draft.embedding_params + draft.head_params
            dw *= 1 - shared / draft.n_params
        mem = replace(mem, weights=mem.weights + dw, kv_cache=mem.kv_cache + dmem.kv_cache)
    ci = cost_inputs or CostInputs()
    cost = run_cost(chip, plan.chips, 1.0, ci)  # one second of the whole deployment
    usd_m = cost.usd / thr * 1e6 if cost.usd is not None else None
    jpt = cost.energy_j / thr if cost.energy_j is not None else None
    breakdown = {
        "prefill_compute": t_pre,
        "prefill_tp_comm": tp_c,
        "prefill_ep_comm": ep_c,
        "prefill_pp_p2p": pp_c,
        "prefill_overhead": eff.step_overhead_s + eff.prefill_overhead_s,
        "draft_prefill": t_draft_pre,
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
        acc = (
            "per-position acceptance " + "/".join(f"{x:g}" for x in speculative.positions)
            if speculative.per_position
            else f"acceptance {speculative.rate:g} per token"
        )
        assumptions.append(
            f"speculative decoding: draft {draft.name} ({speculative.method}), "
            f"{speculative.tokens} tokens per step, {acc} -> {per_step:.2f} tokens per step "
            f"(acceptance: {speculative.acceptance_source}); draft step overhead "
            f"{eff.draft_step_overhead_s * 1e3:g} ms"
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


def max_batch(
    model: ModelArgs | str,
    system: SystemSpec | str,
    plan: ParallelPlan,
    *,
    input_tokens: int,
    output_tokens: int,
    precision_name: str | Precision = "bf16",
    max_seq_len: int | None = None,
    memory_params: MemoryParams = DEFAULT_MEMORY,
    speculative: Speculative | None = None,
    cap: int = MAX_BATCH_CAP,
    kv_cache_dtype: str | None = None,
    max_prefill_tokens: int | None = None,
) -> int:
    """The largest batch (at most ``cap``) whose weights, KV cache for ``input + output``
    tokens (or ``max_seq_len``) and prefill working set fit in the usable HBM of every rank;
    0 if not even one sequence fits. The maximum-throughput batch of an engine that sizes its
    batch from the KV cache the free memory holds (``trtllm-bench``: NVIDIA/TensorRT-LLM
    tensorrt_llm/bench/build/tuning.py ``calc_engine_setting``)."""
    m = resolve_model(model)
    sysm = _resolve_system(system)
    prec = with_kv_cache(precision(precision_name), kv_cache_dtype)
    context = max_seq_len or input_tokens + output_tokens
    draft = speculative.draft_model(m) if speculative else None

    def fits(b: int) -> bool:
        work = _prefill_tokens_per_seq(b, input_tokens, max_prefill_tokens)
        mem = infer_memory(m, plan, sysm.chip, b, context, work, prec, memory_params)
        extra = 0.0
        if draft is not None:
            dmem = infer_memory(draft, plan, sysm.chip, b, context, 1, prec, memory_params)
            extra = dmem.weights + dmem.kv_cache
        return mem.total + extra <= mem.usable

    if cap < 1 or not fits(1):
        return 0
    lo, hi = 1, cap
    while lo < hi:  # the largest b with fits(b): memory grows with b
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _prefill_tokens_per_seq(batch: int, input_tokens: int, budget: int | None) -> float:
    """Prompt tokens per sequence in the prefill working set: all of them, or the budget's
    share when the engine prefills at most ``budget`` tokens per pass."""
    if budget is None:
        return input_tokens
    if budget < 1:
        raise ConfigError(f"inference: max_prefill_tokens must be >= 1, got {budget}")
    return min(input_tokens, max(budget / batch, 1 / batch))
