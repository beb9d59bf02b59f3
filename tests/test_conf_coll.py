"""nki-library's SBUF utilities (``cases_library_utils``, through the drivers of
``trnsim.conformance.drivers_sbuf``) and collectives, run unmodified from a local checkout
against the references written here; illegal uses name the rule and the library's file:line."""

import dataclasses
import os
from pathlib import Path

import numpy as np
import pytest

from trnsim.conformance import cases_library_utils as utils
from trnsim.conformance.refs import bf16, randn
from trnsim.conformance.runner import checkout_imports, run_case, run_checkout

LIBRARY = Path(os.environ.get("TRNSIM_NKI_LIBRARY", "/work/checkouts/nki-library"))
needs_library = pytest.mark.skipif(not LIBRARY.is_dir(), reason="no nki-library checkout")


def _case(name: str):
    (case,) = [c for c in utils.CASES if c.name == name]
    return case


def _run(case, seed: int = 0):
    with checkout_imports(LIBRARY.resolve(), case.repo):
        return run_case(case, LIBRARY.resolve(), seed=seed)


@needs_library
@pytest.mark.parametrize("name", [c.name for c in utils.CASES])
def test_sbuf_utilities_run_unmodified_and_match(name):
    _, _, results = run_checkout(LIBRARY, only=name, profile=True)
    (r,) = [r for r in results if r.name == name]
    assert r.outcome == "pass", r.detail
    assert r.profile_s is not None and r.profile_s > 0


def test_cross_partition_copy_reference_keeps_other_partitions():
    src = np.arange(6 * 2, dtype=np.float32).reshape(6, 2)
    dst = -np.ones((8, 2), np.float32)
    out = utils._xpc_ref(src, dst, 1, 5, 3, 2)
    assert (out[5:8] == src[1:4]).all() and (out[:5] == -1).all()


@needs_library
def test_a_tensor_copy_at_an_illegal_start_names_the_library_line():
    # 48 partitions starting at partition 32: the architecture guide's start_partition rule
    # allows 0 or 64 for 33..64 partitions; the library's aligned path copies directly
    case = dataclasses.replace(
        _case("library/cross_partition_copy_aligned"),
        inputs=utils._xpc_inputs(128, 128, 64, 32, 64, 48),
    )
    r = _run(case)
    assert r.outcome == "kernel-error"
    assert "start-partition" in r.detail and "starts at partition 32 with 48" in r.detail
    assert r.location.endswith("core/utils/cross_partition_copy.py:87")


@needs_library
def test_tp_broadcast_of_bf16_is_refused_at_the_transpose():
    # nc_transpose: "The output dst tile must have the same data type as that of data"; the
    # utility transposes into an fp32 PSUM tile, so only an fp32 src is legal
    case = dataclasses.replace(
        _case("library/tp_broadcast_fp32"), inputs=lambda rng: (randn(rng, (64, 4), bf16), 32, 0)
    )
    r = _run(case)
    assert r.outcome == "kernel-error"
    assert "nc_transpose dst dtype float32 must equal data dtype bfloat16" in r.detail
    assert r.location.endswith("core/utils/tp_broadcast.py:60")


@needs_library
def test_an_illegal_use_in_a_driver_names_the_driver_line():
    # a src of 130 partitions: the driver's own SBUF tensor is illegal, before the utility runs
    case = dataclasses.replace(
        _case("library/stream_shuffle_broadcast"),
        inputs=lambda rng: (randn(rng, (130, 8)), randn(rng, (32, 8))),
    )
    r = _run(case)
    assert r.outcome == "kernel-error"
    assert "partition-dim" in r.detail and "130 partitions" in r.detail
    assert "trnsim/conformance/drivers_sbuf.py:" in r.location
