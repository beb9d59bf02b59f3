"""The event loop, tested with a trivial policy, and the fast path (runs of identical decode
steps) against the plain path (one step at a time); the streaming statistics."""

from __future__ import annotations

import math
import tracemalloc
from types import SimpleNamespace

import numpy as np
import pytest

from trnsim.perf import ParallelPlan
from trnsim.serve import (
    SLO,
    ClosedLoop,
    Deployment,
    EngineConfig,
    Lengths,
    OpenLoop,
    Synthetic,
    simulate,
)
from trnsim.serve.api import resolve
from trnsim.serve.engine import StepPlan, kv_precision
from trnsim.serve.loop import Simulation
from trnsim.serve.metrics import Collector, Quantiles, produced_in
from trnsim.serve.workload import Request

H100 = ParallelPlan(tp=1, zero=0, recompute="none")
TRN2 = ParallelPlan(tp=4, ranks_per_chip=4, zero=0, recompute="none")
SYN = Synthetic(Lengths(800, 200, "uniform"), Lengths(120, 40, "uniform"), seed=3)


# --- a trivial policy: one request at a time, all of it ----------------------------------------


def _fifo_schedule(q, kv, lim, qd):
    plan = StepPlan()
    if q.running:
        r = q.running[0]
        if r.pending() > 0:
            plan.chunks.append((r, int(r.pending())))
        else:
            plan.decodes.append(r)
        return plan
    if q.waiting:
        r = q.waiting[0]
        plan.admitted.append((r, []))
        plan.chunks.append((r, r.prompt))
    return plan


FIFO = SimpleNamespace(schedule=_fifo_schedule, horizon=lambda *a: a[-1])


def _sim(reqs, dep, lim, policy=FIFO, **kw):
    m = Collector(keep=True)
    sim = Simulation(dep, lim, policy, kv_precision(dep, EngineConfig()), m, **kw)
    sim.run(iter(reqs))
    return m, sim


def test_the_loop_serves_a_fifo_policy_in_order_with_its_step_times():
    dep = Deployment("llama-3.1-8b", "p5.48xlarge", H100)
    lim = resolve(dep, EngineConfig(max_model_len=8192))
    reqs = [Request(i, 0.0, 100, 3) for i in range(3)]  # all at once
    m, sim = _sim(reqs, dep, lim)
    recs = sorted(m.records, key=lambda r: r[0])
    model = sim.replicas[0].model
    pre, _ = model.step(StepPlan(chunks=[(_live(100), 100)]))
    # each waits for the previous one's prefill and two decode steps
    finish = [r[10] for r in recs]
    assert finish[0] < finish[1] < finish[2]
    assert recs[0][7] == pytest.approx(pre)  # TTFT of the first = its prefill
    assert recs[1][6] == pytest.approx(finish[0])  # queued until the first finished
    assert m.done == 3 and m.output_tokens == 9


def _live(prompt):
    from trnsim.serve.engine import Live

    return Live(Request(0, 0.0, prompt, 2), 2, 0.0)


def test_arrivals_at_a_step_end_are_seen_by_the_next_step():
    """ARRIVE events sort before step ends at equal times (vLLM adds requests that arrived
    during a step before scheduling the next)."""
    dep = Deployment("llama-3.1-8b", "p5.48xlarge", H100)
    lim = resolve(dep, EngineConfig(max_model_len=8192))
    m0, _ = _sim([Request(0, 0.0, 100, 1)], dep, lim)
    t_end = m0.records[0][10]
    m, _ = _sim([Request(0, 0.0, 100, 1), Request(1, t_end, 100, 1)], dep, lim)
    second = sorted(m.records)[1]
    assert second[6] == pytest.approx(0.0)  # scheduled at once, no queueing


# --- fast path vs plain path --------------------------------------------------------------------


def _records(dep, wl, eng, **kw):
    return sorted(simulate(dep, wl, eng, keep_records=True, **kw).metrics.records)


def test_neuron_runs_equal_step_by_step():
    """Padded decode shapes are constant within a run: runs of k steps are k single steps."""
    dep = Deployment("llama-3.1-8b", "trn2.48xlarge", TRN2)
    eng = EngineConfig(policy="neuron", max_model_len=4096, sampling="device", max_num_seqs=16)
    wl = OpenLoop(1.5, 60, lengths=SYN)
    fast, plain = _records(dep, wl, eng), _records(dep, wl, eng, max_run=1)
    for a, b in zip(fast, plain, strict=True):
        assert a[:6] == b[:6]
        for x, y in zip(a[6:11], b[6:11], strict=True):
            assert x == pytest.approx(y, rel=1e-9, abs=1e-12)


def test_vllm_runs_match_step_by_step_closely():
    """Unpadded runs are timed by the four-point quadrature of the step time over the run;
    step by step, each step is timed alone: they agree to well under a percent (exactly here:
    a decode step's time is linear in its context). A run cut by an arrival ends at the first
    step boundary at or after it, never before: no request is scheduled before it arrives."""
    dep = Deployment("llama-3.1-8b", "p5.48xlarge", H100)
    eng = EngineConfig(max_model_len=8192)
    wl = OpenLoop(8.0, 80, lengths=SYN)
    fast, plain = _records(dep, wl, eng), _records(dep, wl, eng, max_run=1)
    for a, b in zip(fast, plain, strict=True):
        assert a[6] >= 0  # queueing delay
        assert a[9] == pytest.approx(b[9], rel=5e-3)  # E2E


def test_closed_loop_keeps_its_users_busy():
    dep = Deployment("llama-3.1-8b", "p5.48xlarge", H100)
    res = simulate(dep, ClosedLoop(4, 40, SYN), EngineConfig(max_model_len=8192), keep_records=True)
    recs = res.metrics.records
    assert res.metrics.done == 40
    events = sorted([(r[2], 1) for r in recs] + [(r[10], -1) for r in recs])
    live = peak = 0
    for _t, d in events:
        live += d
        peak = max(peak, live)
    assert peak == 4


def test_the_same_seed_gives_the_same_run():
    dep = Deployment("llama-3.1-8b", "p5.48xlarge", H100)
    wl = OpenLoop(5.0, 50, lengths=SYN)
    assert _records(dep, wl, EngineConfig(max_model_len=8192)) == _records(
        dep, wl, EngineConfig(max_model_len=8192)
    )


def test_goodput_counts_requests_within_every_objective():
    dep = Deployment("llama-3.1-8b", "p5.48xlarge", H100)
    res = simulate(
        dep,
        OpenLoop(20.0, 200, lengths=SYN),
        EngineConfig(max_model_len=8192),
        slo=SLO(ttft=0.05, tpot=0.012),
        keep_records=True,
    )
    good = sum(1 for r in res.metrics.records if r[7] <= 0.05 and (r[8] or 0) <= 0.012)
    assert res.metrics.good == good
    assert 0 < good < 200


def test_a_benchmark_window_drops_unfinished_requests():
    dep = Deployment("llama-3.1-8b", "p5.48xlarge", H100)
    wl = OpenLoop(4.0, 400, "constant", lengths=SYN)
    res = simulate(dep, wl, EngineConfig(max_model_len=8192), max_seconds=20.0)
    assert res.metrics.duration == 20.0
    assert 60 < res.metrics.done < 80  # 80 sent, the last few still running


def test_memory_stays_bounded_by_the_live_requests():
    """Per-request records are streamed, not kept: a run 5x as long peaks at about the same
    memory (the quantile sketches have bounded bins)."""
    dep = Deployment("llama-3.1-8b", "trn2.48xlarge", TRN2)
    eng = EngineConfig(policy="neuron", max_model_len=4096, sampling="device", max_num_seqs=16)

    def peak(n):
        tracemalloc.start()
        simulate(dep, OpenLoop(1.0, n, lengths=SYN), eng)
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return top

    small, big = peak(300), peak(1500)
    assert big < 1.5 * small


# --- the quantile sketch ------------------------------------------------------------------------


def test_quantiles_match_nearest_rank_within_the_bin_width():
    rng = np.random.default_rng(1)
    x = rng.lognormal(-3, 1.2, 5000)
    q = Quantiles()
    for v in x:
        q.add(float(v))
    s = np.sort(x)
    for p in (0.5, 0.9, 0.95, 0.99):
        exact = s[math.ceil(p * len(s)) - 1]
        assert q.quantile(p) == pytest.approx(exact, rel=2e-4)
    assert q.mean == pytest.approx(x.mean(), rel=1e-12)
    assert (q.lo, q.hi) == (s[0], s[-1])


def test_weighted_quantiles_and_zeros():
    q = Quantiles()
    q.add(0.0, 3)
    q.add(1.0, 1)
    assert q.quantile(0.5) == 0.0 and q.quantile(0.9) == pytest.approx(1.0, rel=1e-4)
    assert Quantiles().quantile(0.5) is None


def test_steady_throughput_counts_the_tokens_produced_in_the_window():
    """A steady-state window counts the output tokens produced in it (first token at TTFT,
    the rest evenly to the finish), not those of the requests that finish in it: with long
    requests, finishing lags arrivals by the end-to-end latency."""
    assert produced_in(11, 1.0, 11.0, 0.0, 6.0) == pytest.approx(6.0)  # first + 10 x 5/10
    assert produced_in(11, 1.0, 11.0, 11.0, 20.0) == 0.0
    assert produced_in(1, 3.0, 3.0, 0.0, 6.0) == 1.0
    dep = Deployment("llama-3.1-8b", "p5.48xlarge", H100)
    wl = OpenLoop(4.0, 400, lengths=Synthetic(Lengths(200), Lengths(2000)))
    res = simulate(dep, wl, EngineConfig(max_model_len=8192), steady=(70.0, 100.0))
    # each request takes about 60 s (2,000 tokens at 29 ms): by 70 s the load is steady, and
    # the window sees the offered rate; the requests finishing in it are fewer
    offered = 4.0 * 2000
    assert res.output_tokens_per_s == pytest.approx(offered, rel=0.1)
    assert res.metrics.steady_done * 2000 / 30 < 0.9 * res.output_tokens_per_s
