"""Serving plans are chosen under an explicit latency bound (``trnsim.perf.slo``).

Before, ``compare-workload --mode infer`` picked the plan with the most tokens/s whatever its
latency: gpt-oss-120b on the Trn3 Gen2 UltraServer came out at batch 256 with a 32 s TTFT.
"""

from __future__ import annotations

import json

import pytest

from trnsim.cli.main import main
from trnsim.errors import InputError
from trnsim.perf.compare import compare
from trnsim.perf.planner import search_inference
from trnsim.perf.slo import DEFAULT_SLO, ServingSLO


@pytest.fixture(autouse=True)
def _quiet(monkeypatch, tmp_path):
    monkeypatch.setenv("TRNSIM_PROGRESS", "0")
    monkeypatch.chdir(tmp_path)


def test_the_default_bound_is_mlperfs_and_says_so():
    assert (DEFAULT_SLO.ttft_s, DEFAULT_SLO.tpot_s) == (2.0, 0.2)
    assert "MLPerf" in DEFAULT_SLO.source and "inference_rules.adoc" in DEFAULT_SLO.source
    assert "TTFT <= 2,000 ms, TPOT <= 200 ms" in DEFAULT_SLO.describe()
    with pytest.raises(InputError, match="rule slo-ttft"):
        ServingSLO(ttft_s=0)


@pytest.mark.slow
def test_compare_workload_serving_rows_meet_the_bound(capsys):
    assert main(["compare-workload", "--model", "gpt-oss-120b", "--mode", "infer", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["slo"] == DEFAULT_SLO.as_dict()
    for row in data["rows"]:
        assert row["fits"] and row["slo_met"]
        assert row["ttft_s"] <= 2.0 and row["tpot_s"] <= 0.2, row


def test_the_bound_is_printed_with_the_result(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    argv = ["compare-workload", "--model", "llama-3.1-8b", "--mode", "infer"]
    assert main([*argv, "--systems", "trn3-gen2", "--slo-ttft", "0.5"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "latency bound: TTFT <= 500 ms, TPOT <= 200 ms" in out
    assert "TTFT given; the other: MLPerf" in out


def test_a_tighter_bound_never_gives_more_throughput():
    kw = dict(input_tokens=2048, output_tokens=512, top=1)
    loose = search_inference("llama-3.1-70b", "trn3-gen2", 144, slo=None, **kw)
    bound = search_inference("llama-3.1-70b", "trn3-gen2", 144, **kw)
    tight = search_inference("llama-3.1-70b", "trn3-gen2", 144, slo=ServingSLO(0.5, 0.05), **kw)
    rate = [r.top[0].throughput_tokens_per_s for r in (loose, bound, tight)]
    assert rate[0] >= rate[1] >= rate[2]
    assert loose.top[0].ttft_s > 2.0  # the unbounded pick is one nobody would deploy
    assert tight.top[0].ttft_s <= 0.5 and tight.top[0].tpot_s <= 0.05
    assert bound.over_slo > 0 and loose.over_slo == 0


def test_compare_api_takes_the_bound():
    rows = compare(
        "llama-3.1-8b", "infer", ("trn3-gen2",), slo=ServingSLO(ttft_s=1e-6, tpot_s=1e-6)
    )
    assert not rows[0].fits and rows[0].plan_summary == "no plan meets the latency bound"
    assert "no plan meets the latency bound" in rows[0].assumptions[0]


def test_infer_reports_whether_it_meets_the_bound(capsys):
    argv = ["infer", "--model", "llama-3.1-70b", "--tp", "8", "--batch", "64"]
    assert main([*argv, "--input-tokens", "8192", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ttft_s"] > 2 and data["slo"]["met"] is False
    assert any("NOT met" in a for a in data["assumptions"])


def test_the_chart_shows_latency_and_the_bound(monkeypatch, tmp_path):
    from trnsim.report import plots

    seen = {}

    def save(fig, path, flag="png"):
        seen["axes"] = [
            (ax.get_ylabel(), [ln.get_ydata()[0] for ln in ax.get_lines()])
            for ax in fig.axes
            if ax.get_visible()
        ]
        return path

    monkeypatch.setattr(plots, "save", save)
    rows = compare("llama-3.1-8b", "infer", ("trn3-gen2", "gb300-nvl72"))
    plots.comparison_chart(rows, tmp_path / "c.png", "t", slo=DEFAULT_SLO)
    axes = dict(seen["axes"])
    assert axes["TTFT (s)"] == [2.0] and axes["TPOT (ms)"] == [200.0]
    assert "tokens/s per chip" in axes
