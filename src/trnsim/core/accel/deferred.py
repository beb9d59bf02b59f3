"""Deferred data work: a kernel's data moves on other threads while its Python runs ahead.

Why: an emulated matmul kernel spends about half its time in BLAS tile products (each one
single-threaded, see ``trnsim.core.blas``) and the rest in Python (interpreting the kernel,
checking rules, recording, decoding tiles, casting). NumPy releases the interpreter lock
inside BLAS, so the products of one core can run on two threads while Python goes on.

Three parts, per core (``Deferred``, made by ``NeuronCore.start_async`` with
``CoreOptions(deferred=True)``; tests/test_core_deferred.py checks each
promise below against the plain, synchronous path, bit for bit):

- The kernel's thread checks the rules and records each instruction as always, then queues
  its executor on the core's ``Stream`` instead of running it. Only host reads of memory
  (``device_print``, ``sendrecv``, the run's outputs), tensor-indirection and indirect-DMA
  instructions (whose offsets are data) and the end of the run wait for the queue
  (``NeuronCore.sync``).
- The stream's thread runs the executors in program order. An ``nc_matmul`` of SBUF
  operands (not double-row, not a transpose) decodes them there and hands the product to the
  ``Pipeline``. Any other instruction runs there at once unless it touches memory that work
  still in the pipeline writes (or writes memory that work there reads); then it joins the
  pipeline as an ordered *action*. Hazards are checked per allocation rectangle.
- The ``Pipeline``'s threads compute products in any order, but *retire* (commit a product
  into PSUM with the plain path's ``_psum_accumulate``, or run an action) strictly in
  submission order. Every byte therefore sees its writes in program order, and each product
  is the same BLAS call on the same float32 operands as the plain path: the same bits.

Liveness and allocation are the plain path's: queued work holds views over a
``DetachedStorage``, so it never keeps a tensor alive, and a new allocation's sentinel fill is
queued behind the work on the memory it reuses. The Vector engine's RNG and accumulator
instructions run with everything before them retired; runs with stochastic rounding (whose
draws must come in program order) are not deferred at all. A failure in deferred work is
raised at the next wait, located at the kernel line that issued the instruction
(``location.HERE``); it wins over any later error. Warnings come out as work retires, in
program order, and none after a failure; a product's floating-point warning is NumPy's own
(same text, category and location as on the plain path).

Two differences remain, both only for kernels that act on their own instructions' outcome
in Python (the plain path, ``CoreOptions()``, the default, has neither): a warning filter (or
``np.errstate``) a kernel sets around one instruction is not in force when that
instruction's deferred part runs, and an error found while moving data is raised at the next
wait, so a ``try`` around the one instruction does not catch it.
"""

from __future__ import annotations

import copy
import inspect
import os
import threading
import warnings
from queue import SimpleQueue
from typing import TYPE_CHECKING, Any

import numpy as np

from trnsim.core import location
from trnsim.core import semantics as S
from trnsim.core.isa import IN_ORDER, Op
from trnsim.core.live import LiveInstruction
from trnsim.core.memory import PSUM, SBUF, OnChipMemory, View
from trnsim.core.spec import DST, MOVING, STATIONARY
from trnsim.errors import KernelError

if TYPE_CHECKING:
    from trnsim.core.live import Core as NeuronCore

F32 = np.float32

_STOP = None

WORKERS = max(1, min(2, os.cpu_count() or 1))
"""Threads computing tile products per core: two (the dev machine has two cores), one on a
one-core machine. The bits do not depend on it."""

Region = tuple[Any, int, int, int, int]
"""(memory or HBM allocation, first partition, end partition, first byte, end byte)."""


def overlaps(a: Region, b: Region) -> bool:
    return a[0] is b[0] and a[1] < b[2] and b[1] < a[2] and a[3] < b[4] and b[3] < a[4]


class Pipeline:
    """Tile products computed on ``WORKERS`` threads; products and actions retire in order
    (one thread at a time retires, outside the lock, so the others go on computing)."""

    def __init__(self, name: str = "trnsim-pipeline", threads: int | None = None) -> None:
        self._jobs: SimpleQueue[Any] = SimpleQueue()
        self._lock = threading.Lock()
        self._retired_cv = threading.Condition(self._lock)
        self.submitted = 0
        self.retired = 0
        self._ready: dict[int, Any] = {}
        self._retiring = False
        # pending (not retired) work by memory: seq -> the rectangles it writes / reads there
        self._writes: dict[Any, dict[int, list[Region]]] = {}
        self._reads: dict[Any, dict[int, list[Region]]] = {}
        self._keys: dict[int, tuple[Any, ...]] = {}
        self._free: dict[tuple[int, int], list[np.ndarray]] = {}
        self._error: BaseException | None = None
        n = threads or WORKERS
        self._threads = [
            threading.Thread(target=self._loop, name=f"{name}-{i}", daemon=True) for i in range(n)
        ]
        for t in self._threads:
            t.start()

    @property
    def busy(self) -> bool:
        return self.submitted != self.retired

    # ---- submitting (the stream's thread) ---------------------------------------------------

    def product(
        self,
        stationary: np.ndarray,
        moving: np.ndarray,
        commit: Any,
        args: tuple,
        reads: tuple[Region, ...],
        writes: tuple[Region, ...],
        where: tuple[str, int],
    ) -> int:
        """Queue ``stationary.T @ moving`` (``semantics.nc_matmul``), then, in order,
        ``commit(product, *args)``; returns its sequence number. ``reads``: the memory the
        operand arrays are views of (none for private decoded copies)."""
        with self._lock:
            self.submitted += 1
            seq = self.submitted
            self._index(seq, reads, writes)
        self._jobs.put((seq, stationary, moving, commit, args, where))
        return seq

    def action(
        self,
        fn: Any,
        args: tuple,
        reads: tuple[Region, ...],
        writes: tuple[Region, ...],
        where: tuple[str, int],
    ) -> int:
        """Queue ``fn(*args)`` to run once everything submitted before it has retired."""
        with self._lock:
            self.submitted += 1
            seq = self.submitted
            self._index(seq, reads, writes)
        self._deposit(seq, ("action", fn, args, where))
        return seq

    def conflict(self, reads: tuple[Region, ...], writes: tuple[Region, ...]) -> int:
        """The last pending job that writes what ``reads``/``writes`` touch or reads what
        ``writes`` touch (0 if none)."""
        last = 0
        with self._lock:
            for r in reads:
                last = max(last, _last_hit(self._writes.get(r[0]), r))
            for w in writes:
                last = max(last, _last_hit(self._writes.get(w[0]), w))
                last = max(last, _last_hit(self._reads.get(w[0]), w))
        return last

    def wait(self, seq: int | None = None) -> None:
        """Block until job ``seq`` (default: all) has retired; raise the first failure of
        the retired work (once)."""
        target = self.submitted if seq is None else seq
        with self._lock:
            while self.retired < target:
                if not self._retired_cv.wait(timeout=1.0):
                    _check_alive(self._threads)
            err, self._error = self._error, None
        if err is not None:
            raise err

    def close(self) -> None:
        try:
            self.wait()
        finally:
            for _ in self._threads:
                self._jobs.put(_STOP)
            for t in self._threads:
                t.join()

    # ---- bookkeeping (with the lock held) ---------------------------------------------------

    def _index(self, seq: int, reads: tuple[Region, ...], writes: tuple[Region, ...]) -> None:
        keys = []
        for table, regions in ((self._reads, reads), (self._writes, writes)):
            for r in regions:
                table.setdefault(r[0], {}).setdefault(seq, []).append(r)
                keys.append((table, r[0]))
        self._keys[seq] = tuple(keys)

    def _unindex(self, seq: int) -> None:
        for table, mem in self._keys.pop(seq):
            table[mem].pop(seq, None)

    # ---- the workers ------------------------------------------------------------------------

    def _loop(self) -> None:
        jobs = self._jobs
        flags: list[str] = []

        def record(kind: str, _flag: int) -> None:  # NumPy's floating-point error callback
            flags.append(f"{kind} encountered in matmul")

        # errstate is per thread (a context variable): this only affects the workers
        with np.errstate(all="call", call=record):
            while True:
                job = jobs.get()
                if job is _STOP:
                    return
                seq, st, mv, commit, args, where = job
                del job
                shape = (st.shape[1], mv.shape[1])
                with self._lock:
                    free = self._free.get(shape)
                    buf = free.pop() if free else None
                if buf is None:
                    buf = np.empty(shape, np.float32)
                try:
                    S.nc_matmul(st, mv, out=buf)
                    outcome: Any = None
                except Exception as exc:  # raised on the waiting thread (wait)
                    outcome = exc
                early = tuple(flags)
                flags.clear()
                del st, mv
                self._deposit(seq, ("product", buf, commit, args, where, outcome, early))
                del commit, args

    def _deposit(self, seq: int, item: Any) -> None:
        """Make job ``seq`` ready; retire what is due unless another thread is retiring."""
        with self._lock:
            self._ready[seq] = item
            if self._retiring or self.retired + 1 not in self._ready:
                return
            self._retiring = True
        self._retire_due()

    def _retire_due(self) -> None:
        """Retire ready jobs in order until the next one is not ready (the retiring thread
        only: it holds the ``_retiring`` token)."""
        while True:
            with self._lock:
                seq = self.retired + 1
                item = self._ready.pop(seq, None)
                if item is None:
                    self._retiring = False
                    return
                failed = self._error is not None
            error: BaseException | None = None
            buf = None
            if item[0] == "product":
                _, buf, commit, args, where, outcome, early = item
                if outcome is not None:
                    error = KernelError(
                        "deferred-matmul",
                        f"nc_matmul tile product failed: {type(outcome).__name__}: {outcome}",
                        *where,
                    )
                elif not failed:  # after a failure nothing more takes effect
                    error = run_at(where, _commit, (early, commit, buf, args))
            else:
                _, fn, args, where = item
                if not failed:
                    error = run_at(where, fn, args)
            del item, args
            with self._lock:
                if buf is not None:
                    self._free.setdefault(buf.shape, []).append(buf)
                if error is not None and self._error is None:
                    self._error = error
                self._unindex(seq)
                self.retired = seq
                self._retired_cv.notify_all()


def run_at(where: tuple[str, int], fn: Any, args: tuple) -> BaseException | None:
    """``fn(*args)`` with the kernel location of its instruction in force on this thread
    (``location.HERE``); the exception it raised, if any."""
    here = location.HERE
    saved, here.where = here.where, where
    try:
        fn(*args)
    except BaseException as exc:
        return exc
    finally:
        here.where = saved
    return None


def _commit(early: tuple[str, ...], commit: Any, buf: np.ndarray, args: tuple) -> None:
    # a product's floating-point warnings, in program order, before the commit's own (under a
    # filter set to "error" a warning raises, which ends the commit like any failure)
    for message in early:
        _numpy_warning(message)
    commit(buf, *args)


def _check_alive(threads: list[threading.Thread]) -> None:
    """Raise instead of waiting forever for a thread that has died (a trnsim bug)."""
    for t in threads:
        if not t.is_alive():
            raise RuntimeError(
                f"trnsim internal error: thread {t.name} stopped; rerun with "
                "the plain path (CoreOptions(), TRNSIM_DEFERRED unset) and please report the kernel"
            )


def _numpy_line() -> int:
    """The line of ``semantics.nc_matmul`` that calls ``np.matmul`` (where NumPy attributes
    a floating-point warning of the product on the plain path)."""
    lines, first = inspect.getsourcelines(S.nc_matmul)
    for i, text in enumerate(lines):
        if "return np.matmul(" in text:
            return first + i
    return first


_NUMPY_LINE = _numpy_line()


def _numpy_warning(message: str) -> None:
    """A product's floating-point warning, as NumPy raises it on the plain path: a
    RuntimeWarning at the ``np.matmul`` line of ``semantics``, under the same registry (so the
    default filter shows it once, not once per product)."""
    registry = S.__dict__.setdefault("__warningregistry__", {})
    warnings.warn_explicit(message, RuntimeWarning, S.__file__, _NUMPY_LINE, S.__name__, registry)


def _last_hit(table: dict[int, list[Region]] | None, r: Region) -> int:
    """The largest pending sequence number in ``table`` with a rectangle overlapping ``r``."""
    if not table:
        return 0
    for seq in reversed(table):
        for q in table[seq]:
            if overlaps(q, r):
                return seq
    return 0


class Stream:
    """One thread running a core's queued data work (executors, sentinel fills) in program
    order."""

    def __init__(self, name: str = "trnsim-stream") -> None:
        self._jobs: SimpleQueue[Any] = SimpleQueue()
        self._idle = threading.Condition()
        self.submitted = 0
        self.completed = 0
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Any, args: tuple, where: tuple[str, int]) -> None:
        self.submitted += 1
        self._jobs.put((fn, args, where))

    def drain(self) -> None:
        """Block until every submitted job ran; raise the first failure (once)."""
        if self.completed != self.submitted:
            with self._idle:
                while self.completed != self.submitted:
                    if not self._idle.wait(timeout=1.0):
                        _check_alive([self._thread])
        if self.error is not None:
            err, self.error = self.error, None
            raise err

    def close(self) -> None:
        try:
            self.drain()
        finally:
            self._jobs.put(_STOP)
            self._thread.join()

    def _loop(self) -> None:
        jobs = self._jobs
        while True:
            job = jobs.get()
            if job is _STOP:
                return
            fn, args, where = job
            if self.error is None:  # a failure is raised on the kernel's thread (drain)
                self.error = run_at(where, fn, args)
            del job, fn, args
            with self._idle:
                self.completed += 1
                if self.completed == self.submitted:
                    self._idle.notify_all()


# =================================================================================================
# The deferred path of one core (``CoreOptions.deferred``): what ``NeuronCore`` hands over
# =================================================================================================


class Deferred:
    """One core's stream and pipeline. ``executors``: the plain path's executors by op;
    ``accumulate``: its PSUM commit (``machine._psum_accumulate``), run in program order."""

    def __init__(self, nc: NeuronCore, executors: dict[Op, Any], accumulate: Any) -> None:
        self.nc = nc
        self.executors = executors
        self.accumulate = accumulate
        self.pipeline = Pipeline(f"trnsim-products-{nc.index}")
        self.stream = Stream(f"trnsim-stream-{nc.index}")
        assert nc.decode is not None  # the deferred path decodes through the cache
        nc.decode.pipeline = self.pipeline

    def raise_pending(self) -> None:
        """Raise a failure of queued work now (it wins over anything later)."""
        if self.stream.error is not None:
            self.stream.drain()

    def fill(self, mem: OnChipMemory, alloc: Any) -> None:
        """A new allocation's sentinel fill, in program order behind the queued work."""
        self.stream.submit(_queue_fill, (self, mem, alloc), location.kernel_location())

    def submit(self, call: LiveInstruction, where: tuple[str, int]) -> None:
        """Queue ``call`` (plain views, attributes without views) on the stream."""
        # detached views: queued work does not extend the tensors' lifetimes
        queued = call.with_views(
            {r: v.detached() for r, v in call.dst_views.items()},
            {r: v.detached() for r, v in call.src_views.items()},
            _own_copy(call.args),
        )
        self.stream.submit(_run_deferred, (self, queued), where)

    def sync(self) -> None:
        """Wait for the queued work (raising the first failure among it)."""
        self.stream.drain()
        if self.pipeline.busy:
            self.pipeline.wait()

    def close(self) -> None:
        """Wait for the queued work and stop the threads (raising a failure)."""
        errors: list[BaseException] = []
        try:
            self.stream.close()  # runs the queued work first (which feeds the pipeline)
        except BaseException as exc:
            errors.append(exc)
        try:
            self.pipeline.close()
        except BaseException as exc:  # work the pipeline holds came first
            errors.insert(0, exc)
        if self.nc.decode is not None:
            self.nc.decode.pipeline = None
        if errors:
            raise errors[0]


def _own_copy(attrs: dict[str, Any]) -> dict[str, Any]:
    """``attrs`` for queued work: the values as they are now (an array or list the kernel
    changes after the call must not reach the deferred executor)."""
    for v in attrs.values():
        if isinstance(v, _MUTABLE):
            return {k: copy.deepcopy(v) for k, v in attrs.items()}
    return attrs


_MUTABLE = (np.ndarray, list, dict, set, bytearray)


def _region(v: View) -> Region:
    """The memory rectangle of ``v``'s allocation (what hazards are checked on)."""
    return _alloc_region(v.storage.alloc)


def _alloc_region(a: Any) -> Region:
    if a.kind == SBUF or a.kind == PSUM:
        p = a.partition_start
        return (a.memory, p, p + a.partitions, a.byte_offset, a.byte_offset + a.nbytes)
    return (a, 0, 1, 0, 1)


def _run_deferred(d: Deferred, call: LiveInstruction) -> None:
    """One queued instruction, on the stream's thread: at once, or as an ordered action of
    the pipeline when it touches memory that pending work writes (or writes what it reads)."""
    pipe, op, nc = d.pipeline, call.opcode, d.nc
    if op is Op.NC_MATMUL:
        plain = call.args.get("perf_mode") == "double_row" or call.args.get("is_transpose")
        if not plain and _defer_matmul(d, call):
            return
        if pipe.busy:
            pipe.wait()  # the plain path reads and writes now
    elif pipe.busy:
        if op in IN_ORDER:  # state beyond memory: once everything before it has retired
            pipe.wait()
        else:
            reads = tuple([_region(v) for v in call.src_views.values()])
            writes = tuple([_region(v) for v in call.dst_views.values()])
            if pipe.conflict(reads, writes):
                where = location.kernel_location()
                pipe.action(d.executors[op], (nc, call), reads, writes, where)
                return
    d.executors[op](nc, call)


def _defer_matmul(d: Deferred, c: LiveInstruction) -> bool:
    """Decode the operands now and hand the product to the pipeline, which commits it into
    PSUM in program order with the plain path's ``_psum_accumulate`` (marks, warnings,
    overwrite or add all decided then). False (nothing done): operands outside SBUF."""
    st, mv, dst = c.src_views[STATIONARY], c.src_views[MOVING], c.dst_views[DST]
    if st.storage.alloc.kind != SBUF or mv.storage.alloc.kind != SBUF:
        return False
    pipe, decode = d.pipeline, d.nc.decode
    assert decode is not None
    if pipe.busy:  # the operands are decoded now: wait for pending writes of them
        seq = pipe.conflict((_region(st), _region(mv)), ())
        if seq:
            pipe.wait(seq)
    a = decode.read(st, transposed=True).reshape(st.partitions, -1)
    b = decode.read(mv).reshape(mv.partitions, -1)
    # an fp32 operand is not decoded into a buffer of its own: the product reads SBUF later
    reads = tuple([_region(v) for v in (st, mv) if v.fmt.dtype == F32])
    args = (d.accumulate, d.nc, dst, c.args.get("accumulate"))
    where = location.kernel_location()
    pipe.product(a, b, _commit_product, args, reads, (_region(dst),), where)
    return True


def _commit_product(res: np.ndarray, accumulate: Any, nc: NeuronCore, dst: View, acc: Any) -> None:
    accumulate(nc, dst, res, acc)


def _queue_fill(d: Deferred, mem: OnChipMemory, alloc: Any) -> None:
    """A new allocation's sentinel fill, on the stream's thread, behind the work on the
    memory it reuses."""
    pipe = d.pipeline
    if pipe.busy:
        region = _alloc_region(alloc)
        if pipe.conflict((), (region,)):
            pipe.action(mem.fill, (alloc,), (), (region,), location.kernel_location())
            return
    mem.fill(alloc)
