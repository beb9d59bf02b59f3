"""``install()``: make ``import nki``, ``nki.language`` and ``nki.isa`` resolve to trnsim.

After ``trnsim.nki.install()`` a kernel file written for real hardware (``import nki``,
``import nki.language as nl``, ``import nki.isa as nisa``) runs unmodified on the emulator.
A legacy ``neuronxcc.nki`` front end can be installed the same way later (a second mapping
onto its own modules over the same core).
"""

from __future__ import annotations

import importlib.abc
import sys
from typing import Any

from trnsim.errors import TrnsimError

NEW_API = {
    "nki": "trnsim.nki",
    "nki.language": "trnsim.nki.language",
    "nki.isa": "trnsim.nki.isa",
    "nki.isa.constants": "trnsim.nki.isa_constants",
    "nki.typing": "trnsim.nki.typing",
    "nki.collectives": "trnsim.nki.collectives",
}


class UnsupportedApiError(TrnsimError, ModuleNotFoundError):
    """An import of an ``nki`` module trnsim does not emulate (the message lists what is)."""


class _Unsupported(importlib.abc.MetaPathFinder):
    """Any other ``nki.*`` import: a trnsim error saying what is emulated."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname.startswith("nki.") and fullname not in NEW_API:
            raise UnsupportedApiError(
                f"trnsim does not emulate {fullname!r}; it emulates "
                + ", ".join(NEW_API)
                + " (the NKI 0.6 API); the legacy neuronxcc.nki API is a separate front end",
                name=fullname,
            )
        return None


_FINDER = _Unsupported()


def install(force: bool = False) -> None:
    """Register trnsim's modules under the ``nki`` names (idempotent).

    Refuses to shadow a real, different ``nki`` package already imported unless ``force``.
    """
    import importlib

    existing = sys.modules.get("nki")
    if existing is not None and not getattr(existing, "__trnsim__", False) and not force:
        raise ImportError(
            "a real 'nki' package is already imported; call trnsim.nki.install(force=True) "
            "to replace it in this process"
        )
    for alias, target in NEW_API.items():
        sys.modules[alias] = importlib.import_module(target)
    # submodules as attributes: ``from nki.isa import constants``, ``nki.typing.tensor``
    sys.modules["nki.isa"].constants = sys.modules["nki.isa.constants"]  # type: ignore[attr-defined]
    for sub in ("typing", "collectives"):
        setattr(sys.modules["nki"], sub, sys.modules[f"nki.{sub}"])
    if _FINDER not in sys.meta_path:
        sys.meta_path.append(_FINDER)
    importlib.import_module("trnsim.nki.legacy").install(force)  # neuronxcc.nki (legacy API)


def uninstall() -> None:
    for alias in NEW_API:
        mod = sys.modules.get(alias)
        if mod is not None and (
            getattr(mod, "__trnsim__", False) or mod.__name__.startswith("trnsim.")
        ):
            del sys.modules[alias]
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
