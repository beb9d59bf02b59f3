"""MX quantize / dequantize / matmul golden: an independent per-block implementation,
hand-worked OCP and NKI examples, special blocks, and error bounds as properties."""

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from trnsim.errors import NumericsError
from trnsim.numerics import get_format, to_float32
from trnsim.numerics.mx import MXArray, dequantize, mx_matmul, quantize
from trnsim.numerics.rounding import decode_table

ELEMS = ["float8_e4m3fn", "float8_e5m2", "float4_e2m1fn"]


# ---- the slow, obvious implementation (pure Python, nearest value by search) ----


def nearest_code(v: float, fmt) -> int:
    """Code of the finite element value nearest to v (ties: even code), saturating."""
    table = decode_table(fmt).astype(np.float64)
    v = min(max(v, -fmt.max), fmt.max)
    best = None
    for code, val in enumerate(table.tolist()):
        if math.isnan(val) or math.isinf(val) or (val == 0 and math.copysign(1, val) < 0):
            continue
        key = (abs(val - v), code & 1)
        if best is None or key < best[0]:
            best = (key, code)
    code = best[1]
    if table[code] == 0 and math.copysign(1.0, v) < 0:
        code |= 1 << (fmt.bits - 1)  # -0 for negative values that round to zero
    return code


def slow_quantize(x: np.ndarray, fmt_name: str, rule: str, block: int = 32):
    fmt = get_format(fmt_name)
    rows = x.reshape(-1, block).astype(np.float64)
    scales, data = [], []
    for blk in rows:
        amax = max(abs(v) for v in blk) if not any(math.isnan(v) for v in blk) else math.nan
        if math.isnan(amax) or math.isinf(amax):
            scales.append(255)
            data.extend([0] * block)  # placeholder, compared separately
            continue
        e = math.frexp(amax)[1] - 1 if amax > 0 else -126
        shared = max(e - fmt.emax + (1 if rule == "nki" else 0), -127)
        scales.append(shared + 127)
        data.extend(nearest_code(v / 2.0**shared, fmt) for v in blk)
    return np.array(scales).reshape(*x.shape[:-1], -1), np.array(data).reshape(x.shape)


def codes(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint8)


@pytest.mark.parametrize("seed", [0, 6])
@pytest.mark.parametrize("rule", ["ocp", "nki"])
@pytest.mark.parametrize("elem", ELEMS)
def test_matches_slow_implementation(elem, rule, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((4, 96)) * np.exp2(rng.integers(-20, 20, (4, 1)))
    x[0, :32] = 0.0  # an all-zero block
    x[1, 32:64] *= 1e-38  # a block near the bottom of fp32
    x = x.astype(np.float32)
    mx = quantize(x, elem, scale_rule=rule)
    scales, data = slow_quantize(x, elem, rule)
    assert np.array_equal(mx.scales, scales)
    assert np.array_equal(codes(mx.data).astype(np.int64), data)


# ---- hand-worked examples (OCP MX v1.0 section 6.3; NKI quantize_mx since 0.5.0) ----


def block_of(values, fill=0.0):
    b = np.full(32, fill, np.float32)
    b[: len(values)] = values
    return b


def test_ocp_e4m3_amax_one():
    # floor(log2(1)) - 8 = -8: scale code 119, 1.0 stored as 256 = 1.0 * 2^8 (code 0x78)
    mx = quantize(block_of([1.0, -0.5]), "float8_e4m3fn")
    assert mx.scales.tolist() == [119]
    assert codes(mx.data)[:3].tolist() == [0x78, 0xF0, 0]
    assert dequantize(mx)[:2].tolist() == [1.0, -0.5]


def test_nki_rule_scale_is_twice_the_ocp_scale():
    x = block_of([1.0, 3.0, -0.25])
    ocp, nki = quantize(x, "float8_e4m3fn"), quantize(x, "float8_e4m3fn", scale_rule="nki")
    assert int(nki.scales[0]) == int(ocp.scales[0]) + 1
    assert to_float32(nki.data, "float8_e4m3fn")[0] == 64.0  # 1.0 / 2^-6


def test_ocp_saturates_where_nki_does_not():
    # amax 500: OCP shared exp = 8 - 8 = 0, 500 > 448 saturates; NKI: 500 / 2 = 250 -> 256
    x = block_of([500.0, 1.0])
    ocp = quantize(x, "float8_e4m3fn")
    assert ocp.scales.tolist() == [127] and dequantize(ocp)[0] == 448.0
    nki = quantize(x, "float8_e4m3fn", scale_rule="nki")
    assert nki.scales.tolist() == [128] and dequantize(nki)[0] == 512.0


def test_e2m1_example():
    # amax 6: floor(log2 6) - 2 = 0 -> X = 1; 2.5 is a tie between 2 and 3 -> 2 (even)
    mx = quantize(block_of([6.0, 2.5, -0.25, 0.3]), "float4_e2m1fn")
    assert mx.scales.tolist() == [127]
    assert dequantize(mx)[:4].tolist() == [6.0, 2.0, -0.0, 0.5]


def test_e5m2_amax_emax():
    mx = quantize(block_of([2.0**20]), "float8_e5m2")
    assert mx.scales.tolist() == [127 + 20 - 15]


def test_all_zero_block_gets_the_smallest_scale():
    mx = quantize(np.zeros((2, 64), np.float32), "float8_e4m3fn")
    assert (mx.scales == 0).all() and (codes(mx.data) == 0).all()
    assert (dequantize(mx) == 0).all()


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("elem", ELEMS)
def test_nan_or_inf_makes_the_block_scale_nan(elem, bad):
    x = np.ones((1, 64), np.float32)
    x[0, 40] = bad
    mx = quantize(x, elem)
    assert mx.scales.tolist() == [[127 - get_format(elem).emax, 255]]
    out = dequantize(mx)
    assert (out[0, :32] == 1.0).all() and np.isnan(out[0, 32:]).all()


def test_tiny_amax_clamps_scale_to_minus_127():
    mx = quantize(block_of([2.0**-140]), "float8_e4m3fn")
    assert mx.scales.tolist() == [0]
    assert dequantize(mx)[0] == 0.0  # 2^-140 / 2^-127 = 2^-13 < e4m3fn half min subnormal


def test_shapes_axis_and_block():
    x = np.random.default_rng(0).standard_normal((64, 3)).astype(np.float32)
    a = quantize(x, "fp8_e5m2", axis=0)
    b = quantize(x.T, "fp8_e5m2", axis=-1)
    assert a.data.shape == (64, 3) and a.scales.shape == (2, 3) and a.axis == 0
    assert np.array_equal(codes(a.data), codes(b.data).T)
    assert np.array_equal(a.scales, b.scales.T)
    c = quantize(x, "float8_e5m2_x4", axis=0, block=16)
    assert c.fmt.name == "float8_e5m2" and c.scales.shape == (4, 3)


def test_bf16_input_and_dtypes():
    x = np.linspace(-3, 3, 64).astype(ml_dtypes.bfloat16)
    mx = quantize(x, "float8_e4m3fn")
    assert mx.data.dtype == np.dtype(ml_dtypes.float8_e4m3fn) and mx.scales.dtype == np.uint8
    assert dequantize(mx).dtype == np.float32


def test_errors_name_the_rule():
    with pytest.raises(NumericsError, match="length 40, not a multiple of the block size 32"):
        quantize(np.ones(40), "float8_e4m3fn")
    with pytest.raises(NumericsError, match="not an MX element format"):
        quantize(np.ones(32), "bfloat16")
    with pytest.raises(NumericsError, match="unknown scale_rule"):
        quantize(np.ones(32), "float8_e4m3fn", scale_rule="amd")


# ---- stochastic rounding inside MX ----


def test_stochastic_quantize_is_reproducible_and_unbiased():
    x = np.tile(block_of([1.0 + 1.0 / 48, 4.0]), (4000, 1))  # between two e4m3fn values
    a = quantize(x, "float8_e4m3fn", rounding="stochastic", rng=5)
    b = quantize(x, "float8_e4m3fn", rounding="stochastic", rng=5)
    assert np.array_equal(codes(a.data), codes(b.data))
    got = dequantize(a)[:, 0].astype(np.float64)
    # X = 2^(2 - 8): 1 + 1/48 becomes 65.33, between the e4m3fn values 64 and 72
    assert set(np.unique(got).tolist()) == {1.0, 1.125}
    p = (float(np.float32(1.0 + 1.0 / 48)) - 1.0) / 0.125
    sigma = np.sqrt(p * (1 - p) / len(got))
    assert abs(np.mean(got > 1.0) - p) < 5 * sigma


# ---- error bounds as properties ----

BIG = float(np.float32(1e30))
finite32 = st.floats(min_value=-BIG, max_value=BIG, allow_nan=False, allow_infinity=False, width=32)


@settings(max_examples=40, deadline=None)
@given(
    x=arrays(np.float32, (2, 64), elements=finite32),
    elem=st.sampled_from(ELEMS),
    rule=st.sampled_from(["ocp", "nki"]),
    rounding=st.sampled_from(["rne", "stochastic"]),
)
def test_quantization_error_bounds(x, elem, rule, rounding):
    fmt = get_format(elem)
    mx = quantize(x, elem, scale_rule=rule, rounding=rounding, rng=0)
    deq = dequantize(mx).astype(np.float64).reshape(-1, 32)
    xb = x.astype(np.float64).reshape(-1, 32)
    err = np.abs(deq - xb)
    amax = np.abs(xb).max(axis=1, keepdims=True)
    top = np.exp2(np.floor(np.log2(np.where(amax > 0, amax, 1.0))))  # 2^floor(log2 amax)
    # every element: within 2 ulps of the block's top binade (saturation included)
    assert (err <= 2.0 ** (1 - fmt.man_bits) * top + 2.0**-133).all()
    # the scale is exactly the rule's power of two
    x_scale = np.exp2(mx.scales.astype(np.float64).reshape(-1, 1) - 127)
    expect = np.maximum(top / 2.0 ** (fmt.emax - (rule == "nki")), 2.0**-127)
    assert np.array_equal(np.where(amax > 0, x_scale, 0), np.where(amax > 0, expect, 0))
    # RNE, element not saturated and in the element's normal range: relative error <= 2^-(m+1)
    if rounding == "rne":
        s = np.abs(xb) / x_scale
        ok = (s <= fmt.max) & (s >= fmt.min_normal)
        assert (err[ok] <= 2.0 ** -(fmt.man_bits + 1) * np.abs(xb[ok])).all()
    if rule == "nki":  # the NKI scale leaves headroom: nothing saturates
        assert (np.abs(xb) / x_scale < 2.0**fmt.emax).all()


# ---- the matmul golden ----


def golden_matmul(a: MXArray, b: MXArray) -> np.ndarray:
    """Straightforward: dequantize both in float64 and multiply (nc_matmul_mx_golden)."""
    av = to_float32(a.data, a.fmt).astype(np.float64) * np.repeat(
        np.exp2(a.scales.astype(np.float64) - 127), a.block, axis=1
    )
    bv = to_float32(b.data, b.fmt).astype(np.float64) * np.repeat(
        np.exp2(b.scales.astype(np.float64) - 127), b.block, axis=0
    )
    return av @ bv


PAIRS = [
    ("float8_e4m3fn", "float8_e4m3fn"),
    ("float8_e5m2", "float4_e2m1fn"),
    ("float4_e2m1fn", "float4_e2m1fn"),
]


@pytest.mark.parametrize("ea,eb", PAIRS)
def test_mx_matmul_against_dequantized_golden(ea, eb):
    rng = np.random.default_rng(7)
    a = quantize(rng.standard_normal((16, 128)).astype(np.float32), ea, axis=1)
    b = quantize(rng.standard_normal((128, 24)).astype(np.float32), eb, axis=0)
    golden = golden_matmul(a, b)
    assert np.array_equal(mx_matmul(a, b, accumulation="exact"), golden.astype(np.float32))
    fp32 = mx_matmul(a, b)
    assert fp32.dtype == np.float32 and fp32.shape == (16, 24)
    assert np.allclose(fp32, golden, rtol=1e-6, atol=1e-6)


def test_mx_matmul_hand_example():
    a = quantize(np.full((1, 64), 2.0, np.float32), "float8_e4m3fn", axis=1)
    b = quantize(np.full((64, 1), 0.5, np.float32), "float8_e4m3fn", axis=0)
    assert mx_matmul(a, b).tolist() == [[64.0]]


def test_mx_matmul_layout_errors():
    a = quantize(np.ones((4, 64), np.float32), "float8_e4m3fn", axis=1)
    with pytest.raises(NumericsError, match="axis 0"):
        mx_matmul(a, a)
    b = quantize(np.ones((32, 4), np.float32), "float8_e4m3fn", axis=0)
    with pytest.raises(NumericsError, match="K mismatch"):
        mx_matmul(a, b)
