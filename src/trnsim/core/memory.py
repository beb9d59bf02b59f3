"""Byte-addressed memories of a NeuronCore and the strided views instructions read and write.

- ``OnChipMemory``: SBUF or PSUM, a ``partitions x bytes_per_partition`` uint8 array. An
  allocation is a rectangle (partition range x byte range). The allocator checks capacity,
  alignment (PSUM allocations start on a bank boundary) and overlap with live allocations;
  an explicit ``address=(partition, byte_offset)`` is honoured (and checked). Allocations are
  freed when the last view of them is garbage-collected (CPython reference counting makes
  this deterministic), which mirrors the liveness the NKI compiler computes.
- ``Hbm``: device memory shared by the cores of a chip (and the two cores of an LNC=2
  kernel); each allocation owns a uint8 buffer at a base address in one address space of
  ``capacity`` bytes.
- Fresh allocations are filled with a sentinel so reads of uninitialised memory are visible:
  NaN for floats (all-ones bytes, a NaN code in every float format trnsim has except fp4,
  which has no NaN) and all-ones bytes for integers (-1 / the max unsigned value).
- ``View``: a strided view of an allocation (offset, shape, strides in elements; for SBUF/PSUM
  dim 0 is the partition dim and its stride counts partitions). ``array()`` is a NumPy view
  that aliases the storage; ``operand()`` is the plain descriptor the instruction record keeps.
"""

from __future__ import annotations

import itertools
import sys
from bisect import bisect_left, insort
from math import prod
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from trnsim.core.argrules import broken
from trnsim.core.arraypool import ArrayPool
from trnsim.core.instruction import Operand
from trnsim.core.location import kernel_location
from trnsim.numerics import Format, get_format

SBUF, PSUM, HBM = "sbuf", "psum", "hbm"
SENTINEL_BYTE = 0xFF


class Allocation:
    """One live allocation: a rectangle of an on-chip memory, or a buffer in HBM."""

    __slots__ = (
        "__weakref__",
        "acc_pending",
        "buffer",
        "byte_offset",
        "core",
        "explicit",
        "first_use",
        "kind",
        "last_seq",
        "last_use",
        "live",
        "marks_version",
        "memory",
        "name",
        "nbytes",
        "partition_start",
        "partitions",
        "placed_at",
        "sharers",
        "user",
        "version",
        "writers",
    )

    def __init__(
        self,
        memory: OnChipMemory | Hbm,
        partition_start: int,
        partitions: int,
        byte_offset: int,
        nbytes: int,
        name: str,
        buffer: np.ndarray | None = None,
    ) -> None:
        self.memory = memory
        self.kind = memory.kind
        self.core = getattr(memory, "core", -1)
        self.partition_start = partition_start
        self.partitions = partitions
        self.byte_offset = byte_offset
        self.nbytes = nbytes  # per partition (on-chip) or total (HBM)
        self.name = name
        self.buffer = buffer
        self.live = True
        # Explicitly placed allocations (``address=``) that share addresses with others track
        # their uses in program order (``OnChipMemory.allocate``, ``_note_use``): where they
        # were placed, first and last used (location and sequence number), and the sharers.
        self.explicit = False
        self.placed_at: tuple[str, int] | None = None
        self.first_use: tuple[str, int] | None = None
        self.last_use: tuple[str, int] | None = None
        self.last_seq = -1
        self.sharers: list[Allocation] = []
        # A PSUM tensor placed over another's addresses: its first matmul write starts its own
        # accumulation group (``start_accumulation``), whatever marks the other left there.
        self.acc_pending = False
        # A front end's record of the tile these bytes hold (the legacy front end's allocator,
        # trnsim.nki.legacy.allocator, which moves a tile between allocations when it spills
        # and refills it: the tile's Storage then points at its new allocation)
        self.user: Any = None
        # Bumped by every write of the data (version) and of the PSUM accumulation marks
        # (marks_version) through the NeuronCore: keys of its caches of decoded tiles.
        self.version = 0
        # HBM bytes' last writer (epoch, core) in an LNC>1 launch (trnsim.core.races), or None
        self.writers: np.ndarray | None = None
        self.marks_version = 0

    def __repr__(self) -> str:
        return (
            f"Allocation({self.kind} {self.name!r} partitions {self.partition_start}.."
            f"{self.partition_start + self.partitions - 1}, bytes {self.byte_offset}.."
            f"{self.byte_offset + self.nbytes - 1})"
        )


SPARE_ARRAYS = ArrayPool(256 << 20)
"""Backing arrays of dropped SBUF/PSUM memories kept for the next core (``ArrayPool``). A run
fills its allocations with the sentinel, so a core built from a recycled array behaves
exactly as one built from a fresh one: no view reaches outside a live allocation, and every
allocation is filled when made."""


class OperandTable(dict):
    """A memory's record operands, one object per distinct value (``setdefault(op, op)``):
    equal operands of different views share it, so a record of 10^5 instructions keeps a few
    thousand ``Operand`` objects rather than one or two per instruction (issue 16)."""

    __slots__ = ()


class OnChipMemory:
    """SBUF or PSUM of one NeuronCore."""

    def __init__(
        self,
        kind: str,
        partitions: int,
        bytes_per_partition: int,
        *,
        core: int = 0,
        bank_bytes: int | None = None,
        generation_name: str = "",
    ) -> None:
        self.kind = kind
        self.core = core
        self.partitions = partitions
        self.bytes_per_partition = bytes_per_partition
        self.bank_bytes = bank_bytes
        self.generation_name = generation_name
        # False in a timing-only run: no data moves, so nothing can read the sentinel.
        self.fill_sentinel = True
        # Not filled here: ``allocate`` fills each new rectangle with the sentinel (and views
        # never reach outside live allocations), so untouched pages are never faulted in.
        self.data = SPARE_ARRAYS.take((partitions, bytes_per_partition), np.uint8)
        # PSUM only: 1 where the last writer was a matmul of an open accumulation group.
        self.acc = SPARE_ARRAYS.take(self.data.shape, np.uint8) if kind == PSUM else None
        self.live: list[Allocation] = []
        # the live allocations as sorted (start, end, seq, allocation) byte spans, kept up to
        # date once a front end asks for them (``sorted_spans``); None: not kept
        self.spans: list[tuple[int, int, int, Allocation]] | None = None
        self.operands = OperandTable()
        # an LNC>1 launch's write-write race check (trnsim.core.races.RaceCheck), or None
        self.race: Any = None

    def __del__(self) -> None:
        for name in ("data", "acc"):
            a = self.__dict__.pop(name, None)
            # only an array nothing else holds (a NumPy view would see the next core's data)
            if a is not None and sys.getrefcount(a) <= 2:
                SPARE_ARRAYS.give(a)

    # ---- allocation -----------------------------------------------------------------------

    def allocate(
        self,
        partitions: int,
        nbytes: int,
        *,
        align: int,
        name: str = "",
        address: tuple[int, int] | None = None,
        fill: bool = True,
        offset: int | None = None,
    ) -> Allocation:
        """A new rectangle, sentinel-filled unless ``fill`` is False (the caller fills it
        later with ``fill``) or the memory's ``fill_sentinel`` is off. ``offset``: a free byte
        offset the caller chose (by its own placement policy), from partition 0; an automatic
        placement all the same (not ``explicit``)."""
        unit = self.kind.upper()
        if partitions > self.partitions:
            raise broken(
                "partition-dim-alloc",
                f"{unit} tensor {name!r} has {partitions} partitions; "
                f"{self.generation_name} has {self.partitions}",
            )
        if nbytes > self.bytes_per_partition:
            raise broken(
                f"{self.kind}-capacity",
                f"{unit} allocation {name!r} of {_kib(nbytes)}/partition exceeds "
                f"{_kib(self.bytes_per_partition)} on {self.generation_name}",
            )
        if self.kind == PSUM:
            assert self.bank_bytes is not None
            align = max(align, self.bank_bytes)
        if address is not None:
            pstart, offset = int(address[0]), int(address[1])
            if self.kind == PSUM and offset % self.bank_bytes:  # type: ignore[operator]
                raise broken(
                    "psum-bank-alignment",
                    f"PSUM allocation {name!r} at byte {offset} does not start on a bank "
                    f"boundary (banks are {self.bank_bytes} bytes/partition)",
                )
            if offset % align:
                raise broken(
                    f"{self.kind}-alignment",
                    f"{unit} allocation {name!r} at byte {offset} is not aligned to {align} bytes",
                )
            if pstart < 0 or pstart + partitions > self.partitions:
                raise broken(
                    "partition-dim-address",
                    f"{unit} allocation {name!r} at partition {pstart} with {partitions} "
                    f"partitions runs past partition {self.partitions - 1}",
                )
            if offset < 0 or offset + nbytes > self.bytes_per_partition:
                raise broken(
                    f"{self.kind}-capacity-address",
                    f"{unit} allocation {name!r} at byte {offset} + {nbytes} bytes runs past "
                    f"{self.bytes_per_partition} bytes/partition on {self.generation_name}",
                )
            # Liveness is program order (first use to last use), not allocation or Python
            # references: tensors may share addresses as long as their uses do not interleave;
            # an interleaving use is the real overlap (``_note_use``).
            reused = [
                other
                for other in tuple(self.live)  # a snapshot: see _first_fit
                if _overlaps(other, pstart, partitions, offset, nbytes)
            ]
        elif offset is not None:
            pstart = 0
            reused = []
            if offset % align or not self.is_free(partitions, offset, nbytes):
                raise broken(
                    f"{self.kind}-capacity-full",
                    f"{unit} allocation {name!r} at byte {offset} ({_kib(nbytes)}/partition) "
                    "overlaps a live allocation",
                )
        else:
            pstart = 0
            reused = []
            offset = self._first_fit(pstart, partitions, nbytes, align)
            if offset is None:
                offset, reused = self._reuse_least_recent(partitions, nbytes, align)
            if offset is None:
                used = sum(a.nbytes for a in self.live if a.partition_start < partitions)
                raise broken(
                    f"{self.kind}-capacity-full",
                    f"{unit} allocation {name!r} of {_kib(nbytes)}/partition does not fit: "
                    f"{len(self.live)} live allocations use {_kib(used)} of "
                    f"{_kib(self.bytes_per_partition)}/partition on {self.generation_name}",
                )
        alloc = Allocation(self, pstart, partitions, offset, nbytes, name)
        if address is not None:
            alloc.explicit = True
        if reused:
            alloc.placed_at = kernel_location()
            alloc.acc_pending = self.kind == PSUM
            for other in reused:
                if not other.explicit and other.last_seq < 0 and other.version > 0:
                    # an untracked tensor already written: it was in use up to here
                    other.last_use, other.last_seq = alloc.placed_at, next(_USE_SEQ)
                other.sharers.append(alloc)
                alloc.sharers.append(other)
        self.live.append(alloc)
        if self.spans is not None:
            insort(self.spans, (offset, offset + nbytes, next(_SPAN_SEQ), alloc))
        if fill and self.fill_sentinel:
            self.fill(alloc)
        return alloc

    def sorted_spans(self) -> list[tuple[int, int, int, Allocation]]:
        """The live allocations as ``(start byte, end byte, sequence, allocation)``, sorted by
        start; kept up to date from the first call on (a front end's placement policy reads
        it at every allocation: ``trnsim.nki.legacy.allocator``). Do not modify."""
        if self.spans is None:
            self.spans = sorted(
                (a.byte_offset, a.byte_offset + a.nbytes, next(_SPAN_SEQ), a)
                for a in tuple(self.live)
            )
        return self.spans

    def fill(self, alloc: Allocation) -> None:
        """Write the sentinel over ``alloc`` (and clear its PSUM accumulation marks)."""
        rows = slice(alloc.partition_start, alloc.partition_start + alloc.partitions)
        cols = slice(alloc.byte_offset, alloc.byte_offset + alloc.nbytes)
        self.data[rows, cols] = SENTINEL_BYTE
        if self.acc is not None:
            self.acc[rows, cols] = 0

    def is_free(self, partitions: int, offset: int, nbytes: int) -> bool:
        """Whether bytes ``[offset, offset + nbytes)`` of partitions ``[0, partitions)`` are
        inside the memory and outside every live allocation."""
        if offset < 0 or offset + nbytes > self.bytes_per_partition:
            return False
        end = offset + nbytes
        for a in tuple(self.live):  # a snapshot (see _first_fit)
            if a.partition_start < partitions:
                start = a.byte_offset
                if start < end and offset < start + a.nbytes:
                    return False
        return True

    def _first_fit(self, pstart: int, partitions: int, nbytes: int, align: int) -> int | None:
        """The lowest ``align``-aligned byte offset where ``nbytes`` fit beside the live
        allocations sharing a partition with ``[pstart, pstart + partitions)``: one sweep over
        their byte spans sorted by start (spans of different partitions may overlap)."""
        pend = pstart + partitions
        spans = sorted(
            [
                (a.byte_offset, a.byte_offset + a.nbytes)
                # a snapshot (built without releasing the GIL): a free run by the cyclic GC on
                # another thread (deferred work) may remove an element, which must not make
                # the sweep skip a live neighbour
                for a in tuple(self.live)
                if a.partition_start < pend and pstart < a.partition_start + a.partitions
            ]
        )
        cursor = 0
        for start, end in spans:
            cursor = -(-cursor // align) * align
            if cursor + nbytes <= start:
                break  # fits in the gap before this span (later spans start later)
            if end > cursor:
                cursor = end
        cursor = -(-cursor // align) * align
        return None if cursor + nbytes > self.bytes_per_partition else cursor

    def _reuse_least_recent(
        self, partitions: int, nbytes: int, align: int
    ) -> tuple[int | None, list[Allocation]]:
        """The memory is full of live allocations (Python still references them). Liveness is
        program order, not references: place the new allocation over the least recently used
        ones (never used first), which become its address sharers; a later use of one of them
        after the new tensor's use is the real overlap (``_note_use``). Returns (offset, the
        allocations it overlaps), or (None, []) when it does not fit even so."""
        candidates = sorted(
            (a for a in tuple(self.live) if a.partition_start < partitions),
            key=lambda a: a.last_seq,
        )
        evicted: list[Allocation] = []
        offset = None
        for victim in candidates:
            self.live.remove(victim)
            evicted.append(victim)
            offset = self._first_fit(0, partitions, nbytes, align)
            if offset is not None:
                break
        reused = (
            [a for a in evicted if _overlaps(a, 0, partitions, offset, nbytes)]
            if (offset is not None)
            else []
        )
        self.live.extend(a for a in evicted if a not in reused)
        for a in reused:  # no longer blocking allocation; freed as usual when dropped
            a.live = False
        self.spans = None  # (rebuilt when next asked for)
        return offset, reused

    def free(self, alloc: Allocation) -> None:
        if alloc.live:
            alloc.live = False
            self.live.remove(alloc)
            spans = self.spans
            if spans is not None:
                i, n = bisect_left(spans, (alloc.byte_offset,)), len(spans)
                while i < n and spans[i][3] is not alloc:
                    i += 1
                if i < n:
                    del spans[i]
                else:  # (not where expected: rebuilt when next asked for)
                    self.spans = None

    def row_bytes(self) -> int:
        return self.bytes_per_partition


class Hbm:
    """Device HBM: one byte address space of ``capacity`` bytes, shared by the cores of a chip."""

    kind = HBM
    core = -1

    def __init__(self, capacity: int, name: str = "hbm") -> None:
        self.capacity = int(capacity)
        self.name = name
        self.live: list[Allocation] = []
        self.next_address = 0
        self.used = 0
        # False when no one can observe the data (a timing-only run kept for its record)
        self.fill_sentinel = True
        self.operands = OperandTable()

    def allocate(
        self, nbytes: int, *, align: int = 64, name: str = "", fill: bool = True
    ) -> Allocation:
        """A new buffer of ``nbytes``, sentinel-filled unless ``fill`` is False (the caller
        writes every byte) or the memory's ``fill_sentinel`` is off."""
        if self.used + nbytes > self.capacity:
            raise broken(
                "hbm-capacity",
                f"HBM allocation {name!r} of {nbytes} bytes exceeds the {self.capacity} bytes "
                f"of {self.name} ({self.used} in use)",
            )
        base = -(-self.next_address // align) * align
        self.next_address = base + max(nbytes, 1)
        self.used += nbytes
        buf = np.empty(max(nbytes, 1), dtype=np.uint8)
        if fill and self.fill_sentinel:
            buf.fill(SENTINEL_BYTE)
        alloc = Allocation(self, 0, 1, base, nbytes, name, buffer=buf)
        self.live.append(alloc)
        return alloc

    def free(self, alloc: Allocation) -> None:
        if alloc.live:
            alloc.live = False
            self.used -= alloc.nbytes
            self.live.remove(alloc)


def start_accumulation(alloc: Allocation) -> None:
    """Before a matmul writes PSUM tensor ``alloc``: if it shares addresses with another
    tensor and has not been written by a matmul yet, clear the accumulation marks over its
    rectangle. ``nc_matmul(accumulate=None)`` is inferred per tensor ("first write
    overwrites, subsequent writes accumulate", the ``nc_matmul`` docstring), so marks left
    by an earlier tensor at the same address (nki-library's attention_cte allocates one PSUM
    tile per query group, all at bank 0) must not make the new tensor's first write
    accumulate. Runs when the write executes, in program order."""
    if not alloc.acc_pending:
        return
    alloc.acc_pending = False
    mem = alloc.memory
    if isinstance(mem, OnChipMemory) and mem.acc is not None:
        rows = slice(alloc.partition_start, alloc.partition_start + alloc.partitions)
        mem.acc[rows, alloc.byte_offset : alloc.byte_offset + alloc.nbytes] = 0
        alloc.marks_version += 1


def _where(loc: tuple[str, int] | None, before: tuple[str, int] | None = None) -> str:
    """``file:line`` of a use; for an untracked earlier use, "before" the given place."""
    if loc is None:
        return "never" if before is None else f"before {_where(before)}"
    return f"{loc[0].replace(chr(92), '/').rsplit('/', 1)[-1]}:{loc[1]}"


_SPAN_SEQ = itertools.count()
"""Tie-breaker of equal spans in ``OnChipMemory.spans`` (allocations never compare)."""

_USE_SEQ = itertools.count()
_next_use = _USE_SEQ.__next__
"""Program order of the uses of address-sharing allocations (one counter: a run's cores
each check their own allocations, so the interleaving of two cores does not matter)."""


def _note_use(alloc: Allocation) -> None:
    """An instruction uses ``alloc``, which shares addresses with other allocations: refuse
    the use if a sharer was used since ``alloc``'s previous use (their lives interleave: the
    real overlap), else record it."""
    if alloc.last_seq >= 0:
        for other in alloc.sharers:
            if other.last_seq > alloc.last_seq:
                unit = alloc.kind.upper()
                raise broken(
                    "overlap",
                    f"{unit} tensor {alloc.name!r} (partitions {alloc.partition_start}.."
                    f"{alloc.partition_start + alloc.partitions - 1}, bytes {alloc.byte_offset}.."
                    f"{alloc.byte_offset + alloc.nbytes - 1}; last used at "
                    f"{_where(alloc.last_use, other.placed_at)}) is used again after {unit} tensor "
                    f"{other.name!r} (placed at {_where(other.placed_at)}) reused its addresses "
                    f"(first used at {_where(other.first_use)}, last at {_where(other.last_use)})",
                )
    here = kernel_location()
    if alloc.first_use is None:
        alloc.first_use = here
    alloc.last_use = here
    alloc.last_seq = _next_use()


def _overlaps(a: Allocation, pstart: int, partitions: int, offset: int, nbytes: int) -> bool:
    return (
        a.partition_start < pstart + partitions
        and pstart < a.partition_start + a.partitions
        and a.byte_offset < offset + nbytes
        and offset < a.byte_offset + a.nbytes
    )


def _kib(n: int) -> str:
    return f"{n / 1024:g} KiB"


class Storage:
    """Owner of one allocation; frees it when the last view referencing it goes away
    (``__del__``: deterministic under CPython reference counting, and cheaper per allocation
    than a ``weakref.finalize``)."""

    __slots__ = ("__weakref__", "alloc", "fmt", "shape")

    def __init__(self, alloc: Allocation, fmt: Format, shape: tuple[int, ...]) -> None:
        self.alloc = alloc
        self.fmt = fmt
        self.shape = shape

    def __del__(self) -> None:
        alloc = getattr(self, "alloc", None)  # None: made by copy or unpickling, owns nothing
        if alloc is not None:
            alloc.memory.free(alloc)


class DetachedStorage:
    """A Storage's stand-in for deferred data work (``trnsim.core.deferred``): the same
    allocation, but it never frees it, so work still queued does not keep a tensor alive
    longer than the kernel does (allocation and liveness stay those of the plain path)."""

    __slots__ = ("alloc", "fmt", "shape")

    def __init__(self, storage: Storage) -> None:
        self.alloc = storage.alloc
        self.fmt = storage.fmt
        self.shape = storage.shape


class View:
    """A strided view of a Storage. Offsets and strides count elements of ``fmt``.

    On SBUF/PSUM, dim 0 is the partition dim: ``p0`` is its first partition (relative to the
    allocation) and ``strides[0]`` its step in partitions; ``offset`` is the element offset
    within a partition. In HBM ``p0`` is 0 and ``offset`` is the flat element offset.

    ``inbounds`` is True once the view is known to lie inside its allocation (a fresh
    allocation, a passed ``check_bounds``, or a slice of such a view): instructions re-check
    only views without it. ``_operand`` caches the last ``described()`` result (views are
    immutable).
    """

    __slots__ = (
        "_operand",
        "dtype",
        "fmt",
        "inbounds",
        "offset",
        "p0",
        "shape",
        "storage",
        "strides",
    )

    def __init__(
        self,
        storage: Storage,
        shape: tuple[int, ...],
        strides: tuple[int, ...],
        offset: int = 0,
        p0: int = 0,
        fmt: Format | None = None,
        dtype: Any = None,
    ) -> None:
        self.storage = storage
        self.shape = tuple(int(s) for s in shape)
        self.strides = tuple(int(s) for s in strides)
        self.offset = int(offset)
        self.p0 = int(p0)
        self.fmt = fmt if fmt is not None else storage.fmt
        self.dtype = dtype if dtype is not None else user_dtype(self.fmt)
        self.inbounds = False
        self._operand: tuple[Operand, tuple, tuple, Allocation] | None = None

    def detached(self) -> View:
        """This view over a ``DetachedStorage`` (a plain ``View``; for deferred work)."""
        return View.trusted(
            DetachedStorage(self.storage),  # type: ignore[arg-type]
            self.shape,
            self.strides,
            self.offset,
            self.p0,
            self.fmt,
            self.dtype,
            self.inbounds,
        )

    @classmethod
    def trusted(
        cls,
        storage: Storage,
        shape: tuple[int, ...],
        strides: tuple[int, ...],
        offset: int,
        p0: int,
        fmt: Format,
        dtype: Any,
        inbounds: bool,
    ) -> Any:
        """Build a view from already-normalised parts (int tuples, a Format and its user
        dtype) without the constructor's conversions: the per-slice fast path."""
        v = object.__new__(cls)
        v.storage = storage
        v.shape = shape
        v.strides = strides
        v.offset = offset
        v.p0 = p0
        v.fmt = fmt
        v.dtype = dtype
        v.inbounds = inbounds
        v._operand = None
        return v

    # ---- facts ----------------------------------------------------------------------------

    @property
    def memory(self) -> str:
        return self.storage.alloc.kind

    @property
    def on_chip(self) -> bool:
        return self.storage.alloc.kind != HBM

    @property
    def itemsize(self) -> int:
        return self.fmt.dtype.itemsize

    @property
    def partitions(self) -> int:
        return self.shape[0] if self.shape else 1

    @property
    def free_size(self) -> int:
        return prod(self.shape[1:])

    @property
    def size(self) -> int:
        return prod(self.shape)

    def row_elems(self) -> int:
        """Elements of ``fmt`` in one partition row of the allocation."""
        return self.storage.alloc.nbytes // self.itemsize

    def check_bounds(self) -> None:
        """Raise an out-of-bounds KernelError if any element lies outside the allocation."""
        if self.inbounds:
            return
        if 0 in self.shape:
            self.inbounds = True
            return
        alloc = self.storage.alloc
        on_chip = alloc.kind != HBM
        lo = hi = self.offset
        dims = self.shape[1:] if on_chip else self.shape
        strides = self.strides[1:] if on_chip else self.strides
        for size, stride in zip(dims, strides, strict=True):
            span = (size - 1) * stride
            if span < 0:
                lo += span
            else:
                hi += span
        limit = alloc.nbytes // self.fmt.dtype.itemsize
        bad = lo < 0 or hi >= limit
        if on_chip and not bad and self.shape:
            plo = self.p0
            phi = self.p0 + (self.shape[0] - 1) * self.strides[0]
            bad = min(plo, phi) < 0 or max(plo, phi) >= alloc.partitions
            if bad:
                raise broken(
                    "view-partitions-oob",
                    f"{alloc.kind.upper()} tensor {alloc.name!r}: partitions {min(plo, phi)}.."
                    f"{max(plo, phi)} outside its {alloc.partitions} partitions",
                )
        if bad:
            raise broken(
                "view-oob",
                f"{alloc.kind.upper()} tensor {alloc.name!r}: elements {lo}..{hi} outside "
                f"0..{limit - 1} (shape {list(self.shape)}, strides {list(self.strides)}, "
                f"offset {self.offset})",
            )
        self.inbounds = True

    # ---- data -----------------------------------------------------------------------------

    def array(self) -> np.ndarray:
        """A NumPy view (storage dtype) aliasing the memory this view covers."""
        alloc = self.storage.alloc
        isz = self.itemsize
        dt = self.fmt.dtype
        if alloc.kind == HBM:
            assert alloc.buffer is not None
            base = alloc.buffer
            start = self.offset * isz
            strides = tuple(s * isz for s in self.strides)
        else:
            mem: OnChipMemory = alloc.memory  # type: ignore[assignment]
            row = mem.bytes_per_partition
            base = mem.data
            start = (alloc.partition_start + self.p0) * row + alloc.byte_offset + self.offset * isz
            strides = (self.strides[0] * row, *(s * isz for s in self.strides[1:]))
        return _strided(base, self.shape, dt, start, strides)

    def acc_array(self) -> np.ndarray:
        """PSUM only: the accumulation-state bytes of this view, one integer per element."""
        alloc = self.storage.alloc
        mem: OnChipMemory = alloc.memory  # type: ignore[assignment]
        assert mem.acc is not None
        isz = self.itemsize
        row = mem.bytes_per_partition
        start = (alloc.partition_start + self.p0) * row + alloc.byte_offset + self.offset * isz
        strides = (self.strides[0] * row, *(s * isz for s in self.strides[1:]))
        return _strided(mem.acc, self.shape, np.dtype(f"u{isz}"), start, strides)

    # ---- descriptor -----------------------------------------------------------------------

    def operand(self, role: str) -> Operand:
        """The record's descriptor of this view as operand ``role`` (cached per view)."""
        return self.described(role)[0]

    def described(self, role: str) -> tuple[Operand, tuple, tuple, Allocation]:
        """``(operand(role), signature, parts)``: the signature is the operand without its
        byte offset (what the rules may look at, see ``rules.Checker``), the parts are the
        operand without its role. Cached per view."""
        alloc = self.storage.alloc
        if alloc.explicit or alloc.sharers:
            _note_use(alloc)
        else:
            alloc.last_seq = _next_use()
        d = self._operand
        if d is not None and d[3] is alloc:  # (a relocated tile's storage has a new alloc)
            if d[0][0] == role:
                return d
            parts = d[2]  # the same view in another role
        else:
            fmt = self.fmt
            isz = fmt.dtype.itemsize
            pat = tuple(zip(self.strides, self.shape, strict=False))  # equal lengths
            if alloc.kind == HBM:
                kind, core, start = HBM, -1, 0
            else:
                kind, core, start = alloc.kind, alloc.core, alloc.partition_start + self.p0
            offset = alloc.byte_offset + self.offset * isz
            parts = (kind, fmt.name, isz, core, start, offset, pat[0] if pat else (1, 1), pat[1:])
        # tuple.__new__ skips the NamedTuple's Python-level __new__ (same object)
        op = tuple.__new__(Operand, (role, *parts))
        op = alloc.memory.operands.setdefault(op, op)
        d = self._operand = (op, (role, *parts[:5], *parts[6:]), parts, alloc)
        return d

    @property
    def partition_start(self) -> int:
        return self.storage.alloc.partition_start + self.p0

    def __repr__(self) -> str:
        return f"View({self.fmt.name}{list(self.shape)} in {self.storage.alloc!r})"


def _strided(
    base: np.ndarray, shape: tuple[int, ...], dtype: Any, start: int, strides: tuple[int, ...]
) -> np.ndarray:
    """A writeable strided view of the bytes of ``base`` (``np.ndarray`` over its buffer: much
    cheaper per call than ``as_strided``, and it carries ml_dtypes dtypes directly). Zero-size
    views and views whose extent reaches past the end of the buffer fall back to ``as_strided``
    on a slice (the caller has already checked the bounds of the allocation)."""
    try:
        return np.ndarray(shape, dtype=dtype, buffer=base, offset=start, strides=strides)
    except (TypeError, ValueError):
        raw = np.dtype(f"u{np.dtype(dtype).itemsize}")
        flat = base.reshape(-1)
        n = (flat.size - start) // raw.itemsize
        typed = flat[start : start + n * raw.itemsize].view(raw)
        return as_strided(typed, shape, strides, writeable=True).view(dtype)


def user_dtype(fmt: Format) -> Any:
    """The dtype a kernel sees: the NumPy dtype, or the Format for tf32 and packed x4 types."""
    if fmt.kind == "packed" or fmt.name == "tfloat32":
        return fmt
    return fmt.dtype


def format_of(dtype: Any) -> Format:
    """The numerics Format of a kernel-facing dtype (NumPy dtype, ml_dtypes type, Format, name)."""
    return get_format(dtype)
