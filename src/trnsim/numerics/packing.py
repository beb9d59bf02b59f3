"""Packed x4 types of NKI: four MX elements in one storage word.

NKI's ``float8_e4m3fn_x4`` and ``float8_e5m2_x4`` are 32-bit types that pack four contiguous
fp8 values; ``float4_e2m1fn_x4`` packs four fp4 values in 16 bits (aws-neuron-sdk
``nki/api/nki/isa/__init__.py``, ``quantize_mx`` and ``nc_matmul_mx`` docstrings; NKI
language dtype list). A packed tile therefore has a quarter of the logical elements per
partition.

The order of the four elements inside a word is not stated in the NKI docs. trnsim puts
element ``i`` (along the last axis) in bits ``[w*i, w*i + w)`` of the word, ``w`` = 8 or 4:
the lowest bits first. For fp8 this is exactly "four contiguous bytes" read as a
little-endian uint32 (the NKI docstrings' "packs four contiguous FP8 elements", and
Trainium's little-endian memory); for fp4 it is the lowest-nibble-first order of OCP MX /
PyTorch ``float4_e2m1fn_x2`` (element 0 in bits 3..0). If AWS documents a different order,
this file is the one place to change.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from trnsim.errors import NumericsError
from trnsim.numerics.formats import Format, get_format


def _packed_format(fmt: str | Format) -> Format:
    f = get_format(fmt)
    if f.kind != "packed" or f.element is None:
        raise NumericsError(
            f"{f.name} is not a packed x4 format; use float8_e4m3fn_x4, float8_e5m2_x4 or "
            "float4_e2m1fn_x4"
        )
    return f


def _element_codes(values: np.ndarray, fmt: Format) -> np.ndarray:
    from trnsim.numerics.rounding import cast, storage_to_codes

    elem = fmt.element
    assert elem is not None
    if values.dtype != elem.dtype and values.dtype.kind != "u":
        values = cast(values, elem)  # floats of another format: RNE, element default overflow
    if values.dtype.kind == "u" and values.dtype.itemsize != 1:
        raise NumericsError(f"{fmt.name}: raw element codes must be uint8, got {values.dtype}")
    return storage_to_codes(values, elem).astype(fmt.dtype)


def pack_x4(values: ArrayLike, fmt: str | Format) -> np.ndarray:
    """Pack elements four per word along the last axis (which must be a multiple of 4).

    ``values`` is an array of the element format (e.g. ``ml_dtypes.float8_e4m3fn``), raw
    uint8 element codes, or other floats (cast to the element format with RNE first).
    Returns uint32 words (fp8 x4) or uint16 words (fp4 x4), last axis divided by 4.
    """
    f = _packed_format(fmt)
    arr = np.asarray(values)
    if arr.ndim == 0 or arr.shape[-1] % f.elements_per_word:
        raise NumericsError(
            f"pack_x4 to {f.name}: the last axis ({arr.shape[-1] if arr.ndim else 'scalar'}) "
            f"must be a multiple of {f.elements_per_word}"
        )
    codes = _element_codes(arr, f)
    codes = codes.reshape(*arr.shape[:-1], arr.shape[-1] // 4, 4)
    assert f.element is not None
    width = f.element.bits
    word = np.zeros(codes.shape[:-1], dtype=f.dtype)
    for i in range(4):
        word |= codes[..., i] << f.dtype.type(width * i)
    return word


def unpack_x4(packed: ArrayLike, fmt: str | Format) -> np.ndarray:
    """Inverse of ``pack_x4``: words to an array of the element format, last axis times 4."""
    f = _packed_format(fmt)
    arr = np.asarray(packed)
    if arr.dtype != f.dtype:
        raise NumericsError(f"unpack_x4 of {f.name}: expected {f.dtype} words, got {arr.dtype}")
    elem = f.element
    assert elem is not None
    width = elem.bits
    mask = f.dtype.type((1 << width) - 1)
    parts = [(arr >> f.dtype.type(width * i)) & mask for i in range(4)]
    codes = np.stack(parts, axis=-1).reshape(*arr.shape[:-1], arr.shape[-1] * 4)
    return codes.astype(np.uint8).view(elem.dtype)
