"""nki-library's MXFP subkernels and MX MoE kernels (``cases_library_mx``), run unmodified from
a local checkout against the references written here; the MX helpers those references use,
checked against the ``quantize_mx`` docstring's rule by hand; ``Case.driver``."""

import os
from pathlib import Path

import numpy as np
import pytest

from trnsim.conformance.cases_library_mx import (
    CASES,
    decode_tile,
    qmx_tile_scales,
    qmx_tile_values,
)
from trnsim.conformance.refs import mx_scale_partitions
from trnsim.conformance.runner import run_checkout
from trnsim.numerics.packing import pack_x4

LIBRARY = Path(os.environ.get("TRNSIM_NKI_LIBRARY", "/work/checkouts/nki-library"))


def test_quantize_mx_tile_reference_follows_the_docstring_rule():
    # one group = 8 partitions x 4 consecutive free elements; amax 3.0: the NKI scale is
    # 2^(floor(log2 3) - (emax_e4m3 - 1)) = 2^(1 - 7), code 127 - 6 = 121
    src = np.zeros((8, 8), np.float32)
    src[3, 2] = 3.0
    src[0, 0] = 0.1
    src[5, 5] = 7.0  # the second group (free 4..7): 2^(2 - 7), code 122
    codes = qmx_tile_scales(src)
    assert codes.shape == (1, 2) and codes.tolist() == [[121, 122]]
    vals = qmx_tile_values(src)
    assert vals[3, 2] == 3.0 and vals[5, 5] == 7.0
    # 0.1 / 2^-6 = 6.4 -> e4m3 6.5 (mantissa step 0.5 in [4, 8)), times 2^-6
    assert vals[0, 0] == 6.5 * 2.0**-6


def test_decode_tile_reads_words_and_scale_rows():
    p, w = 16, 3
    elems = np.full((p, w, 4), 1.5, np.float32)
    elems[:, :, 2] = -0.25
    words = pack_x4(elems, "float8_e4m3fn_x4")  # [P, W]
    scales = np.zeros((p, w), np.uint8)
    rows = mx_scale_partitions(2)  # groups 0 and 1: partitions 0 and 1
    scales[rows[0]] = 127  # 2^0
    scales[rows[1]] = 129  # 2^2
    vals = decode_tile(words, scales)
    assert vals.shape == (p, 4 * w)
    assert vals[0, 0] == 1.5 and vals[0, 2] == -0.25
    assert vals[9, 4] == 6.0 and vals[9, 6] == -1.0


def test_nl_range_is_a_python_range():
    import trnsim.nki.language as nl

    assert list(nl.range(2, 7, 2)) == [2, 4, 6]


@pytest.mark.skipif(not LIBRARY.is_dir(), reason="no nki-library checkout")
@pytest.mark.parametrize("name", [c.name for c in CASES])
def test_mx_kernels_run_unmodified_and_match(name):
    _, _, results = run_checkout(LIBRARY, only=name, profile=True)
    (r,) = [r for r in results if r.name == name]
    assert r.outcome == "pass", r.detail
    assert r.profile_s is not None and r.profile_s > 0


@pytest.mark.skipif(not LIBRARY.is_dir(), reason="no nki-library checkout")
def test_shard_on_I_mx_adds_the_down_bias_on_both_cores(monkeypatch):
    """A library bug the shard-on-I cases step around (zero down bias): with a non-zero
    ``down_proj_bias`` the kernel's output is the reference with the bias added by BOTH cores
    before their partial sums are reduced (the docstring: once, by program 0)."""
    import functools

    from trnsim.conformance import cases_library_mx as mx
    from trnsim.conformance.runner import _launchable, checkout_imports, load_kernel
    from trnsim.nki.simulate import run

    (case,) = [c for c in CASES if c.name == "library/bwmm_shard_on_I_mx"]
    with checkout_imports(LIBRARY.resolve(), "nki-library"):
        made = mx._bwmm_mx_inputs(512, 512, 256, 2, 1024, down_bias=True)(np.random.default_rng(0))
        kernel = _launchable(load_kernel(case, LIBRARY.resolve()), case)
        out = run(kernel, *made.args, target=case.target, **made.kwargs).outputs
    out = np.asarray(out).astype(np.float64)
    once = np.asarray(case.reference(*made.args, **made.kwargs)).astype(np.float64)
    monkeypatch.setattr(mx, "_mx_expert", functools.partial(mx._mx_expert, bias_cores=(0, 1)))
    twice = np.asarray(case.reference(*made.args, **made.kwargs)).astype(np.float64)
    assert np.abs(out - twice).max() <= 2.0**-7 * np.abs(twice).max()
    assert np.abs(out - once).max() > 0.05


@pytest.mark.skipif(not LIBRARY.is_dir(), reason="no nki-library checkout")
def test_shard_on_block_mx_with_I_below_512_reads_uninitialised_partitions():
    """Not a case: with I < 512 (one partial I tile of I/4 partitions) the kernel quantizes and
    multiplies all 128 partitions of its intermediate tile, of which only I/4 were written
    (the library's comment: the garbage is multiplied by memset-zero weights). trnsim fills
    uninitialised SBUF with NaN (DESIGN: uninitialised reads are visible), and 0 x NaN is NaN,
    so the output is NaN; on hardware it is right only while the stale SBUF bytes are finite."""
    from trnsim.conformance import cases_library_mx as mx
    from trnsim.conformance.runner import _launchable, checkout_imports, load_kernel
    from trnsim.nki.simulate import run

    (case,) = [c for c in CASES if c.name == "library/bwmm_shard_on_block_mx"]
    with checkout_imports(LIBRARY.resolve(), "nki-library"):
        made = mx._bwmm_mx_inputs(256, 512, 128, 2, 256)(np.random.default_rng(0))
        kernel = _launchable(load_kernel(case, LIBRARY.resolve()), case)
        out = run(kernel, *made.args, target=case.target, **made.kwargs).outputs
    ref = np.asarray(case.reference(*made.args, **made.kwargs)).astype(np.float64)
    out = np.asarray(out).astype(np.float64)
    assert np.isfinite(ref).all()
    assert np.isnan(out[0, :256]).any()
