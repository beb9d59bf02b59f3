"""``simulate``: one serving run, and ``ServeResult``: what it measured."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trnsim.errors import ConfigError
from trnsim.perf.cost import run_cost
from trnsim.serve.engine import Deployment, EngineConfig, Limits, kv_precision
from trnsim.serve.loop import ROUTERS, ReplicaStats, Simulation, TraceLog
from trnsim.serve.metrics import SLO, Collector
from trnsim.serve.policies import policy as get_policy
from trnsim.serve.workload import ClosedLoop, OpenLoop, Trace

Workload = OpenLoop | ClosedLoop | Trace


@dataclass
class ServeResult:
    """A finished run: the deployment and engine limits, the collector's statistics, each
    replica's counters, the trace log (if asked for) and the assumptions made."""

    deployment: Deployment
    limits: Limits
    workload: str
    metrics: Collector
    replicas: list[ReplicaStats]
    end_s: float
    slo: SLO
    router: str
    disagg: tuple[int, int] | None
    transfers: int = 0
    transfer_s: float = 0.0
    trace: TraceLog | None = None
    assumptions: list[str] = field(default_factory=list)

    @property
    def chips(self) -> int:
        return self.deployment.chips

    @property
    def output_tokens_per_s(self) -> float:
        d = self.metrics.duration
        return self.metrics.throughput_tokens / d if d > 0 else 0.0

    @property
    def requests_per_s(self) -> float:
        d = self.metrics.duration
        return self.metrics.done / d if d > 0 else 0.0

    def usd_per_million_tokens(self) -> float | None:
        """Cost of the deployment's chips per million output tokens at this run's rate."""
        tps = self.output_tokens_per_s
        dep = self.deployment
        cost = run_cost(dep.system.chip, dep.chips, 1.0, dep.cost_inputs)
        if cost.usd is None or tps <= 0:
            return None
        return cost.usd / tps * 1e6

    def summary(self) -> dict[str, Any]:
        """Every figure of the run, SI units (seconds, tokens/s, fractions)."""
        m = self.metrics
        d = m.duration
        stats = self.replicas
        tokens = sum(s.tokens for s in stats)
        padded = sum(s.padded_tokens for s in stats)
        usable = self.limits.num_blocks - 1
        kv_mean = (
            sum(s.kv_block_seconds for s in stats) / (usable * len(stats) * self.end_s)
            if self.end_s > 0
            else 0.0
        )
        prompt = m.input_tokens
        out = {
            "requests": {
                "completed": m.done,
                "rejected_too_long": m.rejected,
                "output_capped": m.capped,
            },
            "duration_s": d,
            "throughput": {
                "requests_per_s": self.requests_per_s,
                "output_tokens_per_s": self.output_tokens_per_s,
                "total_tokens_per_s": (m.input_tokens + m.output_tokens) / d if d else 0.0,
                "output_tokens_per_s_per_chip": self.output_tokens_per_s / self.chips,
            },
            "ttft_s": m.ttft.summary(),
            "tpot_s": m.tpot.summary(),
            "itl_s": m.itl.summary(),
            "e2e_s": m.e2e.summary(),
            "queue_s": m.queue.summary(),
            "goodput": {
                "slo": {"ttft_s": self.slo.ttft, "tpot_s": self.slo.tpot, "e2e_s": self.slo.e2e},
                "requests_per_s": m.good / d if d else 0.0,
                "fraction": m.good / m.done if m.done else 0.0,
                "output_tokens_per_s": m.good_tokens / d if d else 0.0,
            },
            "padding_waste": 1 - tokens / padded if padded else 0.0,
            "kv_utilization": {
                "mean": kv_mean,
                "peak": max((s.kv_peak for s in stats), default=0) / usable,
                "blocks": usable,
                "block_tokens": self.limits.block_size,
            },
            "preemptions": sum(s.preemptions for s in stats),
            "prefix_hit_rate": m.cached_tokens / prompt if prompt else 0.0,
            "steps": {
                "prefill": sum(s.prefill_steps for s in stats),
                "decode": sum(s.decode_steps for s in stats),
                "mixed": sum(s.mixed_steps for s in stats),
                "busy_fraction": (
                    sum(s.busy_s for s in stats) / (len(stats) * self.end_s) if self.end_s else 0.0
                ),
            },
            "usd_per_million_output_tokens": self.usd_per_million_tokens(),
            "chips": self.chips,
        }
        if self.disagg is not None:
            out["kv_transfers"] = {
                "count": self.transfers,
                "mean_s": self.transfer_s / self.transfers if self.transfers else 0.0,
            }
        return out

    def as_dict(self) -> dict[str, Any]:
        lim = self.limits
        return {
            "deployment": self.deployment.describe(),
            "model": self.deployment.model.name,
            "system": self.deployment.system.name,
            "plan": {
                "tp": self.deployment.plan.tp,
                "pp": self.deployment.plan.pp,
                "ep": self.deployment.plan.ep,
                "ranks_per_chip": self.deployment.plan.ranks_per_chip,
                "replicas": self.deployment.replicas,
            },
            "engine": {
                "policy": lim.policy,
                "form": lim.form,
                "max_num_seqs": lim.max_num_seqs,
                "max_num_batched_tokens": lim.max_num_batched_tokens,
                "max_model_len": lim.max_model_len,
                "block_size": lim.block_size,
                "prefix_caching": lim.prefix_caching,
                "kv_blocks": lim.num_blocks,
                "max_kv_concurrent": lim.max_kv_concurrent,
                "prefill_buckets": list(lim.prefill_buckets) if lim.prefill_buckets else None,
                "batch_buckets": list(lim.batch_buckets) if lim.batch_buckets else None,
                "context_buckets": list(lim.context_buckets) if lim.context_buckets else None,
                "sampling": lim.sampling,
                "async_scheduling": lim.async_scheduling,
            },
            "router": self.router,
            "disaggregated": list(self.disagg) if self.disagg else None,
            "workload": self.workload,
            "summary": self.summary(),
            "assumptions": self.assumptions,
        }


def resolve(dep: Deployment, engine: EngineConfig) -> Limits:
    """The engine's limits for ``dep`` (its policy's defaults, KV capacity, checks)."""
    most = dep.model.max_seq_len
    if engine.max_model_len is not None and engine.max_model_len > most:
        raise ConfigError(
            f"max_model_len {engine.max_model_len} exceeds {dep.model.name}'s maximum context "
            f"({most} tokens; vLLM refuses a longer one)"
        )
    if engine.policy != "trtllm":
        for name in ("capacity_policy", "kv_free_fraction"):
            if getattr(engine, name) is not None:
                raise ConfigError(
                    f"engine: {name} is TensorRT-LLM's (policy trtllm), not {engine.policy}'s"
                )
    return get_policy(engine.policy).resolve(dep, engine, kv_precision(dep, engine))


def simulate(
    dep: Deployment,
    workload: Workload,
    engine: EngineConfig | None = None,
    *,
    router: str = "least-loaded",
    disagg: tuple[int, int] | None = None,
    slo: SLO | None = None,
    keep_records: bool = False,
    on_record: Callable[[tuple], None] | None = None,
    trace: TraceLog | None = None,
    on_done: Callable[[int], None] | None = None,
    max_run: int = 1 << 30,
    max_seconds: float | None = None,
    steady: tuple[float, float] | None = None,
) -> ServeResult:
    """Serve ``workload`` on ``dep`` with ``engine`` (module ``trnsim.serve`` docstring).

    ``disagg=(p, d)``: ``p`` prefill and ``d`` decode replicas (``p + d`` must equal
    ``dep.replicas``). ``max_run`` caps the steps run at once (1: step by step, the plain
    path the fast one is tested against). ``max_seconds``: a benchmark window (guidellm's
    ``--max-seconds``): the run stops then, requests unfinished are not counted, and rates
    are per second of the window. ``steady=(t0, t1)``: steady-state statistics: latencies of
    the requests arriving in [t0, t1], throughput of the tokens produced in it."""
    engine = engine or EngineConfig()
    if router not in ROUTERS:
        raise ConfigError(f"router must be one of {', '.join(ROUTERS)}, got {router!r}")
    if disagg is not None:
        p, d = disagg
        if p < 1 or d < 1 or p + d != dep.replicas:
            raise ConfigError(
                f"disaggregated serving: {p} prefill + {d} decode replicas must be >= 1 each and "
                f"add up to the deployment's {dep.replicas} replicas"
            )
    if max_run < 1:
        raise ConfigError(f"max_run must be >= 1, got {max_run}")
    if max_seconds is not None and not max_seconds > 0:
        raise ConfigError(f"max_seconds must be > 0, got {max_seconds}")
    prec = kv_precision(dep, engine)
    lim = resolve(dep, engine)
    if lim.streams > 1 and disagg is not None:
        raise ConfigError(
            "disaggregated serving with pipeline micro-batches (trtllm, pp > 1) is not modelled"
        )
    collector = Collector(slo, on_record, keep_records)
    collector.window = max_seconds
    if steady is not None:
        if not 0 <= steady[0] < steady[1]:
            raise ConfigError(f"steady window must be 0 <= t0 < t1, got {steady}")
        collector.steady = steady
    sim = Simulation(
        dep,
        lim,
        get_policy(engine.policy),
        prec,
        collector,
        router=router,
        disagg=disagg,
        max_run=max_run,
        trace=trace,
        on_done=on_done,
    )
    closed = workload.concurrency if isinstance(workload, ClosedLoop) else None
    end = sim.run(workload.requests_iter(), closed, max_seconds or math.inf)
    assumptions = list(lim.notes)
    assumptions.append(sim.replicas[0].model.sc.stack.describe())
    if lim.sampling == "host":
        assumptions.append(
            "sampling on the host: a fitted round trip per step and cost per logit sampled "
            "(trnsim.serve.fitted, serving.md K3)"
        )
    if dep.speculative is not None:
        assumptions.append(
            "speculative decoding: every decode step yields the expected tokens "
            f"({sim.replicas[0].model.per_step:.3f}) per sequence"
        )
    return ServeResult(
        deployment=dep,
        limits=lim,
        workload=workload.describe(),
        metrics=collector,
        replicas=[r.stats for r in sim.replicas],
        end_s=end,
        slo=slo or SLO(),
        router=router,
        disagg=disagg,
        transfers=sim.transfers,
        transfer_s=sim.transfer_s,
        trace=trace,
        assumptions=assumptions,
    )
