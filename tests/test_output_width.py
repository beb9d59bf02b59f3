"""Every verb's human output at 80 and 120 columns: no line wider, no number cut ("83.14
PFLO..."), no figure split from its unit or across lines, no Python ``None`` or internal
plan tokens (``zero1 rc-selective``), and every figure the wide rendering shows is whole in the
narrow one.

Each verb runs in process (``main``) with ``COLUMNS`` set, twice: at the width under test and
at 400 columns (the reference, where nothing wraps). Clocks are frozen so that printed
timings match between the two runs.
"""

from __future__ import annotations

import itertools
import re
import time
from pathlib import Path

import pytest
from rich.cells import cell_len

from trnsim.cli.main import main
from verb_commands import SERVE_SMALL, TORCH_DEMO_FLAGS, TORCH_PROFILE_SMALL

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "examples" / "kernels"
NKI_LIBRARY = Path("/work/checkouts/nki-library")

VERBS = {
    "specs list": ["specs"],
    "specs one": ["specs", "trn3-gen2-ultraserver"],
    "specs chip": ["specs", "b300"],
    "compare systems": ["compare", "trn3-gen2", "trn2-ultraserver", "gb300-nvl72"],
    "compare chips": ["compare", "trn3", "b300", "tpu-v7", "--keys", "peak"],
    "collective": ["collective"],
    "collective sweep": ["collective", "--sweep", "--plot", ""],
    "train": [
        "train",
        "--model",
        "llama-3.1-70b",
        "--tp",
        "4",
        "--pp",
        "4",
        "--global-batch",
        "1152",
        "--seq-len",
        "8192",
        "--tokens",
        "1e12",
    ],
    "infer": ["infer", "--model", "llama-3.1-70b"],
    "infer speculative": [
        "infer",
        "--model",
        "llama-3.1-70b",
        "--draft-model",
        "llama-3.1-8b",
        "--prefix-hit",
        "0.5",
    ],
    "plan": ["plan", "--model", "llama-3.1-70b"],
    "plan infer": ["plan", "--model", "llama-3.1-70b", "--mode", "infer"],
    "compare-workload": ["compare-workload", "--model", "llama-3.1-8b"],
    "compare-workload infer": ["compare-workload", "--model", "gpt-oss-120b", "--mode", "infer"],
    "validate": ["validate"],
    "dra allocate": [
        "dra",
        "allocate",
        str(ROOT / "examples" / "dra" / "claims" / "connected-4.yaml"),
        "--fleet",
        "trn2.48xlarge=2",
    ],
    "dra simulate": ["dra", "simulate", "synthetic:20", "--fleet", "trn2.48xlarge=4"],
    "serve": [*SERVE_SMALL, "--requests", "40"],
    "microbench": [
        "microbench",
        "trn3",
        "--bench",
        "gemm,stream",
        "--sizes",
        "1024",
        "--dtype",
        "bf16",
    ],
    "run": ["run", str(KERNELS / "softmax.py")],
    "profile": [
        "profile",
        str(KERNELS / "timing" / "hbm_copy.py"),
        "--arg",
        "rows=256",
        "--arg",
        "cols=256",
        "--no-files",
    ],
    "torch-profile": TORCH_PROFILE_SMALL,
    "torch-demo": ["torch-demo", "--steps", "2", *TORCH_DEMO_FLAGS],
    "sweep dry-run": ["sweep", str(ROOT / "tests" / "data" / "sweep_one.json"), "--dry-run"],
    "sweep": ["sweep", str(ROOT / "tests" / "data" / "sweep_one.json"), "--serial", "--fresh"],
    "tune": ["tune", str(KERNELS / "softmax.py"), "--param", "N=128,256", "--serial", "--fresh"],
    "demo": ["demo"],
    "conformance": ["conformance", str(NKI_LIBRARY), "--only", "rmsnorm"],
}
SLOW = {"demo", "compare-workload infer", "compare-workload", "validate", "conformance"}

#: A figure with its unit as ``pretty`` and the verbs print them ("83.14 PFLOP/s", "1.2 ms").
FIGURE = re.compile(
    r"(?<![\w.,])[-+$]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)? "
    r"(?:[kMGTPEmµn]?(?:FLOP/s|B/s|tok/s|seq/s|B|s|Hz|W|J)|[KMGT]iB|days|MWh|us|GB/s)(?![\w/])"
)
#: A number alone, with separators or decimals ("1,073,741,824", "0.1004").
NUMBER = re.compile(r"(?<![\w.,])\d[\d,]*\.?\d+(?![\w])")
#: Python's None where a figure should be ("power None W/chip"; a conformance case's keyword
#: argument ``hidden_actual=None`` is the kernel's own argument, so it may show) and the plan's
#: compact tokens (``zero1 rc-selective``: JSON's, not people's).
INTERNAL = re.compile(r"(?<!=)\bNone\b|\b(?:zero\d|rc-\w+|mb\d+|fsdp|il\d)\b")
NONE = re.compile(r"(?<!=)\bNone\b")
# Verbs that print plans (the others may show such tokens inside names: a calibration row's
# label "bert-large 16n DP512 mb16 s128" identifies the published run).
PLAN_VERBS = {"train", "infer", "infer speculative", "plan", "plan infer", "demo"}
PLAN_VERBS |= {"compare-workload", "compare-workload infer"}


def _render(argv, width, monkeypatch, capsys) -> tuple[int, str]:
    monkeypatch.setenv("COLUMNS", str(width))
    clock = itertools.count(0.0, 0.125)
    monkeypatch.setattr(time, "perf_counter", lambda: next(clock))
    try:
        rc = main(list(argv))
    except SystemExit as exc:
        rc = exc.code
    out, _ = capsys.readouterr()
    return rc, out


@pytest.fixture(autouse=True)
def _quiet(monkeypatch, tmp_path):
    monkeypatch.setenv("TRNSIM_PROGRESS", "0")
    monkeypatch.chdir(tmp_path)


def _params():
    for name, argv in VERBS.items():
        for width in (80, 120):
            marks = [pytest.mark.slow] if name in SLOW else []
            yield pytest.param(name, argv, width, id=f"{name}@{width}", marks=marks)


@pytest.mark.parametrize("name,argv,width", list(_params()))
def test_human_output_fits_and_keeps_every_figure_whole(name, argv, width, monkeypatch, capsys):
    if name == "conformance" and not NKI_LIBRARY.is_dir():
        pytest.skip("no nki-library checkout")
    rc, narrow = _render(argv, width, monkeypatch, capsys)
    assert rc in (0, 1) and narrow.strip(), narrow
    lines = narrow.splitlines()
    wide_lines = [line for line in lines if cell_len(line) > width]
    assert not wide_lines, wide_lines[:3]
    assert "…" not in narrow
    leftover = (INTERNAL if name in PLAN_VERBS else NONE).search(narrow)
    assert not leftover, leftover
    _, wide = _render(argv, 400, monkeypatch, capsys)
    for pattern in (FIGURE, NUMBER):
        want = set(pattern.findall(wide))
        missing = sorted(f for f in want if f not in narrow)
        assert not missing, f"split or cut at {width} columns: {missing[:8]}"


def test_the_checker_sees_a_split_figure():
    """The check above can fail: a figure wrapped away from its unit is missing."""
    wide = "peak 83.14 PFLOP/s per chip; 1,073,741,824 bytes"
    narrow = "peak 83.14\nPFLOP/s per chip; 1,073,741,\n824 bytes"
    assert FIGURE.findall(wide) == ["83.14 PFLOP/s"]
    assert "83.14 PFLOP/s" not in narrow
    assert "1,073,741,824" in NUMBER.findall(wide) and "1,073,741,824" not in narrow
