"""Arrays handed from one run's cores to the next, so a run does not fault in fresh pages.

Faulting in fresh pages costs about ten times as much as writing pages already mapped (the
dev VM: 3.7 ms against 0.28 ms for 4 MB; benchmarks/RESULTS.md, "Emulator"). Users: the
SBUF/PSUM backing arrays (``memory.OnChipMemory``) and the decoded-tile buffers of
``machine.NeuronCore``. An array taken from a pool holds whatever its last user wrote.
"""

from __future__ import annotations

import threading

import numpy as np


class ArrayPool:
    """Spare arrays by (shape, dtype), at most ``budget`` bytes in all; thread-safe."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._free: dict[tuple, list[np.ndarray]] = {}
        self._bytes = 0
        self._lock = threading.Lock()

    def take(self, shape: tuple[int, ...], dtype: np.dtype | type) -> np.ndarray:
        """A spare array of ``shape`` and ``dtype`` (contents left over), else a new one."""
        key = (tuple(shape), np.dtype(dtype))
        with self._lock:
            free = self._free.get(key)
            if free:
                a = free.pop()
                self._bytes -= a.nbytes
                return a
        return np.empty(shape, dtype)

    def give(self, a: np.ndarray) -> None:
        """Keep ``a`` for a later ``take`` if the budget allows. Never blocks: a ``__del__``
        the cyclic GC runs inside ``take`` on the same thread may call it (skipping a recycle
        is harmless)."""
        if not self._lock.acquire(blocking=False):
            return
        try:
            if self._bytes + a.nbytes <= self.budget:
                self._free.setdefault((a.shape, a.dtype), []).append(a)
                self._bytes += a.nbytes
        finally:
            self._lock.release()
