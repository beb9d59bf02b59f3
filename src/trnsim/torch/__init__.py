"""trnsim.torch: PyTorch on a software Trainium3 (the optional extra ``trnsim[torch]``).

Placeholder; the public names are loaded lazily (see ``_LAZY``).
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY: dict[str, str] = {}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"trnsim.torch.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'trnsim.torch' has no attribute {name!r}")
