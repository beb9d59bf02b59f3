"""Number formats as data: one table, named as ml_dtypes names them.

Every format trnsim converts to or from is one row of ``FORMATS``. A float row carries the
fields that define its encoding (exponent bits, mantissa bits, bias, whether the all-ones
exponent is reserved for inf/NaN, how NaN is encoded); everything else (max, min normal, min
subnormal, the largest finite code) is derived from those fields, never typed in. Tests check
the derived figures against ``ml_dtypes.finfo`` for every format ml_dtypes defines.

Sources:

- ml_dtypes README, "Specifications of implemented floating point formats" (float8_e4m3,
  float8_e4m3fn, float8_e5m2, float4_e2m1fn, float8_e8m0fnu).
- NKI data types (aws-neuron-sdk ``nki/api/nki.api.shared.rst``, ``nki/api/nki/language``):
  tfloat32 is 1-8-10 stored in 32 bits; ``float8_e4m3`` is the legacy Trainium e4m3 with inf;
  ``float8_e4m3fn`` is OCP (no inf, NaN = S.1111.111); ``float8_e8m0fnu`` is the MX scale type
  (unsigned, NaN = 0xFF); ``float8_e4m3fn_x4``, ``float8_e5m2_x4``, ``float4_e2m1fn_x4`` are the
  packed types of ``nc_matmul_mx`` / ``quantize_mx`` (an fp8 x4 word is 32 bits, an fp4 x4 word
  is 16 bits: ``nc_matmul_mx`` docstring).
- OCP Microscaling Formats (MX) v1.0, section 5 (E2M1, E8M0 element and scale formats).

NaN encodings (``nan_encoding``):

- ``"ieee"``: exponent all ones and mantissa non-zero (inf is exponent all ones, mantissa 0).
- ``"all_ones_mantissa"``: exponent and mantissa all ones (float8_e4m3fn: 0x7F / 0xFF); no inf.
- ``"all_ones"``: the all-ones code (float8_e8m0fnu: 0xFF; unsigned, no zero, no inf).
- ``"none"``: no NaN and no inf (float4_e2m1fn, integers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from trnsim.errors import UnknownNameError

KINDS = frozenset({"float", "int", "packed"})
NAN_ENCODINGS = frozenset({"ieee", "all_ones_mantissa", "all_ones", "none"})


@dataclass(frozen=True, slots=True)
class Format:
    """One number format. Floats: 1 sign bit (if ``signed``), ``exp_bits``, ``man_bits``.

    ``dtype`` is the NumPy storage dtype of an array in this format (the ml_dtypes dtype where
    one exists; float32 for tf32; uint32 / uint16 words for the packed x4 types).
    ``element`` and ``elements_per_word`` are set for packed formats only.
    ``ties`` is the tie-breaking rule of round-to-nearest: ``"even"`` everywhere except
    float8_e8m0fnu, which has no mantissa bit to make even and (as ml_dtypes does) rounds
    ties away from zero.
    """

    name: str
    kind: str
    bits: int
    exp_bits: int
    man_bits: int
    bias: int
    has_inf: bool
    nan_encoding: str
    signed: bool
    dtype: np.dtype
    element: Format | None = None
    elements_per_word: int = 1
    ties: str = "even"

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"Format {self.name}: kind {self.kind!r} not in {sorted(KINDS)}")
        if self.nan_encoding not in NAN_ENCODINGS:
            raise ValueError(f"Format {self.name}: nan_encoding {self.nan_encoding!r} unknown")
        if (self.kind == "packed") != (self.element is not None):
            raise ValueError(f"Format {self.name}: packed formats (only) need an element format")

    # ---- derived figures (floats; packed formats answer for their element) ----

    @property
    def has_subnormals(self) -> bool:
        """False only for float8_e8m0fnu, whose code 0 is the normal number 2^-127."""
        return self.kind != "int" and self.nan_encoding != "all_ones"

    @property
    def has_nan(self) -> bool:
        return self.nan_encoding != "none"

    @property
    def emin(self) -> int:
        """Unbiased exponent of the smallest normal number."""
        return (1 if self.has_subnormals else 0) - self.bias

    @property
    def max_code(self) -> int:
        """Largest finite magnitude code (sign bit clear)."""
        if self.kind == "packed":
            assert self.element is not None
            return self.element.max_code
        if self.kind == "int":
            return (1 << (self.bits - 1)) - 1 if self.signed else (1 << self.bits) - 1
        top = (1 << (self.exp_bits + self.man_bits)) - 1  # all ones below the sign bit
        if self.nan_encoding == "ieee":  # whole top exponent reserved
            return top - (1 << self.man_bits)
        if self.nan_encoding in ("all_ones_mantissa", "all_ones"):  # one code reserved
            return top - 1
        return top

    @property
    def emax(self) -> int:
        """Unbiased exponent of the largest finite number (OCP MX ``emax_elem``)."""
        if self.kind == "packed":
            assert self.element is not None
            return self.element.emax
        return (self.max_code >> self.man_bits) - self.bias

    @property
    def max(self) -> float:
        """Largest finite value."""
        if self.kind == "int":
            return float(self.max_code)
        mant = self.max_code & ((1 << self.man_bits) - 1)
        return float((1 + mant / (1 << self.man_bits)) * 2.0**self.emax)

    @property
    def min_normal(self) -> float:
        if self.kind == "int":
            return 1.0
        return float(2.0**self.emin)

    @property
    def min_subnormal(self) -> float:
        if self.kind == "int":
            return 1.0
        if not self.has_subnormals:
            return self.min_normal
        return float(2.0 ** (self.emin - self.man_bits))

    @property
    def min(self) -> float:
        """Most negative finite value (0 for unsigned formats; e8m0's smallest is 2^-127)."""
        if self.kind == "int":
            return float(-(1 << (self.bits - 1))) if self.signed else 0.0
        return -self.max if self.signed else self.min_subnormal

    @property
    def storage_bits(self) -> int:
        """Bits of one element as a code (8 for float8, 4 for float4, 32 for tf32 storage)."""
        return self.bits

    def __repr__(self) -> str:
        return f"Format({self.name})"


def _float(
    name: str,
    exp_bits: int,
    man_bits: int,
    bias: int,
    nan: str,
    dtype: Any,
    *,
    bits: int | None = None,
    signed: bool = True,
    ties: str = "even",
) -> Format:
    return Format(
        name=name,
        kind="float",
        bits=bits if bits is not None else int(signed) + exp_bits + man_bits,
        exp_bits=exp_bits,
        man_bits=man_bits,
        bias=bias,
        has_inf=nan == "ieee",
        nan_encoding=nan,
        signed=signed,
        dtype=np.dtype(dtype),
        ties=ties,
    )


def _int(dtype: Any) -> Format:
    dt = np.dtype(dtype)
    return Format(
        name=dt.name,
        kind="int",
        bits=dt.itemsize * 8,
        exp_bits=0,
        man_bits=0,
        bias=0,
        has_inf=False,
        nan_encoding="none",
        signed=dt.kind == "i",
        dtype=dt,
    )


def _packed(name: str, element: Format, word: Any) -> Format:
    return Format(
        name=name,
        kind="packed",
        bits=np.dtype(word).itemsize * 8,
        exp_bits=element.exp_bits,
        man_bits=element.man_bits,
        bias=element.bias,
        has_inf=element.has_inf,
        nan_encoding=element.nan_encoding,
        signed=element.signed,
        dtype=np.dtype(word),
        element=element,
        elements_per_word=4,
    )


_E4M3FN = _float("float8_e4m3fn", 4, 3, 7, "all_ones_mantissa", ml_dtypes.float8_e4m3fn)
_E5M2 = _float("float8_e5m2", 5, 2, 15, "ieee", ml_dtypes.float8_e5m2)
_E2M1FN = _float("float4_e2m1fn", 2, 1, 1, "none", ml_dtypes.float4_e2m1fn)

ALL_FORMATS: list[Format] = [
    _float("float32", 8, 23, 127, "ieee", np.float32),
    _float("tfloat32", 8, 10, 127, "ieee", np.float32, bits=19),
    _float("bfloat16", 8, 7, 127, "ieee", ml_dtypes.bfloat16),
    _float("float16", 5, 10, 15, "ieee", np.float16),
    _float("float8_e4m3", 4, 3, 7, "ieee", ml_dtypes.float8_e4m3),
    _E4M3FN,
    _E5M2,
    _E2M1FN,
    _float(
        "float8_e8m0fnu", 8, 0, 127, "all_ones", ml_dtypes.float8_e8m0fnu, signed=False, ties="away"
    ),
    *(_int(t) for t in (np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32)),
    _packed("float8_e4m3fn_x4", _E4M3FN, np.uint32),
    _packed("float8_e5m2_x4", _E5M2, np.uint32),
    _packed("float4_e2m1fn_x4", _E2M1FN, np.uint16),
]

FORMATS: dict[str, Format] = {f.name: f for f in ALL_FORMATS}

# Short names people type. Each maps to a FORMATS key.
ALIASES: dict[str, str] = {
    "fp32": "float32",
    "f32": "float32",
    "tf32": "tfloat32",
    "bf16": "bfloat16",
    "fp16": "float16",
    "f16": "float16",
    "half": "float16",
    "fp8_e4m3": "float8_e4m3",
    "fp8_e4m3fn": "float8_e4m3fn",
    "fp8_e5m2": "float8_e5m2",
    "fp4_e2m1": "float4_e2m1fn",
    "fp4_e2m1fn": "float4_e2m1fn",
    "fp8_e8m0": "float8_e8m0fnu",
    "e8m0": "float8_e8m0fnu",
    "fp8_e4m3fn_x4": "float8_e4m3fn_x4",
    "fp8_e5m2_x4": "float8_e5m2_x4",
    "fp4_e2m1fn_x4": "float4_e2m1fn_x4",
    "fp4_e2m1_x4": "float4_e2m1fn_x4",
}

# Storage dtype -> format, for lookups by dtype. tf32 and the packed types share storage with
# float32 / uint32 / uint16 and are reachable by name only.
_BY_DTYPE: dict[np.dtype, Format] = {
    f.dtype: f for f in ALL_FORMATS if f.kind != "packed" and f.name != "tfloat32"
}


def get_format(fmt: str | np.dtype | type | Format) -> Format:
    """Look a format up by name, short alias, NumPy / ml_dtypes dtype, or pass a Format through.

    Raises UnknownNameError listing the valid names.
    """
    if isinstance(fmt, Format):
        return fmt
    if isinstance(fmt, str):
        key = fmt.strip().lower()
        key = ALIASES.get(key, key)
        if key in FORMATS:
            return FORMATS[key]
    else:
        try:
            dt = np.dtype(fmt)
        except TypeError:
            dt = None
        if dt is not None and dt in _BY_DTYPE:
            return _BY_DTYPE[dt]
    raise UnknownNameError(
        f"unknown number format {fmt!r}; valid names: {', '.join(FORMATS)}"
        f" (aliases: {', '.join(ALIASES)})"
    )
