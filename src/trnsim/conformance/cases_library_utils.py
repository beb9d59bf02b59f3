"""Conformance cases: nki-library's SBUF utilities (``core/utils``), through drivers written here.

The utilities take SBUF tensors, so each case launches a driver kernel from
``trnsim.conformance.drivers_sbuf`` (``Case.driver``) that loads the HBM inputs into SBUF,
calls the library subkernel (imported unmodified from the checkout) and stores the result.
References are written here from each docstring:

- ``cross_partition_copy``: ``dst[d0:d0+n] = src[s0:s0+n]``, every other partition of ``dst``
  unchanged (the driver passes the destination's initial contents in);
- ``tp_broadcast``: ``dst[b, p] = src[p, src_offset]`` for every row ``b`` ("transposes
  src[:, src_offset], then broadcasts onto all partitions of dst");
- ``stream_shuffle_broadcast``: every partition of ``dst`` gets ``src[0]``;
- ``interleave_copy``: ``dst = src * scale + bias`` (each optional, ``[P, 1]`` broadcast along
  the free dim), on the Scalar engine for even ``index`` and vector-shaped operands, else on
  the Vector engine.

Copies, shuffles and the PE transpose (an fp32 identity matmul of an exact value) move values
unchanged: those cases are exact (``rtol = atol = 0``).
"""

from __future__ import annotations

import numpy as np

from trnsim.conformance import drivers_sbuf
from trnsim.conformance.case import Case
from trnsim.conformance.refs import bf16, f64, randn

REPO = "nki-library"
UTILS = "src/nkilib_src/nkilib/core/utils/"


# ---- cross_partition_copy ---------------------------------------------------------------------


def _xpc_inputs(ps: int, pd: int, free: int, s0: int, d0: int, n: int, dtype=np.float32):
    def make(rng):
        return randn(rng, (ps, free), dtype), randn(rng, (pd, free), dtype), s0, d0, n, free

    return make


def _xpc_ref(src, dst, s0, d0, n, free):
    out = dst.copy()
    out[d0 : d0 + n, :free] = src[s0 : s0 + n, :free]
    return out


def _xpc(
    name: str, ps: int, pd: int, free: int, s0: int, d0: int, n: int, why: str, dtype=np.float32
):
    return Case(
        f"library/cross_partition_copy_{name}",
        REPO,
        UTILS + "cross_partition_copy.py",
        "cross_partition_copy",
        _xpc_inputs(ps, pd, free, s0, d0, n, dtype),
        _xpc_ref,
        driver=drivers_sbuf.cross_partition_copy,
        rtol=0.0,
        atol=0.0,
        notes=f"{np.dtype(dtype).name} src [{ps}, {free}] rows {s0}..{s0 + n} -> dst [{pd}, "
        f"{free}] rows {d0}..{d0 + n}: {why}; a copy is exact",
    )


# ---- tp_broadcast -----------------------------------------------------------------------------


def _tpb_inputs(p: int, f: int, b: int, offset: int, dtype):
    def make(rng):
        return randn(rng, (p, f), dtype), b, offset

    return make


def _tpb_ref(src, broadcast, src_offset):
    return np.broadcast_to(src[:, src_offset][None, :], (broadcast, src.shape[0])).copy()


# ---- stream_shuffle_broadcast -----------------------------------------------------------------


def _ssb_inputs(ps: int, pd: int, f: int, dtype=np.float32):
    def make(rng):
        return randn(rng, (ps, f), dtype), randn(rng, (pd, f), dtype)

    return make


def _ssb_ref(src, dst):
    return np.broadcast_to(src[0:1], dst.shape).copy()


# ---- interleave_copy --------------------------------------------------------------------------


def _ic_inputs(
    p: int, f: int, scale: tuple[int, int] | None, bias: tuple[int, int] | None, index: int
):
    def make(rng):
        src = randn(rng, (p, f))
        sc = None if scale is None else randn(rng, scale)
        bi = None if bias is None else randn(rng, bias)
        return src, sc, bi, index

    return make


def _ic_ref(src, scale, bias, index):
    """``src * scale + bias`` in float64, rounded once to fp32 (the kernel's dtype)."""
    y = f64(src)
    if scale is not None:
        y = y * f64(scale)
    if bias is not None:
        y = y + f64(bias)
    return y.astype(np.float32)


# fp32 data; the engines compute in fp32: a product and then a sum, each rounded to fp32 (the
# Vector engine path) or fused (the Scalar engine's ``func(in * scale + bias)``). Against a
# float64 reference rounded once the difference is at most half an fp32 ulp of the product
# plus half an ulp of the result: with |src * scale| < 16 (standard normal operands) that is
# below 2^-20 absolute plus 2^-24 relative.
IC_ATOL = 2.0**-20
IC_RTOL = 2.0**-23


def _ic(name: str, scale, bias, index: int, why: str, p: int = 128, f: int = 256):
    return Case(
        f"library/interleave_copy_{name}",
        REPO,
        UTILS + "interleave_copy.py",
        "interleave_copy",
        _ic_inputs(p, f, scale, bias, index),
        _ic_ref,
        driver=drivers_sbuf.interleave_copy,
        rtol=IC_RTOL,
        atol=IC_ATOL,
        notes=f"fp32 [{p}, {f}], scale {scale}, bias {bias}, index {index}: {why}; tolerance: "
        "fp32 product and sum vs a float64 reference (see IC_ATOL)",
    )


CASES: list[Case] = [
    _xpc(
        "aligned",
        128,
        128,
        64,
        64,
        0,
        64,
        "both starts aligned (one tensor_copy of 64 partitions: starts 0/64 are legal)",
    ),
    _xpc("in_quadrant", 64, 96, 40, 0, 37, 20, "dst inside one quadrant (one stream shuffle)"),
    _xpc(
        "cross_quadrant",
        128,
        128,
        32,
        0,
        20,
        70,
        "dst spans quadrants: a shuffle, then the rest from an unaligned src offset",
    ),
    _xpc(
        "unaligned_src_bf16",
        96,
        128,
        48,
        5,
        45,
        40,
        "unaligned src first re-aligned through a temp, then an unaligned dst",
        dtype=bf16,
    ),
    Case(
        "library/tp_broadcast_fp32",
        REPO,
        UTILS + "tp_broadcast.py",
        "tp_broadcast",
        _tpb_inputs(96, 4, 128, 1, np.float32),
        _tpb_ref,
        driver=drivers_sbuf.tp_broadcast,
        rtol=0.0,
        atol=0.0,
        notes="fp32 src [96, 4], column 1 -> dst [128, 96] (a transpose moves fp32 bits "
        "exactly). fp32 only: the transpose goes to an fp32 PSUM tile and nc_transpose wants dst "
        "and data of one dtype (a bf16 src is refused; tests/test_conf_coll.py)",
    ),
    Case(
        "library/tp_broadcast_128",
        REPO,
        UTILS + "tp_broadcast.py",
        "tp_broadcast",
        _tpb_inputs(128, 8, 128, 7, np.float32),
        _tpb_ref,
        driver=drivers_sbuf.tp_broadcast,
        rtol=0.0,
        atol=0.0,
        notes="fp32 src [128, 8], the last column -> dst [128, 128]: the largest PE transpose",
    ),
    Case(
        "library/stream_shuffle_broadcast",
        REPO,
        UTILS + "stream_shuffle_broadcast.py",
        "stream_shuffle_broadcast",
        _ssb_inputs(4, 80, 64),
        _ssb_ref,
        driver=drivers_sbuf.stream_shuffle_broadcast,
        rtol=0.0,
        atol=0.0,
        notes="fp32 src [4, 64] partition 0 -> dst [80, 64] (three shuffles: 32 + 32 + 16 "
        "partitions); a shuffle copies raw bits",
    ),
    Case(
        "library/stream_shuffle_broadcast_inplace",
        REPO,
        UTILS + "stream_shuffle_broadcast.py",
        "stream_shuffle_broadcast",
        lambda rng: (randn(rng, (128, 16), bf16),),
        lambda x: np.broadcast_to(x[0:1], x.shape).copy(),
        driver=drivers_sbuf.stream_shuffle_broadcast_inplace,
        rtol=0.0,
        atol=0.0,
        notes="bf16 [128, 16], src and dst the same tensor (as attention_cte calls it): "
        "partition 0 onto all 128; the docstring allows an in-place shuffle",
    ),
    _ic("copy_act", None, None, 0, "a pure copy on the Scalar engine (activation copy)"),
    _ic("copy_vector", None, None, 1, "a pure copy on the Vector engine (tensor_copy)"),
    _ic("scale_bias_act", (128, 1), (128, 1), 2, "[P, 1] scale and bias on the Scalar engine"),
    _ic(
        "scale_bias_vector",
        (128, 1),
        (128, 1),
        3,
        "[P, 1] scale and bias broadcast (TensorView.broadcast) on the Vector engine",
    ),
    _ic("scale_full", (128, 256), None, 0, "a full [P, F] scale: tensor_tensor multiply"),
    _ic("bias_vector", None, (128, 1), 1, "a [P, 1] bias broadcast on the Vector engine"),
    _ic("bias_act", None, (128, 1), 0, "a [P, 1] bias on the Scalar engine"),
    _ic(
        "mixed",
        (128, 1),
        (128, 256),
        0,
        "[P, 1] scale on the Scalar engine, then a full [P, F] bias on the Vector engine",
    ),
]
