"""The scheduler on hand-built instruction streams: engine parallelism, in-order engines,
RAW / WAR / WAW dependencies, PSUM accumulation groups, DMA queues, profile figures."""

from __future__ import annotations

import pytest

from test_timing_costs import copy, hbm, instr, load, matmul, opnd
from trnsim.core import costs
from trnsim.core.isa import Engine, Op
from trnsim.core.timing import region_of, regions_overlap, schedule
from trnsim.hw import core

SPEC = core("gen3")


def secs(i):
    return costs.instruction_seconds(i, SPEC)


def test_engines_run_in_parallel():
    mm = matmul()
    cp = instr(
        Op.TENSOR_COPY, Engine.VECTOR, [opnd("dst", offset=65536)], [opnd("src", offset=98304)]
    )
    p = schedule([mm, cp], SPEC)
    assert p.total_s == pytest.approx(max(secs(mm), secs(cp)))


def test_one_engine_runs_in_order():
    a = matmul()
    b = instr(
        Op.NC_MATMUL,
        Engine.TENSOR,
        [opnd("dst", "psum", 128, 512, "float32", offset=2048)],
        [opnd("stationary", free=128, offset=8192), opnd("moving", free=512, offset=16384)],
    )
    p = schedule([a, b], SPEC)
    assert p.total_s == pytest.approx(secs(a) + secs(b))
    s = p.schedule
    assert s.start[1] == pytest.approx(s.end[0])


def test_read_after_write_waits_for_the_writer():
    ld = load(rows=128, cols=512)  # writes sbuf [0, 1024) on 128 partitions
    mm = matmul()  # reads sbuf [0, 256) stationary and [0, 1024) moving
    p = schedule([ld, mm], SPEC)
    s = p.schedule
    assert s.start[1] == pytest.approx(s.end[0])
    assert p.total_s == pytest.approx(s.end[0] + secs(mm))


def test_write_after_read_waits_for_the_reader():
    mm = matmul()
    ld = load(rows=128, cols=512)  # overwrites the moving tile the matmul reads
    s = schedule([mm, ld], SPEC).schedule
    assert s.start[1] == pytest.approx(s.end[0])


def test_disjoint_regions_do_not_wait():
    mm = matmul()
    far = instr(
        Op.DMA_COPY, Engine.DMA, [opnd("dst", free=512, offset=100_000)], [hbm("src", 128, 512)]
    )
    s = schedule([mm, far], SPEC).schedule
    assert s.start[1] == 0.0


def test_psum_group_reader_waits_for_last_accumulating_matmul():
    group = [matmul(accumulate=True) for _ in range(4)]
    evac = instr(
        Op.TENSOR_COPY,
        Engine.VECTOR,
        [opnd("dst", free=512, dtype="float32", offset=50_000)],
        [opnd("src", "psum", free=512, dtype="float32")],
    )
    s = schedule([*group, evac], SPEC).schedule
    assert s.start[4] == pytest.approx(s.end[3])
    assert s.end[3] == pytest.approx(4 * secs(group[0]))


def test_next_psum_group_waits_for_previous_evacuation():
    evac = instr(
        Op.TENSOR_COPY,
        Engine.VECTOR,
        [opnd("dst", free=512, dtype="float32", offset=50_000)],
        [opnd("src", "psum", free=512, dtype="float32")],
    )
    s = schedule([matmul(), evac, matmul()], SPEC).schedule
    assert s.start[2] == pytest.approx(s.end[1])


def test_hbm_tiles_in_the_same_rows_but_other_columns_are_independent():
    a = hbm("dst", 128, 512, row_elems=8192, offset=0)
    b = hbm("src", 128, 512, row_elems=8192, offset=1024)  # next 512 columns (bf16)
    c = hbm("src", 128, 512, row_elems=8192, offset=512)  # overlaps both
    assert not regions_overlap(region_of(a), region_of(b))
    assert regions_overlap(region_of(a), region_of(c))


def test_dma_queues_overlap_fixed_latency():
    loads = [
        instr(
            Op.DMA_COPY,
            Engine.DMA,
            [opnd("dst", free=4, offset=i * 4096)],
            [hbm("src", 128, 4, offset=i * 128)],
        )
        for i in range(SPEC.dma.queues_per_engine)
    ]
    p = schedule(loads, SPEC)
    one = costs.instruction_seconds(loads[0], SPEC)
    assert p.total_s < 2 * one  # 16 queues: latencies overlap
    same_queue = [
        instr(
            Op.DMA_COPY,
            Engine.DMA,
            [opnd("dst", free=4, offset=i * 4096)],
            [hbm("src", 128, 4, offset=i * 128)],
            queue=0,
        )
        for i in range(4)
    ]
    assert schedule(same_queue, SPEC).total_s == pytest.approx(4 * one, rel=0.01)


def test_dma_bandwidth_is_shared_by_queues():
    big = [
        instr(
            Op.DMA_COPY,
            Engine.DMA,
            [opnd("dst", free=8192, offset=i * 16384)],
            [hbm("src", 128, 8192, offset=i * 2**24)],
        )
        for i in range(8)
    ]
    p = schedule(big, SPEC)
    model = costs.DmaModel.for_core(SPEC)
    occupancy = sum(costs.dma_cost(i, model).occupancy_s for i in big)
    assert p.total_s == pytest.approx(occupancy + SPEC.dma.fixed_latency_s, rel=0.01)
    assert p.mbu > 0


def test_barrier_waits_for_everything_before_it():
    mm = matmul()
    bar = instr(Op.CORE_BARRIER, Engine.SYNC, [], [])
    cp = copy()
    s = schedule([mm, bar, cp], SPEC).schedule
    assert s.start[2] >= s.end[0]


def test_barrier_also_holds_an_engine_first_used_after_it():
    mm = matmul()
    bar = instr(Op.CORE_BARRIER, Engine.SYNC, [], [])
    gp = instr(
        Op.TENSOR_COPY, Engine.GPSIMD, [opnd("dst", offset=65536)], [opnd("src", offset=98304)]
    )
    s = schedule([mm, bar, gp], SPEC).schedule
    assert s.start[2] >= s.end[1] >= s.end[0] > 0


def test_profile_figures_and_critical_path():
    stream = []
    for _ in range(8):
        stream.append(load(rows=128, cols=512))
        stream.append(matmul())
    p = schedule(stream, SPEC)
    assert p.flops == 8 * 2 * 128 * 128 * 512
    assert p.mfu == pytest.approx(p.flops / p.total_s / SPEC.tensor.peak_flops("bf16"))
    assert dict(p.instruction_counts) == {"dma_copy": 8, "nc_matmul": 8}
    assert p.critical_path[0].opcode == "dma_copy"
    assert sum(c.seconds for c in p.critical_path) == pytest.approx(p.total_s)
    assert 0 < p.engine("tensor").utilisation < 1
    js = p.to_json()
    assert {"total_s", "engines", "mfu", "mbu", "bytes", "critical_path"} <= set(js)


def test_deterministic():
    stream = [load(rows=128, cols=512), matmul(), copy()] * 5
    assert schedule(stream, SPEC) == schedule(stream, SPEC)
