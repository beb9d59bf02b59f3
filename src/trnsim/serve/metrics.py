"""What a serving run measures, in memory bounded by the live requests.

Every finished request contributes its TTFT, TPOT, end-to-end latency and queueing delay to
streaming quantile sketches (``Quantiles``), and every step its duration to the inter-token
latency sketch (weighted by the tokens it produced), so a run of millions of requests keeps a
few thousand bins, not millions of samples. Per-request records are streamed to a callback
(the CLI writes them to a file as they finish) and kept in memory only when asked for.

Definitions (as ``vllm bench serve`` and MLPerf's loadgen use them): TTFT = first token time -
arrival; TPOT = (finish - first token) / (output tokens - 1), requests of more than one output
token; ITL = the time between consecutive tokens of a request (one step, or its share of a
speculative step); E2E = finish - arrival; queueing delay = first scheduled - arrival.
Percentiles are nearest-rank over the sketch: exact to within its bin, a relative 1e-4.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

QUANTILES = (0.5, 0.9, 0.95, 0.99)
_LOG_STEP = math.log1p(2e-4)  # bins of relative width 2e-4: a value is within 1e-4 of its bin's


class Quantiles:
    """A streaming, weighted quantile sketch: log-spaced bins (relative width 2e-4), exact
    count, sum, minimum and maximum; zero kept apart."""

    __slots__ = ("bins", "count", "hi", "lo", "total", "zeros")

    def __init__(self) -> None:
        self.bins: dict[int, float] = {}
        self.count = 0.0
        self.total = 0.0
        self.lo = math.inf
        self.hi = -math.inf
        self.zeros = 0.0

    def add(self, x: float, weight: float = 1.0) -> None:
        if weight <= 0:
            return
        self.count += weight
        self.total += x * weight
        if x < self.lo:
            self.lo = x
        if x > self.hi:
            self.hi = x
        if x <= 0:
            self.zeros += weight
            return
        k = math.floor(math.log(x) / _LOG_STEP)
        self.bins[k] = self.bins.get(k, 0.0) + weight

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count else None

    def quantile(self, p: float) -> float | None:
        """Nearest-rank ``p`` quantile (``None`` when empty)."""
        if not self.count:
            return None
        rank = max(p * self.count, 1e-12)
        acc = self.zeros
        if acc >= rank:
            return max(self.lo, 0.0)
        for k in sorted(self.bins):
            acc += self.bins[k]
            if acc >= rank * (1 - 1e-12):
                mid = math.exp((k + 0.5) * _LOG_STEP)
                return min(max(mid, self.lo), self.hi)
        return self.hi

    def summary(self) -> dict[str, float | None]:
        out: dict[str, float | None] = {"mean": self.mean}
        for p in QUANTILES:
            out[f"p{round(p * 100)}"] = self.quantile(p)
        out["max"] = self.hi if self.count else None
        return out


@dataclass(frozen=True, slots=True)
class SLO:
    """Latency objectives (seconds; ``None``: no objective). A request meets them when its
    TTFT, TPOT and E2E are within them; the rate search holds the p99s to them."""

    ttft: float | None = None
    tpot: float | None = None
    e2e: float | None = None

    def __post_init__(self) -> None:
        for name in ("ttft", "tpot", "e2e"):
            v = getattr(self, name)
            if v is not None and not (v > 0 and math.isfinite(v)):
                raise ValueError(f"SLO {name} must be > 0 seconds, got {v}")

    @property
    def any(self) -> bool:
        return any(v is not None for v in (self.ttft, self.tpot, self.e2e))

    def met(self, ttft: float, tpot: float | None, e2e: float) -> bool:
        if self.ttft is not None and ttft > self.ttft:
            return False
        if self.tpot is not None and tpot is not None and tpot > self.tpot:
            return False
        return not (self.e2e is not None and e2e > self.e2e)

    def describe(self) -> str:
        parts = [
            f"{n} <= {v * 1e3:g} ms"
            for n, v in (("TTFT", self.ttft), ("TPOT", self.tpot), ("E2E", self.e2e))
            if v is not None
        ]
        return ", ".join(parts) or "none"


RECORD_FIELDS = (
    "id",
    "replica",
    "arrival_s",
    "input_tokens",
    "output_tokens",
    "cached_tokens",
    "queue_s",
    "ttft_s",
    "tpot_s",
    "e2e_s",
    "finish_s",
    "preemptions",
)


def produced_in(output: int, first: float, finish: float, lo: float, hi: float) -> float:
    """Output tokens of a request produced in [lo, hi]: its first token at ``first``, the
    others evenly over (first, finish] (its steps' times are not kept; within a request they
    vary by a few percent)."""
    n = 1.0 if lo <= first <= hi else 0.0
    if output > 1 and finish > first:
        overlap = min(finish, hi) - max(first, lo)
        if overlap > 0:
            n += (output - 1) * overlap / (finish - first)
    return n


class Collector:
    """Streaming per-request statistics of one run."""

    def __init__(
        self,
        slo: SLO | None = None,
        on_record: Callable[[tuple], None] | None = None,
        keep: bool = False,
    ) -> None:
        self.slo = slo or SLO()
        self.ttft = Quantiles()
        self.tpot = Quantiles()
        self.e2e = Quantiles()
        self.queue = Quantiles()
        self.itl = Quantiles()
        self.done = 0
        self.good = 0
        self.good_tokens = 0
        self.rejected = 0
        self.capped = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.cached_tokens = 0
        self.preemptions = 0
        self.first_arrival = math.inf
        self.last_finish = 0.0
        self.on_record = on_record
        self.records: list[tuple] | None = [] if keep else None

    def arrived(self, t: float) -> None:
        if t < self.first_arrival:
            self.first_arrival = t

    def finished(self, r: Any, t: float) -> None:
        steady = self.steady
        if steady is not None:  # steady-state statistics only (see ``steady``)
            lo, hi = steady
            if lo <= t <= hi:
                self.steady_done += 1
            self.steady_tokens += produced_in(r.output, r.first, t, lo, hi)
            if not lo <= r.arrival <= hi:
                return
            self.steady_demand += r.output
        ttft = r.first - r.arrival
        out = round(r.generated)
        tpot = (t - r.first) / (r.output - 1) if r.output > 1 else None
        e2e = t - r.arrival
        queue = r.scheduled - r.arrival
        self.done += 1
        self.ttft.add(ttft)
        if tpot is not None:
            self.tpot.add(tpot)
        self.e2e.add(e2e)
        self.queue.add(queue)
        self.input_tokens += r.prompt
        self.output_tokens += r.output
        self.cached_tokens += r.cached
        self.preemptions += r.preemptions
        if t > self.last_finish:
            self.last_finish = t
        if self.slo.met(ttft, tpot, e2e):
            self.good += 1
            self.good_tokens += r.output
        rec = (
            r.req.rid,
            r.replica,
            r.arrival,
            r.prompt,
            max(out, r.output),
            r.cached,
            queue,
            ttft,
            tpot,
            e2e,
            t,
            r.preemptions,
        )
        if self.on_record is not None:
            self.on_record(rec)
        if self.records is not None:
            self.records.append(rec)

    window: float | None = None  # a benchmark window (guidellm --max-seconds): the duration
    # Steady state (lo, hi): latency statistics of the requests that arrive in it, throughput of
    # the tokens produced in it (no ramp-up, no drain; as a long MLPerf run measures);
    # ``steady_done``: requests finished in it; ``steady_demand``: output tokens of the
    # requests that arrived in it.
    steady: tuple[float, float] | None = None
    steady_tokens: float = 0.0
    steady_done: int = 0
    steady_demand: int = 0

    @property
    def duration(self) -> float:
        if self.window is not None:
            return self.window
        if self.steady is not None:
            return self.steady[1] - self.steady[0]
        return max(self.last_finish - self.first_arrival, 0.0) if self.done else 0.0

    @property
    def throughput_tokens(self) -> float:
        """Output tokens counted in the throughput (all, or those produced in the steady
        state)."""
        return self.steady_tokens if self.steady is not None else self.output_tokens
