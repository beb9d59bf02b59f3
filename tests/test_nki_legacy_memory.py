"""The legacy compiler's memory model (``trnsim.nki.legacy.allocator``), one behaviour per
test, each with a kernel that shows it, the bytes it moves and its time: liveness by tile and
by block, victims by next use, spills and refills of every kind of tile (a PSUM accumulation
group goes on after its refill), refetch of clean loaded tiles, lazy fills, multi-buffering of
``affine_range`` bodies, loop-invariant loads, and a compiler-emitted batched matmul far larger
than SBUF and PSUM checked element by element against NumPy."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import trnsim.nki as tnki
from trnsim.core.timing import schedule
from trnsim.errors import KernelError
from trnsim.nki.benchmark import record

tnki.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

RNG = np.random.default_rng(2027)
TRN1 = "gen2"  # 192 KiB of SBUF per partition, 8 PSUM banks of 2 KiB


def _spill(ins, kind: str | None = None) -> list:
    return [i for i in ins if i.attr("spill") is not None and kind in (None, i.attr("spill"))]


def _bytes(ins) -> int:
    return sum(o.nbytes for i in ins for o in i.dst)


def _dma_bytes(ins, src: str, dst: str) -> int:
    n = 0
    for i in ins:
        if i.opcode.value == "dma_copy" and i.src[0].memory == src and i.dst[0].memory == dst:
            n += i.dst[0].nbytes
    return n


def _ints(*shape: int) -> np.ndarray:
    return RNG.integers(-3, 4, shape).astype(np.float32)  # exact sums in fp32


# ---- liveness: a plain tile's bytes are free after its last use --------------------------------


@nki.jit
def long_lived_and_dead_tiles(x, c_in):
    """Per iteration six 24 KiB temporaries (dead after the iteration) beside a constant tile
    read in every iteration: the temporaries' bytes are reused, the constant's never."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    c = nl.load(c_in)
    for i in nl.affine_range(x.shape[0] // 128):
        a = nl.load(x[i * 128 : (i + 1) * 128, :])
        b = nl.add(a, c)
        d = nl.multiply(b, a)
        e = nl.subtract(d, c)
        f = nl.add(e, b)
        nl.store(out[i * 128 : (i + 1) * 128, :], value=nl.multiply(f, 0.5))
    return out


def test_dead_tiles_give_their_bytes_and_live_ones_keep_them():
    x, c = _ints(128 * 6, 6144), _ints(128, 6144)
    res = tnki.run(long_lived_and_dead_tiles, x, c, target=TRN1)
    a = x.reshape(6, 128, 6144)
    b = a + c
    want = ((b * a - c) + b) * 0.5
    np.testing.assert_array_equal(res.outputs, want.reshape(x.shape))
    assert not _spill(res.instructions)  # no spill: the constant stays, dead tiles go


# ---- victims by next use; spills and refills of plain tiles -----------------------------------


W63 = 16128  # 63 KiB of fp32 per partition: three such tiles and two 2 KiB ones overflow SBUF


@nki.jit
def far_and_near_tiles(x, y, z):
    """Per iteration three 63 KiB tiles live at once beside ``near`` (read in every
    iteration) and ``far2`` (read again only at the end): SBUF (192 KiB) cannot hold them all,
    so the tile used furthest ahead (``far2``) is saved to HBM and reloaded for its last use;
    ``near`` stays."""
    nt = x.shape[0] // 128
    out = nl.ndarray((nt + 1, 128, 512), dtype=np.float32, buffer=nl.shared_hbm)
    near = nl.load(z)
    far = nl.load(y)
    far2 = nl.multiply(far, 3.0)  # written: its data exists nowhere else
    for i in nl.affine_range(nt):
        a = nl.load(x[i * 128 : (i + 1) * 128, :])
        b = nl.add(a, 1.0)
        c = nl.multiply(a, b)
        nl.store(out[i], value=nl.add(c[:, 0:512], near))
    nl.store(out[nt], value=nl.add(far2, near))
    return out


def test_the_tile_used_furthest_ahead_is_saved_and_reloaded():
    x, y, z = _ints(128 * 3, W63), _ints(128, 512), _ints(128, 512)
    res = tnki.run(far_and_near_tiles, x, y, z, target=TRN1)
    xs = x.reshape(3, 128, W63)[:, :, :512]
    want = np.concatenate([xs * (xs + 1) + z, (3 * y + z)[None]])
    np.testing.assert_array_equal(res.outputs, want)
    saves, reloads = _spill(res.instructions, "save"), _spill(res.instructions, "reload")
    assert len(saves) == len(reloads) == 1
    assert saves[0].src[0].nbytes == 128 * 512 * 4  # far2, nothing else
    assert reloads[0].dst[0].nbytes == 128 * 512 * 4
    assert not _spill(res.instructions, "refetch")  # near stays
    # the same stream timing-only (the same plan, from a timing-only first run)
    ins = record(far_and_near_tiles, x, y, z, target=TRN1)
    assert [i.opcode for i in ins] == [i.opcode for i in res.instructions]
    assert schedule(ins, TRN1).total_s == pytest.approx(
        schedule(res.instructions, TRN1).total_s, rel=1e-9
    )


@nki.jit
def clean_tile_beside_big_temporaries(x, w):
    """``wt`` is loaded and only read, at the end: under pressure it is dropped and read
    again from HBM (``refetch``), never saved."""
    nt = x.shape[0] // 128
    out = nl.ndarray((nt + 1, 128, 512), dtype=np.float32, buffer=nl.shared_hbm)
    wt = nl.load(w)  # 4 KiB: it and the three 63 KiB tiles do not fit together
    for i in nl.affine_range(nt):
        a = nl.load(x[i * 128 : (i + 1) * 128, :])
        b = nl.add(a, 1.0)
        c = nl.multiply(a, b)
        nl.store(out[i], value=nl.add(c[:, 0:512], 0.0))
    nl.store(out[nt], value=nl.add(wt[:, 0:512], 1.0))
    return out


def test_a_clean_loaded_tile_is_read_again_from_its_source_not_saved():
    x, w = _ints(128 * 3, W63), _ints(128, 1024)
    res = tnki.run(clean_tile_beside_big_temporaries, x, w, target=TRN1)
    xs = x.reshape(3, 128, W63)[:, :, :512]
    want = np.concatenate([xs * (xs + 1), (w[:, :512] + 1)[None]])
    np.testing.assert_array_equal(res.outputs, want)
    assert not _spill(res.instructions, "save")
    refetch = _spill(res.instructions, "refetch")
    assert len(refetch) == 1 and refetch[0].src[0].memory == "hbm"


# ---- PSUM: spills to SBUF, the accumulation group goes on after a refill ------------------------


@nki.jit
def nine_accumulators(a, b):
    """Nine PSUM accumulators (PSUM holds 8) each summed over 4 matmuls, the 9th group
    interleaved with the others: an accumulator is spilled mid-group and refilled, and its
    group goes on (no matmul overwrites what the spilled group had summed)."""
    out = nl.ndarray((9, 128, 512), dtype=np.float32, buffer=nl.shared_hbm)
    at = nl.load(a)
    acc = nl.ndarray((9, nl.par_dim(128), 512), dtype=np.float32, buffer=nl.psum)
    for k in nl.affine_range(4):
        bt = nl.load(b[k])
        for j in nl.affine_range(9):
            acc[j] += nisa.nc_matmul(at, bt)
    for j in nl.affine_range(9):
        nl.store(out[j], value=nl.copy(acc[j]))
    return out


def test_a_psum_accumulator_spilled_mid_group_keeps_accumulating():
    a, b = _ints(128, 128), _ints(4, 128, 512)
    res = tnki.run(nine_accumulators, a, b, target=TRN1)
    want = a.T.astype(np.float64) @ b.astype(np.float64).sum(axis=0)
    np.testing.assert_array_equal(res.outputs, np.broadcast_to(want, (9, 128, 512)))
    saves = _spill(res.instructions, "save")
    assert saves and all(i.src[0].memory == "psum" for i in saves)
    assert len(_spill(res.instructions, "reload")) == len(saves)


# ---- lazy fills --------------------------------------------------------------------------------


@nki.jit
def lazily_zeroed_blocks(x):
    """An SBUF zeros block tensor: block 0 is overwritten whole (no memset), block 1 is added
    to (memset first), block 2 is never used (no memset, no bytes)."""
    out = nl.ndarray((2, 128, 64), dtype=np.float32, buffer=nl.shared_hbm)
    t = nl.zeros((3, nl.par_dim(128), 64), dtype=np.float32, buffer=nl.sbuf)
    t[0] = nl.load(x)
    t[1] += nl.load(x)
    nl.store(out[0], value=t[0])
    nl.store(out[1], value=t[1])
    return out


def test_a_zeros_block_is_filled_only_where_its_first_use_needs_the_zeros():
    x = _ints(128, 64)
    res = tnki.run(lazily_zeroed_blocks, x)
    np.testing.assert_array_equal(res.outputs, np.stack([x, x]))
    assert sum(i.opcode.value == "memset" for i in res.instructions) == 1


@nki.jit
def lazy_sbuf_accumulator(x):
    out = nl.ndarray((128, 64), dtype=np.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 64), dtype=np.float32, buffer=nl.sbuf, lazy_initialization=True)
    acc[...] = nl.load(x)  # overwritten whole: the zeros are never needed
    nl.store(out, value=acc)
    return out


def test_lazy_initialization_skips_the_memset_of_an_overwritten_tile():
    x = _ints(128, 64)
    res = tnki.run(lazy_sbuf_accumulator, x)
    np.testing.assert_array_equal(res.outputs, x)
    assert not any(i.opcode.value == "memset" for i in res.instructions)


# ---- multi-buffering of affine_range bodies -------------------------------------------------


def _scale_loop(factor: int | None):
    kw = {} if factor is None else {"multi_buffer": factor}

    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(x.shape[0], **kw):
            a = nl.load(x[i])
            nl.store(out[i], value=nl.exp(a))
        return out

    return k


def _iterations(ins) -> list[list]:
    """The record cut at each load from HBM (one loop iteration each)."""
    out: list[list] = []
    for i in ins:
        if i.opcode.value == "dma_copy" and i.src[0].memory == "hbm":
            out.append([])
        if out:
            out[-1].append(i)
    return out


def _overlap(a, b) -> bool:
    a_end, b_end = a.offset + a.nbytes // a.partitions, b.offset + b.nbytes // b.partitions
    return a.offset < b_end and b.offset < a_end


@pytest.mark.parametrize("factor", [2, 3])
def test_affine_range_iterations_do_not_reuse_the_last_ones_bytes(factor):
    x = np.empty((12, 128, 2048), np.float32)
    its = _iterations(record(_scale_loop(factor), x, target=TRN1))
    assert len(its) == 12
    for k in range(factor - 1, 12):
        load = its[k][0].dst[0]  # the load of iteration k
        earlier = [
            o for it in its[k - factor + 1 : k] for i in it for o in (*i.dst, *i.src)
            if o.memory == "sbuf"
        ]  # fmt: skip
        assert earlier and not any(_overlap(load, o) for o in earlier)


def test_multi_buffer_1_is_single_buffering():
    x = np.empty((12, 128, 2048), np.float32)
    its = _iterations(record(_scale_loop(1), x, target=TRN1))
    assert len({it[0].dst[0].offset for it in its}) == 1


def test_double_buffering_is_never_slower():
    x = np.empty((12, 128, 2048), np.float32)
    single = schedule(record(_scale_loop(1), x, target=TRN1), TRN1).total_s
    double = schedule(record(_scale_loop(2), x, target=TRN1), TRN1).total_s
    assert double <= single


@nki.jit
def scores_then_blocks(q, k):
    """Per outer iteration a [128, 512] PSUM product, first read in the first iteration of an
    inner loop over its four 128-column blocks (each exponentiated, transposed to PSUM)."""
    out = nl.ndarray((4, 128, 512), dtype=np.float32, buffer=nl.shared_hbm)
    qt = nl.load(q)
    kt = nl.load(k)
    for i in nl.affine_range(4):
        s = nisa.nc_matmul(stationary=qt, moving=kt)  # [128, 512] PSUM
        for j in nl.affine_range(4):
            e = nisa.activation(op=nl.exp, data=s[:, nl.ds(j * 128, 128)], dtype=np.float32)
            t = nisa.nc_transpose(e)  # [128, 128] PSUM
            nl.store(out[i, :, nl.ds(j * 128, 128)], value=nl.copy(t))
    return out


def test_a_result_first_used_in_an_inner_loop_is_multi_buffered_over_its_own_loop():
    """The product ``s`` is made in the outer loop: its PSUM bytes differ from the last outer
    iteration's (which the transposes of that iteration may still be near), although it is
    placed at its first use, in the inner loop's first iteration; and the first transpose of
    an outer iteration avoids the bytes of the last one (the nest is double-buffered as one
    loop)."""
    q = np.zeros((128, 128), np.float32)
    k = np.zeros((128, 512), np.float32)
    ins = record(scores_then_blocks, q, k, target=TRN1)
    mm = [i.dst[0] for i in ins if i.opcode.value == "nc_matmul" and i.dst[0].shape[1] == 512]
    assert len(mm) == 4
    for a, b in itertools.pairwise(mm):
        assert not _overlap(a, b)
    tr = [i.dst[0] for i in ins if i.opcode.value == "nc_transpose"]
    assert len(tr) == 16
    for i in range(1, 4):
        first, last_before = tr[4 * i], tr[4 * i - 1]
        assert not _overlap(first, last_before)
        assert not _overlap(first, mm[i - 1])
    np.testing.assert_array_equal(
        tnki.run(scores_then_blocks, q, k).outputs, np.ones((4, 128, 512))
    )


# ---- loop-invariant loads ---------------------------------------------------------------------


def _weights_in_loop():
    @nki.jit
    def k(x, w):
        """``w`` ([128, 1024] fp32) loaded in every iteration of the row loop (loop-invariant)
        beside three per-row temporaries as wide as ``x``'s rows."""
        out = nl.ndarray((x.shape[0], 128, 512), dtype=np.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(x.shape[0]):
            wt = nl.load(w)
            a = nl.load(x[i])
            b = nl.add(a, 1.0)
            c = nl.multiply(a, b)
            nl.store(out[i], value=nl.add(c[:, 0:512], wt[:, 0:512]))
        return out

    return k


def _expect_weights(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    xs = x[:, :, :512]
    return xs * (xs + 1) + w[:, :512]


def test_a_loop_invariant_load_is_hoisted_when_it_fits():
    x, w = _ints(8, 128, 2048), _ints(128, 1024)
    res = tnki.run(_weights_in_loop(), x, w, target=TRN1)
    np.testing.assert_array_equal(res.outputs, _expect_weights(x, w))
    assert _dma_bytes(res.instructions, "hbm", "sbuf") == x.nbytes + w.nbytes  # w read once
    hoisted = schedule(res.instructions, TRN1).total_s
    assert hoisted > 0


def test_a_loop_invariant_load_is_read_again_when_it_does_not_fit():
    # 63 KiB rows: a row's three temporaries and w (4 KiB) do not fit SBUF together
    x, w = _ints(4, 128, W63), _ints(128, 1024)
    res = tnki.run(_weights_in_loop(), x, w, target=TRN1)
    np.testing.assert_array_equal(res.outputs, _expect_weights(x, w))
    refetched = _spill(res.instructions, "refetch")
    assert refetched and not _spill(res.instructions, "save")
    read = _dma_bytes(res.instructions, "hbm", "sbuf")
    assert read == x.nbytes + w.nbytes * (1 + len(refetched))


@nki.jit
def weights_per_row(x, w):
    """``out[i, j] = w[j] + x[i]``: every weight tile ``w[j]`` loaded again (and dropped) in
    each iteration of the row loop, as the MLP kernels load their weights inside the M loop."""
    out = nl.ndarray((x.shape[0], w.shape[0], 128, x.shape[2]), dtype=np.float32,
                     buffer=nl.shared_hbm)  # fmt: skip
    for i in nl.affine_range(x.shape[0]):
        a = nl.load(x[i])
        for j in nl.affine_range(w.shape[0]):
            wt = nl.load(w[j])
            nl.store(out[i, j], value=nl.add(wt, a))
    return out


def _resident_rows(rows: int, tiles: int, width: int):
    x, w = _ints(rows, 128, width), _ints(tiles, 128, width)
    res = tnki.run(weights_per_row, x, w, target=TRN1)
    np.testing.assert_array_equal(res.outputs, w[None] + x[:, None])
    return res.instructions, w


def test_a_dropped_weight_tile_still_resident_is_not_read_again():
    # four 2 KiB weight tiles: all of them stay in SBUF from one row to the next
    ins, w = _resident_rows(3, 4, 512)
    resident = _spill(ins, "resident")
    assert len(resident) == 2 * 4  # rows 1 and 2 find every weight tile resident
    assert all(i.src[0].memory == "hbm" for i in resident)
    held = schedule(ins, TRN1)
    assert held.hbm_read_bytes == 3 * 128 * 512 * 4 + w.nbytes  # x, and w once
    plain = [i._replace(attrs=tuple(a for a in i.attrs if a[0] != "spill")) for i in ins]
    assert held.total_s < schedule(plain, TRN1).total_s  # the reads it skips took time


def test_of_weight_tiles_that_do_not_fit_together_only_those_kept_are_reused():
    # four 48 KiB weight tiles (192 KiB) and the row's tiles overflow a 192 KiB partition:
    # those kept stay (the same ones every row), the others are read in every row
    ins, w = _resident_rows(2, 4, 12288)
    kept = len(_spill(ins, "resident"))
    assert 0 < kept < 4
    ins3, _ = _resident_rows(3, 4, 12288)
    assert len(_spill(ins3, "resident")) == 2 * kept
    assert schedule(ins3, TRN1).hbm_read_bytes == (
        3 * 128 * 12288 * 4 + w.nbytes + 2 * (4 - kept) * 128 * 12288 * 4
    )


# ---- a compiler-emitted batched matmul far larger than SBUF and PSUM ------------------------


@nki.jit
def emitted_bmm(a, b):
    """``out[i] = a[i].T @ b[i]`` as a compiler's NKI emitter writes it: block tensors holding
    every batch's operands, accumulators and results (far larger than SBUF and PSUM), the K
    loop outermost (every accumulator of a batch is open at once: 16 PSUM blocks, 8 banks), PSUM
    accumulators zeroed lazily, affine masks on the ragged last column tile, and the results
    stored only after every batch is computed (all of them live at once)."""
    nb, k, m = a.shape
    n = b.shape[2]
    kt, mt, nt = k // 128, m // 128, (n + 511) // 512
    out = nl.ndarray((nb, m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    a_sb = nl.ndarray((nb, kt, nl.par_dim(128), m), dtype=a.dtype, buffer=nl.sbuf)
    b_sb = nl.ndarray((nb, kt, nl.par_dim(128), nt * 512), dtype=b.dtype, buffer=nl.sbuf)
    ps = nl.zeros(
        (nb, mt, nt, nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum,
        lazy_initialization=True,
    )  # fmt: skip
    res = nl.ndarray((nb, mt, nt, nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.sbuf)
    i_p, i_m = nl.mgrid[0:128, 0:m]
    j_p, j_f = nl.mgrid[0:128, 0:512]
    for i0 in nl.affine_range(nb):
        for i1 in nl.affine_range(kt):
            a_sb[i0, i1, i_p, i_m] = nl.load(a[i0, i1 * 128 + i_p, i_m])
            for i2 in nl.affine_range(nt):
                b_sb[i0, i1, j_p, i2 * 512 + j_f] = nl.load(
                    b[i0, i1 * 128 + j_p, i2 * 512 + j_f], mask=(i2 * 512 + j_f < n)
                )
        for i1 in nl.affine_range(kt):
            for i3 in nl.affine_range(mt):
                for i2 in nl.affine_range(nt):
                    ps[i0, i3, i2, j_p, j_f] += nisa.nc_matmul(
                        a_sb[i0, i1, j_p, i3 * 128 + nl.arange(128)[None, :]],
                        b_sb[i0, i1, j_p, i2 * 512 + j_f],
                        mask=(i2 * 512 + j_f < n),
                    )
        for i3 in nl.affine_range(mt):
            for i2 in nl.affine_range(nt):
                res[i0, i3, i2, j_p, j_f] = nl.copy(
                    ps[i0, i3, i2, j_p, j_f], dtype=nl.float32, mask=(i2 * 512 + j_f < n)
                )
    for i0 in nl.affine_range(nb):
        for i3 in nl.affine_range(mt):
            for i2 in nl.affine_range(nt):
                nl.store(
                    out[i0, i3 * 128 + j_p, i2 * 512 + j_f],
                    value=res[i0, i3, i2, j_p, j_f],
                    mask=(i2 * 512 + j_f < n),
                )
    return out


def test_a_batched_matmul_past_sbuf_and_psum_is_right_in_every_element():
    # gen2: 8 batches x 4 x 4 result blocks of 2 KiB per partition (256 KiB) stay live until the
    # stores; each batch keeps 16 PSUM accumulators open over its K loop (PSUM has 8 banks);
    # a ragged last column tile (2000 = 3 x 512 + 464)
    a, b = _ints(8, 1024, 512), _ints(8, 1024, 2000)
    res = tnki.run(emitted_bmm, a, b, target=TRN1)
    want = np.einsum("bkm,bkn->bmn", a.astype(np.float64), b.astype(np.float64))
    out = res.outputs
    assert not np.isnan(out).any()
    np.testing.assert_array_equal(out, want)  # small integers: every sum exact in fp32
    ins = res.instructions
    assert not any(i.opcode.value == "memset" for i in ins)  # lazy zeros, no memset
    saves = _spill(ins, "save")
    assert any(i.src[0].memory == "psum" for i in saves)  # accumulators spilled mid-group
    assert any(i.dst[0].memory == "hbm" for i in saves)  # results spilled to HBM
    assert len(_spill(ins, "reload")) >= len(saves) // 2


@pytest.mark.slow
def test_the_batched_matmul_at_other_sizes_too():
    for nb, k, m, n in [(2, 1024, 512, 2000), (3, 1024, 512, 1100), (8, 512, 256, 1300)]:
        a, b = _ints(nb, k, m), _ints(nb, k, n)
        out = emitted_bmm(a, b)
        np.testing.assert_array_equal(out, np.einsum("bkm,bkn->bmn", a, b))


# ---- a plan that does not hold ----------------------------------------------------------------

CALLS = [0]


@nki.jit
def depends_on_a_global(x):
    CALLS[0] += 1
    out = nl.ndarray((4, 128, W63), dtype=np.float32, buffer=nl.shared_hbm)
    keep = []
    for i in nl.affine_range(3 + CALLS[0]):  # a different loop in each run
        big = nl.load(x[i % 4])
        keep.append(big)  # every row kept: SBUF overflows
        nl.store(out[i % 4], value=nl.add(big, 1.0))
    return out


def test_a_kernel_whose_second_run_differs_from_its_planning_run_is_refused():
    with pytest.raises(KernelError, match="liveness-plan"):
        tnki.run(depends_on_a_global, _ints(4, 128, W63), target=TRN1)


# ---- the kernel's own placements ----------------------------------------------------------------


@nki.jit
def direct_over_auto(x, y):
    """``t`` (automatic, 64 KiB at the bottom of SBUF) is live when the kernel places ``d`` at
    byte 0 itself (``ncc.sbuf.mod_alloc``): ``t`` gives up its bytes first (a clean load: read
    again from HBM when used), never shares them."""
    import neuronxcc.nki.compiler as ncc

    out = nl.ndarray((2, 128, 512), dtype=np.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    d = nl.ndarray((nl.par_dim(128), 512), dtype=np.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    d[...] = nl.load(y)
    nl.store(out[0], value=d)
    nl.store(out[1], value=nl.add(t[:, 0:512], 1.0))
    return out


def test_a_direct_allocation_over_an_automatic_tile_moves_the_tile_first():
    x, y = _ints(128, 16384), _ints(128, 512)
    res = tnki.run(direct_over_auto, x, y, target=TRN1)
    np.testing.assert_array_equal(res.outputs, np.stack([y, x[:, :512] + 1]))
    assert len(_spill(res.instructions, "refetch")) == 1


# ---- the default depth: enough buffers to cover the DMA's fixed latency ---------------------


@pytest.mark.parametrize("target", ["gen2", "gen3", "gen4"])
def test_dma_depth_is_the_fewest_buffers_that_cover_the_latency(target):
    from trnsim.hw import core
    from trnsim.nki.legacy.allocator import MULTI_BUFFER, dma_depth

    dma = core(target).dma
    in_flight = dma.engines * dma.engine_bw * dma.fixed_latency_s  # Little's law
    for tile in (8 << 10, 32 << 10, 128 << 10, 512 << 10, 4 << 20):
        d = dma_depth(dma, tile)
        assert MULTI_BUFFER <= d <= dma.queues_per_engine
        if MULTI_BUFFER < d < dma.queues_per_engine:
            assert (d - 1) * tile >= in_flight > (d - 2) * tile  # the tiles ahead cover it
    assert dma_depth(dma, 4 << 20) == MULTI_BUFFER  # a big tile: double buffering
    assert dma_depth(dma, 1 << 10) == dma.queues_per_engine  # a tiny one: one per queue


def test_by_default_a_loop_made_tile_avoids_the_bytes_of_dma_depth_iterations():
    from trnsim.hw import core
    from trnsim.nki.legacy.allocator import dma_depth

    x = np.empty((16, 128, 256), np.float32)  # 128 KiB tiles
    depth = dma_depth(core(TRN1).dma, 128 * 256 * 4)
    assert depth > 2
    its = _iterations(record(_scale_loop(None), x, target=TRN1))
    for k in range(depth - 1, 16):
        load = its[k][0].dst[0]
        earlier = [
            o for it in its[k - depth + 1 : k] for i in it for o in (*i.dst, *i.src)
            if o.memory == "sbuf"
        ]  # fmt: skip
        assert earlier and not any(_overlap(load, o) for o in earlier)


def test_the_default_depth_hides_the_load_latency_two_buffers_do_not():
    # each iteration: a 128 KiB load (~1.3 us fixed latency + 0.5 us of data on trn1) and a
    # short exp; with two buffers a load waits for the exp two iterations back, so the loop
    # runs at one load latency per two iterations; with the default depth at the DMA's rate
    x = np.empty((32, 128, 256), np.float32)
    two = schedule(record(_scale_loop(2), x, target=TRN1), TRN1, launch_s=0.0)
    auto = schedule(record(_scale_loop(None), x, target=TRN1), TRN1, launch_s=0.0)
    assert auto.hbm_read_bytes == two.hbm_read_bytes == x.nbytes
    assert auto.total_s < 0.8 * two.total_s
