"""The running kernel's context (thread-local: LNC=2 runs one thread per program)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from trnsim.core.argrules import broken
from trnsim.core.machine import NeuronCore
from trnsim.core.memory import View


def mailbox_exchange(
    hub: World | Launch, me: int, core: int, payload: Any, group: tuple[int, ...]
) -> dict[int, Any]:
    """The in-process exchange of ``nki.collectives`` (``collectives._exchange``): post this
    rank's payload in the hub's mailbox, wait at the hub's barrier for every rank, read the
    group's payloads, wait again (everyone has read), clear this rank's slot."""
    with hub.lock:
        seq = hub.mailbox.get(("cc-seq", me, core), 0)
        hub.mailbox[("cc-seq", me, core)] = seq + 1
        hub.mailbox[("cc", seq, me, core)] = payload
    hub.barrier.wait()
    with hub.lock:
        missing = [r for r in group if ("cc", seq, r, core) not in hub.mailbox]
        if missing:
            raise broken("collective-join", f"ranks {missing} did not join collective #{seq}")
        got = {r: hub.mailbox[("cc", seq, r, core)] for r in group}
    hub.barrier.wait()  # everyone has read: clear this rank's slot
    with hub.lock:
        del hub.mailbox[("cc", seq, me, core)]
    return got


@dataclass
class World:
    """The ranks of a multi-rank run (``trnsim.nki.simulate.run_ranks``): one launch per rank,
    each on NeuronCore(s) and an HBM of its own; ``nki.collectives`` exchange between them.
    ``barrier`` counts every program of every rank (ranks x LNC). ``exchange`` moves the
    collectives' payloads: through ``mailbox`` here, in this process (the specification); a
    rank backend that runs ranks elsewhere (``trnsim.nki.ray_ranks``) overrides it."""

    ranks: int
    barrier: threading.Barrier
    lock: threading.Lock = field(default_factory=threading.Lock)
    mailbox: dict[Any, Any] = field(default_factory=dict)

    def exchange(self, me: int, core: int, payload: Any, group: tuple[int, ...]) -> dict[int, Any]:
        """Post ``payload`` as rank ``me`` (core ``core``) and return the group's payloads."""
        return mailbox_exchange(self, me, core, payload, group)


@dataclass
class Launch:
    """State shared by the programs of one launch (LNC=1 or 2). ``world``/``rank``: the
    multi-rank run this launch is rank ``rank`` of (None: the launch's programs are the ranks)."""

    lnc: int
    cores: list[NeuronCore]
    barrier: threading.Barrier
    shared: dict[int, View] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    mailbox: dict[Any, Any] = field(default_factory=dict)
    printed: list[str] = field(default_factory=list)
    world: World | None = None
    rank: int = 0
    # a front end's state carried from an earlier attempt of this launch (``Relaunch``), and
    # a request, left by a program that finished, to run the launch again
    carry: Any = None
    relaunch: Relaunch | None = None

    def exchange(self, me: int, core: int, payload: Any, group: tuple[int, ...]) -> dict[int, Any]:
        """The programs of this launch as the ranks (``kernel[2]``): ``mailbox_exchange``."""
        return mailbox_exchange(self, me, core, payload, group)


class Relaunch(Exception):
    """A program's request to run its launch again from the start, with ``carry`` in
    ``Launch.carry`` (the legacy front end carries its liveness plan this way:
    ``trnsim.nki.legacy.allocator``). ``functional`` / ``keep_data``: how to run the next
    attempt (None: as the caller asked). Raised by a program (the launch stops, as for an
    error), or left in ``Launch.relaunch`` (asked once every program has finished)."""

    def __init__(
        self, carry: Any, functional: bool | None = None, keep_data: bool | None = None
    ) -> None:
        super().__init__("relaunch")
        self.carry, self.functional, self.keep_data = carry, functional, keep_data


@dataclass
class Program:
    launch: Launch
    program_id: int
    core: NeuronCore
    shared_seq: int = 0


_local = threading.local()


def current() -> Program:
    prog = getattr(_local, "program", None)
    if prog is None:
        raise broken(
            "outside-kernel",
            "nki.language / nki.isa called outside a running kernel; run it with "
            "nki.simulate(kernel)(*arrays) or kernel(*arrays)",
        )
    return prog


def current_or_none() -> Program | None:
    return getattr(_local, "program", None)


def enter(prog: Program | None) -> None:
    _local.program = prog
