"""Packed x4 types of NKI: four MX elements in one storage word (``pack_x4``, ``unpack_x4``).

A packed tile has a quarter of the logical elements per partition. The order of the elements
inside a word: :mod:`trnsim.numerics.words` (the one place that defines it).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from trnsim.errors import NumericsError
from trnsim.numerics.formats import Format
from trnsim.numerics.rounding import cast, storage_to_codes
from trnsim.numerics.words import check_last_axis, codes_to_words, packed_format, words_to_codes


def _element_codes(values: np.ndarray, fmt: Format) -> np.ndarray:
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
    f = packed_format(fmt)
    arr = np.asarray(values)
    check_last_axis(arr, f)
    return codes_to_words(_element_codes(arr, f), f)


def unpack_x4(packed: ArrayLike, fmt: str | Format) -> np.ndarray:
    """Inverse of ``pack_x4``: words to an array of the element format, last axis times 4."""
    f = packed_format(fmt)
    assert f.element is not None
    return words_to_codes(np.asarray(packed), f).view(f.element.dtype)
