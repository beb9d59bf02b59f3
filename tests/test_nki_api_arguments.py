"""The Python entry points that run kernels (``trnsim.nki.run``, ``simulate``, ``record_run``,
``run_ranks``, ``kernel[lnc]``, ``trnsim.nki.benchmark``) check their arguments where they are
called: a negative, NaN, fractional or out-of-range value is a one-line ``UsageError`` naming
the function, the argument and its value, before anything runs, not a TypeError or an
OverflowError from deep inside a core."""

from __future__ import annotations

import re

import numpy as np
import pytest

import trnsim.nki as tn
from trnsim.errors import KernelError, TrnsimError, UsageError
from trnsim.nki.benchmark import benchmark, profile_kernel, record
from trnsim.nki.simulate import record_run, run_ranks

tn.install()
import nki  # noqa: E402
import nki.language as nl  # noqa: E402


@nki.jit
def copy(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(x))
    return out


X = np.ones((128, 16), np.float32)

BAD_RUN = [  # (keyword, value, words)
    ("lnc", -1, "lnc=-1"),
    ("lnc", 3, "lnc=3"),
    ("lnc", 1.5, "lnc=1.5"),
    ("lnc", float("nan"), "lnc=nan"),
    ("lnc", "2", "lnc='2'"),
    ("lnc", True, "lnc=True"),
    ("seed", -1, "seed=-1"),
    ("seed", float("nan"), "seed=nan"),
    ("seed", 2.5, "seed=2.5"),
    ("seed", 2**80, "seed=1208925819614629174706176"),
    ("seed", "7", "seed='7'"),
    ("max_instructions", 0, "max_instructions=0"),
    ("max_instructions", -5, "max_instructions=-5"),
    ("max_instructions", float("inf"), "max_instructions=inf"),
    ("max_instructions", 1.5, "max_instructions=1.5"),
    ("functional", "no", "functional='no'"),
    ("functional", 1, "functional=1"),
    ("options", 3, "options=3"),
    ("options", {"deferred": True}, "options="),
    ("target", 5, "target=5"),
    ("target", ["gen4"], "target=['gen4']"),
]


@pytest.mark.parametrize("key,value,words", BAD_RUN, ids=[f"{k}={v!r}" for k, v, _ in BAD_RUN])
def test_run_checks_its_arguments(key, value, words):
    with pytest.raises(UsageError, match=r"trnsim\.nki\.run: ") as info:
        tn.run(copy, X, **{key: value})
    assert words in str(info.value)


@pytest.mark.parametrize("key,value,words", [b for b in BAD_RUN if b[0] != "functional"][::3])
def test_record_run_and_run_ranks_check_them_too(key, value, words):
    with pytest.raises(UsageError, match=re.escape(f"trnsim.nki.record_run: {words}")):
        record_run(copy, X, **{key: value})
    if key == "max_instructions":  # run_ranks takes no bound
        return
    with pytest.raises(UsageError, match=re.escape(f"trnsim.nki.run_ranks: {words}")):
        run_ranks(copy, [((X,), {})], **{key: value})


@pytest.mark.parametrize(
    "kwargs,words",
    [({"seed": -5}, "seed=-5"), ({"seed": 1e3}, "seed=1000.0"), ({"options": "fast"}, "options")],
)
def test_simulate_checks_its_arguments_when_made(kwargs, words):
    with pytest.raises(UsageError, match=f"trnsim.nki.simulate: {words}"):
        tn.simulate(copy, **kwargs)


@pytest.mark.parametrize("kernel", [None, 3, "copy", np.ones(3)])
def test_a_kernel_that_is_no_kernel(kernel):
    with pytest.raises(UsageError, match="is not a kernel"):
        tn.run(kernel, X)
    with pytest.raises(UsageError, match="is not a kernel"):
        tn.simulate(kernel)


def test_unknown_target_and_rounding_name_the_choices():
    with pytest.raises(TrnsimError, match="valid: neuroncore-v2"):
        tn.run(copy, X, target="gen9")
    with pytest.raises(KernelError, match=r"rounding 'up' not in \['rne', 'stochastic'\]"):
        tn.run(copy, X, rounding="up")


@pytest.mark.parametrize("lnc", [0, -1, 3, 2.5, float("nan"), "a", None])
def test_kernel_lnc_is_one_or_two(lnc):
    with pytest.raises(KernelError, match="LNC must be 1 or 2"):
        copy[lnc]


@pytest.mark.parametrize("lnc", [1, 2, np.int64(2), (2,)])
def test_kernel_lnc_takes_whole_numbers(lnc):
    np.testing.assert_array_equal(copy[lnc](X), X)


BAD_BENCH = [  # (keyword, value, words)
    ("active_cores", -1, "active_cores=-1"),
    ("active_cores", 0, "active_cores=0"),
    ("active_cores", 100, "trn3 has 8 NeuronCores"),
    ("active_cores", float("nan"), "active_cores=nan"),
    ("active_cores", 2.0, "active_cores=2.0"),
    ("target", 7, "target=7"),
    ("target", object(), "target=<object"),
]


@pytest.mark.parametrize("key,value,words", BAD_BENCH, ids=[f"{k}={v!r}" for k, v, _ in BAD_BENCH])
def test_benchmark_checks_its_arguments(key, value, words):
    with pytest.raises(UsageError) as info:
        benchmark(copy, X, **{key: value})
    assert words in str(info.value)


def test_benchmark_timing_only_is_a_bool_and_target_none_is_the_default():
    with pytest.raises(UsageError, match="timing_only=3"):
        profile_kernel(copy, X, timing_only=3)
    with pytest.raises(UsageError, match="timing_only='yes'"):
        record(copy, X, timing_only="yes")
    assert benchmark(copy, X, target=None) == benchmark(copy, X, target="gen4")


def test_legacy_benchmark_counts_are_checked():
    from trnsim.nki.legacy.benchmark import benchmark as legacy_benchmark

    for bad in (-1, 2.5, float("nan"), "10", True):
        k = legacy_benchmark(warmup=bad)(copy.fn)
        with pytest.raises(KernelError, match="warmup"):
            k(X)


def test_legacy_benchmark_target_and_artifacts_are_checked_before_the_run(tmp_path):
    from trnsim.nki.legacy.benchmark import benchmark as legacy_benchmark

    with pytest.raises(UsageError, match="target 3 must be one of"):
        legacy_benchmark(platform_target=3)(copy.fn)(X)
    same = str(tmp_path / "x.json")
    k = legacy_benchmark(save_trace_name=same, save_neff_name=same)(copy.fn)
    with pytest.raises(UsageError, match="same file as save_trace_name"):
        k(X)
    assert list(tmp_path.iterdir()) == []
