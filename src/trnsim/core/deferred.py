"""Deferred ``nc_matmul`` tile products: one worker thread per core computes them behind the
interpreter.

Why: an emulated matmul kernel spends about half its time in BLAS tile products (single-
threaded, see ``trnsim.core.blas``) and the other half in Python (interpreting the kernel,
rule checks, recording, decoding tiles). NumPy releases the GIL inside BLAS, so a second
thread can compute the products while the kernel's thread goes on issuing instructions.

The contract (``NeuronCore`` keeps it; tests/test_core_async_matmul.py checks it):

- A job is one product ``stationary.T @ moving`` (``semantics.nc_matmul``, the same BLAS call
  on the same float32 operands as the plain path) and its commit into PSUM data: an fp32 add
  in place (an open accumulation group) or an overwrite. Jobs run one at a time, in program
  order, on one thread, so the bits equal the plain path's.
- Everything else of the instruction (rule checks, the record, the accumulation marks and
  versions, the decision add / overwrite, warnings) happens on the kernel's thread at issue.
- Operands are private float32 buffers (decoded tiles) or SBUF data no deferred job writes;
  the core waits for the jobs before any other instruction, any on-chip allocation, any host
  read of memory, before reusing a decoded buffer a job still holds, and at the end of a run.
- A job that fails is reported at the next wait as a ``KernelError`` located at the kernel
  line of the instruction that issued it (from the record, not the current stack). NumPy
  floating-point warnings of a job (overflow in the product or the add) are re-emitted on the
  kernel's thread with NumPy's message, located at that line.
"""

from __future__ import annotations

import threading
import warnings
from queue import SimpleQueue
from typing import Any

import numpy as np

from trnsim.core import semantics as S
from trnsim.errors import KernelError

_STOP = None


class MatmulWorker:
    """One thread running deferred tile products in submission order."""

    def __init__(self, name: str = "trnsim-matmul") -> None:
        self._jobs: SimpleQueue[Any] = SimpleQueue()
        self._done: SimpleQueue[Any] = SimpleQueue()
        self.submitted = 0
        self.completed = 0
        self._error: KernelError | None = None
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    @property
    def busy(self) -> bool:
        return self.submitted != self.completed

    def submit(
        self,
        stationary: np.ndarray,
        moving: np.ndarray,
        out: np.ndarray,
        add: bool,
        where: tuple[str, int],
    ) -> int:
        """Queue ``out += st.T @ mv`` (``add``) or ``out[...] = st.T @ mv``; returns the job's
        sequence number (``wait(seq)`` returns once it is done). ``where``: the kernel's
        (file, line) of the instruction."""
        self._jobs.put((stationary, moving, out, add, where))
        self.submitted += 1
        return self.submitted

    def wait(self, seq: int | None = None) -> None:
        """Block until job ``seq`` (default: every submitted job) is done; raise the first
        failure of a job done so far (once), emit the jobs' floating-point warnings."""
        target = self.submitted if seq is None else seq
        while self.completed < target:
            status = self._done.get()
            self.completed += 1
            if status is None:
                continue
            kind, payload, (file, line) = status
            if kind == "warn":
                for message in payload:
                    warnings.warn_explicit(message, RuntimeWarning, file, line)
            elif self._error is None:
                self._error = KernelError(
                    "deferred-matmul",
                    f"nc_matmul tile product failed: {type(payload).__name__}: {payload}",
                    file,
                    line,
                )
                self._error.__cause__ = payload
        if self._error is not None:
            err, self._error = self._error, None
            raise err

    def close(self) -> None:
        """Wait for every job (raising a failure), then stop the thread."""
        try:
            self.wait()
        finally:
            self._jobs.put(_STOP)
            self._thread.join()

    def _loop(self) -> None:
        jobs, done = self._jobs, self._done
        stage = ["matmul"]
        flags: list[str] = []

        def record(kind: str, _flag: int) -> None:  # NumPy's floating-point error callback
            flags.append(f"{kind} encountered in {stage[0]}")

        scratch: dict[tuple[int, int], np.ndarray] = {}
        # errstate is per thread (a context variable): this only affects the worker
        with np.errstate(all="call", call=record):
            while True:
                job = jobs.get()
                if job is _STOP:
                    return
                st, mv, out, add, where = job
                try:
                    shape = (st.shape[1], mv.shape[1])
                    buf = scratch.get(shape)
                    if buf is None:
                        buf = scratch[shape] = np.empty(shape, np.float32)
                    stage[0] = "matmul"
                    prod = S.nc_matmul(st, mv, out=buf).reshape(out.shape)
                    stage[0] = "add"
                    if add:
                        out += prod
                    else:
                        out[...] = prod
                except Exception as exc:  # reported on the kernel's thread (wait)
                    done.put(("error", exc, where))
                    continue
                if flags:
                    done.put(("warn", tuple(flags), where))
                    flags.clear()
                else:
                    done.put(None)
