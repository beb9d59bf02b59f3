"""``nki.collectives``: collective communication between the cores of a launch, inside kernels.

In trnsim a rank is a program of the launch (``kernel[2](...)``: ranks 0 and 1, the two
NeuronCores of an LNC=2 logical core), or, in a multi-rank run
(``trnsim.nki.simulate.run_ranks``), a launch of its own (its own core(s) and HBM; with LNC=2
core ``c`` of each rank exchanges with core ``c`` of the others, see ``_exchange``: trnsim's
reading, the docstrings do not say how the cores of a rank share a collective). Each call is
checked and recorded on every rank (one DMA-queue instruction per src/dst pair, costed by
``trnsim.core.costs.collective_cost``), then the ranks exchange their sources through the
launch or the run (as ``nki.isa.sendrecv`` does) and each writes what it receives:
``all_reduce``, ``all_gather``, ``reduce_scatter``, ``all_to_all``, ``collective_permute``,
``collective_permute_implicit`` (the ring: each rank receives its predecessor's source, per
channel; ``collective_permute_implicit_current_processing_rank_id`` says whose data a rank
holds after ``k`` ring steps); the values are ``trnsim.core.semantics``' functions of the same
names; ``collective_permute_implicit_reduce`` reduces the two sources with a ``dma_compute``
first. Every rank must take part (the replica groups cover every rank) and call the
collectives in the same order. ``all_gather_v`` and ``all_to_all_v`` take their counts and
displacements from a uint32 metadata tensor read when they run (``_collective_v``).
Source: SDK ``nki/api/nki/collectives/__init__.py`` (docstrings).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trnsim.core import semantics as S
from trnsim.core.argrules import broken
from trnsim.core.isa import Op
from trnsim.core.memory import View
from trnsim.core.spec import DST, SRC
from trnsim.nki.context import Program, current
from trnsim.nki.isa import _enum_name, _op, _run
from trnsim.nki.language import NKIObject


@dataclass
class ReplicaGroup(NKIObject):
    """The ranks taking part in a collective: a list of disjoint sub-groups (lists of ranks);
    each sub-group runs the collective among its members, in the order listed."""

    groups: list[list[int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        seen: set[int] = set()
        for g in self.groups:
            for r in g:
                if r in seen:
                    raise broken(
                        "replica-group-disjoint", f"rank {r} is in two sub-groups of {self.groups}"
                    )
                seen.add(r)


def _ranks(prog: Program) -> tuple[int, int, Any]:
    """(number of ranks, this program's rank, the hub the ranks exchange through: the launch,
    or the multi-rank run's ``World``)."""
    launch = prog.launch
    world = launch.world
    if world is None:
        return launch.lnc, prog.program_id, launch
    return world.ranks, launch.rank, world


def _where(n: int, prog: Program) -> str:
    if prog.launch.world is None:
        return f"a kernel[{n}] launch"
    return f"a run of {n} ranks"


def rank_id(name: str | None = None) -> int:
    """This program's rank (its program id in the launch, or its rank in a multi-rank run)."""
    return _ranks(current())[1]


def _group(rg: Any, prog: Program) -> tuple[int, ...]:
    """The sub-group of ``rg`` this program belongs to (checked against the launch)."""
    if not isinstance(rg, ReplicaGroup):
        raise broken("replica-group-type", f"replica_group must be a ReplicaGroup, got {rg!r}")
    n, me, _ = _ranks(prog)
    ranks = sorted(r for g in rg.groups for r in g)
    if ranks != list(range(n)):
        raise broken(
            "replica-group-cover",
            f"replica groups {rg.groups} must cover the launch's ranks {list(range(n))} "
            f"exactly once ({_where(n, prog)}; each rank must take part)",
        )
    return next(tuple(int(r) for r in g) for g in rg.groups if me in g)


def _pairs(srcs: Any, dsts: Any, name: str, channels: bool = False) -> list[tuple[View, View]]:
    srcs = list(srcs) if isinstance(srcs, list | tuple) else [srcs]
    dsts = list(dsts) if isinstance(dsts, list | tuple) else [dsts]
    if len(srcs) != len(dsts) or not srcs:
        raise broken(
            "collective-pairs", f"{name}: {len(srcs)} srcs and {len(dsts)} dsts; one dst per src"
        )
    for v in srcs + dsts:
        if not isinstance(v, View):
            raise broken(
                "collective-operand", f"{name} srcs/dsts must be tensors, got {type(v).__name__}"
            )
    if not channels and len(srcs) > 1 and any(v.memory != "hbm" for v in srcs + dsts):
        raise broken(
            "collective-coalesced-hbm",
            f"{name} with {len(srcs)} tensors (coalesced) needs every tensor in HBM",
        )
    return list(zip(srcs, dsts, strict=True))


def _exchange(prog: Program, payload: Any, group: tuple[int, ...]) -> dict[int, Any]:
    """Post this rank's payload, wait for every rank, and return the group's payloads.

    In a multi-rank run of LNC=2 launches every core of every rank waits (the run's barrier
    counts them all; ``_collective`` waits once more before reading the sources, so what both
    cores of a rank wrote to their shared HBM before the call is sent) and core ``c`` of a
    rank exchanges with core ``c`` of the others (each core sends its own SBUF; a shared-HBM
    operand is sent by both cores, the same values, and written twice with them)."""
    _, me, hub = _ranks(prog)
    core = prog.program_id if prog.launch.world is not None else 0
    return hub.exchange(me, core, payload, group)


def _collective(
    op: Op,
    srcs: Any,
    dsts: Any,
    group: tuple[int, ...],
    attrs: dict[str, Any],
    raw: bool,
    combine: Any,
    channels: bool = False,
) -> None:
    prog = current()
    pairs = _pairs(srcs, dsts, op.value, channels)
    for k, (s, d) in enumerate(pairs):
        extra = {"channel": k} if channels else {}
        _run(op, {DST: d}, {SRC: s}, {"ranks": group, **attrs, **extra})
    core = prog.core
    payload, got = _share(
        prog,
        lambda: [np.array(core.read_raw(s) if raw else core.read(s)) for s, _ in pairs],
        group,
    )
    if payload is None:
        return
    for k, (_, d) in enumerate(pairs):
        values = combine({r: got[r][k] for r in group}, group.index(_ranks(prog)[1]))
        if values is None:
            continue
        values = np.asarray(values).reshape(d.shape)
        core.write_raw(d, values) if raw else core.write(d, values)


def _share(
    prog: Program, read: Callable[[], Any], group: tuple[int, ...]
) -> tuple[Any, dict[int, Any]]:
    """This rank's payload (``read()``, in a functional run; else None) and the group's
    payloads. The data work issued so far is done first (``trnsim.core.accel``), and in an
    LNC=2 rank of a multi-rank run both cores wait for each other: they share the rank's HBM,
    so what both wrote before the call is what is sent."""
    prog.core.sync()
    world = prog.launch.world
    if world is not None and prog.launch.lnc > 1:
        world.barrier.wait()
    payload = read() if prog.core.functional else None
    return payload, _exchange(prog, payload, group)


def _reduce_op(op: Any) -> str:
    name = _op(op) or ""
    return {"max": "maximum", "min": "minimum"}.get(name, name)


def all_reduce(
    srcs: Any,
    dsts: Any,
    replica_group: ReplicaGroup,
    op: Any,
    priority: int | None = None,
    name: str | None = None,
) -> None:
    """Every rank of the group gets the element-wise ``op`` of the group's sources."""
    group = _group(replica_group, current())
    red = _reduce_op(op)
    attrs = _opt({"op": red}, priority)
    _collective(
        Op.ALL_REDUCE,
        srcs,
        dsts,
        group,
        attrs,
        False,
        lambda parts, i: S.all_reduce([parts[r] for r in group], i, red),
    )


def all_gather(
    srcs: Any,
    dsts: Any,
    replica_group: ReplicaGroup,
    collective_dim: int,
    priority: int | None = None,
    name: str | None = None,
) -> None:
    """Every rank gets the group's sources concatenated along ``collective_dim``."""
    group = _group(replica_group, current())
    dim = int(collective_dim)
    _collective(
        Op.ALL_GATHER,
        srcs,
        dsts,
        group,
        _opt({"collective_dim": dim}, priority),
        True,
        lambda parts, i: S.all_gather([parts[r] for r in group], i, dim),
    )


def reduce_scatter(
    srcs: Any,
    dsts: Any,
    replica_group: ReplicaGroup,
    collective_dim: int,
    op: Any,
    priority: int | None = None,
    name: str | None = None,
) -> None:
    """Rank ``i`` of the group gets chunk ``i`` of the element-wise ``op`` of the sources."""
    group = _group(replica_group, current())
    red, dim = _reduce_op(op), int(collective_dim)
    attrs = _opt({"op": red, "collective_dim": dim}, priority)
    _collective(
        Op.REDUCE_SCATTER,
        srcs,
        dsts,
        group,
        attrs,
        False,
        lambda parts, i: S.reduce_scatter([parts[r] for r in group], i, red, dim),
    )


def all_to_all(
    srcs: Any,
    dsts: Any,
    replica_group: ReplicaGroup,
    collective_dim: int,
    priority: int | None = None,
    name: str | None = None,
) -> None:
    """Rank ``i`` gets chunk ``i`` of every rank's source, concatenated in group order."""
    group = _group(replica_group, current())
    dim = int(collective_dim)
    _collective(
        Op.ALL_TO_ALL,
        srcs,
        dsts,
        group,
        _opt({"collective_dim": dim}, priority),
        True,
        lambda parts, i: S.all_to_all([parts[r] for r in group], i, dim),
    )


def collective_permute(
    srcs: Any,
    dsts: Any,
    source_target_pairs: Any,
    priority: int | None = None,
    name: str | None = None,
) -> None:
    """Each pair ``(source, target)`` sends the source rank's tensor to the target rank."""
    prog = current()
    pairs = tuple((int(s), int(t)) for s, t in source_target_pairs)
    n, me, _ = _ranks(prog)
    for what, ranks in (("source", [s for s, _ in pairs]), ("target", [t for _, t in pairs])):
        bad = [r for r in ranks if r not in range(n)]
        if bad or len(set(ranks)) != len(ranks):
            raise broken(
                "collective-permute-ranks",
                f"collective_permute {what} ranks {ranks}: each must be a distinct rank of "
                f"this {_where(n, prog)[2:]}",
            )
    if len(srcs if isinstance(srcs, list | tuple) else [srcs]) != 1:
        raise broken(
            "collective-permute-one", "collective_permute takes exactly one src and one dst tensor"
        )
    group = tuple(range(n))
    _collective(
        Op.COLLECTIVE_PERMUTE,
        srcs,
        dsts,
        group,
        _opt({"pairs": pairs}, priority),
        True,
        lambda parts, i: S.collective_permute(parts, me, pairs),
    )


def collective_permute_implicit(
    srcs_by_channel: Any,
    dsts_by_channel: Any,
    replica_group: ReplicaGroup,
    channel_ids: Any = (0,),
    priority: int | None = None,
    name: str | None = None,
) -> None:
    """The ring: on each channel, every rank of the group receives its predecessor's source
    (group order, wrapping). Per the docstring each channel holds exactly one src and one dst
    tensor, ``channel_ids`` are ``0, 1, ...`` and there are at most 4 channels."""
    group = _group(replica_group, current())
    srcs_by_channel, dsts_by_channel = list(srcs_by_channel), list(dsts_by_channel)
    ids = [int(c) for c in channel_ids]
    shape = [len(list(c)) for c in srcs_by_channel], [len(list(c)) for c in dsts_by_channel]
    if (
        not srcs_by_channel
        or len(srcs_by_channel) != len(dsts_by_channel)
        or any(k != 1 for k in shape[0] + shape[1])
        or ids != list(range(len(srcs_by_channel)))
        or len(ids) > MAX_RING_CHANNELS
    ):
        raise broken(
            "collective-pairs",
            f"collective_permute_implicit: tensors per channel {shape[0]} (srcs), {shape[1]} "
            f"(dsts), channel_ids {ids}; each channel takes exactly one src and one dst, "
            f"channel_ids must be 0, 1, ... (at most {MAX_RING_CHANNELS} channels)",
        )
    srcs = [next(iter(c)) for c in srcs_by_channel]
    dsts = [next(iter(c)) for c in dsts_by_channel]
    _collective(
        Op.COLLECTIVE_PERMUTE_IMPLICIT,
        srcs,
        dsts,
        group,
        _opt({}, priority),
        True,
        lambda parts, i: S.collective_permute_implicit([parts[r] for r in group], i),
        channels=True,
    )


MAX_RING_CHANNELS = 4
"""Channels of a ring permute: "The maximum number of channels is 4 for replica groups
containing all devices inside a node and 2 for other supported replica groups" (SDK
``nki/api/nki/collectives/__init__.py``, ``collective_permute_implicit``; trnsim checks the
larger bound, it does not model which devices share a node)."""


def collective_permute_implicit_current_processing_rank_id(
    iteration_id: Any, replica_group: ReplicaGroup, channel_id: int = 0, name: str | None = None
) -> Any:
    """A register holding the rank whose data this rank holds after ``iteration_id`` ring
    steps: its own at 0, then its predecessor's, and so on around the group (the docstring;
    every channel's ring runs the same way)."""
    from trnsim.nki.isa import VirtualRegister

    group = _group(replica_group, current())
    me = _ranks(current())[1]
    k = int(iteration_id)
    return VirtualRegister(S.ring_rank(group, group.index(me), k))


def _opt(attrs: dict[str, Any], priority: Any) -> dict[str, Any]:
    if priority is not None:
        attrs["priority"] = _enum_name(priority)  # not modelled: the checker refuses it
    return attrs


def _collective_v(
    op: Op,
    srcs: Any,
    dsts: Any,
    group: tuple[int, ...],
    metadata_tensor: Any,
    recv_counts_known: bool,
    has_rdispls: bool,
    priority: int | None,
) -> None:
    """``all_gather_v`` / ``all_to_all_v``: one flat HBM src and dst per rank; each rank's
    uint32 metadata (counts, displacements) is read when the call runs and sent with its data;
    row 2 gets the counts received (unless ``recv_counts_known``). Recorded with the whole dst
    as its message (the counts are data; ``costs.collective_cost``)."""
    prog = current()
    pairs = _pairs(srcs, dsts, op.value)
    if len(pairs) != 1:
        raise broken(
            "collective-pairs", f"{op.value}: {len(pairs)} tensors; exactly one src and one dst"
        )
    (s, d), meta = pairs[0], metadata_tensor
    if not isinstance(meta, View):
        raise broken(
            "collective-operand",
            f"{op.value} metadata_tensor must be a tensor, got {type(meta).__name__}",
        )
    attrs = {"ranks": group, "recv_counts_known": bool(recv_counts_known)}
    attrs["has_rdispls"] = bool(has_rdispls)
    _run(op, {DST: d}, {SRC: s, "metadata": meta}, _opt(attrs, priority))
    core = prog.core
    rows = 4 if has_rdispls else 3

    def read() -> tuple[np.ndarray, np.ndarray]:
        m = np.array(core.read_raw(meta)).reshape(rows, len(group)).astype(np.int64)
        return np.array(core.read_raw(s)).reshape(-1), m

    payload, got = _share(prog, read, group)
    if payload is None:
        return
    me = group.index(_ranks(prog)[1])
    flat = np.array(core.read_raw(d)).reshape(-1)
    parts = [got[r] for r in group]
    if op is Op.ALL_GATHER_V:
        writes, recv = S.all_gather_v(parts, me, flat.size)
    else:
        writes, recv = S.all_to_all_v(parts, me, flat.size, payload[1][3] if has_rdispls else None)
    for at, values in writes:
        flat[at : at + values.size] = values
    core.write_raw(d, flat.reshape(d.shape))
    if not recv_counts_known:
        m = np.array(core.read_raw(meta)).reshape(rows, len(group))
        m[2] = recv
        core.write_raw(meta, m.reshape(meta.shape))


def all_gather_v(
    srcs: Any,
    dsts: Any,
    replica_group: ReplicaGroup,
    metadata_tensor: Any,
    recv_counts_known: bool = False,
    has_rdispls: bool = False,
    priority: int | None = None,
    name: str | None = None,
) -> None:
    """Each rank broadcasts one chunk ``src[send_displ : send_displ + send_count]`` (its
    metadata rows 1 and 0, first column); the chunk from rank ``s`` lands in slot ``s`` of every
    rank's dst (``dst.size / n`` elements each). The docstring's current limitations are
    checked: ``has_rdispls=True`` is not supported, only LNC=2, 4 ranks per group."""
    prog = current()
    group = _group(replica_group, prog)
    lnc = prog.launch.lnc
    if has_rdispls or lnc != 2 or len(group) != 4:
        raise broken(
            "collective-v-limits",
            f"all_gather_v with has_rdispls={bool(has_rdispls)}, LNC={lnc}, a group of "
            f"{len(group)} ranks: the docstring's current limitations are has_rdispls=False, "
            "LNC=2 and exactly 4 ranks per group",
        )
    _collective_v(
        Op.ALL_GATHER_V, srcs, dsts, group, metadata_tensor, recv_counts_known, False, priority
    )


def all_to_all_v(
    srcs: Any,
    dsts: Any,
    replica_group: ReplicaGroup,
    metadata_tensor: Any,
    recv_counts_known: bool = False,
    has_rdispls: bool = False,
    priority: int | None = None,
    name: str | None = None,
) -> None:
    """Each rank sends ``src[send_displs[r] : send_displs[r] + send_counts[r]]`` (metadata
    rows 1 and 0, column ``r``) to rank ``r``, which writes it at its ``recv_displs[s]`` (row 3,
    with ``has_rdispls``) or at slot ``s`` (``dst.size / n`` elements each). The docstring's
    instance-type restrictions (NeuronSwitch, inter-node groups) are not modelled."""
    group = _group(replica_group, current())
    known, rdispls = recv_counts_known, has_rdispls
    _collective_v(Op.ALL_TO_ALL_V, srcs, dsts, group, metadata_tensor, known, rdispls, priority)


def collective_permute_implicit_reduce(
    srcs0_by_channel: Any,
    srcs1_by_channel: Any,
    dsts_by_channel: Any,
    replica_group: ReplicaGroup,
    op: Any,
    channel_ids: Any = (0,),
    priority: int | None = None,
    name: str | None = None,
) -> None:
    """The ring with a reduction: each rank reduces ``op(srcs0[i], srcs1[i])`` locally, sends
    the result to its successor and receives its predecessor's into ``dsts[i]`` (the docstring;
    ``op`` is ``nl.add``, ``nl.minimum`` or ``nl.maximum``). trnsim lowers it onto a
    ``dma_compute`` of the two sources (the DMA engines reduce in fp32, into a tensor of the
    destination's memory) followed by ``collective_permute_implicit`` of the result: the values
    are the docstring's; the timing charges the reduction as its own DMA (trnsim's choice: the
    docs do not say where the ring reduces)."""
    from trnsim.nki import isa as nisa
    from trnsim.nki import language as nl

    reduce_op = _op(op)
    if reduce_op not in ("add", "minimum", "maximum"):
        raise broken(
            "collective-op",
            f"collective_permute_implicit_reduce op {reduce_op!r}: the docstring allows add, "
            "minimum or maximum",
        )
    s0, s1, d = (
        list(list(c) for c in x) for x in (srcs0_by_channel, srcs1_by_channel, dsts_by_channel)
    )
    if not (len(s0) == len(s1) == len(d)) or any(len(c) != 1 for c in s0 + s1):
        raise broken(
            "collective-pairs",
            f"collective_permute_implicit_reduce: {len(s0)} / {len(s1)} / {len(d)} channels "
            "of srcs0 / srcs1 / dsts, each channel exactly one tensor per list",
        )
    reduced = []
    for (a,), (b,), dst in zip(s0, s1, d, strict=True):
        out = dst[0] if dst else a
        t = nl.ndarray(tuple(out.shape), out.dtype, buffer=_buffer_of(out))
        nisa.dma_compute(t, [a, b], reduce_op)
        reduced.append([t])
    collective_permute_implicit(reduced, d, replica_group, channel_ids, priority, name)


def _buffer_of(t: View) -> Any:
    from trnsim.nki import language as nl

    return nl.sbuf if t.memory == "sbuf" else nl.hbm
