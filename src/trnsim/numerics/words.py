"""The word layout of NKI's packed x4 types: where each of the four elements sits in a word.

NKI's ``float8_e4m3fn_x4`` and ``float8_e5m2_x4`` are 32-bit types that pack four contiguous
fp8 values; ``float4_e2m1fn_x4`` packs four fp4 values in 16 bits (aws-neuron-sdk
``nki/api/nki/isa/__init__.py``, ``quantize_mx`` and ``nc_matmul_mx`` docstrings; NKI
language dtype list).

The order of the four elements inside a word is not stated in the NKI docs. trnsim puts
element ``i`` (along the last axis) in bits ``[w*i, w*i + w)`` of the word, ``w`` = 8 or 4:
the lowest bits first. For fp8 this is exactly "four contiguous bytes" read as a
little-endian uint32 (the NKI docstrings' "packs four contiguous FP8 elements", and
Trainium's little-endian memory); for fp4 it is the lowest-nibble-first order of OCP MX /
PyTorch ``float4_e2m1fn_x2`` (element 0 in bits 3..0). If AWS documents a different order,
this file is the one place to change.

Codes only: conversions of values live in :mod:`trnsim.numerics.rounding` (``cast``,
``to_float32``) and :mod:`trnsim.numerics.packing` (``pack_x4``, ``unpack_x4``), which both
read this layout (and so import each other no more).
"""

from __future__ import annotations

import numpy as np

from trnsim.errors import NumericsError
from trnsim.numerics.formats import Format, get_format


def packed_format(fmt: str | Format) -> Format:
    """The packed x4 format ``fmt``, or a NumericsError naming the packed formats."""
    f = get_format(fmt)
    if f.kind != "packed" or f.element is None:
        raise NumericsError(
            f"{f.name} is not a packed x4 format; use float8_e4m3fn_x4, float8_e5m2_x4 or "
            "float4_e2m1fn_x4"
        )
    return f


def check_last_axis(arr: np.ndarray, f: Format) -> None:
    """The last axis of elements to pack must be a multiple of the elements per word."""
    if arr.ndim == 0 or arr.shape[-1] % f.elements_per_word:
        raise NumericsError(
            f"pack_x4 to {f.name}: the last axis ({arr.shape[-1] if arr.ndim else 'scalar'}) "
            f"must be a multiple of {f.elements_per_word}"
        )


def codes_to_words(codes: np.ndarray, f: Format) -> np.ndarray:
    """Element codes (unsigned, last axis a multiple of 4) to words of ``f``, last axis / 4."""
    assert f.element is not None
    check_last_axis(codes, f)
    codes = codes.astype(f.dtype).reshape(*codes.shape[:-1], codes.shape[-1] // 4, 4)
    width = f.element.bits
    word = np.zeros(codes.shape[:-1], dtype=f.dtype)
    for i in range(4):
        word |= codes[..., i] << f.dtype.type(width * i)
    return word


def words_to_codes(words: np.ndarray, f: Format) -> np.ndarray:
    """Words of ``f`` to uint8 element codes, last axis times 4."""
    assert f.element is not None
    if words.dtype != f.dtype:
        raise NumericsError(f"unpack_x4 of {f.name}: expected {f.dtype} words, got {words.dtype}")
    width = f.element.bits
    mask = f.dtype.type((1 << width) - 1)
    parts = [(words >> f.dtype.type(width * i)) & mask for i in range(4)]
    codes = np.stack(parts, axis=-1).reshape(*words.shape[:-1], words.shape[-1] * 4)
    return codes.astype(np.uint8)
