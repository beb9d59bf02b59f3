"""The legacy compiler's memory model: where each SBUF/PSUM tile of a legacy kernel lives.

A legacy kernel (``neuronxcc.nki``, Neuron <= 2.26) names tiles; the Neuron compiler gives
them bytes. What the 2.26 documents say it does, and how trnsim does the same:

- **Liveness.** "The compiler analyzes the memory dependency and allocates physical address to
  each tiles. This means that the physical tiles may not be alive in the memory simultaneously"
  (``nki_block_dimension_migration_guide.rst``, "What are block dimensions?"). Every tile trnsim
  allocates for a legacy kernel is a *logical tile* (``LTile``): a plain tile, or one block of a
  block tensor (``BlockTensor``). Its uses are the instructions that read or write it
  (``Allocator.__call__``, the NeuronCore's instruction observer). A tile is live from its first
  write to its last use; a compiler sees the whole program, so trnsim runs a kernel whose live
  tiles do not fit twice: once to learn every tile's uses (the *plan*), then for real with the
  plan (``Plan``, ``Relaunch``). A kernel whose tiles fit is run once.
- **Victims.** When a new tile does not fit, the bytes of dead tiles (no use left) go first,
  oldest first; then the live tile whose next use is furthest away (Belady's choice) is saved
  and its bytes given away. A live tile is never given away without being saved.
- **Spills and refills.** "When the cumulative size of live data defined by the NKI kernel
  overflows the capacity of any on-chip memory, the Neuron compiler inserts the necessary spills
  or refills between that memory and the next-tier memory in the hierarchy"
  (``programming_model.rst``, "Memory hierarchy"). An SBUF tile spills to HBM (``dma_copy``), a
  PSUM tile to SBUF (``tensor_copy``; its SBUF copy moves on to HBM when SBUF is full), and is
  refilled before its next use into whatever bytes are free then (the kernel's views of it
  follow: they share its ``Storage``). The perf guide's profile metrics ``spill_save_bytes`` /
  ``spill_reload_bytes`` count these (``nki_perf_guide.rst``, Opt #2): each is a recorded
  instruction with the attribute ``spill="save"`` / ``"reload"``. A tile loaded from HBM and not
  written since needs no save: it is read again from its source (``spill="refetch"``: the
  perf guide's "input data reloading", Opt #1). A PSUM tile keeps its accumulation state across
  a spill (the marks of its open accumulation group are restored with its data).
- **Multi-buffering.** "compiler could choose to allocate 2 physical tiles to ``a``, then the
  dma copy from HBM to SBUF can overlap with the exponential operation" (block-dimension
  migration guide; ``ncc.multi_buffer(factor=2)``, ``api/nki/compiler/__init__.py``). A tile
  made in an iteration of an ``nl`` loop (a block: of the loop that made its tensor) is placed
  away from the bytes of tiles used in the last ``k - 1`` iterations when memory allows
  (``affine_range(..., multi_buffer=k)`` sets the depth k; by default an SBUF tile gets as
  many as keep the DMA's fixed latency covered, ``dma_depth``, a PSUM tile two): iteration
  ``i + 1``'s load does not wait for iteration ``i``'s readers. A multi-buffered PSUM tile
  that finds no such bytes free takes the banks of dead tiles (no use left) last used before
  those iterations, even while a Python name still holds them: the compiler frees a tile at
  its last use (liveness, above), not when the kernel's Python drops it (``_dead_room``). Two
  buffers are not enough when a load's ~1.3 us latency is longer than two iterations' compute:
  a 128 KiB weight tile feeding 0.2 us matmuls (the trainium-kernel-fusion MLP rows, issue 27
  session 6). The SDK's fully optimized matmul tutorial runs its K loop as
  ``sequential_range`` and its published latency hides every load behind the matmuls, so
  ``sequential_range`` and ``static_range`` bodies are multi-buffered too. A call's result is
  multi-buffered over the loop of the call (even when first used, and placed, in an inner
  loop), and a tile made in the first iteration of an inner loop avoids the bytes used since
  the enclosing loop's last iteration began (a nest runs on k sets of buffers as one loop).
- **Loop-invariant loads.** An ``nl.load`` that reads the same HBM bytes into the same dtype at
  the same line as in the previous iteration of its loop, with neither the source nor the tile
  written since, is the tile loaded before (hoisted: no DMA); if memory ran short meanwhile the
  tile was dropped and is read again at its next use (not hoisted: it did not fit). The perf
  guide (Opt #1) and the matrix-multiplication tutorial ("hoisting them out of the innermost
  loop") describe the reloads such code would otherwise make.
  A load whose tile the kernel dropped is reused too when its bytes would still be resident:
  an ``nl.load`` of the same HBM bytes into the same dtype as an earlier load (any line), the
  source not written since, is issued as a ``spill="resident"`` DMA (no transfer, no time in
  the timing model) when the earlier load was kept: loads are kept, in the order first made,
  while the SBUF bytes in use plus the kept ones fit a partition, until the outermost loop
  ends (``Allocator.resident_load``). The compiler keeps weight tiles across the iterations
  of an outer loop (the MLP rows of ``benchmarks/RESULTS.md``, issue 27 part B, cannot be
  met otherwise); how is not public, so the rule is trnsim's. The tile itself is placed as
  usual: the kept bytes are counted, not held back from placement.

``spill`` attributes (``trnsim.core.isa.SPILL_ATTR``) mark what the memory model adds to a
kernel's record; everything else is the kernel's own. The compiler's exact placement and
ordering are not public: the policies here (small tiles from the top of SBUF and large ones
from the bottom, windows of furthest next use, dead tiles first, bytes of the last iterations
avoided) are trnsim's.
"""

from __future__ import annotations

import weakref
from bisect import bisect_right
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from heapq import merge
from math import prod
from typing import Any

import numpy as np

from trnsim.core.isa import SPILL_ATTR, Op
from trnsim.core.location import fail, kernel_location
from trnsim.core.memory import HBM, PSUM, SBUF, Allocation, Storage, View
from trnsim.core.spec import DST, SRC
from trnsim.errors import KernelError
from trnsim.nki.context import Relaunch, current, current_or_none

MULTI_BUFFER = 2
"""The fewest physical tiles the compiler keeps per tile of an ``nl`` loop body (see above):
double buffering, the allocation guide's example."""

AUTO = 0
"""A loop's ``multi_buffer`` when the kernel gives none: the depth is the memory model's
(``dma_depth``), at least ``MULTI_BUFFER``."""


def dma_depth(dma: Any, tile_bytes: int) -> int:
    """Physical SBUF tiles a loop-made tile of ``tile_bytes`` (all partitions) is given when
    the kernel sets no ``multi_buffer``: enough that the DMA transfers in flight to or from
    the tiles of the iterations ahead cover the DMA's fixed latency at the core's streaming
    rate (Little's law: bytes in flight = ``core_bw`` x ``fixed_latency_s``, DMA bandwidth
    guide; the allocation guide's stated goal is "instruction parallelism across different
    engines while minimizing memory usage", ``nki_direct_allocation_guide.rst``), one more
    for the tile being used; at least ``MULTI_BUFFER`` and at most one per DMA queue (a
    queue runs its transfers in order: ``DmaSpec.queues_per_engine``). The depth is
    trnsim's reading of that goal, not a documented figure; the compiler's heuristic is not
    public. Memory permitting: a tile that cannot avoid the bytes of those iterations is
    placed where it fits (``Allocator._place``)."""
    in_flight = dma.engines * dma.engine_bw * dma.fixed_latency_s
    ahead = -(-int(in_flight) // max(1, tile_bytes))
    return max(MULTI_BUFFER, min(dma.queues_per_engine, 1 + ahead))


FREED_KEPT = 64
"""Recently freed byte ranges remembered per memory for multi-buffering (``_cooling``)."""
COOL_SCAN = 4
"""Freed ranges older than a tile's cooling cutoff looked past (newest first) before the scan
stops: tiles are dropped in about the order of their last use."""

NEVER = 1 << 62
"""The next use of a tile with none left."""


class _Marker:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


SOURCE = _Marker("SOURCE")  # the copy of a clean loaded tile is its HBM source
GHOST = _Marker("GHOST")  # a planning run dropped it (no data in such a run)
DEAD = _Marker("DEAD")  # dropped after its last use


class LTile:
    """One logical tile the kernel names: what the compiler allocates, spills and refills."""

    __slots__ = (
        "__weakref__",
        "cool",
        "copy",
        "cursor",
        "fill",
        "fmt",
        "full",
        "id",
        "kind",
        "last",
        "made",
        "marks",
        "name",
        "nbytes",
        "off",
        "partitions",
        "parts",
        "plan",
        "shape",
        "source",
        "storage",
        "uses",
        "written",
    )

    def __init__(
        self, tid: int, kind: str, name: str, shape: tuple[int, ...], fmt: Any,
        made: tuple[str, int],
    ) -> None:  # fmt: skip
        self.id = tid
        self.kind = kind
        self.shape = shape
        self.fmt = fmt
        self.partitions = shape[0]
        self.nbytes = prod(shape[1:]) * fmt.dtype.itemsize
        self.made = made
        self.name = name or f"{kind}@{_short(made)}"
        self.cool: int | None = None  # multi-buffered: avoid bytes freed since this clock
        self.off = -1  # its byte offset while resident
        self.storage: weakref.ref[Storage] | None = None
        self.uses: list[int] = []  # clocks of the instructions that used it (this run)
        self.plan: list[int] | None = None  # the same, from the planning run
        self.cursor = 0  # uses seen so far (an index into plan)
        self.last = -1  # clock of the last use
        self.copy: Any = None  # a valid saved copy (View), SOURCE, GHOST, DEAD or None
        self.source: tuple[Any, ...] | None = None  # (src view, dst geometry, hbm writes)
        self.marks: np.ndarray | None = None  # saved PSUM accumulation marks
        self.written = False  # any instruction wrote it
        self.full = False  # an instruction wrote all of it
        self.parts: set[tuple[Any, ...]] | None = None  # views written (not all of it)
        self.fill: Any = None  # the value of a lazily made fill (nl.zeros), not issued yet

    def next_use(self, clock: int) -> int:
        """The clock of the next planned use at or after ``clock`` (NEVER: dead)."""
        plan = self.plan
        if plan is None:
            return NEVER
        i = bisect_right(plan, clock - 1, self.cursor)
        return plan[i] if i < len(plan) else NEVER

    def where(self) -> str:
        return _short(self.made)

    def release(self, _ref: Any = None) -> None:
        """The kernel dropped every view of this tile: forget its saved copies."""
        self.copy, self.source, self.marks = DEAD, None, None

    def describe(self) -> str:
        return f"{self.name!r} ({self.nbytes / 1024:g} KiB/partition, made at {self.where()})"


class SbufCopy:
    """The SBUF copy of a spilled PSUM tile (``alloc.user`` of its bytes): moved on to HBM
    when SBUF needs its bytes, dropped once its tile is dead."""

    __slots__ = ("owner", "view")

    def __init__(self, owner: LTile, view: View) -> None:
        self.owner, self.view = owner, view


@dataclass
class Plan:
    """The uses of one core's logical tiles in a planning run: ``uses[id]`` lists the clocks
    (kernel instructions issued before) of the instructions that used tile ``id``."""

    uses: list[list[int]]
    clocks: int


@dataclass
class PlanSet:
    """What a launch carries to its next attempt (``Launch.carry``): ``planning`` asks the
    next attempt to be a planning run; ``plans`` are the finished plans, per core."""

    planning: bool = False
    plans: dict[int, Plan] = field(default_factory=dict)


def whole_view(storage: Any, shape: tuple[int, ...], fmt: Any) -> View:
    from trnsim.core.memory import user_dtype

    strides = [1] * len(shape)
    for i in range(len(shape) - 2, 0, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    return View.trusted(storage, shape, tuple(strides), 0, 0, fmt, user_dtype(fmt), True)


class _Handle:
    """A stand-in Storage for a view of an allocation the allocator moves data out of or into
    (it never frees the allocation: ``DetachedStorage``'s role)."""

    __slots__ = ("alloc", "fmt", "shape")

    def __init__(self, alloc: Allocation, fmt: Any, shape: tuple[int, ...]) -> None:
        self.alloc, self.fmt, self.shape = alloc, fmt, shape


class Allocator:
    """One core's allocation of a legacy launch's tiles, and the core's instruction observer.

    Modes: a first run (no plan) places tiles and records their uses, and asks for a plan the
    first time a live tile would have to give its bytes (``Relaunch``: a functional run stops
    there, a timing-only run goes on as the planning run); a planning run (timing-only) drops
    tiles freely (``GHOST``) to learn every use; a run with a plan frees dead tiles and saves
    live ones as described in the module's docstring."""

    def __init__(self, core: Any, launch: Any) -> None:
        self.core = core
        self.launch = launch
        carry = launch.carry
        self.plan: Plan | None = None
        self.planning = False
        if isinstance(carry, PlanSet):
            self.planning = carry.planning
            self.plan = carry.plans.get(core.index)
        self.tiles: list[LTile] = []
        self.clock = 0
        self.busy = False  # issuing its own instructions (not the kernel's)
        self.pins: set[LTile] = set()  # the operands of the instruction being issued
        self.held: set[LTile] = set()  # the operands of the pending legacy result (hold)
        # [kind, multi-buffer factor, id, index, clocks at the starts of the last iterations]
        self.loops: list[list[Any]] = []
        # per memory kind: (last use, start, end) of the bytes of tiles dropped lately
        self.freed: dict[str, deque[tuple[int, int, int]]] = {
            SBUF: deque(maxlen=FREED_KEPT),
            PSUM: deque(maxlen=FREED_KEPT),
        }
        self.hoisted: dict[Any, tuple[Any, ...]] = {}
        # dropped loads still resident: (source key, format, boxes) -> (bytes per partition,
        # the source's HBM writes when loaded), least recently loaded first
        self.cached: OrderedDict[Any, tuple[int, int]] = OrderedDict()
        self.hbm_writes: dict[Allocation, int] = {}
        self.by_source: dict[Allocation, set[LTile]] = {}
        self.single = launch.lnc == 1 and launch.world is None
        self._loop_ids = 0
        # compile-time constant tiles (the partition broadcast's row of ones), made once per
        # launch: key -> tile (``trnsim.nki.legacy.language._ones_row``)
        self.constants: dict[Any, Any] = {}
        core.observer = self

    # ---- lifetime of a launch ---------------------------------------------------------------

    @staticmethod
    def of_current() -> Allocator | None:
        prog = current_or_none()
        if prog is None:
            return None
        obs = prog.core.observer
        return obs if isinstance(obs, Allocator) else None

    def finish(self) -> None:
        """The end of this core's programs: leave the uses seen for the next attempt."""
        self.core.observer = None
        launch = self.launch
        if self.plan is not None:
            if self.clock != self.plan.clocks or len(self.tiles) != len(self.plan.uses):
                raise self._diverged(
                    f"the kernel issued {self.clock} instructions on {len(self.tiles)} tiles "
                    f"where the planning run issued {self.plan.clocks} on {len(self.plan.uses)}"
                )
            return
        plan = Plan([t.uses for t in self.tiles], self.clock)
        with launch.lock:
            plans = launch.mailbox.setdefault("legacy-plans", {})
            plans[self.core.index] = plan
            if self.planning and launch.relaunch is None:
                launch.relaunch = Relaunch(PlanSet(False, plans))

    def _need_plan(self) -> None:
        """A live tile's bytes are needed: learn the uses of every tile first."""
        if self.launch.world is not None:
            raise fail(
                "not-implemented",
                "a legacy kernel whose live tiles overflow SBUF/PSUM in a multi-rank run "
                "(trnsim plans spills by running the kernel twice, one launch at a time)",
            )
        if self.core.functional:
            raise Relaunch(PlanSet(planning=True), functional=False, keep_data=False)
        self.planning = True  # a timing-only run: it goes on as the planning run

    def _diverged(self, what: str) -> KernelError:
        return fail(
            "liveness-plan",
            f"this run of the kernel differs from its planning run ({what}); trnsim plans "
            "spills from a first run and needs the same instructions and tiles the second time "
            "(does the kernel's Python depend on something other than its arguments?)",
        )

    def hold(self, views: tuple[Any, ...]) -> None:
        """The operands of the pending legacy result (``tile.defer``): not given away while
        its own tile or its target is placed."""
        held = self.held
        held.clear()
        for v in views:
            if isinstance(v, View):
                lt = v.storage.alloc.user
                if isinstance(lt, LTile):
                    held.add(lt)

    # ---- loops ------------------------------------------------------------------------------

    def enter_loop(self, kind: str, factor: int) -> list[Any]:
        self._loop_ids += 1
        depth = self.core.spec.dma.queues_per_engine if factor == AUTO else factor
        entry = [kind, factor, self._loop_ids, -1, deque(maxlen=max(2, depth))]  # see loops
        self.loops.append(entry)
        return entry

    def entered_none_inside(self, entry: list[Any]) -> bool:
        """Whether no ``nl`` loop was entered since ``entry`` (loop ids only grow): an
        innermost loop."""
        return self._loop_ids == entry[2]

    def exit_loop(self, entry: list[Any]) -> None:
        if entry in self.loops:
            while self.loops and self.loops.pop() is not entry:
                pass
        if not self.loops:
            self.hoisted.clear()  # loads are hoisted out of the loops they are invariant in
            self.cached.clear()  # (and kept resident for the loop nest they are made in)

    def loop_here(self) -> list[Any] | None:
        """The innermost ``nl`` loop running now (None outside loops)."""
        return self.loops[-1] if self.loops else None

    def _cooling(self, loop: list[Any] | None, lt: LTile) -> int | None:
        """For ``lt``, made in an iteration of ``loop`` (an ``nl`` loop of ``multi_buffer`` k;
        when the kernel gives none, k is ``dma_depth`` for an SBUF tile, ``MULTI_BUFFER`` for
        a PSUM one): the clock at the start of the iteration k - 1 before this one. The tile
        avoids the bytes of tiles last used since then (instructions of those iterations may
        still be reading them), so the loop body runs on k sets of buffers; None: none."""
        if loop is None:
            return None
        factor, starts = loop[1], loop[4]
        if factor == AUTO:
            factor = MULTI_BUFFER
            if lt.kind == SBUF:
                factor = dma_depth(self.core.spec.dma, lt.nbytes * lt.partitions)
        if factor < 2 or len(starts) < 2:
            return None
        return starts[-factor] if len(starts) >= factor else starts[0]

    def _cooling_in(self, loop: list[Any] | None, lt: LTile) -> int | None:
        """``_cooling(loop, lt)``; in the first iteration of a loop nested in another, that of the
        enclosing loop: the tile made there in its last iteration was made in the previous
        iteration of the enclosing loop (the loop nest runs its body on k sets of buffers
        as one loop would), so the tile avoids the bytes used since that one began."""
        cool = self._cooling(loop, lt)
        if cool is not None or loop is None:
            return cool
        stack = self.loops
        at = next((i for i, e in enumerate(stack) if e is loop), 0)
        for outer in reversed(stack[:at]):
            cool = self._cooling(outer, lt)
            if cool is not None:
                return cool
        return None

    def next_iteration(self, entry: list[Any]) -> None:
        entry[4].append(self.clock)

    # ---- making tiles -----------------------------------------------------------------------

    def new_tile(
        self, shape: tuple[int, ...], dtype: Any, memory: str, name: str,
        made: tuple[str, int] | None = None, view_type: type[View] = View, loop: Any = "here",
    ) -> View:  # fmt: skip
        """A new logical tile, placed now (a ``view_type`` view of all of it). ``made``: the
        kernel line that made it (default: here); ``loop``: the ``nl`` loop whose iterations
        it is made in (a block tensor's blocks: the loop that made the tensor; default: the
        innermost loop running now)."""
        from trnsim.numerics import get_format

        fmt = get_format(dtype)
        shape = tuple(int(s) for s in shape) or (1,)
        made = made or kernel_location()
        lt = LTile(len(self.tiles), memory, name, shape, fmt, made)
        self.tiles.append(lt)
        if self.plan is not None:
            plan = self.plan.uses
            lt.plan = plan[lt.id] if lt.id < len(plan) else []
        lt.cool = self._cooling_in(self.loop_here() if loop == "here" else loop, lt)
        off = lt.off = self._place(lt)
        v = self.core.allocate(shape, fmt, memory, name=lt.name, offset=off, view_type=view_type)
        v.storage.alloc.user = lt
        lt.storage = weakref.ref(v.storage, lambda _, lt=lt: self._released(lt))
        return v

    def _released(self, lt: LTile) -> None:
        """The kernel dropped every view of ``lt``: its bytes are free (noted for
        multi-buffering) and its saved copies can go."""
        if lt.copy is None:  # resident when dropped: its bytes, and when it was last used
            self.freed[lt.kind].append((lt.last, lt.off, lt.off + lt.nbytes))
        lt.release()

    def _bytes(self, lt: LTile, off: int) -> Allocation:
        """An allocation for ``lt`` at ``off`` (sentinel-filled, as ``NeuronCore.allocate``)."""
        mem = self.core.sbuf if lt.kind == SBUF else self.core.psum
        align = lt.fmt.dtype.itemsize
        deferred = self.core.deferred
        if deferred is None:
            return mem.allocate(lt.partitions, lt.nbytes, align=align, name=lt.name, offset=off)
        deferred.raise_pending()
        a = mem.allocate(
            lt.partitions, lt.nbytes, align=align, name=lt.name, offset=off, fill=False
        )
        if mem.fill_sentinel:
            deferred.fill(mem, a)
        return a

    def _place(self, lt: LTile) -> int:
        """A byte offset for ``lt``: a free one (away from its line's last tiles when it is
        multi-buffered), else the best window of tiles to give their bytes (``_window``)."""
        mem = self.core.sbuf if lt.kind == SBUF else self.core.psum
        spans = _spans(mem, lt.partitions)
        top = lt.kind == SBUF and lt.nbytes * SMALL_TILE <= mem.bytes_per_partition
        off = None
        if lt.cool is not None:
            cool = []
            old = 0
            for used, a, b in reversed(self.freed[lt.kind]):  # newest first
                if used >= lt.cool:
                    cool.append((a, b, -1 - len(cool), None))
                    old = 0
                else:
                    old += 1
                    if old > COOL_SCAN:  # (dropped in about the order of last use)
                        break
            if cool:
                cool.sort()
                off = _fit(mem, lt, merge(spans, cool), top)
            if off is None and lt.kind == PSUM:
                off = self._dead_room(mem, lt, spans, cool)
        if off is None:
            off = _fit(mem, lt, spans, top)
        if off is None:
            self.pins.add(lt)
            try:
                off = self._make_room(mem, lt, spans)
            finally:
                self.pins.discard(lt)
        return off

    def _dead_room(
        self, mem: Any, lt: LTile, spans: list[tuple[int, int, int, Any]], cool: list[Any]
    ) -> int | None:
        """Fresh PSUM bytes for multi-buffered ``lt`` when none are free: the bytes of dead
        tiles (no use left in the plan) last used before ``lt``'s cooling clock, freed at
        their last use as the compiler's liveness analysis frees them ("the physical tiles
        may not be alive in the memory simultaneously", block-dimension migration guide),
        even while a Python name still holds them. Without a plan, a tile that could be
        dead (last used before the cooling clock) asks for one (``_need_plan``); a planning
        run does not know uses: None."""
        cutoff = lt.cool
        stale = [
            t for t in spans
            if t[3].user is not None and _owner(t[3]).last < cutoff
        ]  # fmt: skip
        if not stale or self.planning:
            return None
        if self.plan is None:
            self._need_plan()  # raises, or turns this run into the planning run
            return None
        clock, pins, held = self.clock, self.pins, self.held
        both = list(merge(spans, sorted(cool)))
        info = []
        for _, _, _, a in both:
            if a is None or a.user is None:
                info.append((False, False, False, 0, 0, 0))
                continue
            t = _owner(a)
            dead = (
                t.last < cutoff and t.next_use(clock) == NEVER and t not in pins and t not in held
            )
            info.append((dead, False, False, NEVER, t.last, a.nbytes))
        best = _window(mem, lt, both, info, (False, False), False)
        if best is None:
            return None
        off, occupants = best
        for a in occupants:
            self._drop(a)
        return off

    # ---- making room ------------------------------------------------------------------------

    def _make_room(self, mem: Any, want: LTile, spans: list[tuple[int, int, int, Any]]) -> int:
        """Free a window of ``want``'s size and return its offset: the window whose tiles are
        needed furthest ahead (dead ones first, Belady's choice for a contiguous memory); a
        live tile in it is saved first. The window may not hold a tile the instruction being
        issued needs, nor, if another window will do, an operand of the pending legacy
        result (it would be refilled when that is issued); a planning run (no data) may take
        any. Fails when no window is left (or every one holds a tile the kernel placed)."""
        clock, planning = self.clock, self.planning
        # per span: (movable, pinned by the instruction, held by the pending result, score
        # terms: next use, last use, bytes); the kernel's own placements are never movable
        info = []
        for _, _, _, a in spans:
            if a.user is None:
                info.append((False, False, False, 0, 0, 0))
                continue
            lt = _owner(a)
            nxt = NEVER if planning else lt.next_use(clock)
            info.append((True, lt in self.pins, lt in self.held, nxt, lt.last, a.nbytes))
        top = want.kind == SBUF and want.nbytes * SMALL_TILE <= mem.bytes_per_partition
        best = None
        for ring in ((True, True), (True, False)) if self.held else ((True, False),):
            best = _window(mem, want, spans, info, ring, top)
            if best is not None:
                break
        if best is not None and self.plan is None and not planning:
            self._need_plan()  # raises, or turns this run into the planning run
        if best is None and self.planning:  # no data in a planning run: any tile may go
            best = _window(mem, want, spans, info, (False, False), top)
        if best is None:
            raise self._full(mem, want)
        off, occupants = best
        for a in occupants:
            if self.planning or _owner(a).next_use(clock) == NEVER:
                self._drop(a)
            else:
                self._evict(a)
        return off

    def _full(self, mem: Any, want: LTile) -> KernelError:
        unit = mem.kind.upper()
        held = sorted(tuple(mem.live), key=lambda a: -a.nbytes)
        named = [
            _owner(a).describe() if a.user is not None else f"{a.name!r} (placed by the kernel)"
            for a in held[:6]
        ]
        used = sum(a.nbytes for a in held)
        cap = mem.bytes_per_partition
        apart = " (their free bytes are not contiguous)" if used + want.nbytes <= cap else ""
        return fail(
            f"{mem.kind}-capacity",
            f"{unit} tile {want.describe()} does not fit: the tiles this instruction needs "
            f"at once hold {used / 1024:g} of {cap / 1024:g} KiB/partition on "
            f"{mem.generation_name}{apart} ({', '.join(named)}); every other tile was spilled",
        )

    def _drop(self, alloc: Allocation) -> None:
        """Free ``alloc`` without saving it (dead, a valid copy exists, or a planning run)."""
        user = alloc.user
        if isinstance(user, SbufCopy):
            owner = user.owner
            if owner.copy is user.view:
                owner.copy = GHOST if self.planning else DEAD
            alloc.memory.free(alloc)
            return
        lt: LTile = user
        lt.copy = GHOST if self.planning else DEAD  # (its source stays: hoisting reads it)
        alloc.memory.free(alloc)

    def _evict(self, alloc: Allocation) -> None:
        """Give a live tile's bytes away, saving it first."""
        user = alloc.user
        if isinstance(user, SbufCopy):  # a PSUM tile's SBUF copy moves on to HBM
            owner = user.owner
            hbm = self._hbm_copy(owner)
            self._issue(Op.DMA_COPY, hbm, user.view, "save")
            owner.copy = hbm
            alloc.memory.free(alloc)
            return
        lt: LTile = user
        if lt.copy is None and lt.written:
            src = lt.source
            if (
                src is not None
                and self.single
                and self.hbm_writes.get(src[0].storage.alloc, 0) == src[2]
            ):
                lt.copy = SOURCE
                self.by_source.setdefault(src[0].storage.alloc, set()).add(lt)
            else:
                self._save(lt, alloc)
        elif not lt.written:
            lt.copy = None  # never written: nothing to keep (a refill reads the sentinel)
        alloc.memory.free(alloc)

    def _save(self, lt: LTile, alloc: Allocation) -> None:
        view = whole_view(_Handle(alloc, lt.fmt, lt.shape), lt.shape, lt.fmt)
        if lt.kind == PSUM:
            if self.core.functional:
                self.core.sync()
                lt.marks = view.acc_array().copy()
            sb = self._place_copy(lt)
            self._issue(Op.TENSOR_COPY, sb, view, "save")
            lt.copy = sb
        else:
            hbm = self._hbm_copy(lt)
            self._issue(Op.DMA_COPY, hbm, view, "save")
            lt.copy = hbm

    def _place_copy(self, lt: LTile) -> View:
        """An SBUF copy of PSUM tile ``lt``'s data (``SbufCopy``)."""
        mem = self.core.sbuf
        spans = _spans(mem, lt.partitions)
        off = _fit(mem, lt, spans, True)
        if off is None:
            self.pins.add(lt)
            try:
                off = self._make_room(mem, lt, spans)
            finally:
                self.pins.discard(lt)
        v = self.core.allocate(lt.shape, lt.fmt, SBUF, name=f"{lt.name} spill", offset=off)
        a = v.storage.alloc
        a.user = SbufCopy(lt, v)
        return v

    def _hbm_copy(self, lt: LTile) -> View:
        return self.core.allocate(lt.shape, lt.fmt, HBM, name=f"{lt.name} spill", fill=False)

    def _issue(self, op: Op, dst: View, src: View, what: str) -> None:
        """Issue a copy of the memory model's own (``SPILL_ATTR`` = ``what``: ``"save"``,
        ``"reload"``, or ``"refetch"``, a clean tile read again from its HBM source: an
        ordinary load for the profile, the perf guide's "input data reloading")."""
        attrs: dict[str, Any] = {SPILL_ATTR: what}
        if op is Op.DMA_COPY:
            attrs = {"dge_mode": "unknown", "oob_mode": "error", SPILL_ATTR: what}
        busy, self.busy = self.busy, True
        try:
            self.core.execute(op, {DST: dst}, {SRC: src}, attrs)
        finally:
            self.busy = busy

    # ---- the observer: every instruction's tiles are resident when it is issued ------------

    def __call__(self, op: Op, dst: dict, src: dict, attrs: dict) -> None:
        if self.busy:
            return
        clock = self.clock
        self.clock = clock + 1
        todo: list[tuple[LTile, View, bool]] = []
        add = todo.append
        for v in dst.values():
            a = v.storage.alloc
            lt = a.user
            if lt is not None:
                add((lt, v, True))
            else:
                if a.kind == HBM and self.single:  # (clean tiles' sources: one core's launch)
                    self._hbm_write(a)
                self._index_of(v, add)  # (an indirect store reads its index tile)
        for v in src.values():
            if not isinstance(v, View):
                continue
            lt = v.storage.alloc.user
            if lt is not None:
                add((lt, v, False))
            else:
                self._index_of(v, add)
        if attrs:
            for v in attrs.values():
                if isinstance(v, View) and isinstance(v.storage.alloc.user, LTile):
                    add((v.storage.alloc.user, v, False))
        if not todo:
            return
        for lt, v, _ in todo:  # every operand resident (a refill pins the others)
            a = v.storage.alloc
            if not a.live or a.user is not lt:
                self._refill_all(todo)
                break
        for lt, v, writes in todo:
            if lt.last != clock:
                lt.last = clock
                plan = lt.plan
                if plan is None:
                    lt.uses.append(clock)
                else:
                    if lt.cursor >= len(plan) or plan[lt.cursor] != clock:
                        raise self._diverged(f"tile {lt.describe()} is used at instruction "
                                             f"{clock} where the plan has no use")  # fmt: skip
                    lt.cursor += 1
            if writes:
                self._written(lt, v)
        if op is Op.DMA_COPY and self.single:
            self._note_load(todo, src)

    @staticmethod
    def _index_of(v: View, add: Any) -> None:
        """An indirect view's index tile is read too."""
        idx = getattr(v, "index", None)
        if isinstance(idx, View) and isinstance(idx.storage.alloc.user, LTile):
            add((idx.storage.alloc.user, idx, False))

    def _refill_all(self, todo: list[tuple[LTile, View, bool]]) -> None:
        tiles = {lt for lt, _, _ in todo}
        pins = self.pins
        added = tiles - pins
        pins |= added
        try:
            for lt, v, _ in todo:
                a = v.storage.alloc
                if not a.live or a.user is not lt:
                    self._refill(lt, v.storage)
        finally:
            pins -= added

    def _written(self, lt: LTile, v: View) -> None:
        lt.written = True
        c = lt.copy
        if c is not None:
            lt.copy = None
            if c is SOURCE and lt.source is not None:
                self.by_source.get(lt.source[0].storage.alloc, set()).discard(lt)
        lt.source = None
        lt.marks = None
        if not lt.full:
            if covers(v, lt):
                lt.full, lt.parts = True, None
            else:
                if lt.parts is None:
                    lt.parts = set()
                lt.parts.add(_key(v))

    def _note_load(self, todo: list[tuple[LTile, View, bool]], src: dict) -> None:
        """A DMA that writes all of a tile from a plain HBM view makes the tile 'clean': its
        source can refill it (``SOURCE``) until either is written."""
        s = src.get(SRC)
        if s is None or not _plain(s):
            return
        if s.storage.alloc.kind != HBM or len(todo) != 1:
            return
        lt, v, writes = todo[0]
        if writes and covers(v, lt):
            a = s.storage.alloc
            lt.source = (s, (v.shape, v.strides, v.offset, v.p0, v.fmt, v.dtype),
                         self.hbm_writes.get(a, 0))  # fmt: skip

    def _hbm_write(self, a: Allocation) -> None:
        self.hbm_writes[a] = self.hbm_writes.get(a, 0) + 1
        gone = self.by_source.pop(a, None)
        if gone:  # tiles whose copy is this tensor's old data: save that data first
            for lt in gone:
                if lt.copy is SOURCE and lt.source is not None:
                    s, geo, _ = lt.source
                    keep = self.core.allocate(s.shape, s.fmt, HBM, name=f"{lt.name} spill",
                                              fill=False)  # fmt: skip
                    self._issue(Op.DMA_COPY, keep, s, "save")
                    lt.source = (keep, geo, 0)  # refilled from the saved bytes
                    self.by_source.setdefault(keep.storage.alloc, set()).add(lt)

    def _refill(self, lt: LTile, storage: Any) -> None:
        """Give ``lt`` bytes again and its data back (its views share ``storage``)."""
        copy = lt.copy
        if copy is DEAD:
            raise self._diverged(f"tile {lt.describe()} is used after its planned last use")
        lt.off = self._place(lt)
        new = self._bytes(lt, lt.off)
        new.user = lt
        old = storage.alloc
        storage.alloc = new  # every view of the tile follows it to its new bytes
        if old.user is lt:
            old.user = None
        whole = whole_view(storage, lt.shape, lt.fmt)
        lt.copy = None
        if copy is SOURCE:
            s, geo, _ = lt.source  # type: ignore[misc]
            self.by_source.get(s.storage.alloc, set()).discard(lt)
            dst = View.trusted(storage, geo[0], geo[1], geo[2], geo[3], geo[4], geo[5], True)
            self._issue(Op.DMA_COPY, dst, s, "refetch")
            lt.copy = None
            return
        if copy is None or copy is GHOST:
            return
        saved = copy
        if copy.memory == HBM and lt.kind == PSUM:  # a DMA writes no PSUM: staged in SBUF
            copy = self._stage(lt)
            self._issue(Op.DMA_COPY, copy, saved, "reload")
        self._issue(Op.DMA_COPY if copy.memory == HBM else Op.TENSOR_COPY, whole, copy, "reload")
        if isinstance(copy.storage.alloc.user, SbufCopy):  # (not kept: SBUF is scarce)
            copy.storage.alloc.memory.free(copy.storage.alloc)
        if lt.kind == PSUM and lt.marks is not None and self.core.functional:
            self.core.sync()  # its open accumulation group goes on where it stopped
            whole.acc_array()[...] = lt.marks
            new.marks_version += 1
        lt.copy = saved if saved.memory == HBM else None  # an HBM copy stays valid

    def _stage(self, lt: LTile) -> View:
        """A temporary SBUF tile (freed when dropped) for a PSUM refill from HBM."""
        v = self._place_copy(lt)
        v.storage.alloc.user = None
        return v

    def resident(self, *views: Any) -> None:
        """Make the tiles of ``views`` resident (refilled if spilled) for a use that is not an
        instruction (``nl.device_print`` reads the data directly)."""
        todo = [(v.storage.alloc.user, v) for v in views if isinstance(v, View)
                and isinstance(v.storage.alloc.user, LTile)]  # fmt: skip
        self.pins.update(lt for lt, _ in todo)
        try:
            for lt, v in todo:
                if not (v.storage.alloc.live and v.storage.alloc.user is lt):
                    self._refill(lt, v.storage)
        finally:
            self.pins.difference_update(lt for lt, _ in todo)

    def vacate(self, memory: str, pstart: int, partitions: int, offset: int, nbytes: int) -> None:
        """The kernel places a tensor itself at these bytes (``neuronxcc.nki.compiler``
        direct allocation): the allocator's tiles there give them up first (saved if live)."""
        mem = self.core.sbuf if memory == SBUF else self.core.psum
        end, pend = offset + nbytes, pstart + partitions
        hit = [a for a in tuple(mem.live) if a.user is not None
               and a.partition_start < pend and pstart < a.partition_start + a.partitions
               and a.byte_offset < end and offset < a.byte_offset + a.nbytes]  # fmt: skip
        if not hit:
            return
        if self.plan is None and not self.planning:
            self._need_plan()
        for a in hit:
            if self.planning or _owner(a).next_use(self.clock) == NEVER:
                self._drop(a)
            else:
                self._evict(a)

    # ---- loop-invariant loads ---------------------------------------------------------------

    def hoisted_load(self, site: Any, src: View, fmt: Any, boxes: Any) -> Any:
        """The tile an ``nl.load`` of ``src`` at kernel line ``site`` already holds: the tile
        the same line loaded last, inside the same loops, still held by the kernel, with
        neither it nor ``src`` written since (a loop-invariant load, hoisted); else None."""
        if not self.single or not self.loops or not _plain(src) or src.memory != HBM:
            return None
        entry = self.hoisted.get(site)
        if entry is None:
            return None
        skey, fname, bkey, ref, geo = entry
        storage = ref()
        if storage is None or skey != _key(src) or fname != fmt.name or bkey != boxes:
            return None
        tile = View.trusted(storage, *geo, True)
        lt = storage.alloc.user
        a = src.storage.alloc
        if not isinstance(lt, LTile) or lt.source is None or lt.source[0].storage.alloc is not a:
            return None
        if self.hbm_writes.get(a, 0) != lt.source[2]:
            return None
        return tile

    def note_load(
        self, site: Any, src: View, fmt: Any, boxes: Any, tile: View, first: int | None = None
    ) -> None:
        """Remember the tile an ``nl.load`` at ``site`` filled (weakly: the kernel decides how
        long it lives), for ``hoisted_load`` in a later iteration. ``first``: the position in
        the core's record of the load's first instruction; its DMAs are marked ``resident``
        when the same bytes loaded earlier are still in SBUF (``resident_load``)."""
        if self.single and self.loops and _plain(src):
            geo = (tile.shape, tile.strides, tile.offset, tile.p0, tile.fmt, tile.dtype)
            self.hoisted[site] = (_key(src), fmt.name, boxes, weakref.ref(tile.storage), geo)
        if first is not None and self.resident_load(src, fmt, boxes, tile):
            record = self.core.record
            for i in range(first, len(record)):
                ins = record[i]
                if ins.opcode is Op.DMA_COPY and ins.attr(SPILL_ATTR) is None:
                    attrs = tuple(sorted((*ins.attrs, (SPILL_ATTR, "resident"))))
                    record[i] = ins._replace(attrs=attrs)

    def resident_load(self, src: View, fmt: Any, boxes: Any, tile: View) -> bool:
        """Whether an ``nl.load`` of ``src`` into ``tile`` (placed in SBUF) reads bytes an
        earlier load left in SBUF: the same HBM bytes and format, the source not written
        since, and kept: loads are kept in the order they were first made while the SBUF
        bytes in use plus those kept fit a partition (what a static choice of tiles to keep
        resident gets from a loop nest; a least-recently-used policy keeps nothing of a
        cyclic sweep larger than SBUF). A new load is kept if it fits beside those."""
        if not self.single or not _plain(src) or src.memory != HBM or tile.memory != SBUF:
            return False
        a = src.storage.alloc
        key = (_key(src), fmt.name, boxes)
        writes = self.hbm_writes.get(a, 0)
        cached = self.cached
        mem = self.core.sbuf
        room = mem.bytes_per_partition - sum(x.nbytes for x in mem.live)
        entry = cached.get(key)
        if entry is not None:
            if entry[1] == writes:
                for k, (nbytes, _) in cached.items():  # kept before it
                    if k == key:
                        return True
                    room -= nbytes
                    if room < 0:
                        break
            del cached[key]  # its source changed, or the tiles in use leave it no room
            return False
        lt = tile.storage.alloc.user
        nbytes = lt.nbytes if isinstance(lt, LTile) else tile.storage.alloc.nbytes
        if sum(n for n, _ in cached.values()) <= room:  # (room: with ``tile`` in use)
            cached[key] = (nbytes, writes)
        return False

    # ---- written-ness (nl.loop_reduce) ----------------------------------------------------

    @staticmethod
    def holds_data(v: View) -> bool:
        """Whether the running tile view ``v`` was written before (all of its tile, or this
        very view)."""
        lt = v.storage.alloc.user
        if not isinstance(lt, LTile):
            return True
        if lt.full:
            return True
        return lt.parts is not None and _key(v) in lt.parts


SMALL_TILE = 32
"""An SBUF tile of at most ``1 / SMALL_TILE`` of a partition is placed from the top of SBUF
down, a larger one from the bottom up: small tiles (a [128, 512] fp32 tile is 2 KiB of 192) do
not break up the room large ones need (trnsim's choice; the compiler's placement is not
public)."""


def _spans(mem: Any, partitions: int) -> list[tuple[int, int, int, Any]]:
    """The live allocations sharing a partition with ``[0, partitions)``, as sorted
    ``(start, end, sequence, allocation)`` byte spans (``OnChipMemory.sorted_spans``)."""
    spans = mem.sorted_spans()
    if partitions >= mem.partitions:
        # a copy: a Storage freed while a caller scans (a cyclic GC run) edits the original
        return spans[:]
    return [t for t in spans if t[3].partition_start < partitions]


def _align(mem: Any, lt: LTile) -> int:
    isz = lt.fmt.dtype.itemsize
    return max(isz, mem.bank_bytes) if mem.kind == PSUM else isz


def _fit(mem: Any, lt: LTile, spans: Any, top: bool) -> int | None:
    """A free aligned offset for ``lt`` beside ``spans`` (sorted ``(start, end, ...)``): the
    lowest (first fit) or, with ``top``, the highest."""
    align, n, cap = _align(mem, lt), lt.nbytes, mem.bytes_per_partition
    cursor = 0
    if top:
        best = None
        for t in spans:
            start = t[0]
            if start > cursor:
                off = (start - n) // align * align
                if off >= cursor:
                    best = off
            end = t[1]
            if end > cursor:
                cursor = end
        off = (cap - n) // align * align
        return off if off >= cursor else best
    for t in spans:
        start = t[0]
        if start > cursor:
            off = -(-cursor // align) * align
            if off + n <= start:
                return off
        end = t[1]
        if end > cursor:
            cursor = end
    off = -(-cursor // align) * align
    return off if off + n <= cap else None


def _window(
    mem: Any, lt: LTile, spans: list[tuple[int, int, int, Any]], info: list[tuple[Any, ...]],
    keep: tuple[bool, bool], top: bool,
) -> tuple[int, list[Allocation]] | None:  # fmt: skip
    """The best window ``[off, off + lt.nbytes)`` of a contiguous memory to free for ``lt``
    (``spans`` sorted, ``info`` per span as ``Allocator._make_room`` gives it). A window may
    hold only movable tiles, none pinned by the instruction (``keep[0]``) or held by the
    pending result (``keep[1]``). Best: the latest next use among its tiles (dead ones:
    never), then the oldest last use, then the fewest bytes; ties: the lowest offset, or the
    highest with ``top`` (as ``_fit`` prefers)."""
    align, n, cap = _align(mem, lt), lt.nbytes, mem.bytes_per_partition
    starts = {0}
    for start, end, _, _ in spans:
        starts.add(-(-end // align) * align)
        if start >= n:
            starts.add((start - n) // align * align)
    keep_pinned, keep_held = keep
    best = None
    lo = hi = 0
    count = len(spans)
    for off in sorted(starts):
        if off + n > cap:
            break
        while lo < count and spans[lo][1] <= off:
            lo += 1
        hi = max(hi, lo)
        while hi < count and spans[hi][0] < off + n:
            hi += 1
        nxt, last, size, ok = NEVER, -1, 0, True
        for i in range(lo, hi):
            if spans[i][1] <= off:
                continue
            movable, pinned, held, nu, lu, nb = info[i]
            if not movable or (keep_pinned and pinned) or (keep_held and held):
                ok = False
                break
            nxt, last, size = min(nxt, nu), max(last, lu), size + nb
        if not ok:
            continue
        key = (nxt, -last, -size, off if top else -off)
        if best is None or key > best[0]:
            best = (key, off, lo, hi)
    if best is None:
        return None
    _, off, lo, hi = best
    return off, [spans[i][3] for i in range(lo, hi) if spans[i][1] > off]


def _owner(a: Allocation) -> LTile:
    u = a.user
    return u.owner if isinstance(u, SbufCopy) else u


def _plain(v: Any) -> bool:
    return isinstance(v, View) and not getattr(v, "is_indirect", lambda: False)()


def _key(v: View) -> tuple[Any, ...]:
    return (id(v.storage.alloc) if v.memory == HBM else 0, v.p0, v.offset, v.shape, v.strides,
            v.fmt.name)  # fmt: skip


def covers(v: View, lt: LTile) -> bool:
    """``v`` covers every byte of tile ``lt``."""
    if v.p0 != 0 or v.offset != 0 or not v.shape or v.shape[0] != lt.partitions:
        return False
    if v.shape[0] > 1 and v.strides[0] != 1:
        return False
    n = 1
    for size, stride in zip(reversed(v.shape[1:]), reversed(v.strides[1:]), strict=True):
        if size != 1 and stride != n:
            return False
        n *= size
    return n * v.fmt.dtype.itemsize == lt.nbytes


def _short(where: tuple[str, int]) -> str:
    file, line = where
    return f"{file.replace(chr(92), '/').rsplit('/', 1)[-1]}:{line}"


def allocator() -> Allocator:
    """The running core's allocator (made at the launch's first legacy tile)."""
    prog = current()
    obs = prog.core.observer
    if isinstance(obs, Allocator):
        return obs
    return Allocator(prog.core, prog.launch)
