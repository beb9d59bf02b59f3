"""The planner: search parallel plans for the best one that fits.

Training: every (tp, pp, cp, ep, micro-batch, ZeRO stage, recomputation, schedule) whose degrees
multiply to the chips and satisfy the model's divisibility rules; memory is checked first (a
cheap closed form) and only plans that fit are timed. Objectives: ``throughput`` (max
tokens/s; for a fixed chip count this is also min cost and energy per token) or ``step_time``.

Inference: every (tp, pp, dp, ep, batch) with batch from ``batches``; objectives ``throughput``
(max output tokens/s), ``latency`` (min TPOT, then TTFT) or ``cost`` (min USD per million
tokens).

Candidate degrees: tp powers of two up to 64 and up to the ranks of one scale-up domain (and
dividing the heads unless padding), pp the
divisors of the rank count up to min(n_layers, 128), cp in {1, 2, 4, 8} for sequences of 32K
tokens or more, ep the divisors of the expert count dividing dp x cp (and, with tp > 1, those
dividing tp x cp x dp with the experts unsplit, etp = 1: EP over the TP ranks too): the
divisors of the greatest common divisors, bounded by the ranks whatever the expert count.

Serving plans are chosen among those that meet a latency bound (``slo``: a
``trnsim.perf.slo.ServingSLO``; the defaults are MLPerf's, see there); ``slo=None`` drops it.
The inputs are checked at the door (``trnsim.inputs``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from trnsim import inputs
from trnsim.errors import ConfigError, InputError, TrnsimError
from trnsim.hw import SystemSpec
from trnsim.perf.compute import ComputeModel, Efficiency
from trnsim.perf.cost import CostInputs
from trnsim.perf.infer import InferEstimate, estimate_inference
from trnsim.perf.memory import train_memory
from trnsim.perf.plan import ParallelPlan
from trnsim.perf.precision import precision
from trnsim.perf.slo import DEFAULT_SLO, ServingSLO
from trnsim.perf.stacks import resolve_stack
from trnsim.perf.train import TrainEstimate, _resolve_system, estimate_training
from trnsim.workloads import ModelArgs, resolve_model

# A progress-bar factory ``(description, total) -> context manager yielding an object with
# ``advance()````: the CLI passes ``trnsim.report.progress.progress`` (perf does not import
# report, which sits above it).
ProgressFactory = Callable[[str, int], AbstractContextManager[Any]]

TrainObjective = Literal["throughput", "step_time"]
InferObjective = Literal["throughput", "latency", "cost"]


@dataclass(slots=True)
class SearchResult:
    """The top plans (best first) and what the search saw."""

    top: list
    considered: int = 0
    invalid: int = 0
    over_capacity: int = 0
    objective: str = ""
    notes: list[str] = field(default_factory=list)
    over_slo: int = 0  # serving: plans that fit but miss the latency bound
    slo: ServingSLO | None = None  # serving: the latency bound the plans were chosen under


def _divisors(n: int, cap: int) -> list[int]:
    """The divisors of ``n`` up to ``cap``, ascending: O(min(cap, sqrt n)) steps."""
    if cap * cap <= n:
        return [d for d in range(1, cap + 1) if n % d == 0]
    out = set()
    d = 1
    while d * d <= n:
        if n % d == 0:
            out.update(x for x in (d, n // d) if x <= cap)
        d += 1
    return sorted(out)


def _ep_options(n_experts: int, ranks: int) -> list[int]:
    """Expert-parallel degrees: the divisors of both the expert count and ``ranks`` (dp x cp),
    that is the divisors of their gcd, never more than ``ranks``."""
    return _divisors(math.gcd(n_experts, ranks), ranks)


def _pow2(cap: int) -> list[int]:
    out, v = [], 1
    while v <= cap:
        out.append(v)
        v *= 2
    return out


def _tp_options(m: ModelArgs, ranks: int, pad_heads: bool, cap: int = 64) -> list[int]:
    """Powers of two up to ``min(64, cap, ranks)`` that the model's heads allow. ``cap``: the
    ranks of one scale-up domain (NVLink, NeuronLink, ICI slice): every stack keeps a TP group
    inside one, since its all-reduces run once per layer on the critical path."""
    opts = []
    for tp in _pow2(min(64, cap, ranks)):
        if ranks % tp:
            continue
        try:
            ParallelPlan(tp=tp, pad_heads=pad_heads).check_model(m)
        except ConfigError:
            continue
        opts.append(tp)
    return opts


class _NoBar:
    def advance(self, steps: float = 1) -> None:
        pass


@contextmanager
def _progress(factory: ProgressFactory | None, description: str, total: int) -> Iterator[Any]:
    """The caller's progress bar, or one that shows nothing."""
    if factory is None:
        yield _NoBar()
        return
    with factory(description, total) as bar:
        yield bar


def _train_candidates(
    m: ModelArgs, chips: int, global_batch: int, seq_len: int, ranks_per_chip: int, cap: int = 64
) -> Iterator[ParallelPlan]:
    ranks = chips * ranks_per_chip
    cps = [c for c in (1, 2, 4, 8) if seq_len >= 32768 and seq_len % c == 0] or [1]
    for tp in _tp_options(m, ranks, False, cap):
        for cp in cps:
            if ranks % (tp * cp):
                continue
            for pp in _divisors(ranks // (tp * cp), min(m.n_layers, 128)):
                dp = ranks // (tp * cp * pp)
                # (ep, etp): EP over the DP x CP ranks with experts split like the dense layers
                # (etp = tp), and, with TP, EP folded over the TP ranks too (etp = 1, EP up to
                # tp x cp x dp: Megatron-Core's MoE parallel folding)
                layouts: list[tuple[int, int | None]] = [(1, None)]
                if m.is_moe:
                    layouts = [(e, None) for e in _ep_options(m.n_experts, dp * cp)]
                    if tp > 1:
                        folded = _ep_options(m.n_experts, tp * cp * dp)
                        layouts += [(e, 1) for e in folded if (dp * cp) % e]
                for ep, etp in layouts:
                    for mb in (1, 2, 4, 8):
                        if global_batch % (dp * mb):
                            continue
                        schedules = [("1f1b", 1)]
                        mbs = global_batch // (dp * mb)
                        if pp > 1 and mbs % pp == 0 and m.n_layers >= 2 * pp:
                            schedules.append(("interleaved", 2))
                        for zero in (1, 3):
                            for rc in ("none", "selective", "full"):
                                for sched, chunks in schedules:
                                    yield ParallelPlan(
                                        tp=tp,
                                        pp=pp,
                                        dp=dp,
                                        ep=ep,
                                        cp=cp,
                                        micro_batch=mb,
                                        zero=zero,
                                        recompute=rc,
                                        schedule=sched,  # type: ignore[arg-type]
                                        chunks=chunks,
                                        ranks_per_chip=ranks_per_chip,
                                        etp=etp,
                                    )


def search_training(
    model: ModelArgs | str,
    system: SystemSpec | str,
    chips: int,
    *,
    global_batch: int,
    seq_len: int,
    precision_name: str = "bf16",
    objective: TrainObjective = "throughput",
    top: int = 5,
    eff: Efficiency | None = None,
    ranks_per_chip: int = 1,
    progress: ProgressFactory | None = None,
    candidates: Iterable[ParallelPlan] | None = None,
    compute_model: ComputeModel | None = None,
    stack: str | None = None,
    plan_options: Mapping[str, Any] | None = None,
) -> SearchResult:
    """The ``top`` training plans on ``chips`` chips that fit in memory, best first.

    ``plan_options``: ``ParallelPlan`` fields set on every candidate (pipeline, memory and MoE
    options: ``offload_layers``, ``etp``, ``moe_dispatcher``, ...); a candidate they make
    invalid is counted invalid."""
    m = resolve_model(model)
    sysm = _resolve_system(system)
    prec = precision(precision_name)
    _check_search(chips, top, ranks_per_chip)
    inputs.check_training(m, global_batch=global_batch, seq_len=seq_len)
    mem_params = resolve_stack(stack, sysm.chip, "train").memory  # as estimate_training
    cap = sysm.scale_up_chips * ranks_per_chip
    plans = list(
        candidates or _train_candidates(m, chips, global_batch, seq_len, ranks_per_chip, cap)
    )
    opts = dict(plan_options or {})
    res = SearchResult(top=[], objective=objective)
    scored: list[tuple[float, TrainEstimate]] = []
    with _progress(progress, f"planning {m.name} on {chips} chips", len(plans)) as bar:
        for plan in plans:
            bar.advance()
            res.considered += 1
            try:
                if opts:
                    plan = plan.replace(**opts)
                plan.validate(m, chips)
                mbs = plan.check_batch(global_batch, seq_len)
            except TrnsimError:
                res.invalid += 1
                continue
            if not train_memory(m, plan, sysm.chip, seq_len, mbs, prec, mem_params).fits:
                res.over_capacity += 1
                continue
            est = estimate_training(
                m,
                sysm,
                plan,
                global_batch=global_batch,
                seq_len=seq_len,
                precision_name=prec,
                eff=eff,
                compute_model=compute_model,
                validate=False,
                stack=stack,
            )
            key = -est.tokens_per_s if objective == "throughput" else est.step_time_s
            scored.append((key, est))
    scored.sort(key=lambda kv: kv[0])
    res.top = [est for _, est in scored[:top]]
    if not res.top:
        res.notes.append(
            f"no plan fits: {res.over_capacity} over capacity, {res.invalid} invalid of "
            f"{res.considered}"
        )
    return res


def search_inference(
    model: ModelArgs | str,
    system: SystemSpec | str,
    chips: int,
    *,
    input_tokens: int,
    output_tokens: int,
    batches: Iterable[int] = (1, 4, 8, 16, 32, 64, 128, 256),
    precision_name: str = "bf16",
    objective: InferObjective = "throughput",
    top: int = 5,
    eff: Efficiency | None = None,
    cost_inputs: CostInputs | None = None,
    ranks_per_chip: int = 1,
    progress: ProgressFactory | None = None,
    compute_model: ComputeModel | None = None,
    stack: str | None = None,
    slo: ServingSLO | None = DEFAULT_SLO,
) -> SearchResult:
    """The ``top`` serving plans on ``chips`` chips that fit in memory and meet ``slo``
    (None: no latency bound), best first."""
    m = resolve_model(model)
    sysm = _resolve_system(system)
    _check_search(chips, top, ranks_per_chip)
    batches = [inputs.check("batch", b) for b in batches]
    if not batches:
        raise InputError("batches: give at least one batch size (rule batch)")
    inputs.check_inference(m, batch=None, input_tokens=input_tokens, output_tokens=output_tokens)
    ranks = chips * ranks_per_chip
    res = SearchResult(top=[], objective=objective, slo=slo)
    fastest: InferEstimate | None = None  # of the plans that fit: the lowest TTFT
    cands: list[ParallelPlan] = []
    for tp in _tp_options(m, ranks, False, sysm.scale_up_chips * ranks_per_chip):
        for pp in _divisors(ranks // tp, min(m.n_layers, 16)):
            dp = ranks // (tp * pp)
            eps = [e for e in _ep_options(m.n_experts, dp) if tp * e <= ranks] if m.is_moe else [1]
            for ep in eps:
                cands.append(
                    ParallelPlan(
                        tp=tp,
                        pp=pp,
                        dp=dp,
                        ep=ep,
                        zero=0,
                        recompute="none",
                        ranks_per_chip=ranks_per_chip,
                    )
                )
    scored: list[tuple[tuple[float, float], InferEstimate]] = []
    total = len(cands) * len(batches)
    with _progress(progress, f"planning {m.name} serving on {chips} chips", total) as bar:
        for plan in cands:
            for b in batches:
                bar.advance()
                res.considered += 1
                try:
                    est = estimate_inference(
                        m,
                        sysm,
                        plan,
                        batch=b,
                        input_tokens=input_tokens,
                        output_tokens=output_tokens,
                        precision_name=precision_name,
                        eff=eff,
                        cost_inputs=cost_inputs,
                        compute_model=compute_model,
                        stack=stack,
                    )
                except TrnsimError:
                    res.invalid += 1
                    continue
                if not est.fits:
                    res.over_capacity += 1
                    continue
                if fastest is None or (est.ttft_s, est.tpot_s) < (fastest.ttft_s, fastest.tpot_s):
                    fastest = est
                if slo is not None and not slo.met(est.ttft_s, est.tpot_s):
                    res.over_slo += 1
                    continue
                if objective == "throughput":
                    key = (-est.throughput_tokens_per_s, est.tpot_s)
                elif objective == "latency":
                    key = (est.tpot_s, est.ttft_s)
                else:
                    key = (est.usd_per_million_tokens or float("inf"), est.tpot_s)
                scored.append((key, est))
    scored.sort(key=lambda kv: kv[0])
    res.top = [est for _, est in scored[:top]]
    if not res.top and res.over_slo:
        best = (
            f"; the lowest latency that fits: TTFT {fastest.ttft_s:.3g} s, TPOT "
            f"{fastest.tpot_s * 1e3:.3g} ms ({fastest.plan.describe()} batch {fastest.batch})"
            if fastest
            else ""
        )
        res.notes.append(
            f"no plan meets the latency bound (TTFT <= {slo.ttft_s:g} s, TPOT <= "
            f"{slo.tpot_s * 1e3:g} ms): {res.over_slo} fit but miss it, {res.over_capacity} "
            f"over capacity of {res.considered}{best}"
        )
    elif not res.top:
        res.notes.append(f"no plan fits: {res.over_capacity} over capacity of {res.considered}")
    return res


def _check_search(chips: object, top: object, ranks_per_chip: object) -> None:
    inputs.check("chips", chips)
    inputs.check("top", top)
    inputs.check("ranks-per-chip", ranks_per_chip)
