"""RNE conversion: exhaustive bit patterns, a dense fp32 grid and every rounding midpoint,
against ml_dtypes (the reference wherever it defines the conversion)."""

import ml_dtypes
import numpy as np
import pytest

from trnsim.errors import NumericsError
from trnsim.numerics import ALL_FORMATS, FORMATS, cast, encode_reference, get_format, to_float32
from trnsim.numerics.rounding import codes_to_storage, decode_table

# ml_dtypes' own casts (the reference) warn on overflow and NaN; that is expected here
pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in cast:RuntimeWarning")

SMALL = [f for f in ALL_FORMATS if f.kind == "float" and f.bits <= 8]
ML_FLOATS = [f for f in ALL_FORMATS if f.kind == "float" and f.name not in ("float32", "tfloat32")]


def uint_view(a: np.ndarray) -> np.ndarray:
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[a.dtype.itemsize])


def same_bits_or_both_nan(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise: identical codes, or both decode to NaN."""
    nan = np.isnan(a.astype(np.float32)) & np.isnan(b.astype(np.float32))
    return (uint_view(a) == uint_view(b)) | nan


def dense_fp32_grid() -> np.ndarray:
    """Every (2^11 + 1)-th fp32 bit pattern: about 2 million values covering all exponents,
    signs, specials, and varied low (round / sticky) bits."""
    return np.arange(0, 2**32, 2**11 + 1, dtype=np.uint64).astype(np.uint32).view(np.float32)


def midpoints(fmt) -> np.ndarray:
    """fp32 values at, just below and just above every midpoint between adjacent finite
    values of fmt, plus values around and beyond the overflow threshold, both signs."""
    v = np.unique(decode_table(fmt).astype(np.float64))
    v = v[np.isfinite(v)]
    mid = ((v[1:] + v[:-1]) / 2).astype(np.float32).view(np.uint32)
    near = np.concatenate([mid - 1, mid, mid + 1]).view(np.float32)
    big = np.minimum(fmt.max * np.array([1.0, 1.0625, 1.1, 1.5, 2.0, 1e6]), 3.4e38).astype(
        np.float32
    )
    out = np.concatenate([near, big, [np.inf]]).astype(np.float32)
    return np.concatenate([out, -out])


# ---- exhaustive: every bit pattern of every format of 8 bits or fewer ----


@pytest.mark.parametrize("fmt", SMALL, ids=lambda f: f.name)
def test_decode_every_code_matches_ml_dtypes(fmt):
    codes = np.arange(1 << fmt.bits, dtype=np.uint8)
    ours = to_float32(codes, fmt)
    theirs = codes.view(fmt.dtype).astype(np.float32)
    assert np.array_equal(ours, theirs, equal_nan=True)
    assert np.array_equal(np.signbit(ours), np.signbit(theirs))


@pytest.mark.parametrize("fmt", SMALL, ids=lambda f: f.name)
def test_every_code_round_trips(fmt):
    codes = np.arange(1 << fmt.bits, dtype=np.uint8)
    values = to_float32(codes, fmt)
    back = uint_view(cast(values, fmt))
    nan = np.isnan(values)
    assert np.array_equal(back[~nan], codes[~nan])
    # NaN codes come back as a NaN of the same sign
    assert np.isnan(to_float32(back[nan], fmt)).all()
    if fmt.signed:
        assert np.array_equal(back[nan] >> (fmt.bits - 1), codes[nan] >> (fmt.bits - 1))


# ---- dense grid and midpoints: the reference encoder is ml_dtypes bit for bit ----


@pytest.mark.parametrize("fmt", ML_FLOATS, ids=lambda f: f.name)
def test_reference_matches_ml_dtypes_on_dense_fp32_grid(fmt):
    x = dense_fp32_grid()
    if fmt.name == "float4_e2m1fn":
        x = x[~np.isnan(x)]  # no NaN in e2m1 (ml_dtypes gives -0; trnsim raises)
    if fmt.name == "float8_e8m0fnu":  # documented: ml_dtypes rounds fp32 subnormals linearly
        x = x[~((np.abs(x) > 2.0**-127) & (np.abs(x) < 1.5 * 2.0**-127))]
    ours = codes_to_storage(encode_reference(x, fmt), fmt)
    assert same_bits_or_both_nan(ours, x.astype(fmt.dtype)).all()


@pytest.mark.parametrize("fmt", [f for f in ML_FLOATS if f.name != "float8_e8m0fnu"], ids=str)
def test_reference_matches_ml_dtypes_at_every_midpoint(fmt):
    x = midpoints(fmt)
    if fmt.nan_encoding == "none":
        x = x[np.isfinite(x) | ~np.isnan(x)]
    ours = codes_to_storage(encode_reference(x, fmt), fmt)
    assert same_bits_or_both_nan(ours, x.astype(fmt.dtype)).all()


def test_e8m0_rounds_to_nearest_power_of_two_ties_up():
    # hand-worked: 1.49 -> 2^0, 1.5 -> 2^1 (tie away), 3 -> 4, 2^-200 -> 2^-127 (no zero)
    x = np.array([1.0, 1.49, 1.5, 3.0, 0.75, 2.0**-200, 1.2 * 2.0**-127], np.float32)
    x[-2] = np.float32(2.0**-149)
    codes = uint_view(cast(x, "float8_e8m0fnu"))
    assert codes.tolist() == [127, 127, 128, 129, 127, 0, 0]
    nan = uint_view(cast(np.array([0.0, -1.0, np.nan, np.inf], np.float32), "e8m0"))
    assert nan.tolist() == [255, 255, 255, 255]
    assert uint_view(cast(np.array([np.inf]), "e8m0", saturate=True)).tolist() == [254]


# ---- fast paths equal the reference ----


@pytest.mark.parametrize("saturate", [None, True])
@pytest.mark.parametrize(
    "fmt", [f for f in ALL_FORMATS if f.kind == "float" and f.bits > 4], ids=lambda f: f.name
)
def test_fast_cast_equals_reference(fmt, saturate):
    x = np.concatenate([dense_fp32_grid()[::4], midpoints(get_format("float8_e4m3fn"))])
    if fmt.bits <= 16:
        x = np.concatenate([x, midpoints(fmt)])
    ref = codes_to_storage(encode_reference(x, fmt, saturate=saturate), fmt)
    fast = cast(x, fmt, saturate=saturate)
    assert fast.dtype == fmt.dtype
    assert same_bits_or_both_nan(fast, ref).all()


def test_fast_cast_equals_reference_e2m1():
    x = dense_fp32_grid()
    x = x[~np.isnan(x)][::4]
    ref = codes_to_storage(encode_reference(x, "float4_e2m1fn"), FORMATS["float4_e2m1fn"])
    assert np.array_equal(uint_view(cast(x, "fp4_e2m1")), uint_view(ref))


# ---- tf32 (no ml_dtypes type): against an independent arithmetic definition ----


def test_tf32_matches_arithmetic_rne():
    x = dense_fp32_grid()
    x = x[np.isfinite(x)]
    x64 = x.astype(np.float64)
    _, e = np.frexp(x64)
    quantum = np.ldexp(1.0, np.maximum(e - 1, -126) - 10)
    expected = np.rint(x64 / quantum) * quantum  # np.rint: ties to even
    expected = np.where(
        np.abs(expected) > FORMATS["tfloat32"].max, np.copysign(np.inf, x), expected
    )
    ours = cast(x, "tf32")
    assert ours.dtype == np.float32
    assert np.array_equal(ours.astype(np.float64), expected)
    assert not (ours.view(np.uint32) & 0x1FFF).any()


def test_tf32_specials():
    x = np.array([np.nan, -np.inf, np.inf, -0.0], np.float32)
    out = cast(x, "tfloat32")
    assert np.isnan(out[0]) and out[1] == -np.inf and out[2] == np.inf and np.signbit(out[3])
    with pytest.raises(NumericsError, match="low 13"):
        to_float32(np.array([1.0 + 2**-20], np.float32), "tf32")


# ---- overflow rules ----


def test_overflow_defaults_follow_ml_dtypes():
    big = np.array([3.4e38, -3.4e38, np.inf], np.float32)
    assert np.isnan(to_float32(cast(big, "float8_e4m3fn"), "float8_e4m3fn")).all()
    assert np.isinf(to_float32(cast(big, "float8_e5m2"), "float8_e5m2")).all()
    assert np.isinf(to_float32(cast(big, "bf16"), "bf16")).all()
    assert to_float32(cast(big, "fp4_e2m1"), "fp4_e2m1").tolist() == [6.0, -6.0, 6.0]


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2", "float8_e4m3", "bf16", "fp16"])
def test_saturate_clamps_overflow_and_inf_to_max(name):
    fmt = get_format(name)
    x = np.array([fmt.max * 1.01, -fmt.max * 4, np.inf, -np.inf, np.nan], np.float32)
    out = to_float32(cast(x, fmt, saturate=True), fmt)
    assert out[:4].tolist() == [fmt.max, -fmt.max, fmt.max, -fmt.max]
    assert np.isnan(out[4])


def test_e2m1_cannot_be_asked_not_to_saturate_and_has_no_nan():
    with pytest.raises(NumericsError, match="only saturate"):
        cast(np.ones(2, np.float32), "float4_e2m1fn", saturate=False)
    with pytest.raises(NumericsError, match="no NaN encoding: input element 1"):
        cast(np.array([1.0, np.nan], np.float32), "float4_e2m1fn")


def test_negative_zero_and_underflow_keep_sign():
    x = np.array([-0.0, -1e-30], np.float32)
    for name in ["float8_e4m3fn", "float8_e5m2", "float4_e2m1fn", "bf16"]:
        assert np.signbit(to_float32(cast(x, name), name)).all()


# ---- float64 inputs are rounded once (ml_dtypes rounds them through fp32 first) ----


def test_float64_inputs_round_once():
    # 1.0625 is the e4m3fn midpoint of 1 and 1.125; 2^-40 above it must round up. Via fp32
    # the 2^-40 is lost and the tie goes to the even 1.0 (what ml_dtypes does).
    x = np.array([1.0625 + 2.0**-40, 1.0625 - 2.0**-40, 1.0625])
    assert to_float32(cast(x, "float8_e4m3fn"), "float8_e4m3fn").tolist() == [1.125, 1.0, 1.0]
    assert to_float32(cast(x[:1], "bf16"), "bf16")[0] == 1.0625


def test_float64_grid_equals_float32_path_for_fp32_exact_values():
    x32 = dense_fp32_grid()[::8]
    for name in ["bf16", "float8_e5m2", "float8_e4m3", "float32"]:
        a, b = cast(x32.astype(np.float64), name), cast(x32, name)
        assert same_bits_or_both_nan(a, b).all()


# ---- integers: round half to even, saturate, NaN -> 0 ----


def test_float_to_int_rounds_half_even_and_saturates():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 127.5, 300.0, -300.0, np.inf, -np.inf, np.nan])
    assert cast(x, "int8").tolist() == [0, 2, 2, 0, -2, -2, 127, 127, -128, 127, -128, 0]
    assert cast(x, "uint8").tolist() == [0, 2, 2, 0, 0, 0, 128, 255, 0, 255, 0, 0]
    assert cast(np.array([3e9, -3e9]), "int32").tolist() == [2**31 - 1, -(2**31)]
    assert cast(np.array([70000, -5], np.int64), "uint16").tolist() == [65535, 0]
    with pytest.raises(NumericsError):
        cast(x, "int8", saturate=False)


def test_integer_cast_matches_python_round_on_random_values():
    rng = np.random.default_rng(0)
    x = rng.uniform(-40000, 40000, 20000).round(1)
    expected = [min(max(round(v), -32768), 32767) for v in x.tolist()]  # round(): half even
    assert cast(x, "int16").tolist() == expected


def test_storage_dtypes_and_shapes():
    x = np.linspace(-3, 3, 24, dtype=np.float32).reshape(2, 3, 4)
    for fmt in ALL_FORMATS:
        out = cast(x, fmt)
        if fmt.kind == "packed":
            assert out.shape == (2, 3, 1) and out.dtype == fmt.dtype
        else:
            assert out.shape == x.shape and out.dtype == fmt.dtype


def test_input_dtypes_widen_exactly():
    x = np.array([1.5, -2.25, 3.0], dtype=ml_dtypes.bfloat16)
    assert to_float32(cast(x, "fp8_e4m3fn"), "fp8_e4m3fn").tolist() == [1.5, -2.25, 3.0]


def test_bad_rounding_and_bad_storage_raise():
    with pytest.raises(NumericsError, match="unknown rounding"):
        cast(np.ones(2), "bf16", rounding="truncate")
    with pytest.raises(NumericsError, match="expected an array of float8_e5m2"):
        to_float32(np.ones(2, np.float32), "float8_e5m2")
    with pytest.raises(NumericsError, match="4-bit"):
        to_float32(np.array([16], np.uint8), "float4_e2m1fn")
