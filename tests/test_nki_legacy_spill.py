"""Spilling of legacy block tensors (``trnsim.nki.legacy.language.block_locator``): a PSUM
block tensor larger than PSUM keeps its written blocks by copying them to SBUF (and on to HBM
when SBUF is full too), refilled when read; the 2.26 programming model says the compiler
inserts such spills and refills. Numerics against NumPy, the copies in the record, and no
spill for blocks that were read before their bytes went."""

from __future__ import annotations

import ml_dtypes
import numpy as np

import trnsim.nki as tnki
from trnsim.core.isa import Op

tnki.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

RNG = np.random.default_rng(3)


@nki.jit
def all_products_then_sums(lhs_t, rhs):
    """Every (128 x 512) product block kept in one PSUM block tensor of ``nb`` blocks (2 KiB
    per partition each: more than PSUM's 8 banks when nb > 8), then each block reduced."""
    nb = rhs.shape[1] // 512
    out = nl.ndarray((128, nb), dtype=nl.float32, buffer=nl.shared_hbm)
    a = nl.load(lhs_t)
    b = nl.load(rhs)
    acc = nl.ndarray((nb, nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)
    for j in nl.affine_range(nb):
        acc[j, :, :] = nisa.nc_matmul(a, b[:, nl.ds(j * 512, 512)])
    sums = nl.ndarray((128, nb), dtype=nl.float32, buffer=nl.sbuf)
    for j in nl.affine_range(nb):
        sums[:, j] = nisa.tensor_reduce(op=nl.add, data=acc[j], axis=1)
    nl.store(out, value=sums)
    return out


@nki.jit
def product_then_sum_each(lhs_t, rhs):
    """The same products, each block read right after it is written: nothing to keep."""
    nb = rhs.shape[1] // 512
    out = nl.ndarray((128, nb), dtype=nl.float32, buffer=nl.shared_hbm)
    a = nl.load(lhs_t)
    b = nl.load(rhs)
    acc = nl.ndarray((nb, nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)
    sums = nl.ndarray((128, nb), dtype=nl.float32, buffer=nl.sbuf)
    for j in nl.affine_range(nb):
        acc[j, :, :] = nisa.nc_matmul(a, b[:, nl.ds(j * 512, 512)])
        sums[:, j] = nisa.tensor_reduce(op=nl.add, data=acc[j], axis=1)
    nl.store(out, value=sums)
    return out


def _inputs(nb: int, dtype=np.float32) -> tuple[np.ndarray, np.ndarray]:
    lhs_t = RNG.uniform(-1, 1, (128, 128)).astype(dtype)
    rhs = RNG.uniform(-1, 1, (128, nb * 512)).astype(dtype)
    return lhs_t, rhs


def _want(lhs_t: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    prod = lhs_t.astype(np.float64).T @ rhs.astype(np.float64)  # products exact in fp32
    return prod.reshape(128, -1, 512).sum(axis=2)


def _copies(res, src: str, dst: str) -> int:
    n = 0
    for i in res.instructions:
        if i.opcode in (Op.TENSOR_COPY, Op.DMA_COPY):
            s, d = i.operand("src"), i.operand("dst")
            if s is not None and d is not None and (s.memory, d.memory) == (src, dst):
                n += 1
    return n


def test_a_psum_block_tensor_larger_than_psum_spills_to_sbuf_and_refills():
    lhs_t, rhs = _inputs(12)  # 12 blocks of 2 KiB/partition; PSUM holds 8
    res = tnki.run(all_products_then_sums, lhs_t, rhs)
    np.testing.assert_allclose(res.outputs, _want(lhs_t, rhs), rtol=1e-5, atol=1e-3)
    spills, refills = _copies(res, "psum", "sbuf"), _copies(res, "sbuf", "psum")
    assert spills >= 4 and refills >= 4  # at least the 4 blocks that did not fit
    assert spills == refills


def test_blocks_read_before_their_bytes_go_are_not_copied():
    lhs_t, rhs = _inputs(12)
    res = tnki.run(product_then_sum_each, lhs_t, rhs)
    np.testing.assert_allclose(res.outputs, _want(lhs_t, rhs), rtol=1e-5, atol=1e-3)
    assert _copies(res, "psum", "sbuf") == _copies(res, "sbuf", "psum") == 0


def test_when_sbuf_fills_too_the_spilled_copies_move_on_to_hbm():
    # gen2: 192 KiB of SBUF per partition; 100 blocks x 2 KiB spilled do not all fit beside
    # the 100 KiB bf16 input
    lhs_t, rhs = _inputs(100, ml_dtypes.bfloat16)
    res = tnki.run(all_products_then_sums, lhs_t, rhs, target="gen2")
    np.testing.assert_allclose(res.outputs, _want(lhs_t, rhs), rtol=1e-5, atol=1e-3)
    to_hbm, from_hbm = _copies(res, "sbuf", "hbm"), _copies(res, "hbm", "sbuf")
    assert to_hbm > 1 and from_hbm > 1  # beyond the output store and the input loads


@nki.jit
def hoisted_operand_and_per_iteration_blocks(a, b):
    """The matmul tutorial's hoisted-load shape: ``A`` (64 KiB/partition) loaded once, a new
    ``B`` (64 KiB) per iteration. On gen2 (192 KiB of SBUF) the second ``B`` does not fit beside
    ``A``, the first ``B`` (kept for double buffering) and the result tile: its bytes must come
    from the first ``B``, never from ``A``, which every matmul still reads."""
    out = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.shared_hbm)
    big = nl.ndarray((64, nl.par_dim(128), 512), dtype=nl.bfloat16, buffer=nl.sbuf)
    for i in nl.affine_range(64):
        big[i] = nl.load(a[:, nl.ds(i * 512, 512)])
    for n in nl.affine_range(2):
        blocks = nl.ndarray((64, nl.par_dim(128), 512), dtype=nl.bfloat16, buffer=nl.sbuf)
        for i in nl.affine_range(64):
            blocks[i] = nl.load(b[:, nl.ds((n * 64 + i) * 512, 512)])
        acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
        for i in nl.affine_range(64):
            acc += nl.matmul(big[i][:, 0:128], blocks[i], transpose_x=True)
        res = nl.copy(acc, dtype=nl.float32)  # still bound when the next B is placed
        nl.store(out[:, nl.ds(n * 512, 512)], value=res)
    return out


def test_a_double_buffering_spare_gives_its_bytes_before_a_live_tile():
    rng = np.random.default_rng(1)
    a = rng.integers(-2, 3, (128, 64 * 512)).astype(ml_dtypes.bfloat16)
    b = rng.integers(-2, 3, (128, 128 * 512)).astype(ml_dtypes.bfloat16)
    res = tnki.run(hoisted_operand_and_per_iteration_blocks, a, b, target="gen2")
    a64 = a.astype(np.float64).reshape(128, 64, 512)[:, :, :128]  # [K, block, M]
    b64 = b.astype(np.float64).reshape(128, 2, 64, 512)  # [K, n, block, N]
    want = np.einsum("kim,knij->mnj", a64, b64).reshape(128, 1024)
    np.testing.assert_array_equal(res.outputs, want)  # small integers: exact in fp32
