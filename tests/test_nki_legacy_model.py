"""The legacy programming model (SDK 2.26 programming guide), tested from what the docs say."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import trnsim.nki as tnki
from trnsim.errors import KernelError

tnki.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.compiler as ncc  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

RNG = np.random.default_rng(0)


def _f32(*shape: int) -> np.ndarray:
    return RNG.uniform(-1, 1, shape).astype(np.float32)


# ---- programming model --------------------------------------------------------------------------


def test_index_expressions_mgrid_and_affine_offsets() -> None:
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
        g = nl.mgrid[0:128, 0:64]
        t = nl.load(a[g.p, 64 + g.x])  # the right half of each row
        nl.store(out[g.p, g.x], value=t)
        return out

    a = _f32(128, 128)
    np.testing.assert_array_equal(k(a), a[:, 64:])


def test_strided_index_expression_selects_every_other_column() -> None:
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 32), dtype=a.dtype, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(32)[None, :]
        nl.store(out[i_p, i_f], value=nl.load(a[i_p, 2 * i_f + 1]))
        return out

    a = _f32(128, 64)
    np.testing.assert_array_equal(k(a), a[:, 1::2])


def test_mask_restricts_load_compute_and_store_to_a_box() -> None:
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        i_f = nl.arange(a.shape[1])[None, :]
        for p in nl.affine_range(2):
            i_p = p * 128 + nl.arange(128)[:, None]
            t = nl.load(a[i_p, i_f], mask=(i_p < a.shape[0]))
            e = nl.exp(t, mask=(i_p < a.shape[0]))
            nl.store(out[i_p, i_f], value=e, mask=(i_p < a.shape[0]))
        return out

    a = _f32(200, 16)
    np.testing.assert_allclose(k(a), np.exp(a), rtol=1e-6)


def test_index_outside_tensor_without_mask_is_an_error_with_the_kernel_line() -> None:
    @nki.jit
    def k(a):
        i_p = 100 + nl.arange(128)[:, None]
        return nl.load(a[i_p, nl.arange(8)[None, :]])

    with pytest.raises(KernelError, match=r"out-of-bounds.*100\.\.227.*test_nki_legacy"):
        k(_f32(128, 8))


def test_non_box_mask_is_refused() -> None:
    @nki.jit
    def k(a):
        i_p, i_f = nl.mgrid[0:128, 0:128]
        t = nl.load(a)
        return nl.exp(t, mask=(i_p >= i_f))

    with pytest.raises(KernelError, match="128 boxes"):  # one per partition: past MAX_BOXES
        k(_f32(128, 128))


def test_mask_of_several_boxes_issues_one_instruction_per_box() -> None:
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:64, 0:16]
        t = nl.load(a)
        r = nl.zeros((64, 16), dtype=a.dtype, buffer=nl.sbuf)
        r[i_p, i_f] = nl.exp(t, mask=((i_p < 32) & (i_f < 8)) | ((i_p >= 32) & (i_f >= 4)))
        nl.store(out, r)
        return out

    a = _f32(64, 16)
    want = np.zeros_like(a)
    want[:32, :8] = np.exp(a[:32, :8])
    want[32:, 4:] = np.exp(a[32:, 4:])
    np.testing.assert_allclose(k(a), want, rtol=1e-6)


def test_par_dim_block_tensor_and_returned_psum_accumulation() -> None:
    @nki.jit
    def k(lhs_t, rhs):
        kt = lhs_t.shape[0] // 128
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        a = nl.ndarray((kt, nl.par_dim(128), 128), dtype=lhs_t.dtype, buffer=nl.sbuf)
        b = nl.ndarray((kt, nl.par_dim(128), 512), dtype=rhs.dtype, buffer=nl.sbuf)
        for i in nl.affine_range(kt):
            a[i] = nl.load(lhs_t[i * 128 : (i + 1) * 128, :])
            b[i] = nl.load(rhs[i * 128 : (i + 1) * 128, :])
        acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
        for i in nl.affine_range(kt):
            acc += nisa.nc_matmul(a[i], b[i])
        nl.store(out, value=nl.copy(acc))
        return out

    lhs_t, rhs = _f32(384, 128), _f32(384, 512)
    np.testing.assert_allclose(k(lhs_t, rhs), lhs_t.T @ rhs, rtol=1e-4, atol=1e-4)


def test_accumulate_into_psum_issues_one_matmul_per_call_no_copy() -> None:
    @nki.jit
    def k(x, y):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
        xs, ys = nl.load(x), nl.load(y)
        for _ in nl.affine_range(3):
            acc[...] += nl.matmul(xs, ys, transpose_x=True)
        nl.store(out, value=nl.copy(acc))
        return out

    x, y = _f32(128, 128), _f32(128, 512)
    res = tnki.run(k, x, y)
    ops = [i.opcode.value for i in res.instructions]
    assert ops.count("nc_matmul") == 3 and ops.count("tensor_copy") == 1
    np.testing.assert_allclose(res.outputs, 3 * (x.T @ y), rtol=1e-4, atol=1e-4)


def test_legacy_type_promotion_table() -> None:
    from trnsim.nki.legacy.differences import promote

    f16, bf16 = np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)
    assert promote(f16, bf16) == np.float32  # the docs' "new widened type"
    assert promote(np.dtype(np.int8), np.dtype(np.uint8)) == np.int16
    assert promote(np.dtype(np.int32), np.dtype(np.uint32)) == np.float32
    assert promote(np.dtype(ml_dtypes.float8_e4m3), bf16) == bf16
    assert promote(np.dtype(np.int32), f16) == f16

    @nki.jit
    def k(a, b):
        out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        c = nl.add(nl.load(a), nl.load(b))
        assert c.dtype == np.float32
        nl.store(out, value=c)
        return out

    a = _f32(128, 8).astype(np.float16)
    b = _f32(128, 8).astype(ml_dtypes.bfloat16)
    np.testing.assert_allclose(k(a, b), a.astype(np.float32) + b.astype(np.float32), rtol=1e-6)


def test_spmd_grid_program_ids_and_two_core_spmd_dim() -> None:
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        i, j = nl.program_id(0), nl.program_id(1)
        assert nl.num_programs() == 8 and nl.program_ndim() == 2
        t = nl.load(a[i, j])
        nl.store(out[i, j], value=nl.add(t, float(i * 10 + j)))
        return out

    a = _f32(4, 2, 1, 8)
    expect = a + (np.arange(4)[:, None] * 10 + np.arange(2)[None, :])[:, :, None, None]
    np.testing.assert_allclose(k[4, 2](a), expect, rtol=1e-6)
    res = tnki.run(k[nl.spmd_dim(nl.nc(2), 2), 2], a, target="gen3")
    np.testing.assert_allclose(res.outputs, expect, rtol=1e-6)
    assert len(res.cores) == 2 and all(c.record for c in res.cores)


def test_mod_alloc_places_blocks_modulo_and_detects_reuse() -> None:
    @nki.jit
    def ok(a):
        out = nl.ndarray((4, 128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(
            (4, nl.par_dim(128), 64),
            dtype=a.dtype,
            buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)),
        )
        for i in nl.sequential_range(4):
            t[i] = nl.load(a[i])
            nl.store(out[i], value=t[i])
        return out

    a = _f32(4, 128, 64)
    np.testing.assert_array_equal(ok(a), a)

    @nki.jit
    def reused(a):
        t = nl.ndarray(
            (4, nl.par_dim(128), 64),
            dtype=a.dtype,
            buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)),
        )
        for i in nl.sequential_range(4):
            t[i] = nl.load(a[i])
        return nl.exp(t[0])  # block 0's slot now holds block 2

    with pytest.raises(KernelError, match=r"tile-reused.*block \[0\].*block \[2\]"):
        reused(a)


def test_iota_and_affine_select_from_index_expressions() -> None:
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:128, 0:128]
        io = nisa.iota(i_p * 2 + i_f, dtype=nl.float32)
        sel = nisa.affine_select(i_p - i_f >= 0, io, -1.0)
        nl.store(out, value=sel)
        return out

    p, f = np.mgrid[0:128, 0:128]
    np.testing.assert_array_equal(k(_f32(1, 1)), np.where(p >= f, 2 * p + f, -1.0))


def test_tile_size_reads_the_target() -> None:
    @nki.jit
    def k(a):
        assert nl.tile_size.pmax == 128 and nl.tile_size.gemm_moving_fmax == 512
        return a

    k(_f32(1, 1))


def test_loop_reduce_reduces_into_the_assigned_tile() -> None:
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        b = nl.zeros((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        for i in nl.affine_range(a.shape[0]):
            b = nl.loop_reduce(nl.load(a[i]), op=np.maximum, loop_indices=[i])
        nl.store(out, value=b)
        return out

    a = _f32(3, 128, 64)
    np.testing.assert_array_equal(k(a), np.maximum(a.max(axis=0), 0))


def test_psum_zeros_fold_into_the_first_matmul_but_stay_zeros_otherwise() -> None:
    @nki.jit
    def k(x, y):
        out = nl.ndarray((2, 128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
        acc += nl.matmul(nl.load(x), nl.load(y), transpose_x=True)
        nl.store(out[0], value=acc)
        untouched = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
        nl.store(out[1], value=untouched)
        return out

    x, y = _f32(128, 128), _f32(128, 512)
    res = tnki.run(k, x, y)
    ops = [i.opcode.value for i in res.instructions]
    assert ops.count("memset") == 1  # only the tile no matmul wrote
    np.testing.assert_allclose(res.outputs[0], x.T @ y, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(res.outputs[1], 0)


def test_indirect_rows_gather_and_scatter_through_an_index_tile() -> None:
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 16), dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.zeros((128, 16), dtype=a.dtype))
        i_f = nl.arange(16)[None, :]
        idx = nisa.iota(3 * nl.arange(32)[:, None], dtype=nl.int32)
        rows = nl.load(a[idx, i_f])  # rows 0, 3, 6, ...
        nl.store(out[idx, i_f], value=rows)
        return out

    a = _f32(128, 16)
    expect = np.zeros_like(a)
    expect[0:96:3] = a[0:96:3]
    np.testing.assert_array_equal(k(a), expect)


def test_rand_is_uniform_in_the_unit_interval() -> None:
    @nki.jit
    def k():
        out = nl.ndarray((32, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.rand((32, 128)))
        return out

    r = k()
    assert r.min() >= 0.0 and r.max() <= 1.0 and 0.4 < r.mean() < 0.6
