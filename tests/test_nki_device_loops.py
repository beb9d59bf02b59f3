"""``nl.fori_loop`` and ``nl.while_loop`` as the NKI 0.6 docs specify them (``nki.language``
docstrings, aws-neuron-sdk ``nki/api/nki/language``): ``fori_loop(lower, upper, body_fun,
step=1)`` calls ``body_fun(i)`` with the iteration value as a register, bounds may be registers;
``while_loop(init, body_fun)`` tests the condition register before each iteration and takes
the next condition from the register the body returns. Both return None."""

import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim.errors import KernelError


def _copy_rows_kernel(step):
    """out[i] = data[i] for i in range(1, ub, step), ub read from HBM into a register."""

    def k(data, ub_in):
        n = data.shape[1]
        out = nl.ndarray((8, n), nl.float32, buffer=nl.shared_hbm)
        zeros = nl.zeros((8, n), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=out, src=zeros)
        ub_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=ub_sb, src=ub_in)
        ub = nisa.register_alloc()
        nisa.register_load(ub, ub_sb)
        row = nl.ndarray((1, n), nl.float32, buffer=nl.sbuf)
        seen = []

        def body(i):
            seen.append(type(i).__name__)
            nisa.dma_copy(dst=row, src=data.ap([[n, 1], [1, n]], scalar_offset=i, indirect_dim=0))
            nisa.dma_copy(dst=out.ap([[n, 1], [1, n]], scalar_offset=i, indirect_dim=0), src=row)
            i = 0  # writing the iteration value does not change the loop

        assert nl.fori_loop(1, ub, body, step) is None
        assert seen and set(seen) == {"VirtualRegister"}
        return out

    return k


@pytest.mark.parametrize("step", [1, 2])
def test_fori_loop_runs_body_per_iteration_with_a_register_bound(step):
    data = np.arange(8 * 16, dtype=np.float32).reshape(8, 16)
    ub = np.array([[7]], dtype=np.int32)
    got = nki.run(_copy_rows_kernel(step), data, ub).outputs
    want = np.zeros_like(data)
    want[1:7:step] = data[1:7:step]
    np.testing.assert_array_equal(got, want)


def test_fori_loop_step_must_be_a_compile_time_int():
    def k(x):
        nl.fori_loop(0, 4, lambda i: None, nisa.register_alloc(1))
        return x

    with pytest.raises(KernelError, match=r"nl\.fori_loop step must be a compile-time positive"):
        nki.run(k, np.zeros((1, 1), np.float32))


def test_while_loop_tests_before_each_iteration_and_follows_the_returned_register():
    calls = []

    def k(x):
        def body(r):
            calls.append(r.value)
            nxt = nisa.register_alloc()
            nisa.register_move(nxt, r.value - 1)
            return nxt

        assert nl.while_loop(nisa.register_alloc(3), body) is None
        nl.while_loop(nisa.register_alloc(0), body)  # zero: the body never runs
        return x

    nki.run(k, np.zeros((1, 1), np.float32))
    assert calls == [3, 2, 1]


def test_while_loop_body_must_return_a_register():
    def k(x):
        nl.while_loop(nisa.register_alloc(1), lambda r: 0)
        return x

    with pytest.raises(KernelError, match=r"loop-register.*body result must be an nki.isa"):
        nki.run(k, np.zeros((1, 1), np.float32))
