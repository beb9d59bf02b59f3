"""Loop vectorization by the legacy compiler (``trnsim.nki.legacy.vectorize``): an innermost
``affine_range`` of independent elementwise/reduce iterations is timed as one instruction per
body statement; ``sequential_range``, loops with a DMA, loops with a loop-carried dependence
and loops past the size cap are not. Numerics never change. Our own kernels."""

from __future__ import annotations

import numpy as np
import pytest

import trnsim.nki as tnki
from trnsim.core.timing import schedule
from trnsim.nki.benchmark import record
from trnsim.nki.legacy.vectorize import MAX_FREE_ELEMENTS

tnki.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

TRN1 = "gen2"
RNG = np.random.default_rng(7)


def _window_sum(kind: str, n_out: int):
    """out[p, o] = sum_j x[p, o + j] * w[p, j] (j < 4), one output per loop iteration."""
    loop = nl.affine_range if kind == "affine" else nl.sequential_range

    @nki.jit
    def k(x, w):
        out = nl.ndarray((128, n_out), dtype=x.dtype, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None]
        i_j = nl.arange(4)[None, :]
        xs = nl.load(x)
        ws = nl.load(w)
        acc = nl.ndarray((nl.par_dim(128), n_out), dtype=x.dtype, buffer=nl.sbuf)
        for o in loop(n_out):
            prod = nisa.tensor_tensor(xs[i_p, i_j + o], ws[i_p, i_j], op=np.multiply)
            acc[i_p, o] = nisa.tensor_reduce(np.add, prod, axis=[1])
        nl.store(out, value=acc)
        return out

    return k


def _ref(x, w, n_out):
    return np.stack([(x[:, o : o + 4] * w).sum(axis=1) for o in range(n_out)], axis=1)


def _vector_ops(ins):
    return [i for i in ins if i.opcode.value in ("tensor_tensor", "tensor_reduce")]


def test_affine_loop_is_one_instruction_per_statement_and_faster_than_sequential():
    n = 64  # 64 x 4 = 256 elements per partition: under the cap
    x = RNG.uniform(-1, 1, (128, n + 3)).astype(np.float32)
    w = RNG.uniform(-1, 1, (128, 4)).astype(np.float32)
    aff = record(_window_sum("affine", n), x, w, target=TRN1)
    seq = record(_window_sum("sequential", n), x, w, target=TRN1)
    va, vs = _vector_ops(aff), _vector_ops(seq)
    assert len(vs) == 2 * n
    assert len(va) == 2
    tt, red = va
    assert tt.src[0].pattern == ((1, n), (1, 4))  # the window slides by one element
    assert tt.src[1].pattern == ((0, n), (1, 4))  # the filter is the same every iteration
    assert red.dst[0].pattern[0] == (1, n) and red.dst[0].free_size == n
    t_aff = schedule(aff, TRN1, launch_s=0.0).total_s
    t_seq = schedule(seq, TRN1, launch_s=0.0).total_s
    assert t_aff < t_seq / 2  # both also load and store the same bytes


@pytest.mark.parametrize("kind", ["affine", "sequential"])
def test_numerics_are_unchanged(kind):
    n = 32
    x = RNG.uniform(-1, 1, (128, n + 3)).astype(np.float32)
    w = RNG.uniform(-1, 1, (128, 4)).astype(np.float32)
    got = _window_sum(kind, n)(x, w)
    np.testing.assert_allclose(got, _ref(x, w, n), rtol=1e-6, atol=1e-6)


def test_a_loop_past_the_size_cap_is_not_vectorized():
    n = MAX_FREE_ELEMENTS // 4 + 1
    x = np.empty((128, n + 3), np.float32)
    w = np.empty((128, 4), np.float32)
    assert len(_vector_ops(record(_window_sum("affine", n), x, w, target=TRN1))) == 2 * n


def test_a_loop_with_a_dma_is_not_vectorized():
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(x.shape[0]):
            t = nl.load(x[i])
            nl.store(out[i], value=nisa.tensor_scalar(t, np.multiply, 2.0))
        return out

    x = np.empty((8, 128, 16), np.float32)
    ins = record(k, x, target=TRN1)
    assert sum(i.opcode.value == "tensor_scalar" for i in ins) == 8


def test_a_loop_carried_dependence_is_not_vectorized():
    @nki.jit
    def k(x):
        out = nl.ndarray((128, 16), dtype=x.dtype, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None]
        t = nl.load(x)
        for j in nl.affine_range(15):  # column j + 1 reads column j, written one iteration before
            t[i_p, j + 1] = nisa.tensor_scalar(t[i_p, j], np.multiply, 2.0)
        nl.store(out, value=t)
        return out

    x = RNG.uniform(-1, 1, (128, 16)).astype(np.float32)
    ins = record(k, x, target=TRN1)
    assert sum(i.opcode.value == "tensor_scalar" for i in ins) == 15
