"""Run the emulator's tile-sized BLAS calls on one thread.

Why: an emulated kernel issues thousands of small matmuls (a ``nc_matmul`` is at most
128 x 128 by 128 x 8192). A multi-threaded OpenBLAS hands each of them to its worker threads;
between two of them the emulator runs Python, the workers go to sleep, and on a loaded machine
(two cores shared with other processes) every wake-up can cost milliseconds. Measured on the
2-core dev machine, the blocked bf16 matmul at 2048^3 (1024 tile matmuls) took 6 to 11 s with
two BLAS threads and 1.0 s with one (benchmarks/RESULTS.md, "Emulator (issue 4)").

``single_threaded_blas()`` sets NumPy's OpenBLAS to one thread for the duration of a kernel run
and restores the previous count afterwards. It uses ``threadpoolctl`` when installed, else the
``*_set_num_threads`` entry point of the OpenBLAS that NumPy ships (found in ``numpy.libs`` or
among the loaded libraries), else does nothing. The accumulation order inside the systolic
array is unspecified (DESIGN rule 3); the tests check matmuls against independent goldens.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import os
import threading
from collections.abc import Iterator

import numpy as np

_lock = threading.Lock()
_depth = 0
_saved: int | None = None
_PREFIXES = ("scipy_openblas_", "openblas_")
_SUFFIXES = ("64_", "")


def _find_openblas() -> tuple[object, object] | None:
    """(get_num_threads, set_num_threads) of NumPy's OpenBLAS, or None."""
    libdirs = [os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs")]
    candidates = [p for d in libdirs for p in glob.glob(os.path.join(d, "*openblas*"))]
    with contextlib.suppress(OSError), open("/proc/self/maps") as maps:
        candidates += sorted({ln.split()[-1] for ln in maps if "openblas" in ln.lower()})
    for path in candidates:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for pre in _PREFIXES:
            for suf in _SUFFIXES:
                get = getattr(lib, f"{pre}get_num_threads{suf}", None)
                put = getattr(lib, f"{pre}set_num_threads{suf}", None)
                if get is not None and put is not None:
                    get.restype = ctypes.c_int
                    put.argtypes = [ctypes.c_int]
                    return get, put
    return None


_OPENBLAS: tuple[object, object] | bool | None = False  # False: not looked up yet


def _openblas() -> tuple[object, object] | None:
    global _OPENBLAS
    if _OPENBLAS is False:
        _OPENBLAS = _find_openblas()
    return _OPENBLAS  # type: ignore[return-value]


@contextlib.contextmanager
def single_threaded_blas() -> Iterator[None]:
    """Limit NumPy's BLAS to one thread inside the block (re-entrant, thread-safe)."""
    try:
        from threadpoolctl import threadpool_limits  # type: ignore[import-not-found]
    except ImportError:
        threadpool_limits = None
    if threadpool_limits is not None:
        with threadpool_limits(limits=1, user_api="blas"):
            yield
        return
    global _depth, _saved
    fns = _openblas()
    with _lock:
        if fns is not None and _depth == 0:
            get, put = fns
            _saved = int(get())  # type: ignore[operator]
            put(1)  # type: ignore[operator]
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if fns is not None and _depth == 0 and _saved is not None:
                fns[1](_saved)  # type: ignore[operator]
