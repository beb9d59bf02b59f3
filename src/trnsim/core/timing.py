"""The timing model: schedule a recorded instruction stream on a NeuronCore's engines.

The model (a list scheduler over the recorded stream, in the compiler's order):

- The compiler's instruction scheduler first orders one core's stream (``compiler_order``):
  each engine's instructions in dependency order, taking among the next ``ORDER_WINDOW`` of
  them the first whose inputs are ready, so a dependent instruction's wait is filled with
  independent work; dependencies, engine state, DMA order and barriers keep their order.
- Each compute engine (Tensor, Vector, Scalar, GpSimd) of each core runs its instructions in
  order; the engines and the DMA queues run in parallel. An instruction starts when its engine
  (queue) is free and its inputs are ready, and occupies the engine for its cost
  (``trnsim.core.costs``).
- Dependencies come from the memory regions instructions read and write, as the compiler's
  semaphores would enforce them: read-after-write (a reader waits for the end of every earlier
  writer of an overlapping region), write-after-read and write-after-write (a writer waits for
  every earlier reader and writer). PSUM accumulation groups are covered by the same rules:
  each accumulating matmul writes its PSUM region, so the group is ordered, a reader of the
  group waits for its last matmul, and the next group's first matmul waits for that reader.
- Regions are bounding boxes: (partition range x byte range) in SBUF/PSUM; in HBM a
  (row range x column range) rectangle under the operand's row stride when two operands share
  it, else the 1-D byte interval (conservative: may add a dependency, never drops one).
- DMA: a transfer goes to one of the core's ``queues_per_engine`` queues (round robin, or its
  ``queue`` attribute; each transfer is spread over the 16 engines, so a queue is a queue on
  every engine); within a queue transfers run in order. Each pays the fixed latency, then its
  data phase shares the core's DMA bandwidth and the chip's HBM bandwidth (fluid FIFO pipes;
  see ``costs.dma_cost``).
- ``core_barrier`` / ``sendrecv`` wait for every earlier instruction.

This module only reads ``Instruction`` records; ``benchmark`` (``trnsim.nki.benchmark``) runs
a kernel in timing-only mode to get them. The per-instruction work is O(overlapping regions)
with dictionary lookups, so streams of 10^5-10^6 instructions time in seconds.

The parts: ``_Regions`` (distinct regions, which overlap which, and per region its last writer
and last access), ``_Tracks`` (the in-order engines and queues), ``_DmaPipes`` (a core's DMA
queues and bandwidth pipes), ``_Costs`` (one cost entry per instruction shape, with the
statistics the totals add up); ``compiler_order`` the pre-pass that orders the stream,
``_run`` the pass over the stream that reads them, and ``_profile`` turns its ``_Timeline``
and the ``_Totals`` into a ``Profile``.
"""

from __future__ import annotations

import gc
from bisect import bisect_right
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter, itemgetter
from typing import NamedTuple

from trnsim.core import costs
from trnsim.core.costs import DmaModel
from trnsim.core.instruction import Instruction, Operand
from trnsim.core.isa import SPILL_ATTR, SYNC_OPS, Engine, Op, uses_engine_state
from trnsim.core.profile import Contributor, Profile, Schedule, TrackStats
from trnsim.hw import ChipSpec, CoreSpec, core

ONCHIP_BUCKET_BYTES = 2048
"""Index granularity of SBUF/PSUM regions (a PSUM bank per partition; bookkeeping only)."""
HBM_PAGE_BYTES = 1 << 20
"""Index granularity of HBM regions (bookkeeping only; overlaps are tested exactly)."""
HBM_WIDE_PAGES = 4096
"""HBM regions spanning more pages than this are kept in a list tested against every region."""
CRITICAL_PATH_TOP = 6

_COMPUTE = (Engine.TENSOR, Engine.VECTOR, Engine.SCALAR, Engine.GPSIMD)
_MEMORIES = ("hbm", "sbuf", "psum")
_CORE_OF = attrgetter("core")
_SITE = itemgetter(0, 1, 5, 6)  # an Instruction's (opcode, engine, file, line), in C


# ---- regions ----------------------------------------------------------------------------------


class OnChipRegion(NamedTuple):
    """An SBUF/PSUM bounding box: partitions ``[p0, p1)`` x bytes ``[b0, b1)`` of one core."""

    memory: str
    core: int
    p0: int
    p1: int
    b0: int
    b1: int


class HbmRegion(NamedTuple):
    """An HBM region: the byte interval ``[a0, a1)``, and within it, when ``row_bytes`` is not
    0, the rectangle of rows ``[r0, r1)`` x columns ``[c0, c1)`` (bytes) under that row stride."""

    memory: str  # always "hbm"
    row_bytes: int
    r0: int
    r1: int
    c0: int
    c1: int
    a0: int
    a1: int


Region = OnChipRegion | HbmRegion


def _span(o: Operand) -> tuple[int, int]:
    lo = hi = 0
    for stride, size in o.pattern:
        d = stride * (size - 1)
        if d > 0:
            hi += d
        else:
            lo += d
    return lo, hi


def region_of(o: Operand) -> Region:
    """The bounding region of an operand (see module docstring)."""
    isz = o.itemsize
    lo, hi = _span(o)
    if o.memory != "hbm":
        step, count = o.partition_pattern
        d = step * (count - 1)
        return OnChipRegion(
            o.memory,
            o.core,
            o.partition + min(0, d),
            o.partition + max(0, d) + 1,
            o.offset + lo * isz,
            o.offset + (hi + 1) * isz,
        )
    pstride, count = o.partition_pattern
    row = pstride * isz
    d = row * (count - 1)
    a0 = o.offset + lo * isz + min(0, d)
    a1 = o.offset + (hi + 1) * isz + max(0, d)
    c_lo = o.offset + lo * isz
    width = (hi - lo + 1) * isz
    if count > 1 and row > 0 and (c_lo % row) + width <= row:
        r0 = c_lo // row
        return HbmRegion("hbm", row, r0, r0 + count, c_lo % row, c_lo % row + width, a0, a1)
    return HbmRegion("hbm", 0, 0, 0, 0, 0, a0, a1)


def regions_overlap(a: Region, b: Region) -> bool:
    """Whether two regions (from ``region_of``) may share a byte."""
    if a.memory != b.memory:
        return False
    if isinstance(a, HbmRegion) and isinstance(b, HbmRegion):
        if a.a0 >= b.a1 or b.a0 >= a.a1:
            return False
        if a.row_bytes and a.row_bytes == b.row_bytes:
            return a.r0 < b.r1 and b.r0 < a.r1 and a.c0 < b.c1 and b.c0 < a.c1
        return True
    assert isinstance(a, OnChipRegion) and isinstance(b, OnChipRegion)
    return a.core == b.core and a.p0 < b.p1 and b.p0 < a.p1 and a.b0 < b.b1 and b.b0 < a.b1


@dataclass(frozen=True, slots=True)
class OperandInfo:
    """What the scheduler keeps per distinct operand."""

    region: int  # region id
    signature: int  # id of the operand's shape signature (part of the cost-entry key)
    overlapping: list[int]  # ids of the regions overlapping it, itself included


class _Regions:
    """Distinct regions, each with the regions overlapping it (itself included) and, per region,
    the end of its last writer and of its last access (reader or writer; a writer ties over a
    reader), with who did it. A reader waits for ``write_end`` of the regions it overlaps, a
    writer for ``access_end`` (read-after-write; write-after-read and -write)."""

    def __init__(self) -> None:
        self.ids: dict[Region, int] = {}
        self.keys: list[Region] = []
        self.overlaps: list[list[int]] = []
        self.buckets: dict[tuple, list[int]] = defaultdict(list)
        self.wide: list[int] = []
        self.write_end: list[float] = []
        self.writer: list[int] = []
        self.access_end: list[float] = []
        self.accessor: list[int] = []
        self.operands: dict[Operand, OperandInfo] = {}
        # The same as plain (region, signature, overlapping) tuples (the hot loop unpacks them;
        # a tuple subclass unpacks far slower), keyed by the operand object's id(): an int
        # hashes far faster than an Operand, and the recorder shares one object between equal
        # operands (the caller keeps them all alive for the call, so an id is not reused).
        self.by_id: dict[int, tuple[int, int, list[int]]] = {}
        self.signatures: dict[tuple, int] = {}

    def info(self, o: Operand) -> tuple[int, int, list[int]]:
        """The ``OperandInfo`` fields of an operand object not seen before (``by_id`` caches
        them)."""
        info = self.operands.get(o)
        if info is None:
            rid = self.intern(region_of(o))
            sig = (o.role, o.memory, o.dtype, o.itemsize, o.partition_pattern, o.pattern)
            sid = self.signatures.setdefault(sig, len(self.signatures))
            info = self.operands[o] = OperandInfo(rid, sid, self.overlaps[rid])
        fields = self.by_id[id(o)] = (info.region, info.signature, info.overlapping)
        return fields

    def _bucket_keys(self, r: Region) -> list[tuple] | None:
        if isinstance(r, HbmRegion):
            p0, p1 = r.a0 // HBM_PAGE_BYTES, (r.a1 - 1) // HBM_PAGE_BYTES
            if p1 - p0 > HBM_WIDE_PAGES:
                return None
            return [("hbm", p) for p in range(p0, p1 + 1)]
        b0, b1 = r.b0 // ONCHIP_BUCKET_BYTES, (r.b1 - 1) // ONCHIP_BUCKET_BYTES
        return [(r.memory, r.core, b) for b in range(b0, b1 + 1)]

    def intern(self, r: Region) -> int:
        rid = self.ids.get(r)
        if rid is not None:
            return rid
        rid = len(self.keys)
        self.ids[r] = rid
        self.keys.append(r)
        self.write_end.append(0.0)
        self.writer.append(-1)
        self.access_end.append(0.0)
        self.accessor.append(-1)
        keys = self._bucket_keys(r)
        if keys is None:
            cands: list[int] = list(range(rid))
            self.wide.append(rid)
        else:
            cands = list(self.wide)
            for k in keys:
                cands.extend(self.buckets[k])
        mine = [rid]
        regions, overlaps = self.keys, self.overlaps
        # regions_overlap(r, b), inlined with the fields unpacked (this loop is hot)
        if isinstance(r, HbmRegion):
            _, row, r0, r1, c0, c1, a0, a1 = r
            for q in dict.fromkeys(cands):  # each candidate once, in order
                b = regions[q]
                if not isinstance(b, HbmRegion):
                    continue
                _, b_row, b_r0, b_r1, b_c0, b_c1, b_a0, b_a1 = b
                if a0 >= b_a1 or b_a0 >= a1:
                    continue
                if (
                    row
                    and row == b_row
                    and not (r0 < b_r1 and b_r0 < r1 and c0 < b_c1 and b_c0 < c1)
                ):
                    continue
                mine.append(q)
                overlaps[q].append(rid)
        else:
            memory, core_, p0, p1, b0, b1 = r
            for q in dict.fromkeys(cands):
                b = regions[q]
                if type(b) is not OnChipRegion:  # a wide HBM region
                    continue
                b_memory, b_core, b_p0, b_p1, b_b0, b_b1 = b
                if (
                    b_memory == memory
                    and b_core == core_
                    and p0 < b_p1
                    and b_p0 < p1
                    and b0 < b_b1
                    and b_b0 < b1
                ):
                    mine.append(q)
                    overlaps[q].append(rid)
        overlaps.append(mine)
        if keys is not None:
            for k in keys:
                self.buckets[k].append(rid)
        return rid


# ---- tracks and DMA pipes ---------------------------------------------------------------------


class _Tracks:
    """The in-order tracks (a compute engine, a DMA queue or the sync track of a core), as
    parallel lists indexed by track id: when each is next free, the instruction that last ran
    on it, its busy seconds and instruction count. A track first used after a barrier starts at
    the barrier."""

    __slots__ = (
        "barrier_end",
        "barrier_idx",
        "busy",
        "cals",
        "count",
        "free",
        "ids",
        "last",
        "names",
    )

    def __init__(self) -> None:
        self.ids: dict[tuple, int] = {}
        self.names: list[str] = []
        self.free: list[float] = []
        self.last: list[int] = []
        self.busy: list[float] = []
        self.count: list[int] = []
        self.cals: list[_Calendar | None] = []  # a compute engine's calendar
        self.barrier_end = 0.0
        self.barrier_idx = -1

    def get(self, key: tuple, name: str, window: int | None = None) -> int:
        """The id of track ``key`` (created, named ``name``, on first use; with ``window``, a
        compute engine whose instructions fill its idle gaps up to ``window`` busy stretches
        back: ``SCHEDULE_WINDOW``)."""
        tid = self.ids.get(key)
        if tid is None:
            tid = len(self.names)
            self.ids[key] = tid
            self.names.append(name)
            self.free.append(self.barrier_end)
            self.last.append(self.barrier_idx)
            self.busy.append(0.0)
            self.count.append(0)
            cal = _Calendar(window) if window is not None else None
            if cal is not None:
                cal.floor = self.barrier_end
            self.cals.append(cal)
        return tid

    def barrier(self, t: float, idx: int) -> None:
        """Instruction ``idx`` ends at ``t`` and every track waits for it."""
        free = self.free
        for tid in range(len(free)):
            if free[tid] < t:
                free[tid] = t
            cal = self.cals[tid]
            if cal is not None:
                cal.raise_floor(t)
        self.barrier_end, self.barrier_idx = t, idx


class _Calendar:
    """The busy intervals of a resource (a bandwidth pipe, an engine), sorted, disjoint and
    merged where they touch (parallel lists ``starts`` / ``ends``, with ``owners``: the
    instruction whose reservation ends each interval). ``reserve(t, length)`` books the
    earliest free gap of ``length`` at or after ``t`` (and ``floor``): work ready early uses
    idle time before work booked after it in program order (back-filling), never pushing one
    already booked. With ``limit``, only the last ``limit`` busy intervals keep their gaps
    open (older ones raise ``floor``): a bounded look-back."""

    __slots__ = ("ends", "floor", "limit", "owners", "starts")

    def __init__(self, limit: int | None = None) -> None:
        self.starts: list[float] = []
        self.ends: list[float] = []
        self.owners: list[int] = []
        self.floor = 0.0
        self.limit = limit

    @property
    def end(self) -> float:
        """The end of the last booking (or the floor)."""
        return self.ends[-1] if self.ends and self.ends[-1] > self.floor else self.floor

    def raise_floor(self, t: float) -> None:
        """Nothing may start before ``t`` (a barrier)."""
        if t > self.floor:
            self.floor = t
            self.forget_before(t)

    def reserve(self, t: float, length: float, owner: int) -> tuple[float, int]:
        """Book ``[s, s + length)`` with ``s >= t`` the earliest start where it fits; returns
        ``(s, the instruction whose booking bound s)`` (-1 when ``s == t``)."""
        dep = -1
        if t < self.floor:
            t = self.floor
        if length <= 0.0:
            return t, -1
        starts, ends, owners = self.starts, self.ends, self.owners
        n = len(ends)
        s = t
        if n and ends[-1] <= t:  # the common case: past every booking
            i = n
        else:
            i = bisect_right(ends, t)
            while i < n and starts[i] < s + length:  # the gap before interval i is too short
                if ends[i] > s:
                    s, dep = ends[i], owners[i]
                i += 1
        e = s + length
        if i and ends[i - 1] == s:  # touches the interval before: extend it
            ends[i - 1] = e
            owners[i - 1] = owner
            if i < n and starts[i] == e:  # ... and now the one after
                ends[i - 1] = ends[i]
                owners[i - 1] = owners[i]
                del starts[i], ends[i], owners[i]
        elif i < n and starts[i] == e:  # touches the interval after: extend it back
            starts[i] = s
        else:
            starts.insert(i, s)
            ends.insert(i, e)
            owners.insert(i, owner)
            if self.limit is not None and len(ends) > self.limit:
                self.floor = max(self.floor, ends[0])
                del starts[0], ends[0], owners[0]
        return s, dep

    def fill(self, t: float, length: float, owner: int) -> tuple[float, float, int]:
        """Book ``length`` of the earliest idle time at or after ``t``, in as many pieces as
        it takes (a transfer's bytes use whatever bandwidth is idle, around transfers already
        booked): returns ``(start of the first piece, end of the last, the booking that bound
        the start)``."""
        if t < self.floor:
            t = self.floor
        if length <= 0.0:
            return t, t, -1
        starts, ends, owners = self.starts, self.ends, self.owners
        n = len(ends)
        if not n or ends[-1] <= t:  # past every booking: one piece
            s, dep = self.reserve(t, length, owner)
            return s, s + length, dep
        pieces: list[tuple[float, float]] = []
        s, dep, left = t, -1, length
        i = bisect_right(ends, t)
        while left > 0.0:
            if i < n and starts[i] <= s:  # inside a booking: skip to its end
                if ends[i] > s:
                    s = ends[i]
                    if not pieces:
                        dep = owners[i]
                i += 1
                continue
            take = min(left, starts[i] - s) if i < n else left
            pieces.append((s, take))
            left = left - take if take < left else 0.0
            s += take
        for a, length_ in pieces:
            self.reserve(a, length_, owner)
        return pieces[0][0], pieces[-1][0] + pieces[-1][1], dep

    def reserve_probe(self, t: float, length: float) -> float:
        """Where ``reserve(t, length)`` would start, without booking."""
        if t < self.floor:
            t = self.floor
        ends, starts = self.ends, self.starts
        n = len(ends)
        if length <= 0.0 or not n or ends[-1] <= t:
            return t
        s = t
        i = bisect_right(ends, t)
        while i < n and starts[i] < s + length:
            if ends[i] > s:
                s = ends[i]
            i += 1
        return s

    def forget_before(self, t: float) -> None:
        """Drop the bookings that end at or before ``t`` (no transfer can start before it)."""
        k = bisect_right(self.ends, t)
        if k:
            del self.starts[:k], self.ends[:k], self.owners[:k]


class _DmaPipes:
    """One core's DMA state: the round-robin queue counter, the track of each queue, and the
    calendar of the core's DMA bandwidth (a transfer books ``max(occupancy of the core's DMA
    engines, time in the core's share of HBM bandwidth)``), with a count of the bookings made
    since the calendar was last pruned."""

    __slots__ = ("calendar", "next_queue", "queue_track", "since_prune")

    def __init__(self) -> None:
        self.next_queue = 0
        self.queue_track: dict[int, int] = {}
        self.calendar = _Calendar()
        self.since_prune = 0


PRUNE_EVERY = 256
"""Bookings between two prunings of a core's DMA calendar (bookkeeping only)."""

SCHEDULE_WINDOW = 64
"""How far back (busy stretches of its engine) an instruction may be placed ahead of
instructions issued before it in program order, into an idle gap of its engine, when its
inputs are ready: the Neuron compiler orders each engine's instructions from the dependencies
(its instruction scheduler; each engine then runs in order), so an idle engine takes the next
ready work. An assumption: the compiler's scheduling window is not public."""


# ---- cost entries -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _ComputeEntry:
    seconds: float
    latency_s: float  # after its end, until a dependent instruction may read what it wrote
    stats: int  # index into _Costs.stats / uses
    track: int
    in_order: bool  # touches engine state (uses_engine_state): never moved ahead of others


@dataclass(frozen=True, slots=True)
class _AutoEntry:
    """An instruction the kernel gave no engine: one compute entry per engine it may run on
    (``costs.auto_engines``); the scheduler takes the one that finishes first."""

    options: tuple[_ComputeEntry, ...]


@dataclass(frozen=True, slots=True)
class _DmaEntry:
    latency_s: float  # fixed latency, before the data phase
    pipe_s: float  # the data phase's booking of the core's DMA bandwidth calendar
    data_s: float  # the data phase's duration
    queue: int | None  # the transfer's ``queue`` attribute; None: round robin
    stats: int


@dataclass(frozen=True, slots=True)
class _SyncEntry:
    stats: int


@dataclass(frozen=True, slots=True)
class _HeldEntry:
    """A load of bytes still resident in SBUF (``SPILL_ATTR`` "resident": the memory model's
    loop-invariant reuse, ``trnsim.nki.legacy.allocator``): no transfer, no time."""

    stats: int


class _EntryStats(NamedTuple):
    """What one instruction of an entry adds to the profile's totals."""

    opcode: Op
    flops: float
    rate_class: str  # the matmul's peak-rate class (a dtype name), "" if no FLOPs
    hbm_bytes: int
    sbuf_bytes: int
    psum_bytes: int
    dma_hbm_bytes: int  # HBM bytes moved by DMA (MBU)
    hbm_read: int  # ... of them read from HBM
    hbm_write: int  # ... written to HBM
    spill_save: int  # HBM bytes written by a spill (``SPILL_ATTR`` "save")
    spill_reload: int  # HBM bytes read by a refill (``SPILL_ATTR`` "reload")
    hw_flops: float  # neuron-profile's hardware FLOPs (costs.hardware_flops)
    transpose_flops: float


class _Costs:
    """Cost entries, one per instruction shape (opcode, engine, attributes, core and operand
    signatures: what the cost rules read), each with its ``_EntryStats`` and use count."""

    def __init__(self, spec: CoreSpec, dma: DmaModel, tracks: _Tracks, multi: bool) -> None:
        self.spec, self.dma, self.tracks, self.multi = spec, dma, tracks, multi
        self.clocks = {e: costs.engine_clock(spec, e) for e in (*_COMPUTE, Engine.SYNC)}
        self.entries: dict[tuple, _ComputeEntry | _DmaEntry | _SyncEntry | _HeldEntry] = {}
        self.stats: list[_EntryStats] = []
        self.uses: list[int] = []
        # Attributes -> a small id, looked up by the tuple's id() first: the recorder shares one
        # tuple between equal attribute sets, and the caller keeps them all alive.
        self.attr_ids: dict[int, int] = {}
        self.attr_vals: dict[tuple, int] = {}
        self.after_aids: set[int] = set()  # attributes holding explicit dependencies (AFTER)

    def attrs_id(self, attrs: tuple) -> int:
        aid = self.attr_ids[id(attrs)] = self.attr_vals.setdefault(attrs, len(self.attr_vals))
        if any(k == AFTER for k, _ in attrs):
            self.after_aids.add(aid)
        return aid

    def entry(
        self, key: tuple, ins: Instruction
    ) -> _ComputeEntry | _AutoEntry | _DmaEntry | _SyncEntry | _HeldEntry:
        """The entry of ``ins``'s shape ``key`` (not cached yet)."""
        if ins.engine in _COMPUTE:
            engines = costs.auto_engines(ins)
            if engines != (ins.engine,):
                options = tuple(self._entry(ins._replace(engine=e)) for e in engines)
                auto = self.entries[key] = _AutoEntry(options)
                return auto
        entry = self.entries[key] = self._entry(ins)
        return entry

    def _entry(self, ins: Instruction) -> _ComputeEntry | _DmaEntry | _SyncEntry | _HeldEntry:
        sid = len(self.stats)
        b = [0, 0, 0]
        # a tensor-indirection operand moves (P, num_elem) elements, not its whole indexed view
        moved = costs.tensor_indirect_access(ins)
        for o in moved.src + moved.dst:
            b[_MEMORIES.index(o.memory)] += o.nbytes
        f, rate, dma_bytes = 0.0, "", 0
        read = write = save = reload = 0
        hw = tr = 0.0
        entry: _ComputeEntry | _DmaEntry | _SyncEntry | _HeldEntry
        if ins.opcode in SYNC_OPS:
            entry = _SyncEntry(sid)
        elif ins.engine is Engine.DMA and ins.attr(SPILL_ATTR) == "resident":
            b = [0, 0, 0]
            entry = _HeldEntry(sid)
        elif ins.engine is Engine.DMA:
            d = costs.dma_cost(ins, self.dma)
            b[0] = dma_bytes = d.hbm_bytes  # = the HBM operands' bytes, except indirect DMAs
            read, write = costs.dma_hbm_split(ins, d)
            spill = ins.attr(SPILL_ATTR)
            save = write if spill == "save" else 0
            reload = read if spill == "reload" else 0
            pipe_s = max(d.occupancy_s, d.hbm_s)
            entry = _DmaEntry(d.latency_s, pipe_s, d.data_s, ins.attr("queue"), sid)
        else:
            sec = costs.instruction_cycles(ins, self.spec) / self.clocks[ins.engine]
            f = costs.matmul_flops(ins) if ins.engine is Engine.TENSOR else 0.0
            rate = costs.matmul_rate_class(ins) if f else ""
            hw, tr = costs.hardware_flops(ins)
            c, eng = ins.core, ins.engine.value
            name = f"core{c}.{eng}" if self.multi else eng
            lat = self.spec.latency_cycles(ins.engine.value) / self.clocks[ins.engine]
            tid = self.tracks.get((c, ins.engine), name, SCHEDULE_WINDOW)
            state = uses_engine_state(ins.opcode, ins.attrs, tuple(o.role for o in ins.dst))
            entry = _ComputeEntry(sec, lat, sid, tid, state)
        self.stats.append(
            _EntryStats(ins.opcode, f, rate, *b, dma_bytes, read, write, save, reload, hw, tr)
        )
        self.uses.append(0)
        return entry


class _Totals(NamedTuple):
    flops: float
    flops_by_class: Counter[str]
    bytes_by_memory: Counter[str]
    dma_hbm_bytes: int
    op_counts: Counter[Op]
    hbm_read: int
    hbm_write: int
    spill_save: int
    spill_reload: int
    hw_flops: float
    transpose_flops: float


def _totals(c: _Costs) -> _Totals:
    """The stream's totals from the entries' statistics and use counts (in entry order, so
    deterministic)."""
    flops = 0.0
    by_class: Counter[str] = Counter()
    mem = [0, 0, 0]
    dma_bytes = 0
    op_counts: Counter[Op] = Counter()
    rw = [0, 0, 0, 0]
    hw = tr = 0.0
    for st, uses in zip(c.stats, c.uses, strict=True):
        op_counts[st.opcode] += uses
        if not uses:
            continue
        if st.flops:
            flops += st.flops * uses
            by_class[st.rate_class] += st.flops * uses
        mem[0] += st.hbm_bytes * uses
        mem[1] += st.sbuf_bytes * uses
        mem[2] += st.psum_bytes * uses
        dma_bytes += st.dma_hbm_bytes * uses
        rw[0] += st.hbm_read * uses
        rw[1] += st.hbm_write * uses
        rw[2] += st.spill_save * uses
        rw[3] += st.spill_reload * uses
        hw += st.hw_flops * uses
        tr += st.transpose_flops * uses
    by_memory: Counter[str] = Counter({m: mem[i] for i, m in enumerate(_MEMORIES) if mem[i]})
    return _Totals(flops, by_class, by_memory, dma_bytes, op_counts, *rw, hw, tr)


# ---- the scheduler ----------------------------------------------------------------------------


AFTER = "after"
"""The attribute of an instruction's explicit dependencies (``NkiInstruction.depends_on``):
the positions, in its core's record, of the instructions it starts after."""


def schedule(
    instrs: Sequence[Instruction],
    target: str | CoreSpec = "gen4",
    *,
    chip: ChipSpec | None = None,
    active_cores: int | None = None,
    dma_efficiency: float | None = None,
    launch_s: float | None = None,
) -> Profile:
    """Time a recorded instruction stream on ``target`` and return its ``Profile``.

    ``active_cores``: cores of the chip sharing its HBM bandwidth (default: the cores the
    stream uses). ``dma_efficiency``: scale the DMA engines' streaming rate (default 1.0, the
    documents' figures; ``trnsim.core.calibration.TOOLCHAINS`` holds fitted values).
    ``launch_s``: the fixed time a launch adds to the stream, as ``nki.benchmark`` measures
    it (default ``trnsim.core.calibration.LAUNCH_OVERHEAD_S``; 0 for the stream alone).
    """
    # The stream holds millions of small objects; the cyclic GC would re-walk them all while the
    # scheduler allocates its lists (10x slower). Nothing here makes cycles.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _schedule(instrs, target, chip, active_cores, dma_efficiency, launch_s)
    finally:
        if enabled:
            gc.enable()


class _Timeline(NamedTuple):
    """Per instruction (index = position in the stream): start, end, the instruction whose end
    bound its start (-1: none) and its track; plus the DMA transfers' spans and the last
    instruction to end."""

    start: list[float]
    end: list[float]
    pred: list[int]
    track: list[int]
    dma_spans: list[tuple[float, float]]
    last_idx: int


REORDER = True
"""Order each single-core stream by ``compiler_order`` before timing it (False: program
order, the model before session 8; kept for comparisons and tests)."""


def _unpermute(t: _Timeline, order: list[int]) -> _Timeline:
    """``t`` (timed on ``instrs`` in ``order``) indexed by position in ``instrs``."""
    n = len(order)
    start, end, pred, track = [0.0] * n, [0.0] * n, [-1] * n, [0] * n
    for k, i in enumerate(order):
        start[i] = t.start[k]
        end[i] = t.end[k]
        p = t.pred[k]
        pred[i] = order[p] if p >= 0 else -1
        track[i] = t.track[k]
    last = order[t.last_idx] if t.last_idx >= 0 else -1
    return _Timeline(start, end, pred, track, t.dma_spans, last)


def _schedule(
    instrs: Sequence[Instruction],
    target: str | CoreSpec,
    chip: ChipSpec | None,
    active_cores: int | None,
    dma_efficiency: float | None,
    launch_s: float | None,
) -> Profile:
    spec = target if isinstance(target, CoreSpec) else core(target)
    instrs = list(instrs)
    used_cores = set(map(_CORE_OF, instrs))
    active = active_cores or max(1, len(used_cores))
    dma = DmaModel.for_core(spec, chip, active, dma_efficiency)
    tracks = _Tracks()
    multi = len(used_cores) > 1
    cost = _Costs(spec, dma, tracks, multi=multi)
    meet = _rendezvous(instrs) if multi else None
    regions = _Regions()
    order = None if multi or not REORDER else compiler_order(instrs, regions, cost, ORDER_WINDOW)
    if order is None:
        timeline = _run(instrs, regions, cost, tracks, dma.queues, multi=multi, meet=meet)
    else:
        t = _run([instrs[i] for i in order], regions, cost, tracks, dma.queues, multi=multi)
        timeline = _unpermute(t, order)
    sched = Schedule(instrs, timeline.start, timeline.end, timeline.track, tracks.names)
    if launch_s is None:
        from trnsim.core.calibration import LAUNCH_OVERHEAD_S

        launch_s = LAUNCH_OVERHEAD_S
    totals = _totals(cost)
    reordered = order is not None
    return _profile(
        spec, dma, sched, timeline, totals, active, used_cores, tracks, launch_s, reordered
    )


# ---- the compiler's instruction order ---------------------------------------------------------

ORDER_WINDOW = 8
"""How many of an engine's next instructions (in program order) the compiler's instruction
scheduler chooses among (``compiler_order``). FITTED (no document gives the compiler's
window): the whole calibration (``trnsim calibrate``) at 8 gives MAPE 14.70 %, at 32 14.98 %
(Autocomp attention/3-5 run ahead of their measurements as the window grows); at 2 the SDK
fused_mamba rows keep most of their waits (v3 seq 2048 +28.8 % against +15.4 % at 4 and 8).
benchmarks/RESULTS.md, "Session 8, lead"."""
ORDER_READERS = 16
"""Readers of a region remembered one by one (beyond, a writer that waited for them stands in
for them: bookkeeping, bounds the dependency edges)."""
ORDER_EDGE_BUDGET = 32
"""Dependency edges per instruction beyond which ``compiler_order`` keeps program order
(bookkeeping: bounds the pre-pass's memory and time on pathological streams)."""


def compiler_order(
    instrs: list[Instruction], regions: _Regions, cost: _Costs, window: int = ORDER_WINDOW
) -> list[int] | None:
    """The order in which the compiler's instruction scheduler issues ``instrs`` (one core's
    stream): a list scheduler over the stream's dependencies (read-after-write with the
    producer's latency, write-after-read, write-after-write, from the same regions ``_run``
    reads), each engine taking, among the next ``window`` of its own instructions whose inputs
    are ready, the first in program order, else the one ready first. DMA transfers and
    resident loads keep their program order (one lane, each issued after the one before it,
    overlapping); an instruction that uses engine state keeps its place on its engine; a
    barrier keeps its place in the stream. The costs are ``_run``'s own entries, without the
    DMA bandwidth (the pre-pass only orders; ``_run`` times the new order).

    Returns the permutation (positions in ``instrs``), or None where it would not change
    anything or cannot apply (explicit dependencies; too many dependency edges).

    Why: the Neuron compiler orders each engine's instructions from the dependencies and
    the engines run in order, so a dependent instruction's wait (the static instruction
    latency) is filled with independent work when there is some (the SDK's fused_mamba
    tutorial profiles: VectorE 99.63 % active on a body whose every instruction depends on
    the one before, ``general/nki/img/mamba_v2.png``); ``_run``'s back-filling alone only
    fills a gap with an instruction that fits it whole."""
    n = len(instrs)
    if n < 3:
        return None
    by_id, new_info = regions.by_id, regions.info
    entries, new_entry = cost.entries, cost.entry
    attr_ids = cost.attr_ids
    lane = [0] * n  # -1: the DMA lane; -2: a barrier; else the engine's track id
    dur = [0.0] * n
    lat = [0.0] * n
    fixed = [False] * n  # keeps its place on its engine (uses engine state)
    succs: list[list[int] | None] = [None] * n  # j: read after write; ~j: the others
    indeg = [0] * n  # dependencies within the instruction's segment (between barriers)
    last_writer: dict[int, int] = {}
    readers: dict[int, list[int]] = {}
    after_aids = cost.after_aids
    barriers: list[int] = []
    seg0 = 0
    budget = ORDER_EDGE_BUDGET * n
    edges = 0
    for idx, (opcode, engine, dst, src, attrs, _, _, c) in enumerate(instrs):
        try:
            aid = attr_ids[id(attrs)]
        except KeyError:
            aid = cost.attrs_id(attrs)
        if aid in after_aids:
            return None
        key = [opcode, engine, aid, c]
        p: dict[int, bool] = {}
        src_ids = []
        for o in src:
            try:
                rid, sig, overlapping = by_id[id(o)]
            except KeyError:
                rid, sig, overlapping = new_info(o)
            src_ids.append(rid)
            key.append(sig)
            for q in overlapping:
                w = last_writer.get(q)
                if w is not None:
                    p[w] = True
        dst_ids = []
        for o in dst:
            try:
                rid, sig, overlapping = by_id[id(o)]
            except KeyError:
                rid, sig, overlapping = new_info(o)
            dst_ids.append(rid)
            key.append(sig)
            for q in overlapping:
                w = last_writer.get(q)
                if w is not None:
                    p.setdefault(w, False)
                rs = readers.get(q)
                if rs:
                    for r in rs:
                        p.setdefault(r, False)
                    if q == rid:  # a later writer of q waits for this one (write after write)
                        del readers[q]
                    elif len(rs) > ORDER_READERS:
                        # later writers of q wait for this one instead (it waits for them
                        # all): conservative (may order two writers that need not be)
                        readers[q] = [idx]
        key = tuple(key)
        try:
            entry = entries[key]
        except KeyError:
            entry = new_entry(key, instrs[idx])
        kind = type(entry)
        if kind is _AutoEntry:
            entry = min(entry.options, key=attrgetter("seconds"))
            kind = _ComputeEntry
        if kind is _ComputeEntry:
            lane[idx] = entry.track
            dur[idx] = entry.seconds
            lat[idx] = entry.latency_s
            fixed[idx] = entry.in_order
        elif kind is _DmaEntry:
            lane[idx] = -1
            dur[idx] = entry.latency_s + entry.data_s
        elif kind is _HeldEntry:
            lane[idx] = -1
        else:  # a barrier: a segment of its own; nothing after it depends on one before it
            lane[idx] = -2
            barriers.append(idx)
            seg0 = idx + 1
            p = {}
        k = 0
        for w, raw in p.items():
            if seg0 <= w < idx:
                sw = succs[w]
                if sw is None:
                    succs[w] = [idx if raw else ~idx]
                else:
                    sw.append(idx if raw else ~idx)
                k += 1
        if k:
            indeg[idx] = k
            edges += k
            if edges > budget:
                return None
        for rid in src_ids:
            rs = readers.get(rid)
            if rs is None:
                readers[rid] = [idx]
            elif rs[-1] != idx:
                rs.append(idx)
        for rid in dst_ids:
            last_writer[rid] = idx
            readers.pop(rid, None)
    del last_writer, readers

    order: list[int] = []
    state = _ListState(n)
    lo = 0
    for b in [*barriers, n]:
        if b > lo:
            order.extend(_list_order(lo, b, lane, dur, lat, fixed, succs, indeg, state, window))
        if b < n:
            order.append(b)
        lo = b + 1
    if all(i == k for i, k in enumerate(order)):
        return None
    return order


class _ListState:
    """``_list_order``'s per-instruction lists (indexed by position in the stream), allocated
    once for all segments."""

    __slots__ = ("done", "in_window", "ready_at", "start")

    def __init__(self, n: int) -> None:
        self.ready_at = [0.0] * n
        self.start = [0.0] * n
        self.in_window = [False] * n
        self.done = [False] * n


def _list_order(lo, hi, lane, dur, lat, fixed, succs, indeg, state, window):  # type: ignore[no-untyped-def]
    """``compiler_order`` on positions ``lo`` .. ``hi - 1`` (no barrier among them): a list
    schedule with each lane's (engine's) free time, its window's members whose inputs are
    scheduled, by ready time and (once ready by the lane's free time) by program order, and a
    queue of lane events by time; returns the positions by start time (ties: program order),
    a topological order of the dependencies."""
    from heapq import heappop, heappush

    lane_ids: dict[int, int] = {}
    queues: list[list[int]] = []
    my_lane = {}
    for i in range(lo, hi):
        ln = lane_ids.get(lane[i])
        if ln is None:
            ln = lane_ids[lane[i]] = len(queues)
            queues.append([])
        queues[ln].append(i)
    for ln, q in enumerate(queues):
        for i in q:
            my_lane[i] = ln
    n_lanes = len(queues)
    dma_lane = lane_ids.get(-1, -1)
    ready_at, start, in_window, done = state.ready_at, state.start, state.in_window, state.done
    head = [0] * n_lanes
    wend = [0] * n_lanes
    free = [0.0] * n_lanes
    width = [1 if ln == dma_lane else window for ln in range(n_lanes)]
    by_time: list[list[tuple[float, int]]] = [[] for _ in range(n_lanes)]
    by_pos: list[list[int]] = [[] for _ in range(n_lanes)]
    version = [0] * n_lanes
    events: list[tuple[float, int, int]] = []

    def widen(ln: int) -> None:
        q = queues[ln]
        h = head[ln]
        nq = len(q)
        while h < nq and done[q[h]]:
            h += 1
        head[ln] = h
        e = wend[ln]
        if e < h:
            e = h
        stop = h + width[ln]
        while e < nq and e < stop:
            i = q[e]
            if fixed[i] and e > h:
                break
            in_window[i] = True
            if not indeg[i]:
                heappush(by_time[ln], (ready_at[i], i))
            e += 1
            if fixed[i]:
                break
        wend[ln] = e

    def post(ln: int) -> None:
        bt, bp, f = by_time[ln], by_pos[ln], free[ln]
        while bt and bt[0][0] <= f:
            heappush(bp, heappop(bt)[1])
        version[ln] += 1
        if bp:
            heappush(events, (f, ln, version[ln]))
        elif bt:
            heappush(events, (bt[0][0], ln, version[ln]))

    for ln in range(n_lanes):
        widen(ln)
        post(ln)
    scheduled = 0
    while events:
        t, ln, v = heappop(events)
        if v != version[ln]:
            continue
        bp = by_pos[ln]
        i = heappop(bp) if bp else heappop(by_time[ln])[1]
        s = ready_at[i]
        if t > s:
            s = t
        start[i] = s
        e = s + dur[i]
        done[i] = True
        scheduled += 1
        free[ln] = s if ln == dma_lane else e
        succ = succs[i]
        if succ is not None:
            after = e + lat[i]
            for j in succ:
                r = after
                if j < 0:
                    j, r = ~j, e
                if r > ready_at[j]:
                    ready_at[j] = r
                indeg[j] -= 1
                if not indeg[j] and in_window[j]:
                    lj = my_lane[j]
                    heappush(by_time[lj], (ready_at[j], j))
                    if lj != ln:
                        post(lj)
        widen(ln)
        post(ln)
    if scheduled != hi - lo:
        raise AssertionError("compiler_order: a dependency cycle")  # pragma: no cover
    return sorted(range(lo, hi), key=lambda i: (start[i], i))


RENDEZVOUS_OPS = frozenset({Op.CORE_BARRIER, Op.SENDRECV}) | costs.COLLECTIVE_OPS
"""Instructions every core of a launch issues together (barriers, send/receive, collectives):
the k-th of one core meets the k-th of each other core. (Not the register instructions, which
share the sync engine but belong to one core.)"""


class _Meet(NamedTuple):
    """The cores' streams in the order they are scheduled, and per rendezvous instruction its
    group (the k-th rendezvous instruction of every core)."""

    order: list[int]
    group: dict[int, list[int]]


def _rendezvous(instrs: list[Instruction]) -> _Meet | None:
    """Interleave a multi-core stream so that every core's work before its k-th rendezvous
    instruction is scheduled before the k-th rendezvous instructions themselves, which then
    start together: none starts before every member's inputs are ready (a collective cannot
    run before all the ranks have issued it; a barrier waits for all). None when the cores
    issue different numbers of them (no matching is possible; scheduled as before)."""
    segments: dict[int, list[list[int]]] = {}
    meets: dict[int, list[int]] = {}
    for i, ins in enumerate(instrs):
        segs = segments.setdefault(ins.core, [[]])
        if ins.opcode in RENDEZVOUS_OPS:
            meets.setdefault(ins.core, []).append(i)
            segs.append([])
        else:
            segs[-1].append(i)
    counts = {len(meets.get(c, ())) for c in segments}
    if len(counts) != 1 or counts == {0}:
        return None
    cores = sorted(segments)
    order: list[int] = []
    group: dict[int, list[int]] = {}
    for k in range(counts.pop() + 1):
        for c in cores:
            order.extend(segments[c][k])
        if k < len(meets[cores[0]]):
            members = [meets[c][k] for c in cores]
            order.extend(members)
            for m in members:
                group[m] = members
    return _Meet(order, group)


def _inputs_ready(ins: Instruction, regions: _Regions) -> tuple[float, int]:
    """When ``ins``'s operands are ready (the operand part of ``_run``'s loop, for the other
    members of a rendezvous): (time, the instruction that bound it)."""
    ready, dep = 0.0, -1
    for o, ends, who in (
        *((o, regions.write_end, regions.writer) for o in ins.src),
        *((o, regions.access_end, regions.accessor) for o in ins.dst),
    ):
        try:
            _, _, overlapping = regions.by_id[id(o)]
        except KeyError:
            _, _, overlapping = regions.info(o)
        for q in overlapping:
            if ends[q] > ready:
                ready, dep = ends[q], who[q]
    return ready, dep


def _run(
    instrs: list[Instruction],
    regions: _Regions,
    cost: _Costs,
    tracks: _Tracks,
    n_queues: int,
    multi: bool,
    meet: _Meet | None = None,
) -> _Timeline:
    """List-schedule ``instrs`` in program order (several cores' streams interleaved at their
    rendezvous instructions, ``meet``). Per instruction: its operands' regions give
    the time its inputs are ready (the dependencies), its shape's cost entry its engine and
    duration; it starts when both its inputs and its track (and, for a transfer, the DMA
    pipes) are free; then it publishes its end on the regions it read and wrote."""
    n = len(instrs)
    start = [0.0] * n
    end = [0.0] * n
    pred = [-1] * n
    track_of = [0] * n
    dma_spans: list[tuple[float, float]] = []
    pipes_of: dict[int, _DmaPipes] = {}
    last_end, last_idx = 0.0, -1
    # hot loop: the parts' lists and lookups bound to locals
    write_end, writer = regions.write_end, regions.writer
    access_end, accessor = regions.access_end, regions.accessor
    # (subscripts in try blocks, not dict.get calls: a miss is rare, and try costs nothing)
    by_id, new_info = regions.by_id, regions.info
    entries, new_entry = cost.entries, cost.entry
    attr_ids, uses = cost.attr_ids, cost.uses
    free, last, busy, count, cals = (
        tracks.free,
        tracks.last,
        tracks.busy,
        tracks.count,
        tracks.cals,
    )
    pipes_core, pipes = -1, _DmaPipes()  # the last core's DMA pipes (looked up when it changes)
    after_aids = cost.after_aids
    core_start: dict[int, int] = {}  # each core's first index in the stream (with AFTER only)
    stream = enumerate(instrs) if meet is None else ((i, instrs[i]) for i in meet.order)
    met: dict[int, tuple[float, int]] = {}  # a rendezvous group's start bound (by its first)
    for idx, (opcode, engine, dst, src, attrs, _, _, c) in stream:
        # ---- operands -> regions and the time the inputs are ready; the shape's cost entry ---
        try:
            aid = attr_ids[id(attrs)]
        except KeyError:
            aid = cost.attrs_id(attrs)
        key = [opcode, engine, aid, c]
        ready, dep = 0.0, -1
        src_ids = []
        for o in src:
            try:
                rid, sig, overlapping = by_id[id(o)]
            except KeyError:
                rid, sig, overlapping = new_info(o)
            src_ids.append(rid)
            key.append(sig)
            for q in overlapping:  # read after write
                if write_end[q] > ready:
                    ready, dep = write_end[q], writer[q]
        dst_ids = []
        for o in dst:
            try:
                rid, sig, overlapping = by_id[id(o)]
            except KeyError:
                rid, sig, overlapping = new_info(o)
            dst_ids.append(rid)
            key.append(sig)
            for q in overlapping:  # write after read or write
                if access_end[q] > ready:
                    ready, dep = access_end[q], accessor[q]
        if meet is not None and idx in meet.group:  # starts with the other cores' members
            members = meet.group[idx]
            bound = met.get(members[0])
            if bound is None:
                bound = met[members[0]] = max(_inputs_ready(instrs[m], regions) for m in members)
            if bound[0] > ready:
                ready, dep = bound
        if aid in after_aids:  # explicit dependencies (NkiInstruction.depends_on)
            if not core_start:
                for i, ins in enumerate(instrs):
                    core_start.setdefault(ins.core, i)
            base = core_start[c]
            for p in dict(attrs)[AFTER]:
                if end[base + p] > ready:
                    ready, dep = end[base + p], base + p
        key = tuple(key)
        try:
            entry = entries[key]
        except KeyError:
            entry = new_entry(key, instrs[idx])
        kind = type(entry)
        if kind is _AutoEntry:  # the engine that finishes it first (ties: the first listed)
            best, best_end = None, 0.0
            for opt in entry.options:
                done = cals[opt.track].reserve_probe(ready, opt.seconds) + opt.seconds
                if best is None or done < best_end:
                    best, best_end = opt, done
            entry, kind = best, _ComputeEntry
        uses[entry.stats] += 1
        # ---- issue on its track -------------------------------------------------------------
        avail = 0.0  # after the end: until a dependent instruction may read its results
        if kind is _ComputeEntry:
            tid = entry.track
            cal = cals[tid]
            if entry.in_order and cal.end > ready:  # after everything booked on its engine
                ready, dep = cal.end, last[tid]
            t0, owner = cal.reserve(ready, entry.seconds, idx)
            if owner >= 0:
                dep = owner
            t1 = t0 + entry.seconds
            avail = entry.latency_s
        elif kind is _DmaEntry:
            if c != pipes_core:
                pipes = pipes_of.get(c)
                if pipes is None:
                    pipes = pipes_of[c] = _DmaPipes()
                pipes_core = c
            queue = entry.queue
            if queue is None:
                queue = pipes.next_queue % n_queues
                pipes.next_queue += 1
            else:
                queue %= n_queues
            tid = pipes.queue_track.get(queue)
            if tid is None:
                name = f"core{c}.dma.q{queue}" if multi else f"dma.q{queue}"
                tid = pipes.queue_track[queue] = tracks.get((c, "dma", queue), name)
            # the latency overlaps the queue's previous transfer (descriptors are prefetched);
            # the data phase follows it in queue order and books the bandwidth calendar
            t0, t_data = ready, ready + entry.latency_s
            if free[tid] > t_data:
                t_data, dep = free[tid], last[tid]
                t0 = t_data - entry.latency_s
            slot, done, owner = pipes.calendar.fill(t_data, entry.pipe_s, idx)
            if owner >= 0:
                dep = owner
            t1 = max(done, slot + entry.data_s)
            dma_spans.append((slot, t1))
            pipes.since_prune += 1
            if pipes.since_prune >= PRUNE_EVERY:
                pipes.since_prune = 0
                if len(pipes.queue_track) >= n_queues:  # no new queue can start earlier
                    pipes.calendar.forget_before(min(free[q] for q in pipes.queue_track.values()))
        elif kind is _HeldEntry:  # already resident: done when its inputs are
            tid = tracks.get((c, "sync"), f"core{c}.sync" if multi else "sync")
            t0 = t1 = ready
        else:  # a barrier: waits for every earlier instruction, every track waits for it
            tid = tracks.get((c, "sync"), f"core{c}.sync" if multi else "sync")
            if last_end > ready:
                ready, dep = last_end, last_idx
            t0 = t1 = ready
            tracks.barrier(t1, idx)
        start[idx] = t0
        end[idx] = t1
        pred[idx] = dep
        track_of[idx] = tid
        if t1 >= free[tid]:
            free[tid] = t1
            last[tid] = idx
        busy[tid] += t1 - t0
        count[tid] += 1
        if t1 >= last_end:
            last_end, last_idx = t1, idx
        # ---- publish its end on the regions it read and wrote -------------------------------
        for rid in src_ids:
            if t1 > access_end[rid]:
                access_end[rid] = t1
                accessor[rid] = idx
        for rid in dst_ids:
            write_end[rid] = t1 + avail
            writer[rid] = idx
            if t1 >= access_end[rid]:
                access_end[rid] = t1
                accessor[rid] = idx
    return _Timeline(start, end, pred, track_of, dma_spans, last_idx)


def _profile(
    spec: CoreSpec,
    dma: DmaModel,
    sched: Schedule,
    timeline: _Timeline,
    totals: _Totals,
    active: int,
    used_cores: set[int],
    tracks: _Tracks,
    launch_s: float,
    reordered: bool = False,
) -> Profile:
    body = max(sched.end, default=0.0)
    total = body + launch_s if body else 0.0
    names, busy, count = tracks.names, tracks.busy, tracks.count
    tracks = tuple(
        TrackStats(nm, busy[i], busy[i] / total if total else 0.0, count[i])
        for i, nm in enumerate(names)
    )
    # Per-engine view: compute engines as they are; DMA as the union of its queues' activity.
    eng_busy: dict[str, float] = {}
    eng_count: Counter[str] = Counter()
    for i, nm in enumerate(names):
        base = "dma" if ".dma." in nm or nm.startswith("dma.") else nm.rsplit(".", 1)[-1]
        if base != "dma":
            eng_busy[base] = eng_busy.get(base, 0.0) + busy[i]
        eng_count[base] += count[i]
    if eng_count["dma"]:
        eng_busy["dma"] = _union_length(timeline.dma_spans)
    cores = max(1, len(used_cores))
    order = ["tensor", "vector", "scalar", "gpsimd", "dma", "sync"]
    engines = tuple(
        TrackStats(
            e,
            eng_busy.get(e, 0.0),
            eng_busy.get(e, 0.0) / total / cores if total else 0.0,
            eng_count[e],
        )
        for e in order
        if e in eng_count or e in ("tensor", "vector", "scalar", "gpsimd")
    )
    flops, flops_by_class, bytes_mem = totals.flops, totals.flops_by_class, totals.bytes_by_memory
    peak_dtype = flops_by_class.most_common(1)[0][0] if flops_by_class else "bf16"
    peak = spec.tensor.peak_flops(peak_dtype) * cores
    achieved = flops / total if total else 0.0
    dma_bw = min(dma.hbm_share, dma.core_bw) * cores
    counts = {op.value: k for op, k in totals.op_counts.items() if k}
    d = spec.dma
    assumptions = (
        f"costs: trnsim.core.costs rules for {spec.name} (NKI cost guidance, nki-notes 4.4); "
        f"a dependent instruction waits {_latencies(spec)} engine cycles more "
        "(the static instruction overhead: perf guide, arch guide)",
        f"DMA: {d.engines} engines x {d.engine_bw / 1e9:.0f} GB/s (DMA bandwidth guide) "
        f"x efficiency {dma.efficiency:.2f}, {d.descriptor_s * 1e9:.1f} ns per descriptor "
        f"(row), {d.fixed_latency_s * 1e6:.1f} us latency; ready transfers back-fill idle "
        "bandwidth",
        f"HBM share {dma.hbm_share / 1e9:.0f} GB/s per core ({active} active core(s) on the chip)",
        f"launch overhead {launch_s * 1e6:.1f} us (trnsim.core.calibration.LAUNCH_OVERHEAD_S)",
        "dependencies from bounding regions (may serialise more than hardware semaphores)",
        "instruction order: "
        + (
            f"the compiler's, from the dependencies (a window of {ORDER_WINDOW} per engine, "
            "fitted: timing.compiler_order)"
            if reordered
            else "program order (already the compiler's, or explicit dependencies, several "
            "cores, or more dependency edges than timing.ORDER_EDGE_BUDGET)"
        ),
    )
    return Profile(
        target=spec.name,
        total_s=total,
        tracks=tracks,
        engines=engines,
        flops=flops,
        flops_per_s=achieved,
        peak_flops=peak,
        peak_dtype=peak_dtype,
        mfu=achieved / peak if peak else 0.0,
        bytes_by_memory=tuple((m, bytes_mem[m]) for m in ("hbm", "sbuf", "psum") if m in bytes_mem),
        dma_bw=dma_bw,
        mbu=(totals.dma_hbm_bytes / total) / dma_bw if total and dma_bw else 0.0,
        instruction_counts=tuple(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))),
        critical_path=_critical_path(sched, timeline.pred, timeline.last_idx, total, launch_s),
        assumptions=assumptions,
        launch_s=launch_s if body else 0.0,
        hbm_read_bytes=totals.hbm_read,
        hbm_write_bytes=totals.hbm_write,
        spill_save_bytes=totals.spill_save,
        spill_reload_bytes=totals.spill_reload,
        hardware_flops=totals.hw_flops,
        transpose_flops=totals.transpose_flops,
        schedule=sched,
    )


def _latencies(spec: CoreSpec) -> str:
    """The dependent-instruction latency as the assumptions line states it: the core's figure,
    with each engine that has its own named (``200`` or ``200 (vector 100)``)."""
    own = [
        f"{e} {spec.latency_cycles(e)}"
        for e in ("vector", "scalar", "gpsimd")
        if spec.latency_cycles(e) != spec.static_latency_cycles
    ]
    return f"{spec.static_latency_cycles}" + (f" ({', '.join(own)})" if own else "")


def _union_length(intervals) -> float:  # type: ignore[no-untyped-def]
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s  # type: ignore[operator]
            cur_s, cur_e = s, e
        elif e > cur_e:
            cur_e = e
    if cur_e is not None:
        total += cur_e - cur_s  # type: ignore[operator]
    return total


def _critical_path(
    sched: Schedule, pred: list[int], last: int, total: float, launch_s: float = 0.0
) -> tuple[Contributor, ...]:
    """Walk back from the last instruction along the binding constraints; each instruction on
    the path is charged the time it added (its end minus its predecessor's end); the launch
    overhead is one more contributor (opcode ``launch``)."""
    groups: dict[tuple, list[float]] = {}
    end, instrs = sched.end, sched.instructions
    i = last
    while i >= 0:
        p = pred[i]
        added = end[i] - (end[p] if p >= 0 else 0.0)
        key = _SITE(instrs[i])
        g = groups.get(key)
        if g is None:
            g = groups[key] = [0.0, 0]
        if added > 0.0:
            g[0] += added
        g[1] += 1
        i = p
    if launch_s > 0.0 and last >= 0:
        groups[("launch", "runtime", "", 0)] = [launch_s, 1]
    ranked = sorted(groups.items(), key=lambda kv: -kv[1][0])[:CRITICAL_PATH_TOP]
    out = []
    for (op, eng, file, line), (sec, n) in ranked:
        loc = f"{file.replace(chr(92), '/').rsplit('/', 1)[-1]}:{line}" if file else ""
        out.append(
            Contributor(
                getattr(op, "value", op),
                getattr(eng, "value", eng),
                loc,
                sec,
                sec / total if total else 0.0,
                int(n),
            )
        )
    return tuple(out)
