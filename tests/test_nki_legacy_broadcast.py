"""A legacy partition broadcast (``[1, F]`` tile to 128 partitions) runs on the Tensor engine,
a matmul by a row of ones, as neuron-profile's ``hardware_flops`` definition says the compiler
emits ("matmul instructions for data movement (i.e. transposes and partition broadcasts)"):
exact values, no HBM round trip; integer tiles still go through HBM by DMA."""

from __future__ import annotations

import numpy as np

import trnsim.nki as tnki
from trnsim.core.isa import Engine, Op

tnki.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402


@nki.jit
def scale_rows(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.load(a)
    r = nl.load(b)  # [1, F]
    nl.store(out, x * r.broadcast_to(a.shape))
    return out


def test_float_broadcast_is_exact_and_on_the_tensor_engine():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((128, 700)).astype(np.float32)
    b = (rng.standard_normal((1, 700)) / 3).astype(np.float32)
    res = tnki.run(scale_rows, a, b)
    np.testing.assert_array_equal(res.outputs, a * b)
    ops = [(i.opcode, i.engine) for i in res.instructions]
    assert ops.count((Op.NC_MATMUL, Engine.TENSOR)) == 2  # 700 columns: two PSUM banks
    hbm_writes = [i for i in res.instructions if i.dst and i.dst[0].memory == "hbm"]
    assert len(hbm_writes) == 1  # the output store alone: no scratch row in HBM


def test_integer_broadcast_goes_through_hbm():
    a = np.arange(128 * 16, dtype=np.int32).reshape(128, 16)
    b = np.arange(16, dtype=np.int32).reshape(1, 16)
    res = tnki.run(scale_rows, a, b)
    np.testing.assert_array_equal(res.outputs, a * b)
    assert not any(i.opcode is Op.NC_MATMUL for i in res.instructions)


@nki.jit
def two_broadcasts(a, b, c):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.load(a)
    for i in nl.affine_range(2):
        r = nl.load(b[i : i + 1, :])  # [1, F]
        s = nl.load(c[i : i + 1, :])
        y = nisa.tensor_tensor(x, r.broadcast_to(a.shape), op=nl.multiply)
        z = nisa.tensor_tensor(y, s.broadcast_to(a.shape), op=nl.add)
        x = z
    nl.store(out, x)
    return out


def test_an_fp32_row_within_one_psum_bank_is_read_from_psum_and_the_ones_are_made_once():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((128, 512)).astype(np.float32)
    b, c = (rng.standard_normal((2, 512)).astype(np.float32) for _ in range(2))
    res = tnki.run(two_broadcasts, a, b, c)
    want = a
    for i in range(2):
        want = want * b[i] + c[i]
    np.testing.assert_allclose(res.outputs, want, rtol=1e-6, atol=1e-6)
    tts = [i for i in res.instructions if i.opcode is Op.TENSOR_TENSOR]
    assert len(tts) == 4
    # each reads its broadcast operand from PSUM (N cycles, not 2N): no PSUM-to-SBUF copy
    assert all({o.memory for o in i.src} == {"sbuf", "psum"} for i in tts)
    assert not any(i.opcode is Op.TENSOR_COPY for i in res.instructions)
    assert sum(i.opcode is Op.NC_MATMUL for i in res.instructions) == 4
    assert sum(i.opcode is Op.MEMSET for i in res.instructions) == 1  # the constant row of ones


@nki.jit
def matmul_plus_row(xt, w, b):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    x, ww, bb = nl.load(xt), nl.load(w), nl.load(b)
    ps = nl.matmul(x, ww, transpose_x=True)  # [128, 512] in PSUM
    y = ps + bb.broadcast_to((128, 512))  # the broadcast row would be a second PSUM input
    acc = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
    acc += bb.broadcast_to((128, 512))  # PSUM += a broadcast row: the same
    nl.store(out, y + acc)
    return out


def test_a_broadcast_read_with_another_psum_input_is_copied_to_sbuf_first():
    rng = np.random.default_rng(2)
    xt = rng.standard_normal((128, 128)).astype(np.float32)
    w = rng.standard_normal((128, 512)).astype(np.float32)
    b = rng.standard_normal((1, 512)).astype(np.float32)
    res = tnki.run(matmul_plus_row, xt, w, b)  # no "both inputs are in PSUM" error
    np.testing.assert_allclose(res.outputs, xt.T @ w + 2 * b, rtol=1e-5, atol=1e-4)
    for i in res.instructions:
        if i.opcode is Op.TENSOR_TENSOR:
            assert sum(o.memory == "psum" for o in i.src) <= 1
