"""The NKI memory buffers (``nl.sbuf``, ``nl.psum``, ``nl.shared_hbm``, ``nl.private_hbm``,
``nl.hbm``): one object each, so ``t.buffer == nl.sbuf`` holds for an SBUF tensor.

Source: SDK ``nki/api/nki/language/__init__.py`` (``buffer``: ``sbuf``, ``psum``,
``private_hbm``, ``shared_hbm``; ``hbm`` is an alias of ``private_hbm``).
"""

from __future__ import annotations

from trnsim.core.memory import HBM, PSUM, SBUF


class Buffer:
    """One NKI buffer: its name and the core memory it lives in. Compared by identity."""

    __slots__ = ("memory", "name")

    def __init__(self, name: str, memory: str) -> None:
        self.name, self.memory = name, memory

    def __repr__(self) -> str:
        return f"nl.{self.name}"


sbuf = Buffer("sbuf", SBUF)
psum = Buffer("psum", PSUM)
shared_hbm = Buffer("shared_hbm", HBM)
private_hbm = Buffer("private_hbm", HBM)
hbm = private_hbm

OF_MEMORY = {SBUF: sbuf, PSUM: psum, HBM: shared_hbm}
"""The buffer ``t.buffer`` reports for a tensor in each memory. trnsim has one HBM address
space shared by the cores of a launch, so every HBM tensor reports ``shared_hbm``."""
