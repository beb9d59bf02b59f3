"""CoreOptions: the plain interpreter by default, accelerators opt-in, the instruction budget."""

import sys
import threading

import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim.core.options import CoreOptions
from trnsim.errors import KernelError

HERE = "test_core_options.py"


def _copies(n: int, where: dict):
    def k(a):
        t = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
        for i in range(n):
            if i == n - 1:
                where["line"] = sys._getframe().f_lineno + 1
            nisa.dma_copy(dst=t, src=a)

    return k


def test_default_is_the_plain_interpreter(monkeypatch):
    monkeypatch.delenv("TRNSIM_DEFERRED", raising=False)
    names: list[str] = []

    def k(a):
        names.extend(t.name for t in threading.enumerate())
        t = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)

    res = nki.run(k, np.ones((128, 8), np.float32))
    assert res.cores[0].options == CoreOptions()
    assert res.cores[0].decode is None and res.cores[0].acc_memo is None
    assert not any(n.startswith("trnsim-") for n in names)


def test_trnsim_deferred_maps_to_the_option():
    assert CoreOptions.from_env({"TRNSIM_DEFERRED": "0"}) == CoreOptions()
    assert CoreOptions.from_env({}) == CoreOptions()
    on = CoreOptions.from_env({"TRNSIM_DEFERRED": "1"})
    assert on.deferred and on.fast_paths


def test_explicit_options_start_the_deferred_threads():
    names: list[str] = []

    def k(a):
        names.extend(t.name for t in threading.enumerate())
        t = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)

    opts = CoreOptions(deferred=True, fast_paths=True)
    nki.run(k, np.ones((128, 8), np.float32), options=opts)
    assert any(n.startswith("trnsim-stream") for n in names)


def test_instruction_budget_stops_the_kernel_at_the_next_instruction():
    where: dict = {}
    a = np.ones((128, 8), np.float32)
    res = nki.run(_copies(5, where), a, options=CoreOptions(max_instructions=5))
    assert len(res.instructions) == 5
    with pytest.raises(KernelError) as info:
        nki.run(_copies(6, where), a, options=CoreOptions(max_instructions=5))
    err = info.value
    assert err.rule == "instruction-budget"
    assert "budget is 5" in str(err) and "instruction 6" in str(err)
    assert f"{HERE}:{where['line']}" in str(err)


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_budget_must_be_a_positive_int(bad):
    with pytest.raises(ValueError, match="max_instructions"):
        CoreOptions(max_instructions=bad)
