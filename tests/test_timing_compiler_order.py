"""The compiler's instruction order (``timing.compiler_order``): each engine's instructions are
issued in dependency order, so a dependent instruction's static latency is filled with
independent work; true dependencies (read-after-write, write-after-read), engine state and
barriers keep their order; the schedule stays indexed by program position."""

from __future__ import annotations

import functools

import pytest

from test_timing_costs import instr, opnd
from trnsim.core import costs, timing
from trnsim.core.isa import Engine, Op
from trnsim.core.timing import schedule as schedule_with_launch
from trnsim.hw import core

SPEC = core("gen3")
schedule = functools.partial(schedule_with_launch, launch_s=0.0)
FREE = 2048  # elements per partition: one copy is longer than the static latency


def cp(dst, src, **attrs):
    """A VectorE copy of ``FREE`` bf16 elements per partition, byte offsets ``dst``/``src``."""
    return instr(
        Op.TENSOR_COPY,
        Engine.VECTOR,
        [opnd("dst", free=FREE, offset=dst)],
        [opnd("src", free=FREE, offset=src)],
        **attrs,
    )


def dur():
    return costs.instruction_seconds(cp(0, 8192), SPEC)


def lat():
    return SPEC.static_latency_cycles / costs.engine_clock(SPEC, Engine.VECTOR)


K = 8192  # bytes between buffers


def two_chains():
    """a1 -> a2 and b1 -> b2 (each second copy reads the first's output), in program order
    a1, a2, b1, b2."""
    return [cp(1 * K, 0), cp(2 * K, 1 * K), cp(4 * K, 3 * K), cp(5 * K, 4 * K)]


def test_independent_work_fills_a_dependent_wait():
    d, latency = dur(), lat()
    assert d > latency  # the gap before a2 is shorter than b1: back-filling alone cannot use it
    s = schedule(two_chains(), SPEC)
    assert s.total_s == pytest.approx(4 * d)
    start = s.schedule.start
    assert start[2] == pytest.approx(d)  # b1 runs in a2's wait
    assert start[1] == pytest.approx(2 * d)
    assert start[3] == pytest.approx(3 * d)


def test_program_order_leaves_the_waits_idle(monkeypatch):
    """The same stream with the pre-pass off: what the model did before."""
    monkeypatch.setattr(timing, "REORDER", False)
    d, latency = dur(), lat()
    assert schedule(two_chains(), SPEC).total_s == pytest.approx(4 * d + 2 * latency)


def test_a_chain_keeps_every_wait():
    chain = [cp(1 * K, 0), cp(2 * K, 1 * K), cp(3 * K, 2 * K)]
    assert schedule(chain, SPEC).total_s == pytest.approx(3 * dur() + 2 * lat())
    assert timing.compiler_order(chain, timing._Regions(), _costs()) is None


def test_a_write_after_read_is_never_moved_ahead_of_the_read():
    """b1 overwrites what a2 reads: it may not run in a2's wait."""
    stream = [cp(1 * K, 0), cp(2 * K, 1 * K), cp(1 * K, 3 * K), cp(5 * K, 1 * K)]
    s = schedule(stream, SPEC).schedule
    assert s.start[2] >= s.end[1]
    assert s.start[3] >= s.end[2]


def test_engine_state_keeps_its_place():
    """An instruction that uses engine state (here an activation with the reduce registers)
    is never issued ahead of the instructions before it on its engine."""

    def act(dst, src, **attrs):
        return instr(
            Op.ACTIVATION,
            Engine.SCALAR,
            [opnd("dst", free=FREE, offset=dst)],
            [opnd("data", free=FREE, offset=src)],
            **attrs,
        )

    stream = [act(1 * K, 0), act(2 * K, 1 * K), act(4 * K, 3 * K, reduce_cmd="reset")]
    s = schedule(stream, SPEC).schedule
    assert s.start[2] >= s.end[1]


def test_a_barrier_keeps_its_place():
    bar = instr(Op.CORE_BARRIER, Engine.SYNC, [], [])
    stream = [cp(1 * K, 0), cp(2 * K, 1 * K), bar, cp(4 * K, 3 * K), cp(5 * K, 4 * K)]
    s = schedule(stream, SPEC).schedule
    assert s.start[3] >= s.end[1]


def test_the_order_is_a_permutation_that_respects_every_dependency():
    stream = two_chains() * 3
    order = timing.compiler_order(stream, timing._Regions(), _costs())
    assert order is not None and sorted(order) == list(range(len(stream)))
    pos = {i: k for k, i in enumerate(order)}
    # same buffers reused three times: every later use of a buffer follows the earlier ones
    for i, a in enumerate(stream):
        for j in range(i + 1, len(stream)):
            b = stream[j]
            if {o.offset for o in a.dst} & {o.offset for o in (*b.src, *b.dst)} or {
                o.offset for o in a.src
            } & {o.offset for o in b.dst}:
                assert pos[i] < pos[j], (i, j)


def _costs():
    tracks = timing._Tracks()
    dma = costs.DmaModel.for_core(SPEC, None, 1, None)
    return timing._Costs(SPEC, dma, tracks, multi=False)
