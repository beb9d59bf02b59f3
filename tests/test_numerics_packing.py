"""NKI x4 packed types: bit layout (element i in the i-th lowest byte / nibble), round trips."""

import ml_dtypes
import numpy as np
import pytest

from trnsim.errors import NumericsError
from trnsim.numerics import cast, pack_x4, to_float32, unpack_x4


def test_fp8_x4_is_four_contiguous_bytes_little_endian():
    codes = np.array([[0x01, 0x02, 0x03, 0x04, 0xAA, 0xBB, 0xCC, 0xDD]], np.uint8)
    words = pack_x4(codes, "float8_e4m3fn_x4")
    assert words.dtype == np.uint32 and words.shape == (1, 2)
    assert words.tolist() == [[0x04030201, 0xDDCCBBAA]]
    assert np.array_equal(words.view(np.uint8).reshape(1, 8), codes)  # memory order


def test_fp4_x4_is_four_nibbles_lowest_first():
    codes = np.array([0x1, 0x2, 0x3, 0xF], np.uint8)
    words = pack_x4(codes, "float4_e2m1fn_x4")
    assert words.dtype == np.uint16 and words.tolist() == [0xF321]


@pytest.mark.parametrize(
    "name,elem,bits",
    [("float8_e4m3fn_x4", ml_dtypes.float8_e4m3fn, 8), ("float8_e5m2_x4", ml_dtypes.float8_e5m2, 8),
     ("float4_e2m1fn_x4", ml_dtypes.float4_e2m1fn, 4)],
)  # fmt: skip
def test_every_code_round_trips(name, elem, bits):
    codes = np.random.default_rng(0).integers(0, 1 << bits, (3, 64)).astype(np.uint8)
    vals = codes.view(elem)
    words = pack_x4(vals, name)
    back = unpack_x4(words, name)
    assert back.dtype == np.dtype(elem) and np.array_equal(back.view(np.uint8), codes)


def test_pack_casts_other_floats_and_to_float32_unpacks():
    x = np.array([1.0, -2.0, 0.5, 448.0, 3.0, 6.0, -0.5, 1.5], np.float32)
    w = pack_x4(x, "float8_e4m3fn_x4")
    assert np.array_equal(to_float32(w, "float8_e4m3fn_x4"), x)
    assert np.array_equal(cast(x, "float8_e4m3fn_x4"), w)
    w4 = cast(x[[0, 1, 2, 4, 5, 6, 7, 0]], "fp4_e2m1fn_x4")
    assert to_float32(w4, "float4_e2m1fn_x4").tolist() == [1.0, -2.0, 0.5, 3.0, 6.0, -0.5, 1.5, 1.0]


def test_packing_errors():
    with pytest.raises(NumericsError, match="multiple of 4"):
        pack_x4(np.zeros(6, np.uint8), "float8_e5m2_x4")
    with pytest.raises(NumericsError, match="not a packed x4 format"):
        pack_x4(np.zeros(4, np.uint8), "float8_e5m2")
    with pytest.raises(NumericsError, match="4-bit"):
        pack_x4(np.array([0, 1, 2, 16], np.uint8), "float4_e2m1fn_x4")
    with pytest.raises(NumericsError, match="expected uint16 words"):
        unpack_x4(np.zeros(2, np.uint32), "float4_e2m1fn_x4")
