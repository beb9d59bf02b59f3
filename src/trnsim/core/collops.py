"""The collective operations: canonical names, aliases, the algorithms that apply, and the
nccl-tests bus-bandwidth factors (``busbw = algbw x factor``: all-reduce 2(n-1)/n, all-gather /
reduce-scatter / all-to-all (n-1)/n, broadcast and permute 1; nccl-tests ``doc/PERFORMANCE.md``).

Defined here, in the lowest layer that needs them: a NeuronCore times an ``nki.collectives``
call with these factors (``trnsim.core.costs.collective_cost``), and the fabric's closed forms
and flow simulation use the same table (``trnsim.fabric.collectives`` re-exports it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from trnsim.errors import UnknownNameError

__all__ = ["OPS", "OpSpec", "canonical_op", "ring_fraction"]


@dataclass(frozen=True, slots=True)
class OpSpec:
    """A collective: canonical name, accepted aliases, applicable algorithms, busbw factor."""

    name: str
    aliases: tuple[str, ...]
    algos: tuple[str, ...]
    bus_factor: Callable[[int], float]


def ring_fraction(n: int) -> float:
    """(n-1)/n: the share of a buffer each rank sends or receives in a ring step sequence."""
    return (n - 1) / n


OPS: dict[str, OpSpec] = {
    op.name: op
    for op in (
        OpSpec(
            "all-reduce",
            ("allreduce", "all_reduce", "ar", "allr"),
            ("ring", "direct", "rdh", "tree", "hierarchical"),
            lambda n: 2 * ring_fraction(n),
        ),
        OpSpec(
            "all-gather",
            ("allgather", "all_gather", "ag", "allg"),
            ("ring", "direct", "rdh", "hierarchical"),
            ring_fraction,
        ),
        OpSpec(
            "reduce-scatter",
            ("reducescatter", "reduce_scatter", "rs", "redsct"),
            ("ring", "direct", "rdh", "hierarchical"),
            ring_fraction,
        ),
        OpSpec(
            "all-to-all",
            ("alltoall", "all_to_all", "a2a", "alltoallv", "all-to-all-v"),
            ("ring", "direct", "rdh", "hierarchical"),
            ring_fraction,
        ),
        OpSpec(
            "broadcast",
            ("bcast", "bc"),
            ("ring", "direct", "rdh", "tree", "hierarchical"),
            lambda n: 1.0,
        ),
        OpSpec(
            "permute",
            ("send-recv", "sendrecv", "send_recv", "p2p", "collective-permute"),
            ("direct",),
            lambda n: 1.0,
        ),
    )
}


def canonical_op(op: str) -> OpSpec:
    key = op.strip().lower().replace("_", "-")
    for spec in OPS.values():
        if key == spec.name or key in spec.aliases or key.replace("-", "") in spec.aliases:
            return spec
    valid = ", ".join(f"{s.name} ({', '.join(s.aliases[:2])})" for s in OPS.values())
    raise UnknownNameError(f"unknown collective op {op!r}; valid: {valid}")
