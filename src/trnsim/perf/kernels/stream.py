"""The HBM bandwidth kernel behind ``trnsim microbench``: the STREAM triad ``a = b + s x c``
(McCalpin's STREAM benchmark; here fp32 arrays of ``rows x cols``) through SBUF.

Each [128, cols] tile of ``b`` and ``c`` is loaded by DMA, combined by the Vector engine
(``scalar_tensor_tensor``: ``c x s + b``) and the result stored; the tile buffers are allocated
inside the loop so that loads of one tile overlap the store of the previous one. STREAM counts
3 x 4 bytes per element (two reads, one write). ``cols`` of 2,048 fp32 move 8 KiB per partition
per DMA, beyond the 2-4 KiB the DMA engines need to stream at full rate.

Ships in the package (an installed trnsim can time it); an NKI kernel file.
"""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

P = 128
SCALAR = 3.0  # STREAM's scalar


@nki.jit
def stream_triad(b, c):
    rows, cols = b.shape
    a = nl.ndarray((rows, cols), dtype=b.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(rows // P):
        tb = nl.ndarray((P, cols), dtype=b.dtype, buffer=nl.sbuf)
        tc = nl.ndarray((P, cols), dtype=c.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tb, src=b[i * P : (i + 1) * P, :])
        nisa.dma_copy(dst=tc, src=c[i * P : (i + 1) * P, :])
        ta = nl.ndarray((P, cols), dtype=b.dtype, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(
            dst=ta, data=tc, op0=nl.multiply, operand0=SCALAR, op1=nl.add, operand1=tb
        )
        nisa.dma_copy(dst=a[i * P : (i + 1) * P, :], src=ta)
    return a


def golden(b, c):
    return (b.astype(np.float64) + SCALAR * c.astype(np.float64)).astype(b.dtype)


def make_inputs(rng=None, rows=1024, cols=2048, empty=False):
    """``(b, c)``: fp32 ``[rows, cols]``, rows a multiple of 128."""
    if empty:
        return np.empty((rows, cols), np.float32), np.empty((rows, cols), np.float32)
    rng = rng or np.random.default_rng(0)
    return tuple(rng.standard_normal((rows, cols)).astype(np.float32) for _ in range(2))


KERNEL = "stream_triad"
TOLERANCE = {"rtol": 1e-6, "atol": 1e-6}
