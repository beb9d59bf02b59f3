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

The moe_cte kernels (``bwmm_shard_on_block_mx``, ``blockwise_mm_shard_intermediate_mx`` and
its ``_hybrid``) take HBM tensors and are launched as they are; the SBUF subkernels
(``rmsnorm_mx_quantize_tkg``, ``gate_up_projection_mx_shard_I``, ``down_projection_mx``) run
inside small drivers written here (``Case.driver``). The MoE references replay each rounding
the kernels' docstrings and pseudocode describe (bf16 PSUM tiles, the online MXFP8
quantization of activations, bf16 accumulation in the documented block order per core), and
agree with trnsim bit for bit on seeds 0-2; tolerances still allow the one-ulp differences an
unpublished fp32 summation order inside the PE array could make.

Library issues found (reported, stepped around, pinned by tests in tests/test_conf_mx.py):
``blockwise_mm_shard_intermediate_mx`` adds the down-projection bias on both cores before
reducing them (its cases use a zero down bias); ``bwmm_shard_on_block_mx`` with I < 512 reads
uninitialised SBUF partitions (NaN in trnsim); ``bwmm_shard_on_block_mx`` requires the biases
its docstring calls optional.
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


# ---- MX weights: random device words + scales, and the dense matrices they stand for ------


def _mx_words(rng, shape: tuple[int, ...], elem: str = E4M3) -> np.ndarray:
    """Random x4 words ``shape`` (uint32 for fp8): N(0, 1) elements rounded to ``elem``."""
    from trnsim.numerics.packing import pack_x4

    vals = rng.standard_normal((*shape, 4)).astype(np.float32)
    return pack_x4(vals, elem + "_x4")[..., 0]


def _elems(words: np.ndarray, elem: str = E4M3) -> np.ndarray:
    """Element values of x4 words: float64 ``[..., 4]`` (element q of each word last)."""
    from trnsim.numerics import get_format
    from trnsim.numerics.packing import unpack_x4

    return unpack_x4(words[..., None], elem + "_x4").view(get_format(elem).dtype).astype(np.float64)


def _scale_of_rows(scales: np.ndarray, axis: int) -> np.ndarray:
    """2^(code - 127) of compact scales (one row per 8 partitions on ``axis``), repeated to
    one per partition."""
    from trnsim.numerics.mx import scale_values

    return np.repeat(scale_values(scales), 8, axis=axis)


def _quantize_groups(x: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """``quantize_mx`` values of ``x[..., K]`` where ``groups[K // 32, 32]`` lists the K
    indices of each MX group (8 partitions x the 4 elements of a word)."""
    from trnsim.numerics import mx

    g = x[..., groups]  # [..., K/32, 32]
    q = mx.quantize(g.astype(np.float32), E4M3, axis=-1, block=32, scale_rule="nki")
    out = np.empty_like(x, dtype=np.float64)
    out[..., groups] = mx.dequantize(q).astype(np.float64)
    return out


def _h_groups(h: int) -> np.ndarray:
    """MX groups of the hidden dim as the MX projections lay it out (hidden_states viewed as
    [T, 4, H/512, 128]: H = q * H/4 + j * 128 + p, partition p, x4 element q): group (j, s)
    holds partitions 8s..8s+7 and q = 0..3 of H tile j."""
    n512 = h // 512
    ar = np.arange
    q, j, s, pp = np.meshgrid(ar(4), ar(n512), ar(16), ar(8), indexing="ij")
    idx = q * (h // 4) + j * 128 + s * 8 + pp  # [4, n512, 16, 8]
    return idx.transpose(1, 2, 3, 0).reshape(n512 * 16, 32)


def _p_i(i: int) -> int:
    """Partitions of an I tile: 128, or I / 4 for an I below 512 (one partial tile, not
    padded in HBM: the library's ``p_I``)."""
    return 128 if i >= 512 else i // 4


def _i_groups(i: int) -> np.ndarray:
    """MX groups of the intermediate dim as the gate/up projection leaves it ([P_I, I/512,
    tokens, 4]: I = t * 512 + q * P_I + p): group (t, s) holds partitions 8s..8s+7, q = 0..3."""
    pi = _p_i(i)
    n512 = max(i // 512, 1)
    ar = np.arange
    t, s, pp, q = np.meshgrid(ar(n512), ar(pi // 8), ar(8), ar(4), indexing="ij")
    return (t * 512 + q * pi + s * 8 + pp).reshape(n512 * pi // 8, 32)


def _gup_dense(words: np.ndarray, scales: np.ndarray, elem: str = E4M3) -> np.ndarray:
    """``gate_up_proj_weight [E, 128, 2, H/512, I]`` words and ``[E, 16, 2, H/512, I]`` scales
    -> dense ``[E, H, 2, I]`` (H = q * H/4 + j * 128 + p)."""
    v = _elems(words, elem) * _scale_of_rows(scales, 1)[..., None]  # [E, 128, 2, n512, I, 4]
    e, _, _, n512, i, _ = v.shape
    return v.transpose(0, 5, 3, 1, 2, 4).reshape(e, 4 * n512 * 128, 2, i)


def _down_dense(words: np.ndarray, scales: np.ndarray, elem: str = E4M3) -> np.ndarray:
    """``down_proj_weight [E, 128, I/512, H]`` words and ``[E, 16, I/512, H]`` scales -> dense
    ``[E, I, H]`` (I = t * 512 + q * 128 + p)."""
    v = _elems(words, elem) * _scale_of_rows(scales, 1)[..., None]  # [E, P_I, nI, H, 4]
    e, pi, ni, h, _ = v.shape
    return v.transpose(0, 2, 4, 1, 3).reshape(e, ni * 4 * pi, h)


def _gup_bias_dense(bias: np.ndarray) -> np.ndarray:
    """gate/up bias ``[E, 128, 2, I/512, 4]`` -> ``[E, 2, I]`` (I = t * 512 + q * 128 + p)."""
    e, pi, _, ni, _ = bias.shape
    return f64(bias).transpose(0, 2, 3, 4, 1).reshape(e, 2, ni * 4 * pi)


# ActFnType -> the nl activation ``get_nl_act_fn_from_type`` maps it to: SiLU -> nl.silu,
# Swish -> nl.gelu_apprx_sigmoid (x * sigmoid(1.702 x), the sigmoid approximation of GELU)
_ACT = {
    "SiLU": lambda x: x / (1.0 + np.exp(-x)),
    "Swish": lambda x: x / (1.0 + np.exp(-1.702 * x)),
}


def _weight_elem(weight_dtype) -> str:
    """The MX element format the kernel's ``weight_dtype`` names (e4m3 when None, as
    ``convert_to_mxfp_dtype`` documents for uint32 words)."""
    from trnsim.numerics import get_format

    if weight_dtype is None:
        return E4M3
    return get_format(weight_dtype).element.name


def _silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


def _mx_expert(
    hs: np.ndarray,
    gup: np.ndarray,
    down: np.ndarray,
    gb=None,
    db=None,
    clamp=None,
    shards: int = 1,
    bias_cores: tuple[int, ...] = (0,),
):
    """One expert's MX MLP on tokens ``hs[B, H]`` (bf16 values) as the MX projections document
    it: hidden quantized online to MXFP8 (groups of ``_h_groups``), gate and up = hq @ W
    rounded to bf16 (+ bias, clamped), silu(gate) * up in bf16, quantized online to MXFP8
    (groups of ``_i_groups``, the down projection's "Quantizes intermediate activations
    online to MXFP8"), then @ Wd rounded to bf16 (+ bias). ``shards``: the down projection
    split over I between cores, the bias added by ``bias_cores``."""
    h = hs.shape[1]
    i = gup.shape[-1]
    hq = _quantize_groups(f64(hs), _h_groups(h))
    g = f64((hq @ gup[:, 0, :]).astype(bf16))
    u = f64((hq @ gup[:, 1, :]).astype(bf16))
    if gb is not None:
        g, u = f64((g + gb[0]).astype(bf16)), f64((u + gb[1]).astype(bf16))
    if clamp is not None:
        gl, gu, ul, uu = clamp
        g = np.clip(g, gl if gl is not None else -np.inf, gu if gu is not None else np.inf)
        u = np.clip(u, ul if ul is not None else -np.inf, uu if uu is not None else np.inf)
    a = f64(_silu(g).astype(bf16))
    inter = f64((a * u).astype(bf16))
    iq = _quantize_groups(inter, _i_groups(i))
    if shards == 1:
        y = f64((iq @ down).astype(bf16))
        return y if db is None else f64((y + db).astype(bf16))
    # sharded on I (contiguous halves): each core's partial down projection in bf16 (+ the
    # bias), the two partials added in bf16 (``accumulation_after_down_proj``)
    half = i // shards
    parts = []
    for c in range(shards):
        y = f64((iq[:, c * half : (c + 1) * half] @ down[c * half : (c + 1) * half]).astype(bf16))
        parts.append(y if db is None or c not in bias_cores else f64((y + db).astype(bf16)))
    return f64((parts[0] + parts[1]).astype(bf16))


_BWMM_MX_TOL = (
    "; the reference replays every documented rounding (bf16 PSUM and tiles, the two online "
    "MXFP8 quantizations, the per-core bf16 accumulation and the final reduce) and matches "
    "bit for bit on seeds 0-2; tolerance 2 bf16 ulps (+ 2^-10 absolute for cancellation): "
    "the fp32 summation order inside nc_matmul_mx is not public, and a one-ulp difference in "
    "a bf16 PSUM result is carried through one more bf16 rounding"
)


def _shard_on_block_schedule(n: int, conditions, n_static_blocks: int) -> list[tuple[int, int]]:
    """(block, core) in the order each core runs them, from the pseudocode of
    ``bwmm_shard_on_block_mx``, ``process_static_blocks`` and ``process_dynamic_blocks``:
    the static blocks split in contiguous halves (an odd count: the last one on core 1, core 0
    running it as a zero-affinity dummy); with ``conditions``, N - n_static_blocks dynamic
    blocks (rounded up to even, the static count shrinking to match) run in pairs from the
    first dynamic index, core 0 the first of a pair, core 1 the second, while
    conditions[pair start] is non-zero."""
    n_static = n
    if conditions is not None:
        if n_static_blocks <= 0:
            raise NotImplementedError("this reference needs n_static_blocks with conditions")
        n_dyn = n - n_static_blocks
        n_dyn += n_dyn % 2
        n_static = n - n_dyn
    half = n_static // 2
    order = [(blk, 0) for blk in range(half)] + [(blk, 1) for blk in range(half, 2 * half)]
    if n_static % 2:
        order.append((n_static - 1, 1))
    if conditions is not None:
        idx = n_static
        while conditions[idx]:
            order += [(idx, 0), (idx + 1, 1)]
            idx += 2
    return order


# ---- core/moe/moe_cte: bwmm_shard_on_block_mx ------------------------------------------------


def _bwmm_mx_inputs(
    t: int, h: int, b: int, e: int, i: int, down_bias: bool = True, elem: str = E4M3, **kw
):
    """top-E routing (every token to every expert: is_tensor_update_accumulating, the only mode
    the kernel takes), each expert's tokens in full blocks; hidden_states [T + 1, H] with the
    padding row T zero; MXFP8 e4m3 weights as uint32 words (``weight_dtype`` names the MX type,
    the kernel's documented torch/xla path)."""

    def make(rng):
        from nkilib.core.utils.common_types import ActFnType, ExpertAffinityScaleMode

        hs = np.zeros((t + 1, h), np.float32)
        hs[:t] = rng.standard_normal((t, h))
        hs = hs.astype(bf16)
        n512, ni, pi = h // 512, max(i // 512, 1), _p_i(i)
        gup = _mx_words(rng, (e, 128, 2, n512, i), elem)
        gup_s = rng.integers(120, 124, (e, 16, 2, n512, i)).astype(np.uint8)
        down = _mx_words(rng, (e, pi, ni, h), elem)
        down_s = rng.integers(120, 124, (e, pi // 8, ni, h)).astype(np.uint8)
        perm = np.concatenate([rng.permutation(t) for _ in range(e)]).astype(np.int32)
        bte = np.repeat(np.arange(e), t // b).astype(np.int32).reshape(-1, 1)
        aff = np.zeros(((t + 1) * e, 1), np.float32)
        aff[: t * e, 0] = rng.uniform(0.1, 1.0, t * e)
        import trnsim.nki.language as nl

        # gate/up bias [E, 128, 2, I/512, 4] (I = t * 512 + q * 128 + p), down bias [E, H]: the
        # docstring calls them optional, but the kernel reads their dtype unconditionally
        gb = (0.1 * rng.standard_normal((e, pi, 2, ni, 4))).astype(bf16)
        db = (0.1 * rng.standard_normal((e, h)) * down_bias).astype(bf16)
        kwargs = {
            "gate_and_up_proj_bias": gb,
            "down_proj_bias": db,
            "gate_up_proj_scale": gup_s,
            "down_proj_scale": down_s,
            "block_size": b,
            "activation_function": ActFnType.SiLU,
            "compute_dtype": nl.bfloat16,
            "weight_dtype": getattr(nl, elem + "_x4"),
            "is_tensor_update_accumulating": True,
            "expert_affinities_scaling_mode": ExpertAffinityScaleMode.POST_SCALE,
            **kw,
        }
        return Call((hs, aff.astype(bf16), gup, down, perm, bte), kwargs)

    return make


def _bwmm_mx_ref(
    hidden_states,
    expert_affinities_masked,
    gate_up_proj_weight,
    down_proj_weight,
    token_position_to_id,
    block_to_expert,
    gate_and_up_proj_bias=None,
    down_proj_bias=None,
    gate_up_proj_scale=None,
    down_proj_scale=None,
    block_size=None,
    gate_clamp_upper_limit=None,
    gate_clamp_lower_limit=None,
    up_clamp_lower_limit=None,
    up_clamp_upper_limit=None,
    conditions=None,
    n_static_blocks=-1,
    **kw,
):
    """output [2, T + 1, H] as the pseudocode builds it: core c (of 2) runs its blocks
    (``_shard_on_block_schedule``), each block's expert MLP (``_mx_expert``) scaled by the
    token's affinity (bf16 tile) and added to the token's row of output[c] (bf16); then
    ``reduce_outputs``:
    output[0] = output[0] + output[1] (bf16), output[1] zeroed; the padding row stays zero."""
    tp1, h = hidden_states.shape
    e = gate_up_proj_weight.shape[0]
    elem = _weight_elem(kw.get("weight_dtype"))
    gup = _gup_dense(gate_up_proj_weight, gate_up_proj_scale, elem)
    down = _down_dense(down_proj_weight, down_proj_scale, elem)
    clamp = (
        gate_clamp_lower_limit,
        gate_clamp_upper_limit,
        up_clamp_lower_limit,
        up_clamp_upper_limit,
    )
    gb = _gup_bias_dense(gate_and_up_proj_bias)
    db = f64(down_proj_bias)
    out = np.zeros((2, tp1, h))
    b = block_size
    n = len(token_position_to_id) // b
    aff = f64(expert_affinities_masked).reshape(tp1, e)
    for blk, c in _shard_on_block_schedule(n, conditions, n_static_blocks):
        ex = int(block_to_expert[blk, 0])
        ids = token_position_to_id[blk * b : (blk + 1) * b]
        ids = ids[ids >= 0]  # skip_dma.skip_token: padding positions are -1 and skipped
        y = _mx_expert(hidden_states[ids], gup[ex], down[ex], gb[ex], db[ex], clamp)
        scaled = f64((y * aff[ids, ex][:, None]).astype(bf16))
        out[c, ids] = f64((scaled + out[c, ids]).astype(bf16))
    skip = kw.get("skip_dma")
    rows = tp1 if skip is not None and skip.skip_token else tp1 - 1  # no padding row to skip
    out[0, :rows] = f64((out[0, :rows] + out[1, :rows]).astype(bf16))
    out[1, :rows] = 0
    return out.astype(bf16)


def _bwmm_mx_dynamic_inputs(t: int, h: int, b: int, e: int, i: int, extra: int, n_static: int):
    """``_bwmm_mx_inputs`` plus ``extra`` blocks of real tokens marked padded (0) in
    ``conditions`` [N + 2] (1 for the full blocks, then 0), and ``n_static_blocks``: the static
    loop, then the dynamic loop over the rest until a pair starts at a 0. Running a padded
    block would show (its tokens are real)."""

    def make(rng):
        c = _bwmm_mx_inputs(t, h, b, e, i)(rng)
        hs, aff, gup, down, perm, bte = c.args
        full = len(perm) // b
        perm = np.concatenate([perm, rng.permutation(t)[: extra * b].astype(np.int32)])
        bte = np.concatenate([bte, (np.arange(extra) % e).astype(np.int32).reshape(-1, 1)])
        cond = (np.arange(full + extra + 2) < full).astype(np.int32)
        kw = {**c.kwargs, "conditions": cond, "n_static_blocks": n_static}
        return Call((hs, aff, gup, down, perm, bte), kw)

    return make


def _bwmm_mx_skip_inputs(t: int, h: int, b: int, i: int, n0: int):
    """skip_dma.skip_token: hidden_states [T, H] without a padding row, padding positions of
    token_position_to_id are -1 (``oob_mode.skip`` DMAs). E=2: expert 0 gets ``n0`` random
    tokens (its last block part padding), expert 1 every token; affinities zero where a token
    is not routed."""

    def make(rng):
        from nkilib.core.moe.moe_cte.moe_cte_utils import SkipMode

        c = _bwmm_mx_inputs(t, h, b, 2, i)(rng)
        hs, aff, gup, down, perm, bte = c.args
        hs = hs[:t]
        chosen = rng.permutation(t)[:n0].astype(np.int32)
        nb0 = -(-n0 // b)
        blocks0 = np.full(nb0 * b, -1, np.int32)
        blocks0[:n0] = chosen
        perm = np.concatenate([blocks0, rng.permutation(t).astype(np.int32)])
        bte = np.array([0] * nb0 + [1] * (t // b), np.int32).reshape(-1, 1)
        a = f64(aff[: t * 2, 0]).reshape(t, 2)
        routed = np.zeros(t, bool)
        routed[chosen] = True
        a[~routed, 0] = 0
        kw = {**c.kwargs, "skip_dma": SkipMode(skip_token=True, skip_weight=False)}
        return Call((hs, a.reshape(-1, 1).astype(bf16), gup, down, perm, bte), kw)

    return make


# ---- core/moe/moe_cte: blockwise_mm_shard_intermediate_mx (+ _hybrid) ------------------------


def _bwmm_mx_i_ref(
    hidden_states,
    expert_affinities_masked,
    gate_up_proj_weight,
    down_proj_weight,
    token_position_to_id,
    block_to_expert,
    gate_and_up_proj_bias=None,
    down_proj_bias=None,
    gate_up_proj_scale=None,
    down_proj_scale=None,
    block_size=None,
    gate_clamp_upper_limit=None,
    gate_clamp_lower_limit=None,
    up_clamp_lower_limit=None,
    up_clamp_upper_limit=None,
    **kw,
):
    """output [T + 1, H] as the pseudocode builds it: blocks in order; per block the expert MLP
    with I split between the 2 cores (``_mx_expert(shards=2)``: partials reduced across the
    cores), then output[token] = block_new * affinity + output[token] (one fused
    ``scalar_tensor_tensor``, rounded once to bf16); the padding row stays zero."""
    tp1, h = hidden_states.shape
    e = gate_up_proj_weight.shape[0]
    elem = _weight_elem(kw.get("weight_dtype"))
    gup = _gup_dense(gate_up_proj_weight, gate_up_proj_scale, elem)
    down = _down_dense(down_proj_weight, down_proj_scale, elem)
    gb = _gup_bias_dense(gate_and_up_proj_bias)
    db = f64(down_proj_bias)
    clamp = (
        gate_clamp_lower_limit,
        gate_clamp_upper_limit,
        up_clamp_lower_limit,
        up_clamp_upper_limit,
    )
    out = np.zeros((tp1, h))
    b = block_size
    aff = f64(expert_affinities_masked).reshape(tp1, e)
    for blk in range(len(token_position_to_id) // b):
        ex = int(block_to_expert[blk, 0])
        ids = token_position_to_id[blk * b : (blk + 1) * b]
        y = _mx_expert(hidden_states[ids], gup[ex], down[ex], gb[ex], db[ex], clamp, shards=2)
        out[ids] = f64((y * aff[ids, ex][:, None] + out[ids]).astype(bf16))
    return out.astype(bf16)


def _bwmm_mx_hybrid_inputs(t: int, h: int, b: int, e: int, i: int, active: int, static: int):
    """As ``_bwmm_mx_inputs`` (shard-on-I, zero down bias), the hybrid's ``conditions``
    [N + 1] first: 1 for the first ``active`` blocks, then 0 (the last entry 0, as documented);
    ``num_static_block`` of them run in the static loop, the rest in the dynamic loop. The
    blocks past ``active`` hold real tokens, so running one would show in the output."""

    def make(rng):
        c = _bwmm_mx_inputs(t, h, b, e, i, down_bias=False)(rng)
        n = len(c.args[4]) // b
        cond = (np.arange(n + 1) < active).astype(np.int32)
        return Call((cond, *c.args), {**c.kwargs, "num_static_block": static})

    return make


def _bwmm_mx_hybrid_ref(conditions, *args, num_static_block=None, **kw):
    """The pseudocode: the static blocks, then blocks while conditions[block] == 1; blocks past
    them do not run (their tokens keep only their other blocks' sums)."""
    b = kw["block_size"]
    active = int(np.argmin(conditions))  # the first 0: the dynamic loop stops there
    hs, aff, gup, down, perm, bte = args
    return _bwmm_mx_i_ref(hs, aff, gup, down, perm[: active * b], bte[:active], **kw)


# ---- core/moe/moe_tkg: gate_up_projection_mx_shard_I, down_projection_mx (SBUF subkernels) --


def qmx_tile(src_pf: np.ndarray, elem: str = E4M3) -> tuple[np.ndarray, np.ndarray]:
    """``quantize_mx`` of a tile ``src[P, F]`` in the device layout, written here from the
    docstring: x4 words ``[P, F/4]`` and a scale tile ``[P, F/4]`` (uint8, group g's scales on
    partition ``mx_scale_partitions``, other partitions 0)."""
    from trnsim.numerics import mx
    from trnsim.numerics.packing import pack_x4

    p, f = src_pf.shape
    blocks = np.asarray(src_pf, np.float32).reshape(p // 8, 8, f // 4, 4).transpose(0, 2, 1, 3)
    q = mx.quantize(blocks.reshape(p // 8, f // 4, 32), elem, axis=-1, block=32, scale_rule="nki")
    codes = q.data.reshape(p // 8, f // 4, 8, 4).transpose(0, 2, 1, 3).reshape(p, f // 4, 4)
    words = pack_x4(codes, elem + "_x4")[..., 0]
    scales = np.zeros((p, f // 4), np.uint8)
    scales[mx_scale_partitions(p // 8)] = q.scales.reshape(p // 8, f // 4)
    return words, scales


def _to_sbuf(nl, nisa, t, dtype=None):
    """A copy of HBM ``t`` in SBUF (viewed as ``dtype`` first: uint32 words as MX x4)."""
    src = t if dtype is None else t.view(dtype)
    sb = nl.ndarray(src.shape, dtype=src.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=sb, src=src)
    return sb


def _gate_up_mx_driver(fn):
    """A kernel around ``gate_up_projection_mx_shard_I``: the MXFP8 input, weights, scales and
    biases loaded to SBUF, the call, its quantized output and scale tile stored to HBM."""
    from trnsim.nki import isa as nisa
    from trnsim.nki import language as nl

    def gate_up_projection_mx_driver(xq, xs, gw, uw, gws, uws, gb, ub, **kw):
        x4 = nl.float8_e4m3fn_x4
        q, sc = fn(
            _to_sbuf(nl, nisa, xq, x4),
            _to_sbuf(nl, nisa, xs),
            _to_sbuf(nl, nisa, gw, x4),
            _to_sbuf(nl, nisa, uw, x4),
            _to_sbuf(nl, nisa, gws),
            _to_sbuf(nl, nisa, uws),
            _to_sbuf(nl, nisa, gb),
            _to_sbuf(nl, nisa, ub),
            **kw,
        )
        q_out = nl.ndarray(q.shape, dtype=nl.uint32, buffer=nl.shared_hbm)
        s_out = nl.ndarray(sc.shape, dtype=nl.uint8, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=q_out, src=q.view(nl.uint32))
        nisa.dma_copy(dst=s_out, src=sc)
        return q_out, s_out

    return gate_up_projection_mx_driver


def _mx_input(rng, t: int, h: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """bf16 tokens ``x[T, H]`` and their MXFP8 device form ``[128, H/512, T]`` (words, scale
    tile) as ``rmsnorm_mx_quantize_tkg`` leaves it: element q of word (p, j, t) is
    ``x[t, q * H/4 + j * 128 + p]``."""
    x = rng.standard_normal((t, h)).astype(bf16)
    n512 = h // 512
    dev = f64(x).reshape(t, 4, n512, 128).transpose(3, 1, 0, 2)  # [128, n512, T, 4]
    words, scales = qmx_tile(dev.reshape(128, -1))
    return x, words.reshape(128, n512, t), scales.reshape(128, n512, t)


def _mx_weight_tile(rng, h: int, i: int) -> tuple[np.ndarray, np.ndarray]:
    """Random MXFP8 weights in SBUF form ``[128, H/512, I]``: words and a scale tile (codes
    120..123 on the scale partitions, 0 elsewhere)."""
    w = _mx_words(rng, (128, h // 512, i))
    sc = np.zeros((128, h // 512, i), np.uint8)
    sc[mx_scale_partitions(16)] = rng.integers(120, 124, (16, h // 512, i))
    return w, sc


def _tile_dense(words: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """SBUF-form MX ``[128, J, N]`` (words, scale tile) -> dense ``[4 * J * 128, N]`` with
    K = q * J * 128 + j * 128 + p (the hidden layout of ``_mx_input``)."""
    v = _elems(words) * np.repeat(_scale_rows(scales), 8, axis=0)[..., None]  # [128, J, N, 4]
    p, j, n, _ = v.shape
    return v.transpose(3, 1, 0, 2).reshape(4 * j * p, n)


def _scale_rows(scales: np.ndarray) -> np.ndarray:
    from trnsim.numerics.mx import scale_values

    return scale_values(scales[mx_scale_partitions(scales.shape[0] // 8)])


def _gate_up_mx_inputs(t: int, h: int, i: int, act: str | None = "SiLU", **kw):
    """``act``: the ``ActFnType`` name passed as ``hidden_act_fn`` (None: the default)."""

    def make(rng):
        from nkilib.core.utils.common_types import ActFnType

        if act is not None:
            kw["hidden_act_fn"] = getattr(ActFnType, act)
        _, xq, xs = _mx_input(rng, t, h)
        gw, gws = _mx_weight_tile(rng, h, i)
        uw, uws = _mx_weight_tile(rng, h, i)
        gb = (0.1 * rng.standard_normal((128, i // 512, 4))).astype(bf16)
        ub = (0.1 * rng.standard_normal((128, i // 512, 4))).astype(bf16)
        return Call((xq, xs, gw, uw, gws, uws, gb, ub), dict(kw))

    return make


def _decode_words_scales(outs):
    """(values [P, J, T, 4] of words + scale tile [P, J, T], the 16 scale rows' codes)."""
    q, sc = outs
    p, j, t = q.shape
    vals = decode_tile(np.asarray(q).reshape(p, -1), np.asarray(sc).reshape(p, -1))
    return vals.reshape(p, j, t, 4), np.asarray(sc).view(np.uint8)[mx_scale_partitions(16)]


def _gate_up_mx_ref(
    xq,
    xs,
    gw,
    uw,
    gws,
    uws,
    gb,
    ub,
    gate_clamp_upper_limit=None,
    gate_clamp_lower_limit=None,
    up_clamp_upper_limit=None,
    up_clamp_lower_limit=None,
    hidden_act_fn=None,
    **_,
):
    """The docstring's steps: gate = W_g @ x (MX matmul, bf16 PSUM) + bias (bf16), clamped,
    activated (``hidden_act_fn``, default Swish, bf16); up likewise without activation;
    gate * up (bf16) quantized to MXFP8 in the [128_I, I/512, T] x4 layout
    (I = tile * 512 + q * 128 + p)."""
    x = _tile_dense(xq, xs).T  # [T, H] (already MX values)
    g = f64((x @ _tile_dense(gw, gws)).astype(bf16))
    u = f64((x @ _tile_dense(uw, uws)).astype(bf16))
    nI = gb.shape[1]
    g = f64((g + f64(gb).transpose(1, 2, 0).reshape(nI * 512)).astype(bf16))
    u = f64((u + f64(ub).transpose(1, 2, 0).reshape(nI * 512)).astype(bf16))
    lo, hi = gate_clamp_lower_limit, gate_clamp_upper_limit
    g = np.clip(g, -np.inf if lo is None else lo, np.inf if hi is None else hi)
    lo, hi = up_clamp_lower_limit, up_clamp_upper_limit
    u = np.clip(u, -np.inf if lo is None else lo, np.inf if hi is None else hi)
    act = _ACT[getattr(hidden_act_fn, "name", "Swish")]
    inter = f64((f64(act(g).astype(bf16)) * u).astype(bf16))  # [T, I]
    t = inter.shape[0]
    dev = inter.reshape(t, nI, 4, 128).transpose(3, 1, 0, 2)  # [128, nI, T, 4]
    vals = qmx_tile_values(dev.reshape(128, -1)).reshape(128, nI, t, 4)
    codes = qmx_tile_scales(dev.reshape(128, -1)).reshape(16, nI, t)
    return vals, codes.astype(np.float64)


def _down_mx_driver(fn):
    """A kernel[2] around ``down_projection_mx`` (shard_on_I, one expert: first and last):
    core c loads its half of the I tiles of the MXFP8 activation and weights, the affinities
    ([T, E], or [128, T/128, E]) and its bias tile [min(T, 128), H] (the caller's H-sharded
    broadcast: bias on its half of H, zeros elsewhere, as
    ``load_broadcast_down_weight_scale_bias`` documents), and the call reduces across the
    cores and spills to the HBM output."""
    from trnsim.nki import isa as nisa
    from trnsim.nki import language as nl

    def down_projection_mx_driver(aq, asc, w, ws, bias2, aff, expert_idx=0, **kw):
        me = nl.program_id(0)
        x4 = nl.float8_e4m3fn_x4
        n_i = aq.shape[1] // 2
        mine = nl.ds(me * n_i, n_i)
        t, h = aq.shape[2], w.shape[2]
        out = nl.ndarray((t, h), dtype=nl.bfloat16, buffer=nl.shared_hbm)
        out_sb = nl.ndarray((min(t, 128), (t + 127) // 128, h), dtype=nl.bfloat16, buffer=nl.sbuf)
        fn(
            _to_sbuf(nl, nisa, aq[:, mine, :], x4),
            _to_sbuf(nl, nisa, asc[:, mine, :]),
            _to_sbuf(nl, nisa, w[:, mine, :], x4),
            _to_sbuf(nl, nisa, ws[:, mine, :]),
            _to_sbuf(nl, nisa, bias2[me]),
            _to_sbuf(nl, nisa, aff),
            expert_idx,
            out_sb,
            out_hbm=out,
            is_first_expert=True,
            is_last_expert=True,
            shard_on_I=True,
            **kw,
        )
        return out

    return down_projection_mx_driver


def _down_mx_inputs(t: int, h: int, i: int, e: int):
    def make(rng):
        inter = (0.5 * rng.standard_normal((t, i))).astype(bf16)
        dev = f64(inter).reshape(t, i // 512, 4, 128).transpose(3, 1, 0, 2)
        aq, asc = qmx_tile(dev.reshape(128, -1))
        w, ws = _mx_weight_tile(rng, i, h)
        bias = (0.1 * rng.standard_normal(h)).astype(bf16)
        tile_t = min(t, 128)
        bias2 = np.zeros((2, tile_t, h), bf16)  # [tile_T, H] per core
        bias2[0, :, : h // 2] = bias[: h // 2]
        bias2[1, :, h // 2 :] = bias[h // 2 :]
        aff = rng.uniform(0.1, 1.0, (t, e)).astype(bf16)
        if t > 128:  # the documented [128_T, T/128, E_L] layout: token j * 128 + p at (p, j)
            aff = np.ascontiguousarray(aff.reshape(t // 128, 128, e).transpose(1, 0, 2))
        n_i = i // 512
        return Call(
            (aq.reshape(128, n_i, t), asc.reshape(128, n_i, t), w, ws, bias2, aff),
            {"expert_idx": 1},
        )

    return make


def _down_mx_ref(aq, asc, w, ws, bias2, aff, expert_idx=0, **_):
    """The docstring: per core (its half of the I tiles) act @ W (MX matmul, bf16 PSUM) + its
    bias tile (bf16), x the expert's affinity (bf16); the two cores' partials added (bf16,
    ``sendrecv`` + add) and spilled to out [T, H]."""
    n_i = aq.shape[1] // 2
    a_te = f64(aff)
    if a_te.ndim == 3:  # [128_T, T/128, E] -> [T, E]
        a_te = a_te.transpose(1, 0, 2).reshape(-1, a_te.shape[2])
    parts = []
    for c in range(2):
        sl = slice(c * n_i, (c + 1) * n_i)
        a = _i_tile_dense(aq[:, sl], asc[:, sl])  # [T, I/2]
        wd = _i_tile_dense(w[:, sl], ws[:, sl]).T  # [H, I/2] -> [I/2, H]
        y = f64((a @ wd).astype(bf16))
        y = f64((y + f64(bias2[c][0])).astype(bf16))  # the tile's rows are one bias row
        parts.append(f64((y * a_te[:, expert_idx : expert_idx + 1]).astype(bf16)))
    return (parts[0] + parts[1]).astype(bf16)


def _i_tile_dense(words: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """SBUF-form MX ``[128, J, N]`` with the contraction dim I = j * 512 + q * 128 + p (the
    gate/up output layout) -> dense ``[N, J * 512]``."""
    v = _elems(words) * np.repeat(_scale_rows(scales), 8, axis=0)[..., None]  # [128, J, N, 4]
    p, j, n, _ = v.shape
    return v.transpose(2, 1, 3, 0).reshape(n, j * 4 * p)


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
    Case(
        "library/bwmm_shard_on_block_mx",
        REPO,
        LIB + "core/moe/moe_cte/bwmm_shard_on_block_mx.py",
        "bwmm_shard_on_block_mx",
        _bwmm_mx_inputs(256, 512, 128, 2, 512),
        _bwmm_mx_ref,
        grid=(2,),
        rtol=2.0**-7,
        atol=2.0**-10,
        notes="MXFP8 e4m3 weights, bf16 T=256 (+ padding row), H=512, B=128, E=2 (top-2), "
        "I=512, LNC=2, SiLU, post-scale, gate/up and down biases (the kernel needs them)"
        + _BWMM_MX_TOL,
    ),
    Case(
        "library/bwmm_shard_on_I_mx",
        REPO,
        LIB + "core/moe/moe_cte/bwmm_shard_on_I_mx.py",
        "blockwise_mm_shard_intermediate_mx",
        _bwmm_mx_inputs(512, 512, 256, 2, 1024, down_bias=False),
        _bwmm_mx_i_ref,
        grid=(2,),
        rtol=2.0**-7,
        atol=2.0**-10,
        notes="MXFP8 e4m3 weights, bf16 T=512 (+ padding row), H=512, B=256 (the kernel's "
        "multiple), E=2 (top-2), I=1024 (512 per core), LNC=2, SiLU, post-scale; the "
        "down-projection bias is ZERO: the library adds it on both cores before the cross-core "
        "reduction (down_projection_mx_shard_I has no program-0 test, against its docstring's "
        "'Bias added only by program 0' and the kernel pseudocode), so a non-zero bias comes "
        "out doubled (a library bug; tests/test_conf_mx.py pins it)" + _BWMM_MX_TOL,
    ),
    Case(
        "library/bwmm_shard_on_I_mx_hybrid",
        REPO,
        LIB + "core/moe/moe_cte/bwmm_shard_on_I_mx.py",
        "blockwise_mm_shard_intermediate_mx_hybrid",
        _bwmm_mx_hybrid_inputs(512, 512, 256, 2, 1024, active=3, static=2),
        _bwmm_mx_hybrid_ref,
        grid=(2,),
        rtol=2.0**-7,
        atol=2.0**-10,
        notes="the shard-on-I problem (zero down bias, see bwmm_shard_on_I_mx) with 4 blocks: "
        "conditions [1, 1, 1, 0, 0], num_static_block=2: blocks 0-1 in the static loop, block 2 "
        "in the dynamic loop (nl.dynamic_range up to sum(conditions)), block 3 (real tokens) "
        "must not run" + _BWMM_MX_TOL,
    ),
    Case(
        "library/gate_up_projection_mx",
        REPO,
        LIB + "core/moe/moe_tkg/gate_up_projection_mx.py",
        "gate_up_projection_mx_shard_I",
        _gate_up_mx_inputs(8, 512, 1024, gate_clamp_upper_limit=1.0, up_clamp_lower_limit=-1.0),
        _gate_up_mx_ref,
        driver=_gate_up_mx_driver,
        decode=_decode_words_scales,
        rtol=2.0**-3,
        atol=0.0,
        notes="MXFP8 input [128, 1, 8] (T=8, H=512) and e4m3 weights [128, 1, 1024], biases, "
        "gate clamped above at 1, up below at -1, SiLU, LNC=1 (the subkernel takes inputs "
        "already sharded on I); outputs compared as MX values (to one e4m3 ulp, 2^-3: the bf16 "
        "products feeding quantize_mx round as the reference does, an fp8 value moves only "
        "when a bf16 ulp crosses an fp8 midpoint) and scale codes",
    ),
    Case(
        "library/down_projection_mx",
        REPO,
        LIB + "core/moe/moe_tkg/down_projection_mx.py",
        "down_projection_mx",
        _down_mx_inputs(8, 1024, 1024, 2),
        _down_mx_ref,
        driver=_down_mx_driver,
        grid=(2,),
        rtol=2.0**-7,
        atol=2.0**-10,
        notes="MXFP8 activation [128, 2, 8] (T=8, I=1024) and e4m3 weights [128, 2, 1024] "
        "(H=1024), LNC=2 shard_on_I (one I tile per core), expert 1 of affinities [8, 2], the "
        "H-sharded bias tiles, cross-core reduction, spill to [8, 1024]; 2 bf16 ulps (+ 2^-10)",
    ),
    Case(
        "library/bwmm_shard_on_block_mxfp4",
        REPO,
        LIB + "core/moe/moe_cte/bwmm_shard_on_block_mx.py",
        "bwmm_shard_on_block_mx",
        _bwmm_mx_inputs(256, 512, 128, 2, 512, elem="float4_e2m1fn"),
        _bwmm_mx_ref,
        grid=(2,),
        rtol=2.0**-7,
        atol=2.0**-10,
        notes="bwmm_shard_on_block_mx with MXFP4 (e2m1) weights as uint16 words (the "
        "library's torch/xla path): MXFP8 activations x MXFP4 weights in nc_matmul_mx"
        + _BWMM_MX_TOL,
    ),
    Case(
        "library/bwmm_shard_on_block_mxfp8_e5m2",
        REPO,
        LIB + "core/moe/moe_cte/bwmm_shard_on_block_mx.py",
        "bwmm_shard_on_block_mx",
        _bwmm_mx_inputs(256, 512, 128, 2, 512, elem="float8_e5m2"),
        _bwmm_mx_ref,
        grid=(2,),
        rtol=2.0**-7,
        atol=2.0**-10,
        notes="bwmm_shard_on_block_mx with MXFP8 e5m2 weights: e4m3 activations x e5m2 weights"
        + _BWMM_MX_TOL,
    ),
    Case(
        "library/gate_up_projection_mx_swish",
        REPO,
        LIB + "core/moe/moe_tkg/gate_up_projection_mx.py",
        "gate_up_projection_mx_shard_I",
        _gate_up_mx_inputs(40, 512, 512, act=None),
        _gate_up_mx_ref,
        driver=_gate_up_mx_driver,
        decode=_decode_words_scales,
        rtol=2.0**-3,
        atol=0.0,
        notes="the default hidden_act_fn (Swish: nl.gelu_apprx_sigmoid), no clamps, T=40 (not a "
        "multiple of 32), I=512; tolerance as gate_up_projection_mx",
    ),
    Case(
        "library/bwmm_shard_on_block_mx_dynamic",
        REPO,
        LIB + "core/moe/moe_cte/bwmm_shard_on_block_mx.py",
        "bwmm_shard_on_block_mx",
        _bwmm_mx_dynamic_inputs(256, 512, 128, 2, 512, extra=2, n_static=2),
        _bwmm_mx_ref,
        grid=(2,),
        rtol=2.0**-7,
        atol=2.0**-10,
        notes="the dynamic loop: N=6 blocks (4 full, 2 marked padded in conditions [8] but "
        "holding real tokens), n_static_blocks=2: blocks 0-1 static (one per core), blocks 2-3 "
        "as one dynamic pair (register loop on conditions), the pair at 4 must not run"
        + _BWMM_MX_TOL,
    ),
    Case(
        "library/bwmm_shard_on_block_mx_skip_token",
        REPO,
        LIB + "core/moe/moe_cte/bwmm_shard_on_block_mx.py",
        "bwmm_shard_on_block_mx",
        _bwmm_mx_skip_inputs(256, 512, 128, 512, n0=200),
        _bwmm_mx_ref,
        grid=(2,),
        rtol=2.0**-7,
        atol=2.0**-10,
        notes="skip_dma.skip_token: hidden [256, 512] (no padding row), expert 0 routed 200 "
        "tokens (block 1 holds 72 and 56 positions of -1: loads, affinity reads and the scatter "
        "skip them, oob_mode.skip), expert 1 all 256; output [2, 256, 512]" + _BWMM_MX_TOL,
    ),
    _rmsnorm_mx_case(
        "library/rmsnorm_mx_quantize_tkg_spec",
        16,
        3,
        3072,
        "fp16 [16, 3, 3072] padded from 2880 (a speculation shape: BxS=48, 24 per core in "
        "three 8-token tiles; H/512 = 6 MX tiles)",
        hidden_actual=2880,
    ),
    Case(
        "library/down_projection_mx_tiled",
        REPO,
        LIB + "core/moe/moe_tkg/down_projection_mx.py",
        "down_projection_mx",
        _down_mx_inputs(256, 2048, 1024, 3),
        _down_mx_ref,
        driver=_down_mx_driver,
        grid=(2,),
        rtol=2.0**-7,
        atol=2.0**-10,
        notes="T=256 (two 128-token tiles, affinities in the [128, T/128, E] layout), H=2048 (two "
        "1024-column PSUM tiles), I=1024, E=3 (expert 1); as down_projection_mx otherwise",
    ),
    Case(
        "library/gate_up_projection_mx_tiled",
        REPO,
        LIB + "core/moe/moe_tkg/gate_up_projection_mx.py",
        "gate_up_projection_mx_shard_I",
        _gate_up_mx_inputs(288, 512, 1024),
        _gate_up_mx_ref,
        driver=_gate_up_mx_driver,
        decode=_decode_words_scales,
        rtol=2.0**-3,
        atol=0.0,
        notes="T=288: two token tiles (256 + a partial 32), I=1024 (two I tiles), SiLU, no "
        "clamps; tolerance as gate_up_projection_mx",
    ),
]
