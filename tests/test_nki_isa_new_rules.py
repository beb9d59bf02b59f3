"""Every named rule added with the issue-13 instructions has a failing kernel here whose error
names the rule, the offending values and the kernel's file:line (``test_core_rules`` counts
these cases in its every-rule-has-a-case check)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.collectives as ncc
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim.core import rules
from trnsim.errors import KernelError

HERE = "test_nki_isa_new_rules.py"
LINE: dict[str, int] = {}


def mark() -> None:
    """The failing call is on the caller's next line."""
    LINE["at"] = sys._getframe(1).f_lineno + 1


def sb(shape, dtype=nl.float32):
    return nl.ndarray(shape, dtype, buffer=nl.sbuf)


def k_arith_op0():
    mark()
    nisa.tensor_scalar_reduce(sb((8, 4)), sb((8, 4)), nl.bitwise_and, 1.0, nl.add)


def k_reduce_init():
    mark()
    nisa.tensor_scalar_reduce(sb((8, 4)), sb((8, 4)), nl.add, 1.0, nl.add, reduce_init=3.0)


def k_stream_shuffle():
    mark()
    nisa.nc_stream_shuffle(sb((32, 4)), sb((2, 4)), [0] * 31 + [7])


def k_match_replace8_shape():
    mark()
    nisa.nc_match_replace8(sb((8, 16)), sb((8, 16)), sb((8, 4)), 0.0)


def k_n_gather_shape():
    mark()
    nisa.nc_n_gather(sb((8, 5)), sb((8, 16)), sb((8, 6), nl.uint32))


def k_sequence_bounds_shape():
    mark()
    nisa.sequence_bounds(sb((1, 2, 8)), sb((1, 9)))


def k_nonzero_shape():
    mark()
    nisa.nonzero_with_count(sb((16, 8), nl.int32), sb((16, 8)))


def k_register_scalar():
    reg = nisa.register_alloc()
    mark()
    nisa.register_load(reg, sb((1, 2), nl.int32))


def k_collective():
    src = nl.ndarray((4, 8), nl.float32, buffer=nl.hbm)
    dst = nl.ndarray((4, 8), nl.float32, buffer=nl.hbm)
    mark()
    ncc.all_gather([src], [dst], ncc.ReplicaGroup([[0]]), collective_dim=1)


def k_collective_v():
    src = nl.ndarray((8,), nl.float32, buffer=nl.hbm)
    dst = nl.ndarray((8,), nl.float32, buffer=nl.hbm)
    meta = nl.ndarray((3, 2), nl.uint32, buffer=nl.hbm)
    mark()
    ncc.all_to_all_v([src], [dst], ncc.ReplicaGroup([[0]]), meta)


def k_topk_shape():
    mark()
    nisa.topk(sb((16, 8), nl.bfloat16), sb((16, 8), nl.uint32), sb((16, 2), nl.bfloat16), 40)


CASES = [
    ("arith-op0", k_arith_op0, "op0", ("op0='bitwise_and'",)),
    ("reduce-init", k_reduce_init, "reduce-init", ("reduce_init is given", "reset_reduce")),
    ("stream-shuffle", k_stream_shuffle, "stream-shuffle", ("partition 31", "src partition 7")),
    ("match-replace8-shape", k_match_replace8_shape, "shape", ("vals [8, 4]", "[8, 8]")),
    ("n-gather-shape", k_n_gather_shape, "shape", ("dst has 5", "indices 6")),
    ("sequence-bounds-shape", k_sequence_bounds_shape, "shape", ("2 x 9", "[1, 9]")),
    ("nonzero-shape", k_nonzero_shape, "shape", ("[16, 9]", "[16, 8]")),
    ("register-scalar", k_register_scalar, "register-scalar", ("[1, 2]", "int32")),
    ("topk-shape", k_topk_shape, "shape", ("[16, 2]", "n=40")),
    ("collective", k_collective, "collective", ("collective_dim=1 on HBM",)),
    ("collective-v", k_collective_v, "collective", ("[3, 2] in HBM must be [3, 1]",)),
]


@pytest.mark.parametrize(("rule_id", "kernel", "name", "values"), CASES)
def test_rule_names_rule_values_and_line(rule_id, kernel, name, values):
    with pytest.raises(KernelError) as info:
        nki.run(kernel, target="gen4")
    err = info.value
    assert err.rule == name, str(err)
    for v in values:
        assert v in str(err), (v, str(err))
    assert f"{HERE}:{LINE['at']}" in str(err), str(err)
    fired = [r for r in rules.RULES if (r.key or r.check.__name__) == rule_id]
    assert fired and fired[0].name == name


def test_reduce_without_an_accumulation_before_is_refused():
    def k():
        mark()
        nisa.tensor_scalar_reduce(
            sb((8, 4)), sb((8, 4)), nl.add, 1.0, nl.add, reduce_cmd=nisa.reduce_cmd.reduce
        )

    with pytest.raises(KernelError) as info:
        nki.run(k)
    assert info.value.rule == "reduce-cmd" and "holds none" in str(info.value)
    assert f"{HERE}:{LINE['at']}" in str(info.value)


def test_tensor_copy_refuses_what_is_not_a_dtype():
    def k():
        mark()
        nisa.tensor_copy(dst=sb((8, 4)), src=sb((8, 4)), dtype="float33")

    with pytest.raises(KernelError) as info:
        nki.run(k)
    assert info.value.rule == "dtype" and "float33" in str(info.value)
    assert f"{HERE}:{LINE['at']}" in str(info.value)


def test_match_replace8_without_a_match_refuses_to_invent_dst_idx():
    def k(x):
        d = sb((1, 8))
        nisa.dma_copy(d, x)
        v = sb((1, 8))
        nisa.memset(v, 99.0)
        mark()
        nisa.nc_match_replace8(d, d, v, 0.0, dst_idx=sb((1, 8), nl.uint32))

    with pytest.raises(KernelError) as info:
        nki.run(k, np.zeros((1, 8), np.float32))
    assert info.value.rule == "not-implemented" and "vals[0, 7] = 99.0" in str(info.value)
    assert f"{HERE}:{LINE['at']}" in str(info.value)


def test_nonzero_with_count_needs_gen3():
    def k():
        mark()
        nisa.nonzero_with_count(sb((16, 9), nl.int32), sb((16, 8)))

    with pytest.raises(KernelError) as info:
        nki.run(k, target="gen2")
    assert info.value.rule == "generation"


def test_nc_n_gather_index_out_of_range_is_refused_not_clamped():
    def k(x, i):
        d, ind = sb((4, 8)), sb((4, 3), nl.uint32)
        nisa.dma_copy(d, x)
        nisa.dma_copy(ind, i)
        mark()
        nisa.nc_n_gather(sb((4, 3)), d, ind)

    idx = np.zeros((4, 3), np.uint32)
    idx[2, 1] = 8
    with pytest.raises(KernelError) as info:
        nki.run(k, np.ones((4, 8), np.float32), idx)
    assert info.value.rule == "n-gather-index"
    assert "indices[2, 1] = 8 outside [0, 8)" in str(info.value)
    assert f"{HERE}:{LINE['at']}" in str(info.value)


def test_unary_op0_with_an_operand_is_refused_not_ignored():
    def k():
        mark()
        nisa.tensor_scalar_reduce(sb((8, 4)), sb((8, 4)), nl.abs, 2.0, nl.add)

    with pytest.raises(KernelError) as info:
        nki.run(k)
    assert info.value.rule == "op0" and "got 2.0" in str(info.value)
    assert f"{HERE}:{LINE['at']}" in str(info.value)
