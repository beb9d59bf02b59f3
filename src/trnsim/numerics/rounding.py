"""Conversion between formats: round-to-nearest-even, stochastic rounding, saturation.

The specification is ``encode_reference``: a plain, table-driven bit-level encoder that turns
fp32 or fp64 values into the codes of any format in ``FORMATS``. It is written to be read,
not to be fast. ``cast`` is what the rest of trnsim calls; it takes fast paths that the tests
prove bit-equal to the reference (RNE: ml_dtypes / NumPy ``astype`` after saturation, a bit
trick for tf32; stochastic: add the random bits to the fp32 pattern, clear them, cast
exactly) and otherwise calls the reference.

Rounding, with ``m`` the target's mantissa bits and ``q = 2^(max(e, emin) - m)`` the target's
quantum at the value's exponent ``e``:

- ``"rne"``: round to nearest, ties to even (IEEE 754 roundTiesToEven), bit for bit as
  ml_dtypes does. float8_e8m0fnu has no mantissa bit, so ties go away from zero there
  (which is what ml_dtypes does for fp32 normal inputs; see ``Format.ties``).
- ``"stochastic"``: add a uniform random integer of ``K = 23 - m`` bits just below the
  target's last mantissa bit, then truncate. The source is fp32 (float64 inputs are first
  rounded to fp32 by RNE; the hardware rounds its fp32 accumulators, ``trainium3_arch.rst``),
  so for results in the target's normal range the ``K`` random bits cover every discarded
  bit and ``P(round up) = (x - trunc(x)) / q`` exactly: unbiased. For results in the target's
  subnormal range, source bits below those ``K`` positions are truncated, a bias below
  ``2^-K`` of a quantum. Random bits come from ``StochasticRng`` (counter-based, seeded).

Overflow (``saturate``): ``True`` clamps every finite value beyond the largest finite number,
and +-inf, to +-max; ``False`` gives inf where the format has one, else NaN. NaN inputs stay
NaN. ``saturate=None`` picks the per-format default in ``DEFAULT_SATURATE``, which follows
ml_dtypes (the same conversions AWS's own NKI simulator uses, ``nki_simulator.rst``):
IEEE-style formats overflow to inf; float8_e4m3fn and float8_e8m0fnu overflow to NaN;
float4_e2m1fn has neither, so it always saturates. The MX path passes ``saturate=True``, as
the OCP MX spec requires. Integers round to nearest even and always saturate; NaN becomes 0
(NKI 0.6.0 release notes: fp32 -> int rounds to nearest even and saturates).

Documented differences from ml_dtypes (``tests/test_numerics_cast.py`` checks the rest):

- float4_e2m1fn has no NaN: casting NaN raises NumericsError (ml_dtypes returns -0).
- float8_e8m0fnu for inputs in (1, 1.5) * 2^-127 (fp32 subnormals) gives the nearer 2^-127;
  ml_dtypes gives 2^-126. Zero, negative and NaN inputs give NaN (0xFF), as in ml_dtypes.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
from numpy.typing import ArrayLike

from trnsim.errors import NumericsError
from trnsim.numerics.formats import Format, get_format
from trnsim.numerics.rng import StochasticRng, as_rng
from trnsim.numerics.words import codes_to_words, words_to_codes

ROUNDINGS = ("rne", "stochastic")

# Overflow behaviour when saturate=None: True = clamp to +-max, False = inf (if any) else NaN.
DEFAULT_SATURATE: dict[str, bool] = {
    "float32": False,
    "tfloat32": False,
    "bfloat16": False,
    "float16": False,
    "float8_e4m3": False,
    "float8_e4m3fn": False,
    "float8_e5m2": False,
    "float4_e2m1fn": True,
    "float8_e8m0fnu": False,
    "int8": True,
    "int16": True,
    "int32": True,
    "uint8": True,
    "uint16": True,
    "uint32": True,
}


# Source layouts the reference encoder reads: (uint view, exponent bits, mantissa bits, bias).
_SOURCES = {
    np.dtype(np.float32): (np.uint32, 8, 23, 127),
    np.dtype(np.float64): (np.uint64, 11, 52, 1023),
}


# ---------------------------------------------------------------------------------------------
# helpers shared by the reference and the fast paths
# ---------------------------------------------------------------------------------------------


def _element(fmt: Format) -> Format:
    return fmt.element if fmt.kind == "packed" and fmt.element is not None else fmt


def resolve_saturate(fmt: Format, saturate: bool | None) -> bool:
    """The effective overflow rule for ``fmt`` (see module docstring)."""
    fmt = _element(fmt)
    default = DEFAULT_SATURATE[fmt.name]
    if saturate is None:
        return default
    saturate = bool(saturate)
    if not saturate and (fmt.kind == "int" or fmt.nan_encoding == "none"):
        raise NumericsError(
            f"{fmt.name} has no inf or NaN encoding, so overflow can only saturate; "
            "saturate=False is not possible"
        )
    return saturate


def _as_float_source(x: np.ndarray) -> np.ndarray:
    """Return x as float32 or float64 (exactly; low-precision floats widen to float32)."""
    if x.dtype == np.float64 or x.dtype == np.float32:
        return x
    if x.dtype.kind == "f" or x.dtype in _ML_FLOAT_DTYPES:
        return x.astype(np.float32)  # float16, bfloat16, float8/4: exact in fp32
    if x.dtype.kind in "iub":
        return x.astype(np.float64)
    raise NumericsError(f"cannot convert an array of dtype {x.dtype} to a number format")


_ML_FLOAT_DTYPES = {
    np.dtype(t)
    for t in (
        ml_dtypes.bfloat16,
        ml_dtypes.float8_e4m3,
        ml_dtypes.float8_e4m3fn,
        ml_dtypes.float8_e5m2,
        ml_dtypes.float4_e2m1fn,
        ml_dtypes.float8_e8m0fnu,
    )
}


def nan_code(fmt: Format) -> int:
    """The canonical (quiet, positive) NaN magnitude code of a float format."""
    fmt = _element(fmt)
    if fmt.nan_encoding == "ieee":
        return ((1 << fmt.exp_bits) - 1) << fmt.man_bits | 1 << (fmt.man_bits - 1)
    if fmt.nan_encoding == "all_ones_mantissa":
        return (1 << (fmt.exp_bits + fmt.man_bits)) - 1
    if fmt.nan_encoding == "all_ones":
        return (1 << fmt.bits) - 1
    raise NumericsError(f"{fmt.name} has no NaN encoding")


def inf_code(fmt: Format) -> int:
    fmt = _element(fmt)
    if not fmt.has_inf:
        raise NumericsError(f"{fmt.name} has no inf encoding")
    return ((1 << fmt.exp_bits) - 1) << fmt.man_bits


def _check_rounding(rounding: str) -> None:
    if rounding not in ROUNDINGS:
        raise NumericsError(f"unknown rounding {rounding!r}; valid: {', '.join(ROUNDINGS)}")


# ---------------------------------------------------------------------------------------------
# the reference encoder (the specification)
# ---------------------------------------------------------------------------------------------


@np.errstate(over="ignore", invalid="ignore")
def encode_reference(
    x: np.ndarray,
    fmt: str | Format,
    rounding: str = "rne",
    saturate: bool | None = None,
    rng: StochasticRng | int | None = None,
    random_bits: np.ndarray | None = None,
) -> np.ndarray:
    """Encode the values ``x`` as codes of float format ``fmt`` (int64 array, same shape).

    ``random_bits`` (stochastic only) supplies the per-element random integers instead of
    drawing them from ``rng`` (used by the fast path to hand over its subnormal elements).

    The slow, obvious specification of every float conversion; see the module docstring for
    the rounding and overflow rules. Codes include the sign bit; tf32 codes are 19 bits.
    """
    fmt = _element(get_format(fmt))
    _check_rounding(rounding)
    if fmt.kind != "float":
        raise NumericsError(f"encode_reference encodes float formats; {fmt.name} is {fmt.kind}")
    sat = resolve_saturate(fmt, saturate)
    src = _as_float_source(np.asarray(x))
    stochastic = rounding == "stochastic"
    if stochastic:
        if fmt.man_bits == 0:
            raise NumericsError(
                f"stochastic rounding to {fmt.name} is not defined: it has no mantissa bits"
            )
        src = src.astype(np.float32)  # SR rounds fp32 sources (float64 goes through RNE)
    elif src.dtype == np.float32 and fmt.emin < -126:
        src = src.astype(np.float64)  # e8m0 reaches below fp32's normal range: use exact exps
    uint_t, s_exp, s_man, s_bias = _SOURCES[src.dtype]

    bits = src.view(uint_t).astype(np.uint64)
    total = 1 + s_exp + s_man
    negative = (bits >> np.uint64(total - 1)).astype(bool)
    mag = (bits & np.uint64((1 << (total - 1)) - 1)).astype(np.int64)
    exp_field = mag >> s_man
    is_nan = (exp_field == (1 << s_exp) - 1) & ((mag & ((1 << s_man) - 1)) != 0)
    is_inf = mag == ((1 << s_exp) - 1) << s_man

    # value = sig * 2^(e_src - s_man), with e_src the exponent of the source's leading bit slot
    e_src = np.maximum(exp_field, 1) - s_bias
    sig = np.where(exp_field > 0, (mag & ((1 << s_man) - 1)) | (1 << s_man), mag)
    # the result's quantum is 2^(e_eff - m): shift away that many low bits of sig
    e_eff = np.maximum(e_src, fmt.emin)
    m = fmt.man_bits
    k_random = s_man - m  # bits between the target's last mantissa bit and the source's
    clamp = s_man + 2 + (k_random if stochastic else 0)  # beyond this every result is 0
    shift = np.minimum(s_man - m + (e_eff - e_src), clamp)

    if stochastic:
        if random_bits is None:
            random_bits = as_rng(rng).draw(src.size, k_random)
        r = np.asarray(random_bits).astype(np.int64).reshape(src.shape)
        n = (sig + (r << (shift - k_random))) >> shift
    else:
        half = np.where(shift > 0, np.left_shift(1, np.maximum(shift - 1, 0)), 0)
        if fmt.ties == "even":
            lsb = (sig >> shift) & 1
            n = np.where(shift > 0, (sig + half - 1 + lsb) >> shift, sig)
        else:  # ties away from zero
            n = (sig + half) >> shift

    # code of the magnitude: exponent steps above emin, times 2^m, plus the rounded significand
    # (a carry out of the significand moves to the next binade by itself)
    code = ((e_eff - fmt.emin) << m) + n
    if not fmt.has_subnormals:  # e8m0: code 0 is 2^emin, no zero; tiny values go to 2^emin
        code = np.maximum(code - (1 << m), 0)

    overflow = (code > fmt.max_code) | is_inf
    if sat:
        code = np.where(overflow, fmt.max_code, code)
    elif fmt.has_inf:
        code = np.where(overflow, inf_code(fmt), code)
    else:
        code = np.where(overflow, nan_code(fmt), code)

    if fmt.has_nan:
        code = np.where(is_nan, nan_code(fmt), code)
    elif is_nan.any():
        first = int(np.flatnonzero(is_nan.ravel())[0])
        raise NumericsError(
            f"{fmt.name} has no NaN encoding: input element {first} (flat index) is NaN"
        )

    if fmt.signed:
        code = code | (negative.astype(np.int64) << (fmt.bits - 1))
    else:  # e8m0: no sign, no zero: zero and negative values are NaN (as in ml_dtypes)
        code = np.where(negative | (mag == 0), nan_code(fmt), code)
    return code


def decode_reference(codes: np.ndarray, fmt: str | Format) -> np.ndarray:
    """Decode codes of float format ``fmt`` to float64 values: the plain definition."""
    fmt = _element(get_format(fmt))
    if fmt.kind != "float":
        raise NumericsError(f"decode_reference decodes float formats; {fmt.name} is {fmt.kind}")
    c = np.asarray(codes).astype(np.int64)
    m = fmt.man_bits
    exp_field = (c >> m) & ((1 << fmt.exp_bits) - 1)
    mant = c & ((1 << m) - 1)
    if fmt.has_subnormals:
        scale = np.ldexp(1.0, (np.maximum(exp_field, 1) - fmt.bias - m).astype(np.int32))
        value = np.where(exp_field > 0, mant + (1 << m), mant) * scale
    else:
        value = np.ldexp(1.0, (exp_field - fmt.bias).astype(np.int32))
    if fmt.signed:
        value = np.where((c >> (fmt.bits - 1)) & 1 == 1, -value, value)
    mag = c & ((1 << (fmt.bits - 1)) - 1) if fmt.signed else c
    if fmt.nan_encoding == "ieee":
        top = exp_field == (1 << fmt.exp_bits) - 1
        value = np.where(top & (mant == 0), np.copysign(np.inf, value), value)
        value = np.where(top & (mant != 0), np.copysign(np.nan, value), value)
    elif fmt.nan_encoding in ("all_ones_mantissa", "all_ones"):
        value = np.where(mag == nan_code(fmt), np.copysign(np.nan, value), value)
    return value


_DECODE_TABLES: dict[str, np.ndarray] = {}


def decode_table(fmt: str | Format) -> np.ndarray:
    """float32 value of every code of a float format of at most 16 bits (built once)."""
    fmt = _element(get_format(fmt))
    if fmt.kind != "float" or fmt.bits > 16:
        raise NumericsError(f"decode tables exist for float formats of <= 16 bits, not {fmt.name}")
    if fmt.name not in _DECODE_TABLES:
        table = decode_reference(np.arange(1 << fmt.bits), fmt).astype(np.float32)
        table.setflags(write=False)
        _DECODE_TABLES[fmt.name] = table
    return _DECODE_TABLES[fmt.name]


# ---------------------------------------------------------------------------------------------
# storage: codes <-> arrays of the format's storage dtype
# ---------------------------------------------------------------------------------------------

_UINT_OF_SIZE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def codes_to_storage(codes: np.ndarray, fmt: Format) -> np.ndarray:
    """Wrap integer codes of ``fmt`` in its storage dtype (tf32: fp32 with 13 zero low bits)."""
    if fmt.name == "tfloat32":
        return (codes.astype(np.uint32) << np.uint32(13)).view(np.float32)
    return codes.astype(_UINT_OF_SIZE[fmt.dtype.itemsize]).view(fmt.dtype)


def storage_to_codes(x: np.ndarray, fmt: Format) -> np.ndarray:
    """Codes (as unsigned ints) of an array in ``fmt``: its storage dtype or raw unsigned codes."""
    x = np.asarray(x)
    uint_t = _UINT_OF_SIZE[fmt.dtype.itemsize]
    if x.dtype == fmt.dtype or (x.dtype.kind == "u" and x.dtype.itemsize == fmt.dtype.itemsize):
        codes = x.view(uint_t)
    else:
        raise NumericsError(
            f"expected an array of {fmt.name} (storage dtype {fmt.dtype}) or raw {np.dtype(uint_t)}"
            f" codes, got dtype {x.dtype}"
        )
    if fmt.name == "tfloat32":
        if codes.size and (codes & np.uint32(0x1FFF)).any():
            raise NumericsError("tfloat32 values must have the low 13 mantissa bits zero")
        return codes >> np.uint32(13)
    if fmt.bits < 8 * fmt.dtype.itemsize and codes.size and int(codes.max()) >> fmt.bits:
        raise NumericsError(f"{fmt.name} codes are {fmt.bits}-bit; got {int(codes.max()):#x}")
    return codes


# ---------------------------------------------------------------------------------------------
# fast paths (RNE only), each tested equal to encode_reference
# ---------------------------------------------------------------------------------------------


def _fast_float_rne(src: np.ndarray, fmt: Format, sat: bool) -> np.ndarray | None:
    """RNE by ml_dtypes / NumPy astype after clamping; None where no fast path applies."""
    if fmt.name == "float32":  # IEEE double -> single conversion is RNE
        return (np.clip(src, -fmt.max, fmt.max) if sat else src).astype(np.float32)
    if src.dtype != np.float32 or fmt.name == "float8_e8m0fnu":
        return None
    if fmt.name == "tfloat32":
        return _fast_tf32(src, sat)
    if sat and fmt.nan_encoding != "none":
        # clamping first is exact: every value beyond max rounds to max under saturation
        src = np.clip(src, -fmt.max, fmt.max)
    if fmt.nan_encoding == "none" and np.isnan(src).any():
        return None  # let the reference raise its explanation
    return src.astype(fmt.dtype)


def _fast_tf32(src: np.ndarray, sat: bool) -> np.ndarray:
    b = src.view(np.uint32)
    if sat:
        tf32_max = get_format("tfloat32").max
        b = np.clip(src, -tf32_max, tf32_max).view(np.uint32)
    lsb = (b >> np.uint32(13)) & np.uint32(1)
    r = (b + np.uint32(0xFFF) + lsb) & np.uint32(0xFFFFE000)
    nan = np.isnan(src)
    if nan.any():
        sign = b & np.uint32(0x80000000)
        r = np.where(nan, sign | np.uint32(0x7FC00000), r)
    return r.view(np.float32)


def _fast_float_sr(
    src: np.ndarray, fmt: Format, sat: bool, rng: StochasticRng | int | None
) -> np.ndarray | None:
    """Stochastic rounding for fp32 sources: add the K random bits to the fp32 pattern and
    clear them (for results in the target's normal range this is exactly the reference's
    rule, carry into the exponent included), then an exact cast; the few target-subnormal
    elements go through the reference with the same random bits."""
    if src.dtype != np.float32 or fmt.name in ("float32", "float8_e8m0fnu") or fmt.man_bits == 0:
        return None
    k = 23 - fmt.man_bits
    r = as_rng(rng).draw(src.size, k).astype(np.uint32).reshape(src.shape)
    b = src.view(np.uint32)
    nan = np.isnan(src)
    t = ((b + r) & np.uint32(~((1 << k) - 1) & 0xFFFFFFFF)).view(np.float32)
    t = np.where(nan, src, t)
    if sat:
        t = np.clip(t, -fmt.max, fmt.max)
    if fmt.nan_encoding == "none" and nan.any():
        return None
    out = t if fmt.name == "tfloat32" else t.astype(fmt.dtype)  # exact: t has m mantissa bits
    sub = (np.abs(src) < fmt.min_normal) & ~nan
    if sub.any():
        codes = encode_reference(src[sub], fmt, "stochastic", sat, random_bits=r[sub])
        out[sub] = codes_to_storage(codes, fmt)
    return out


# ---------------------------------------------------------------------------------------------
# public API
# ---------------------------------------------------------------------------------------------


def _cast_int(x: np.ndarray, fmt: Format, rounding: str) -> np.ndarray:
    if rounding != "rne":
        raise NumericsError(f"stochastic rounding to integer format {fmt.name} is not supported")
    info = np.iinfo(fmt.dtype)
    if x.dtype.kind in "iub":
        return np.clip(x.astype(np.int64), info.min, info.max).astype(fmt.dtype)
    v = _as_float_source(x).astype(np.float64)
    v = np.where(np.isnan(v), 0.0, np.rint(v))  # np.rint rounds half to even
    return np.clip(v, info.min, info.max).astype(fmt.dtype)


@np.errstate(over="ignore", invalid="ignore")
def cast(
    x: ArrayLike,
    fmt: str | np.dtype | Format,
    rounding: str = "rne",
    saturate: bool | None = None,
    rng: StochasticRng | int | None = None,
) -> np.ndarray:
    """Convert ``x`` to format ``fmt``; returns an array of the format's storage dtype.

    ``rounding`` is ``"rne"`` or ``"stochastic"`` (needs ``rng``: an int seed or a
    StochasticRng). ``saturate=None`` applies the format's default overflow rule
    (``DEFAULT_SATURATE``). Packed x4 formats cast to the element format and pack four
    elements per word along the last axis. tf32 returns float32 with the low 13 bits zero.
    """
    fmt = get_format(fmt)
    _check_rounding(rounding)
    arr = np.asarray(x)
    if fmt.kind == "packed":
        assert fmt.element is not None
        elements = cast(arr, fmt.element, rounding, saturate, rng)
        return codes_to_words(storage_to_codes(elements, fmt.element), fmt)
    sat = resolve_saturate(fmt, saturate)
    if fmt.kind == "int":
        return _cast_int(arr, fmt, rounding)
    src = _as_float_source(arr)
    if rounding == "rne":
        if fmt.name == "float32" and src.dtype == np.float32:
            out = src.copy()
            if sat:
                out = np.clip(out, -fmt.max, fmt.max)
            return out
        fast = _fast_float_rne(src, fmt, sat)
        if fast is not None:
            return fast
    elif (
        src.dtype == np.float32
        and fmt.man_bits > 0
        and not (fmt.nan_encoding == "none" and np.isnan(src).any())
    ):
        return _fast_float_sr(src, fmt, sat, rng)
    return codes_to_storage(encode_reference(src, fmt, rounding, sat, rng), fmt)


def to_float32(x: ArrayLike, fmt: str | np.dtype | Format | None = None) -> np.ndarray:
    """Decode an array stored in ``fmt`` (default: inferred from its dtype) to float32.

    Accepts the format's storage dtype or raw unsigned codes of the same width; packed x4
    words unpack to four float32 values each along the last axis; float8_e8m0fnu gives
    2^(code - 127) (NaN for 0xFF). Values beyond fp32's range (none today) would round RNE.
    """
    arr = np.asarray(x)
    fmt = get_format(arr.dtype if fmt is None else fmt)
    if fmt.kind == "packed":
        assert fmt.element is not None
        return to_float32(words_to_codes(arr, fmt).view(fmt.element.dtype), fmt.element)
    if fmt.kind == "int":
        if arr.dtype != fmt.dtype:
            raise NumericsError(f"expected an array of {fmt.name}, got dtype {arr.dtype}")
        return arr.astype(np.float32)
    if fmt.name == "float32":
        return storage_to_codes(arr, fmt).view(np.float32).copy()
    if fmt.name == "tfloat32":
        return (storage_to_codes(arr, fmt) << np.uint32(13)).view(np.float32)
    return decode_table(fmt)[storage_to_codes(arr, fmt)]
