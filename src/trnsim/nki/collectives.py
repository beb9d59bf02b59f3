"""``nki.collectives``: the NKI 0.6 collective-communication surface inside kernels.

``ReplicaGroup`` and ``rank_id`` work; the collective operations themselves (all_reduce,
all_gather, ...) are not emulated across cores yet and raise a ``not-implemented`` error
naming the call (issue 13, item 3). Source: SDK ``nki/api/nki/collectives/__init__.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trnsim.core.location import fail
from trnsim.nki.language import NKIObject


@dataclass
class ReplicaGroup(NKIObject):
    """A group of ranks taking part in a collective; sub-groups must not overlap."""

    groups: list[list[int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        seen: set[int] = set()
        for g in self.groups:
            for r in g:
                if r in seen:
                    raise fail("replica-group", f"rank {r} is in two sub-groups of {self.groups}")
                seen.add(r)


def rank_id() -> int:
    """This program's rank (its LNC program id in a single-chip emulation)."""
    from trnsim.nki.context import current

    return current().program_id


def _not_emulated(name: str):
    def fn(*args: Any, **kwargs: Any) -> Any:
        raise fail(
            "not-implemented",
            f"nki.collectives.{name} is not emulated by trnsim yet (collectives inside kernels "
            "wait for the instruction registry; trnsim collective times them outside kernels)",
        )

    fn.__name__ = name
    return fn


for _n in (
    "all_reduce",
    "all_gather",
    "all_gather_v",
    "reduce_scatter",
    "all_to_all",
    "all_to_all_v",
    "collective_permute",
    "collective_permute_implicit",
    "collective_permute_implicit_reduce",
    "collective_permute_implicit_current_processing_rank_id",
):
    globals()[_n] = _not_emulated(_n)
