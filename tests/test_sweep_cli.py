"""``trnsim sweep`` and ``trnsim tune`` end to end: tables, resuming, Ctrl-C, failed points,
the Pareto chart, bad specs, the process pool against the serial path, and Ray's absence."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from foreground import sigint_default
from trnsim.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
MATMUL = str(ROOT / "examples" / "kernels" / "matmul.py")

# fixed plans: each point is milliseconds of work
SMALL = {
    "verb": "train",
    "fixed": {"model": "llama-3.1-8b", "system": "trn3-gen2", "chips": 64},
    "grid": {"tp": [1, 2, 4, 3], "precision": ["bf16", "fp8"]},
    "pareto": {"x": "memory_per_chip_bytes", "y": "tokens_per_s"},
}


def _write(tmp_path: Path, data: dict, name: str = "spec.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(data))
    return p


def _sweep(capsys, *argv: str) -> dict:
    assert main(["sweep", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_a_sweep_writes_every_point_with_its_outcome_and_the_front(tmp_path, capsys):
    spec = _write(tmp_path, SMALL)
    out = tmp_path / "t.csv"
    doc = _sweep(capsys, str(spec), "--serial", "--out", str(out))
    rows = _rows(out)
    assert len(rows) == doc["rows"] == doc["ran"] == 8
    bad = [r for r in rows if r["tp"] == "3"]  # 32 heads do not split over 3
    assert {r["status"] for r in bad} == {"invalid"} and all(r["exit"] == "2" for r in bad)
    assert all("tp" in r["error"] and r["tokens_per_s"] == "" for r in bad)
    ok = [r for r in rows if r["status"] == "ok"]
    assert len(ok) == 6 and all(float(r["tokens_per_s"]) > 0 for r in ok)
    # the row holds what `trnsim train --json` prints for that point
    assert main(["train", "--model", "llama-3.1-8b", "--chips", "64", "--tp", "2",
                 "--precision", "fp8", "--json"]) == 0  # fmt: skip
    alone = json.loads(capsys.readouterr().out)
    row = next(r for r in ok if r["tp"] == "2" and r["precision"] == "fp8")
    assert float(row["tokens_per_s"]) == alone["tokens_per_s"]
    assert float(row["step_time_s"]) == alone["step_time_s"]
    front = doc["pareto"]["front"]
    xs = [p["memory_per_chip_bytes"] for p in front]
    ys = [p["tokens_per_s"] for p in front]
    assert xs == sorted(xs) and ys == sorted(ys) and len(front) >= 1
    for r in ok:  # nothing in the table beats a front point on both
        for x, y in zip(xs, ys, strict=True):
            assert not (float(r["memory_per_chip_bytes"]) < x and float(r["tokens_per_s"]) > y)
    png = Path(doc["pareto"]["png"])
    assert png == tmp_path / "t.pareto.png" and png.read_bytes()[:4] == b"\x89PNG"


def test_a_second_run_resumes_and_runs_only_the_missing_points(tmp_path, capsys):
    out = tmp_path / "t.jsonl"
    part = _write(tmp_path, {**SMALL, "grid": {"tp": [1, 2], "precision": ["bf16"]}}, "a.json")
    assert _sweep(capsys, str(part), "--serial", "--out", str(out))["ran"] == 2
    full = _write(tmp_path, SMALL, "b.json")
    doc = _sweep(capsys, str(full), "--serial", "--out", str(out))
    assert doc["ran"] == 6 and doc["rows"] == 8
    again = _sweep(capsys, str(full), "--serial", "--out", str(out), "--retry-failed")
    assert again["ran"] == 2  # the two invalid points, run again


def test_the_pool_gives_the_serial_table_byte_for_byte(tmp_path, capsys):
    spec = _write(tmp_path, SMALL)
    _sweep(capsys, str(spec), "--serial", "--out", str(tmp_path / "s.csv"))
    doc = _sweep(capsys, str(spec), "--workers", "2", "--out", str(tmp_path / "p.csv"))
    assert doc["backend"] == "pool"
    assert (tmp_path / "s.csv").read_bytes() == (tmp_path / "p.csv").read_bytes()


def test_dry_run_lists_points_and_runs_none(tmp_path, capsys):
    spec = _write(tmp_path, SMALL)
    assert main(["sweep", str(spec), "--dry-run", "--json", "--out", str(tmp_path / "t.csv")]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["points"]) == len(doc["to_run"]) == 8
    assert not (tmp_path / "t.csv").exists()


# ---- bad input: one line, exit 2, nothing written ----------------------------------------------


def _cli(*argv: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trnsim", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ({"verb": "train", "grid": {"tpp": [1]}}, "no parameter 'tpp'"),
        ({"verb": "train", "grid": {"tp": []}}, "has no values"),
        ({"verb": "train", "grid": {"tp": ["x"]}}, "tp: 'x' is not a number"),
        ({"verb": "serve2"}, "cannot be swept"),
    ],
)
def test_a_bad_spec_is_one_line_and_exit_2(tmp_path, capsys, data, needle):
    spec = _write(tmp_path, data)
    assert main(["sweep", str(spec), "--out", str(tmp_path / "t.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1 and err.startswith("trnsim sweep: error:")
    assert not (tmp_path / "t.csv").exists()


def test_an_unreachable_ray_address_is_one_line_and_exit_2(tmp_path):
    pytest.importorskip("ray", reason="the ray extra (without it --ray says how to install it)")
    spec = _write(tmp_path, SMALL)
    t0 = time.monotonic()
    proc = _cli("sweep", str(spec), "--ray", "127.0.0.1:9", "--out", str(tmp_path / "t.csv"))
    assert proc.returncode == 2 and time.monotonic() - t0 < 60
    err = proc.stderr.strip()
    assert len(err.splitlines()) == 1 and "--ray 127.0.0.1:9: cannot reach a Ray cluster" in err
    assert not (tmp_path / "t.csv").exists()


def test_without_ray_everything_else_works_and_ray_says_how_to_install(tmp_path):
    """Ray, pyarrow and PyYAML blocked: trnsim imports, every verb's parser builds, a JSON
    sweep runs; --ray, .parquet and .yaml each name the extra (exit 2)."""
    spec = _write(tmp_path, {**SMALL, "grid": {"tp": [1]}, "pareto": None})
    block = (
        "import sys\n"
        "for m in ('ray', 'pyarrow', 'yaml'): sys.modules[m] = None\n"
        "from trnsim.cli.main import build_parser, main\n"
        "build_parser()\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    run = [sys.executable, "-c", block, "sweep", str(spec), "--json"]
    ok = subprocess.run([*run, "--serial", "--out", str(tmp_path / "t.csv")],
                        capture_output=True, text=True, timeout=120)  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    for extra, needle in (
        (["--ray"], "need ray"),
        (["--serial", "--out", str(tmp_path / "t.parquet")], "need pyarrow"),
    ):
        proc = subprocess.run([*run, *extra], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2
        assert needle in proc.stderr and 'pip install "trnsim[ray]"' in proc.stderr
    yml = tmp_path / "s.yaml"
    yml.write_text("verb: train\n")
    proc = subprocess.run([sys.executable, "-c", block, "sweep", str(yml)], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 2 and "need PyYAML" in proc.stderr


def test_import_trnsim_and_every_parser_never_import_the_extras():
    code = (
        "import sys, trnsim\n"
        "from trnsim.cli.main import build_parser\n"
        "build_parser()\n"
        "import trnsim.sweep, trnsim.nki.ray_ranks, trnsim.extras\n"
        "print(sorted(m for m in ('ray', 'pyarrow', 'yaml') if m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert proc.returncode == 0 and proc.stdout.strip() == "[]"


# ---- Ctrl-C: a valid table, and a second run finishes it ---------------------------------------

# the planner chooses each plan: about a second per point on this machine
SLOW = {
    "verb": "train",
    "fixed": {"system": "trn3-gen2", "chips": 64},
    "grid": {"model": ["llama-3.1-8b", "llama-3.1-70b"], "global_batch": [256, 512, 1024]},
}


@pytest.mark.parametrize("backend", [["--serial"], ["--workers", "2"]])
def test_ctrl_c_leaves_a_valid_table_that_the_same_command_finishes(tmp_path, backend):
    spec = _write(tmp_path, SLOW)
    out = tmp_path / "t.csv"
    cmd = [sys.executable, "-m", "trnsim", "sweep", str(spec), "--out", str(out), *backend]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=sigint_default,  # Ctrl-C reaches it even when the tests run in background
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if out.exists() and len(_rows(out)) >= 1:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    rows = _rows(out)
    if proc.returncode == 0:  # the machine finished the sweep before the signal landed
        pytest.skip("the sweep ended before Ctrl-C")
    assert proc.returncode == 130, err
    assert "the same command runs the" in err and "Traceback" not in err
    n = len(rows)
    assert 1 <= n < 6
    header = out.read_text().splitlines()[0].split(",")
    assert all(len(r) == len(header) and r["status"] == "ok" for r in rows)
    assert not list(tmp_path.glob(".t.csv*"))  # no temporary left behind
    proc = _cli("sweep", str(spec), "--out", str(out), "--serial", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["ran"] == 6 - n and doc["rows"] == 6
    assert [r["point"] for r in _rows(out)][:n] != [] and len(_rows(out)) == 6


# ---- tune ----------------------------------------------------------------------------------

TUNE = [MATMUL, "--param", "TILES_IN_BLOCK_M=1,3,4", "--param", "TILES_IN_BLOCK_N=1,2"]


def test_tune_reports_every_candidate_and_the_fastest_that_passed(capsys):
    assert main(["tune", *TUNE, "--serial", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    cands = doc["candidates"]
    assert len(cands) == 6
    broken = [c for c in cands if c["TILES_IN_BLOCK_M"] == 3]  # 4 M tiles do not split by 3
    assert len(broken) == 2 and all(c["status"] == "failed" for c in broken)
    assert all("matmul.py:" in c["error"] and "AssertionError" in c["error"] for c in broken)
    passed = [c for c in cands if c["status"] == "ok"]
    assert len(passed) == 4 and all(c["passed"] and c["max_rel_err"] < 0.02 for c in passed)
    best = doc["best"]
    assert best["latency_s"] == min(c["latency_s"] for c in passed)
    assert doc["profile"]["total_s"] == best["latency_s"]
    # blocking M four tiles deep wins and beats no blocking (which N blocking is faster by a
    # few percent is the timing model's call, not this test's)
    by = {(c["TILES_IN_BLOCK_M"], c["TILES_IN_BLOCK_N"]): c["latency_s"] for c in passed}
    assert best["TILES_IN_BLOCK_M"] == 4
    assert best["latency_s"] < by[(1, 1)]
    # a candidate's latency is what `trnsim profile` gives for those parameters
    argv = ["profile", MATMUL, "--json", "--no-files"]
    assert main(argv) == 0  # the file's defaults: TILES_IN_BLOCK_M=4, TILES_IN_BLOCK_N=2
    assert json.loads(capsys.readouterr().out)["total_s"] == by[(4, 2)]


def test_tune_on_the_pool_matches_the_serial_path(tmp_path, capsys):
    assert main(["tune", *TUNE, "--serial", "--out", str(tmp_path / "s.jsonl"), "--json"]) == 0
    capsys.readouterr()
    assert main(["tune", *TUNE, "--workers", "2", "--out", str(tmp_path / "p.jsonl"),
                 "--json"]) == 0  # fmt: skip
    capsys.readouterr()
    assert (tmp_path / "s.jsonl").read_bytes() == (tmp_path / "p.jsonl").read_bytes()


def test_a_candidate_failing_its_check_is_reported_with_the_errors(tmp_path, capsys):
    k = tmp_path / "k.py"
    k.write_text(
        "import numpy as np\n"
        "import nki\nimport nki.language as nl\nimport nki.isa as nisa\n\n"
        "@nki.jit\n"
        "def scale(x, factor=1.0):\n"
        "    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)\n"
        "    nisa.dma_copy(dst=t, src=x)\n"
        "    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=factor)\n"
        "    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)\n"
        "    nisa.dma_copy(dst=out, src=t)\n"
        "    return out\n\n"
        "def make_inputs(rng, n=128):\n"
        "    return (rng.standard_normal((n, 64)).astype(np.float32),)\n\n"
        "def golden(x):\n"
        "    return x\n"
    )
    assert main(["tune", str(k), "--param", "factor=1.0,2.0", "--param", "n=64,128",
                 "--serial", "--json"]) == 0  # fmt: skip
    doc = json.loads(capsys.readouterr().out)
    failed = [c for c in doc["candidates"] if c["factor"] == 2.0]
    assert len(failed) == 2
    assert all(c["status"] == "failed" and c["passed"] is False for c in failed)
    assert all(c["error"].startswith("check failed: max abs err") for c in failed)
    assert all(c["latency_s"] > 0 for c in failed)  # timed all the same
    assert doc["best"]["factor"] == 1.0 and doc["best"]["n"] == 64


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--param", "TILE=1,2"], "neither make_inputs nor kernel 'matmul_blocked' takes it"),
        (["--param", "TILES_IN_BLOCK_M="], "no values"),
        (["--param", "TILES_IN_BLOCK_M=1,x"], "'x' is not a Python literal"),
        ([], "give at least one --param"),
        (["--param", "M=512", "--arg", "M=512"], "tune it or fix it"),
    ],
)
def test_tune_refuses_bad_parameters_in_one_line(capsys, argv, needle):
    try:
        code = main(["tune", MATMUL, *argv, "--serial"])
    except SystemExit as exc:  # argparse's own refusal of a --param value
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1


def test_a_serve_sweep_row_is_what_trnsim_serve_prints(tmp_path, capsys):
    spec = _write(
        tmp_path,
        {
            "verb": "serve",
            "fixed": {"model": "llama-3.1-8b", "chips": 1, "requests": 40},
            "grid": {"rate": [2, 8], "max_num_seqs": [16, 64]},
        },
    )
    out = tmp_path / "t.jsonl"
    assert _sweep(capsys, str(spec), "--serial", "--out", str(out))["ran"] == 4
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert all(r["status"] == "ok" for r in rows)
    assert main(["serve", "--model", "llama-3.1-8b", "--chips", "1", "--requests", "40",
                 "--rate", "8", "--max-num-seqs", "16", "--json"]) == 0  # fmt: skip
    alone = json.loads(capsys.readouterr().out)["summary"]
    row = next(r for r in rows if r["rate"] == 8 and r["max_num_seqs"] == 16)
    assert row["summary.ttft_s.p99"] == alone["ttft_s"]["p99"]
    assert (
        row["summary.throughput.output_tokens_per_s"] == alone["throughput"]["output_tokens_per_s"]
    )
