"""NkiTensor facts the NKI documentation states: ``.ap`` counts in elements of the flattened
tensor, ``.buffer`` is the ``nl`` buffer object, explicit placement follows program order,
and errors name tensors. Each with the documentation's own example."""

import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim.errors import KernelError

RNG = np.random.default_rng(13)


def test_ap_on_sbuf_counts_elements_of_the_flattened_tensor():
    """nki-aps.rst, "A Concrete Example": t (16, 16) in SBUF; t.ap([[16, 16], [1, 8]],
    offset=8) is t[0:16, 8:16]."""
    x = RNG.standard_normal((16, 16)).astype(np.float32)

    def k(x):
        t = nl.ndarray((16, 16), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(t, x)
        access = t.ap(pattern=[[16, 16], [1, 8]], offset=8)
        assert access.get_pattern() == [[16, 16], [1, 8]]
        out = nl.ndarray((16, 8), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(out, access)
        return out

    np.testing.assert_array_equal(nki.run(k, x).outputs, x[:, 8:16])


def test_ap_offset_moves_across_partitions_and_composes_with_the_view():
    x = RNG.standard_normal((8, 4)).astype(np.float32)

    def k(x):
        t = nl.ndarray((8, 4), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(t, x)
        out = nl.ndarray((4, 4), nl.float32, buffer=nl.shared_hbm)
        # rows 2..5 of t: offset 8 elements = 2 partitions of 4 elements
        nisa.dma_copy(out, t.ap([[4, 4], [1, 4]], offset=8))
        out2 = nl.ndarray((2, 4), nl.float32, buffer=nl.shared_hbm)
        # the API docstring: offset adds to the view's own storage offset (t[4:] starts at 16)
        nisa.dma_copy(out2, t[4:].ap([[4, 2], [1, 4]], offset=4))
        return out, out2

    a, b = nki.run(k, x).outputs
    np.testing.assert_array_equal(a, x[2:6])
    np.testing.assert_array_equal(b, x[5:7])


def test_ap_reading_every_other_partition_is_refused():
    """nki-aps.rst: t (16, 32), t.ap([[64, 8], [1, 32]]) is illegal (partition step 64)."""

    def k():
        t = nl.ndarray((16, 32), nl.float32, buffer=nl.sbuf, name="t")
        t.ap(pattern=[[64, 8], [1, 32]], offset=0)

    with pytest.raises(KernelError) as info:
        nki.run(k)
    err = info.value
    assert err.rule == "ap-partition" and "'t'" in str(err) and "64" in str(err)
    assert "32 elements" in str(err) and "test_nki_tensor_views.py" in str(err)


def test_buffer_is_the_nl_buffer_object():
    seen = {}

    def k(x):
        s = nl.ndarray((4, 4), nl.float32, buffer=nl.sbuf)
        p = nl.ndarray((4, 4), nl.float32, buffer=nl.psum)
        seen["sbuf"] = (s.buffer == nl.sbuf, s.buffer != nl.sbuf, s[0:2].buffer == nl.sbuf)
        seen["psum"] = (p.buffer == nl.psum, p.buffer == nl.sbuf)
        seen["hbm"] = (x.buffer == nl.shared_hbm, x.buffer == nl.sbuf)

    nki.run(k, np.zeros((4, 4), np.float32))
    assert seen == {"sbuf": (True, False, True), "psum": (True, False), "hbm": (True, False)}


def test_explicit_addresses_are_reused_after_the_last_use():
    """Multi-buffering: a tile placed over an older tile's addresses after the older one's
    last use is legal even while Python still references the older one."""
    x = RNG.standard_normal((4, 8)).astype(np.float32)

    def k(x):
        out = nl.ndarray((4, 8), nl.float32, buffer=nl.shared_hbm)
        tiles = []
        for i in range(3):
            t = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf, address=(0, 0), name=f"t{i}")
            nisa.dma_copy(t, x)
            nisa.tensor_scalar(t, t, nl.multiply, float(i + 1))
            nisa.dma_copy(out, t)
            tiles.append(t)  # still referenced: liveness is program order, not references
        return out

    np.testing.assert_array_equal(nki.run(k, x).outputs, x * 3)


def test_errors_name_unnamed_tensors_by_their_line():
    def k():
        t = nl.ndarray((16, 16), nl.float32, buffer=nl.sbuf)
        t[0:16, 0:8].ap([[16, 16], [1, 8]], offset=250)  # runs past the last partition

    with pytest.raises(KernelError) as info:
        nki.run(k)
    assert "''" not in str(info.value)
    assert "sbuf@test_nki_tensor_views.py:" in str(info.value)


def test_tiles_allocated_up_front_at_one_address_are_used_in_turn():
    """nki-library's attention_cte allocates a grid of PSUM tiles at a few bank addresses
    before using any of them; each is used in turn, so their lives do not overlap."""
    x = RNG.standard_normal((4, 8)).astype(np.float32)

    def k(x):
        out = nl.ndarray((4, 8), nl.float32, buffer=nl.shared_hbm)
        tiles = [
            nl.ndarray((4, 8), nl.float32, buffer=nl.psum, address=(0, 0), name=f"p{i}")
            for i in range(3)
        ]
        for i, t in enumerate(tiles):
            nisa.tensor_scalar(t, nl.load(x), nl.add, float(i))
            nl.store(out, nl.copy(t))
        return out

    np.testing.assert_array_equal(nki.run(k, x).outputs, x + 2)

    def interleaved(x):
        a = nl.ndarray((4, 8), nl.float32, buffer=nl.psum, address=(0, 0), name="a")
        b = nl.ndarray((4, 8), nl.float32, buffer=nl.psum, address=(0, 0), name="b")
        nisa.tensor_scalar(a, nl.load(x), nl.add, 1.0)
        nisa.tensor_scalar(b, nl.load(x), nl.add, 2.0)
        nl.copy(a)  # a's life spans b's use: the real overlap

    with pytest.raises(KernelError) as info:
        nki.run(interleaved, x)
    msg = str(info.value)
    assert info.value.rule == "overlap" and "'a'" in msg and "'b'" in msg
    assert "first used at test_nki_tensor_views.py:" in msg
