"""``nki.typing``: annotation helpers (``nki.typing.tensor[...]``); annotations only, they
change nothing at run time."""

from __future__ import annotations


class _TypingTensor:
    """``nki.typing.tensor[shape]`` / ``tensor[dtype, shape]``: returns its subscript."""

    def __getitem__(self, item: object) -> object:
        return item


tensor = _TypingTensor()
