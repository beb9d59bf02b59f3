"""The issue-27 repros (``/work/shared/repros/kernel-timing`` r1-r4, t5, t6 and
``legacy-front-end``), kernels of this project, as tests: each runs, matches NumPy and shows
what the Neuron compiler does with the same code (no ``overlap`` error, no memset or spill where
the compiler makes none, loads of one iteration under the compute of another)."""

from __future__ import annotations

import os
from collections import Counter

import ml_dtypes
import numpy as np
import pytest

import trnsim.nki as tnki
from trnsim.core.timing import schedule
from trnsim.nki.benchmark import record

tnki.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

RNG = np.random.default_rng(27)
TRN1 = "gen2"  # the repros' target: 192 KiB of SBUF per partition, 8 PSUM banks


def _spills(instructions) -> int:
    return sum(1 for i in instructions if i.attr("spill") is not None)


def _ops(instructions) -> Counter:
    return Counter(i.opcode.value for i in instructions)


# ---- kernel-timing r1: block tensors allocated per block, by liveness --------------------------


@nki.jit
def two_block_tensors(x):
    """Two 128 KiB block tensors (32 blocks of [128, 1024] fp32) whose blocks live for one
    iteration each: both do not fit side by side, their live blocks do."""
    out = nl.ndarray((32, 128, 1024), dtype=np.float32, buffer=nl.shared_hbm)
    a = nl.ndarray((32, nl.par_dim(128), 1024), dtype=np.float32, buffer=nl.sbuf)
    b = nl.ndarray((32, nl.par_dim(128), 1024), dtype=np.float32, buffer=nl.sbuf)
    for i in nl.affine_range(32):
        a[i, :, :] = nl.load(x[i])
        b[i, :, :] = nl.multiply(a[i, :, :], 2.0)
        nl.store(out[i], value=b[i, :, :])
    return out


def test_r1_block_tensors_whose_live_blocks_fit_run_without_spills():
    x = RNG.random((32, 128, 1024), dtype=np.float32)
    res = tnki.run(two_block_tensors, x, target=TRN1)
    np.testing.assert_array_equal(res.outputs, 2 * x)
    assert _spills(res.instructions) == 0
    assert _ops(res.instructions)["dma_copy"] == 64  # the loads and stores, nothing more


# ---- kernel-timing r2: a live plain tile is never given away ------------------------------------


@nki.jit
def constant_beside_dead_blocks(w, c_in):
    """Per outer iteration 44 blocks of [128, 1024] fp32 (176 KiB) and a 0.5 KiB constant
    tile live to the end: the second iteration's blocks must reuse the first's dead blocks,
    never the constant."""
    out = nl.ndarray((2, 128, 128), dtype=np.float32, buffer=nl.shared_hbm)
    c = nl.load(c_in)
    wt = nl.ndarray((2, 44, nl.par_dim(128), 1024), dtype=np.float32, buffer=nl.sbuf)
    for i0 in nl.affine_range(2):
        for i1 in nl.affine_range(44):
            wt[i0, i1, :, :] = nl.load(w[i0, i1])
        acc = nl.multiply(c, 1.0)
        for i1 in nl.affine_range(44):
            acc = nl.add(acc, wt[i0, i1, :, 0:128])
        nl.store(out[i0], value=acc)
    return out


def test_r2_a_live_constant_tile_outlives_dead_blocks():
    w = RNG.random((2, 44, 128, 1024), dtype=np.float32)
    c = RNG.random((128, 128), dtype=np.float32)
    res = tnki.run(constant_beside_dead_blocks, w, c, target=TRN1)
    want = c[None].astype(np.float64) + w[:, :, :, :128].astype(np.float64).sum(axis=1)
    np.testing.assert_allclose(res.outputs, want, rtol=1e-5)
    assert _spills(res.instructions) == 0


# ---- kernel-timing r3 / legacy-front-end: loop_reduce into an indexed target ------------------


@nki.jit
def row_sums_by_loop_reduce(x):
    out = nl.ndarray((128, 1), dtype=np.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((nl.par_dim(128), 1), dtype=np.float32, buffer=nl.sbuf)
    for j in nl.affine_range(4):
        xt = nl.load(x[:, nl.ds(j * 512, 512)])
        part = nisa.tensor_reduce(nl.add, data=xt, axis=[1], dtype=np.float32)
        acc[:, 0] = nl.loop_reduce(part, op=np.add, loop_indices=[j], dtype=np.float32)
    nl.store(out, value=acc)
    return out


def test_r3_loop_reduce_assigned_to_a_subscript():
    x = RNG.random((128, 2048), dtype=np.float32)
    out = tnki.run(row_sums_by_loop_reduce, x, target=TRN1).outputs
    np.testing.assert_allclose(out, x.astype(np.float64).sum(axis=1, keepdims=True), rtol=1e-5)


@nki.jit
def max_into_blocks(x):
    """``acc[i2, i_p, 0] = nl.loop_reduce(...)`` over the outer loop, into blocks of a block
    tensor nothing initialised: the first iteration of ``loop_indices`` initialises them."""
    out = nl.ndarray((2, 128, 1), dtype=x.dtype, buffer=nl.shared_hbm)
    acc = nl.ndarray((2, nl.par_dim(128), 1), dtype=np.float32, buffer=nl.sbuf)
    i_p, i_f = nl.arange(128)[:, None], nl.arange(64)[None, :]
    for i1 in nl.affine_range(3):
        for i2 in nl.affine_range(2):
            t = nl.load(x[i1, i2, i_p, i_f])
            r = nisa.tensor_reduce(nl.max, data=t, axis=[1], dtype=np.float32)
            acc[i2, i_p, 0] = nl.loop_reduce(r, op=np.max, loop_indices=[i1], dtype=np.float32)
    for i2 in nl.affine_range(2):
        nl.store(out[i2, i_p, 0], acc[i2, i_p, 0])
    return out


def test_loop_reduce_into_a_block_initialises_on_the_first_iteration():
    x = RNG.normal(size=(3, 2, 128, 64)).astype(np.float32)
    np.testing.assert_array_equal(max_into_blocks(x), x.max(axis=(0, 3))[..., None])


# ---- kernel-timing r4 / legacy-front-end: a mask covers every operand --------------------------


@nki.jit
def exp_of_ragged_rows(x):
    out = nl.ndarray((192, 512), dtype=np.float32, buffer=nl.shared_hbm)
    zero = nl.ndarray((nl.par_dim(128), 1), dtype=np.float32, buffer=nl.sbuf)
    zero[...] = nisa.memset(shape=(128, 1), value=0.0, dtype=np.float32)
    ip, jf = nl.mgrid[0:128, 0:512]
    for t in nl.affine_range(2):  # the second row tile has 64 valid rows
        valid = t * 128 + ip < 192
        xt = nl.load(x[t * 128 + ip, jf], mask=valid)
        yt = nisa.activation(op=nl.exp, data=xt, bias=zero, scale=1.0, mask=valid)
        nl.store(out[t * 128 + ip, jf], value=yt, mask=valid)
    return out


def test_r4_mask_applies_to_the_activation_bias():
    x = RNG.random((192, 512), dtype=np.float32)
    np.testing.assert_allclose(exp_of_ragged_rows(x), np.exp(x), rtol=1e-6)


@nki.jit
def sqrt_of_ragged_rows(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    zero = nisa.memset(shape=(128, 1), value=0.0, dtype=np.float32)
    i_p, i_f = nl.arange(128)[:, None], nl.arange(64)[None, :]
    for i in nl.affine_range(2):
        m = i * 128 + i_p < x.shape[0]
        t = nl.load(x[i * 128 + i_p, i_f], mask=m)
        r = nisa.activation(op=nl.sqrt, data=t, bias=zero[i_p, 0], scale=4.0, mask=m)
        nl.store(out[i * 128 + i_p, i_f], r, mask=m)
    return out


def test_mask_applies_to_an_indexed_bias_too():
    x = RNG.random((200, 64), dtype=np.float32)  # 72 valid rows in the second tile
    np.testing.assert_allclose(sqrt_of_ragged_rows(x), np.sqrt(4 * x), rtol=1e-6)


# ---- kernel-timing t5: lazily zeroed PSUM blocks ---------------------------------------------

NB = 16


@nki.jit
def lazy_psum_blocks(a, b):
    out = nl.ndarray((NB, 128, 512), dtype=np.float32, buffer=nl.shared_hbm)
    at = nl.ndarray((nl.par_dim(128), 128), dtype=np.float32, buffer=nl.sbuf)
    at[...] = nl.load(a)
    ps = nl.zeros(
        (NB, nl.par_dim(128), 512), dtype=np.float32, buffer=nl.psum, lazy_initialization=True
    )
    bt = nl.ndarray((NB, nl.par_dim(128), 512), dtype=np.float32, buffer=nl.sbuf)
    ot = nl.ndarray((NB, nl.par_dim(128), 512), dtype=np.float32, buffer=nl.sbuf)
    for i in nl.affine_range(NB):
        bt[i, :, :] = nl.load(b[i])
        ps[i, :, :] = nisa.nc_matmul(at[:, :], bt[i, :, :])
        ot[i, :, :] = nl.copy(ps[i, :, :], dtype=np.float32)
        nl.store(out[i], value=ot[i, :, :])
    return out


def test_t5_lazy_psum_zeros_make_no_memset_and_no_spill():
    a = RNG.random((128, 128), dtype=np.float32)
    b = RNG.random((NB, 128, 512), dtype=np.float32)
    res = tnki.run(lazy_psum_blocks, a, b, target=TRN1)
    np.testing.assert_allclose(res.outputs, np.einsum("km,ikn->imn", a, b), rtol=1e-5)
    ops = _ops(res.instructions)
    assert ops == Counter(nc_matmul=NB, tensor_copy=NB, dma_copy=1 + 2 * NB)
    assert _spills(res.instructions) == 0


# ---- kernel-timing t6: loads of the next iteration overlap this one's compute -----------------

T = 16


@nki.jit
def reciprocal_plain(x):
    out = nl.ndarray((T, 128, 1024), dtype=np.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(T):
        a = nl.load(x[i])
        r = nisa.reciprocal(data=a, dtype=np.float32)
        nl.store(out[i], value=r)
    return out


@nki.jit
def reciprocal_blocks(x):
    out = nl.ndarray((T, 128, 1024), dtype=np.float32, buffer=nl.shared_hbm)
    a = nl.ndarray((T, nl.par_dim(128), 1024), dtype=np.float32, buffer=nl.sbuf)
    r = nl.ndarray((T, nl.par_dim(128), 1024), dtype=np.float32, buffer=nl.sbuf)
    for i in nl.affine_range(T):
        a[i, :, :] = nl.load(x[i])
        r[i, :, :] = nisa.reciprocal(data=a[i, :, :], dtype=np.float32)
        nl.store(out[i], value=r[i, :, :])
    return out


@pytest.mark.parametrize("kernel", [reciprocal_plain, reciprocal_blocks], ids=lambda k: k.__name__)
def test_t6_independent_iterations_are_multi_buffered(kernel):
    x = RNG.random((T, 128, 1024), dtype=np.float32) + 1.0
    np.testing.assert_allclose(tnki.run(kernel, x, target=TRN1).outputs, 1 / x, rtol=1e-6)
    ins = record(kernel, np.empty_like(x), target=TRN1)
    loads = {o.offset for i in ins if i.opcode.value == "dma_copy" for o in i.dst
             if o.memory == "sbuf"}  # fmt: skip
    assert len(loads) >= 2  # iteration i + 1 loads into other bytes than iteration i
    prof = schedule(ins, TRN1)
    serial = prof.engine("vector").busy_s + prof.engine("dma").busy_s
    assert prof.total_s < 0.95 * serial  # loads run under the reciprocals


def test_t6_plain_tiles_time_like_block_tensors():
    x = np.empty((T, 128, 1024), np.float32)
    plain = schedule(record(reciprocal_plain, x, target=TRN1), TRN1).total_s
    blocks = schedule(record(reciprocal_blocks, x, target=TRN1), TRN1).total_s
    assert plain == pytest.approx(blocks, rel=0.05)


# ---- legacy-front-end: the rest -----------------------------------------------------------------


@nki.jit
def sum_all_but_last(x):
    out = nl.ndarray((128, 4), dtype=x.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 4), dtype=nl.float32, buffer=nl.sbuf)
    for j in nl.sequential_range(4):
        t = nl.load(x[:, j * 4 : (j + 1) * 4])
        acc[...] = nl.add(acc, t, mask=j + 1 < 4)  # a predicate on the iteration
    nl.store(out, acc)
    return out


def test_a_loop_index_only_mask_is_a_per_iteration_predicate():
    x = RNG.normal(size=(128, 16)).astype(np.float32)
    res = tnki.run(sum_all_but_last, x)
    np.testing.assert_allclose(res.outputs, x.reshape(128, 4, 4)[:, :3, :].sum(1), atol=1e-5)
    assert _ops(res.instructions)["tensor_tensor"] == 3  # the last iteration's add is skipped


@nki.jit(mode="trace")
def scale_into(dst_tile, src_tile, factor):
    dst_tile[...] = nl.multiply(src_tile, factor)


@nki.jit
def calls_a_traced_helper(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    scale_into(y, t, 2.0)  # traced inline, on the caller's core
    nl.store(out, nl.add(y, 1.0))
    return out


def test_a_jit_helper_called_in_a_kernel_is_traced_inline():
    x = RNG.normal(size=(128, 64)).astype(np.float32)
    res = tnki.run(calls_a_traced_helper, x)
    np.testing.assert_allclose(res.outputs, 2 * x + 1, rtol=1e-6)
    assert len(res.cores) == 1 and _ops(res.instructions)["tensor_scalar"] == 2


K, W = 3, 64


@nki.jit
def maxpool_rows(x):
    out = nl.ndarray((128, W - K + 1), dtype=x.dtype, buffer=nl.shared_hbm)
    i_h, i_kh, i_w = nl.mgrid[0:128, 0:K, 0:W]
    t = nl.load(x[i_h + i_kh, i_w])
    i_h, i_kh, i_w, i_kw = nl.mgrid[0:128, 0:K, 0 : W - K + 1, 0:K]
    o = nl.max(t[i_h, i_kh, i_w + i_kw], axis=[1, 3], mask=(i_h < 100))
    nl.store(out, o)
    return out


def test_a_reduction_over_axes_1_and_3_of_an_access_pattern():
    from numpy.lib.stride_tricks import sliding_window_view

    x = RNG.normal(size=(128 + K - 1, W)).astype(np.float32)
    want = sliding_window_view(x, (K, K)).max(axis=(-1, -2))[:128]
    out = maxpool_rows(x)
    np.testing.assert_array_equal(out[:100], want[:100])


@nki.jit
def transpose_into_fp32_psum(x):
    out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)  # bf16
    tp = nl.ndarray((nl.par_dim(128), 128), dtype=np.float32, buffer=nl.psum)
    tp[:, :] = nisa.nc_transpose(t)
    nl.store(out, nl.copy(tp, dtype=nl.float32))
    return out


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_a_bf16_transpose_assigned_into_fp32_psum_casts(target):
    x = RNG.normal(size=(128, 128)).astype(np.float32).astype(ml_dtypes.bfloat16)
    res = tnki.run(transpose_into_fp32_psum, x, target=target)
    np.testing.assert_array_equal(res.outputs, x.astype(np.float32).T)
    assert _ops(res.instructions)["tensor_copy"] == 1  # the store's; the cast is the PE's


F = 6144  # 24 KiB per fp32 tile per partition


@nki.jit
def accumulator_beside_temporaries(x):
    """An SBUF accumulator and eight full-width temporaries per iteration (the fused mamba
    tutorial's loop shape): 9 tiles do not fit 192 KiB, the live ones (at most 6) do."""
    out = nl.ndarray((128, F), dtype=x.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros((128, F), dtype=nl.float32)
    for i in nl.affine_range(x.shape[0] // 128):
        a = nl.load(x[i * 128 : (i + 1) * 128, :])
        b = nl.multiply(a, 2.0)
        c = nl.add(b, 1.0)
        d = nl.multiply(c, a)
        e = nl.add(d, b)
        f = nl.multiply(e, 0.5)
        g = nl.add(f, c)
        h = nl.subtract(g, d)
        acc += h
    nl.store(out, acc)
    return out


def test_dead_temporaries_free_their_bytes_before_a_live_accumulator_is_touched():
    x = RNG.normal(size=(128 * 4, F)).astype(np.float32)
    a = x.reshape(4, 128, F).astype(np.float64)
    b = a * 2
    c = b + 1
    d = c * a
    e = d + b
    f = e * 0.5
    g = f + c
    h = g - d
    os.environ.pop("NEURON_PLATFORM_TARGET_OVERRIDE", None)
    res = tnki.run(accumulator_beside_temporaries, x, target=TRN1)
    np.testing.assert_allclose(res.outputs, h.sum(0), rtol=1e-5, atol=1e-5)
    assert _spills(res.instructions) == 0
