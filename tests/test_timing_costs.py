"""Cost rules against the documented NKI cost formulas (nki-notes 4.4) for chosen shapes."""

from __future__ import annotations

import pytest

from trnsim.core import costs
from trnsim.core.instruction import Instruction, Operand
from trnsim.core.isa import Engine, Op
from trnsim.hw import core

ITEM = {"bfloat16": 2, "float32": 4, "float8_e4m3": 1, "float8_e4m3fn_x4": 4}


def opnd(role, mem="sbuf", parts=128, free=512, dtype="bfloat16", offset=0, p0=0, stride=1):
    return Operand(role, mem, dtype, ITEM[dtype], 0, p0, offset, (1, parts), ((stride, free),))


def hbm(role, rows=128, cols=512, row_elems=8192, dtype="bfloat16", offset=0):
    return Operand(role, "hbm", dtype, ITEM[dtype], -1, 0, offset, (row_elems, rows), ((1, cols),))


def instr(opcode, engine, dst, src, **attrs):
    return Instruction(
        opcode, engine, tuple(dst), tuple(src), tuple(sorted(attrs.items())), "k.py", 1
    )


def matmul(n_st=128, n_mv=512, k=128, dtype="bfloat16", **attrs):
    return instr(
        Op.NC_MATMUL,
        Engine.TENSOR,
        [opnd("dst", "psum", n_st, n_mv, "float32")],
        [
            opnd("stationary", parts=k, free=n_st, dtype=dtype),
            opnd("moving", parts=k, free=n_mv, dtype=dtype),
        ],
        **attrs,
    )


@pytest.mark.parametrize(("n_st", "n_mv", "cycles"), [(128, 512, 512), (128, 32, 64), (16, 8, 16)])
def test_matmul_is_max_of_min64_stationary_and_moving(n_st, n_mv, cycles):
    assert costs.instruction_cycles(matmul(n_st, n_mv), core("gen2")) == cycles


def test_matmul_fp32_is_four_times_slower():
    spec = core("gen3")
    bf16 = costs.instruction_cycles(matmul(dtype="bfloat16"), spec)
    assert costs.instruction_cycles(matmul(dtype="float32"), spec) == 4 * bf16


def test_fp8_double_row_doubles_rate_on_v3_not_v2():
    m = matmul(dtype="float8_e4m3", perf_mode="double_row")
    assert costs.instruction_cycles(m, core("gen3")) == 256
    assert costs.instruction_cycles(m, core("gen2")) == 512


def test_matmul_seconds_use_tensor_clock_and_flops_count_macs():
    spec = core("gen4")
    assert costs.instruction_seconds(matmul(), spec) == pytest.approx(512 / spec.tensor.clock_hz)
    assert costs.matmul_flops(matmul()) == 2 * 128 * 128 * 512


def test_matmul_at_full_rate_reaches_the_spec_peak():
    spec = core("gen4")
    rate = costs.matmul_flops(matmul()) / costs.instruction_seconds(matmul(), spec)
    assert rate == pytest.approx(spec.tensor.peak_flops("bf16"))


def test_mx_matmul_does_four_times_the_work_in_the_same_cycles():
    x4 = "float8_e4m3fn_x4"
    m = instr(
        Op.NC_MATMUL_MX,
        Engine.TENSOR,
        [opnd("dst", "psum", 128, 512, "float32")],
        [opnd("stationary", free=128, dtype=x4), opnd("moving", free=512, dtype=x4)],
    )
    spec = core("gen4")
    rate = costs.matmul_flops(m) / costs.instruction_seconds(m, spec)
    assert rate == pytest.approx(spec.tensor.peak_flops("mxfp8"))


def copy(mem_src="sbuf", dtype="bfloat16", free=4096, stride=1, engine=Engine.VECTOR):
    return instr(
        Op.TENSOR_COPY,
        engine,
        [opnd("dst", free=free, dtype=dtype)],
        [opnd("src", mem_src, free=free, dtype=dtype, stride=stride)],
    )


def test_vector_copy_is_max_minii_n_on_v2():
    assert costs.instruction_cycles(copy(), core("gen2")) == 4096
    assert costs.instruction_cycles(copy(free=8), core("gen2")) == 64


def test_v3_vector_perf_modes_4x_contiguous_bf16_2x_psum_1x_fp32():
    spec = core("gen3")
    assert costs.instruction_cycles(copy(), spec) == 1024
    assert costs.instruction_cycles(copy(mem_src="psum"), spec) == 2048
    assert costs.instruction_cycles(copy(stride=2), spec) == 2048
    assert costs.instruction_cycles(copy(dtype="float32"), spec) == 4096


def test_v4_scalar_engine_2x_bf16_copy():
    assert costs.instruction_cycles(copy(engine=Engine.SCALAR), core("gen4")) == 2048
    assert costs.instruction_cycles(copy(engine=Engine.SCALAR), core("gen3")) == 4096


def test_tensor_tensor_2n_unless_psum_plus_sbuf():
    def tt(mem2, dtype="float32", op="add"):
        return instr(
            Op.TENSOR_TENSOR,
            Engine.VECTOR,
            [opnd("dst", free=1024, dtype=dtype)],
            [opnd("data1", free=1024, dtype=dtype), opnd("data2", mem2, free=1024, dtype=dtype)],
            op=op,
        )

    spec = core("gen2")
    assert costs.instruction_cycles(tt("sbuf"), spec) == 2048
    assert costs.instruction_cycles(tt("psum"), spec) == 1024
    assert costs.instruction_cycles(tt("sbuf", "bfloat16"), spec) == 1024


def test_exponential_is_4x_activation_on_v4():
    src, dst = opnd("src", free=2048, dtype="float32"), opnd("dst", free=2048, dtype="float32")
    exp = instr(Op.EXPONENTIAL, Engine.VECTOR, [dst], [src])
    act = instr(Op.ACTIVATION, Engine.SCALAR, [dst], [opnd("data", free=2048, dtype="float32")])
    spec = core("gen4")
    assert costs.instruction_cycles(act, spec) == 2048
    assert costs.instruction_cycles(exp, spec) == 2048 / costs.EXPONENTIAL_SPEEDUP


def test_gpsimd_is_start_plus_n():
    iota = instr(Op.IOTA, Engine.GPSIMD, [opnd("dst", free=300, dtype="float32")], [])
    assert costs.instruction_cycles(iota, core("gen3")) == costs.GPSIMD_START_CYCLES + 300


def load(rows=128, cols=2048, parts=None):
    parts = parts or rows
    return instr(
        Op.DMA_COPY,
        Engine.DMA,
        [opnd("dst", parts=parts, free=cols * rows // parts)],
        [hbm("src", rows, cols)],
    )


def test_dma_fixed_latency_plus_descriptors_plus_bytes_over_bandwidth():
    spec = core("gen2")
    model = costs.DmaModel.for_core(spec)
    c = costs.dma_cost(load(), model)
    nbytes = 128 * 2048 * 2
    rows = 128
    expected = (rows * spec.dma.descriptor_s + nbytes / spec.dma.engine_bw) / 16
    assert c.latency_s == spec.dma.fixed_latency_s
    assert c.duration_s == pytest.approx(expected)
    assert c.hbm_bytes == nbytes


@pytest.mark.parametrize("target", ["gen2", "gen3", "gen4"])
def test_dma_bandwidth_follows_the_guides_curve_in_bytes_per_partition(target):
    """NEURON_DMA_GUIDE: a small fraction of peak below 256 B per partition, below peak from
    256 B to 2 KiB, approaching peak at 2 KiB, saturated from 4 KiB."""
    spec = core(target)
    model = costs.DmaModel.for_core(spec)

    def rate(row_bytes):
        cols = row_bytes // 2
        c = costs.dma_cost(load(rows=128, cols=cols), model)
        return c.nbytes / c.duration_s / spec.dma.core_bw

    assert rate(64) < 0.5
    assert 0.5 < rate(256) < 0.8
    assert 0.9 <= rate(2048) < rate(4096)
    assert rate(4096) >= 0.95
    assert rate(4096) == pytest.approx(spec.dma.row_efficiency(4096))


def test_dma_efficiency_scales_the_streaming_rate():
    spec = core("gen2")
    full = costs.dma_cost(load(), costs.DmaModel.for_core(spec))
    half = costs.dma_cost(load(), costs.DmaModel.for_core(spec, efficiency=0.5))
    stream = 128 * 2048 * 2 / (16 * spec.dma.engine_bw)
    assert half.duration_s - full.duration_s == pytest.approx(stream)


def test_dma_partial_partitions_use_fewer_engines():
    model = costs.DmaModel.for_core(core("gen3"), efficiency=1.0)
    full = costs.dma_cost(load(rows=128, cols=512), model)
    eight = costs.dma_cost(load(rows=8, cols=8192), model)  # same bytes on 8 partitions
    assert eight.engines == 1 and full.engines == 16
    assert eight.duration_s == pytest.approx(16 * full.duration_s, rel=0.1)


def test_dma_short_rows_cost_more_per_byte():
    model = costs.DmaModel.for_core(core("gen4"), efficiency=1.0)
    long_rows = costs.dma_cost(load(rows=128, cols=2048), model)
    short = costs.dma_cost(load(rows=2048, cols=128, parts=128), model)  # 256-B rows
    assert short.row_bytes == 256 and long_rows.row_bytes == 4096
    assert short.duration_s > 1.15 * long_rows.duration_s


def test_every_rule_names_a_source():
    for rule in costs.RULES:
        assert rule.source and rule.text, rule.name


def test_fp8_double_row_flops_count_each_mac_once_and_reach_the_fp8_peak():
    # double_row operands are [K/2, 2, M] and [K/2, 2, N]: K = 256 here, not 128 x 2 x 2.
    def dr(role, free):
        return Operand(role, "sbuf", "float8_e4m3", 1, 0, 0, 0, (1, 128), ((free, 2), (1, free)))

    m = instr(
        Op.NC_MATMUL,
        Engine.TENSOR,
        [opnd("dst", "psum", 128, 512, "float32")],
        [dr("stationary", 128), dr("moving", 512)],
        perf_mode="double_row",
    )
    assert costs.matmul_flops(m) == 2 * 256 * 128 * 512
    spec = core("gen3")
    rate = costs.matmul_flops(m) / costs.instruction_seconds(m, spec)
    assert rate == pytest.approx(spec.tensor.peak_flops("fp8"))


def test_fp8_double_row_flops_with_a_4d_stationary_operand():
    st = Operand(
        "stationary", "sbuf", "float8_e4m3", 1, 0, 0, 0, (1, 128), ((128, 2), (32, 4), (1, 32))
    )
    mv = Operand("moving", "sbuf", "float8_e4m3", 1, 0, 0, 0, (1, 128), ((512, 2), (1, 512)))
    m = instr(
        Op.NC_MATMUL,
        Engine.TENSOR,
        [opnd("dst", "psum", 128, 512, "float32")],
        [st, mv],
        perf_mode="double_row",
    )
    assert costs.matmul_flops(m) == 2 * 256 * 128 * 512
