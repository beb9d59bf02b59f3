"""Memory of recorded streams: proportional to what is kept, equal operands stored once."""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

import pytest

from trnsim.cli.profile import profile_file
from trnsim.nki.kernelfile import load_module
from trnsim.nki.simulate import record_run

TUTORIAL = Path(__file__).resolve().parents[1] / "examples/kernels/timing/matmul_tutorial.py"

BYTES_PER_INSTRUCTION = 400
"""Bound on the memory a recorded instruction keeps: the ``Instruction`` and its operand
tuples (about 280 bytes with the operands shared; 750 when every operand was its own object)."""


@pytest.fixture(scope="module")
def tutorial():
    return load_module(str(TUTORIAL))


def _kept(mod, M: int) -> tuple[int, int]:
    """(instructions, bytes still allocated) of a record of the tiled matmul, the cores gone."""
    lhs_t, rhs = mod.make_inputs(M=M, K=1024, N=1024, empty=True)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        res = record_run(mod.tiled, lhs_t, rhs, target="gen2")
        records = [c.record for c in res.cores]
        del res
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    return sum(map(len, records)), kept


def test_equal_operands_of_a_record_are_one_object(tutorial):
    lhs_t, rhs = tutorial.make_inputs(M=512, K=1024, N=1024, empty=True)
    res = record_run(tutorial.tiled, lhs_t, rhs, target="gen2")
    operands = [o for i in res.instructions for o in (*i.dst, *i.src)]
    assert len(operands) > 3 * len(set(operands))  # the stream repeats its operands
    assert len({id(o) for o in operands}) == len(set(operands))


def test_a_record_keeps_a_bounded_size_per_instruction(tutorial):
    _kept(tutorial, 128)  # warm caches (interned strings, code objects)
    n1, b1 = _kept(tutorial, 512)
    n2, b2 = _kept(tutorial, 1024)
    assert n2 == 2 * n1
    assert (b2 - b1) / (n2 - n1) < BYTES_PER_INSTRUCTION


def test_timing_only_profile_equals_the_functional_one():
    """``profile`` records without moving data unless asked; the stream is the same."""
    kw = {"M": 256, "K": 256, "N": 512}
    _, timing_only = profile_file(str(TUTORIAL), "tiled", "gen2", kwargs=kw)
    _, functional = profile_file(str(TUTORIAL), "tiled", "gen2", kwargs=kw, functional=True)
    assert timing_only == functional
    assert timing_only.schedule.instructions == functional.schedule.instructions
