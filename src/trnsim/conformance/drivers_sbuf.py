"""Driver kernels for nki-library's SBUF utilities (``core/utils``), written here.

The utilities (``cross_partition_copy``, ``tp_broadcast``, ``stream_shuffle_broadcast``,
``interleave_copy``) are subkernels: they take SBUF tensors, so they cannot be launched on
HBM arrays. Each driver here is a factory ``driver(subkernel) -> Kernel``: the runner imports
the subkernel from the checkout (unmodified) and hands it in; the driver's ``@nki.jit`` kernel
loads its HBM inputs into SBUF, calls the subkernel, and stores the SBUF result to a new HBM
output. A ``Case`` names its driver with ``driver=drivers_sbuf.<name>``.

This file is listed in ``trnsim.core.location._KERNEL_FILES``: an error in a driver names the
driver's line, an error inside the subkernel the library's own file:line (the innermost frame).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl
from trnsim.nki.simulate import Kernel, jit


def _load(x: Any) -> Any:
    """An SBUF copy of the HBM tensor ``x`` (same shape and dtype)."""
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    return t


def _store(t: Any) -> Any:
    """A new ``shared_hbm`` output holding the SBUF tensor ``t``."""
    out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def cross_partition_copy(sub: Callable[..., Any]) -> Kernel:
    """``driver(src, dst, src_start, dst_start, n, free)`` -> ``dst`` after the copy (``dst``
    is the destination's initial contents: partitions outside the copy must keep them)."""

    @jit
    def driver(src, dst, src_start_partition, dst_start_partition, num_partitions, free_size):
        s, d = _load(src), _load(dst)
        sub(s, d, src_start_partition, dst_start_partition, num_partitions, free_size)
        return _store(d)

    return driver


def tp_broadcast(sub: Callable[..., Any]) -> Kernel:
    """``driver(src [P, F], broadcast, src_offset)`` -> ``dst [broadcast, P]`` (src's dtype)."""

    @jit
    def driver(src, broadcast, src_offset):
        s = _load(src)
        d = nl.ndarray((broadcast, src.shape[0]), dtype=src.dtype, buffer=nl.sbuf)
        sub(s, d, src_offset)
        return _store(d)

    return driver


def stream_shuffle_broadcast(sub: Callable[..., Any]) -> Kernel:
    """``driver(src [Ps, F], dst [Pd, F])`` -> ``dst`` after the broadcast (``dst`` is the
    destination's initial contents)."""

    @jit
    def driver(src, dst):
        s, d = _load(src), _load(dst)
        sub(s, d)
        return _store(d)

    return driver


def stream_shuffle_broadcast_inplace(sub: Callable[..., Any]) -> Kernel:
    """``driver(x [P, F])`` -> ``x`` after ``sub(src=x, dst=x)`` (one tensor, in place)."""

    @jit
    def driver(x):
        t = _load(x)
        sub(src=t, dst=t)
        return _store(t)

    return driver


def interleave_copy(sub: Callable[..., Any]) -> Kernel:
    """``driver(src [P, F], scale, bias, index)`` -> ``dst [P, F]`` (src's dtype). ``scale`` and
    ``bias`` are None or HBM arrays ([P, 1] or [P, F]), passed to the subkernel as the library's
    own ``TensorView`` (imported from the subkernel's module) of their SBUF copies."""
    tensor_view = sub.__globals__["TensorView"]

    @jit
    def driver(src, scale, bias, index):
        s = _load(src)
        d = nl.ndarray(src.shape, dtype=src.dtype, buffer=nl.sbuf)
        sc = None if scale is None else tensor_view(_load(scale))
        bi = None if bias is None else tensor_view(_load(bias))
        sub(d, s, scale=sc, bias=bi, index=index)
        return _store(d)

    return driver
