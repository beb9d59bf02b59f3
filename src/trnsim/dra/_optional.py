"""The one door to the ``dra`` extra's libraries (cel-python and PyYAML).

Nothing else in trnsim imports ``celpy`` or ``yaml``: callers ask :func:`celpy` or :func:`yaml`
here, lazily, and a missing library is one clear error naming the extra to install (as pandas'
``import_optional_dependency`` does). ``import trnsim`` and ``import trnsim.dra`` never pay for
them.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from trnsim.errors import UsageError

INSTALL_HINT = 'pip install -e ".[dra]"  (or: pip install "trnsim[dra]")'

# module -> the PyPI distribution that provides it
_PROVIDERS = {"celpy": "cel-python", "yaml": "PyYAML"}


class MissingExtraError(UsageError):
    """A library of the ``dra`` extra is not installed (exit status 2)."""


def _load(module: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(
            f"Kubernetes DRA support needs the 'dra' extra ({_PROVIDERS[module]} is not "
            f"installed: {exc}); install it with: {INSTALL_HINT}"
        ) from None


def celpy() -> ModuleType:
    """The ``celpy`` package (cel-python), with its ``celtypes`` and ``evaluation`` loaded."""
    mod = _load("celpy")
    importlib.import_module("celpy.celtypes")
    importlib.import_module("celpy.evaluation")
    return mod


def yaml() -> ModuleType:
    """The ``yaml`` package (PyYAML)."""
    return _load("yaml")


def available() -> bool:
    """True when both libraries import."""
    try:
        celpy()
        yaml()
    except MissingExtraError:
        return False
    return True
