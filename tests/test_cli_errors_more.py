"""More classes of bad input, found by fuzzing every verb and flag (round 2 of issue 16).

In process (``trnsim.cli.main.main``) for speed: each class ends in exit status 2 with one
stderr line naming the rule and the value, before any work; a class per test, parametrised
over examples of it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from trnsim.cli import compare_workload
from trnsim.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
HF = ROOT / "tests" / "data" / "hf"
SOFTMAX = str(ROOT / "examples" / "kernels" / "softmax.py")


@pytest.fixture(autouse=True)
def _quiet(monkeypatch, tmp_path):
    monkeypatch.setenv("TRNSIM_PROGRESS", "0")
    monkeypatch.chdir(tmp_path)  # nothing a failing run might write lands in the repo


def call(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse's own errors
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, err


def usage_error(argv: list[str], capsys, *needles: str) -> str:
    rc, _out, err = call(argv, capsys)
    lines = err.strip().splitlines()
    assert rc == 2, (rc, err)
    assert len(lines) == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


# ---- a Hugging Face config whose dimension is not a whole, finite, sane number -------------


@pytest.mark.parametrize(
    "field,value",
    [
        ("hidden_size", float("nan")),  # json.dump writes NaN, which json.loads accepts
        ("num_hidden_layers", 1.5),
        ("hidden_size", 1e300),
        ("num_key_value_heads", -8),
        ("max_position_embeddings", "long"),
    ],
)
@pytest.mark.parametrize("verb", ["train", "infer", "plan"])
def test_hf_config_dimension_must_be_whole_and_finite(tmp_path, capsys, verb, field, value):
    cfg = json.loads((HF / "llama-3.1-8b.json").read_text())
    cfg[field] = value
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    usage_error([verb, "--model", str(path)], capsys, field)


def test_hf_config_experts_per_token_within_the_experts(tmp_path, capsys):
    cfg = json.loads((HF / "mixtral-8x7b.json").read_text())
    cfg["num_experts_per_tok"] = 9
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    usage_error(["train", "--model", str(path)], capsys, "experts per token (9)", "1..8")


# ---- make_inputs that does not fit the kernel ------------------------------------------------

HEADER = """\
import nki
import nki.language as nl
import numpy as np


@nki.jit
def copy(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(x))
    return out


"""

BAD_INPUTS = {
    "none": ("def make_inputs(rng):\n    rng.random()\n", "input 0 = None"),
    "too many": (
        "def make_inputs(rng):\n    x = np.ones((128, 4), np.float32)\n    return x, x, x\n",
        "gives 3 input(s) but kernel 'copy'(x)",
    ),
    "generator": (
        "def make_inputs(rng):\n    yield np.ones((128, 4), np.float32)\n",
        "input 0 as a generator",
    ),
    "not callable": ("make_inputs = 5\n", "make_inputs is int 5, not a function"),
    "empty tensor": (
        "def make_inputs(rng):\n    return np.ones((0, 4), np.float32)\n",
        "shape [0, 4], an empty tensor",
    ),
}


@pytest.mark.parametrize("case", BAD_INPUTS)
@pytest.mark.parametrize("verb", [["run"], ["profile", "--no-files"]])
def test_make_inputs_must_fit_the_kernel(tmp_path, capsys, verb, case):
    body, needle = BAD_INPUTS[case]
    path = tmp_path / "k.py"
    path.write_text(HEADER + textwrap.dedent(body))
    usage_error([*verb, str(path)], capsys, "k.py", "make_inputs", needle)


# ---- a golden that is not a numeric array (or not a function): the file's fault, exit 2 ----

GOOD_INPUTS = "def make_inputs(rng):\n    return np.ones((128, 4), np.float32)\n\n\n"


@pytest.mark.parametrize(
    "golden,needle",
    [
        ("def golden(x):\n    return None\n", "golden 0 None: not a numeric array"),
        ("def golden(x):\n    return x.astype(np.complex64)\n", "dtype complex64"),
        ("def golden(x):\n    return x, 'a'\n", "golden 1 of dtype <U1"),
        ("golden = 5\n", "golden is int 5, not a function"),
    ],
    ids=["none", "complex", "text", "not callable"],
)
def test_golden_must_be_numeric(tmp_path, capsys, golden, needle):
    path = tmp_path / "k.py"
    path.write_text(HEADER + GOOD_INPUTS + golden)
    usage_error(["run", str(path)], capsys, "k.py", needle)


# ---- flags that contradict each other --------------------------------------------------------

CONTRADICTIONS = [
    (["collective", "--plot", "x.png"], "--plot only applies with --sweep"),
    (["collective", "--min-size", "1KiB", "--factor", "2"], "--min-size, --factor only apply"),
    (["collective", "--sweep", "--size", "1MiB"], "--size does not apply with --sweep"),
    (["plan", "--model", "llama-3.1-8b", "--mode", "infer", "--seq-len", "8"], "--seq-len only"),
    (
        ["compare-workload", "--model", "llama-3.1-8b", "--output-tokens", "4"],
        "--output-tokens only applies with --mode infer, not train",
    ),
    (["profile", SOFTMAX, "--no-files", "--png", "t.png"], "--no-files contradicts --png"),
    (["profile", SOFTMAX, "--no-files", "--out-dir", "."], "--no-files contradicts --out-dir"),
    (["train", "--model", "llama-3.1-8b", "--moe-imbalance", "2"], "llama-3.1-8b is dense"),
    (["infer", "--model", "mixtral-8x7b", "--moe-imbalance", "1e30"], "has 8 experts"),
    (
        [
            "infer",
            "--model",
            "llama-3.1-8b",
            "--draft-model",
            "llama-3.1-8b",
            "--output-tokens",
            "2",
            "--spec-tokens",
            "4",
        ],
        "--spec-tokens 4: more than --output-tokens 2",
    ),
    (
        ["infer", "--model", "llama-3.1-8b", "--spec-tokens", "4"],
        "--spec-tokens 4: speculative decoding needs --draft-model",
    ),
    (
        ["infer", "--model", "llama-3.1-8b", "--spec-acceptance", "0.5"],
        "--spec-acceptance 0.5: speculative decoding needs --draft-model",
    ),
]


@pytest.mark.parametrize("argv,needle", CONTRADICTIONS, ids=lambda v: " ".join(v)[:40])
def test_contradicting_flags_are_refused(capsys, tmp_path, argv, needle):
    usage_error(argv, capsys, needle)
    assert list(tmp_path.iterdir()) == []  # refused before any work: nothing written


def test_sweep_defaults_unchanged(capsys):
    rc, out, _ = call(["collective", "--sweep", "--json"], capsys)
    sizes = [r["nbytes"] for r in json.loads(out)]
    assert rc == 0 and sizes[0] == 2**10 and sizes[-1] == 2**30 and sizes[1] == 4 * sizes[0]


# ---- the compare-workload chart names the compute model used ---------------------------------


def test_compare_chart_note_names_each_systems_compute_model(capsys, tmp_path, monkeypatch):
    seen = {}

    def fake_chart(rows, path, title, note=None):
        seen["note"] = note

    monkeypatch.setattr("trnsim.report.plots.comparison_chart", fake_chart)
    argv = ["compare-workload", "--model", "llama-3.1-8b", "--systems", "trn3-gen2,gb300-nvl72"]
    rc, out, _ = call([*argv, "--png", str(tmp_path / "c.png"), "--json"], capsys)
    assert rc == 0
    rows = json.loads(out)["rows"]
    note = seen["note"]
    for row in rows:  # each row's own compute model, as its assumptions state it
        compute = next(a for a in row["assumptions"] if a.startswith("compute:"))
        assert compute.split(",")[0] in note
    assert "table model" in note and "roofline model" in note
    assert compare_workload.chart_note([]) is not None


# ---- stdout that cannot be written (a full disk): one line, exit 2, not an internal error ----


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("argv", [["specs", "--json"], ["specs"]])
def test_full_stdout_is_one_line(argv):
    env = {**os.environ, "TRNSIM_PROGRESS": "0"}
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "trnsim", *argv],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and "No space left on device" in lines[0], proc.stderr


# ---- every typed flag of every verb refuses what no number flag can take ---------------------


def _typed_flags():
    import argparse

    from trnsim.cli.main import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for verb, parser in sub.choices.items():
        positionals = ["x"] * sum(1 for a in parser._actions if not a.option_strings)
        for action in parser._actions:
            if action.option_strings and action.type is not None and not action.choices:
                yield verb, positionals, action


TYPED = list(_typed_flags())


@pytest.mark.parametrize("verb,positionals,action", TYPED, ids=lambda v: getattr(v, "dest", v))
def test_every_typed_flag_uses_a_checked_type(verb, positionals, action):
    assert action.type not in (int, float), f"{verb} {action.option_strings[-1]}: bare type"


@pytest.mark.parametrize("bad", ["nan", "-1", "abc", "1e400", ""])
def test_every_typed_flag_refuses_non_values(capsys, bad):
    for verb, positionals, action in TYPED:
        flag = action.option_strings[-1]
        usage_error([verb, *positionals, f"{flag}={bad}"], capsys, flag)


def test_draft_model_alone_uses_the_documented_speculation_defaults(capsys):
    rc, out, _ = call(
        ["infer", "--model", "llama-3.1-70b", "--draft-model", "llama-3.1-8b"], capsys
    )
    flat = " ".join(out.split())
    assert rc == 0 and "4 tokens per step, acceptance 0.7 per token" in flat
    assert "assumed: no published acceptance" in flat  # the default says it is an assumption
