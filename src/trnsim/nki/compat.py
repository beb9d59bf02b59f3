"""``install()``: make ``import nki``, ``nki.language`` and ``nki.isa`` resolve to trnsim.

After ``trnsim.nki.install()`` a kernel file written for real hardware (``import nki``,
``import nki.language as nl``, ``import nki.isa as nisa``) runs unmodified on the emulator.
A legacy ``neuronxcc.nki`` front end can be installed the same way later (a second mapping
onto its own modules over the same core).
"""

from __future__ import annotations

import sys
import types

NEW_API = {
    "nki": "trnsim.nki",
    "nki.language": "trnsim.nki.language",
    "nki.isa": "trnsim.nki.isa",
}


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
    typing_mod = types.ModuleType("nki.typing")
    typing_mod.tensor = _TypingTensor()  # type: ignore[attr-defined]
    sys.modules["nki.typing"] = typing_mod
    importlib.import_module("trnsim.nki.legacy").install(force)  # neuronxcc.nki (legacy API)


class _TypingTensor:
    """``nki.typing.tensor[...]`` annotations: accepted and ignored."""

    def __getitem__(self, item: object) -> object:
        return item


def uninstall() -> None:
    for alias in (*NEW_API, "nki.typing"):
        mod = sys.modules.get(alias)
        if mod is not None and (
            alias == "nki.typing"
            or getattr(mod, "__trnsim__", False)
            or mod.__name__.startswith("trnsim.")
        ):
            del sys.modules[alias]
