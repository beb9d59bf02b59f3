"""Planner and comparison: best plans fit, are sorted, and the chart is written."""

from trnsim.perf.compare import compare
from trnsim.perf.planner import search_inference, search_training
from trnsim.report.plots import comparison_chart


def test_training_search_returns_fitting_plans_best_first():
    res = search_training("llama-3.1-8b", "trn3-gen1", 64, global_batch=256, seq_len=4096)
    assert res.top and all(e.fits for e in res.top)
    rates = [e.tokens_per_s for e in res.top]
    assert rates == sorted(rates, reverse=True)
    assert all(e.plan.ranks == 64 for e in res.top)


def test_search_reports_when_nothing_fits():
    res = search_training("llama-3.1-405b", "trn3-gen2", 4, global_batch=4, seq_len=4096)
    assert not res.top
    assert res.over_capacity > 0
    assert "no plan fits" in res.notes[0]


def test_inference_latency_objective():
    res = search_inference(
        "llama-3.1-8b",
        "trn3-gen1",
        8,
        input_tokens=512,
        output_tokens=64,
        objective="latency",
        batches=(1, 8),
    )
    tpots = [e.tpot_s for e in res.top]
    assert tpots == sorted(tpots)


def test_compare_and_chart(tmp_path):
    rows = compare(
        "llama-3.1-8b",
        "train",
        ("trn3-gen2", "gb300-nvl72"),
        chips=64,
        global_batch=256,
        seq_len=2048,
    )
    assert [r.system for r in rows] == ["trn3-gen2", "gb300-nvl72"]
    assert all(r.assumptions for r in rows)
    out = comparison_chart(rows, tmp_path / "c.png", "test")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
