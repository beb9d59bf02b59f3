"""An explicit registry of named presets: refuses duplicates; a bad name lists the valid ones."""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from typing import Generic, TypeVar

from trnsim.errors import DuplicateNameError, UnknownNameError

T = TypeVar("T")


class Registry(Generic[T]):
    """Name -> preset, plus aliases. Names are case-insensitive; ``_`` and ``-`` are the same."""

    def __init__(self, what: str):
        self.what = what
        self._items: dict[str, T] = {}
        self._aliases: dict[str, str] = {}

    @staticmethod
    def _key(name: str) -> str:
        return name.strip().lower().replace("_", "-")

    def register(self, name: str, item: T, aliases: tuple[str, ...] = ()) -> T:
        key = self._key(name)
        for k in (key, *map(self._key, aliases)):
            if k in self._items or k in self._aliases:
                raise DuplicateNameError(f"{self.what} {k!r} is already registered")
        self._items[key] = item
        for alias in aliases:
            self._aliases[self._key(alias)] = key
        return item

    def get(self, name: str) -> T:
        key = self._key(name)
        key = self._aliases.get(key, key)
        if key in self._items:
            return self._items[key]
        close = difflib.get_close_matches(key, [*self._items, *self._aliases], n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise UnknownNameError(
            f"unknown {self.what} {name!r}{hint}; valid: {', '.join(self.names())}"
        )

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        key = self._key(name)
        return key in self._items or key in self._aliases

    def names(self) -> list[str]:
        return list(self._items)

    def aliases_of(self, name: str) -> list[str]:
        key = self._key(name)
        return [a for a, target in self._aliases.items() if target == key]

    def __iter__(self) -> Iterator[tuple[str, T]]:
        return iter(self._items.items())

    def __len__(self) -> int:
        return len(self._items)
