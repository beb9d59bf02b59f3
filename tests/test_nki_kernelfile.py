"""Kernel files (``trnsim.nki.kernelfile``): a checker that cannot pass wrong output, ``--arg``
parsing, and bounded runs (instruction budget, wall clock)."""

from __future__ import annotations

import signal
import textwrap

import ml_dtypes
import numpy as np
import pytest

from trnsim.errors import KernelError, UsageError
from trnsim.nki import kernelfile as kf

KERNEL = """\
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np


@nki.jit
def copy(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out, t)
    return out


@nki.jit
def unwritten(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    return out


def make_inputs(rng):
    return rng.standard_normal((128, 64)).astype(np.float32) * 10
"""


def write(tmp_path, body: str) -> str:
    path = tmp_path / "k.py"
    path.write_text(textwrap.dedent(body))
    return str(path)


@pytest.mark.parametrize(
    "dtype,rtol",
    [
        (ml_dtypes.bfloat16, 2**-6),
        (np.float16, 2**-9),
        (ml_dtypes.float8_e4m3fn, 0.25),
        (np.float32, kf.FP32_ACCUMULATION_RTOL),
        (np.float64, kf.FP32_ACCUMULATION_RTOL),
        (np.int32, 0.0),
        (np.uint8, 0.0),
    ],
)
def test_default_tolerance_follows_the_dtype(dtype, rtol):
    assert kf.default_tolerance(dtype)["rtol"] == pytest.approx(rtol)


def test_nan_and_inf_fail_unless_the_golden_has_them_in_the_same_place():
    g = np.array([1.0, np.nan, np.inf, -np.inf, 2.0])
    assert kf.compare([g.copy()], [g]) == (0.0, 0.0, 0)
    for bad in (
        [np.nan, np.nan, np.inf, -np.inf, 2.0],  # NaN where the golden is 1
        [1.0, np.nan, -np.inf, -np.inf, 2.0],  # Inf of the other sign
        [1.0, 0.0, np.inf, -np.inf, 2.0],  # a finite value where the golden is NaN
    ):
        abs_err, rel_err, n = kf.compare([np.array(bad)], [g])
        assert n == 1 and abs_err == rel_err == float("inf")


def test_all_nan_output_fails_without_tolerance(tmp_path):
    path = write(tmp_path, KERNEL + "\n\ndef golden(x):\n    return x\n")
    r = kf.run_file(path, "unwritten")
    assert r.passed is False and r.nonfinite == 128 * 64
    d = r.to_dict()
    assert d["max_abs_err"] is None and d["nonfinite_mismatches"] == 128 * 64
    assert "default for float32" in d["tolerance"]["source"]


def test_error_of_3_9_without_tolerance_fails_and_exact_passes(tmp_path):
    wrong = "\n\ndef golden(x):\n    y = x.copy()\n    y[3, 5] += 3.9\n    return y\n"
    r = kf.run_file(write(tmp_path, KERNEL + wrong), "copy")
    assert r.max_abs_err == pytest.approx(3.9, rel=1e-6) and r.passed is False
    r = kf.run_file(write(tmp_path, KERNEL + "\n\ndef golden(x):\n    return x\n"), "copy")
    assert r.passed is True and r.max_abs_err == 0.0


def test_file_and_flag_tolerances_apply_and_are_validated(tmp_path):
    wrong = "\n\ndef golden(x):\n    y = x.copy()\n    y[3, 5] += 3.9\n    return y\n"
    path = write(tmp_path, KERNEL + wrong + "TOLERANCE = {'atol': 4.0}\n")
    r = kf.run_file(path, "copy")
    assert r.passed is True and r.tolerance["source"] == "TOLERANCE"
    r = kf.run_file(path, "copy", atol=1.0)
    assert r.passed is False and r.tolerance["atol"] == 1.0
    bad_values = ["{'rtol': -1}", "{'atol': float('nan')}", "{'rtol': 'x'}", "{'tol': 1}"]
    bad_values += ["0.1", "0"]
    for bad in bad_values:
        path = write(tmp_path, KERNEL + wrong + f"TOLERANCE = {bad}\n")
        with pytest.raises(UsageError, match="TOLERANCE"):
            kf.run_file(path, "copy")
    with pytest.raises(UsageError, match="rtol"):
        kf.run_file(path, "copy", rtol=float("nan"))


@pytest.mark.parametrize(
    "text,value",
    [("M=4096", 4096), ("x=0.5", 0.5), ("empty=true", True), ("e=False", False),
     ("m='tiled'", "tiled"), ("s=(2, 3)", (2, 3)), ("n=-1", -1)],
)  # fmt: skip
def test_arg_values_are_python_literals(text, value):
    assert kf.parse_arg(text)[1] == value


@pytest.mark.parametrize("text", ["M=abc", "M=nan", "M=1e400", "M=inf", "M", "1=2", "M=", "M=[1,"])
def test_bad_arg_values_are_usage_errors(text):
    with pytest.raises(UsageError, match="--arg"):
        kf.parse_arg(text)


def test_instruction_budget_stops_at_the_kernel_line(tmp_path):
    body = KERNEL.replace(
        "    t = nl.load(x)\n", "    for _ in range(100):\n        t = nl.load(x)\n"
    )
    with pytest.raises(KernelError, match=r"instruction-budget.*more than 10 .*k\.py:11"):
        kf.run_file(write(tmp_path, body), "copy", max_instructions=10)


def test_wall_clock_stops_a_python_loop_and_restores_the_alarm(tmp_path):
    body = KERNEL.replace("    t = nl.load(x)\n", "    while True:\n        x = x\n")
    before = signal.getsignal(signal.SIGALRM)
    with pytest.raises(KernelError, match=r"timeout.*0\.5 s.*k\.py:1[01]"):
        kf.run_file(write(tmp_path, body), "copy", timeout=0.5)
    assert signal.getsignal(signal.SIGALRM) is before
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_exceptions_name_the_kernel_file_line(tmp_path):
    body = KERNEL.replace("    t = nl.load(x)\n", "    t = nl.load(x)\n    y = t.nosuch\n")
    with pytest.raises(KernelError, match=r"k\.py:11: AttributeError.*while running"):
        kf.run_file(write(tmp_path, body), "copy")
    with pytest.raises(UsageError, match=r"k\.py:2: SyntaxError"):
        kf.load_module(write(tmp_path, "x = 1\ny = (\n"))


# ---- verdicts that cannot be fooled ---------------------------------------------------------

IN_PLACE = """\
import nki
import nki.language as nl
import numpy as np


@nki.jit
def double_in_place(x):
    nl.store(x, nl.multiply(nl.load(x), 2.0))
    return x


@nki.jit
def scribble(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    zero = nl.multiply(nl.load(x), 0.0)
    nl.store(x, zero)  # overwrites its input...
    nl.store(out, zero)  # ...and writes garbage that matches a golden of the new input
    return out


def make_inputs(rng):
    return rng.standard_normal((128, 64)).astype(np.float32)


def golden_double_in_place(x):
    return x * 2


def golden_scribble(x):
    return x * 3
"""


def test_a_kernel_that_overwrites_its_input_cannot_fool_its_golden(tmp_path):
    r = kf.run_file(write(tmp_path, IN_PLACE), "scribble")
    assert r.passed is False and r.max_abs_err > 1


def test_a_correct_in_place_kernel_passes(tmp_path):
    r = kf.run_file(write(tmp_path, IN_PLACE), "double_in_place")
    assert r.passed is True and r.max_abs_err == 0.0


def test_the_golden_gets_the_inputs_make_inputs_made(tmp_path):
    body = IN_PLACE + (
        "\nSEEN = []\n\n\ndef golden(x):\n    SEEN.append(x.copy())\n    return x * 2\n"
    )
    body = body.replace("def golden_double_in_place", "def _unused")
    path = write(tmp_path, body)
    r = kf.run_file(path, "double_in_place")
    made = np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32)
    assert r.passed is True
    np.testing.assert_array_equal(kf.load(path).make_inputs(np.random.default_rng(0)), made)


HALF = KERNEL.replace(
    "def unwritten(x):\n    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)\n",
    "def unwritten(x):\n    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)\n"
    "    nl.store(out[0:64, :], nl.load(x[0:64, :]))\n",
)


def test_unwritten_elements_fail_without_a_golden(tmp_path):
    r = kf.run_file(write(tmp_path, HALF), "unwritten")
    assert r.passed is False and r.unwritten_count == 64 * 64
    d = r.to_dict()
    assert d["unwritten"] == [
        {
            "output": 0,
            "name": d["unwritten"][0]["name"],
            "shape": [128, 64],
            "dtype": "float32",
            "unwritten": 4096,
            "elements": 8192,
            "first": [64, 0],
        }
    ]
    assert d["passed"] is False and d["unwritten_declared"] is None


def test_declared_unwritten_elements_pass_and_are_not_compared(tmp_path):
    declared = HALF + "\nUNWRITTEN_unwritten = 'rows 64.. are padding the caller drops'\n"
    r = kf.run_file(write(tmp_path, declared), "unwritten")
    assert r.passed is None and r.unwritten_declared.startswith("rows 64..")
    golden = "\n\ndef golden(x):\n    y = x.copy()\n    y[64:] = 7\n    return y\n"
    r = kf.run_file(write(tmp_path, declared + golden), "unwritten")
    assert r.passed is True and r.unwritten_count == 4096 and r.max_abs_err == 0.0
    r = kf.run_file(write(tmp_path, HALF + golden), "unwritten")  # undeclared: fails
    assert r.passed is False


def test_a_returned_sbuf_tile_is_refused(tmp_path):
    body = KERNEL + "\n\n@nki.jit\ndef tile(x):\n    return nl.load(x)\n"
    with pytest.raises(KernelError, match=r"output-not-hbm.*SBUF"):
        kf.run_file(write(tmp_path, body), "tile")


def test_a_float_shape_is_refused_not_truncated(tmp_path):
    body = KERNEL.replace("nl.ndarray(x.shape,", "nl.ndarray((128, 64.5),", 1)
    with pytest.raises(KernelError, match=r"shape: tensor dimension 64\.5 .*k\.py:9"):
        kf.run_file(write(tmp_path, body), "copy")


# ---- the budget: every stage, and alive on long runs ----------------------------------------


def test_a_long_run_says_where_it_is(tmp_path, monkeypatch):
    from trnsim.nki import watchdog

    monkeypatch.setattr(watchdog, "BEAT_FIRST_S", 0.05)
    monkeypatch.setattr(watchdog, "BEAT_EVERY_S", 0.05)
    body = KERNEL.replace("    t = nl.load(x)\n", "    while True:\n        t = nl.load(x)\n")
    beats: list[str] = []
    with pytest.raises(KernelError, match="timeout"):
        kf.run_file(write(tmp_path, body), "copy", timeout=1.0, on_beat=beats.append)
    assert beats, "no progress line"
    assert any(
        "still running after" in b and "kernel 'copy' at k.py:11" in b and "instructions" in b
        for b in beats
    ), beats


def test_a_stop_the_file_catches_is_raised_again(tmp_path):
    body = KERNEL.replace(
        "def make_inputs(rng):\n",
        "def make_inputs(rng):\n    for _ in range(3):\n        try:\n"
        "            while True:\n                pass\n        except BaseException:\n"
        "            pass\n",
    )
    with pytest.raises(KernelError, match=r"timeout.*make_inputs.*k\.py:2[0-9]"):
        kf.run_file(write(tmp_path, body), "copy", timeout=0.3)
