"""Arguments trnsim does not model are refused when not at their default, never ignored."""

import sys

import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim.errors import KernelError

HERE = "test_core_unmodelled.py"


def _line() -> int:
    return sys._getframe(1).f_lineno + 1


def _sb(shape, dtype=nl.float32):
    return nl.ndarray(shape, dtype, buffer=nl.sbuf)


def _activation(**kw):
    def k():
        d, x = _sb((128, 64)), _sb((128, 64))
        nisa.memset(x, 1.0)
        where["line"] = _line()
        nisa.activation(d, nl.exp, x, **kw)

    return k


def _activate2(**kw):
    def k():
        d, x = _sb((128, 64)), _sb((128, 64))
        nisa.memset(x, 1.0)
        where["line"] = _line()
        nisa.activate2(d, nl.copy, x, 1.0, 2.0, nl.add, nl.multiply, **kw)

    return k


def _exponential(**kw):
    def k():
        d, x = _sb((128, 64)), _sb((128, 64))
        nisa.memset(x, 1.0)
        where["line"] = _line()
        nisa.exponential(d, x, **kw)

    return k


def _range_select(**kw):
    def k():
        d, x, b0, b1 = _sb((128, 64)), _sb((128, 64)), _sb((128, 1)), _sb((128, 1))
        for t in (x, b0, b1):
            nisa.memset(t, 1.0)
        where["line"] = _line()
        nisa.range_select(d, x, nl.greater_equal, nl.less, b0, b1, **kw)

    return k


def _local_gather(**kw):
    def k():
        d, x, i = _sb((128, 4)), _sb((128, 4)), _sb((128, 4), nl.uint16)
        nisa.memset(x, 1.0)
        nisa.memset(i, 0)
        where["line"] = _line()
        nisa.local_gather(d, x, i, **kw)

    return k


def _dma_compute(**kw):
    def k(a):
        d = nl.ndarray((128, 64), nl.float32, buffer=nl.hbm)
        where["line"] = _line()
        nisa.dma_compute(d, [a, a], nl.add, **kw)
        return d

    return k


def _dma_transpose(**kw):
    def k(a):
        d = nl.ndarray((64, 128), nl.float32, buffer=nl.hbm)
        where["line"] = _line()
        nisa.dma_transpose(d, a, **kw)
        return d

    return k


where: dict[str, int] = {}
A = np.ones((128, 64), np.float32)

CASES = [
    ("exponential", _exponential, "reduce_cmd", nisa.reduce_cmd.reset, (), "gen4"),
    ("range_select", _range_select, "reduce_cmd", nisa.reduce_cmd.idle, (), "gen4"),
    ("dma_compute", _dma_compute, "unique_indices", False, (A,), "gen4"),
    ("dma_compute", _dma_compute, "oob_mode", nisa.oob_mode.skip, (A,), "gen4"),
    ("dma_transpose", _dma_transpose, "priority", 1, (A,), "gen4"),
    ("dma_transpose", _dma_transpose, "oob_mode", nisa.oob_mode.skip, (A,), "gen4"),
]


@pytest.mark.parametrize(("op", "make", "arg", "value", "args", "target"), CASES)
def test_non_default_unmodelled_argument_is_refused(op, make, arg, value, args, target):
    with pytest.raises(KernelError) as info:
        nki.run(make(**{arg: value}), *args, target=target)
    err = info.value
    assert err.rule == "not-implemented", str(err)
    shown = value.name if hasattr(value, "name") else value
    assert f"{op} {arg}={shown!r}" in str(err), str(err)
    assert f"{HERE}:{where['line']}" in str(err)


@pytest.mark.parametrize(("op", "make", "arg", "value", "args", "target"), CASES)
def test_default_of_unmodelled_argument_runs(op, make, arg, value, args, target):
    nki.run(make(), *args, target=target)
