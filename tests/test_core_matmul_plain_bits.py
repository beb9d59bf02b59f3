"""The plain interpreter's tensor-engine reads (``NeuronCore.read_transposed``, the open-group
check of ``acc_open``) change no bit: each product equals the specification's call,
``np.matmul(ascontiguousarray(decode(stationary).T), decode(moving))`` on one BLAS thread,
for every stationary dtype and for strided, partition-offset stationary views; accumulation
groups open and close as before (first write overwrites, later ones add)."""

import ml_dtypes
import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim.core.blas import single_threaded_blas
from trnsim.core.options import CoreOptions

F32 = np.float32


def _spec_product(st: np.ndarray, mv: np.ndarray) -> np.ndarray:
    with single_threaded_blas():
        return np.matmul(np.ascontiguousarray(st.astype(F32).T), mv.astype(F32))


def _kernel(dtype, rows: int, step: int):
    """Stationary: partitions ``rows:rows+64`` and every ``step``-th column of an SBUF tile."""

    def k(a, b):
        out = nl.ndarray((64, 256), nl.float32, buffer=nl.shared_hbm)
        big = nl.ndarray((128, 64 * step), dtype, buffer=nl.sbuf)
        mv = nl.ndarray((64, 256), dtype, buffer=nl.sbuf)
        nisa.memset(dst=big, value=0.0)
        nisa.dma_copy(dst=big[rows : rows + 64, 0 : 64 * step : step], src=a)
        nisa.dma_copy(dst=mv, src=b)
        ps = nl.ndarray((64, 256), nl.float32, buffer=nl.psum)
        st = big[rows : rows + 64, 0 : 64 * step : step]
        nisa.nc_matmul(dst=ps, stationary=st, moving=mv)  # opens the group
        nisa.nc_matmul(dst=ps, stationary=st, moving=mv)  # adds
        res = nl.ndarray((64, 256), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=ps)
        nisa.dma_copy(dst=out, src=res)
        return out

    return k


@pytest.mark.parametrize(
    "dtype",
    [ml_dtypes.bfloat16, np.float16, ml_dtypes.float8_e4m3, np.float32],
    ids=["bf16", "fp16", "fp8_e4m3", "fp32"],
)
@pytest.mark.parametrize("rows,step", [(0, 1), (64, 2)])
def test_plain_product_is_the_specifications_call_bit_for_bit(dtype, rows, step):
    rng = np.random.default_rng(7)
    a = rng.standard_normal((64, 64)).astype(dtype)
    b = rng.standard_normal((64, 256)).astype(dtype)
    one = _spec_product(a, b)
    want = one + one  # fp32: the second write adds onto the first
    for options in (CoreOptions(), CoreOptions(deferred=True, fast_paths=True)):
        got = np.asarray(nki.run(_kernel(dtype, rows, step), a, b, options=options).outputs)
        assert got.dtype == F32 and not np.isnan(got).any()
        assert got.tobytes() == want.tobytes()
