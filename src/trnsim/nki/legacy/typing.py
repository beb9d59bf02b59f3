"""``neuronxcc.nki.typing``: ``tensor[shape, dtype]`` placeholders (and annotations).

``nt.tensor[[8192, 4096], nl.bfloat16]`` stands for an input of that shape and dtype: passed to
a kernel, it becomes an HBM tensor of that shape with no data (sentinel-filled in a
functional run), which is what ``nki.benchmark`` / ``nki.profile`` need (timing only). Source:
SDK 2.26 ``examples/prof-kernel-benchmark.py`` and ``api/nki/__init__.py`` (``tensor``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trnsim.core.location import fail


@dataclass(frozen=True)
class TensorPlaceholder:
    """An input given by shape and dtype only."""

    shape: tuple[int, ...]
    dtype: Any

    @property
    def ndim(self) -> int:
        return len(self.shape)


class _TensorType:
    """``tensor[shape, dtype]`` -> a ``TensorPlaceholder``; ``tensor`` alone: an annotation."""

    def __getitem__(self, key: Any) -> TensorPlaceholder:
        if not isinstance(key, tuple) or len(key) != 2:
            raise fail("placeholder", f"nt.tensor[shape, dtype] takes two items, got {key!r}")
        shape, dtype = key
        shape = tuple(shape) if isinstance(shape, list | tuple) else (shape,)
        if not all(isinstance(s, int) and s >= 1 for s in shape):
            raise fail("placeholder", f"nt.tensor shape {list(shape)} must be positive ints")
        return TensorPlaceholder(tuple(int(s) for s in shape), dtype)

    def __repr__(self) -> str:
        return "neuronxcc.nki.typing.tensor"


tensor = _TensorType()
scalar = int


class _MutableTensorType:
    """``nt.mutable_tensor``: the annotation marking a kernel parameter the kernel may write
    (SDK 2.26 ``api/nki.errors.rst``, "Cannot update immutable parameter"). An annotation only:
    trnsim writes kernel arguments back in any case (``nki.run``)."""

    def __getitem__(self, key: Any) -> Any:
        return key

    def __repr__(self) -> str:
        return "neuronxcc.nki.typing.mutable_tensor"


mutable_tensor = _MutableTensorType()
