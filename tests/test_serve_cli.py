"""``trnsim serve``: outputs (--json, tables, files) and bad input (one line, exit 2)."""

from __future__ import annotations

import csv
import json

import pytest

from trnsim.cli.main import main

BASE = ["serve", "--model", "llama-3.1-8b", "--system", "p5.48xlarge", "--tp", "1"]
SMALL = [
    "--requests",
    "30",
    "--input-tokens",
    "300",
    "--output-tokens",
    "40",
    "--max-model-len",
    "4096",
]


def status(argv: list[str]) -> int:
    """The exit status of ``trnsim ARGV`` (argparse exits with SystemExit)."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code)


def run_json(capsys, *args):
    assert main([*BASE, *SMALL, *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_run(capsys):
    d = run_json(capsys, "--rate", "4", "--slo-ttft", "0.2")
    s = d["summary"]
    assert s["requests"]["completed"] == 30
    for key in ("ttft_s", "tpot_s", "itl_s", "e2e_s", "queue_s"):
        assert set(s[key]) == {"mean", "p50", "p90", "p95", "p99", "max"}
    assert s["throughput"]["output_tokens_per_s"] > 0
    assert 0 <= s["goodput"]["fraction"] <= 1
    assert d["engine"]["policy"] == "vllm-v1"


def test_trtllm_policy_run(capsys):
    """TensorRT-LLM's scheduler from the CLI: its capacity policy and KV fraction reach the
    engine, and every request completes."""
    d = run_json(
        capsys,
        "--rate",
        "4",
        "--policy",
        "trtllm",
        "--capacity-policy",
        "max_utilization",
        "--kv-free-fraction",
        "0.5",
    )
    assert d["summary"]["requests"]["completed"] == 30
    assert d["engine"]["policy"] == "trtllm"
    assert d["engine"]["block_size"] == 32  # TensorRT-LLM's tokens_per_block
    notes = " ".join(d["assumptions"])
    assert "capacity scheduler max_utilization" in notes
    assert "= 0.5 x (80.0 GB HBM per rank - weights" in notes


def test_human_output_fits_80_columns(capsys):
    assert main([*BASE, *SMALL, "--concurrency", "2"]) == 0
    out = capsys.readouterr().out
    assert "TTFT" in out and "goodput" not in out
    assert max(len(line) for line in out.splitlines()) <= 80


def test_files(tmp_path, capsys):
    trace, rec = tmp_path / "t.json", tmp_path / "r.csv"
    d = run_json(capsys, "--rate", "4", "--perfetto", str(trace), "--requests-out", str(rec))
    events = json.loads(trace.read_text())["traceEvents"]
    assert any(e.get("cat") == "step" for e in events)
    assert sum(1 for e in events if e.get("ph") == "b") == 30
    rows = list(csv.DictReader(rec.open()))
    assert len(rows) == 30 and float(rows[0]["ttft_s"]) > 0
    assert d["requests_out"] == str(rec)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporaries


def test_sweep_with_systems_and_plot(tmp_path, capsys):
    png = tmp_path / "c.png"
    argv = [*BASE, *SMALL, "--sweep-rates", "1,4", "--systems", "trn2.48xlarge", "--plot", str(png)]
    assert main([*argv, "--sampling", "device", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert [c["system"] for c in d["curves"]] == ["p5.48xlarge", "trn2.48xlarge"]
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_rate_search(capsys):
    d = run_json(capsys, "--max-rate", "--slo-ttft", "0.5")
    assert d["max_rate"] > 0 and d["at_max_rate"]["summary"]["ttft_s"]["p99"] <= 0.5


def test_no_rate_meets_the_slo_is_a_stated_result(capsys):
    assert main([*BASE, *SMALL, "--max-rate", "--slo-tpot", "0.000001"]) == 1
    out = capsys.readouterr().out
    assert "no rate meets the SLO" in out


def test_a_trace_run(tmp_path, capsys):
    p = tmp_path / "m.jsonl"
    p.write_text(
        "\n".join(
            json.dumps(
                {"timestamp": 500 * i, "input_length": 200, "output_length": 20, "hash_ids": [1]}
            )
            for i in range(10)
        )
    )
    d = run_json(capsys, "--trace", str(p))
    assert d["summary"]["requests"]["completed"] == 10


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["--rate", "0"], "--rate: '0' is not a positive number"),
        (["--rate", "-3"], "--rate"),
        (["--concurrency", "0"], "--concurrency: '0' is not a positive integer"),
        (["--rate", "2", "--concurrency", "2"], "give one workload"),
        (["--max-rate"], "needs an objective"),
        (["--plot", "x.png"], "--plot draws a sweep"),
        (["--disagg", "1"], "P:D"),
        (["--requests-out", "r.txt"], ".csv or .jsonl"),
        (["--tp", "1", "--max-model-len", "200000"], "exceeds llama-3.1-8b's maximum"),
        (["--policy", "neuron", "--prefill-buckets", "128,64"], "ascending"),
        (["--trace", "/no/such.csv"], "no such file"),
        (["--spec-tokens", "3"], "needs --draft-model"),
        (["--draft-model", "mtp"], "no multi-token-prediction modules"),
        (["--capacity-policy", "max_utilization"], "capacity_policy is TensorRT-LLM's"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, args, match):
    argv = [a for a in [*BASE, *SMALL] if a not in ("--max-model-len", "4096")] + args
    if "--max-model-len" not in args:
        argv += ["--max-model-len", "4096"]
    assert status(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and match in err


def test_bad_trace_columns_and_lengths(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("TIMESTAMP,ContextTokens\n2023-11-16 18:15:46,3\n")
    assert main([*BASE, *SMALL, "--trace", str(bad)]) == 2
    assert "missing GeneratedTokens" in capsys.readouterr().err
    neg = tmp_path / "neg.csv"
    neg.write_text("arrival_s,input_tokens,output_tokens\n0,-1,5\n")
    assert main([*BASE, *SMALL, "--trace", str(neg)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "negative" in err and "line 2" in err


def test_an_encoder_is_refused(capsys):
    assert main(["serve", "--model", "bert-large", "--system", "p5.48xlarge"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "encoder" in err


def test_a_model_that_does_not_fit_is_exit_2(capsys):
    argv = ["serve", "--model", "llama-3.1-405b", "--system", "p5.48xlarge", "--tp", "1"]
    assert main([*argv, *SMALL]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "does not fit" in err


def test_every_request_rejected_is_exit_2_not_an_empty_success(tmp_path, capsys):
    """Prompts no shorter than max_model_len are all rejected (vLLM refuses each): a run that
    completes nothing is bad input, one line, and the records file is not left behind."""
    out = tmp_path / "records.csv"
    argv = [*BASE, "--requests", "5", "--input-tokens", "2000", "--output-tokens", "10"]
    assert main([*argv, "--max-model-len", "1024", "--requests-out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "every request was rejected (5)" in err
    assert "1,024" in err and not out.exists() and list(tmp_path.iterdir()) == []
