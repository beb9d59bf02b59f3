"""The fast paths (``CoreOptions.fast_paths``): decoded-tile cache and open-accumulation memo.

- ``DecodeCache.read``: ``NeuronCore.read`` of a narrow-float SBUF tile, decoded once per write
  of its allocation (a blocked matmul re-reads each tile once per output tile of its block),
  optionally laid out so that ``.T`` is C-contiguous (the layout ``semantics.nc_matmul`` copies
  a stationary tile into). Values equal to ``read``; callers must not modify the array.
- ``AccMemo``: PSUM views remembered as 'accumulation group open everywhere' until their
  allocation's marks change, so an ``nc_matmul`` into an open fp32 group adds in place without
  re-reading the marks.

Both give the plain path's bits (``tests/test_core_fast_paths.py``,
``tests/test_core_fast_path_caches.py``).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import numpy as np

from trnsim.core.arraypool import ArrayPool
from trnsim.core.memory import SBUF, View

if TYPE_CHECKING:
    from trnsim.core.accel.deferred import Pipeline

F32 = np.float32

DECODE_CACHE_BYTES = 32 << 20
"""Budget of decoded float32 SBUF tiles kept per core (least recently used dropped first)."""
SPARES_PER_SHAPE = 16
"""Dropped decoded-tile buffers a core keeps per shape for its next decodes."""
SPARE_BUFFERS = ArrayPool(64 << 20)
"""Decoded-tile buffers of finished runs kept for the next core's decode cache
(``ArrayPool``): a fresh buffer faults in new pages, which costs more than the decode."""
ACC_MEMO_ENTRIES = 4096
"""PSUM views remembered as 'accumulation group open everywhere' (then forgotten at once)."""


class DecodeCache:
    """Decoded float32 SBUF tiles of one core, keyed by view and allocation version."""

    def __init__(self, read: Any) -> None:
        self._read = read  # the plain decode (NeuronCore.read)
        self._decoded: OrderedDict[tuple, tuple[int, np.ndarray]] = OrderedDict()
        self._bytes = 0
        # shape -> [(buffer, the last job of the pipeline that may still read it)]
        self._spare: dict[tuple[int, ...], list[tuple[np.ndarray, int]]] = {}
        self.pipeline: Pipeline | None = None

    def read(self, v: View, transposed: bool = False) -> np.ndarray:
        fmt = v.fmt
        alloc = v.storage.alloc
        if alloc.kind != SBUF or fmt.kind == "packed" or fmt.dtype == F32:
            return self._read(v)
        key = (alloc, v.fmt.name, v.p0, v.offset, v.shape, v.strides, transposed)
        hit = self._decoded.get(key)
        if hit is not None:
            if hit[0] == alloc.version:
                self._decoded.move_to_end(key)
                return hit[1]
            del self._decoded[key]
            self._recycle(hit[1])
        raw = v.array()
        flip = transposed and raw.ndim == 2
        # a buffer of a dropped entry if one fits: a fresh array would fault in new pages
        shape = raw.shape[::-1] if flip else raw.shape
        buf = self._take_spare(shape)
        if buf is None:
            buf = SPARE_BUFFERS.take(shape, F32)
        if flip:  # rows are contiguous: decode row by row, then transpose
            np.copyto(buf, raw.astype(F32).T)
            vals = buf.T
        else:
            np.copyto(buf, raw, casting="unsafe")
            vals = buf
        self._decoded[key] = (alloc.version, vals)
        self._bytes += vals.nbytes
        while self._bytes > DECODE_CACHE_BYTES:
            _, (_, old) = self._decoded.popitem(last=False)
            self._recycle(old)
        return vals

    def _recycle(self, vals: np.ndarray) -> None:
        """Keep the buffer of a dropped decoded tile for the next tile of its shape."""
        self._bytes -= vals.nbytes
        buf = vals if vals.flags.c_contiguous else vals.T
        pipe = self.pipeline
        spares = self._spare.setdefault(buf.shape, [])
        if len(spares) < SPARES_PER_SHAPE:
            spares.append((buf, pipe.submitted if pipe is not None else 0))

    def _take_spare(self, shape: tuple[int, ...]) -> np.ndarray | None:
        """A dropped buffer of ``shape`` that no pending product reads any more."""
        spares = self._spare.get(shape)
        if spares:
            pipe = self.pipeline
            done = pipe.retired if pipe is not None else 0
            for i, (buf, last_job) in enumerate(spares):
                if last_job <= done:
                    del spares[i]
                    return buf
        return None

    def release(self) -> None:
        """Hand the buffers to the next core (end of a run: the executors that read them hold
        none of them beyond their instruction)."""
        bufs = [v for _, v in self._decoded.values()]
        bufs += [b for spares in self._spare.values() for b, _ in spares]
        self._decoded.clear()
        self._spare.clear()
        self._bytes = 0
        for vals in bufs:
            SPARE_BUFFERS.give(vals if vals.flags.c_contiguous else vals.T)


class AccMemo:
    """PSUM views whose every element is in an open accumulation group, per marks version."""

    def __init__(self) -> None:
        self._open: dict[tuple, int] = {}

    @staticmethod
    def _key(v: View) -> tuple:
        return (v.storage.alloc, v.fmt.name, v.p0, v.offset, v.shape, v.strides)

    def known_open(self, v: View) -> bool:
        return self._open.get(self._key(v)) == v.storage.alloc.marks_version

    def remember(self, v: View) -> None:
        if len(self._open) >= ACC_MEMO_ENTRIES:
            self._open.clear()
        self._open[self._key(v)] = v.storage.alloc.marks_version
