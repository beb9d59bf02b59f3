"""The highest request rate that meets p99 latency objectives, and load sweeps.

``max_rate``: Poisson (or the given arrival process) runs of the same seeded requests at
different rates. With a fixed seed the arrival times of a run at rate ``r`` are those at rate
1 divided by ``r``, so the runs differ only in load. A rate meets the SLO when the p99s of the
requests arriving in the run's steady part (after the first quarter) are within it and the
server keeps up (``KEEP_UP``). The search first serves the requests one at a time: if even
then a p99 misses its objective, no rate meets it and the result says why. Otherwise it
doubles the rate until the SLO is missed and bisects (in log space) until the bracket is
within ``rel_tol``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from trnsim.errors import ConfigError
from trnsim.serve.api import ServeResult, simulate
from trnsim.serve.engine import Deployment, EngineConfig
from trnsim.serve.metrics import SLO
from trnsim.serve.workload import ClosedLoop, OpenLoop, Synthetic

# A rate is met only if the server keeps up with it: in the steady part of the run (from the
# arrival of the first quarter of the requests to the last arrival) it produces at least this
# fraction of the output tokens of the requests that arrive in it (a finite run at a rate
# beyond capacity can still show short latencies: the queue has not had time to grow).
KEEP_UP = 0.9


@dataclass
class RateSearch:
    """The search's outcome: ``rate`` (requests/s, ``None`` if no rate meets the SLO), the
    run at that rate, every rate tried (rate, met, p99 TTFT, p99 TPOT, p99 E2E) and, when no
    rate meets the SLO, ``reason``."""

    slo: SLO
    rate: float | None
    result: ServeResult | None
    tried: list[tuple[float, bool, float | None, float | None, float | None]] = field(
        default_factory=list
    )
    reason: str = ""


def misses(res: ServeResult, slo: SLO) -> list[str]:
    """The p99 objectives ``res`` misses, each as 'TTFT p99 1.2 s > 1 s'."""
    m = res.metrics
    out = []
    for name, q, limit in (
        ("TTFT", m.ttft, slo.ttft),
        ("TPOT", m.tpot, slo.tpot),
        ("E2E", m.e2e, slo.e2e),
    ):
        if limit is None:
            continue
        p99 = q.quantile(0.99)
        if p99 is not None and p99 > limit:
            out.append(f"{name} p99 {p99 * 1e3:.4g} ms > {limit * 1e3:.4g} ms")
    return out


def max_rate(
    dep: Deployment,
    lengths: Synthetic,
    slo: SLO,
    engine: EngineConfig | None = None,
    *,
    requests: int = 500,
    arrival: str = "poisson",
    burstiness: float = 1.0,
    rel_tol: float = 0.02,
    router: str = "least-loaded",
    disagg: tuple[int, int] | None = None,
    advance: Callable[[], None] | None = None,
) -> RateSearch:
    """The highest rate meeting ``slo`` at p99 (module docstring)."""
    if not slo.any:
        raise ConfigError("rate search: give at least one objective (TTFT, TPOT or E2E)")
    if not 0 < rel_tol < 1:
        raise ConfigError(f"rate search: rel_tol must be in (0, 1), got {rel_tol}")
    kw = dict(router=router, disagg=disagg, slo=slo)
    out = RateSearch(slo, None, None)
    alone = simulate(dep, ClosedLoop(1, min(requests, 50), lengths), engine, **kw)
    if advance:
        advance()
    missed = misses(alone, slo)
    if missed:
        out.reason = (
            "no rate meets the SLO: even one request at a time misses it ("
            + "; ".join(missed)
            + ")"
        )
        return out

    def run(rate: float) -> tuple[bool, ServeResult]:
        span = requests / rate
        res = simulate(
            dep,
            OpenLoop(rate, requests, arrival, burstiness, lengths),
            engine,
            steady=(0.25 * span, span),
            **kw,
        )
        if advance:
            advance()
        m = res.metrics
        keeps_up = m.steady_tokens >= KEEP_UP * m.steady_demand
        ok = keeps_up and not misses(res, slo)
        out.tried.append(
            (rate, ok, m.ttft.quantile(0.99), m.tpot.quantile(0.99), m.e2e.quantile(0.99))
        )
        return ok, res

    e2e = alone.metrics.e2e.mean or 1.0
    lo_rate, lo_res = None, None
    rate = max(dep.replicas / e2e, 1e-6)
    for _ in range(40):
        ok, res = run(rate)
        if not ok:
            hi_rate = rate
            break
        lo_rate, lo_res = rate, res
        rate *= 2
    else:
        raise ConfigError("rate search: the SLO holds at every rate tried (2^40 x); check it")
    if lo_rate is None:  # even the first rate misses: search down
        for _ in range(40):
            rate /= 2
            ok, res = run(rate)
            if ok:
                lo_rate, lo_res = rate, res
                break
            hi_rate = rate
        else:
            out.reason = "no rate meets the SLO: it is missed at every rate down to 1e-12 of load"
            return out
    while hi_rate / lo_rate > 1 + rel_tol:
        mid = (lo_rate * hi_rate) ** 0.5
        ok, res = run(mid)
        if ok:
            lo_rate, lo_res = mid, res
        else:
            hi_rate = mid
    out.rate, out.result = lo_rate, lo_res
    return out


def sweep(
    dep: Deployment,
    lengths: Synthetic,
    engine: EngineConfig | None = None,
    *,
    rates: tuple[float, ...] = (),
    concurrencies: tuple[int, ...] = (),
    requests: int = 500,
    arrival: str = "poisson",
    burstiness: float = 1.0,
    router: str = "least-loaded",
    disagg: tuple[int, int] | None = None,
    slo: SLO | None = None,
    advance: Callable[[], None] | None = None,
) -> list[tuple[float, ServeResult]]:
    """One run per rate (open loop) or per concurrency (closed loop): (load, result)."""
    if bool(rates) == bool(concurrencies):
        raise ConfigError("sweep: give rates or concurrencies (one of the two)")
    out = []
    for x in rates or concurrencies:
        wl = (
            OpenLoop(x, requests, arrival, burstiness, lengths)
            if rates
            else ClosedLoop(int(x), requests, lengths)
        )
        out.append((x, simulate(dep, wl, engine, router=router, disagg=disagg, slo=slo)))
        if advance:
            advance()
    return out
