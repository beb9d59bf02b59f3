"""MXFP4 x MXFP8 matmul on NeuronCore-v4 with offline (host-side) quantization.

``C[M, N] = A[M, K] @ B[K, N]``: A (e.g. weights) is quantized offline to MXFP4 (e2m1) and B
to MXFP8 (e4m3fn) by ``trnsim.numerics.mx`` (OCP scale rule, blocks of 32 along K), packed
four per word by ``trnsim.numerics.packing`` into the matmul-ready layout, and multiplied by
``nc_matmul_mx`` with K tiles of 512 accumulated in PSUM.

Layout (per 512-long K tile, 128 partitions): the data word at ``[p, m]`` holds
``A[m, 4p + q]`` for q = 0..3, so an MX group (8 partitions x 4 elements) is 32 consecutive
K; the scale of group g (partitions 8g..8g+7) sits at partition ``(g // 4) * 32 + g % 4`` of
the scale tile (four scale rows at the start of each 32-partition quadrant, as
``quantize_mx`` writes them). Inputs: A words ``[K/4, M]`` uint16, A scales ``[K/4, M]``
uint8, B words ``[K/4, N]`` uint32, B scales ``[K/4, N]`` uint8. M <= 128, N <= 512.

``trnsim run examples/kernels/mxfp4_matmul.py``.
"""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

# the emulator and the golden see the same quantized operands; fp32 accumulation order differs
TOLERANCE = {"rtol": 1e-5, "atol": 1e-4}


@nki.jit(platform_target="trn3")
def mxfp4_mxfp8_matmul(a_words, a_scales, b_words, b_scales):
    KP, M = a_words.shape
    _, N = b_words.shape
    P = nl.tile_size.pmax
    result = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.psum)
    for k in nl.affine_range(KP // P):
        rows = slice(k * P, (k + 1) * P)
        a = nl.ndarray((P, M), dtype=nl.float4_e2m1fn_x4, buffer=nl.sbuf)
        b = nl.ndarray((P, N), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        sa = nl.ndarray((P, M), dtype=nl.uint8, buffer=nl.sbuf)
        sb = nl.ndarray((P, N), dtype=nl.uint8, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=a_words[rows, :].view(nl.float4_e2m1fn_x4))
        nisa.dma_copy(dst=b, src=b_words[rows, :].view(nl.float8_e4m3fn_x4))
        nisa.dma_copy(dst=sa, src=a_scales[rows, :])
        nisa.dma_copy(dst=sb, src=b_scales[rows, :])
        nisa.nc_matmul_mx(dst=acc, stationary=a, moving=b, stationary_scale=sa, moving_scale=sb)
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=out, src=acc)
    nisa.dma_copy(dst=result, src=out)
    return result


def scale_rows(partitions=128):
    """Scale-tile partition of each 8-partition MX group (quantize_mx layout)."""
    g = np.arange(partitions // 8)
    return (g // 4) * 32 + g % 4


def to_device_layout(q, packed_fmt):
    """An ``MXArray`` with blocks along K (axis 1 for A [M, K], axis 0 for B [K, N]) -> (words
    [K/4, F], scales [K/4, F]) in the nc_matmul_mx layout above."""
    from trnsim.numerics.packing import pack_x4

    codes = q.data if q.axis == 1 else q.data.T  # [F, K]
    scales = q.scales if q.axis == 1 else q.scales.T  # [F, K/32]
    f, k = codes.shape
    # [K/4, F, 4] element codes -> one word per (partition, column): [K/4, F]
    words = pack_x4(codes.reshape(f, k // 4, 4).transpose(1, 0, 2), packed_fmt)[..., 0]
    tiles = k // 512
    scale_tile = np.zeros((k // 4, f), dtype=np.uint8)
    for t in range(tiles):
        blocks = scales[:, t * 16 : (t + 1) * 16]  # 16 groups of 32 K per 512-long K tile
        scale_tile[t * 128 + scale_rows(), :] = blocks.T
    return words, scale_tile


def quantize_operands(A, B):
    from trnsim.numerics import mx

    qa = mx.quantize(A.astype(np.float32), "float4_e2m1fn", axis=1, block=32)
    qb = mx.quantize(B.astype(np.float32), "float8_e4m3fn", axis=0, block=32)
    return qa, qb


def make_inputs(rng, M=128, K=1024, N=512):
    A = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((K, N)).astype(np.float32)
    qa, qb = quantize_operands(A, B)
    a_words, a_scales = to_device_layout(qa, "float4_e2m1fn_x4")
    b_words, b_scales = to_device_layout(qb, "float8_e4m3fn_x4")
    return a_words, a_scales, b_words, b_scales


def from_device_layout(words, scale_tile, packed_fmt, elem_fmt):
    """Inverse of ``to_device_layout``: an ``MXArray`` [F, K] with blocks along axis 1."""
    from trnsim.numerics import mx
    from trnsim.numerics.packing import unpack_x4

    kp, f = words.shape
    codes = unpack_x4(words[..., None], packed_fmt).transpose(1, 0, 2).reshape(f, 4 * kp)
    groups = [scale_tile[t * 128 + scale_rows(), :] for t in range(kp // 128)]
    scales = np.concatenate(groups, axis=0).T  # [F, K/32]
    return mx.MXArray(
        data=np.ascontiguousarray(codes),
        scales=np.ascontiguousarray(scales),
        fmt=mx.mx_element_format(elem_fmt),
        axis=1,
        block=32,
        scale_rule="ocp",
    )


def golden(a_words, a_scales, b_words, b_scales):
    """``numerics.mx.mx_matmul`` (exact accumulation) of the operands read back from the
    device layout."""
    from trnsim.numerics import mx

    qa = from_device_layout(a_words, a_scales, "float4_e2m1fn_x4", "float4_e2m1fn")
    qb_t = from_device_layout(b_words, b_scales, "float8_e4m3fn_x4", "float8_e4m3fn")
    qb = mx.MXArray(
        data=np.ascontiguousarray(qb_t.data.T),
        scales=np.ascontiguousarray(qb_t.scales.T),
        fmt=qb_t.fmt,
        axis=0,
        block=32,
        scale_rule="ocp",
    )
    return mx.mx_matmul(qa, qb, accumulation="exact")


if __name__ == "__main__":
    args = make_inputs(np.random.default_rng(0))
    out = mxfp4_mxfp8_matmul(*args)
    print("MXFP4 x MXFP8 matmul max |err| vs MX golden:", np.abs(out - golden(*args)).max())
