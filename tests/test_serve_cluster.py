"""Replicas behind a router, disaggregated prefill/decode pools, the rate search and sweeps."""

from __future__ import annotations

from collections import Counter

import pytest

from trnsim.errors import ConfigError
from trnsim.perf import ParallelPlan, comm
from trnsim.serve import (
    SLO,
    Deployment,
    EngineConfig,
    Lengths,
    OpenLoop,
    Synthetic,
    max_rate,
    simulate,
    sweep,
)

H100 = ParallelPlan(tp=1, zero=0, recompute="none")
ENG = EngineConfig(max_model_len=8192)
SYN = Synthetic(Lengths(600, 100, "uniform"), Lengths(60, 20, "uniform"), seed=2)


def replicas_of(res) -> Counter:
    return Counter(r[1] for r in res.metrics.records)


def test_round_robin_deals_requests_in_turn():
    dep = Deployment("llama-3.1-8b", "p5.48xlarge", H100, replicas=3)
    res = simulate(dep, OpenLoop(6, 90, lengths=SYN), ENG, router="round-robin", keep_records=True)
    assert replicas_of(res) == Counter({0: 30, 1: 30, 2: 30})
    by_id = sorted(res.metrics.records)
    assert [r[1] for r in by_id[:6]] == [0, 1, 2, 0, 1, 2]


def test_least_loaded_balances_and_affinity_groups_prefixes():
    syn = Synthetic(Lengths(600), Lengths(60), shared_prefix=512, prefix_groups=2, seed=2)
    dep = Deployment("llama-3.1-8b", "p5.48xlarge", H100, replicas=4)
    wl = OpenLoop(20, 200, lengths=syn)
    ll = simulate(dep, wl, ENG, router="least-loaded", keep_records=True)
    assert len(replicas_of(ll)) == 4
    aff = simulate(dep, wl, ENG, router="prefix-affinity", keep_records=True)
    assert len(replicas_of(aff)) <= 2  # two prefixes, each pinned to one replica
    assert aff.summary()["prefix_hit_rate"] >= ll.summary()["prefix_hit_rate"]


def test_disaggregated_pools_move_the_kv_over_the_fabric():
    dep = Deployment("llama-3.1-8b", "p5.48xlarge", H100, replicas=2)
    res = simulate(dep, OpenLoop(1, 10, "constant", lengths=SYN), ENG, disagg=(1, 1))
    s = res.summary()
    assert s["kv_transfers"]["count"] == 10 and res.metrics.done == 10
    lim = res.limits
    one = comm.group_time("permute", lim.kv_bytes_per_token * 600, 2, 1, dep.system, 1)
    assert 0 < one <= s["kv_transfers"]["mean_s"] * 1.5
    alone = simulate(
        Deployment("llama-3.1-8b", "p5.48xlarge", H100),
        OpenLoop(1, 10, "constant", lengths=SYN),
        ENG,
    )
    # TTFT = prefill there + transfer + a decode step here
    assert s["ttft_s"]["mean"] > alone.summary()["ttft_s"]["mean"]


def test_bad_cluster_settings():
    dep = Deployment("llama-3.1-8b", "p5.48xlarge", H100, replicas=2)
    with pytest.raises(ConfigError, match="add up"):
        simulate(dep, OpenLoop(1, 5, lengths=SYN), ENG, disagg=(1, 2))
    with pytest.raises(ConfigError, match="router"):
        simulate(dep, OpenLoop(1, 5, lengths=SYN), ENG, router="random")
    with pytest.raises(ConfigError, match="has 8"):
        Deployment("llama-3.1-8b", "p5.48xlarge", ParallelPlan(tp=4), replicas=3)


def test_the_rate_search_brackets_the_highest_rate_meeting_the_slo():
    dep = Deployment("llama-3.1-8b", "p5.48xlarge", H100)
    slo = SLO(ttft=0.25)
    found = max_rate(dep, SYN, slo, ENG, requests=150, rel_tol=0.05)
    assert found.rate is not None
    p99 = found.result.metrics.ttft.quantile(0.99)
    assert p99 <= 0.25
    above = [r for r, ok, *_ in found.tried if not ok]
    assert min(above) <= found.rate * 1.05 + 1e-9  # the bracket closed within the tolerance


def test_no_rate_meets_an_impossible_slo():
    dep = Deployment("llama-3.1-8b", "p5.48xlarge", H100)
    found = max_rate(dep, SYN, SLO(tpot=1e-6), ENG, requests=50)
    assert found.rate is None
    assert found.reason.startswith("no rate meets the SLO")
    assert "TPOT p99" in found.reason


def test_sweeps_run_one_load_each():
    dep = Deployment("llama-3.1-8b", "p5.48xlarge", H100)
    pts = sweep(dep, SYN, ENG, rates=(1, 4), requests=40)
    assert [x for x, _ in pts] == [1, 4]
    assert pts[1][1].output_tokens_per_s > pts[0][1].output_tokens_per_s
    with pytest.raises(ConfigError, match="one of the two"):
        sweep(dep, SYN, ENG, rates=(1,), concurrencies=(2,))
