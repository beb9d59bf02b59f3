"""Multi-rank kernels on Ray: each rank of ``run_ranks`` in a Ray actor of its own.

``run_ranks(kernel, per_rank, backend=RayRanks())`` (or ``RayRanks(address)``) runs rank ``r``
as the same launch ``run_ranks`` makes in threads (``simulate._launch`` with the run's
``World``), but in actor ``r``, a process of its own anywhere on the Ray cluster, so a run can
hold more ranks than one process can. The ranks' arguments reach the actors through Ray's
object store, and so do the collectives' payloads: each ``nki.collectives`` call ``ray.put``\\s
the rank's payload and posts its reference to one ``Mailbox`` actor, which hands every rank
of the group the references of the others once all have posted (the in-process
``context.mailbox_exchange`` with Ray in the middle; LNC=2 cores of a rank wait for each other
in their actor first, as they do at the run's barrier in threads). Results are the in-process
path's, bit for bit: outputs, each core's instruction record, printed lines, arguments
written back (tested). A rank's error is raised as in-process: the first rank that failed
for a cause of its own, not one that saw another rank's failure.

Opt-in only: nothing imports this module unless asked, and Ray is imported through
``trnsim.extras`` when a run starts. The returned ``RunResult.cores`` are ``RemoteCore``
records (spec, index, instruction record), not live cores: the memories stay in the actors.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from trnsim.core.argrules import broken
from trnsim.core.instruction import Instruction
from trnsim.hw.specs import CoreSpec
from trnsim.nki.context import World

FINISHED = "finished"


@dataclass
class RemoteCore:
    """A NeuronCore that ran in a Ray actor, as the driver sees it: what the timing model and
    the callers of ``run_ranks`` read (``spec``, ``index``, ``record``)."""

    spec: CoreSpec
    index: int
    record: list[Instruction]


class Mailbox:
    """The collectives' meeting point (an asyncio Ray actor): payload references by
    ``(collective number, core)``, per rank; a slot is cleared when every rank has read it."""

    def __init__(self, ranks: int) -> None:
        self.ranks = ranks
        self.posts: dict[tuple[int, int], dict[int, Any]] = {}
        self.reads: dict[tuple[int, int], int] = {}
        self.failed: str | None = None
        self.finished: set[int] = set()
        self._cond: asyncio.Condition | None = None

    def _condition(self) -> asyncio.Condition:
        if self._cond is None:  # made inside the actor's event loop
            self._cond = asyncio.Condition()
        return self._cond

    async def post(self, seq: int, rank: int, core: int, box: Any) -> None:
        cond = self._condition()
        async with cond:
            self.posts.setdefault((seq, core), {})[rank] = box
            cond.notify_all()

    async def collect(self, seq: int, core: int, group: tuple[int, ...]) -> tuple[str, Any]:
        """``("ok", boxes in group order)`` once every rank of the group posted;
        ``("failed", why)`` when a rank failed; ``("missing", ranks)`` when a rank of the
        group ended its kernel without joining this collective."""
        cond = self._condition()
        key = (seq, core)

        def ready() -> bool:
            slot = self.posts.get(key, {})
            absent = [r for r in group if r not in slot]
            return bool(self.failed) or not absent or all(r in self.finished for r in absent)

        async with cond:
            await cond.wait_for(ready)
            if self.failed:
                return "failed", self.failed
            slot = self.posts.get(key, {})
            absent = [r for r in group if r not in slot]
            if absent:
                return "missing", absent
            boxes = [slot[r] for r in group]
            self.reads[key] = self.reads.get(key, 0) + 1
            if self.reads[key] == self.ranks:
                del self.posts[key], self.reads[key]
            return "ok", boxes

    async def stop(self, rank: int, why: str) -> None:
        cond = self._condition()
        async with cond:
            self.failed = self.failed or f"rank {rank} failed: {why}"
            cond.notify_all()

    async def finish(self, rank: int) -> None:
        cond = self._condition()
        async with cond:
            self.finished.add(rank)
            cond.notify_all()


class _RankBarrier:
    """The run's barrier as one rank's actor sees it: its own cores wait for each other
    (``wait``); ``abort`` also tells the mailbox, so the other ranks stop waiting."""

    def __init__(self, width: int, mailbox: Any, rank: int) -> None:
        self.local = threading.Barrier(width)
        self.mailbox, self.rank = mailbox, rank

    def wait(self) -> int:
        return self.local.wait()

    def abort(self) -> None:
        self.local.abort()
        self.mailbox.stop.remote(self.rank, "its kernel stopped")


class RayWorld(World):
    """The ``World`` of one rank in its actor: ``exchange`` goes through the object store and
    the ``Mailbox`` actor."""

    def __init__(self, ranks: int, width: int, mailbox: Any, rank: int) -> None:
        super().__init__(ranks, _RankBarrier(width, mailbox, rank))  # type: ignore[arg-type]
        self.actor = mailbox
        self._ray = _ray()

    def exchange(self, me: int, core: int, payload: Any, group: tuple[int, ...]) -> dict[int, Any]:
        ray = self._ray
        with self.lock:
            seq = self.mailbox.get(("cc-seq", me, core), 0)
            self.mailbox[("cc-seq", me, core)] = seq + 1
        box = None if payload is None else [ray.put(payload)]  # a list: Ray keeps it a ref
        ray.get(self.actor.post.remote(seq, me, core, box))
        kind, got = ray.get(self.actor.collect.remote(seq, core, tuple(group)))
        if kind == "failed":
            raise threading.BrokenBarrierError(got)
        if kind == "missing":
            raise broken("collective-join", f"ranks {got} did not join collective #{seq}")
        refs = [b[0] for b in got if b is not None]
        values = iter(ray.get(refs)) if refs else iter(())
        return {r: (None if b is None else next(values)) for r, b in zip(group, got, strict=True)}


def _ray() -> Any:
    from trnsim import extras

    return extras.ray()


class RankHost:
    """A Ray actor running one rank's launch (``simulate._launch``)."""

    def __init__(self) -> None:
        from trnsim.nki.compat import install

        install()  # the kernel's `import nki` resolves to trnsim when it is unpickled

    def run(
        self,
        blob: bytes,
        rank: int,
        ranks: int,
        width: int,
        mailbox: Any,
        call: tuple[tuple[Any, ...], dict[str, Any]],
        launch: dict[str, Any],
    ) -> tuple:
        from trnsim.nki.simulate import _launch

        ray = _ray()
        kernel = ray.cloudpickle.loads(blob)
        # arrays from the object store are read-only views: copies the launch can write back
        args, kwargs = _writable(call[0]), {k: _writable(v) for k, v in call[1].items()}
        world = RayWorld(ranks, width, mailbox, rank)
        try:
            res = _launch(
                kernel,
                tuple(args),
                dict(kwargs),
                launch["target"],
                launch["lnc"],
                launch["rounding"],
                launch["seed"] + rank * width,
                launch["functional"],
                True,
                launch["options"],
                None,
                world=world,
                rank=rank,
                allow_unwritten=launch.get("allow_unwritten", False),
            )
        except BaseException as exc:
            if not isinstance(exc, threading.BrokenBarrierError):
                ray.get(mailbox.stop.remote(rank, f"{type(exc).__name__}: {exc}"))
            return "error", _portable(exc)
        finally:
            ray.get(mailbox.finish.remote(rank))
        cores = [RemoteCore(c.spec, c.index, list(c.record)) for c in res.cores]
        return "ok", res.outputs, cores, list(res.printed), args, kwargs


def _portable(exc: BaseException) -> tuple[type, tuple[Any, ...], dict[str, Any]]:
    """An exception as (class, args, attributes): rebuilt in the driver without calling its
    ``__init__`` (``KernelError`` takes other arguments than its ``args``). A class the
    driver cannot import (made inside a function) travels as its nearest importable base."""
    cls = type(exc)
    for c in cls.__mro__:
        mod = sys.modules.get(c.__module__)
        if mod is not None and getattr(mod, c.__qualname__, None) is c:
            cls = c
            break
    return cls, exc.args, dict(getattr(exc, "__dict__", {}))


def _rebuilt(cls: type, args: tuple[Any, ...], attrs: dict[str, Any]) -> BaseException:
    exc = cls.__new__(cls, *args)
    exc.args = args
    exc.__dict__.update(attrs)
    return exc


def _pickled(kernel: Any, ray: Any) -> bytes:
    """The kernel, by value when its module is not trnsim's own (a kernel file, a test): the
    actors cannot import those."""
    cp = ray.cloudpickle
    fn = getattr(kernel, "fn", kernel)
    mod = sys.modules.get(getattr(fn, "__module__", "") or "")
    by_value = mod is not None and not mod.__name__.startswith("trnsim")
    if by_value:
        cp.register_pickle_by_value(mod)
    try:
        return cp.dumps(kernel)
    finally:
        if by_value:
            cp.unregister_pickle_by_value(mod)


def _writable(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        return x if x.flags.writeable else x.copy()
    if isinstance(x, list | tuple) and not hasattr(x, "_fields"):
        return type(x)(_writable(y) for y in x)
    return x


def _copy_back(a: Any, b: Any) -> None:
    """What the actor left in an argument, into the caller's array (as ``_write_back``)."""
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        if a.flags.writeable:
            a[...] = b.reshape(a.shape)
    elif isinstance(a, list | tuple) and isinstance(b, list | tuple):
        for x, y in zip(a, b, strict=True):
            _copy_back(x, y)


@dataclass(frozen=True)
class RayRanks:
    """The Ray rank backend of ``run_ranks``: ``address`` of a cluster (``host:port``,
    ``ray://host:port``, ``auto``), or None for the runtime this process joined, else a new
    local one on 127.0.0.1 (``trnsim.extras.connect``)."""

    address: str | None = None

    def run_ranks(
        self,
        kernel: Any,
        per_rank: list[tuple[tuple[Any, ...], dict[str, Any]]],
        width: int,
        launch: dict[str, Any],
    ) -> list[Any]:
        from trnsim import extras
        from trnsim.nki.simulate import RunResult, _raise_first

        ray, started = extras.connect(self.address)
        actors: list[Any] = []
        try:
            n = len(per_rank)
            # every rank must exist at once (a collective waits for all): no CPU is reserved
            mailbox = ray.remote(num_cpus=0)(Mailbox).remote(n)
            host = ray.remote(num_cpus=0)(RankHost)
            actors = [mailbox] + [host.remote() for _ in range(n)]
            blob = _pickled(kernel, ray)
            refs = [
                a.run.remote(blob, r, n, width, mailbox, (tuple(args), dict(kw)), launch)
                for r, (a, (args, kw)) in enumerate(zip(actors[1:], per_rank, strict=True))
            ]
            outs = ray.get(refs)
        finally:
            for a in actors:
                ray.kill(a)
            if started:
                extras.shutdown(ray)
        errors = [_rebuilt(*o[1]) if o[0] == "error" else None for o in outs]
        _raise_first(errors)
        results = []
        for (args, kw), (_, outputs, cores, printed, args_after, kw_after) in zip(
            per_rank, outs, strict=True
        ):
            if launch["functional"]:
                _copy_back(list(args), list(args_after))
                for k in kw:
                    _copy_back(kw[k], kw_after[k])
            results.append(RunResult(outputs, cores, printed))
        return results
