"""Conformance cases: nki-library's MXFP subkernels and MX MoE kernels.

MX semantics (aws-neuron-sdk ``nki/api/nki/isa/__init__.py``, ``quantize_mx`` and
``nc_matmul_mx`` docstrings): an MX tile is ``[P, F]`` x4 words, four elements of the free dim
packed per word; each group of 8 partitions x 4 elements (one word on each of 8 partitions)
shares one E8M0 scale; the scales of partition group ``g`` sit on partition
``(g // 4) * 32 + g % 4`` (four rows at the start of each quadrant). ``quantize_mx`` picks the
scale 2^(floor(log2(amax)) - (emax_elem - 1)) (the NKI rule since 0.5.0) and rounds the scaled
values to the element format (RNE, saturating).

The references here quantize with ``trnsim.numerics.mx.quantize`` (``scale_rule="nki"``), a
path separate from the core's ``quantize_mx`` executor, and compare MX outputs as VALUES
(element x 2^(scale - 127), decoded from the kernel's words and scale rows by ``decode``), so a
wrong scale row, element order or word layout shows as a wrong number.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trnsim.conformance.case import Call, Case
from trnsim.conformance.refs import bf16, f64, mx_scale_partitions, randn

REPO = "nki-library"
LIB = "src/nkilib_src/nkilib/"
E4M3 = "float8_e4m3fn"
F16_ULP = 2.0**-10  # one fp16 ulp, relative to the binade's lower end


# ---- MX helpers: quantize a device tile, decode a device tile -----------------------------


def qmx_tile_values(src_pf: np.ndarray, elem: str = E4M3) -> np.ndarray:
    """Values ``quantize_mx`` documents for a tile ``src[P, F]`` (groups of 8 partitions x 4
    consecutive free elements): float64 ``[P, F]``, element x scale."""
    from trnsim.numerics import mx

    p, f = src_pf.shape
    blocks = np.asarray(src_pf, np.float32).reshape(p // 8, 8, f // 4, 4).transpose(0, 2, 1, 3)
    q = mx.quantize(blocks.reshape(p // 8, f // 4, 32), elem, axis=-1, block=32, scale_rule="nki")
    vals = mx.dequantize(q).astype(np.float64).reshape(p // 8, f // 4, 8, 4)
    return vals.transpose(0, 2, 1, 3).reshape(p, f)


def qmx_tile_scales(src_pf: np.ndarray, elem: str = E4M3) -> np.ndarray:
    """Scale codes ``[P // 8, F // 4]`` of ``quantize_mx`` on ``src[P, F]``."""
    from trnsim.numerics import mx

    p, f = src_pf.shape
    blocks = np.asarray(src_pf, np.float32).reshape(p // 8, 8, f // 4, 4).transpose(0, 2, 1, 3)
    q = mx.quantize(blocks.reshape(p // 8, f // 4, 32), elem, axis=-1, block=32, scale_rule="nki")
    return q.scales.reshape(p // 8, f // 4)


def decode_tile(words: np.ndarray, scales: np.ndarray, elem: str = E4M3) -> np.ndarray:
    """Values of a device MX tile: ``words[P, W]`` (x4, any free shape flattened to W) and
    its scale tile ``scales[P, W]`` (uint8, rows ``mx_scale_partitions``) -> float64
    ``[P, 4W]`` (element q of word w at free index 4w + q)."""
    from trnsim.numerics import get_format
    from trnsim.numerics.mx import scale_values
    from trnsim.numerics.packing import unpack_x4

    p = words.shape[0]
    w = np.asarray(words).reshape(p, -1)
    codes = unpack_x4(w[..., None], elem + "_x4")  # [P, W, 4]
    vals = codes.view(get_format(elem).dtype).astype(np.float64)
    rows = mx_scale_partitions(p // 8)
    sc = scale_values(np.asarray(scales).reshape(scales.shape[0], -1)[rows].view(np.uint8))
    return (vals * np.repeat(sc, 8, axis=0)[..., None]).reshape(p, -1)


# ---- experimental/mxfp_subkernels: mxfp_load_performance_wrapper ----------------------------


def _mxfp_load_inputs(k: int):
    def make(rng):
        x = rng.standard_normal((128, k)).astype(np.float32)
        x[:, :32] *= 2.0**-20  # a block of small values: the scale follows amax down
        x[:, 32:64] = 0  # an all-zero block (scale code 0)
        return (x.astype(bf16),)

    return make


def _mxfp_load_decode(outs: tuple[Any, Any]) -> tuple[np.ndarray, np.ndarray]:
    """(values [128, 4 * M * K/512], the 16 scale rows' codes [16, M * K/512])."""
    data, scale = outs
    return decode_tile(data, scale), np.asarray(scale).view(np.uint8)[mx_scale_partitions(16)]


def _mxfp_load_ref(tensor):
    """The docstring: each 512-column K block of ``tensor[M=128, K]`` is swizzled so that K
    index 4j + q of row m sits on partition j, free index 4m + q, then quantized
    (``quantize_mx``); block kb fills free columns kb*M .. (kb+1)*M - 1 of the outputs. Each
    MX group is then 32 consecutive K of one row."""
    m, k = tensor.shape
    vals, codes = [], []
    for kb in range(k // 512):
        blk = np.asarray(tensor[:, kb * 512 : (kb + 1) * 512], np.float32)  # [M, 512]
        sw = blk.reshape(m, 128, 4).transpose(1, 0, 2).reshape(128, m * 4)
        vals.append(qmx_tile_values(sw))
        codes.append(qmx_tile_scales(sw))
    return np.concatenate(vals, axis=1), np.concatenate(codes, axis=1).astype(np.float64)


# ---- core/subkernels: rmsnorm_mx_quantize_tkg (SBUF outputs: a driver written here) ---------


def _rmsnorm_mx_driver(fn):
    """A kernel[2] around the subkernel: SBUF output buffers (the scale tile zeroed first, so
    rows without scales read as 0), the call, then each core stores its own half of the tokens
    of ``output`` and the OTHER core's half of ``output_quant`` / ``output_scale`` (what the
    subkernel's closing sendrecv exchange delivered)."""
    from trnsim.nki import isa as nisa
    from trnsim.nki import language as nl

    def rmsnorm_mx_quantize_tkg_driver(inp, gamma, residual=None, hidden_actual=None):
        b, s, h = inp.shape
        t, h1 = b * s, h // 128
        me = nl.program_id(0)
        out_sb = nl.ndarray((128, t, h1), dtype=inp.dtype, buffer=nl.sbuf)
        q_sb = nl.ndarray((128, h1 // 4, t), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        s_sb = nl.ndarray((128, h1 // 4, t), dtype=nl.uint8, buffer=nl.sbuf)
        nisa.memset(s_sb, value=0)
        res_out = None
        if residual is not None:
            res_out = nl.ndarray((t, h), dtype=inp.dtype, buffer=nl.shared_hbm)
        fn(
            input=inp,
            gamma=gamma,
            output=out_sb,
            output_quant=q_sb,
            output_scale=s_sb,
            residual=residual,
            output_residual=res_out,
            hidden_actual=hidden_actual,
        )
        out = nl.ndarray(out_sb.shape, dtype=inp.dtype, buffer=nl.shared_hbm)
        q = nl.ndarray(q_sb.shape, dtype=nl.float8_e4m3fn_x4, buffer=nl.shared_hbm)
        sc = nl.ndarray(s_sb.shape, dtype=nl.uint8, buffer=nl.shared_hbm)
        half = t // 2
        mine, theirs = nl.ds(me * half, half), nl.ds((1 - me) * half, half)
        nisa.dma_copy(dst=out[:, mine, :], src=out_sb[:, mine, :])
        nisa.dma_copy(dst=q[:, :, theirs], src=q_sb[:, :, theirs])
        nisa.dma_copy(dst=sc[:, :, theirs], src=s_sb[:, :, theirs])
        if residual is not None:
            return out, q, sc, res_out
        return out, q, sc

    return rmsnorm_mx_quantize_tkg_driver


def _rmsnorm_mx_inputs(b: int, s: int, h: int, hidden_actual: int | None, residual: bool):
    def make(rng):
        x = randn(rng, (b, s, h), np.float16)
        if hidden_actual is not None:
            x[..., hidden_actual:] = 0  # the padding hidden_actual describes
        gamma = randn(rng, (1, h), np.float16)
        kw: dict[str, Any] = {"hidden_actual": hidden_actual}
        if residual:
            r = randn(rng, (b, s, h), np.float16)
            if hidden_actual is not None:
                r[..., hidden_actual:] = 0
            kw["residual"] = r
        return Call((x, gamma), kw)

    return make


def _rmsnorm_mx_decode(outs):
    """(output, MX values [128, H/512, BxS, 4], the 16 scale rows [16, H/512, BxS],
    every other scale row [112, H/512, BxS] (zero: the subkernel writes scale rows only)
    [, output_residual])."""
    out, q, sc = outs[:3]
    p, n512, t = q.shape
    vals = decode_tile(np.asarray(q).reshape(p, -1), np.asarray(sc).reshape(p, -1))
    codes = np.asarray(sc).view(np.uint8)
    rows = mx_scale_partitions(16)
    others = np.setdiff1d(np.arange(128), rows)
    return (out, vals.reshape(p, n512, t, 4), codes[rows], codes[others], *outs[3:])


def _rmsnorm_mx_ref(inp, gamma, residual=None, hidden_actual=None, eps=1e-6):
    """The docstring's pseudocode with the kernel's documented buffers: hidden = input +
    residual (an fp16 buffer), x * gamma into the fp16 input tile, rsqrt(mean(x^2) + eps) in
    fp32, output = fp16(x * gamma * rsqrt) laid out [H0, BxS, H1] with H viewed as (H1, H0)
    (hidden_dim_tp); then each 512-column H tile h (output columns q * H/512 + h, q < 4) is
    quantized as a [128, BxS x 4] tile (``quantize_mx``: 8 partitions x the 4 q of a token)."""
    b, s, h = inp.shape
    t, h1 = b * s, h // 128
    n = h if hidden_actual is None else hidden_actual
    hid = inp if residual is None else (f64(inp) + f64(residual)).astype(np.float16)
    hid = f64(hid).reshape(t, h)
    xg = (hid * f64(gamma)).astype(np.float16)
    ssq = (hid * hid).astype(np.float32).sum(axis=1, dtype=np.float64)
    rs = (1.0 / np.sqrt(ssq / n + eps)).astype(np.float32)
    y = (f64(xg) * f64(rs)[:, None]).astype(np.float16)  # [T, H]
    out = f64(y).reshape(t, h1, 128).transpose(2, 0, 1)  # [128, T, H1]
    n512 = h1 // 4
    tiles = out.reshape(128, t, 4, n512).transpose(0, 3, 1, 2)  # [128, n512, T, 4]
    vals = np.stack([qmx_tile_values(tiles[:, k].reshape(128, t * 4)) for k in range(n512)], 1)
    codes = np.stack([qmx_tile_scales(tiles[:, k].reshape(128, t * 4)) for k in range(n512)], 1)
    res = [
        out.astype(np.float16),
        vals.reshape(128, n512, t, 4),
        codes.astype(np.float64),
        np.zeros((112, n512, t)),
    ]
    if residual is not None:
        res.append(hid.astype(np.float16))
    return tuple(res)


_RMSNORM_MX_TOL = (
    "; fp16 outputs to one fp16 ulp (the kernel sums x^2 in fp32 in its own order and rsqrt's "
    "last fp32 bit is the hardware's: a product at an fp16 rounding midpoint may round the "
    "other way), MX values and scale codes within the same bound (they match exactly on seeds "
    "0-2: an fp16 ulp moves an fp8 value only at an fp8 midpoint)"
)


def _rmsnorm_mx_case(name, b, s, h, notes, hidden_actual=None, residual=False) -> Case:
    return Case(
        name,
        REPO,
        LIB + "core/subkernels/rmsnorm_mx_quantize_tkg.py",
        "rmsnorm_mx_quantize_tkg",
        _rmsnorm_mx_inputs(b, s, h, hidden_actual, residual),
        _rmsnorm_mx_ref,
        driver=_rmsnorm_mx_driver,
        grid=(2,),
        decode=_rmsnorm_mx_decode,
        rtol=F16_ULP,
        atol=2.0**-24,  # fp16's smallest subnormal: one ulp of a subnormal output
        notes=notes + _RMSNORM_MX_TOL,
    )


# ---- the cases -------------------------------------------------------------------------------

CASES: list[Case] = [
    Case(
        "library/mxfp_load",
        REPO,
        LIB + "experimental/mxfp_subkernels/mxfp_load_utils.py",
        "mxfp_load_performance_wrapper",
        _mxfp_load_inputs(1024),
        _mxfp_load_ref,
        decode=_mxfp_load_decode,
        rtol=0.0,
        atol=0.0,
        notes="bf16 [128, 1024] (two 512-column K blocks) to MXFP8 e4m3: bf16 inputs are exact "
        "in fp32, so quantize_mx's values and scale codes are exact (tolerance 0); row blocks "
        "of tiny values and of zeros exercise the scale choice",
    ),
    _rmsnorm_mx_case(
        "library/rmsnorm_mx_quantize_tkg",
        8,
        1,
        1024,
        "fp16 [8, 1, 1024], LNC=2 (required): fp16 output, MXFP8 values and scale codes",
    ),
    _rmsnorm_mx_case(
        "library/rmsnorm_mx_quantize_tkg_hidden_actual",
        4,
        4,
        2048,
        "fp16 [4, 4, 2048] padded from 1920 (zeros past it): the mean divides by 1920",
        hidden_actual=1920,
    ),
    _rmsnorm_mx_case(
        "library/rmsnorm_mx_quantize_tkg_residual",
        256,
        1,
        1024,
        "fp16 [256, 1, 1024] + residual (the fused add needs H1 % 8 == 0; 128 tokens per "
        "core), output_residual [256, 1024] spilled to HBM by the PE transpose",
        residual=True,
    ),
]
