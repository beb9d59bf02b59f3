"""Write-write races between the cores of an LNC=2 launch, on HBM.

The two programs of a ``kernel[2]`` launch run concurrently, ordered only where both pass a
launch-wide barrier (``core_barrier``, ``sendrecv``, the collectives: every
``Launch.barrier.wait``). Between two such barriers (an *epoch*), each core's writes land in
its own program order, but the two cores' writes interleave in any order: on hardware as the
cores' timing falls, in trnsim as the host threads happen to run. A byte that both cores write
in one epoch ends the epoch holding the last value of whichever core wrote it last; if the two
cores' last values differ, the result is not a function of the inputs (a write-write race), so
it is refused (rule ``lnc-race``) instead of producing numbers that change from run to run.

Both cores writing the same final value is fine (both zeroing one output, both storing the
same residual, or both zeroing a tile and then scattering the same values into it: whatever
the interleaving, each core's own scatter follows its own zeroing). Reads are not checked: a
core reading a byte the other core writes in the same epoch is not detected.

The check runs when every core has reached the barrier that ends the epoch (the barrier's
action; the error is raised on the core that arrived last, at its barrier line) and once more
when the launch ends. Only LNC>1 functional launches carry a ``RaceCheck`` (``Hbm.race``);
single-core runs pay one attribute test per HBM write. Per HBM allocation written during the
launch, made on its first write: ``marks`` (int32 per byte: ``epoch * 4 + writers``,
``writers`` one bit per core that wrote the byte in that epoch; 0: never written) and each
core's last value of each byte.
"""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from trnsim.core.argrules import broken
from trnsim.core.location import HERE, _inside, kernel_location

if TYPE_CHECKING:
    from trnsim.core.memory import Allocation

_CORE_BITS = 2  # the writers of a byte in its epoch: one bit per core (LNC <= 2)
_BOTH = (1 << _CORE_BITS) - 1


class _Shadow:
    """What the race check keeps for one HBM allocation (module docstring)."""

    __slots__ = ("last", "marks", "where")

    def __init__(self, nbytes: int) -> None:
        self.marks = np.zeros(max(nbytes, 1), np.int32)
        self.last = (np.zeros(max(nbytes, 1), np.uint8), np.zeros(max(nbytes, 1), np.uint8))
        self.where: list[tuple[str, int] | None] = [None, None]  # each core's last store


class RaceCheck:
    """The write-write race check of one LNC=2 launch (module docstring)."""

    def __init__(self) -> None:
        self.epoch = 1
        self.lock = threading.Lock()
        self.shared: dict[int, Allocation] = {}  # written by both cores in this epoch

    def _shadow(self, alloc: Allocation) -> _Shadow:
        sh = alloc.writers
        if sh is None:
            sh = alloc.writers = _Shadow(alloc.nbytes)
        return sh

    def store(self, core: int, alloc: Allocation, out: np.ndarray, values: np.ndarray) -> None:
        """``out[...] = values`` (``out`` a view of ``alloc``'s buffer), noted."""
        buf = alloc.buffer
        assert buf is not None
        start = out.__array_interface__["data"][0] - buf.__array_interface__["data"][0]
        shape = (*out.shape, out.itemsize)
        strides = (*out.strides, 1)
        with self.lock:
            out[...] = values
            sh = self._shadow(alloc)
            data = as_strided(buf[start:], shape=shape, strides=strides, writeable=False)
            last = as_strided(sh.last[core][start:], shape=shape, strides=strides)
            last[...] = data
            marks = as_strided(sh.marks[start:], shape=shape, strides=tuple(4 * s for s in strides))
            marks[...] = self._marked(core, alloc, marks)
            sh.where[core] = kernel_location()

    def store_flat(
        self, core: int, alloc: Allocation, flat: np.ndarray, index: np.ndarray, values: Any
    ) -> None:
        """``flat[index] = values`` (``flat``: the buffer from byte 0, as elements), noted."""
        k = flat.itemsize
        byte_idx = (np.asarray(index, np.int64).reshape(-1, 1) * k + np.arange(k)).reshape(-1)
        buf = alloc.buffer
        assert buf is not None
        with self.lock:
            flat[index] = values
            sh = self._shadow(alloc)
            sh.last[core][byte_idx] = buf[byte_idx]
            sh.marks[byte_idx] = self._marked(core, alloc, sh.marks[byte_idx])
            sh.where[core] = kernel_location()

    def _marked(self, core: int, alloc: Allocation, marks: np.ndarray) -> np.ndarray:
        """The marks after core ``core`` wrote: its bit added to this epoch's writers."""
        now = (marks >> _CORE_BITS) == self.epoch
        new = np.where(now, marks | (1 << core), (self.epoch << _CORE_BITS) | (1 << core))
        if id(alloc) not in self.shared and (now & (marks & ~(1 << core) & _BOTH != 0)).any():
            self.shared[id(alloc)] = alloc
        return new

    def advance(self) -> None:
        """Every core reached a launch-wide barrier (``threading.Barrier`` action): check the
        epoch that ends, start the next."""
        if not self.shared:
            self.epoch += 1
            return
        # (the action runs inside threading.Barrier.wait: the barrier's kernel line is the
        # first frame outside trnsim and the threading module)
        frame = sys._getframe(1)
        while frame is not None and (
            frame.f_code.co_filename == threading.__file__ or _inside(frame.f_code.co_filename)
        ):
            frame = frame.f_back  # type: ignore[assignment]
        before = HERE.where
        if frame is not None:
            HERE.where = (frame.f_code.co_filename, frame.f_lineno)
        try:
            self.check("at this barrier")
        finally:
            HERE.where = before
            self.epoch += 1
            self.shared = {}

    def check(self, found: str) -> None:
        """Refuse a byte both cores wrote in this epoch with different last values."""
        for alloc in self.shared.values():
            sh = alloc.writers
            assert sh is not None
            both = sh.marks == ((self.epoch << _CORE_BITS) | _BOTH)
            differ = both & (sh.last[0] != sh.last[1])
            if differ.any():
                byte = int(np.flatnonzero(differ)[0])
                at = [f"{w[0].rsplit('/', 1)[-1]}:{w[1]}" if w else "?" for w in sh.where]
                raise broken(
                    "lnc-race",
                    f"both cores wrote byte {byte} of HBM tensor "
                    f"{alloc.name or '<unnamed>'!r} ({alloc.nbytes} bytes) since the last "
                    "barrier they both passed (core_barrier, sendrecv or a collective), last "
                    f"with {int(sh.last[0][byte]):#04x} (core 0, which last stored to it at "
                    f"{at[0]}) and {int(sh.last[1][byte]):#04x} (core 1, at {at[1]}): the "
                    "result depends on which core writes last (a write-write race; "
                    f"{int(differ.sum())} such bytes), found {found}",
                )
