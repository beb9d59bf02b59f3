"""The conformance harness: checkout detection, outcome classes, the comparison, the verb."""

import dataclasses
import json
import os
from pathlib import Path

import numpy as np
import pytest

from trnsim.cli.main import main
from trnsim.conformance.runner import all_cases, classify, compare, run_checkout
from trnsim.errors import KernelError

LIBRARY = Path(os.environ.get("TRNSIM_NKI_LIBRARY", "/work/checkouts/nki-library"))


def test_bad_path_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["conformance", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is not a directory" in err[0]
    assert main(["conformance", str(tmp_path)]) == 2
    assert "not a checkout trnsim knows" in capsys.readouterr().err


def test_nan_and_shape_differences_never_pass():
    ref = np.ones((2, 2), np.float32)
    assert compare(ref, ref, 0, 0)[0]
    bad = ref.copy()
    bad[0, 0] = np.nan
    assert not compare(bad, ref, 1, 1)[0]
    assert not compare(np.ones((2, 3)), ref, 1, 1)[0]
    ok, err, why = compare(ref + 0.5, ref, 0.1, 0.1)
    assert not ok and err == 0.5 and "4 of 4" in why


def test_outcome_classes(tmp_path):
    assert classify(KernelError("not-implemented", "nki.isa.topk"), tmp_path)[0] == (
        "trnsim-missing"
    )
    assert classify(KernelError("dtype", "bad"), tmp_path)[0] == "kernel-error"
    assert classify(ImportError("no torch", name="torch"), tmp_path)[0] == "external"
    assert classify(SyntaxError("x"), tmp_path)[0] == "external"


def test_case_names_are_unique_and_repos_known():
    cases = all_cases()
    assert len({c.name for c in cases}) == len(cases)
    assert {c.repo for c in cases} <= {"nki-library", "nki-samples", "sdk", "sdk226"}


@pytest.mark.skipif(not LIBRARY.is_dir(), reason="no nki-library checkout")
def test_library_cumsum_runs_unmodified_and_matches():
    checkout, commit, results = run_checkout(LIBRARY, only="library/cumsum_2d")
    assert checkout == "nki-library" and commit != ""
    (r,) = results
    assert r.outcome == "pass", r.detail
    assert r.max_error is not None and r.max_error < 1e-3


def _fake_samples(tmp_path, body):
    """A minimal nki-samples-shaped checkout holding one kernel file."""
    folder = tmp_path / "src" / "nki_samples" / "tutorials" / "t"
    folder.mkdir(parents=True)
    (folder / "k.py").write_text(body)
    return tmp_path


def test_a_python_error_in_a_kernel_is_reported_at_the_kernels_line(tmp_path):
    from trnsim.conformance.case import Case
    from trnsim.conformance.runner import checkout_imports, run_case

    root = _fake_samples(
        tmp_path,
        "import nki\nimport nki.language as nl\n\n\n@nki.jit\ndef k(x):\n    return 1 / 0\n",
    )
    case = Case(
        "t/k",
        "nki-samples",
        "src/nki_samples/tutorials/t/k.py",
        "k",
        lambda rng: (np.zeros((2, 2), np.float32),),
        lambda x: x,
    )
    with checkout_imports(root.resolve(), "nki-samples"):
        r = run_case(case, root)
    assert r.outcome == "kernel-error" and "ZeroDivisionError" in r.detail
    assert r.location == "src/nki_samples/tutorials/t/k.py:7"


def test_call_inputs_and_decode(tmp_path):
    from trnsim.conformance.case import Call, Case
    from trnsim.conformance.runner import checkout_imports, run_case

    root = _fake_samples(
        tmp_path,
        "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n\n"
        "@nki.jit\ndef k(x, scale=1.0):\n"
        "    t = nl.load(x)\n"
        "    o = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)\n"
        "    nisa.tensor_scalar(o, t, nl.multiply, scale)\n"
        "    h = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)\n"
        "    nl.store(h, o)\n"
        "    return h\n",
    )
    case = Case(
        "t/k",
        "nki-samples",
        "src/nki_samples/tutorials/t/k.py",
        "k",
        lambda rng: Call((np.ones((2, 4), np.float32),), {"scale": 3.0}),
        lambda x, scale: (x * scale).sum(axis=1),
        decode=lambda out: out.sum(axis=1),
    )
    with checkout_imports(root.resolve(), "nki-samples"):
        r = run_case(case, root)
    assert r.outcome == "pass", r.detail
    assert "scale=3.0" in r.shapes and r.max_error == 0.0


def test_exit_status_counts_external_only_with_strict(tmp_path, monkeypatch, capsys):
    """A case that fails outside trnsim (a package the checkout imports is not installed) does
    not fail the run unless --strict; a passing case never does."""
    from trnsim.cli.main import main
    from trnsim.conformance import runner
    from trnsim.conformance.case import Case

    root = _fake_samples(
        tmp_path,
        "import nki\nimport nki.language as nl\n\n\n@nki.jit\ndef k(x):\n"
        "    t = nl.load(x)\n    h = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)\n"
        "    nl.store(h, t)\n    return h\n",
    )
    (root / "src/nki_samples/tutorials/t/ext.py").write_text(
        "import not_installed_pkg_xyz\n\n\ndef k(x):\n    return x\n"
    )
    same = Case(
        "t/k",
        "nki-samples",
        "src/nki_samples/tutorials/t/k.py",
        "k",
        lambda rng: (np.ones((2, 4), np.float32),),
        lambda x: x,
    )
    ext = Case(
        "t/ext",
        "nki-samples",
        "src/nki_samples/tutorials/t/ext.py",
        "k",
        lambda rng: (np.ones((2, 4), np.float32),),
        lambda x: x,
    )
    monkeypatch.setattr(runner, "all_cases", lambda: [same, ext])
    assert main(["conformance", str(root), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["counts"]["pass"] == 1 and out["counts"]["external"] == 1
    assert main(["conformance", str(root), "--json", "--strict"]) == 1
    capsys.readouterr()


def test_out_args_compare_the_buffers_the_kernel_writes(tmp_path):
    from trnsim.conformance.case import Case
    from trnsim.conformance.runner import checkout_imports, run_case

    root = _fake_samples(
        tmp_path,
        "import nki\nimport nki.language as nl\n\n\ndef k(x, out):\n"
        "    t = nl.load(x)\n    nl.store(out, nl.multiply(t, 2.0))\n",
    )
    case = Case(
        "t/k",
        "nki-samples",
        "src/nki_samples/tutorials/t/k.py",
        "k",
        lambda rng: (np.ones((2, 4), np.float32), np.zeros((2, 4), np.float32)),
        lambda x, out: 2 * x,
        out_args=(1,),
    )
    with checkout_imports(root.resolve(), "nki-samples"):
        r = run_case(case, root)
    assert r.outcome == "pass" and r.max_error == 0.0, r.detail
    wrong = dataclasses.replace(case, reference=lambda x, out: 3 * x)
    with checkout_imports(root.resolve(), "nki-samples"):
        assert run_case(wrong, root).outcome == "mismatch"


def test_a_kernel_callers_launches_are_profiled(tmp_path):
    """A function that launches a kernel itself records nothing in its own run; the harness
    times the launches it made (``simulate.observe_runs``)."""
    from trnsim.conformance.case import Case
    from trnsim.conformance.runner import checkout_imports, run_case

    root = _fake_samples(
        tmp_path,
        # a legacy kernel launches anew when called (no inlining into the caller's run)
        "import neuronxcc.nki as nki\nimport neuronxcc.nki.language as nl\n\n\n@nki.jit\n"
        "def inner(x):\n    h = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)\n"
        "    nl.store(h, nl.load(x))\n    return h\n\n\ndef caller(x):\n    return inner(x)\n",
    )
    case = Case(
        "t/caller",
        "nki-samples",
        "src/nki_samples/tutorials/t/k.py",
        "caller",
        lambda rng: (np.ones((2, 4), np.float32),),
        lambda x: x,
        api="legacy",
    )
    with checkout_imports(root.resolve(), "nki-samples"):
        r = run_case(case, root, profile=True)
    assert r.outcome == "pass", r.detail
    assert r.profile_s is not None and r.profile_s > 0


def test_bounds_references_pass_inside_and_fail_outside_or_on_nan():
    from trnsim.conformance.refs import Bounds, gamma

    b = Bounds(np.array([0.0, 1.0, -2.0]), np.array([0.5, 1.0, -1.0]))
    ok, err, _ = compare(np.array([0.25, 1.0, -1.5], np.float32), b, 0.0, 0.0)
    assert ok and err == 0.0
    ok, err, why = compare(np.array([0.25, 1.0 + 2**-20, -1.5]), b, 0.0, 0.0)
    assert not ok and err == pytest.approx(2**-20) and "outside bounds" in why
    assert compare(np.array([0.25, 1.0 + 2**-20, -1.5]), b, 2**-19, 0.0)[0]  # within rtol
    assert not compare(np.array([np.nan, 1.0, -1.5]), b, 1.0, 1.0)[0]
    assert not compare(np.zeros(2), b, 1.0, 1.0)[0]  # shape
    assert gamma(128) == pytest.approx(128 * 2**-24, rel=1e-5)


def test_attention_bounds_hold_the_exact_value_and_are_narrow():
    from trnsim.conformance.cases_legacy import CASES, ref_attention_dk

    case = next(c for c in CASES if c.name == "legacy/samples/attention_v7")
    q, k, v = case.inputs(np.random.default_rng(0))
    b = case.reference(q, k, v)
    exact = ref_attention_dk(q, k, v).astype(np.float64)
    # the exact softmax (no bf16 rounding) is not an admissible kernel result: some of it
    # falls outside, so the bounds do check the bf16 roundings
    assert ((exact < b.lo) | (exact > b.hi)).any()
    # narrower than one bf16 ulp (2^-8 relative) of the typical output
    assert (b.lo <= b.hi).all() and np.median(b.hi - b.lo) < 2**-8 * np.abs(exact).mean()
