"""Stochastic rounding: neighbours only, reproducible, chunking-invariant, unbiased."""

import numpy as np
import pytest

from trnsim.errors import NumericsError
from trnsim.numerics import StochasticRng, cast, get_format, to_float32

SR_FORMATS = ["bfloat16", "float16", "tfloat32", "float8_e4m3fn", "float8_e5m2", "float4_e2m1fn"]


def neighbours(x: np.ndarray, fmt) -> tuple[np.ndarray, np.ndarray]:
    """The representable values just below and above x (magnitude-wise), from RNE casts of
    x nudged: truncation toward zero and away from zero computed in float64."""
    f = get_format(fmt)
    x64 = x.astype(np.float64)
    _, e = np.frexp(x64)
    q = np.ldexp(1.0, np.maximum(e - 1, f.emin) - f.man_bits)
    lo = np.trunc(x64 / q) * q
    hi = lo + np.sign(x64) * q
    return lo, hi


@pytest.mark.parametrize("name", SR_FORMATS)
def test_result_is_one_of_the_two_neighbours(name):
    f = get_format(name)
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(50_000) * min(f.max / 8, 1e4)).astype(np.float32)
    out = to_float32(cast(x, f, rounding="stochastic", rng=7), f).astype(np.float64)
    lo, hi = neighbours(x, f)
    hi = np.clip(hi, -f.max, f.max)  # SR saturates in the default mode only for e2m1
    assert ((out == lo) | (out == hi)).all()


@pytest.mark.parametrize("name", SR_FORMATS)
def test_representable_values_are_unchanged(name):
    f = get_format(name)
    exact = to_float32(cast(np.linspace(-f.max, f.max, 1001).astype(np.float32), f), f)
    again = to_float32(cast(exact, f, rounding="stochastic", rng=3), f)
    assert np.array_equal(exact, again)


def test_same_seed_same_bits_different_seed_different_bits():
    x = np.random.default_rng(0).standard_normal(10_000).astype(np.float32)
    a = cast(x, "bf16", rounding="stochastic", rng=42)
    b = cast(x, "bf16", rounding="stochastic", rng=StochasticRng(42))
    c = cast(x, "bf16", rounding="stochastic", rng=43)
    assert np.array_equal(a.view(np.uint16), b.view(np.uint16))
    assert not np.array_equal(a.view(np.uint16), c.view(np.uint16))


def test_chunking_does_not_change_the_bits():
    x = np.random.default_rng(0).standard_normal((64, 50)).astype(np.float32)
    whole = cast(x, "float8_e4m3fn", rounding="stochastic", rng=StochasticRng(5))
    rng = StochasticRng(5)
    parts = [
        cast(x[i : i + 16], "float8_e4m3fn", rounding="stochastic", rng=rng)
        for i in (0, 16, 32, 48)
    ]
    assert np.array_equal(whole.view(np.uint8), np.concatenate(parts).view(np.uint8))
    assert rng.offset == x.size


@pytest.mark.parametrize(
    "name,frac",
    [("bfloat16", 0.3), ("bfloat16", 2.0**-12), ("float8_e4m3fn", 0.5), ("float8_e5m2", 0.8125),
     ("float4_e2m1fn", 0.25), ("float16", 0.7)],
)  # fmt: skip
def test_probability_of_rounding_up_and_unbiasedness(name, frac):
    """x = 1 + frac * ulp(1): rounds up with probability frac; the mean equals x."""
    f = get_format(name)
    ulp = 2.0**-f.man_bits
    x = np.float32(1.0 + frac * ulp)
    frac = (float(x) - 1.0) / ulp  # the fraction fp32 actually holds
    n = 400_000
    out = to_float32(cast(np.full(n, x), f, rounding="stochastic", rng=11), f).astype(np.float64)
    up = np.mean(out > 1.0)
    sigma = np.sqrt(frac * (1 - frac) / n)
    assert abs(up - frac) < 5 * sigma + 1e-12
    assert abs(out.mean() - float(x)) < 5 * sigma * ulp + 1e-15


def test_unbiased_on_random_data_where_rne_is_biased():
    """Summing many small values into bf16 stays unbiased under SR."""
    rng = np.random.default_rng(3)
    x = rng.uniform(1.0, 1.0 + 2.0**-7, 200_000).astype(np.float32)  # all inside one bf16 ulp
    sr = to_float32(cast(x, "bf16", rounding="stochastic", rng=1), "bf16").astype(np.float64)
    err = sr - x.astype(np.float64)
    sigma = 2.0**-7 / 2 / np.sqrt(len(x))
    assert abs(err.mean()) < 5 * sigma


def test_negative_values_round_symmetrically():
    x = np.full(100_000, np.float32(-(1.0 + 0.25 * 2.0**-7)))
    out = to_float32(cast(x, "bf16", rounding="stochastic", rng=2), "bf16")
    assert set(np.unique(out).tolist()) == {-1.0, -(1.0 + 2.0**-7)}
    assert abs(np.mean(out < -1.0) - 0.25) < 5 * np.sqrt(0.25 * 0.75 / len(x))


def test_subnormal_results_are_neighbours_too():
    f = get_format("float8_e4m3fn")
    x = np.linspace(0, 4 * f.min_normal, 4001).astype(np.float32)
    out = to_float32(cast(x, f, rounding="stochastic", rng=9), f).astype(np.float64)
    lo, hi = neighbours(x, f)
    assert ((out == lo) | (out == hi)).all()


def test_overflow_under_sr_follows_the_saturate_rule():
    x = np.array([500.0, -1e6, np.inf], np.float32)
    sat = to_float32(
        cast(x, "float8_e4m3fn", rounding="stochastic", saturate=True, rng=0), "float8_e4m3fn"
    )
    assert sat.tolist() == [448.0, -448.0, 448.0]
    nan = to_float32(cast(x, "float8_e4m3fn", rounding="stochastic", rng=0), "float8_e4m3fn")
    assert np.isnan(nan).all()


def test_sr_requires_a_seed_and_a_mantissa():
    with pytest.raises(NumericsError, match="needs rng="):
        cast(np.ones(3), "bf16", rounding="stochastic")
    with pytest.raises(NumericsError, match="no mantissa bits"):
        cast(np.ones(3), "float8_e8m0fnu", rounding="stochastic", rng=1)
    with pytest.raises(NumericsError, match="integer"):
        cast(np.ones(3), "int8", rounding="stochastic", rng=1)


def test_rng_bits_are_uniform():
    bits = StochasticRng(123).draw(200_000, 16)
    assert bits.max() < 2**16
    counts = np.bincount((bits >> 12).astype(np.int64), minlength=16)  # 16 buckets
    expected = len(bits) / 16
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 45  # 15 dof: p < 1e-4 beyond this
    for b in range(16):
        assert abs(np.mean((bits >> b) & 1) - 0.5) < 5 * 0.5 / np.sqrt(len(bits))


@pytest.mark.parametrize("saturate", [None, True])
@pytest.mark.parametrize("name", [*SR_FORMATS, "float8_e4m3"])
def test_fast_sr_equals_reference_bit_for_bit(name, saturate):
    """cast's SR fast path (add bits to the fp32 pattern, clear them) equals encode_reference
    with the same generator, on a dense fp32 grid including subnormals and overflow."""
    from trnsim.numerics import encode_reference
    from trnsim.numerics.rounding import codes_to_storage, resolve_saturate

    f = get_format(name)
    x = np.arange(0, 2**32, 2**13 + 1, dtype=np.uint64).astype(np.uint32).view(np.float32)
    if f.nan_encoding == "none":
        x = x[~np.isnan(x)]
    fast = cast(x, f, rounding="stochastic", saturate=saturate, rng=StochasticRng(3))
    sat = resolve_saturate(f, saturate)
    ref = codes_to_storage(encode_reference(x, f, "stochastic", sat, StochasticRng(3)), f)
    u = {1: np.uint8, 2: np.uint16, 4: np.uint32}[fast.dtype.itemsize]
    both_nan = np.isnan(fast.astype(np.float32)) & np.isnan(ref.astype(np.float32))
    assert ((fast.view(u) == ref.view(u)) | both_nan).all()
