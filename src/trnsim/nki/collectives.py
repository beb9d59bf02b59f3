"""``nki.collectives``: collective communication between the cores of a launch, inside kernels.

In trnsim a rank is a program of the launch (``kernel[2](...)``: ranks 0 and 1, the two
NeuronCores of an LNC=2 logical core). Each call is checked and recorded on every rank (one
DMA-queue instruction per src/dst pair, costed by ``trnsim.core.costs.collective_cost``), then
the ranks exchange their sources through the launch (as ``nki.isa.sendrecv`` does) and each
writes what it receives: ``all_reduce``, ``all_gather``, ``reduce_scatter``, ``all_to_all``,
``collective_permute``; the values are ``trnsim.core.semantics``' functions of the same names.
Every rank of the launch must take part (the replica groups cover every program) and call the
collectives in the same order. ``all_gather_v``, ``all_to_all_v`` and the ``*_implicit`` ring
permutes (multi-device ring channels) are refused with a ``not-implemented`` error.
Source: SDK ``nki/api/nki/collectives/__init__.py`` (docstrings).
"""

from __future__ import annotations

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


def rank_id(name: str | None = None) -> int:
    """This program's rank (its program id in the launch)."""
    return current().program_id


def _group(rg: Any, prog: Program) -> tuple[int, ...]:
    """The sub-group of ``rg`` this program belongs to (checked against the launch)."""
    if not isinstance(rg, ReplicaGroup):
        raise broken("replica-group-type", f"replica_group must be a ReplicaGroup, got {rg!r}")
    n = prog.launch.lnc
    ranks = sorted(r for g in rg.groups for r in g)
    if ranks != list(range(n)):
        raise broken(
            "replica-group-cover",
            f"replica groups {rg.groups} must cover the launch's ranks {list(range(n))} "
            f"exactly once (a kernel[{n}] launch; each rank must take part)",
        )
    return next(tuple(int(r) for r in g) for g in rg.groups if prog.program_id in g)


def _pairs(srcs: Any, dsts: Any, name: str) -> list[tuple[View, View]]:
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
    if len(srcs) > 1 and any(v.memory != "hbm" for v in srcs + dsts):
        raise broken(
            "collective-coalesced-hbm",
            f"{name} with {len(srcs)} tensors (coalesced) needs every tensor in HBM",
        )
    return list(zip(srcs, dsts, strict=True))


def _exchange(prog: Program, payload: Any, group: tuple[int, ...]) -> dict[int, Any]:
    """Post this rank's payload, wait for every rank, and return the group's payloads."""
    launch, me = prog.launch, prog.program_id
    with launch.lock:
        seq = launch.mailbox.get(("cc-seq", me), 0)
        launch.mailbox[("cc-seq", me)] = seq + 1
        launch.mailbox[("cc", seq, me)] = payload
    launch.barrier.wait()
    with launch.lock:
        missing = [r for r in group if ("cc", seq, r) not in launch.mailbox]
        if missing:
            raise broken("collective-join", f"ranks {missing} did not join collective #{seq}")
        got = {r: launch.mailbox[("cc", seq, r)] for r in group}
    launch.barrier.wait()  # everyone has read: clear this rank's slot
    with launch.lock:
        del launch.mailbox[("cc", seq, me)]
    return got


def _collective(
    op: Op,
    srcs: Any,
    dsts: Any,
    group: tuple[int, ...],
    attrs: dict[str, Any],
    raw: bool,
    combine: Any,
) -> None:
    prog = current()
    pairs = _pairs(srcs, dsts, op.value)
    for s, d in pairs:
        _run(op, {DST: d}, {SRC: s}, {"ranks": group, **attrs})
    core = prog.core
    core.sync()  # the data work up to here (trnsim.core.accel)
    payload = None
    if core.functional:
        payload = [np.array(core.read_raw(s) if raw else core.read(s)) for s, _ in pairs]
    got = _exchange(prog, payload, group)
    if payload is None:
        return
    for k, (_, d) in enumerate(pairs):
        values = combine({r: got[r][k] for r in group}, group.index(prog.program_id))
        if values is None:
            continue
        values = np.asarray(values).reshape(d.shape)
        core.write_raw(d, values) if raw else core.write(d, values)


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
    n = prog.launch.lnc
    for what, ranks in (("source", [s for s, _ in pairs]), ("target", [t for _, t in pairs])):
        bad = [r for r in ranks if r not in range(n)]
        if bad or len(set(ranks)) != len(ranks):
            raise broken(
                "collective-permute-ranks",
                f"collective_permute {what} ranks {ranks}: each must be a distinct rank of "
                f"this kernel[{n}] launch",
            )
    if len(srcs if isinstance(srcs, list | tuple) else [srcs]) != 1:
        raise broken(
            "collective-permute-one", "collective_permute takes exactly one src and one dst tensor"
        )
    group = tuple(range(n))
    me = prog.program_id
    _collective(
        Op.COLLECTIVE_PERMUTE,
        srcs,
        dsts,
        group,
        _opt({"pairs": pairs}, priority),
        True,
        lambda parts, i: S.collective_permute(parts, me, pairs),
    )


def _opt(attrs: dict[str, Any], priority: Any) -> dict[str, Any]:
    if priority is not None:
        attrs["priority"] = _enum_name(priority)  # not modelled: the checker refuses it
    return attrs


def _not_emulated(fn_name: str):
    def fn(*args: Any, **kwargs: Any) -> Any:
        raise broken(
            "collectives-missing",
            f"nki.collectives.{fn_name} is not emulated by trnsim (supported: all_reduce, "
            "all_gather, reduce_scatter, all_to_all, collective_permute, rank_id)",
        )

    fn.__name__ = fn_name
    return fn


all_gather_v = _not_emulated("all_gather_v")
all_to_all_v = _not_emulated("all_to_all_v")
collective_permute_implicit = _not_emulated("collective_permute_implicit")
collective_permute_implicit_reduce = _not_emulated("collective_permute_implicit_reduce")
collective_permute_implicit_current_processing_rank_id = _not_emulated(
    "collective_permute_implicit_current_processing_rank_id"
)
