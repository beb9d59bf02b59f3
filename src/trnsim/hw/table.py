"""``Table``: an immutable, hashable str -> number mapping for per-dtype figures.

Specs are frozen dataclasses used as cache keys, so their per-dtype figures (peak FLOP/s by
dtype, moving free-size limits by dtype) cannot be plain dicts.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from trnsim.errors import UnknownNameError


class Table(Mapping[str, float]):
    """A read-only mapping with value equality and a hash; a missing key lists the keys."""

    __slots__ = ("_items", "_what")

    def __init__(self, items: Mapping[str, float] | None = None, what: str = "entry", **kw: float):
        merged = dict(items or {}, **kw)
        self._items: tuple[tuple[str, float], ...] = tuple(sorted(merged.items()))
        self._what = what

    def __getitem__(self, key: str) -> float:
        for k, v in self._items:
            if k == key:
                return v
        valid = ", ".join(k for k, _ in self._items) or "(none)"
        raise UnknownNameError(f"no {self._what} for {key!r}; valid: {valid}")

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Table):
            return self._items == other._items
        if isinstance(other, Mapping):
            return dict(self._items) == dict(other)
        return NotImplemented

    def __repr__(self) -> str:
        return f"Table({dict(self._items)!r})"
