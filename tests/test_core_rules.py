"""Every named rule of the checker (``trnsim.core.rules.RULES``) has a failing kernel here whose
error names the rule, the offending values and the kernel's file:line; and every registered
rule is in the table (a rule added without a case fails ``test_every_rule_has_a_case``)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.collectives as ncc
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim.core import argrules, indirect, machine, rules, semantics
from trnsim.core.isa import Engine, Op
from trnsim.core.live import live
from trnsim.core.memory import View
from trnsim.core.options import CoreOptions
from trnsim.errors import KernelError
from trnsim.nki.context import current

BF16 = ml_dtypes.bfloat16
HERE = "test_core_rules.py"
LINE: dict[str, int] = {}


def mark() -> None:
    """The failing call is on the caller's next line."""
    LINE["at"] = sys._getframe(1).f_lineno + 1


def sb(shape, dtype=nl.float32):
    return nl.ndarray(shape, dtype, buffer=nl.sbuf)


def ps(shape, dtype=nl.float32):
    return nl.ndarray(shape, dtype, buffer=nl.psum)


# ---- one failing kernel per rule ---------------------------------------------------------------


def k_generation():
    mark()
    nisa.exponential(sb((128, 8)), sb((128, 8)))


def k_unmodelled():
    mark()
    nisa.exponential(sb((128, 8)), sb((128, 8)), reduce_cmd=nisa.reduce_cmd.reset)


def k_indirect_operand(a):
    idx = sb((128, 1), nl.uint32)
    nisa.memset(idx, 0)
    view = a.ap([[64, 128], [1, 64]], vector_offset=idx, indirect_dim=0)
    mark()
    nisa.tensor_copy(sb((128, 64)), view)


def k_memory():
    mark()
    nisa.nc_matmul(sb((128, 128)), sb((128, 128), BF16), sb((128, 128), BF16))


def k_psum_inputs():
    mark()
    nisa.tensor_tensor(sb((128, 8)), ps((128, 8)), ps((128, 8)), nl.add)


def k_partition_dim():
    # a view over more partitions than the core has is also out of bounds (checked first), so
    # the rule is a safety net: run it alone on such a view
    nc = current().core
    t = nc.allocate((128, 8), np.float32, "sbuf")
    wide = View(t.storage, (256, 4), (1, 1), 0, 0, t.fmt)
    mark()
    rules.check_rules(
        live(Op.TENSOR_COPY, Engine.VECTOR, {"dst": wide}, {"src": wide}, {}, nc.spec)
    )


def k_contiguous():
    t = sb((128, 8))
    mark()
    nisa.tensor_copy(sb((64, 8)), t[::2, :])


def k_start_partition():
    t = sb((128, 8))
    mark()
    nisa.tensor_copy(t[16:48, :], t[64:96, :])


def k_dtype():
    mark()
    nisa.tensor_copy_predicated(sb((128, 8)), sb((128, 8)), sb((128, 8)))


def k_matmul_dtype():
    mark()
    nisa.nc_matmul(ps((128, 128)), sb((128, 128), nl.int8), sb((128, 128), nl.int8))


def k_matmul_dst_dtype():
    mark()
    nisa.nc_matmul(ps((128, 128), nl.int32), sb((128, 128), BF16), sb((128, 128), BF16))


def k_matmul_shape():
    mark()
    nisa.nc_matmul(ps((128, 128)), sb((128, 128), BF16), sb((64, 128), BF16))


def k_stationary_fmax():
    st, mv = sb((128, 128), BF16), sb((128, 128), BF16)
    mark()
    nisa.nc_matmul(ps((128, 128)), st, mv, tile_position=(0, 0), tile_size=(128, 64))


def k_moving_fmax():
    mark()
    nisa.nc_matmul(ps((128, 1024)), sb((128, 128), BF16), sb((128, 1024), BF16))


def k_tile_position():
    mark()
    nisa.nc_matmul(ps((128, 128)), sb((128, 128), BF16), sb((128, 128), BF16), tile_position=(0, 0))


def k_matmul_mx_shape():
    x4 = nl.float8_e4m3fn_x4
    mark()
    nisa.nc_matmul_mx(
        ps((8, 8)), sb((20, 8), x4), sb((20, 8), x4), sb((20, 2), nl.uint8), sb((20, 2), nl.uint8)
    )


def k_transpose_shape():
    mark()
    nisa.nc_transpose(ps((64, 64)), sb((64, 32)), engine=nisa.tensor_engine)


def k_same_shape():
    mark()
    nisa.tensor_tensor(sb((128, 8)), sb((128, 8)), sb((128, 4)), nl.add)


def k_column():
    mark()
    nisa.tensor_scalar(sb((128, 8)), sb((128, 8)), nl.add, sb((128, 2)))


def k_one_value():
    mark()
    nisa.set_rng_seed(sb((1, 2), nl.uint32))


def k_quantize_mx_shape():
    mark()
    nisa.quantize_mx(sb((32, 2), nl.float8_e4m3fn_x4), sb((32, 6), BF16), sb((4, 2), nl.uint8))


def k_bn_stats_shape():
    mark()
    nisa.bn_stats(sb((128, 5)), sb((128, 64)))


def k_dma_shape(a):
    mark()
    nisa.dma_copy(sb((128, 32)), a)


def k_indirect(a):
    idx = sb((128, 1), nl.uint32)
    nisa.memset(idx, 0)
    view = a.ap([[64, 128], [1, 64]], vector_offset=idx, indirect_dim=0)
    mark()
    current().core.execute(Op.DMA_COPY, {"dst": sb((128, 64))}, {"src": view}, {})


def k_dge_mode(a):
    mark()
    nisa.dma_copy(sb((128, 64)), a, dge_mode=nisa.dge_mode.hwdge)


def k_dma_dtype(a):
    mark()
    nisa.dma_copy(sb((128, 64), BF16), a, dge_mode=nisa.dge_mode.hwdge)


def k_rng_state_shape():
    mark()
    nisa.rand_get_state(sb((128, 12), nl.uint32))


def k_dropout_dtype():
    mark()
    nisa.dropout(sb((128, 8), BF16), sb((128, 8)), 0.5)


def k_vector_prng():
    mark()
    nisa.rng(sb((128, 8), nl.uint32), engine=nisa.gpsimd_engine)


def k_memset_value():
    mark()
    nisa.memset(sb((128, 8), nl.float8_e4m3fn_x4), 7)


def k_iota_shape():
    mark()
    nisa.iota(sb((128, 64), nl.int32), [[1, 32]])


def k_local_gather_shape():
    mark()
    nisa.local_gather(sb((128, 8)), sb((128, 8)), sb((128, 4), nl.uint16))


def k_rand2_range():
    mark()
    nisa.rand2(sb((128, 8)), 1.0, 0.5)


def k_sendrecv():
    t = ps((4, 4))
    mark()
    nisa.sendrecv(src=t, dst=t, send_to_rank=0, recv_from_rank=1, pipe_id=0)


def k_attribute():
    mark()
    nisa.nc_matmul(ps((128, 128)), sb((128, 128), BF16), sb((128, 128), BF16), perf_mode="fp8x4")


def _ti_index(p: int, k: int = 1):
    idx = sb((p, k), nl.uint32)
    nisa.iota(idx, [[0, k]], offset=0, channel_multiplier=1)
    return idx


def k_ti_operand():
    d = sb((16, 32))
    view = d.indirect(_ti_index(16), num_elem=16)
    mark()
    nisa.reciprocal(sb((16, 16)), view)


def k_ti_generation():
    d = sb((16, 32))
    view = d.indirect(_ti_index(16), num_elem=16)
    mark()
    nisa.tensor_copy(sb((16, 16)), view)


def k_ti_tiling():
    s = sb((32, 32), BF16)
    m = s.indirect(_ti_index(32), num_elem=32)
    mark()
    nisa.nc_matmul(ps((32, 32)), s, m, tile_position=(0, 0), tile_size=(32, 32))


def k_ti_dtype():
    s = sb((16, 32)).indirect(_ti_index(16), num_elem=8)
    mark()
    nisa.nc_matmul(ps((8, 8)), s, sb((16, 8)))


def k_ti_psum_scatter():
    p = ps((16, 32))
    mark()
    nisa.activation(p.indirect(_ti_index(16)), nl.exp, sb((16, 16)))


def k_ti_index():
    d = sb((16, 32))
    view = d.indirect(_ti_index(16), num_elem=17)
    mark()
    nisa.tensor_copy(sb((16, 17)), view)


def k_reduce_axis():
    mark()
    nisa.tensor_reduce(sb((128, 1)), nl.add, sb((128, 4, 8)), axis=1)


def k_range_select_fill():
    t, b = sb((128, 8)), sb((128, 1))
    mark()
    nisa.range_select(t, t, nl.greater_equal, nl.less, b, b, on_false_value=-1.0)


def k_engine():
    mark()
    nisa.tensor_tensor(sb((128, 8)), sb((128, 8)), sb((128, 8)), nl.add, engine=nisa.scalar_engine)


def k_max8_shape():
    mark()
    nisa.max8(sb((128, 8)), sb((128, 4)))


A = np.ones((128, 64), np.float32)

# (rule key or check function name, kernel, args, target, lnc, rule name, values in the message)
CASES = [
    ("_engine", k_engine, (), "gen4", 1, "engine", ("tensor_tensor", "scalar", "gpsimd, vector")),
    ("max8-shape", k_max8_shape, (), "gen4", 1, "shape", ("reads 4 elements", "between 8")),
    ("reduce-axis", k_reduce_axis, (), "gen4", 1, "reduce-axis", ("(1,)", "[128, 4, 8]")),
    ("range-select-fill", k_range_select_fill, (), "gen4", 1, "range-select-fill", ("-1.0",)),
    ("_ti_operand", k_ti_operand, (), "gen4", 1, "ti-operand", ("reciprocal", "data")),
    ("_ti_generation", k_ti_generation, (), "gen3", 1, "ti-generation", ("v4", "v3")),
    ("_ti_tiling", k_ti_tiling, (), "gen4", 1, "ti-tiling", ("tile_position=(0, 0)",)),
    ("_ti_dtype", k_ti_dtype, (), "gen4", 1, "ti-dtype", ("fp16/bf16/fp8", "float32")),
    ("_ti_psum_scatter", k_ti_psum_scatter, (), "gen4", 1, "ti-psum-scatter", ("Scalar",)),
    ("_ti_index", k_ti_index, (), "gen4", 1, "ti-index", ("num_elem 17", "num_elem <= 16")),
    ("_generation", k_generation, (), "gen3", 1, "generation", ("exponential", "v4", "v3")),
    ("_unmodelled", k_unmodelled, (), "gen4", 1, "not-implemented", ("reduce_cmd='reset'",)),
    ("_indirect_elsewhere", k_indirect_operand, (A,), "gen4", 1, "indirect-operand", ("src",)),
    ("_memory", k_memory, (), "gen4", 1, "memory", ("dst is in SBUF", "tensor engine")),
    ("psum-inputs", k_psum_inputs, (), "gen4", 1, "memory", ("both inputs are in PSUM",)),
    ("_partition_dim", k_partition_dim, (), "gen4", 1, "partition-dim", ("256", "128")),
    ("_contiguous", k_contiguous, (), "gen4", 1, "contiguous-partitions", ("stride 2",)),
    ("_start_partition", k_start_partition, (), "gen4", 1, "start-partition", ("16", "[0, 32")),
    ("_dtype", k_dtype, (), "gen4", 1, "dtype", ("predicate dtype float32",)),
    ("matmul-dtype", k_matmul_dtype, (), "gen4", 1, "dtype", ("stationary dtype int8",)),
    ("matmul-dst-dtype", k_matmul_dst_dtype, (), "gen4", 1, "dtype", ("dst dtype int32",)),
    ("matmul-shape", k_matmul_shape, (), "gen4", 1, "shape", ("stationary 128", "moving 64")),
    ("stationary-fmax", k_stationary_fmax, (), "gen4", 1, "stationary-fmax", ("128", "64")),
    ("moving-fmax", k_moving_fmax, (), "gen2", 1, "moving-fmax", ("1024", "512")),
    ("tile-position", k_tile_position, (), "gen4", 1, "tile-position", ("tile_size",)),
    ("matmul-mx-shape", k_matmul_mx_shape, (), "gen4", 1, "shape", ("stationary 20", "32")),
    ("transpose-shape", k_transpose_shape, (), "gen4", 1, "shape", ("[64, 64]", "[64, 32]")),
    ("_same_shape", k_same_shape, (), "gen4", 1, "shape", ("data2 shape [128, 4]",)),
    ("_vector_operands", k_column, (), "gen4", 1, "shape", ("operand0", "[128, 1]", "[128, 2]")),
    ("_one_value", k_one_value, (), "gen4", 1, "shape", ("src_seeds", "[1, 2]")),
    ("quantize-mx-shape", k_quantize_mx_shape, (), "gen4", 1, "shape", ("[32, 6]", "of 4")),
    ("bn-stats-shape", k_bn_stats_shape, (), "gen4", 1, "shape", ("[128, 6]", "[128, 5]")),
    ("dma-shape", k_dma_shape, (A,), "gen4", 1, "shape", ("8192", "4096")),
    ("indirect", k_indirect, (A,), "gen4", 1, "indirect", ("no index operand",)),
    ("dge-mode", k_dge_mode, (A,), "gen2", 1, "dge-mode", ("hwdge", "v3")),
    ("dma-dtype", k_dma_dtype, (A,), "gen4", 1, "dtype", ("float32", "bfloat16", "hwdge")),
    ("rng-state-shape", k_rng_state_shape, (), "gen4", 1, "shape", ("24 uint32", "[128, 12]")),
    ("dropout-dtype", k_dropout_dtype, (), "gen4", 1, "dtype", ("bfloat16", "float32")),
    ("vector-prng", k_vector_prng, (), "gen4", 1, "not-implemented", ("gpsimd",)),
    ("memset-value", k_memset_value, (), "gen4", 1, "memset-value", ("float8_e4m3fn_x4", "7")),
    ("iota-shape", k_iota_shape, (), "gen4", 1, "shape", ("4096", "8192")),
    ("local-gather-shape", k_local_gather_shape, (), "gen4", 1, "shape", ("8192", "1024")),
    ("rand2-range", k_rand2_range, (), "gen4", 1, "rand2-range", ("min 1.0", "max 0.5")),
    ("sendrecv", k_sendrecv, (), "gen4", 2, "sendrecv", ("src is in PSUM",)),
    ("_attribute_values", k_attribute, (), "gen4", 1, "attribute", ("perf_mode='fp8x4'",)),
]


def _id(r: rules.Rule) -> str:
    return r.key or r.check.__name__


def test_every_rule_has_a_case():
    from test_nki_isa_new_rules import CASES as NEW_CASES  # the issue-13 instructions' rules

    assert {_id(r) for r in rules.RULES} == {c[0] for c in CASES} | {c[0] for c in NEW_CASES}


@pytest.mark.parametrize(("rule_id", "kernel", "args", "target", "lnc", "name", "values"), CASES)
def test_rule_names_rule_values_and_line(rule_id, kernel, args, target, lnc, name, values):
    with pytest.raises(KernelError) as info:
        nki.run(kernel, *args, target=target, lnc=lnc)
    err = info.value
    assert err.rule == name, str(err)
    for v in values:
        assert v in str(err), (v, str(err))
    assert f"{HERE}:{LINE.pop('def', None) or LINE['at']}" in str(err), str(err)
    # the rule that fired is the one this case is for
    fired = [r for r in rules.RULES if _id(r) == rule_id]
    assert fired and fired[0].name == name


# ---- rules checked before (or after) the checker: trnsim.core.argrules ---------------------------
# One failing kernel per check site (``ARG_RULES`` key); the error carries the key.


def _idx(p: int = 128, value: int = 0, dtype=nl.uint32):
    idx = sb((p, 1), dtype)
    nisa.memset(idx, value)
    return idx


def _rows(a, idx):
    """The vector_offset gather view of the (128, 64) HBM tensor ``a``."""
    return a.ap([[64, 128], [1, 64]], vector_offset=idx, indirect_dim=0)


def a_engine_arg():
    mark()
    nisa.tensor_tensor(sb((128, 8)), sb((128, 8)), sb((128, 8)), nl.add, engine="vector")


def a_operator():
    mark()
    nisa.tensor_tensor(sb((128, 8)), sb((128, 8)), sb((128, 8)), 3)


def a_operand_tensor():
    mark()
    nisa.tensor_copy(sb((128, 8)), [1.0])


def a_arguments():
    mark()
    nisa.reciprocal(sb((128, 8)))


def a_range_select_reduce_op():
    t, b = sb((128, 8)), sb((128, 1))
    mark()
    nisa.range_select(t, t, nl.greater_equal, nl.less, b, b, reduce_op=nl.add)


def a_select_reduce_op():
    t = sb((128, 8))
    mark()
    nisa.select_reduce(t, sb((128, 8), nl.uint8), t, 0.0, reduce_op=nl.add)


def a_select_reduce_cmd():
    t = sb((128, 8))
    mark()
    nisa.select_reduce(t, sb((128, 8), nl.uint8), t, 0.0, reduce_cmd="accumulate")


def a_dma_compute_scales(a):
    t = sb((128, 64))
    mark()
    nisa.dma_compute(t, [a, a], nl.add, scales=[1.0, 2.0])


def a_dma_compute_rmw(a):
    idx = sb((32, 1), nl.uint32)
    nisa.memset(idx, 0)
    t = sb((32, 64))
    mark()
    nisa.dma_compute(t, [a.ap([[64, 32], [1, 64]], vector_offset=idx, indirect_dim=0)], nl.add)


def a_dma_compute_static(a):
    t = sb((128, 64))
    mark()
    nisa.dma_compute(t, [a, a], nl.add, oob_mode=nisa.oob_mode.skip)


def a_dma_compute_duplicate(a):
    idx = sb((32, 1), nl.uint32)
    nisa.memset(idx, 3)  # every partition gathers row 3
    t = sb((32, 64))
    nisa.memset(t, 0.0)
    view = a.ap([[64, 32], [1, 64]], vector_offset=idx, indirect_dim=0)
    mark()
    nisa.dma_compute(t, [view, t], nl.add)


def a_front_end_missing():
    mark()
    nisa.tensor_copy_dynamic_src(sb((128, 8)), sb((128, 8)))


def a_core_barrier_lnc():
    mark()
    nisa.core_barrier()


def a_sendrecv_lnc():
    t = sb((4, 4))
    mark()
    nisa.sendrecv(src=t, dst=t, send_to_rank=1, recv_from_rank=1, pipe_id=0)


def a_sendrecv_rank():
    t = sb((4, 4))
    mark()
    nisa.sendrecv(src=t, dst=t, send_to_rank=5, recv_from_rank=0, pipe_id=0)


def a_sendrecv_pair():
    t = sb((4, 4))
    nisa.memset(t, 1.0)
    mark()
    nisa.sendrecv(src=t, dst=t, send_to_rank=0, recv_from_rank=1, pipe_id=0)


def a_ap_offsets(a):
    idx = _idx()
    mark()
    a.ap([[64, 128], [1, 64]], vector_offset=idx, scalar_offset=idx)


def a_ap_index_tensor(a):
    mark()
    a.ap([[64, 128], [1, 64]], vector_offset=[0] * 128)


def a_ap_index_memory(a):
    idx = ps((128, 1), nl.int32)
    mark()
    a.ap([[64, 128], [1, 64]], vector_offset=idx, indirect_dim=0)


def a_ap_index_dtype(a):
    idx = sb((128, 1), nl.float32)
    mark()
    a.ap([[64, 128], [1, 64]], vector_offset=idx, indirect_dim=0)


def a_ap_hbm():
    idx = _idx()
    mark()
    sb((128, 64)).ap([[64, 128], [1, 64]], vector_offset=idx, indirect_dim=0)


def a_ap_whole_tensor(a):
    idx = _idx(64)
    mark()
    a[0:64, :].ap([[64, 64], [1, 64]], vector_offset=idx)


def a_ap_vector_dim(a):
    idx = _idx()
    mark()
    a.ap([[64, 128], [1, 64]], vector_offset=idx, indirect_dim=1)


def a_ap_vector_index_shape(a):
    idx = _idx(64)
    mark()
    a.ap([[64, 128], [1, 64]], vector_offset=idx, indirect_dim=0)


def a_ap_scalar_dim(a):
    idx = _idx(1)
    mark()
    a.ap([[64, 1], [1, 64]], scalar_offset=idx, indirect_dim=5)


def a_ap_scalar_index_shape(a):
    idx = _idx()
    mark()
    a.ap([[64, 1], [1, 64]], scalar_offset=idx)


def a_ap_view_method(a):
    view = _rows(a, _idx())
    mark()
    view.reshape((64, 128))


def a_ap_no_address(a):
    view = _rows(a, _idx())
    mark()
    view.array()  # a safety net: the checker's indirect-operand rule refuses such operands first


def a_dma_both_indirect(a):
    src, dst = _rows(a, _idx()), _rows(a, _idx())
    mark()
    nisa.dma_copy(dst=dst, src=src)


def a_dma_oob(a):
    view = _rows(a, _idx(value=200))
    mark()
    nisa.dma_copy(dst=sb((128, 64)), src=view)


def _dyn(t, idx):
    """An on-chip dynamic-offset view: column idx of each partition of t."""
    return t.ap([[t.shape[1], t.shape[0]], [1, 1]], scalar_offset=idx, indirect_dim=1)


def a_ap_dynamic_dim(a):
    t, idx = sb((128, 64)), _idx(p=1)
    mark()
    t.ap([[64, 1], [1, 64]], scalar_offset=idx, indirect_dim=0)


def a_dynamic_both(a):
    t, idx = sb((128, 64)), _idx(p=1)
    mark()
    nisa.tensor_copy(_dyn(t, idx), _dyn(t, idx))


def a_dynamic_oob(a):
    t, idx = sb((128, 64)), _idx(p=1, value=64)
    mark()
    nisa.tensor_copy(sb((128, 1)), _dyn(t, idx))


def a_depends_on(a):
    t = sb((128, 64))
    first = nisa.memset(t, 0.0)
    second = nisa.memset(t, 1.0)
    mark()
    first.depends_on(second)


def a_ti_nested(a):
    view = _rows(a, _idx())
    mark()
    indirect.tensor_view(view, _idx())  # a safety net: an indirect view refuses .indirect()


def a_ti_on_chip(a):
    idx = _idx()
    mark()
    a.indirect(idx)


def a_ti_free_dim():
    t = sb((128,))
    idx = _idx()
    mark()
    t.indirect(idx)


def a_ti_view_method():
    view = sb((16, 32)).indirect(_ti_index(16))
    mark()
    view[:, 0:2]


def a_ti_index_tensor():
    t = sb((16, 32))
    mark()
    t.indirect([[0]] * 16)


def a_ti_index_memory():
    idx = ps((16, 1), nl.int32)
    mark()
    sb((16, 32)).indirect(idx)


def a_ti_index_dtype():
    idx = sb((16, 1), nl.float32)
    mark()
    sb((16, 32)).indirect(idx)


def a_ti_index_shape():
    idx = _ti_index(8)
    mark()
    sb((16, 32)).indirect(idx)


def a_ti_index_start():
    idx = sb((32, 1), nl.uint32)[16:32, :]
    mark()
    sb((16, 32)).indirect(idx)


def a_ti_num_elem():
    idx = _ti_index(16)
    mark()
    sb((16, 32)).indirect(idx, num_elem=0)


def a_ti_no_address():
    view = sb((16, 32)).indirect(_ti_index(16))
    mark()
    view.array()  # a safety net: the checker's ti-operand rule refuses such operands first


def a_ti_oob():
    view = sb((16, 32)).indirect(_idx(16, 40), num_elem=1)
    mark()
    nisa.tensor_copy(sb((16, 1)), view)


def a_select_reduce_continue():
    t = sb((8, 4))
    mark()
    nisa.select_reduce(
        t, sb((8, 4), nl.uint8), t, 0.0, reduce_res=sb((8, 1)), reduce_cmd=nisa.reduce_cmd.reduce
    )


def a_instruction_budget():
    t = sb((8, 4))
    nisa.memset(t, 0.0)
    mark()
    nisa.memset(t, 1.0)


def a_executor_missing():
    run = machine._not_implemented(Op.IOTA)  # a safety net: every spec entry has an executor
    mark()
    run(current().core, None)


def a_launch_grid():
    mark()
    nki.jit(a_rounding)[1, 2]


def a_launch_lnc():
    mark()
    nki.jit(a_rounding)[4]


def a_outside_kernel():
    mark()
    nl.ndarray((8, 4), nl.float32, buffer=nl.sbuf)


def a_tensor_copy_dtype():
    t = sb((8, 4))
    mark()
    nisa.tensor_copy(t, t, dtype="no-such-dtype")


def a_register_operand():
    mark()
    nisa.register_move(3, 4)


def a_register_uninitialized():
    reg = nisa.register_alloc()
    mark()
    nisa.register_store(sb((1, 1), nl.int32), reg)


def a_register_32bit():
    mark()
    nisa.register_alloc(2**33)


def a_register_store_range():
    reg = nisa.register_alloc(300)
    mark()
    nisa.register_store(sb((1, 1), nl.int8), reg)


def a_register_load_timing_only():
    t = sb((1, 1), nl.int32)
    nisa.memset(t, 1)
    reg = nisa.register_alloc()
    mark()
    nisa.register_load(reg, t)


def a_rounding():
    pass  # the core refuses the rounding mode before the kernel runs (the caller's line)


# (the output rules are checked once the kernel has returned: at the kernel's def line)
def a_output_not_hbm():
    return sb((8, 4))


def a_output_unwritten():
    out = nl.ndarray((8, 4), nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(out[0:4, :], sb((4, 4)))
    return out


def a_shape_dim():
    mark()
    nl.ndarray((128, 64.5), nl.float32, buffer=nl.sbuf)


# (key, kernel, args, lnc, run keywords, rule name, values in the message)
ARG_CASES = [
    ("engine-arg", a_engine_arg, (), 1, {}, "engine", ("'vector'",)),
    ("operator", a_operator, (), 1, {}, "operator", ("3 is not",)),
    ("operand-tensor", a_operand_tensor, (), 1, {}, "operand", ("tensor_copy src", "list")),
    ("arguments", a_arguments, (), 1, {}, "arguments", ("nki.isa.reciprocal", "data")),
    ("range-select-reduce-op", a_range_select_reduce_op, (), 1, {}, "reduce-op", ("add",)),
    ("select-reduce-op", a_select_reduce_op, (), 1, {}, "reduce-op", ("select_reduce", "add")),
    ("select-reduce-cmd", a_select_reduce_cmd, (), 1, {}, "reduce-cmd", ("accumulate",)),
    ("dma-compute-scales", a_dma_compute_scales, (A,), 1, {}, "not-implemented", ("scales=",)),
    ("dma-compute-rmw", a_dma_compute_rmw, (A,), 1, {}, "dma-compute-rmw", ("exactly 2", "got 1")),
    (
        "dma-compute-static",
        a_dma_compute_static,
        (A,),
        1,
        {},
        "not-implemented",
        ("oob_mode='skip'", "vector_offset"),
    ),
    (
        "dma-compute-duplicate",
        a_dma_compute_duplicate,
        (A,),
        1,
        {},
        "dma-compute-rmw",
        ("index 3 appears 32 times",),
    ),
    (
        "front-end-missing",
        a_front_end_missing,
        (),
        1,
        {},
        "not-implemented",
        ("nki.isa.tensor_copy_dynamic_src",),
    ),
    ("core-barrier-lnc", a_core_barrier_lnc, (), 1, {}, "lnc", ("core_barrier", "LNC=2")),
    ("sendrecv-lnc", a_sendrecv_lnc, (), 1, {}, "lnc", ("sendrecv", "LNC=2")),
    ("sendrecv-rank", a_sendrecv_rank, (), 2, {}, "sendrecv", ("send_to_rank 5", "LNC=2")),
    ("sendrecv-pair", a_sendrecv_pair, (), 2, {}, "sendrecv", ("from core 1", "pipe 0")),
    ("ap-offsets", a_ap_offsets, (A,), 1, {}, "indirect", ("mutually exclusive",)),
    ("ap-index-tensor", a_ap_index_tensor, (A,), 1, {}, "indirect", ("got list",)),
    ("ap-index-memory", a_ap_index_memory, (A,), 1, {}, "indirect", ("in PSUM",)),
    ("ap-index-dtype", a_ap_index_dtype, (A,), 1, {}, "index-dtype", ("float32", "uint32")),
    ("ap-hbm", a_ap_hbm, (), 1, {}, "indirect", ("SBUF tensor", "must be in HBM")),
    ("ap-whole-tensor", a_ap_whole_tensor, (A,), 1, {}, "indirect", ("[64, 64]",)),
    ("ap-vector-dim", a_ap_vector_dim, (A,), 1, {}, "indirect", ("got 1",)),
    ("ap-vector-index-shape", a_ap_vector_index_shape, (A,), 1, {}, "indirect", ("[64, 1]",)),
    ("ap-scalar-dim", a_ap_scalar_dim, (A,), 1, {}, "indirect", ("indirect_dim 5",)),
    ("ap-scalar-index-shape", a_ap_scalar_index_shape, (A,), 1, {}, "indirect", ("[128, 1]",)),
    ("ap-view-method", a_ap_view_method, (A,), 1, {}, "indirect-view", ("reshape()",)),
    ("ap-no-address", a_ap_no_address, (A,), 1, {}, "indirect-operand", ("no static address",)),
    ("dma-both-indirect", a_dma_both_indirect, (A,), 1, {}, "indirect", ("both src and dst",)),
    ("dma-oob", a_dma_oob, (A,), 1, {}, "oob", ("index 200", "0..127")),
    ("ap-dynamic-dim", a_ap_dynamic_dim, (A,), 1, {}, "indirect", ("indirect_dim 0",)),
    ("dynamic-both", a_dynamic_both, (A,), 1, {}, "indirect", ("both src and dst",)),
    ("dynamic-oob", a_dynamic_oob, (A,), 1, {}, "oob", ("offset 64", "0..63")),
    ("depends-on", a_depends_on, (A,), 1, {}, "depends-on", ("instruction 2",)),
    ("ti-nested", a_ti_nested, (A,), 1, {}, "ti-view", ("of an indirect view",)),
    ("ti-on-chip", a_ti_on_chip, (A,), 1, {}, "ti-view", ("HBM tensor [128, 64]",)),
    ("ti-free-dim", a_ti_free_dim, (), 1, {}, "ti-view", ("[128] has none",)),
    ("ti-view-method", a_ti_view_method, (), 1, {}, "ti-view", ("__getitem__()",)),
    ("ti-index-tensor", a_ti_index_tensor, (), 1, {}, "ti-index", ("got list",)),
    ("ti-index-memory", a_ti_index_memory, (), 1, {}, "ti-index", ("in PSUM",)),
    ("ti-index-dtype", a_ti_index_dtype, (), 1, {}, "ti-index", ("dtype float32",)),
    ("ti-index-shape", a_ti_index_shape, (), 1, {}, "ti-index", ("[8, 1]", "P == 16")),
    ("ti-index-start", a_ti_index_start, (), 1, {}, "ti-index", ("partition 16",)),
    ("ti-num-elem", a_ti_num_elem, (), 1, {}, "ti-index", ("got 0",)),
    ("ti-no-address", a_ti_no_address, (), 1, {}, "ti-operand", ("no static address",)),
    ("ti-oob", a_ti_oob, (), 1, {}, "ti-oob", ("offset 40", "0..31")),
    ("select-reduce-continue", a_select_reduce_continue, (), 1, {}, "reduce-cmd", ("of 8",)),
    (
        "instruction-budget",
        a_instruction_budget,
        (),
        1,
        {"options": CoreOptions(max_instructions=1)},
        "instruction-budget",
        ("instruction 2", "budget is 1"),
    ),
    ("executor-missing", a_executor_missing, (), 1, {}, "not-implemented", ("iota is not",)),
    ("launch-grid", a_launch_grid, (), 1, {}, "lnc", ("(1, 2)",)),
    ("launch-lnc", a_launch_lnc, (), 1, {}, "lnc", ("got 4",)),
    ("argument-dtype", a_rounding, (np.zeros(2, np.complex64),), 1, {}, "dtype", ("complex64",)),
    ("output-not-hbm", a_output_not_hbm, (), 1, {"at_def": True}, "output-not-hbm", ("SBUF",)),
    (
        "output-unwritten",
        a_output_unwritten,
        (),
        1,
        {"at_def": True},
        "output-unwritten",
        ("16 of 32 elements never written", "first at [4, 0]"),
    ),
    ("shape-dim", a_shape_dim, (), 1, {}, "shape", ("64.5",)),
    ("outside-kernel", a_outside_kernel, (), 1, {"outside": True}, "outside-kernel", ("nki.",)),
    ("rounding", a_rounding, (), 1, {"rounding": "nearest"}, "rounding", ("'nearest'",)),
    ("tensor-copy-dtype", a_tensor_copy_dtype, (), 1, {}, "dtype", ("'no-such-dtype'",)),
    ("register-operand", a_register_operand, (), 1, {}, "operand", ("got 3",)),
    (
        "register-uninitialized",
        a_register_uninitialized,
        (),
        1,
        {},
        "register-uninitialized",
        ("before any register_load",),
    ),
    ("register-32bit", a_register_32bit, (), 1, {}, "register-value", (str(2**33),)),
    ("register-store-range", a_register_store_range, (), 1, {}, "register-value", ("300",)),
    (
        "register-load-timing-only",
        a_register_load_timing_only,
        (),
        1,
        {"functional": False},
        "not-implemented",
        ("timing-only",),
    ),
]


# ---- memory: allocations and views (trnsim.core.memory) ------------------------------------------


def m_partition_dim_alloc():
    mark()
    nl.ndarray((256, 4), nl.float32, buffer=nl.sbuf)


def m_sbuf_capacity():
    mark()
    nl.ndarray((128, 300 * 1024), nl.uint8, buffer=nl.sbuf)


def m_psum_capacity():
    mark()
    nl.ndarray((128, 5000), nl.float32, buffer=nl.psum)


def m_psum_bank_alignment():
    mark()
    nl.ndarray((128, 16), nl.float32, buffer=nl.psum, address=(0, 1024))


def m_sbuf_alignment():
    mark()
    nl.ndarray((128, 16), nl.float32, buffer=nl.sbuf, address=(0, 2))


def m_psum_alignment():
    psum = current().core.psum
    mark()
    psum.allocate(128, 64, align=4096, address=(0, 2048))  # a safety net: NKI aligns to banks


def m_partition_dim_address():
    mark()
    nl.ndarray((64, 4), nl.float32, buffer=nl.sbuf, address=(100, 0))


def m_sbuf_capacity_address():
    mark()
    nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf, address=(0, 256 * 1024 - 128))


def m_psum_capacity_address():
    mark()
    nl.ndarray((128, 1024), nl.float32, buffer=nl.psum, address=(0, 14336))


def _no_room(mem, shape, dtype, buffer):
    """A safety net: evicting the least recently used tensors always makes room (each new
    tensor fits an empty memory), so stub the eviction out to reach the refusal behind it."""
    mem._reuse_least_recent = lambda *a: (None, [])
    first = nl.ndarray(shape, dtype, buffer=buffer)  # live while referenced
    mark()
    nl.ndarray(shape, dtype, buffer=buffer)
    return first


def m_sbuf_capacity_full():
    return _no_room(current().core.sbuf, (128, 200 * 1024), nl.uint8, nl.sbuf)


def m_psum_capacity_full():
    return _no_room(current().core.psum, (128, 3000), nl.float32, nl.psum)


def m_hbm_capacity():
    mark()
    nl.ndarray((2**40,), nl.float32, buffer=nl.shared_hbm)


def m_overlap():
    a = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf, address=(0, 0), name="a")
    nisa.memset(a, 1.0)
    b = nl.ndarray((64, 64), nl.float32, buffer=nl.sbuf, address=(0, 128), name="b")
    nisa.memset(b, 2.0)
    mark()
    nisa.memset(a, 3.0)


def m_view_partitions_oob():
    t = sb((128, 4))
    mark()
    t.ap([[4, 200], [1, 4]])


def m_view_oob(a):
    mark()
    a.ap([[64, 128], [1, 128]])


# ---- tensor views (trnsim.nki.tensor) ------------------------------------------------------------


def t_index_count():
    t = sb((128, 4))
    mark()
    t[0, 0, 0]


def t_index_step():
    t = sb((128, 4))
    mark()
    t[:, ::-1]


def t_slice_oob():
    t = sb((128, 64))
    mark()
    t[:, 60:70]


def t_index_oob():
    t = sb((128, 64))
    mark()
    t[:, 70]


def t_index_type():
    t = sb((128, 64))
    mark()
    t[:, "a"]


def t_reshape_size():
    t = sb((128, 4))
    mark()
    t.reshape((128, 5))


def t_reshape_partition():
    t = sb((128, 4))
    mark()
    t.reshape((64, 8))


def t_reshape_contiguous():
    t = sb((128, 4, 8)).permute(0, 2, 1)
    mark()
    t.reshape((128, 32))


def t_permute():
    t = sb((128, 4))
    mark()
    t.permute(1, 0)


def t_broadcast():
    t = sb((128, 4))
    mark()
    t.broadcast(1, 8)


def t_ap_const_dim(a):
    mark()
    a.ap([[64, 1], [1, 64]], scalar_offset=3, indirect_dim=5)


def t_ap_dtype():
    t = sb((128, 3), nl.uint8)
    mark()
    t.ap([[3, 128], [1, 3]], dtype=nl.float32)


def t_ap_partition_pair():
    t = sb((128, 4))
    mark()
    t.ap([])


def t_ap_partition_step():
    t = sb((128, 4))
    mark()
    t.ap([[8, 128], [1, 4]])


def t_ap_negative_offset():
    t = sb((128, 4))
    mark()
    t.ap([[4, 128], [1, 4]], offset=-1)


def t_view_dtype():
    t = sb((128, 3), nl.uint8)
    mark()
    t.view(nl.float32)


def t_view_dtype_offset():
    t = sb((128, 8), nl.uint8)[:, 1:5]
    mark()
    t.view(nl.float32)


# ---- nki.language (trnsim.nki.language) ----------------------------------------------------------


def l_buffer():
    mark()
    nl.ndarray((4, 4), nl.float32, buffer="sbuf")


def l_nl_operand():
    mark()
    nl.add(1.0, 2.0)


def l_nl_matmul_transpose():
    t = sb((128, 128))
    mark()
    nl.matmul(t, t, transpose_x=False)


def l_nl_missing():
    mark()
    nl.gather_flattened()


def l_nl_invert_dtype():
    t = sb((128, 4))
    mark()
    nl.invert(t)


def l_nl_reduce_axis():
    t = sb((128, 4, 4))
    mark()
    nl.softmax(t, axis=1)


def l_load_transpose2d():
    t = sb((128, 4))
    mark()
    nl.load_transpose2d(t)


def l_dynamic_range_bound():
    mark()
    nl.dynamic_range(1.5)


def l_dynamic_range_step():
    mark()
    nl.dynamic_range(0, 4, 0)


def l_loop_register():
    mark()
    nl.while_loop(1, lambda r: r)


ARG_CASES += [
    ("partition-dim-alloc", m_partition_dim_alloc, (), 1, {}, "partition-dim", ("256", "128")),
    ("sbuf-capacity", m_sbuf_capacity, (), 1, {}, "sbuf-capacity", ("300 KiB", "256 KiB")),
    ("psum-capacity", m_psum_capacity, (), 1, {}, "psum-capacity", ("16 KiB",)),
    ("psum-bank-alignment", m_psum_bank_alignment, (), 1, {}, "psum-alignment", ("1024", "2048")),
    ("sbuf-alignment", m_sbuf_alignment, (), 1, {}, "sbuf-alignment", ("byte 2",)),
    ("psum-alignment", m_psum_alignment, (), 1, {}, "psum-alignment", ("4096 bytes",)),
    (
        "partition-dim-address",
        m_partition_dim_address,
        (),
        1,
        {},
        "partition-dim",
        ("partition 100", "64 partitions"),
    ),
    ("sbuf-capacity-address", m_sbuf_capacity_address, (), 1, {}, "sbuf-capacity", ("runs past",)),
    ("psum-capacity-address", m_psum_capacity_address, (), 1, {}, "psum-capacity", ("14336",)),
    ("sbuf-capacity-full", m_sbuf_capacity_full, (), 1, {}, "sbuf-capacity", ("does not fit",)),
    ("psum-capacity-full", m_psum_capacity_full, (), 1, {}, "psum-capacity", ("does not fit",)),
    ("hbm-capacity", m_hbm_capacity, (), 1, {}, "hbm-capacity", (str(2**42),)),
    ("overlap", m_overlap, (), 1, {}, "overlap", ("'a'", "'b'", "used again")),
    (
        "view-partitions-oob",
        m_view_partitions_oob,
        (),
        1,
        {},
        "out-of-bounds",
        ("partitions 0..199",),
    ),
    ("view-oob", m_view_oob, (A,), 1, {}, "out-of-bounds", ("outside 0..8191",)),
    ("index-count", t_index_count, (), 1, {}, "index", ("3 indices",)),
    ("index-step", t_index_step, (), 1, {}, "index", ("step -1",)),
    ("slice-oob", t_slice_oob, (), 1, {}, "out-of-bounds", ("60:70",)),
    ("index-oob", t_index_oob, (), 1, {}, "out-of-bounds", ("index 70",)),
    ("index-type", t_index_type, (), 1, {}, "index", ("'a'",)),
    ("reshape-size", t_reshape_size, (), 1, {}, "shape", ("[128, 5]",)),
    ("reshape-partition", t_reshape_partition, (), 1, {}, "shape", ("partition dim 128",)),
    ("reshape-contiguous", t_reshape_contiguous, (), 1, {}, "shape", ("non-contiguous",)),
    ("permute", t_permute, (), 1, {}, "shape", ("(1, 0)",)),
    ("broadcast", t_broadcast, (), 1, {}, "shape", ("dim 1",)),
    ("ap-const-dim", t_ap_const_dim, (A,), 1, {}, "indirect", ("indirect_dim 5",)),
    ("ap-dtype", t_ap_dtype, (), 1, {}, "ap-dtype", ("float32", "uint8")),
    ("ap-partition-pair", t_ap_partition_pair, (), 1, {}, "ap-partition", ("partition pair",)),
    ("ap-partition-step", t_ap_partition_step, (), 1, {}, "ap-partition", ("partition step 8",)),
    ("ap-negative-offset", t_ap_negative_offset, (), 1, {}, "out-of-bounds", ("offset -1",)),
    ("view-dtype", t_view_dtype, (), 1, {}, "dtype", ("uint8[128, 3]",)),
    ("view-dtype-offset", t_view_dtype_offset, (), 1, {}, "dtype", ("not aligned",)),
    ("buffer", l_buffer, (), 1, {}, "buffer", ("'sbuf'",)),
    ("nl-operand", l_nl_operand, (), 1, {}, "operand", ("nl.add",)),
    (
        "nl-matmul-transpose",
        l_nl_matmul_transpose,
        (),
        1,
        {},
        "not-implemented",
        ("transpose_x=False",),
    ),
    ("nl-missing", l_nl_missing, (), 1, {}, "not-implemented", ("nl.gather_flattened",)),
    ("nl-invert-dtype", l_nl_invert_dtype, (), 1, {}, "dtype", ("float32",)),
    ("nl-reduce-axis", l_nl_reduce_axis, (), 1, {}, "not-implemented", ("axis 1",)),
    ("load-transpose2d", l_load_transpose2d, (), 1, {}, "load-transpose2d", ("[128, 4]",)),
    ("dynamic-range-bound", l_dynamic_range_bound, (), 1, {}, "dynamic-range", ("1.5",)),
    ("dynamic-range-step", l_dynamic_range_step, (), 1, {}, "dynamic-range", ("got 0",)),
    ("loop-register", l_loop_register, (), 1, {}, "loop-register", ("init", "int 1")),
]


# ---- semantics behind the checker (trnsim.core.semantics) ----------------------------------------


def s_reduce_init_value():
    mark()
    semantics._acc_start("load_reduce", "add", 8, None, None)  # a safety net: rule reduce-init


def s_reduce_continue():
    mark()
    nisa.tensor_scalar_reduce(
        sb((8, 4)), sb((8, 4)), nl.add, 1.0, nl.add, reduce_cmd=nisa.reduce_cmd.reduce
    )


def s_scalar_reduce_op():
    mark()
    nisa.activation(sb((8, 4)), nl.exp, sb((8, 4)), reduce_cmd=nisa.reduce_cmd.reset_reduce)


def s_scalar_reduce_continue():
    nisa.activation(
        sb((16, 4)), nl.exp, sb((16, 4)), reduce_op=nl.add, reduce_cmd=nisa.reduce_cmd.reset_reduce
    )
    mark()
    nisa.activation(
        sb((8, 4)), nl.exp, sb((8, 4)), reduce_op=nl.add, reduce_cmd=nisa.reduce_cmd.reduce
    )


def s_match_replace8_unmatched():
    data, vals = sb((1, 8)), sb((1, 8))
    nisa.memset(data, 1.0)
    nisa.memset(vals, 2.0)
    mark()
    nisa.nc_match_replace8(
        dst=sb((1, 8)), data=data, vals=vals, imm=0.0, dst_idx=sb((1, 8), nl.uint32)
    )


def s_n_gather_index():
    d, ind = sb((4, 8)), sb((4, 3), nl.uint32)
    nisa.memset(d, 1.0)
    nisa.memset(ind, 8)
    mark()
    nisa.nc_n_gather(sb((4, 3)), d, ind)


# ---- nki.collectives (trnsim.nki.collectives), in an LNC=2 launch --------------------------------

RG = ncc.ReplicaGroup([[0, 1]])


def _hbm(shape=(4, 4)):
    return nl.ndarray(shape, nl.float32, buffer=nl.hbm)


def c_replica_group_disjoint():
    mark()
    ncc.ReplicaGroup([[0, 1], [1]])


def c_replica_group_type():
    t = _hbm()
    mark()
    ncc.all_reduce([t], [t], [[0, 1]], nl.add)


def c_replica_group_cover():
    t = _hbm()
    mark()
    ncc.all_reduce([t], [t], ncc.ReplicaGroup([[0]]), nl.add)


def c_collective_pairs():
    t = _hbm()
    mark()
    ncc.all_reduce([t, t], [t], RG, nl.add)


def c_collective_op():
    t = _hbm()
    mark()
    ncc.collective_permute_implicit_reduce([[t]], [[t]], [[t]], RG, nl.multiply)


def c_collective_operand():
    t = _hbm()
    mark()
    ncc.all_reduce([3], [t], RG, nl.add)


def c_collective_coalesced_hbm():
    a, b = sb((4, 4)), sb((4, 4))
    mark()
    ncc.all_reduce([a, b], [a, b], RG, nl.add)


def c_collective_join():
    t = _hbm()
    if ncc.rank_id() == 0:
        mark()
        ncc.all_reduce([t], [t], RG, nl.add)
    else:
        nisa.core_barrier()  # rank 1 never joins the collective


def c_collective_permute_ranks():
    t = _hbm()
    mark()
    ncc.collective_permute([t], [t], [(0, 5)])


def c_collective_permute_one():
    t = _hbm()
    mark()
    ncc.collective_permute([t, t], [t, t], [(0, 1), (1, 0)])


def c_collective_v_limits():
    t = _hbm((8,))
    meta = nl.ndarray((3, 2), nl.uint32, buffer=nl.hbm)
    mark()
    ncc.all_gather_v([t], [t], RG, meta)  # a group of 2 ranks (the docstring: exactly 4)


def c_collective_v_bounds():
    src = _hbm((8,))
    dst = _hbm((8,))
    meta = nl.ndarray((3, 2), nl.uint32, buffer=nl.hbm)
    counts = nl.ndarray((3, 2), nl.uint32, buffer=nl.sbuf)
    nisa.memset(counts, 5)  # 5 elements to each of 2 ranks from an 8-element source at 5
    nisa.dma_copy(meta, counts)
    mark()
    ncc.all_to_all_v([src], [dst], RG, meta)


ARG_CASES += [
    ("reduce-init-value", s_reduce_init_value, (), 1, {}, "reduce-init", ("got None",)),
    ("reduce-continue", s_reduce_continue, (), 1, {}, "reduce-cmd", ("holds none",)),
    ("scalar-reduce-op", s_scalar_reduce_op, (), 1, {}, "reduce-cmd", ("reset_reduce",)),
    (
        "scalar-reduce-continue",
        s_scalar_reduce_continue,
        (),
        1,
        {},
        "reduce-cmd",
        ("over 8 partitions", "hold 16 partitions"),
    ),
    (
        "match-replace8-unmatched",
        s_match_replace8_unmatched,
        (),
        1,
        {},
        "not-implemented",
        ("vals[0, 7] = 2.0",),
    ),
    ("n-gather-index", s_n_gather_index, (), 1, {}, "n-gather-index", ("= 8 outside [0, 8)",)),
    (
        "replica-group-disjoint",
        c_replica_group_disjoint,
        (),
        2,
        {},
        "replica-group",
        ("rank 1 is in two",),
    ),
    ("replica-group-type", c_replica_group_type, (), 2, {}, "replica-group", ("[[0, 1]]",)),
    ("replica-group-cover", c_replica_group_cover, (), 2, {}, "replica-group", ("[[0]]", "[0, 1]")),
    ("collective-pairs", c_collective_pairs, (), 2, {}, "collective", ("2 srcs and 1 dsts",)),
    ("collective-op", c_collective_op, (), 2, {}, "collective", ("'multiply'",)),
    ("collective-operand", c_collective_operand, (), 2, {}, "operand", ("got int",)),
    (
        "collective-coalesced-hbm",
        c_collective_coalesced_hbm,
        (),
        2,
        {},
        "collective",
        ("coalesced",),
    ),
    ("collective-join", c_collective_join, (), 2, {}, "collective", ("ranks [1] did not join",)),
    (
        "collective-permute-ranks",
        c_collective_permute_ranks,
        (),
        2,
        {},
        "collective",
        ("target ranks [5]",),
    ),
    ("collective-permute-one", c_collective_permute_one, (), 2, {}, "collective", ("exactly one",)),
    ("collective-v-limits", c_collective_v_limits, (), 2, {}, "collective", ("exactly 4",)),
    ("collective-v-bounds", c_collective_v_bounds, (), 2, {}, "collective", ("send_displ 5",)),
]


def r_lnc_race():
    """Both cores of an LNC=2 launch store their program id into one HBM tensor, with no
    barrier between the stores (trnsim.core.races)."""
    out = nl.ndarray((4, 4), nl.float32, buffer=nl.shared_hbm)
    t = sb((4, 4))
    nisa.memset(t, float(nl.program_id(0)))
    nisa.dma_copy(out, t)
    mark()
    nisa.core_barrier(out, (0, 1))
    return out


ARG_CASES += [
    (
        "lnc-race",
        r_lnc_race,
        (),
        2,
        {},
        "lnc-race",
        ("both cores wrote byte 2 ", "32 such bytes", "at this barrier"),
    ),
]


# ---- no bare fail() outside the rule tables ----------------------------------------------------
# Every refusal of the core and the nki front end goes through a named rule: the checker
# (``rules.py``), an argument rule (``argrules.broken``), or the legacy front end's own table.

SRC = Path(__file__).resolve().parents[1] / "src" / "trnsim"
BARE_FAIL_ALLOWED = {"core/rules.py", "core/argrules.py", "core/location.py"}


def test_no_bare_fail_outside_the_rule_tables():
    bare = []
    for pkg in ("core", "nki"):
        for path in sorted((SRC / pkg).rglob("*.py")):
            rel = path.relative_to(SRC).as_posix()
            if rel in BARE_FAIL_ALLOWED or rel.startswith("nki/legacy/"):
                continue
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if re.search(r"(?<!\w)fail\(", line) or "import fail" in line:
                    bare.append(f"{rel}:{n}: {line.strip()}")
    assert not bare, "register these as argrules entries and raise broken(key, ...):\n" + "\n".join(
        bare
    )


def test_every_arg_rule_has_a_case():
    assert set(argrules.ARG_RULES) == {c[0] for c in ARG_CASES}


@pytest.mark.parametrize(("key", "kernel", "args", "lnc", "kw", "name", "values"), ARG_CASES)
def test_arg_rule_names_rule_values_and_line(key, kernel, args, lnc, kw, name, values):
    if kw.get("at_def"):
        kw = {k: v for k, v in kw.items() if k != "at_def"}
        LINE["def"] = kernel.__code__.co_firstlineno
    with pytest.raises(KernelError) as info:
        if kw.get("outside"):
            kernel()
        else:
            mark()  # (rounding and argument-dtype fail here; other kernels mark their own line)
            nki.run(kernel, *args, target="gen4", lnc=lnc, **kw)
    err = info.value
    assert (err.rule, getattr(err, "key", None)) == (name, key), str(err)
    assert argrules.ARG_RULES[key].name == name
    for v in values:
        assert v in str(err), (v, str(err))
    assert f"{HERE}:{LINE.pop('def', None) or LINE['at']}" in str(err), str(err)
