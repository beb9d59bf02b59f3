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
