"""Tensor Indirection (``NkiTensor.indirect``, NeuronCore-v4): gathers and scatters through
compute instructions against NumPy, the engine's group size resolved at execution, one error
test per rule, the recorded instruction, its cost and its timing dependencies."""

import ml_dtypes
import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from test_nki_indirect import out_of, sb
from trnsim.core import costs
from trnsim.core.isa import Engine, Op
from trnsim.core.timing import schedule
from trnsim.errors import KernelError
from trnsim.hw import core

RNG = np.random.default_rng(11)
HERE = "test_nki_tensor_indirection.py"
BF16 = ml_dtypes.bfloat16


def offsets(idx, g, n):
    """The documented snake layout per G-partition group: off[p, i] = idx[p//G*G + i%G, i//G]."""
    idx = idx.reshape(idx.shape[0], -1).astype(np.int64)
    p = np.arange(idx.shape[0])[:, None]
    i = np.arange(n)[None, :]
    return idx[p // g * g + i % g, i // g]


def gathered(data, idx, g, n):
    flat = data.reshape(data.shape[0], -1)
    return np.take_along_axis(flat, offsets(idx, g, n), axis=1)


def iota_index(p, k, step, cm, dtype=nl.int32):
    """An index tile computed on the device: idx[p, k] = step * k + cm * p (GpSimd iota)."""
    idx = nl.ndarray((p, k), dtype, buffer=nl.sbuf)
    nisa.iota(idx, [[step, k]], offset=0, channel_multiplier=cm)
    return idx


def expect(rule, fn, *args, target="gen4", values=()):
    with pytest.raises(KernelError) as info:
        nki.run(fn, *args, target=target)
    err = info.value
    assert err.rule == rule, str(err)
    assert err.kernel_file.endswith(HERE) and err.kernel_line > 0, str(err)
    for v in values:
        assert str(v) in str(err), (v, str(err))
    return err


# ---- gathers -----------------------------------------------------------------------------------


@pytest.mark.parametrize("eng", [nisa.vector_engine, nisa.scalar_engine, nisa.gpsimd_engine])
def test_tensor_copy_gathers_offsets_computed_at_run_time(eng):
    data = RNG.standard_normal((32, 4, 32)).astype(np.float32)  # free dims flatten to 128

    def k(data):
        d = sb(data)
        idx = iota_index(32, 8, 1, 3)  # 3p + k
        rev = nl.ndarray((32, 8), nl.int32, buffer=nl.sbuf)  # 127 - (3p + k): Vector ALU
        nisa.tensor_scalar(rev, idx, nl.subtract, 127, reverse0=True)
        o = nl.ndarray((32, 100), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(o, d.indirect(rev, num_elem=100), engine=eng)
        return out_of(o)

    idx = 127 - (3 * np.arange(32)[:, None] + np.arange(8)[None, :])
    out = nki.run(k, data).outputs
    np.testing.assert_array_equal(out, gathered(data, idx, 16, 100))


def test_default_num_elem_is_index_size_and_fewer_is_a_prefix():
    data = RNG.standard_normal((16, 50)).astype(BF16)
    idx = RNG.integers(0, 50, (16, 3)).astype(np.uint16)

    def k(data, idx):
        d, i = sb(data), sb(idx)
        full = nl.ndarray((16, 48), BF16, buffer=nl.sbuf)
        nisa.tensor_copy(full, d.indirect(i))  # 16 x 3 = 48 offsets
        part = nl.ndarray((16, 37), BF16, buffer=nl.sbuf)
        nisa.tensor_copy(part, d.indirect(i, num_elem=37))
        return out_of(full), out_of(part)

    full, part = nki.run(k, data, idx).outputs
    np.testing.assert_array_equal(full, gathered(data, idx, 16, 48))
    np.testing.assert_array_equal(part, full[:, :37])


def test_offsets_follow_the_index_at_execution_not_at_view_creation():
    data = RNG.standard_normal((16, 64)).astype(np.float32)

    def k(data):
        d = sb(data)
        idx = nl.ndarray((16, 2), nl.uint32, buffer=nl.sbuf)
        view = d.indirect(idx, num_elem=32)  # made before the index holds anything
        nisa.iota(idx, [[16, 2]], offset=5, channel_multiplier=1)  # p + 16k + 5
        o = nl.ndarray((16, 32), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(o, view)
        return out_of(o)

    idx = np.arange(16)[:, None] + 16 * np.arange(2)[None, :] + 5
    np.testing.assert_array_equal(nki.run(k, data).outputs, gathered(data, idx, 16, 32))


def test_group_size_is_that_of_the_consuming_engine():
    """One view, two consumers: Vector reads it with G=16, the Tensor engine with G=32."""
    mv = RNG.standard_normal((32, 64)).astype(BF16)
    idx = RNG.integers(0, 64, (32, 2)).astype(np.uint16)
    eye = np.eye(32, dtype=BF16)

    def k(mv, idx, eye):
        view = sb(mv).indirect(sb(idx), num_elem=32)
        v = nl.ndarray((32, 32), BF16, buffer=nl.sbuf)
        nisa.tensor_copy(v, view)
        ps = nl.ndarray((32, 32), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(ps, sb(eye), view)  # identity stationary: dst = gathered moving
        t = nl.ndarray((32, 32), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(t, ps)
        return out_of(v), out_of(t)

    v, t = nki.run(k, mv, idx, eye).outputs
    np.testing.assert_array_equal(v, gathered(mv, idx, 16, 32))
    np.testing.assert_array_equal(t, gathered(mv, idx, 32, 32).astype(np.float32))
    assert not np.array_equal(gathered(mv, idx, 16, 32), gathered(mv, idx, 32, 32))


def matmul_gather_kernel(which):
    def k(st, mv, idx, n):
        s, m = sb(st), sb(mv)
        ix = sb(idx)
        if which == "moving":
            m = m.indirect(ix, num_elem=n)
        else:
            s = s.indirect(ix, num_elem=n)
        ps = nl.ndarray((s.shape[1], m.shape[1]), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(ps, s, m)
        o = nl.ndarray(ps.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(o, ps)
        return out_of(o)

    return k


@pytest.mark.parametrize("which", ["moving", "stationary"])
def test_nc_matmul_gathers_an_operand_with_groups_of_32(which):
    kdim, free, n = 64, 200, 96
    idx = RNG.integers(0, free, (kdim, 3)).astype(np.uint16)
    if which == "moving":
        st = RNG.standard_normal((kdim, 48)).astype(BF16)
        mv = RNG.standard_normal((kdim, free)).astype(BF16)
        want = st.astype(np.float32).T @ gathered(mv, idx, 32, n).astype(np.float32)
    else:
        st = RNG.standard_normal((kdim, free)).astype(BF16)
        mv = RNG.standard_normal((kdim, 40)).astype(BF16)
        n = 80
        want = gathered(st, idx, 32, n).astype(np.float32).T @ mv.astype(np.float32)
    out = nki.run(matmul_gather_kernel(which), st, mv, idx, n).outputs
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


# ---- scatters ----------------------------------------------------------------------------------


def test_scatter_through_dst_keeps_other_cells_and_last_duplicate_wins():
    base = RNG.standard_normal((16, 40)).astype(np.float32)
    vals = RNG.standard_normal((16, 20)).astype(np.float32)
    idx = RNG.integers(0, 40, (16, 2)).astype(np.uint32)
    idx[3, 0], idx[3, 1] = 7, 7  # partition 3: positions 3 and 19 both name cell 7

    def k(base, vals, idx):
        b = sb(base)
        nisa.tensor_copy(b.indirect(sb(idx), num_elem=20), sb(vals))
        return out_of(b)

    want = base.copy()
    off = offsets(idx, 16, 20)
    for p in range(16):
        for i in range(20):  # in (p, i) order: the last write of a cell wins
            want[p, off[p, i]] = vals[p, i]
    assert off[3, 3] == off[3, 19] == 7
    np.testing.assert_array_equal(nki.run(k, base, vals, idx).outputs, want)


def test_gather_modify_scatter_in_place():
    x = RNG.standard_normal((32, 64)).astype(np.float32)
    idx = np.stack([RNG.permutation(64)[:16] for _ in range(32)]).astype(np.int32)  # unique

    def k(x, idx):
        t, i = sb(x), sb(idx)
        nisa.tensor_scalar(t.indirect(i, num_elem=16), t.indirect(i, num_elem=16), nl.add, 100.0)
        return out_of(t)

    want = x.copy()
    off = offsets(idx, 16, 16)
    np.put_along_axis(want, off, np.take_along_axis(x, off, axis=1) + 100.0, axis=1)
    np.testing.assert_array_equal(nki.run(k, x, idx).outputs, want)


def test_matmul_scatters_into_psum_and_accumulates_per_cell():
    st = RNG.standard_normal((64, 32)).astype(BF16)
    mv = RNG.standard_normal((64, 48)).astype(BF16)
    idx = RNG.permutation(128)[:64].reshape(2, 32).T.astype(np.uint16).copy()  # (32, 2)

    def k(st, mv, idx):
        ps = nl.ndarray((32, 128), nl.float32, buffer=nl.psum)
        nisa.memset(ps, 0.0)
        view = ps.indirect(sb(idx), num_elem=48)
        nisa.nc_matmul(view, sb(st), sb(mv))  # accumulate=None: first write overwrites
        nisa.nc_matmul(view, sb(st), sb(mv))  # ... then accumulates
        o = nl.ndarray((32, 128), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(o, ps)
        return out_of(o)

    prod = st.astype(np.float32).T @ mv.astype(np.float32)
    off = offsets(idx, 32, 48)
    assert all(len(set(row)) == 48 for row in off.tolist())  # no duplicates in this test
    want = np.zeros((32, 128), np.float32)
    np.put_along_axis(want, off, 2 * prod, axis=1)
    np.testing.assert_allclose(nki.run(k, st, mv, idx).outputs, want, rtol=1e-5, atol=1e-5)


# ---- errors (one per rule) ---------------------------------------------------------------------

DATA = RNG.standard_normal((16, 32)).astype(np.float32)


def copy_kernel(data, values=None, n=16):
    d = sb(data)
    idx = iota_index(16, 1, 0, 1, nl.uint32) if values is None else sb(values)
    o = nl.ndarray((16, n), d.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(o, d.indirect(idx, num_elem=n))


def test_tensor_indirection_needs_neuroncore_v4():
    expect("ti-generation", copy_kernel, DATA, target="gen3", values=("NeuronCore-v4", "v3"))


def test_out_of_range_offset_names_value_position_bound_and_line():
    bad = np.zeros((16, 2), np.uint32)
    bad[5, 1] = 32  # read as offset i = 16 + 5 = 21 of partition 5 (and of every partition)

    def k(data, bad):
        copy_kernel(data, bad, n=32)

    err = expect("ti-oob", k, DATA, bad, values=("offset 32", "i=21", "partition 0", "0..31"))
    assert "index[5, 1]" in str(err)


def test_negative_int32_offset_is_out_of_bounds():
    expect("ti-oob", copy_kernel, DATA, np.full((16, 1), -1, np.int32), values=("offset -1",))


def test_num_elem_beyond_the_group_index_is_explained():
    def k(data):
        copy_kernel(data, n=17)  # a (16, 1) index holds 16 offsets per 16-partition group

    expect("ti-index", k, DATA, values=("num_elem 17", "num_elem <= 16"))


@pytest.mark.parametrize(
    "make, text",
    [
        (lambda d: d.indirect(d[:, 0:2]), "dtype float32 not allowed"),
        (lambda d: d.indirect(iota_index(8, 2, 1, 1)), "must be (P, K) with P == 16"),
    ],
)
def test_index_tile_rules(make, text):
    def k(data):
        make(sb(data))

    expect("ti-index", k, DATA, values=(text,))


def test_tensor_engine_gathers_only_16_and_8_bit_floats():
    st, mv = DATA, RNG.standard_normal((16, 8)).astype(np.float32)

    def k(st, mv):
        s = sb(st).indirect(iota_index(16, 1, 0, 1), num_elem=8)
        ps = nl.ndarray((8, 8), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(ps, s, sb(mv))

    expect("ti-dtype", k, st, mv, values=("fp16/bf16/fp8", "float32"))


def test_scalar_engine_cannot_scatter_to_psum():
    def k(data):
        ps = nl.ndarray((16, 32), nl.float32, buffer=nl.psum)
        nisa.activation(ps.indirect(iota_index(16, 1, 0, 1)), nl.exp, sb(data)[:, 0:16])

    expect("ti-psum-scatter", k, DATA, values=("Scalar engine",))


def test_pe_tiling_cannot_use_tensor_indirection():
    st = RNG.standard_normal((32, 32)).astype(BF16)

    def k(st):
        s = sb(st)
        ps = nl.ndarray((32, 32), nl.float32, buffer=nl.psum)
        m = s.indirect(iota_index(32, 1, 0, 1), num_elem=32)
        nisa.nc_matmul(ps, s, m, tile_position=(0, 0), tile_size=(32, 32))

    expect("ti-tiling", k, st, values=("tile_position=(0, 0)",))


@pytest.mark.parametrize(
    "issue, text",
    [
        (lambda o, v: nisa.dma_copy(o, v), "vector_offset"),
        (lambda o, v: nisa.reciprocal(o, v), "ops that do: activate2"),
    ],
)
def test_ops_and_roles_that_do_not_take_indirection(issue, text):
    def k(data):
        d = sb(data)
        o = nl.ndarray((16, 16), nl.float32, buffer=nl.sbuf)
        issue(o, d.indirect(iota_index(16, 1, 0, 1)))

    expect("ti-operand", k, DATA, values=(text,))


def test_vector_operand_role_is_refused():
    def k(data):
        d = sb(data)
        o = nl.ndarray((16, 16), nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(o, d[:, 0:16], nl.add, d.indirect(iota_index(16, 1, 0, 1), 1))

    expect("ti-operand", k, DATA, values=("operand0 cannot be", "roles that can: data, dst"))


@pytest.mark.parametrize(
    "make, text",
    [
        (lambda d, hbm: hbm.indirect(iota_index(16, 1, 0, 1)), "vector_offset"),
        (lambda d, hbm: d.indirect(iota_index(16, 1, 0, 1))[:, 0:2], "__getitem__"),
    ],
)
def test_view_rules(make, text):
    def k(data):
        make(sb(data), data)

    expect("ti-view", k, DATA, values=(text,))


# ---- record, cost, timing ----------------------------------------------------------------------


def copy_from_iota(data):
    """GpSimd writes the index; Vector gathers 256 of the 1024 columns, then reads one cell."""
    d = sb(data)
    idx = iota_index(128, 16, 8, 0)
    o = nl.ndarray((128, 256), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(o, d.indirect(idx, num_elem=256))
    nisa.tensor_scalar(o[:, 0:1], d[:, 1023:1024], nl.add, 1.0)  # a cell only the base names
    return out_of(o)


def test_record_reads_the_index_and_names_the_whole_indexed_view():
    data = RNG.standard_normal((128, 1024)).astype(np.float32)
    res = nki.run(copy_from_iota, data)
    want = gathered(data, 8 * np.tile(np.arange(16), (128, 1)), 16, 256)
    want[:, 0] = data[:, 1023] + 1.0
    np.testing.assert_array_equal(res.outputs, want)
    ins = next(
        i for i in res.instructions if i.opcode is Op.TENSOR_COPY and i.attr("tensor_indirect")
    )
    assert ins.attr("tensor_indirect") == (("src", 16, 256),)
    index, src = ins.operand("index"), ins.operand("src")
    assert index.memory == "sbuf" and index.shape == (128, 16) and index.dtype == "int32"
    assert src.shape == (128, 1024)  # conservative region: the whole indexed view
    spec = core("gen4")
    assert costs.instruction_cycles(ins, spec) == 256  # fp32 copy: N = num_elem, not 1024


def test_two_indirect_operands_record_one_index_each_and_cost_num_elem():
    st = RNG.standard_normal((32, 96)).astype(BF16)
    mv = RNG.standard_normal((32, 300)).astype(BF16)

    def k(st, mv):
        i1, i2 = iota_index(32, 1, 0, 2), iota_index(32, 8, 32, 1)
        s = sb(st).indirect(i1, num_elem=32)
        m = sb(mv).indirect(i2, num_elem=200)
        ps = nl.ndarray((32, 200), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(ps, s, m)

    ins = next(i for i in nki.run(k, st, mv).instructions if i.opcode is Op.NC_MATMUL)
    assert ins.engine is Engine.TENSOR
    assert ins.operand("index_stationary").shape == (32, 1)
    assert ins.operand("index_moving").shape == (32, 8)
    assert ins.operand("moving").shape == (32, 300)
    assert costs.matmul_flops(ins) == 2.0 * 32 * 32 * 200
    assert costs.instruction_cycles(ins, core("gen4")) == 200


def test_timing_orders_the_gather_after_the_index_writer_in_a_timing_only_run():
    data = RNG.standard_normal((128, 1024)).astype(np.float32)
    rec = nki.run(copy_from_iota, data, functional=False).instructions
    s = schedule(rec, "gen4").schedule
    iota = next(i for i, ins in enumerate(rec) if ins.opcode is Op.IOTA)
    ti = next(i for i, ins in enumerate(rec) if ins.attr("tensor_indirect"))
    assert s.start[ti] >= s.end[iota] > 0


def test_timing_orders_a_later_reader_after_a_scatter_to_any_cell():
    def k(base, vals):
        b, v = sb(base), sb(vals)
        idx = iota_index(128, 4, 1, 0, nl.uint16)
        nisa.tensor_copy(b.indirect(idx, num_elem=64), v)  # cells 0..3 at run time
        last = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(last, b[:, 511:512], engine=nisa.scalar_engine)  # offsets could name it
        return out_of(last)

    base = RNG.standard_normal((128, 512)).astype(np.float32)
    vals = RNG.standard_normal((128, 64)).astype(np.float32)
    res = nki.run(k, base, vals)
    np.testing.assert_array_equal(res.outputs[:, 0], base[:, 511])
    rec = res.instructions
    s = schedule(rec, "gen4").schedule
    scatter = next(i for i, ins in enumerate(rec) if ins.attr("tensor_indirect"))
    reader = next(i for i, ins in enumerate(rec) if ins.engine is Engine.SCALAR)
    assert rec[scatter].engine is Engine.VECTOR and rec[reader].engine is Engine.SCALAR
    assert s.start[reader] >= s.end[scatter]


def test_profile_counts_the_bytes_a_gather_moves_not_its_whole_indexed_view():
    data = RNG.standard_normal((128, 1024)).astype(np.float32)
    rec = nki.run(copy_from_iota, data, functional=False).instructions
    ti = next(ins for ins in rec if ins.attr("tensor_indirect"))
    moved = dict(schedule([ti], "gen4").bytes_by_memory)["sbuf"]
    # int32 index (128 x 16) + the 256 gathered fp32 columns read + the 256 written
    assert moved == 128 * 16 * 4 + 2 * 128 * 256 * 4
