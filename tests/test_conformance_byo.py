"""Bring your own kernels: ``trnsim conformance PATH --cases FILE`` on any directory, and a
foreign kernel file under ``trnsim run`` (issue 27, item 7)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from trnsim.conformance.runner import load_cases_file, run_checkout
from trnsim.errors import UsageError

KERNEL = textwrap.dedent(
    """
    import nki
    import nki.language as nl
    import nki.isa as nisa


    @nki.jit
    def scale(x, factor):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(t, x)
        u = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(u, t, nl.multiply, factor)
        nisa.dma_copy(out, u)
        return out
    """
)

CASES = textwrap.dedent(
    """
    import numpy as np
    from trnsim.conformance import Case

    def inputs(rng):
        return rng.standard_normal((128, 256), dtype=np.float32), 3.0

    def reference(x, factor):
        return (x * np.float32(factor)).astype(np.float32)

    CASES = [
        Case("mine/scale", "mine", "kernels/scale.py", "scale", inputs, reference,
             rtol=0.0, atol=0.0),
        Case("mine/scale-wrong", "mine", "kernels/scale.py", "scale", inputs,
             lambda x, f: x * (f + 1), rtol=0.0, atol=0.0),
    ]
    """
)


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    (tmp_path / "repo" / "kernels").mkdir(parents=True)
    (tmp_path / "repo" / "kernels" / "scale.py").write_text(KERNEL)
    (tmp_path / "cases.py").write_text(CASES)
    return tmp_path


def test_a_users_cases_run_on_any_directory(checkout: Path):
    name, _, results = run_checkout(checkout / "repo", cases_file=checkout / "cases.py")
    assert name == "repo"
    by = {r.name: r for r in results}
    assert by["mine/scale"].outcome == "pass" and by["mine/scale"].max_error == 0.0
    assert by["mine/scale-wrong"].outcome == "mismatch"  # a wrong reference is caught


def test_cases_file_profile_times_the_kernel(checkout: Path):
    _, _, results = run_checkout(
        checkout / "repo", cases_file=checkout / "cases.py", profile=True, only="mine/scale"
    )
    assert results[0].profile_s is not None and results[0].profile_s > 0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("X = 1\n", "defines no CASES"),
        ("CASES = []\n", "non-empty list of Case"),
        ("CASES = [{'name': 'a'}]\n", "CASES[0] is a dict"),
        ("def f(:\n", "cases.py:1: SyntaxError"),
        ("raise ValueError('boom')\n", "cases.py:1: loading the cases file raised ValueError"),
        (
            "from trnsim.conformance import Case\n"
            "CASES = [Case('a', 'm', 'kernels/nope.py', 'scale', lambda r: (), lambda: 0)]\n",
            "'kernels/nope.py' is not a file",
        ),
        (
            "from trnsim.conformance import Case\n"
            "CASES = [Case('a', 'm', 'kernels/scale.py', 'scal', lambda r: (), lambda: 0)]\n",
            "defines no 'scal'",
        ),
        (
            "from trnsim.conformance import Case\n"
            "c = Case('a', 'm', 'kernels/scale.py', 'scale', lambda r: (), lambda: 0)\n"
            "CASES = [c, c]\n",
            "repeats the name 'a'",
        ),
        (
            "from trnsim.conformance import Case\n"
            "CASES = [Case('a', 'm', 'kernels/scale.py', 'scale', lambda r: (), lambda: 0,"
            " target='gen9')]\n",
            "target 'gen9'",
        ),
        ("IMPORT_ROOTS = ['nowhere']\nCASES = [1]\n", "IMPORT_ROOTS entry 'nowhere'"),
    ],
)
def test_a_bad_cases_file_is_one_usage_error(checkout: Path, text: str, message: str):
    bad = checkout / "cases.py"
    bad.write_text(text)
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace("[", r"\[")) as e:
        load_cases_file(bad, checkout / "repo")
    assert "\n" not in str(e.value)


def test_cli_cases_file_json_and_exit_status(checkout: Path, capsys):
    from trnsim.cli.main import main

    code = main(
        ["conformance", str(checkout / "repo"), "--cases", str(checkout / "cases.py"), "--json"]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 1  # one mismatch
    assert out["counts"]["pass"] == 1 and out["counts"]["mismatch"] == 1
    (checkout / "cases.py").write_text("X = 1\n")
    code = main(["conformance", str(checkout / "repo"), "--cases", str(checkout / "cases.py")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "defines no CASES" in err[0]


def test_run_on_a_foreign_kernel_file_says_how_to_add_inputs_and_a_golden(checkout, capsys):
    from trnsim.cli.main import main

    kfile = checkout / "repo" / "kernels" / "scale.py"
    assert main(["run", str(kfile)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "def make_inputs(rng): return (x, factor)" in err[0]
    assert "def golden(x, factor)" in err[0] and "from scale import scale" in err[0]


def test_a_wrapper_file_beside_a_foreign_kernel_runs_it(checkout, capsys):
    from trnsim.cli.main import main

    wrapper = checkout / "repo" / "kernels" / "check_scale.py"
    wrapper.write_text(
        "import numpy as np\nfrom scale import scale\n\n"
        "def make_inputs(rng):\n"
        "    return rng.standard_normal((128, 64), dtype=np.float32), 2.0\n\n"
        "def golden(x, factor):\n    return x * np.float32(factor)\n"
    )
    assert main(["run", str(wrapper), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["passed"] is True
