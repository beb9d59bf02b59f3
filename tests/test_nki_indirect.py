"""Indirect DMA (``.ap(vector_offset=...)`` gather/scatter, ``scalar_offset``) against NumPy,
one error test per rule, the recorded instruction, its cost and its timing dependency."""

import ml_dtypes
import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim.core import costs
from trnsim.core.isa import Op
from trnsim.core.timing import schedule
from trnsim.errors import KernelError
from trnsim.hw import core

RNG = np.random.default_rng(5)
HERE = "test_nki_indirect.py"


def sb(x, dtype=None):
    t = nl.ndarray(x.shape, dtype or x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(t, x)
    return t


def out_of(t):
    o = nl.ndarray(t.shape, t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(o, t)
    return o


def rows_ap(t, idx, **kw):
    d = t.shape[1]
    return t.ap([[d, idx.shape[0]], [1, d]], vector_offset=idx, indirect_dim=0, **kw)


def gather_kernel(table, ids, dtype=nl.float32, **kw):
    idx = sb(ids)
    d = nl.ndarray((ids.shape[0], table.shape[1]), dtype, buffer=nl.sbuf)
    nisa.dma_copy(d, rows_ap(table, idx), **kw)
    return out_of(d)


def scatter_kernel(table, ids, rows, **kw):
    out = nl.ndarray(table.shape, table.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(out, table)
    nisa.dma_copy(rows_ap(out, sb(ids)), sb(rows), **kw)
    return out


# ---- values ------------------------------------------------------------------------------------


@pytest.mark.parametrize("idx_dtype", [np.uint32, np.int32])
def test_gather_rows_picked_at_run_time(idx_dtype):
    table = RNG.standard_normal((40, 24)).astype(np.float32)
    ids = RNG.integers(0, 40, (128, 1)).astype(idx_dtype)
    out = nki.run(gather_kernel, table, ids).outputs
    np.testing.assert_array_equal(out, table[ids[:, 0]])


def test_gather_converts_dtype_via_fp32():
    table = RNG.standard_normal((30, 8)).astype(np.float32)
    ids = RNG.integers(0, 30, (16, 1)).astype(np.uint32)
    out = nki.run(gather_kernel, table, ids, nl.bfloat16).outputs
    np.testing.assert_array_equal(out, table[ids[:, 0]].astype(ml_dtypes.bfloat16))


def test_scatter_writes_rows_and_last_duplicate_wins():
    table = RNG.standard_normal((20, 6)).astype(np.float32)
    ids = np.array([[3], [7], [3], [19]], dtype=np.uint32)
    rows = RNG.standard_normal((4, 6)).astype(np.float32)
    out = nki.run(scatter_kernel, table, ids, rows).outputs
    ref = table.copy()
    for i, r in zip(ids[:, 0], rows, strict=True):  # in partition order: the last one wins
        ref[i] = r
    np.testing.assert_array_equal(out, ref)
    assert np.array_equal(out[3], rows[2]) and not np.array_equal(out[3], rows[0])


def test_scalar_offset_on_an_inner_dim_and_python_int_offset():
    x = RNG.standard_normal((3, 10, 16)).astype(np.float32)
    s = np.array([[6]], dtype=np.int32)

    def k(x, s):
        reg = sb(s)
        a = nl.ndarray((2, 16), nl.float32, buffer=nl.sbuf)  # rows s, s+1 of block 1
        nisa.dma_copy(a, x.ap([[16, 2], [1, 16]], offset=160, scalar_offset=reg, indirect_dim=1))
        b = nl.ndarray((2, 16), nl.float32, buffer=nl.sbuf)  # a constant offset folds in
        nisa.dma_copy(b, x.ap([[16, 2], [1, 16]], scalar_offset=2, indirect_dim=0))
        return out_of(a), out_of(b)

    a, b = nki.run(k, x, s).outputs
    np.testing.assert_array_equal(a, x[1, 6:8])
    np.testing.assert_array_equal(b, x[2, 0:2])


def test_vector_offset_ignores_the_leading_pattern_stride():
    """nki/migration: the leading stride of a vector_offset pattern is ignored, rows step by
    the base tensor's row size (topk_reduce reads the first H of H + 2 columns this way)."""
    table = RNG.standard_normal((10, 6)).astype(np.float32)
    ids = np.array([[7], [2], [9]], dtype=np.uint32)

    def k(table, ids):
        d = nl.ndarray((3, 4), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(d, table.ap([[4, 3], [1, 4]], offset=1, vector_offset=sb(ids)))
        return out_of(d)

    np.testing.assert_array_equal(nki.run(k, table, ids).outputs, table[ids[:, 0], 1:5])


def _scalar_scatter_kernel(base, s, rows, **kw):
    """Scatter rows (3 blocks of 4) at element offset s of a 16-element HBM vector."""
    out = nl.ndarray((16,), nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(out, base)
    nisa.dma_copy(out.ap([[4, 3], [1, 4]], scalar_offset=sb(s), indirect_dim=0), sb(rows), **kw)
    return out


def test_scalar_offset_skip_moves_the_in_bounds_blocks_only():
    """Choice 3: a partly out-of-bounds scalar-offset copy under oob_mode.skip writes its
    in-bounds blocks (indexed_flatten's documented pseudocode); an index outside the dim skips
    every block; oob_mode.error names the first bad block."""
    base = np.arange(16, dtype=np.float32)
    rows = -RNG.integers(1, 9, (3, 4)).astype(np.float32)
    skip = {"oob_mode": nisa.oob_mode.skip}
    out = nki.run(_scalar_scatter_kernel, base, np.array([[8]], np.int32), rows, **skip).outputs
    ref = base.copy()
    ref[8:16] = rows[:2].reshape(-1)  # the third block (16..19) leaves the tensor: skipped
    np.testing.assert_array_equal(out, ref)
    out = nki.run(_scalar_scatter_kernel, base, np.array([[16]], np.int32), rows, **skip).outputs
    np.testing.assert_array_equal(out, base)
    expect(
        "oob",
        _scalar_scatter_kernel,
        base,
        np.array([[8]], np.int32),
        rows,
        values=("block 2 of 3", "index 8"),
    )


def test_nl_load_and_store_accept_indirect_views():
    table = RNG.standard_normal((12, 5)).astype(np.float32)
    ids = np.array([[11], [0], [4]], dtype=np.uint32)

    def k(table, ids):
        idx = sb(ids)
        rows = nl.load(rows_ap(table, idx))
        out = nl.ndarray(table.shape, table.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(out, table)
        nl.store(rows_ap(out, idx), nl.multiply(rows, 2.0))
        return out

    out = nki.run(k, table, ids).outputs
    ref = table.copy()
    ref[ids[:, 0]] *= 2.0
    np.testing.assert_array_equal(out, ref)


def test_oob_skip_leaves_rows_untouched():
    table = RNG.standard_normal((10, 4)).astype(np.float32)
    ids = np.array([[2], [10], [5], [4000000000]], dtype=np.uint32)

    def k(table, ids):
        idx = sb(ids)
        d = nl.ndarray((4, 4), nl.float32, buffer=nl.sbuf)
        nisa.memset(d, -1.0)
        nisa.dma_copy(d, rows_ap(table, idx), oob_mode=nisa.oob_mode.skip)
        out = nl.ndarray(table.shape, table.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(out, table)
        nisa.dma_copy(rows_ap(out, idx), d, oob_mode=nisa.oob_mode.skip)
        return out_of(d), out

    g, s = nki.run(k, table, ids).outputs
    np.testing.assert_array_equal(g[[0, 2]], table[[2, 5]])
    np.testing.assert_array_equal(g[[1, 3]], -1.0)
    np.testing.assert_array_equal(s, table)  # rows 2, 5 written back unchanged, OOB skipped


# ---- errors: one per rule ------------------------------------------------------------------------


def expect(rule, fn, *args, target="gen4", values=()):
    with pytest.raises(KernelError) as info:
        nki.run(fn, *args, target=target)
    err = info.value
    assert err.rule == rule, str(err)
    assert err.kernel_file.endswith(HERE) and err.kernel_line > 0, str(err)
    for v in values:
        assert str(v) in str(err), (v, str(err))
    return err


TABLE = RNG.standard_normal((10, 4)).astype(np.float32)


def test_oob_index_names_value_position_and_bound():
    ids = np.array([[1], [2], [12]], dtype=np.uint32)
    err = expect("oob", gather_kernel, TABLE, ids, values=("12", "partition 2", "0..9"))
    assert f"{HERE}:" in str(err)


def test_negative_int32_index_is_out_of_bounds():
    expect("oob", gather_kernel, TABLE, np.array([[-1]], dtype=np.int32), values=("-1",))


@pytest.mark.parametrize("dtype", [np.float32, np.int16])
def test_index_dtype_must_be_int32_or_uint32(dtype):
    expect("index-dtype", gather_kernel, TABLE, np.array([[1]], dtype=dtype), values=("uint32",))


def test_indirect_view_on_a_non_dma_operand():
    def k(table, ids):
        d = nl.ndarray((1, 4), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(d, rows_ap(table, sb(ids)))

    expect("indirect-operand", k, TABLE, np.array([[1]], np.uint32), values=("tensor_copy",))

    def t(table, ids):
        d = nl.ndarray((4, 1), nl.float32, buffer=nl.sbuf)
        nisa.dma_transpose(d, rows_ap(table, sb(ids)))

    expect("indirect-operand", t, TABLE, np.array([[1]], np.uint32), values=("dma_transpose",))


@pytest.mark.parametrize(
    "case,text",
    [
        ("sbuf_table", "must be in HBM"),
        ("both", "mutually exclusive"),
        ("shape", "(2, 1)"),
        ("dim", "indirect_dim=0"),
    ],
)
def test_ap_argument_errors(case, text):
    def k(table, ids):
        idx = sb(ids)
        if case == "sbuf_table":
            rows_ap(sb(table), idx)
        elif case == "both":
            table.ap([[4, 1], [1, 4]], vector_offset=idx, scalar_offset=idx)
        elif case == "shape":
            table.ap([[4, 2], [1, 4]], vector_offset=idx)
        else:
            table.ap([[4, 1], [1, 4]], vector_offset=idx, indirect_dim=1)

    expect("indirect", k, TABLE, np.array([[1]], np.uint32), values=(text,))


def test_indirect_view_cannot_be_reshaped():
    def k(table, ids):
        rows_ap(table, sb(ids)).reshape((4, 1))

    expect("indirect-view", k, TABLE, np.array([[1]], np.uint32), values=("reshape",))


@pytest.mark.parametrize(
    "kw,target,text",
    [
        ({"dge_mode": nisa.dge_mode.hwdge}, "gen4", "does not support gather/scatter"),
        ({"dge_mode": nisa.dge_mode.none}, "gen4", "dge_mode=none cannot take"),
        ({}, "gen2", "needs NeuronCore-v3+"),
        ({"priority": 1}, "gen3", "priority needs NeuronCore-v4+"),
        ({"engine": nisa.engine.sync}, "gen4", "needs dge_mode=hwdge"),
    ],
)
def test_dge_mode_rules(kw, target, text):
    def k(table, ids):
        return gather_kernel(table, ids, **kw)

    expect("dge-mode", k, TABLE, np.array([[1]], np.uint32), target=target, values=(text,))


def test_dma_dtype_rules_per_dge_mode():
    x = RNG.standard_normal((4, 8)).astype(np.float32)

    def k(x, mode):
        t = nl.ndarray((4, 8), nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(t, x, dge_mode=mode)
        return out_of(t)

    out = nki.run(k, x, nisa.dge_mode.swdge).outputs  # conversion via fp32: allowed
    np.testing.assert_array_equal(out, x.astype(ml_dtypes.bfloat16))
    expect("dtype", k, x, nisa.dge_mode.hwdge, values=("equal dtypes",))

    def packed(x):
        t = nl.ndarray((4, 2), nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        nisa.dma_copy(t, x.ap([[8, 4], [1, 2]]))

    expect("dtype", packed, x, values=("packed x4",))


def test_tensor_indirection_view_on_a_dma_points_at_vector_offset():
    def k(x):
        t = sb(x)
        idx = nl.ndarray((10, 1), nl.uint32, buffer=nl.sbuf)
        nisa.iota(idx, [[0, 1]], offset=0, channel_multiplier=0)
        nisa.dma_copy(out_of(t), t.indirect(idx))  # compute-engine TI (NkiTensor.indirect)

    expect("ti-operand", k, TABLE, values=("dma_copy", ".ap(vector_offset="))


# ---- record, cost, timing ------------------------------------------------------------------------


def iota_gather(table):
    idx = nl.ndarray((128, 1), nl.uint32, buffer=nl.sbuf)
    nisa.iota(idx, [[0, 1]], offset=0, channel_multiplier=1)  # idx[p] = p, written by GpSimd
    d = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(d, rows_ap(table, idx))
    return out_of(d)


def test_record_reads_the_index_and_names_the_whole_table():
    table = RNG.standard_normal((300, 64)).astype(np.float32)
    res = nki.run(iota_gather, table)
    np.testing.assert_array_equal(res.outputs, table[:128])
    ins = next(i for i in res.instructions if i.opcode is Op.DMA_COPY and i.attr("indirect"))
    index, src = ins.operand("index"), ins.operand("src")
    assert index.memory == "sbuf" and index.shape == (128, 1) and index.dtype == "uint32"
    assert src.memory == "hbm" and src.nbytes == table.nbytes  # conservative: every row
    assert ins.attr("indirect") == "src" and ins.attr("indirect_kind") == "vector"
    c = costs.dma_cost(ins, costs.DmaModel.for_core(core("gen4")))
    assert c.nbytes == c.hbm_bytes == 128 * 64 * 4  # the rows moved, not the table
    assert c.row_bytes == 64 * 4  # one descriptor per gathered row


def test_timing_orders_the_gather_after_the_index_writer():
    table = RNG.standard_normal((300, 64)).astype(np.float32)
    rec = nki.run(iota_gather, table, functional=False).instructions
    prof = schedule(rec, "gen4")
    s = prof.schedule
    iota = next(i for i, ins in enumerate(rec) if ins.opcode is Op.IOTA)
    gather = next(i for i, ins in enumerate(rec) if ins.attr("indirect"))
    assert s.start[gather] >= s.end[iota] > 0
    assert dict(prof.bytes_by_memory)["hbm"] < 2 * 128 * 64 * 4 + table.nbytes


def test_rng_state_ops_have_a_cost_rule():
    seeds = np.arange(128 * 24, dtype=np.uint32).reshape(128, 24)

    def k(seeds):
        nisa.rand_set_state(sb(seeds))
        st = nl.ndarray((128, 24), nl.uint32, buffer=nl.sbuf)
        nisa.rand_get_state(st)
        return out_of(st)

    res = nki.run(k, seeds)
    np.testing.assert_array_equal(res.outputs, seeds)
    spec = core("gen4")
    for ins in res.instructions:
        if ins.opcode in (Op.RAND_SET_STATE, Op.RAND_GET_STATE):
            assert costs.instruction_cycles(ins, spec) == spec.min_ii_cycles
    assert schedule(res.instructions, spec).total_s > 0


def test_conservative_region_orders_a_later_write_of_any_table_row():
    def k(table):
        idx = nl.ndarray((128, 1), nl.uint32, buffer=nl.sbuf)
        nisa.iota(idx, [[0, 1]], offset=0, channel_multiplier=1)
        d = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(d, rows_ap(table, idx))
        z = nl.ndarray((1, 64), nl.float32, buffer=nl.sbuf)
        nisa.memset(z, 0.0)
        nisa.dma_copy(table[299:300, :], z)  # a row the indices may (at run time) have named

    rec = nki.run(k, RNG.standard_normal((300, 64)).astype(np.float32)).instructions
    s = schedule(rec, "gen4").schedule
    gather = next(i for i, ins in enumerate(rec) if ins.attr("indirect"))
    assert s.start[len(rec) - 1] >= s.end[gather]


def test_scalar_offset_works_with_hwdge_on_gen3():
    x = RNG.standard_normal((8, 4)).astype(np.float32)

    def k(x, s):
        d = nl.ndarray((2, 4), nl.float32, buffer=nl.sbuf)
        src = x.ap([[4, 2], [1, 4]], scalar_offset=sb(s), indirect_dim=0)
        nisa.dma_copy(d, src, dge_mode=nisa.dge_mode.hwdge)
        return out_of(d)

    out = nki.run(k, x, np.array([[5]], np.uint32), target="gen3").outputs
    np.testing.assert_array_equal(out, x[5:7])


def test_indirect_ap_on_a_slice_is_refused_with_the_way_out():
    def k(table, ids):
        idx = nl.ndarray(ids.shape, ids.dtype, buffer=nl.sbuf)
        nisa.dma_copy(idx, ids)
        d = nl.ndarray((2, 8), nl.float32, buffer=nl.sbuf)
        part = table[100:200]
        nisa.dma_copy(d, part.ap([[8, 2], [1, 8]], vector_offset=idx, indirect_dim=0))

    table = np.arange(256 * 8, dtype=np.float32).reshape(256, 8)
    with pytest.raises(KernelError) as info:
        nki.run(k, table, np.array([[0], [5]], dtype=np.uint32))
    assert info.value.rule == "indirect"
    assert "whole tensor" in str(info.value) and "offset 800" in str(info.value)
