"""Set L (serving under load, ``trnsim.serve.calibration``): every published figure has a
scenario, every prediction is a real number, and the scenarios keep what the sources say."""

from __future__ import annotations

import math

import pytest

from trnsim.serve import calibration as cal
from trnsim.serve import simulate


def test_every_row_has_a_scenario_and_the_scenarios_build():
    sc = cal.scenarios()
    rows = cal.rows()
    assert {r.scenario for r in rows} == set(sc)
    assert len({(r.scenario, r.metric) for r in rows}) == len(rows)
    # every figure of serving.md K1 (5 x 5 + 2), K2 (5) and K3 (7 x 3)
    assert len(rows) == 27 + 5 + 21
    for name, s in sc.items():
        dep, wl, eng, _kw = s.build(0.05)
        assert dep.model.name and wl.describe() and eng.policy, name


def test_the_stored_runner_overheads_are_the_fit():
    """Stored constants equal what fit_optimum_host computes from the step model now (refit
    them if trnsim.perf's step model moved)."""
    step, prefill = cal.fit_optimum_host()
    assert pytest.approx(step, rel=2e-3) == cal.OPTIMUM_HOST_STEP_S
    assert pytest.approx(prefill, rel=2e-3) == cal.OPTIMUM_HOST_PREFILL_S


def test_k3_predictions_are_finite_and_the_fit_rows_are_marked():
    res = cal.validate(only=["k3-inf2-a-sync", "k3-inf2-b-sync", "k3-trn2-rate"])
    assert len(res) == 9
    assert all(math.isfinite(r.predicted) and r.predicted > 0 for r in res)
    fits = [r for r in res if "[fit]" in r.label]
    assert [r.metric for r in fits] == ["ITL mean ms", "ITL mean ms"]
    # the fitted constant is exactly the two sync ITLs' difference, so the model's difference
    # of the two (same graphs, host sampling the only change) is the measured one
    a, b = (r.predicted for r in fits)
    assert b - a == pytest.approx(48.22 - 24.51, rel=1e-9)


def test_the_guidellm_window_drops_the_last_arrivals():
    """serving.md K3 "rate 2.46": 2.27 req/s completed of 2.46 offered. In a 120 s window the
    requests of the last ~E2E seconds cannot finish."""
    dep, wl, eng, kw = cal.scenarios()["k3-trn2-rate"].build(1.0)
    res = simulate(dep, wl, eng, **kw)
    done_rate = res.metrics.done / 120.0
    assert 2.1 < done_rate < 2.35


def test_each_scenario_is_simulated_at_its_own_scale():
    """A scenario's rows do not depend on which scenarios ran before it (a replica's
    throughput share of one scenario once leaked into the next one's request count)."""
    alone = cal.validate(0.1, only=["k2-8b-h100"])
    after = cal.validate(0.1, only=["k1-h200-offline", "k2-8b-h100"])[1:]
    assert [r.predicted for r in after] == [r.predicted for r in alone]


def test_a_reused_run_is_the_same_run():
    """``validate(reuse=True)`` (what ``trnsim validate`` asks) gives the rows a fresh run
    gives, and a second call takes the kept run."""
    fresh = cal.validate(0.05, only=["k2-70b-h200"])
    first = cal.validate(0.05, only=["k2-70b-h200"], reuse=True)
    kept = cal._RUNS[("k2-70b-h200", 0.05)]
    again = cal.validate(0.05, only=["k2-70b-h200"], reuse=True)
    assert [r.predicted for r in first] == [r.predicted for r in fresh]
    assert [r.predicted for r in again] == [r.predicted for r in fresh]
    assert cal._RUNS[("k2-70b-h200", 0.05)] is kept


def test_the_host_sampling_fit_rows_are_marked():
    """The host-sampling constants are fitted to the Inf2 B ITLs (one user and full load,
    less the A ones): those two rows are [fit], the B TTFTs and tokens/s check them."""
    fits = {(r.scenario, r.metric) for r in cal.rows() if r.fitted}
    assert ("k3-inf2-b-sync", "ITL mean ms") in fits
    assert ("k3-inf2-b-max", "ITL mean ms") in fits
    assert ("k3-inf2-b-max", "output tok/s") not in fits
    assert ("k3-inf2-b-max", "TTFT mean ms") not in fits


def test_each_k1_run_keeps_its_configs_kv_cache_type():
    # Every K1 config sets trtllm_checkpoint_flags kv_cache_dtype 'fp8' except the B200
    # Interactive ones, which set none: the harness default None leaves the NVFP4 checkpoint's
    # KV cache in the model's fp16 (closed/NVIDIA/configs/B200-SXM-180GBx8/Interactive/
    # llama2-70b.py, code/llmlib/config.py DEFAULT_CHECKPOINT_FLAGS; the mirror in K1_MIRROR).
    sc = cal.scenarios()
    kinds = {}
    for row in cal.K1_ROWS:
        _dep, _wl, eng, _kw = sc[row.name].build(0.01)
        kinds[row.name] = eng.kv_cache_dtype
    assert kinds.pop("k1-b200-interactive") == "fp16"
    assert set(kinds.values()) == {"fp8"}
