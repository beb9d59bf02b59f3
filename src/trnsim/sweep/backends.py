"""Where the points of a sweep or a tune run: in this process, on a local process pool, on Ray.

A backend is an options object (never a module global) with one method,
``run(fn, items) -> iterator of (key, result)``: it calls the module-level function ``fn`` on
each ``(key, argument)`` of ``items`` and yields each result as soon as it is ready, in any
order. ``fn`` must be deterministic (a point's result depends on its argument alone), which is
what makes every backend's results the same, bit for bit; ``Serial`` is the specification the
others are tested against.

- ``Serial()``: one after another, in this process.
- ``Pool(workers)``: a ``concurrent.futures.ProcessPoolExecutor`` of ``workers`` processes
  (default: every core this process may use), forked from this process, which has imported
  what the work needs, when that is safe (no other thread that could hold a lock across the
  fork: ``forkable``), so the pool starts in milliseconds; otherwise from a fork server that
  imports the modules the work needs once (``preload``; about 0.4 s to start). Workers
  ignore Ctrl-C; the sweep stops them. A worker that dies (killed, out of memory) breaks the
  pool: the points it was running are run again alone, each in a fresh pool, and the one that
  kills its worker again is reported as failed (``WorkerDied``), never fatal to the sweep.
- ``RayBackend(address)``: Ray tasks (one CPU each) on the runtime of ``address``, or on a new
  local runtime on 127.0.0.1 (``trnsim.extras.connect``). A task whose worker dies is
  reported as failed. At most ``2 x CPUs`` items are in flight in every backend, so a Ctrl-C
  stops promptly and a million-point sweep never queues a million tasks.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import multiprocessing
import multiprocessing.forkserver
import os
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from trnsim.errors import UsageError

Item = tuple[Any, Any]  # (key, argument)


class WorkerDied(Exception):
    """The process running an item died before it returned (recorded as the item's error)."""


def cpus() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class Serial:
    """Every item in this process, in order (the specification of the others)."""

    name: str = "serial"

    def describe(self) -> str:
        return "in this process"

    def run(self, fn: Callable[[Any], Any], items: Iterable[Item]) -> Iterator[tuple[Any, Any]]:
        for key, arg in items:
            try:
                result = fn(arg)
            except Exception as exc:  # fn's bug: the item's error, as on the other backends
                result = exc
            yield key, result


def _worker_init() -> None:
    """A pool worker: Ctrl-C is the parent's to handle; no progress bars."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ["TRNSIM_PROGRESS"] = "0"


def forkable() -> bool:
    """Whether pool workers may be forked from this process: POSIX ``fork`` exists, this is
    the main thread, and every other thread is one of ours that holds no lock across a fork
    (``trnsim.report.progress.fork_safe``: the progress lines and bar). A process running
    Ray, another pool's manager thread or a thread of the user's starts its workers from the
    fork server instead."""
    from trnsim.report.progress import fork_safe

    if "fork" not in multiprocessing.get_all_start_methods():
        return False
    if threading.current_thread() is not threading.main_thread():
        return False
    return all(fork_safe(t) for t in threading.enumerate() if t is not threading.main_thread())


def _forked_worker_init(blas_threads: int) -> None:
    """A worker forked from the parent: as ``_worker_init``, and its BLAS pool narrowed to
    cores / workers threads (the parent's was sized for the whole machine; the variables the
    fork server gets are read only when BLAS loads)."""
    _worker_init()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the parent's handler is the parent's
    if any(k in os.environ for k in BLAS_THREADS):
        return  # the user sized it
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - a dependency; without it the parent's width
        return
    threadpool_limits(blas_threads)


BLAS_THREADS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


@contextlib.contextmanager
def _blas_threads(n: int) -> Iterator[None]:
    """The BLAS thread-count variables set to ``n`` for a process started meanwhile (those
    the user set are kept), restored after."""
    saved = {k: os.environ.get(k) for k in BLAS_THREADS}
    for k in BLAS_THREADS:
        os.environ.setdefault(k, str(n))
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@dataclass(frozen=True)
class Pool:
    """A local process pool (module docstring)."""

    workers: int | None = None
    preload: tuple[str, ...] = ()
    name: str = "pool"

    def __post_init__(self) -> None:
        if self.workers is not None and self.workers < 1:
            raise UsageError(f"--workers {self.workers}: must be >= 1")

    @property
    def size(self) -> int:
        return self.workers or cpus()

    def describe(self) -> str:
        return f"on {self.size} worker process{'es' if self.size != 1 else ''}"

    def _executor(self, size: int) -> cf.ProcessPoolExecutor:
        blas = max(1, cpus() // max(1, self.size))
        if forkable():
            # every worker is forked at the first submit, before the executor's own thread
            return cf.ProcessPoolExecutor(
                size,
                mp_context=multiprocessing.get_context("fork"),
                initializer=_forked_worker_init,
                initargs=(blas,),
            )
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["trnsim.sweep.points", *self.preload])
        # the fork server imports NumPy once for every worker: its BLAS threads are sized
        # there, when the server starts. One process per core already fills the cores; a
        # BLAS pool per worker as wide as the machine oversubscribes them (what joblib/loky
        # and Ray do too: a worker's BLAS gets cores / workers threads, unless the user set it)
        with _blas_threads(blas):
            multiprocessing.forkserver.ensure_running()
        return cf.ProcessPoolExecutor(size, mp_context=ctx, initializer=_worker_init)

    def run(self, fn: Callable[[Any], Any], items: Iterable[Item]) -> Iterator[tuple[Any, Any]]:
        queue = list(items)
        queue.reverse()  # pop() from the end: the spec's order
        suspects: list[Item] = []
        while queue or suspects:
            if suspects:  # after a worker died: each suspect alone in a fresh pool of one
                item = suspects.pop(0)
                got = list(self._drain(fn, [item], 1, lone=True))
                yield from got
                continue
            for out in self._drain(fn, queue, self.size, lone=False):
                if isinstance(out, _Broken):
                    suspects.extend(out.items)
                    break
                yield out

    def _drain(
        self, fn: Callable[[Any], Any], queue: list[Item], size: int, lone: bool
    ) -> Iterator[Any]:
        """Run ``queue`` (popped from the end) on a pool of ``size``; yields results, or one
        ``_Broken`` with the items in flight when a worker died (the rest stay queued)."""
        ex = self._executor(size)
        inflight: dict[cf.Future[Any], Item] = {}
        finished = False
        try:
            while queue or inflight:
                while queue and len(inflight) < 2 * size:
                    item = queue.pop()
                    inflight[ex.submit(fn, item[1])] = item
                done, _ = cf.wait(inflight, return_when=cf.FIRST_COMPLETED)
                for fut in done:
                    item = inflight.pop(fut)
                    try:
                        result = fut.result()
                    except cf.process.BrokenProcessPool:
                        if lone:
                            yield (
                                item[0],
                                WorkerDied(
                                    "the worker process died running this point (killed, or out "
                                    "of memory?)"
                                ),
                            )
                            continue
                        yield _Broken([item, *inflight.values()])
                        inflight.clear()
                        return
                    except Exception as exc:  # fn's bug: the item's error
                        result = exc
                    yield item[0], result
            finished = True
        finally:
            _stop(ex, finished)


@dataclass
class _Broken:
    items: list[Item] = field(default_factory=list)


def _stop(ex: cf.ProcessPoolExecutor, finished: bool) -> None:
    """Shut a pool down; when stopped early (Ctrl-C, an error), end its workers now rather than
    wait for the points they run."""
    if finished:
        ex.shutdown(wait=True)
        return
    procs = list(getattr(ex, "_processes", {}).values())  # CPython's record of its workers
    ex.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(timeout=5)


@dataclass(frozen=True)
class RayBackend:
    """Ray tasks on a cluster or a local runtime (module docstring). ``address`` None: a new
    local runtime of ``num_cpus`` CPUs (default all), or the one this process already
    joined."""

    address: str | None = None
    num_cpus: int | None = None
    name: str = "ray"

    def describe(self) -> str:
        return f"on the Ray cluster at {self.address}" if self.address else "on a local Ray"

    def run(self, fn: Callable[[Any], Any], items: Iterable[Item]) -> Iterator[tuple[Any, Any]]:
        from trnsim import extras

        ray, started = extras.connect(self.address, self.num_cpus)
        try:
            yield from self._run(ray, fn, items)
        finally:
            if started:
                extras.shutdown(ray)

    def _run(self, ray: Any, fn: Callable[[Any], Any], items: Iterable[Item]) -> Iterator[Any]:
        task = ray.remote(num_cpus=1, max_retries=0)(fn)
        window = 2 * max(1, int(ray.cluster_resources().get("CPU", 1)))
        queue = list(items)
        queue.reverse()
        inflight: dict[Any, Item] = {}
        try:
            while queue or inflight:
                while queue and len(inflight) < window:
                    item = queue.pop()
                    inflight[task.remote(item[1])] = item
                ready, _ = ray.wait(list(inflight), num_returns=1)
                for ref in ready:
                    item = inflight.pop(ref)
                    try:
                        result = ray.get(ref)
                    except ray.exceptions.RayTaskError as exc:  # fn raised: its error
                        result = exc
                    except ray.exceptions.RayError as exc:  # the worker died, the task lost
                        result = WorkerDied(
                            f"the Ray worker died running this point ({type(exc).__name__})"
                        )
                    yield item[0], result
        finally:
            for ref in inflight:
                ray.cancel(ref, force=True)


Backend = Serial | Pool | RayBackend
