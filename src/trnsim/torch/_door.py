"""The one door to PyTorch: the only module of trnsim that imports ``torch``.

``torch()`` imports it on first use and returns the module; without PyTorch it raises
``ExtraMissing`` naming the extra to install (STYLE 19, as pandas'
``import_optional_dependency``). Every other module of ``trnsim.torch`` that needs PyTorch
takes it from here (``torch = _door.torch()`` at its top), and ``trnsim.torch`` itself loads
those modules only when one of its names is used, so ``import trnsim`` and every verb that
does not use the PyTorch front end never pay torch's import time (seconds).
"""

from __future__ import annotations

from types import ModuleType

from trnsim.errors import UsageError

INSTALL = 'pip install "trnsim[torch]"  (or, in a checkout: pip install -e ".[torch]")'
REQUIREMENT = "torch>=2.6,<2.14"


class ExtraMissing(UsageError, ImportError):
    """PyTorch is not installed: the message says how to install the ``torch`` extra."""


_torch: ModuleType | None = None


def torch() -> ModuleType:
    """The ``torch`` module, imported on first use; ``ExtraMissing`` without it."""
    global _torch
    if _torch is None:
        try:
            import torch as _t
        except ImportError as exc:
            raise ExtraMissing(
                f"trnsim.torch (the PyTorch front end) needs PyTorch ({REQUIREMENT}), which is "
                f"not installed: {INSTALL}"
            ) from exc
        _torch = _t
    return _torch


def submodule(name: str) -> ModuleType:
    """A submodule of PyTorch (``"torch.distributed.tensor"``), imported through the door."""
    torch()
    import importlib

    return importlib.import_module(name)


def available() -> bool:
    """True when PyTorch can be imported (imports it)."""
    try:
        torch()
    except ExtraMissing:
        return False
    return True
