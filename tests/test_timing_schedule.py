"""The scheduler on hand-built instruction streams: engine parallelism, in-order engines,
RAW / WAR / WAW dependencies and the static latency, PSUM accumulation groups, DMA queues and
back-filling, engine placement, launch overhead, profile figures."""

from __future__ import annotations

import functools

import pytest

from test_timing_costs import copy, hbm, instr, load, matmul, opnd
from trnsim.core import costs
from trnsim.core.isa import AUTO_ENGINE_ATTR, Engine, Op
from trnsim.core.timing import region_of, regions_overlap
from trnsim.core.timing import schedule as schedule_with_launch
from trnsim.hw import core

SPEC = core("gen3")
schedule = functools.partial(schedule_with_launch, launch_s=0.0)  # the stream alone


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


def latency(engine):
    return SPEC.latency_cycles(engine.value) / costs.engine_clock(SPEC, engine)


def test_read_after_write_waits_for_the_writer():
    ld = load(rows=128, cols=512)  # writes sbuf [0, 1024) on 128 partitions
    mm = matmul()  # reads sbuf [0, 256) stationary and [0, 1024) moving
    p = schedule([ld, mm], SPEC)
    s = p.schedule
    assert s.start[1] == pytest.approx(s.end[0])  # a DMA's output: no engine latency
    assert p.total_s == pytest.approx(s.end[0] + secs(mm))


def test_a_dependent_compute_instruction_waits_for_the_static_latency():
    mm = matmul()
    evac = instr(
        Op.TENSOR_COPY,
        Engine.VECTOR,
        [opnd("dst", free=512, dtype="float32", offset=50_000)],
        [opnd("src", "psum", free=512, dtype="float32")],
    )
    s = schedule([mm, evac], SPEC).schedule
    assert s.start[1] == pytest.approx(s.end[0] + latency(Engine.TENSOR))


def _chain(engine):
    """Two copies on ``engine``, the second reading the first's output (sbuf [0, 1024) then
    [1024, 2048) -> [4096, 5120)), 512 bf16 per partition each."""
    first = instr(Op.TENSOR_COPY, engine, [opnd("dst", offset=1024)], [opnd("src", offset=0)])
    second = instr(Op.TENSOR_COPY, engine, [opnd("dst", offset=4096)], [opnd("src", offset=1024)])
    return [first, second]


def test_a_dependent_vector_instruction_waits_100_cycles_on_neuroncore_v2():
    # the trn1/inf2 arch guide's VectorE cost model: back-to-back instructions each depending
    # on the previous one's output add 100 engine cycles; ScalarE keeps the perf guide's 200
    v2 = core("gen2")
    assert v2.latency_cycles("vector") == 100
    assert v2.latency_cycles("scalar") == v2.latency_cycles("tensor") == 200
    for engine, cycles, clock in ((Engine.VECTOR, 100, 1.12e9), (Engine.SCALAR, 200, 1.4e9)):
        s = schedule(_chain(engine), v2).schedule
        assert s.start[1] - s.end[0] == pytest.approx(cycles / clock)
    # the later generations' documents give no per-engine figure: the core's 200
    s = schedule(_chain(Engine.VECTOR), SPEC).schedule
    assert s.start[1] - s.end[0] == pytest.approx(200 / costs.engine_clock(SPEC, Engine.VECTOR))


def test_independent_instructions_on_one_engine_hide_the_static_latency():
    a = copy()
    b = instr(
        Op.TENSOR_COPY, Engine.VECTOR, [opnd("dst", offset=65536)], [opnd("src", offset=98304)]
    )
    s = schedule([a, b], SPEC).schedule
    assert s.start[1] == pytest.approx(s.end[0])


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
    assert s.start[4] == pytest.approx(s.end[3] + latency(Engine.TENSOR))
    assert s.end[3] == pytest.approx(4 * secs(group[0]))  # accumulation: no latency between


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
    # one queue: the data phases follow each other, the latency overlaps the previous transfer
    data = costs.dma_cost(same_queue[0], costs.DmaModel.for_core(SPEC)).data_s
    total = schedule(same_queue, SPEC).total_s
    assert total == pytest.approx(SPEC.dma.fixed_latency_s + 4 * data, rel=0.01)


def test_a_ready_load_back_fills_bandwidth_ahead_of_a_store_waiting_for_compute():
    """load a -> compute on a -> store; load b (independent, ready at 0) is issued after the
    store in program order but moves its data while the store waits for the compute."""
    big = 8192  # bf16 elements per partition: 2 MiB per transfer
    ld_a = instr(Op.DMA_COPY, Engine.DMA, [opnd("dst", free=big)], [hbm("src", 128, big)])
    work = instr(
        Op.TENSOR_COPY,
        Engine.GPSIMD,
        [opnd("dst", free=big, offset=2 * big)],
        [opnd("src", free=big)],
    )
    st = instr(
        Op.DMA_COPY,
        Engine.DMA,
        [hbm("dst", 128, big, offset=2**26)],
        [opnd("src", free=big, offset=2 * big)],
    )
    ld_b = instr(
        Op.DMA_COPY,
        Engine.DMA,
        [opnd("dst", free=big, offset=4 * big)],
        [hbm("src", 128, big, offset=2**27)],
    )
    s = schedule([ld_a, work, st, ld_b], SPEC).schedule
    assert s.start[2] >= s.end[1]  # the store waited for the compute
    assert s.end[3] < s.start[2] + SPEC.dma.fixed_latency_s  # b moved before the store did
    assert s.end[3] <= s.end[1]  # ... while the compute ran


def test_back_filling_never_delays_a_transfer_already_booked():
    first = [load(rows=128, cols=4096) for _ in range(4)]
    first = [
        instr(
            Op.DMA_COPY,
            Engine.DMA,
            [opnd("dst", free=4096, offset=i * 8192)],
            [hbm("src", 128, 4096, offset=i * 2**20)],
        )
        for i in range(4)
    ]
    alone = schedule(first, SPEC).schedule
    late = instr(
        Op.DMA_COPY,
        Engine.DMA,
        [opnd("dst", free=4096, offset=5 * 8192)],
        [hbm("src", 128, 4096, offset=9 * 2**20)],
    )
    both = schedule([*first, late], SPEC).schedule
    assert both.end[:4] == alone.end[:4]
    assert both.end[4] >= max(alone.end)


def test_an_engine_less_copy_goes_to_the_engine_that_finishes_it_first():
    def evac(offset, auto=True):
        attrs = {AUTO_ENGINE_ATTR: True} if auto else {}
        return instr(
            Op.TENSOR_COPY,
            Engine.VECTOR,
            [opnd("dst", free=512, dtype="float32", offset=offset)],
            [opnd("src", "psum", free=512, dtype="float32", offset=offset % 16384)],
            **attrs,
        )

    p = schedule([evac(0), evac(4096)], SPEC)
    assert [t.instructions for t in p.engines if t.name in ("scalar", "vector")] == [1, 1]
    q = schedule([evac(0, auto=False), evac(4096, auto=False)], SPEC)
    assert q.engine("vector").instructions == 2 and p.total_s < q.total_s


def test_an_engine_less_tensor_scalar_scalar_e_cannot_run_stays_on_vector():
    ts = instr(
        Op.TENSOR_SCALAR,
        Engine.VECTOR,
        [opnd("dst", free=512, dtype="float32")],
        [opnd("data", free=512, dtype="float32", offset=4096)],
        op0="subtract",
        operand0=1.0,
        **{AUTO_ENGINE_ATTR: True},
    )
    assert costs.auto_engines(ts) == (Engine.VECTOR,)
    ok = ts._replace(attrs=tuple(sorted({**dict(ts.attrs), "op0": "multiply"}.items())))
    assert costs.auto_engines(ok) == (Engine.SCALAR, Engine.VECTOR)


def test_launch_overhead_adds_to_the_stream_and_is_a_critical_path_contributor():
    stream = [load(rows=128, cols=512), matmul()]
    bare = schedule(stream, SPEC)
    full = schedule_with_launch(stream, SPEC, launch_s=12e-6)
    assert full.total_s == pytest.approx(bare.total_s + 12e-6)
    assert full.launch_s == 12e-6
    assert any(c.opcode == "launch" for c in full.critical_path)
    assert sum(c.seconds for c in full.critical_path) == pytest.approx(full.total_s)


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
    assert p.hbm_read_bytes == sum(i.src[0].nbytes for i in big) and p.hbm_write_bytes == 0


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


def test_a_ready_instruction_fills_its_engines_idle_gap_ahead_of_program_order():
    """The compiler orders each engine's instructions from the dependencies: a matmul whose
    inputs are ready runs while an earlier one (in program order) waits for its load."""
    waits = [load(rows=128, cols=512), matmul()]  # the load writes the matmul's moving tile
    ready = instr(
        Op.NC_MATMUL,
        Engine.TENSOR,
        [opnd("dst", "psum", 128, 512, "float32", offset=4096)],
        [opnd("stationary", free=128, offset=65536), opnd("moving", free=512, offset=98304)],
    )
    s = schedule([*waits, ready], SPEC).schedule
    assert s.start[2] == 0.0 and s.end[2] <= s.start[1]


def _two_activations(**attrs):
    """A load, an activation reading it, then an independent activation (``attrs`` on both),
    scheduled on NeuronCore-v3."""
    slow = instr(
        Op.ACTIVATION,
        Engine.SCALAR,
        [opnd("dst", free=512, offset=65536)],
        [opnd("data", free=512)],
        **attrs,
    )
    after = instr(
        Op.ACTIVATION,
        Engine.SCALAR,
        [opnd("dst", free=512, offset=98304)],
        [opnd("data", free=512, offset=131072)],
        **attrs,
    )
    ld = load(rows=128, cols=512)  # writes the first activation's input
    return schedule([ld, slow, after], SPEC).schedule


@pytest.mark.parametrize("cmd", ["reset", "reduce", "reset_reduce"])
def test_in_order_instructions_never_move_ahead(cmd):
    """Engine state beyond memory (random state, accumulators: isa.IN_ORDER) keeps program
    order on its engine: an activation that uses the Scalar engine's reduce registers."""
    s = _two_activations(reduce_cmd=cmd)
    assert s.start[2] >= s.end[1]


def test_an_activation_without_the_reduce_registers_is_ordered_by_its_data_only():
    """``reduce_cmd=idle`` (the default) "Do not modify reduce_regs" (the activation
    docstring) and no ``reduce_res`` reads them out: no engine state, so a ready activation
    runs while an earlier one waits for its load, as any other instruction does."""
    from trnsim.core.isa import uses_engine_state

    s = _two_activations()
    assert s.start[2] == 0.0 and s.end[2] <= s.start[1]
    assert not uses_engine_state(Op.ACTIVATION, (), ("dst",))
    assert uses_engine_state(Op.ACTIVATION, (), ("dst", "reduce_res"))
    assert uses_engine_state(Op.DROPOUT, (), ("dst",))
