"""``nisa.dma_compute`` read-modify-write through a ``vector_offset`` view (NKI 0.6
``dma_compute`` docstring): gather RMW ``dst(SB) = dst(SB) + src(HBM)[indices]`` and scatter
RMW ``dst(HBM)[indices] = dst(HBM)[indices] + src(SB)``, fp32 arithmetic cast to the
destination's dtype, ``oob_mode.skip`` leaving skipped rows untouched; and ``nc_find_index8``
pairing duplicate vals with successive occurrences (``nc_match_replace8`` docstring)."""

import ml_dtypes
import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim.core import semantics as S
from trnsim.errors import KernelError

BF16 = ml_dtypes.bfloat16


def _gather_kernel(oob):
    def k(table, idx_in, init):
        rows, f = init.shape
        out = nl.ndarray((rows, f), init.dtype, buffer=nl.shared_hbm)
        idx = nl.ndarray((rows, 1), nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=idx, src=idx_in)
        d = nl.ndarray((rows, f), init.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=d, src=init)
        view = table.ap([[f, rows], [1, f]], vector_offset=idx, indirect_dim=0)
        nisa.dma_compute(dst=d, srcs=[view, d], reduce_op=nl.add, oob_mode=oob)
        nisa.dma_copy(dst=out, src=d)
        return out

    return k


def test_gather_rmw_adds_the_indexed_rows_in_fp32_then_rounds_once():
    rng = np.random.default_rng(0)
    table = rng.standard_normal((16, 8)).astype(BF16)
    init = rng.standard_normal((4, 8)).astype(BF16)
    idx = np.array([[5], [0], [15], [7]], np.int32)
    got = nki.run(_gather_kernel(nisa.oob_mode.error), table, idx, init).outputs
    want = (init.astype(np.float32) + table[idx[:, 0]].astype(np.float32)).astype(BF16)
    assert got.tobytes() == want.tobytes()


def test_gather_rmw_out_of_bounds_raises_or_skips_the_row():
    table = np.arange(16 * 8, dtype=np.float32).reshape(16, 8)
    init = np.ones((4, 8), np.float32)
    idx = np.array([[5], [16], [-1], [7]], np.int32)
    with pytest.raises(KernelError, match="index 16 at partition 1"):
        nki.run(_gather_kernel(nisa.oob_mode.error), table, idx, init)
    got = nki.run(_gather_kernel(nisa.oob_mode.skip), table, idx, init).outputs
    want = init.copy()
    want[0] += table[5]
    want[3] += table[7]
    np.testing.assert_array_equal(got, want)


def test_scatter_rmw_adds_into_the_indexed_rows_of_hbm():
    def k(table, idx_in, data_in):
        rows, f = data_in.shape
        idx = nl.ndarray((rows, 1), nl.uint32, buffer=nl.sbuf)
        nisa.dma_copy(dst=idx, src=idx_in)
        data = nl.ndarray((rows, f), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=data, src=data_in)
        view = table.ap([[f, rows], [1, f]], vector_offset=idx, indirect_dim=0)
        nisa.dma_compute(dst=view, srcs=[data, view], reduce_op=nl.add)
        return table

    table = np.arange(16 * 8, dtype=np.float32).reshape(16, 8)
    data = np.full((3, 8), 0.5, np.float32)
    idx = np.array([[2], [9], [4]], np.uint32)
    before = table.copy()
    nki.run(k, table, idx, data)
    want = before.copy()
    want[[2, 9, 4]] += 0.5
    np.testing.assert_array_equal(table, want)


def test_find_index8_pairs_duplicate_vals_with_successive_occurrences():
    data = np.array([[1, 2, 3, 4, 8, 8, 8, 8, 8, 8, 8]], np.float32)
    vals = np.array([[3, 8, 8, 8, 8, 8, 8, 8]], np.float32)
    np.testing.assert_array_equal(S.nc_find_index8(data, vals), [[2, 4, 5, 6, 7, 8, 9, 10]])
    few = np.array([[5, 1, 5, 9, 9, 9, 9, 9]], np.float32)  # 5 twice, 1 once
    vals = np.array([[5, 5, 5, 1, 0, 0, 0, 0]], np.float32)
    none = 0xFFFFFFFF
    np.testing.assert_array_equal(
        S.nc_find_index8(few, vals), [[0, 2, none, 1, none, none, none, none]]
    )
