"""The one instruction record: what the checker and the executors receive (``LiveInstruction``)
is the record the core appends (``Instruction``), plus its live views; the record itself holds
no live storage."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

from trnsim.core import machine, rules
from trnsim.core.instruction import Instruction
from trnsim.core.isa import Op
from trnsim.core.live import LiveInstruction, live_from
from trnsim.core.machine import NeuronCore
from trnsim.core.memory import View


def test_executor_receives_the_recorded_instruction_with_its_views(monkeypatch):
    seen: list[LiveInstruction] = []
    monkeypatch.setitem(
        machine.EXECUTORS,
        Op.TENSOR_COPY,
        _wrap(machine.EXECUTORS[Op.TENSOR_COPY], seen),
    )
    nc = NeuronCore("gen4")
    a = nc.allocate((128, 8), np.float32, "sbuf")
    b = nc.allocate((128, 8), np.float32, "sbuf")
    nc.write(b, np.arange(128 * 8, dtype=np.float32).reshape(128, 8))
    dst = View(a.storage, (128, 4), (1, 1), 2)  # a[:, 2:6]
    src = View(b.storage, (128, 4), (1, 1), 0)  # b[:, 0:4]
    nc.execute(Op.TENSOR_COPY, {"dst": dst}, {"src": src})
    (ins,) = seen
    rec = nc.record[-1]
    assert type(rec) is Instruction  # the record holds no live views
    assert isinstance(ins, Instruction) and ins == rec and hash(ins) == hash(rec)
    assert ins.dst == (ins.dst_views["dst"].operand("dst"),)
    assert ins.src == (ins.src_views["src"].operand("src"),)
    assert ins.src[0].pattern == ((1, 4),) and ins.dst[0].offset == 2 * 4
    np.testing.assert_array_equal(nc.read(a)[:, 2:6], nc.read(b)[:, 0:4])


def test_checker_receives_the_same_record(monkeypatch):
    seen: list[LiveInstruction] = []
    original = rules.check_rules
    monkeypatch.setattr(rules, "check_rules", lambda ins: (seen.append(ins), original(ins))[1])
    nc = NeuronCore("gen4", functional=False)
    a = nc.allocate((128, 8), np.float32, "sbuf")
    nc.execute(Op.TENSOR_COPY, {"dst": a}, {"src": a})
    assert len(seen) == 1 and seen[0] == nc.record[-1]
    # no engine given: the compiler places it (the timing model's choice, isa.AUTO_ENGINE_ATTR)
    assert seen[0].args == {"auto_engine": True} and seen[0].on_chip()[0][0] == "dst"


def test_a_live_instruction_copies_and_pickles_as_the_record():
    nc = NeuronCore("gen4", functional=False)
    a = nc.allocate((128, 8), np.float32, "sbuf")
    nc.execute(Op.TENSOR_COPY, {"dst": a}, {"src": a})
    rec = nc.record[-1]
    ins = live_from(tuple(rec), {"dst": a}, {"src": a}, {}, nc.spec)
    for out in (pickle.loads(pickle.dumps(ins)), copy.deepcopy(ins), copy.copy(ins)):
        assert type(out) is Instruction and out == rec


def _wrap(inner, seen):
    def run(nc, ins):
        seen.append(ins)
        return inner(nc, ins)

    return run


@pytest.mark.parametrize("functional", [True, False])
def test_record_is_plain_instructions(functional):
    nc = NeuronCore("gen4", functional=functional)
    a = nc.allocate((128, 8), np.float32, "sbuf")
    for _ in range(3):
        nc.execute(Op.TENSOR_COPY, {"dst": a}, {"src": a})
    assert [type(r) for r in nc.record] == [Instruction] * 3
