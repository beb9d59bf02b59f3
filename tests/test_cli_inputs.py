"""Bad inputs to the performance verbs (issue 21's second set): each refused with one line and
exit status 2, or warned with one line, or answered (``--json``) with a valid result; each
case gave a result, a traceback, an internal error or nothing at all before.

In process (``trnsim.cli.main.main``) for speed, as ``test_cli_errors_more``; the case that
once hung runs as a process with a timeout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trnsim.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
HF = ROOT / "tests" / "data" / "hf"


@pytest.fixture(autouse=True)
def _quiet(monkeypatch, tmp_path):
    monkeypatch.setenv("TRNSIM_PROGRESS", "0")
    monkeypatch.chdir(tmp_path)


def call(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, err


def refused(argv: list[str], capsys, *needles: str) -> str:
    rc, out, err = call(argv, capsys)
    lines = err.strip().splitlines()
    assert rc == 2, (rc, err, out[:200])
    assert len(lines) == 1 and "Traceback" not in err and "internal error" not in err, err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


# ---- the examples ---------------------------------------------------------------------

SMALL = ["--system", "trn3-gen1"]


@pytest.mark.parametrize(
    "argv,needles",
    [
        # step time 9e18 s, exit 0
        (
            ["train", "--model", "llama-3.1-8b", *SMALL, "--global-batch", "1e20"],
            ["rule global-batch"],
        ),
        (
            [
                "train",
                "--model",
                "llama-3.1-8b",
                *SMALL,
                "--global-batch",
                "1e6",
                "--seq-len",
                "1e5",
            ],
            ["rule step-tokens", "100,000,000,000 tokens per step"],
        ),
        # a 200k-token prompt on a 131k-context model: an estimate
        (
            ["infer", "--model", "llama-3.1-8b", "--input-tokens", "200000"],
            ["rule context-length", "131,072"],
        ),
        (
            ["plan", "--model", "llama-3.1-8b", "--mode", "infer", "--input-tokens", "200000"],
            ["rule context-length"],
        ),
        (
            [
                "compare-workload",
                "--model",
                "llama-3.1-8b",
                "--mode",
                "infer",
                "--input-tokens",
                "200000",
            ],
            ["rule context-length"],
        ),
        # a 405B draft for an 8B target: an estimate
        (
            ["infer", "--model", "llama-3.1-8b", "--draft-model", "llama-3.1-405b"],
            ["--draft-model llama-3.1-405b", "not smaller", "rule draft-model"],
        ),
        (["train", "--model", "llama-3.1-8b", *SMALL, "--tokens", "0.5"], ["--tokens", "'0.5'"]),
        # overflowed to inf: an internal error from the JSON writer
        (
            [
                "train",
                "--model",
                "llama-3.1-8b",
                *SMALL,
                "--tokens",
                "1e300",
                "--price",
                "1e300",
                "--json",
            ],
            ["--tokens", "rule tokens"],
        ),
        (["train", "--model", "llama-3.1-8b", *SMALL, "--price", "1e300"], ["rule price"]),
        (["train", "--hidden", "1e300", "--layers", "2", "--heads", "2"], ["rule model-hidden"]),
        (["plan", "--model", "llama-3.1-8b", "--top", "1e300"], ["rule top"]),
        (["train", "--model", "gpt3-175b", "--seq-len", "4096"], ["learned positions"]),
        (["plan", "--model", "llama-3.1-8b", "--slo-ttft", "1"], ["--slo-ttft only applies"]),
        (["infer", "--model", "llama-3.1-8b", "--slo-tpot", "0"], ["rule slo-tpot"]),
    ],
    ids=lambda v: " ".join(v)[:60] if isinstance(v, list) else None,
)
def test_nonsense_is_refused_with_one_line(capsys, argv, needles):
    refused(argv, capsys, *needles)


def test_absurd_but_legal_values_warn_with_one_line(capsys):
    rc, out, err = call(
        [
            "train",
            "--model",
            "llama-3.1-8b",
            *SMALL,
            "--tokens",
            "1e16",
            "--price",
            "500",
            "--json",
        ],
        capsys,
    )
    assert rc == 0 and json.loads(out)["time_to_train_s"] > 0
    lines = err.strip().splitlines()
    assert len(lines) == 2 and all(line.startswith("trnsim train: warning: ") for line in lines)
    assert any("--tokens" in line for line in lines) and any("--price" in line for line in lines)


def test_a_model_default_never_exceeds_its_context(capsys):
    """GPT-3's 2,048 learned positions: the defaults (4,096 tokens; 2,048 + 512 served) are
    shortened to the context, so the plain command works."""
    rc, out, _ = call(["train", "--model", "gpt3-23b", "--json"], capsys)
    assert rc == 0 and json.loads(out)["seq_len"] == 2048
    rc, out, _ = call(
        [
            "compare-workload",
            "--model",
            "gpt3-23b",
            "--mode",
            "infer",
            "--systems",
            "trn3-gen2",
            "--json",
        ],
        capsys,
    )
    assert rc == 0 and json.loads(out)["rows"][0]["fits"]


# ---- --json when no plan fits: a valid JSON result, not nothing ------------------------------


@pytest.mark.parametrize("verb", ["train", "infer"])
def test_json_says_when_no_plan_fits(capsys, verb):
    rc, out, err = call(
        [verb, "--model", "llama-3.1-405b", "--system", "trn3-gen2", "--chips", "2", "--json"],
        capsys,
    )
    assert rc == 1
    data = json.loads(out)
    assert data["fits"] is False and data["found"] is False and data["considered"] > 0
    assert "no plan" in data["reason"] and data["notes"]
    assert len(err.strip().splitlines()) == 1


def test_plan_json_says_when_no_plan_meets_the_latency_bound(capsys):
    rc, out, _ = call(
        [
            "plan",
            "--model",
            "llama-3.1-70b",
            "--mode",
            "infer",
            "--chips",
            "8",
            "--slo-ttft",
            "0.001",
            "--json",
        ],
        capsys,
    )
    data = json.loads(out)
    assert rc == 1 and data["found"] is False and data["top"] == []
    assert data["over_slo"] > 0 and data["slo"]["ttft_s"] == 0.001
    assert "no plan meets the latency bound" in data["notes"][0]


# ---- config.json read with limits ---------------------------------------------------------------


def _config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "config.json"
    path.write_text(text)
    return str(path)


def _llama() -> dict:
    return json.loads((HF / "llama-3.1-8b.json").read_text())


CONFIGS = {
    "model_type list": (lambda: json.dumps({**_llama(), "model_type": ["llama"]}), "a list"),
    "model_type dict": (lambda: json.dumps({**_llama(), "model_type": {"a": 1}}), "a dict"),
    "5000 digits": (
        lambda: json.dumps(_llama())[:-1] + ', "x": ' + "9" * 5000 + "}",
        "an integer of 5,000 digits",
    ),
    "200k deep": (
        lambda: json.dumps(_llama())[:-1] + ', "x": ' + "[" * 200_000 + "]" * 200_000 + "}",
        "nested deeper than 32 levels",
    ),
    "a string for a flag": (
        lambda: json.dumps({**_llama(), "tie_word_embeddings": "false"}),
        "must be true or false",
    ),
    "not an object": (lambda: "[1, 2]", "expected a JSON object, got a list"),
    "not UTF-8": (lambda: "", "not UTF-8 text"),
}


@pytest.mark.parametrize("case", CONFIGS)
@pytest.mark.parametrize("verb", ["train", "infer", "plan", "compare-workload"])
def test_hostile_config_json_is_one_line(tmp_path, capsys, verb, case):
    make, needle = CONFIGS[case]
    text = make()
    path = tmp_path / "config.json"
    if case == "not UTF-8":
        path.write_bytes(b'{"model_type": "\xff"}')
    else:
        path.write_text(text)
    refused([verb, "--model", str(path)], capsys, needle)


@pytest.mark.parametrize("path", ["/dev/zero", "/dev/urandom", "/"])
def test_a_model_path_that_is_not_a_file_is_refused_before_reading(capsys, path):
    """``--model /dev/zero`` read until memory ran out."""
    refused(["train", "--model", path], capsys, "not a regular file")


def test_an_oversized_config_is_refused(tmp_path, capsys):
    path = _config(tmp_path, json.dumps({**_llama(), "pad": "x" * (5 * 2**20)}))
    refused(["infer", "--model", path], capsys, "larger than 4 MiB")


def test_a_config_with_2_to_the_40_experts_ends(tmp_path):
    """The planner walked every divisor of the expert count: this never ended."""
    cfg = json.loads((HF / "mixtral-8x7b.json").read_text())
    cfg["num_local_experts"] = 2**40
    path = _config(tmp_path, json.dumps(cfg))
    env = {**os.environ, "TRNSIM_PROGRESS": "0"}
    for verb in (["plan"], ["plan", "--mode", "infer"], ["train"]):
        proc = subprocess.run(
            [sys.executable, "-m", "trnsim", *verb, "--model", path, "--json"],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            check=False,
        )
        assert proc.returncode in (0, 1), proc.stderr
        assert "Traceback" not in proc.stderr
        json.loads(proc.stdout)  # a result either way


def test_profile_names_the_dma_bandwidth_for_what_it_is(capsys, tmp_path, monkeypatch):
    """``profile --json`` called the HBM bandwidth the active cores' DMA can draw (MBU's
    denominator) ``hbm_bw``, the chip's HBM bandwidth's name: it is ``dma_bw`` now."""
    monkeypatch.setenv("TRNSIM_PROGRESS", "0")
    kernel = Path(__file__).resolve().parents[1] / "examples" / "kernels" / "timing" / "hbm_copy.py"
    argv = ["profile", str(kernel), "--arg", "rows=256", "--arg", "cols=256", "--no-files"]
    assert main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert "hbm_bw" not in data and data["dma_bw"] > 0
