"""fp32 on TensorE runs as FP32_LO_HI passes (``trnsim.core.costs.fp32_single_pass``): an fp32
matmul is two passes (the documented 1/4 bf16 rate), a transpose in NeuronCore-v3 transpose
mode, or a matmul with a hinted one/zero fp32 operand, is one (2x). Figures from the SDK's
ISA and trn2 architecture pages and the public trn2 profiles (``FP32_SINGLE_PASS_SOURCE``)."""

from __future__ import annotations

import numpy as np
import pytest

import trnsim.nki as tnki
from test_timing_costs import instr, matmul, opnd
from trnsim.core import costs
from trnsim.core.isa import Engine, Op
from trnsim.core.timing import schedule
from trnsim.hw import catalog
from trnsim.nki.benchmark import record

tnki.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

V2, V3, V4 = (catalog.CORES.get(n) for n in ("neuroncore-v2", "neuroncore-v3", "neuroncore-v4"))


def _transpose(dtype="float32", free=128):
    return instr(
        Op.NC_TRANSPOSE,
        Engine.TENSOR,
        [opnd("dst", "psum", free, 128, "float32")],
        [opnd("data", free=free, dtype=dtype)],
    )


@pytest.mark.parametrize("spec", [V3, V4], ids=["v3", "v4"])
def test_a_v3_fp32_transpose_is_one_pass_half_an_fp32_matmul(spec):
    # trn2 profile: an fp32 matmul of 128 columns issues two 109 ns passes, a transpose one
    mm = costs.instruction_cycles(matmul(n_mv=128, dtype="float32"), spec)
    tr = costs.instruction_cycles(_transpose(), spec)
    assert mm == 4 * 128  # two passes at 2 cycles per column: the 1/4 bf16 rate
    assert tr == 2 * 128 == mm / 2
    as_matmul = matmul(n_mv=128, dtype="float32", is_transpose=True)
    assert costs.instruction_cycles(as_matmul, spec) == mm / 2
    # bf16 is one pass either way
    assert costs.instruction_cycles(_transpose("bfloat16"), spec) == 128


def test_a_v2_fp32_transpose_stays_at_the_fp32_matmul_cost():
    # NeuronCore-v2 has no transpose mode (trn2 arch guide: 'Starting with NeuronCore-v3')
    assert costs.instruction_cycles(_transpose(), V2) == 4 * 128
    assert costs.instruction_cycles(matmul(n_mv=128, dtype="float32"), V2) == 4 * 128


@pytest.mark.parametrize("spec", [V2, V3], ids=["v2", "v3"])
def test_a_hinted_one_zero_fp32_operand_halves_the_matmul(spec):
    plain = costs.instruction_cycles(matmul(dtype="float32"), spec)
    for hint in ("is_stationary_onezero", "is_moving_onezero"):
        hinted = costs.instruction_cycles(matmul(dtype="float32", **{hint: True}), spec)
        assert hinted == plain / 2 == 2 * 512
    # the hint does nothing for bf16 (ISA: 'no impact for non-float32')
    bf16 = costs.instruction_cycles(matmul(is_stationary_onezero=True), spec)
    assert bf16 == costs.instruction_cycles(matmul(), spec) == 512


@nki.jit
def _transposes(x):
    # our own kernel: transpose n fp32 128x128 blocks on TensorE, write them back
    n = x.shape[1] // 128
    out = nl.ndarray((128, x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    for i in nl.affine_range(n):
        p = nisa.nc_transpose(t[:, nl.ds(i * 128, 128)])
        y = nisa.tensor_copy(p, dtype=x.dtype)
        nl.store(out[:, nl.ds(i * 128, 128)], value=y)
    return out


def test_a_kernel_of_fp32_transposes_keeps_tensor_e_half_as_busy_on_v3():
    x = np.arange(128 * 2048, dtype=np.float32).reshape(128, 2048)
    runs = {}
    for target in ("gen2", "gen3"):
        ins = record(_transposes, x, target=target)
        trs = [i for i in ins if i.opcode is Op.NC_TRANSPOSE]
        assert len(trs) == 16
        runs[target] = schedule(ins, target, launch_s=0.0)
    v2, v3 = runs["gen2"], runs["gen3"]
    # 16 transposes of 128 fp32 columns: 16 x 512 cycles on v2, 16 x 256 on v3
    pe2 = v2.neuron_profile()["tensor_engine_active_time"]
    pe3 = v3.neuron_profile()["tensor_engine_active_time"]
    assert pe2 == pytest.approx(16 * 512 / V2.tensor.clock_hz)
    assert pe3 == pytest.approx(16 * 256 / V3.tensor.clock_hz)
    assert v3.transpose_flops == v2.transpose_flops == 16 * 2 * 128**3
