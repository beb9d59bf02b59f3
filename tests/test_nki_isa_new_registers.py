"""The register instructions (register_alloc / move / load / store) and control flow on
registers as NKI kernels write it (``while reg:``, ``range(reg)``), plus their records for the
timing model."""

import numpy as np

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim.core.isa import Op


def _counting_kernel(n):
    """A data-dependent loop: the trip count comes from the input through a register; the
    loop decrements a counter in SBUF and reloads the register from it (the docstring's
    ``while reg:`` pattern)."""
    cnt = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(cnt, n)
    reg = nisa.register_alloc()
    nisa.register_load(reg, cnt)
    acc = nl.ndarray((1, 1), nl.float32, buffer=nl.sbuf)
    nisa.memset(acc, 0.0)
    while reg:
        nisa.tensor_scalar(acc, acc, nl.add, 2.0)
        nisa.tensor_scalar(cnt, cnt, nl.subtract, 1)
        nisa.register_load(reg, cnt)
    total = nisa.register_alloc(0)
    nisa.register_move(total, reg)  # 0 after the loop
    back = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.register_store(back, total)
    o1 = nl.ndarray((1, 1), nl.float32, buffer=nl.shared_hbm)
    o2 = nl.ndarray((1, 1), nl.int32, buffer=nl.shared_hbm)
    nisa.dma_copy(o1, acc)
    nisa.dma_copy(o2, back)
    return o1, o2


def test_while_on_a_register_runs_the_data_dependent_trip_count():
    for n in (0, 1, 5):
        run = nki.run(_counting_kernel, np.array([[n]], np.int32))
        acc, back = run.outputs
        assert acc[0, 0] == 2.0 * n and back[0, 0] == 0
        loads = [i for i in run.instructions if i.opcode is Op.REGISTER_LOAD]
        assert len(loads) == n + 1


def test_range_over_a_register_and_register_alloc_from_a_tensor_element():
    def k(x):
        t = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(t, x)
        reg = nisa.register_alloc(t[0, 0])
        out = nl.ndarray((1, 4), nl.int32, buffer=nl.sbuf)
        nisa.memset(out, 0)
        for i in range(reg):
            v = nisa.register_alloc(i * 10)
            nisa.register_store(out[0:1, i : i + 1], v)
        o = nl.ndarray((1, 4), nl.int32, buffer=nl.shared_hbm)
        nisa.dma_copy(o, out)
        return o

    got = nki.run(k, np.array([[3]], np.int32)).outputs
    assert got.tolist() == [[0, 10, 20, 0]]


def test_register_values_wrap_to_32_bits_and_uninitialised_reads_fail():
    import pytest

    from trnsim.errors import KernelError

    def k():
        reg = nisa.register_alloc()
        out = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
        nisa.register_store(out, reg)

    with pytest.raises(KernelError) as info:
        nki.run(k)
    assert info.value.rule == "register-uninitialized"

    def big():
        nisa.register_alloc(2**33)

    with pytest.raises(KernelError) as info:
        nki.run(big)
    assert info.value.rule == "register-value" and str(2**33) in str(info.value)


def test_register_store_refuses_a_value_its_dtype_cannot_hold():
    import pytest

    from trnsim.errors import KernelError

    def k():
        out = nl.ndarray((1, 1), nl.int8, buffer=nl.sbuf)
        nisa.register_store(out, nisa.register_alloc(300))

    with pytest.raises(KernelError) as info:
        nki.run(k)
    assert info.value.rule == "register-value" and "300 into int8" in str(info.value)
