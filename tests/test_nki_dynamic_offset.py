"""Dynamic offsets within SBUF/PSUM partitions (``trnsim.core.indirect`` choice 7): the NKI 0.6
``tensor_copy`` with an on-chip ``.ap(scalar_offset=...)`` view (the migration guide's
replacement for ``tensor_copy_dynamic_src`` / ``_dst``), the legacy calls lowered onto it, the
errors, the record and the cost (``max(MIN_II_DYNAMIC, N)``, SDK 2.26 docstrings)."""

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

nki.install()

import neuronxcc.nki.isa as lisa  # noqa: E402
import neuronxcc.nki.language as lnl  # noqa: E402

RNG = np.random.default_rng(11)
HERE = "test_nki_dynamic_offset.py"


def sb(x):
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(t, x)
    return t


def out_of(t):
    o = nl.ndarray(t.shape, t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(o, t)
    return o


def gather_columns(src, offs):
    """out[:, j] = src[:, offs[0, j]] by one dynamic-source copy per column."""
    s, o = sb(src), sb(offs)
    r = nl.ndarray((src.shape[0], offs.shape[1]), src.dtype, buffer=nl.sbuf)
    f = src.shape[1]
    for j in range(offs.shape[1]):
        view = s.ap([[f, src.shape[0]], [1, 1]], scalar_offset=o[0:1, j : j + 1], indirect_dim=1)
        nisa.tensor_copy(r[:, j : j + 1], view)
    return out_of(r)


def scatter_columns(src, offs, width):
    """out[:, offs[0, j]] = src[:, j], one dynamic-destination copy per column (else 0)."""
    s, o = sb(src), sb(offs)
    r = nl.ndarray((src.shape[0], width), src.dtype, buffer=nl.sbuf)
    nisa.memset(r, 0.0)
    for j in range(offs.shape[1]):
        at = o[0:1, j : j + 1]
        view = r.ap([[width, src.shape[0]], [1, 1]], scalar_offset=at, indirect_dim=1)
        nisa.tensor_copy(view, s[:, j : j + 1])
    return out_of(r)


def test_dynamic_source_gathers_the_columns_the_tile_names():
    src = RNG.standard_normal((128, 96)).astype(np.float32)
    offs = RNG.permutation(96)[None, :16].astype(np.int32)
    res = nki.run(gather_columns, src, offs)
    np.testing.assert_array_equal(res.outputs, src[:, offs[0]])


def test_dynamic_destination_scatters_columns():
    src = RNG.standard_normal((32, 8)).astype(np.float32)
    offs = np.array([[5, 0, 31, 7, 12, 3, 30, 1]], dtype=np.uint32)
    res = nki.run(scatter_columns, src, offs, 32)
    want = np.zeros((32, 32), np.float32)
    want[:, offs[0]] = src
    np.testing.assert_array_equal(res.outputs, want)


def test_offset_on_a_middle_dim_moves_whole_inner_rows():
    """indirect_dim=1 of a (P, 16, 4) tile: offset s starts 4 * s elements further."""
    src = RNG.standard_normal((64, 16, 4)).astype(np.float32)

    def k(src, offs):
        s, o = sb(src), sb(offs)
        r = nl.ndarray((64, 1, 4), src.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(r, s.ap([[64, 64], [4, 1], [1, 4]], scalar_offset=o, indirect_dim=1))
        return out_of(r)

    res = nki.run(k, src, np.array([[9]], np.int32))
    np.testing.assert_array_equal(res.outputs, src[:, 9:10, :])


def expect(rule, fn, *args, values=()):
    with pytest.raises(KernelError) as info:
        nki.run(fn, *args)
    err = info.value
    assert err.rule == rule, str(err)
    assert err.kernel_file.endswith(HERE) and err.kernel_line > 0, str(err)
    for v in values:
        assert str(v) in str(err), (v, str(err))
    return err


def test_an_offset_past_the_dim_is_an_error_naming_value_and_bound():
    src = RNG.standard_normal((8, 10)).astype(np.float32)
    expect("oob", gather_columns, src, np.array([[3, 10]], np.int32), values=("10", "0..9"))
    expect("oob", gather_columns, src, np.array([[-1]], np.int32), values=("-1",))


def test_a_dynamic_partition_offset_and_two_dynamic_sides_are_refused():
    src = RNG.standard_normal((8, 10)).astype(np.float32)

    def on_partitions(src, offs):
        s, o = sb(src), sb(offs)
        s.ap([[10, 1], [1, 10]], scalar_offset=o, indirect_dim=0)

    expect("indirect", on_partitions, src, np.array([[1]], np.int32), values=("free dim",))

    def both(src, offs):
        s, o = sb(src), sb(offs)
        a = s.ap([[10, 8], [1, 1]], scalar_offset=o, indirect_dim=1)
        b = s.ap([[10, 8], [1, 1]], scalar_offset=o, indirect_dim=1)
        nisa.tensor_copy(a, b)

    expect("indirect", both, src, np.array([[1]], np.int32), values=("both",))


def test_only_tensor_copy_and_not_dma_copy_takes_an_on_chip_dynamic_view():
    src = RNG.standard_normal((8, 10)).astype(np.float32)

    def on_add(src, offs):
        s, o = sb(src), sb(offs)
        v = s.ap([[10, 8], [1, 1]], scalar_offset=o, indirect_dim=1)
        r = nl.ndarray((8, 1), src.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(r, v, v, nl.add)

    expect("indirect-operand", on_add, src, np.array([[1]], np.int32), values=("tensor_tensor",))

    def on_dma(src, offs):
        s, o = sb(src), sb(offs)
        r = nl.ndarray((8, 1), src.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(r, s.ap([[10, 8], [1, 1]], scalar_offset=o, indirect_dim=1))

    expect("indirect", on_dma, src, np.array([[1]], np.int32), values=("HBM tensors only",))


def test_record_reads_the_index_and_costs_min_ii_dynamic():
    src = RNG.standard_normal((128, 96)).astype(np.float32)
    offs = np.arange(4, dtype=np.int32)[None, :]
    rec = nki.run(gather_columns, src, offs, functional=False).instructions
    copies = [i for i in rec if i.opcode is Op.TENSOR_COPY]
    assert len(copies) == 4 and all(i.attr("dynamic") == "src" for i in copies)
    ins = copies[0]
    assert ins.operand("index").shape == (1, 1) and ins.operand("index").memory == "sbuf"
    assert ins.operand("src").free_size == 96  # conservative: the whole tensor's partition
    spec = core("gen4")
    assert costs.instruction_cycles(ins, spec) == costs.MIN_II_DYNAMIC_CYCLES  # N = 1 < 600
    prof = schedule(rec, spec)
    s = prof.schedule
    index_load = next(i for i, x in enumerate(rec) if x.opcode is Op.DMA_COPY and i > 0)
    first = rec.index(ins)
    assert s.start[first] >= s.end[index_load]  # after the index tile arrives


# ---- the legacy calls (SDK 2.26 docstrings), lowered onto the above -----------------------------


def test_legacy_dynamic_src_with_an_offset_plus_index_expression():
    @nki.jit
    def k(src, offs):
        out = lnl.ndarray([64, 8], dtype=src.dtype, buffer=lnl.shared_hbm)
        s = lnl.load(src)
        o = lnl.load(offs)
        r = lnl.ndarray([64, 8], dtype=src.dtype, buffer=lnl.sbuf)
        ip, iy = lnl.mgrid[0:64, 0:1]
        for j in lnl.affine_range(8):
            r[ip, j] = lisa.tensor_copy_dynamic_src(s[ip, o[0, j] + iy])
        lnl.store(out, value=r)
        return out

    src = RNG.standard_normal((64, 40)).astype(np.float32)
    offs = np.array([[39, 0, 7, 7, 12, 3, 30, 1]], dtype=np.int32)
    np.testing.assert_array_equal(k(src, offs), src[:, offs[0]])


def test_legacy_dynamic_dst_and_a_bare_tile_index_on_a_middle_axis():
    @nki.jit
    def k(src, offs):
        out = lnl.ndarray([32, 6, 4], dtype=src.dtype, buffer=lnl.shared_hbm)
        s = lnl.load(src)
        o = lnl.load(offs)
        r = lnl.zeros([32, 6, 4], dtype=src.dtype, buffer=lnl.sbuf)
        ip, _, iz = lnl.mgrid[0:32, 0:1, 0:4]
        for j in lnl.affine_range(2):
            lisa.tensor_copy_dynamic_dst(dst=r[ip, o[0, j], iz], src=s[ip, j, iz])
        lnl.store(out, value=r)
        return out

    src = RNG.standard_normal((32, 2, 4)).astype(np.float32)
    offs = np.array([[4, 1]], dtype=np.int32)
    want = np.zeros((32, 6, 4), np.float32)
    want[:, 4], want[:, 1] = src[:, 0], src[:, 1]
    np.testing.assert_array_equal(k(src, offs), want)


def test_legacy_assignment_of_a_dynamically_indexed_tile_is_refused():
    @nki.jit
    def k(src, offs):
        s = lnl.load(src)
        o = lnl.load(offs)
        r = lnl.ndarray([16, 1], dtype=src.dtype, buffer=lnl.sbuf)
        ip, iy = lnl.mgrid[0:16, 0:1]
        r[ip, iy] = s[ip, o[0, 0] + iy]  # the docs' err_copy_dynamic_indirect_indices_...
        return r

    with pytest.raises(KernelError, match="tensor_copy_dynamic_src") as info:
        k(RNG.standard_normal((16, 8)).astype(np.float32), np.array([[1]], np.int32))
    assert info.value.kernel_file.endswith(HERE)


def test_legacy_dynamic_src_needs_a_dynamically_indexed_tile():
    @nki.jit
    def k(src):
        return lisa.tensor_copy_dynamic_src(lnl.load(src))

    with pytest.raises(KernelError, match="indexed at run time"):
        k(RNG.standard_normal((16, 8)).astype(np.float32))
