"""Profile outputs: Perfetto trace JSON structure, PNG timeline, the profile CLI, benchmark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from test_timing_costs import copy, load, matmul
from trnsim.cli.main import main
from trnsim.core.timing import schedule
from trnsim.nki.benchmark import benchmark
from trnsim.nki.kernelfile import load_module
from trnsim.report.perfetto import write_trace
from trnsim.report.timeline import write_timeline

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "kernels" / "timing"


@pytest.fixture
def profile():
    return schedule([load(rows=128, cols=512), matmul(), copy()] * 3, "gen4")


def test_trace_has_one_track_per_engine_and_queue_and_a_slice_per_instruction(profile, tmp_path):
    data = json.loads(write_trace(profile, tmp_path / "t.json").read_text())
    events = data["traceEvents"]
    threads = {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    slices = [e for e in events if e.get("ph") == "X"]
    assert len(slices) == profile.instructions == 9
    assert {"tensor", "vector"} <= set(threads.values())
    assert {n for n in threads.values() if n.startswith("dma.q")}
    for s in slices:
        assert s["args"]["loc"] == "k.py:1" and s["dur"] >= 0 and s["tid"] in threads
    last = max(s["ts"] + s["dur"] for s in slices)
    assert last == pytest.approx((profile.total_s - profile.launch_s) * 1e6)


def test_timeline_png_is_written(profile, tmp_path):
    p = write_timeline(profile, tmp_path / "t.png")
    assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_benchmark_returns_the_modelled_latency():
    mod = load_module(str(EXAMPLES / "matmul_tutorial.py"))
    lhsT, rhs = mod.make_inputs(M=2048, K=1024, N=1024, empty=True)
    t2 = benchmark(mod.optimized, lhsT, rhs, target="gen2")
    t4 = benchmark(mod.optimized, lhsT, rhs, target="trn3")
    assert 0 < t4 < t2


def test_profile_cli_json_and_files(tmp_path, capsys):
    trace, png = tmp_path / "x.json", tmp_path / "x.png"
    rc = main(
        [
            "profile",
            str(EXAMPLES / "hbm_copy.py"),
            "--target",
            "gen3",
            "--json",
            "--arg",
            "rows=1024",
            "--arg",
            "cols=1024",
            "--trace",
            str(trace),
            "--png",
            str(png),
        ]
    )
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kernel"] == "hbm_copy" and out["target"] == "neuroncore-v3"
    assert out["total_s"] > 0 and out["engines"]["dma"]["instructions"] == 16
    assert trace.exists() and png.exists()


def test_profile_cli_unknown_kernel_lists_the_kernels(capsys):
    rc = main(["profile", str(EXAMPLES / "matmul_tutorial.py"), "--kernel", "nope", "--no-files"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "tiled" in err and "optimized" in err
