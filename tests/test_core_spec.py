"""The instruction specification registry (trnsim.core.spec): complete, and the one source."""

from __future__ import annotations

import pytest

import trnsim.nki.collectives as collectives
import trnsim.nki.isa as nisa
from trnsim.core import costs, indirect, isa, machine, rules, spec
from trnsim.core.isa import Op


def test_registry_refuses_a_second_entry_of_the_same_name():
    with pytest.raises(ValueError, match="specified twice"):
        spec.register(spec.Instr("nc_matmul", spec.Engine.TENSOR, ()))


def test_registry_refuses_repeated_role_names():
    with pytest.raises(ValueError, match="operand names given twice"):
        spec.register(spec.Instr("x_twice", spec.Engine.VECTOR, (spec.out(), spec.out())))
    assert "x_twice" not in spec.SPECS


def test_op_is_the_registry():
    assert [o.value for o in Op] == list(spec.SPECS)


@pytest.mark.parametrize("op", list(Op), ids=str)
def test_every_instruction_is_complete(op):
    entry = spec.SPECS[op]
    # an executor (the interpreter), a cost rule, a front-end function
    assert op in machine.EXECUTORS and "not_implemented" not in machine.EXECUTORS[op].__qualname__
    assert entry.cost, op
    for name in entry.cost:
        assert name == costs.DMA_COST or any(r.name == name for r in costs.RULES), name
    if entry.engine is not spec.Engine.DMA:
        for eng in entry.choices:
            costs.rule_for(_instr(op, eng))  # raises if no cost rule covers it
    front = nisa if hasattr(nisa, op.value) else collectives  # nki.collectives' calls
    assert callable(getattr(front, op.value)), op
    # semantics: a function of trnsim.core.semantics, or a documented data movement
    assert entry.semantics is not None or entry.doc, op
    # every op-specific rule it names exists
    keys = {r.key for r in rules.RULES if r.key}
    assert set(entry.rules) <= keys, set(entry.rules) - keys


def test_every_op_specific_rule_is_used():
    used = {k for e in spec.SPECS.values() for k in e.rules}
    assert {r.key for r in rules.RULES if r.key} <= used


def test_derived_tables_come_from_the_entries():
    assert {o for o in Op if spec.SPECS[o].in_order} == isa.IN_ORDER
    assert Op.RAND2 in isa.IN_ORDER and Op.SELECT_REDUCE in isa.IN_ORDER
    assert indirect.TI_ROLES[Op.NC_MATMUL] == {"dst", "stationary", "moving"}
    assert rules.DTYPES[(Op.NC_MATMUL_MX, spec.STATIONARY)] == spec.MX_DATA
    assert rules.SAME_SHAPE_ROLES[Op.TENSOR_TENSOR] == ("data1", "data2")
    assert isa.MIN_GENERATION[Op.NC_MATMUL_MX] == 4
    assert costs.rule_for(_instr(Op.NC_TRANSPOSE, spec.Engine.TENSOR)).name == "pe_transpose"
    assert costs.rule_for(_instr(Op.NC_TRANSPOSE, spec.Engine.VECTOR)).name == "stream"
    assert costs.rule_for(_instr(Op.TENSOR_TENSOR, spec.Engine.GPSIMD)).name == "gpsimd"
    # tensor_copy's own rule on every engine (its dynamic-offset cost; else stream / gpsimd)
    assert costs.rule_for(_instr(Op.TENSOR_COPY, spec.Engine.GPSIMD)).name == "tensor_copy"


def test_unmodelled_attributes_have_defaults():
    for entry in spec.SPECS.values():
        for a in entry.attrs:
            if not a.modelled:
                assert a.allowed is None or a.default in a.allowed, (entry.name, a.name)


def _instr(op, engine):
    from trnsim.core.instruction import Instruction, Operand

    o = Operand("dst", "sbuf", "float32", 4, 0, 0, 0, (1, 128), ((1, 64),))
    return Instruction(op, engine, (o,), (o._replace(role="src"),), (), "k.py", 1)


def test_front_end_built_from_the_spec_has_the_nki_signature_and_refuses_bad_calls():
    import inspect

    import trnsim.nki as nki
    import trnsim.nki.language as nl
    from trnsim.errors import KernelError

    assert list(inspect.signature(nisa.quantize_mx).parameters) == [
        "dst",
        "src",
        "dst_scale",
        "name",
    ]
    assert list(inspect.signature(nisa.tensor_partition_reduce).parameters)[:3] == [
        "dst",
        "op",
        "data",
    ]
    assert inspect.signature(nisa.tensor_copy).parameters["engine"].default == nisa.engine.unknown

    def k():
        nisa.max8(nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf))

    with pytest.raises(KernelError) as info:
        nki.run(k)
    assert info.value.rule == "arguments" and "nki.isa.max8" in str(info.value)
    assert "test_core_spec.py" in str(info.value)
