"""Legacy ``nisa`` calls lowered onto the NKI 0.6 instructions (dropout, nc_match_replace8,
nc_stream_shuffle, sequence_bounds, max8 with a mask), checked against NumPy references written
from the SDK 2.26 docstrings."""

from __future__ import annotations

import numpy as np
import pytest

import trnsim.nki as tnki

tnki.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

RNG = np.random.default_rng(7)


def test_dropout_probability_zero_keeps_and_one_zeroes_per_partition() -> None:
    @nki.jit
    def k(a, p):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nisa.dropout(nl.load(a), prob=nl.load(p)))
        return out

    a = RNG.uniform(1, 2, (4, 64)).astype(np.float32)
    p = np.array([[0.0], [1.0], [0.0], [1.0]], np.float32)
    out = k(a, p)
    np.testing.assert_array_equal(out[[0, 2]], a[[0, 2]])
    assert not out[[1, 3]].any()


def test_dropout_scalar_probability_drops_about_that_fraction() -> None:
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nisa.dropout(nl.load(a), prob=0.25))
        return out

    a = RNG.uniform(1, 2, (128, 512)).astype(np.float32)
    out = k(a)
    kept = out != 0
    np.testing.assert_array_equal(out[kept], a[kept])
    assert abs(1 - kept.mean() - 0.25) < 0.02


def _replace_first(data: np.ndarray, vals: np.ndarray, imm: float):
    out, idx = data.copy(), np.zeros(vals.shape, np.uint32)
    for p in range(data.shape[0]):
        used: set[int] = set()
        for j, v in enumerate(vals[p]):
            i = next(i for i, x in enumerate(data[p]) if x == v and i not in used)
            used.add(i)
            idx[p, j] = i
            out[p, i] = imm
    return out, idx


def test_max8_and_match_replace8_under_a_mask_touch_only_the_box() -> None:
    @nki.jit
    def k(a):
        n, m = a.shape
        out = nl.ndarray([n, m], dtype=a.dtype, buffer=nl.shared_hbm)
        idx_out = nl.ndarray([n, 8], dtype=nl.uint32, buffer=nl.shared_hbm)
        idx = nisa.memset(shape=(n, 8), value=0, dtype=nl.uint32)
        ix, iy = nl.mgrid[0:n, 0:m]
        t = nl.load(a)
        top = nisa.max8(src=t[ix, iy], mask=(ix < 8) & (iy < 32))
        r = nisa.nc_match_replace8(
            dst_idx=idx[:, :], data=t[ix, iy], vals=top, imm=-1.0, mask=(ix < 8) & (iy < 32)
        )
        nl.store(out, r)
        nl.store(idx_out, idx)
        return out, idx_out

    a = RNG.permutation(16 * 64).reshape(16, 64).astype(np.float32)
    out, idx = k(a)
    box = a[:8, :32]
    want, want_idx = _replace_first(box, -np.sort(-box, axis=1)[:, :8], -1.0)
    np.testing.assert_array_equal(out[:8, :32], want)
    np.testing.assert_array_equal(idx[:8], want_idx)
    assert not idx[8:].any()  # partitions outside the mask keep the memset zeros


def test_stream_shuffle_rotates_partitions_within_each_quadrant() -> None:
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        b = nl.ndarray(a.shape, dtype=a.dtype)
        nisa.nc_stream_shuffle(src=t, dst=b, shuffle_mask=[(i + 3) % 32 for i in range(32)])
        nl.store(out, b)
        return out

    a = RNG.uniform(-1, 1, (64, 16)).astype(np.float32)
    src = np.array([q * 32 + (i + 3) % 32 for q in range(2) for i in range(32)])
    np.testing.assert_array_equal(k(a), a[src])


def test_sequence_bounds_gives_start_and_end_of_each_segment() -> None:
    @nki.jit
    def k(s):
        out = nl.ndarray((1, 2, s.shape[1]), dtype=s.dtype, buffer=nl.shared_hbm)
        nl.store(out, nisa.sequence_bounds(segment_ids=nl.load(s)))
        return out

    seg = np.array([[0, 4, 4, 2, 2, 2, 0, 5, 5, 5, 5]], np.int32)
    n = seg.shape[1]
    start = np.array([n if s == 0 else int(np.argmax(seg[0] == s)) for s in seg[0]])
    end = np.array([-1 if s == 0 else n - int(np.argmax(seg[0][::-1] == s)) for s in seg[0]])
    np.testing.assert_array_equal(k(seg)[0], np.stack([start, end]))


def test_double_row_matmul_contracts_over_partitions_and_the_pair_axis() -> None:
    import ml_dtypes

    f8 = ml_dtypes.float8_e5m2

    @nki.jit
    def k(a, b):
        out = nl.ndarray([a.shape[2], b.shape[2]], dtype=nl.float32, buffer=nl.shared_hbm)
        c = nisa.nc_matmul(nl.load(a), nl.load(b), perf_mode="double_row_gen3")
        nl.store(out, c)
        return out

    a = RNG.integers(-3, 4, (128, 2, 16)).astype(f8)
    b = RNG.integers(-3, 4, (128, 2, 64)).astype(f8)
    want = np.einsum("kpm,kpn->mn", a.astype(np.float32), b.astype(np.float32))
    np.testing.assert_array_equal(k(a, b), want)


def test_local_gather_returns_every_valid_index_of_the_core_per_partition() -> None:
    @nki.jit
    def k(src, idx):
        out = nl.ndarray((src.shape[0], 16 * idx.shape[1] * 2), dtype=src.dtype,
                         buffer=nl.shared_hbm)  # fmt: skip
        nl.store(out, nisa.local_gather(nl.load(src), nl.load(idx), 2))
        return out

    src = RNG.uniform(-1, 1, (32, 40)).astype(np.float32)
    idx = RNG.integers(0, 38, (32, 3)).astype(np.uint16)
    want = np.empty((32, 96), np.float32)
    for g in (0, 16):
        ids = idx[g : g + 16].reshape(-1, order="F").astype(int)  # partition dim first
        picks = (ids[:, None] + np.arange(2)).reshape(-1)
        want[g : g + 16] = src[g : g + 16][:, picks]
    np.testing.assert_array_equal(k(src, idx), want)


def test_gather_flattened_and_single_partition_scalar_writes() -> None:
    # t[i, j] = x for one partition i (not a legal compute start partition) is staged through
    # a DMA; gather_flattened reads each partition's flattened row at the indices
    @nki.jit
    def k(d):
        idx = nl.zeros((8, 3), dtype=nl.uint32)
        for i in nl.static_range(8):
            for j in nl.static_range(3):
                idx[i, j] = (i + 2 * j) % 6
        out = nl.ndarray((8, 3), dtype=d.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.gather_flattened(data=nl.load(d), indices=idx))
        return out

    d = RNG.uniform(-1, 1, (8, 2, 3)).astype(np.float32)
    want = np.array([[d[i].reshape(-1)[(i + 2 * j) % 6] for j in range(3)] for i in range(8)])
    np.testing.assert_array_equal(k(d), want)


def test_nl_dropout_rate_one_zeroes_everything() -> None:
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.dropout(nl.load(a), rate=1.0))
        return out

    assert not k(RNG.uniform(1, 2, (16, 32)).astype(np.float32)).any()


# ---- read-modify-write on indirectly indexed HBM (nl.atomic_rmw, dma_copy dst_rmw_op) ------------


def test_atomic_rmw_adds_into_the_rows_an_index_tile_names() -> None:
    """``nl.atomic_rmw(t[idx_tile, ix], value, np.add)``: rows idx of t grow by value (2.26
    ``atomic_rmw`` docstring), the rest of t unchanged."""
    import neuronxcc.nki as lnki
    import neuronxcc.nki.language as lnl

    @lnki.jit
    def k(base, idx_in, vals):
        t = lnl.ndarray(base.shape, dtype=base.dtype, buffer=lnl.shared_hbm)
        lnl.store(t, lnl.load(base))
        idx = lnl.load(idx_in)
        ix = lnl.arange(base.shape[1])[None, :]
        lnl.atomic_rmw(t[idx, ix], value=lnl.load(vals), op=np.add)
        return t

    rng = np.random.default_rng(3)
    base = rng.standard_normal((16, 8)).astype(np.float32)
    idx = np.array([[9], [2], [14], [0]], np.int32)
    vals = rng.standard_normal((4, 8)).astype(np.float32)
    got = k(base, idx, vals)
    want = base.copy()
    want[idx[:, 0]] += vals
    np.testing.assert_array_equal(got, want)


def test_activation_derivatives_lower_onto_the_new_api() -> None:
    """``nl.silu_dx`` / ``nl.erf_dx`` (2.26 ``nki.language``): d/dx silu = s(x)(1 + x(1 - s(x)))
    and d/dx erf = 2 / sqrt(pi) exp(-x^2)."""
    import neuronxcc.nki as lnki
    import neuronxcc.nki.language as lnl

    @lnki.jit
    def k(x):
        a = lnl.ndarray(x.shape, dtype=x.dtype, buffer=lnl.shared_hbm)
        b = lnl.ndarray(x.shape, dtype=x.dtype, buffer=lnl.shared_hbm)
        t = lnl.load(x)
        lnl.store(a, lnl.silu_dx(t))
        lnl.store(b, lnl.erf_dx(t))
        return a, b

    x = np.linspace(-3, 3, 128 * 4, dtype=np.float32).reshape(128, 4)
    a, b = k(x)
    xs = x.astype(np.float64)
    s = 1 / (1 + np.exp(-xs))
    np.testing.assert_allclose(a, s * (1 + xs * (1 - s)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b, 2 / np.sqrt(np.pi) * np.exp(-xs * xs), rtol=1e-5, atol=1e-6)


# ---- issue 27: the SDK main branch's cumulative op, nl.softmax, nl.constants -------------------


def _cumulative(src, op0, op1, imm0, imm1=None, reduce_cmd=None, chain=False):
    @nki.jit
    def k(x, i0, i1):
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        s = nl.load(x)
        a0 = nl.load(i0) if i0.shape[1] == 1 and i0.shape[0] > 1 else float(imm0)
        a1 = None if imm1 is None else (nl.load(i1) if i1.shape[0] > 1 else float(imm1))
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        cmd = reduce_cmd or nisa.reduce_cmd.reset_reduce
        nisa.tensor_scalar_cumulative(
            src=s, dst=d, op0=op0, op1=op1, imm0=a0, imm1=a1, reduce_cmd=cmd
        )
        if chain:
            nisa.tensor_scalar_cumulative(
                src=s, dst=d, op0=op0, op1=op1, imm0=a0, imm1=a1, reduce_cmd=nisa.reduce_cmd.reduce
            )
        nl.store(out, value=d)
        return out

    i0 = np.asarray(imm0, np.float32).reshape(-1, 1)
    i1 = np.asarray(0.0 if imm1 is None else imm1, np.float32).reshape(-1, 1)
    return k(src, i0, i1)


def _scan(x: np.ndarray, op0, op1, imm0, start: np.ndarray) -> np.ndarray:
    """The docstring's pseudocode: reg = op1(op0(x[i], imm0), reg), out[i] = reg."""
    y = op0(x.astype(np.float64), np.asarray(imm0, np.float64))
    out, reg = np.empty_like(y), np.broadcast_to(start, (x.shape[0],)).astype(np.float64)
    for i in range(x.shape[1]):
        reg = op1(y[:, i], reg)
        out[:, i] = reg
    return out


def test_tensor_scalar_cumulative_reset_reduce_with_scalar_and_vector_imm0() -> None:
    x = RNG.uniform(0.5, 1.5, (128, 32)).astype(np.float32)
    got = _cumulative(x, nl.add, nl.add, 0.25)
    np.testing.assert_allclose(got, _scan(x, np.add, np.add, 0.25, 0.0), rtol=1e-5)
    v = RNG.uniform(0, 1, (128, 1)).astype(np.float32)
    got = _cumulative(x, nl.multiply, nl.maximum, v)
    np.testing.assert_allclose(got, _scan(x, np.multiply, np.maximum, v, -np.inf), rtol=1e-6)


def test_tensor_scalar_cumulative_load_reduce_starts_from_imm1() -> None:
    x = RNG.uniform(0.5, 1.5, (128, 16)).astype(np.float32)
    one, start = np.ones((128, 1), np.float32), RNG.uniform(-1, 1, (128, 1)).astype(np.float32)
    got = _cumulative(x, nl.add, nl.add, one, start, nisa.reduce_cmd.load_reduce)
    np.testing.assert_allclose(got, _scan(x, np.add, np.add, one, start[:, 0]), rtol=1e-5)
    got = _cumulative(x, nl.add, nl.minimum, one, np.zeros((128, 1), np.float32),
                      nisa.reduce_cmd.load_reduce)  # fmt: skip
    assert not got.any()  # min(x + 1, 0) = 0 throughout


def test_tensor_scalar_cumulative_reduce_goes_on_from_the_last_instruction() -> None:
    x = np.ones((128, 8), np.float32)
    got = _cumulative(x, nl.add, nl.add, 0.0, chain=True)
    want = np.broadcast_to(np.arange(1, 9, dtype=np.float32) + 8, (128, 8))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("axis", [[2], [1, 2]])
def test_softmax_along_free_axes(axis) -> None:
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.softmax(nl.load(x), axis=axis))
        return out

    x = RNG.normal(size=(128, 4, 16)).astype(np.float32)
    ax = tuple(a for a in axis)
    e = np.exp(x.astype(np.float64) - x.max(axis=ax, keepdims=True))
    np.testing.assert_allclose(k(x), e / e.sum(axis=ax, keepdims=True), rtol=2e-6, atol=1e-7)


def test_softmax_of_the_partition_axis_is_refused() -> None:
    from trnsim.errors import KernelError

    @nki.jit
    def k(x):
        return nl.softmax(nl.load(x), axis=0)

    with pytest.raises(KernelError, match="reduce-axis"):
        k(np.zeros((128, 8), np.float32))


def test_language_constants_module() -> None:
    import neuronxcc.nki.language.constants as constants
    from neuronxcc.nki.language.constants import sizeinbytes

    assert sizeinbytes(nl.bfloat16) == 2 and sizeinbytes(np.float32) == 4
    assert constants.sbuf_min_align == nl.tile_size.sbuf_min_align


def test_nc_matmul_is_transpose_is_a_hint_on_v2() -> None:
    """2.26 docstring: is_transpose "hints to the compiler that this is a transpose operation";
    the Tensor engine's transpose mode starts at NeuronCore-v3, so on v2 the instruction
    computes stationary.T @ moving (Autocomp's attention candidates pass a non-identity
    moving tile and were measured on trn1)."""

    @nki.jit
    def k(a, b):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        x = nl.load(a)
        y = nl.load(b)
        p = nisa.nc_matmul(stationary=x, moving=y, is_transpose=True)
        nl.store(out, nl.copy(p))
        return out

    a = RNG.uniform(-1, 1, (128, 128)).astype(np.float32)
    b = RNG.uniform(-1, 1, (128, 512)).astype(np.float32)
    out = tnki.run(k, a, b, target="gen2").outputs
    np.testing.assert_allclose(out, a.T.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def _bn_stats_kernel(cols: int, chunk: int):
    @nki.jit
    def k(a):
        # mean and variance of each row of a [128, cols] tile, by bn_stats over chunk-wide
        # pieces whose last one is masked to the tile's width, then bn_aggr
        out = nl.ndarray((128, 2), dtype=np.float32, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None]
        x = nl.load(a)
        n = (cols + chunk - 1) // chunk
        i_f = nl.arange(chunk)[None, :]
        i_s = nl.arange(6)[None, :]
        stats = nl.ndarray((128, 6 * n), dtype=np.float32)
        for j in nl.affine_range(n):
            stats[i_p, j * 6 + i_s] = nisa.bn_stats(
                x[i_p, j * chunk + i_f], mask=(j * chunk + i_f < cols), dtype=np.float32
            )
        nl.store(out, nisa.bn_aggr(stats))
        return out

    return k


def test_bn_stats_mask_keeps_the_tail_of_the_last_chunk() -> None:
    # the SDK layernorm tutorial's v2 pattern: 1000 columns in 512-wide chunks
    a = RNG.standard_normal((128, 1000)).astype(np.float32) * 3 + 1
    out = _bn_stats_kernel(1000, 512)(a)
    np.testing.assert_allclose(out[:, 0], a.astype(np.float64).mean(axis=1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out[:, 1], a.astype(np.float64).var(axis=1), rtol=1e-4)


def test_bn_stats_without_the_mask_reading_past_the_tile_is_out_of_bounds() -> None:
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 6), dtype=np.float32, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(512)[None, :]
        x = nl.load(a)
        nl.store(out, nisa.bn_stats(x[i_p, 512 + i_f], dtype=np.float32))
        return out

    with pytest.raises(Exception, match="out-of-bounds"):
        k(RNG.standard_normal((128, 1000)).astype(np.float32))


def test_bn_stats_mask_over_partitions_is_not_implemented() -> None:
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 6), dtype=np.float32, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(512)[None, :]
        x = nl.load(a)
        nl.store(out, nisa.bn_stats(x[i_p, i_f], mask=(i_p < 64), dtype=np.float32))
        return out

    with pytest.raises(Exception, match=r"not-implemented: nisa\.bn_stats"):
        k(RNG.standard_normal((128, 512)).astype(np.float32))


@pytest.mark.parametrize("engine", [None, "vector", "tensor"])
def test_nc_transpose_engine_is_chosen_from_the_shape_as_the_legacy_compiler_did(engine) -> None:
    """The NKI 0.4.0 release notes: "Fixed nki.isa.nc_transpose silently ignoring the engine
    argument"; before it the compiler chose the engine itself (2.26 docstring: "based on the
    input shape"), so a [128, 64] transpose asked of the Vector engine (its limit is 32 x 32)
    ran on the Tensor engine, and every engine= gives the placement of no engine= at all;
    the values are the exact transpose either way."""
    from trnsim.core.isa import Engine, Op

    kw = {} if engine is None else {"engine": getattr(nisa, f"{engine}_engine")}

    @nki.jit
    def k(a, b, *, kw):
        out_a = nl.ndarray((64, 128), dtype=a.dtype, buffer=nl.shared_hbm)
        out_b = nl.ndarray((16, 32), dtype=b.dtype, buffer=nl.shared_hbm)
        nl.store(out_a, nl.copy(nisa.nc_transpose(nl.load(a), **kw)))
        nl.store(out_b, nl.copy(nisa.nc_transpose(nl.load(b), **kw)))
        return out_a, out_b

    a = RNG.uniform(-1, 1, (128, 64)).astype(np.float32)
    b = RNG.uniform(-1, 1, (32, 16)).astype(np.float32)

    def engines(res):
        return [i.engine for i in res.instructions if i.opcode is Op.NC_TRANSPOSE]

    res = tnki.run(k, a, b, kw=kw, target="gen2")
    np.testing.assert_array_equal(res.outputs[0], a.T)
    np.testing.assert_array_equal(res.outputs[1], b.T)
    assert engines(res)[0] is Engine.TENSOR
    assert engines(res) == engines(tnki.run(k, a, b, kw={}, target="gen2"))


def test_nc_transpose_with_a_bad_engine_is_still_an_error() -> None:
    @nki.jit
    def k(a):
        out = nl.ndarray((64, 128), dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.copy(nisa.nc_transpose(nl.load(a), engine="gpu")))
        return out

    with pytest.raises(Exception, match="engine"):
        k(np.zeros((128, 64), np.float32))
