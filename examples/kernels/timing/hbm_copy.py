"""A pure HBM copy through SBUF: ``out = src``, [rows, cols] in [128, cols] tiles.

Each tile is loaded into SBUF and stored back (two buffers, so loads and stores overlap). The
kernel does no compute: its time is bounded by the DMA engines and the HBM bandwidth.
``trnsim profile examples/kernels/timing/hbm_copy.py --target gen4``.
"""

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

P = 128


@nki.jit
def hbm_copy(src):
    rows, cols = src.shape
    out = nl.ndarray((rows, cols), dtype=src.dtype, buffer=nl.shared_hbm)
    bufs = [nl.ndarray((P, cols), src.dtype, nl.sbuf) for _ in range(2)]
    for i in nl.affine_range(rows // P):
        tile = bufs[i % 2]
        nisa.dma_copy(dst=tile, src=src[i * P : (i + 1) * P, :])
        nisa.dma_copy(dst=out[i * P : (i + 1) * P, :], src=tile)
    return out


def make_inputs(rng=None, rows=4096, cols=4096, empty=False):
    if empty:
        return (np.empty((rows, cols), ml_dtypes.bfloat16),)
    rng = rng or np.random.default_rng(0)
    return (rng.standard_normal((rows, cols)).astype(ml_dtypes.bfloat16),)


KERNEL = "hbm_copy"
