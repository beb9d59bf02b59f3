"""A dead PSUM tile still named by the kernel's Python gives its bank to a multi-buffered
tile (``Allocator._dead_room``): the compiler frees a tile at its last use, not when a Python
name lets it go."""

from __future__ import annotations

import itertools

import numpy as np

import trnsim.nki as tnki
from trnsim.core.timing import schedule
from trnsim.nki.benchmark import record

tnki.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

TRN1 = "gen2"  # 8 PSUM banks of 2 KiB per partition
RNG = np.random.default_rng(2028)


def _kernel(drop: bool):
    @nki.jit
    def k(x0, x):
        """Seven PSUM transposes of ``x0`` (a bank each), summed and, unless ``drop``, still
        named by ``early`` to the end; then a loop of transposes, one PSUM bank per
        iteration."""
        out = nl.ndarray(x.shape, dtype=np.float32, buffer=nl.shared_hbm)
        a0 = nl.load(x0)
        early = [nisa.nc_transpose(a0) for _ in range(7)]
        acc = nl.copy(early[0])
        for e in early[1:]:
            acc = nl.add(acc, e)
        if drop:
            del e
            early.clear()
        for i in nl.affine_range(x.shape[0]):
            t = nisa.nc_transpose(nl.load(x[i]))
            nl.store(out[i], value=nl.add(t, acc))
        return out

    return k


BANK = 2048


def _bank(o) -> int:
    return o.offset // BANK  # a [128, 128] fp32 tile sits in one bank


def test_dead_named_psum_banks_are_given_to_the_multi_buffered_loop():
    x0 = RNG.integers(-3, 4, (128, 128)).astype(np.float32)
    x = RNG.integers(-3, 4, (8, 128, 128)).astype(np.float32)
    ins = record(_kernel(False), x0, x, target=TRN1)
    tr = [i.dst[0] for i in ins if i.opcode.value == "nc_transpose"]
    loop = tr[7:]
    assert len(loop) == 8
    for a, b in itertools.pairwise(loop):  # double-buffered: never the bank just used
        assert _bank(a) != _bank(b)
    assert not [i for i in ins if i.attr("spill") is not None]  # freed, not saved
    held = schedule(ins, TRN1).total_s
    dropped = schedule(record(_kernel(True), x0, x, target=TRN1), TRN1).total_s
    assert held <= dropped * 1.001  # the names cost nothing
    want = x.transpose(0, 2, 1) + 7 * x0.T
    np.testing.assert_array_equal(tnki.run(_kernel(False), x0, x).outputs, want)
