"""``nki.isa`` calls return ``NkiInstruction`` handles; ``.depends_on`` adds explicit edges
that the timing model honours (SDK ``nki/api/nki/isa/__init__.py`` NkiInstruction)."""

import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim.core.isa import Op
from trnsim.core.timing import schedule
from trnsim.errors import KernelError


def two_independent_streams(a, b, edge):
    """A DMA-in + Vector add on ``a`` and a GpSimd memset chain on ``b``: independent, so the
    GpSimd work overlaps the DMA unless an edge orders it."""
    x = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    load = nisa.dma_copy(x, a)
    y = nl.ndarray((128, 2048), nl.float32, buffer=nl.sbuf)
    fill = nisa.memset(y, 1.0, engine=nisa.engine.gpsimd)
    if edge:
        assert fill.depends_on(load) is fill
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(out, x)
    return out


def _timeline(edge):
    a = np.ones((128, 4096), np.float32)
    rec = nki.run(two_independent_streams, a, None, edge, functional=False).instructions
    s = schedule(rec, "gen4").schedule
    load = next(i for i, x in enumerate(rec) if x.opcode is Op.DMA_COPY)
    fill = next(i for i, x in enumerate(rec) if x.opcode is Op.MEMSET)
    return rec, s, load, fill


def test_calls_return_handles_and_an_edge_orders_the_timeline():
    rec, s, load, fill = _timeline(edge=False)
    assert s.start[fill] < s.end[load]  # independent: the memset overlaps the load
    rec, s, load, fill = _timeline(edge=True)
    assert s.start[fill] >= s.end[load]
    assert dict(rec[fill].attrs)["after"] == (load,)


def test_edges_change_no_values_and_handles_chain():
    def k(a):
        x = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        i1 = nisa.dma_copy(x, a)
        y = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        i2 = nisa.tensor_scalar(y, x, nl.multiply, 2.0)
        i3 = nisa.memset(x, 0.0)
        i3.depends_on(i2).depends_on(i1, i2)
        assert "tensor_scalar" in repr(i2)
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(out, y)
        return out

    a = np.arange(128 * 8, dtype=np.float32).reshape(128, 8)
    res = nki.run(k, a)
    np.testing.assert_array_equal(res.outputs, 2 * a)
    ms = next(x for x in res.instructions if x.opcode is Op.MEMSET)
    assert dict(ms.attrs)["after"] == (0, 1)


def test_a_later_or_foreign_producer_is_refused_with_the_line():
    def later(a):
        x = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        first = nisa.memset(x, 0.0)
        second = nisa.memset(x, 1.0)
        first.depends_on(second)

    with pytest.raises(KernelError, match="does not come before") as info:
        nki.run(later, np.ones((128, 4), np.float32))
    assert info.value.rule == "depends-on" and info.value.kernel_line > 0

    def not_a_handle(a):
        x = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.memset(x, 0.0).depends_on(x)

    with pytest.raises(KernelError, match="got NkiTensor"):
        nki.run(not_a_handle, np.ones((128, 4), np.float32))
