"""Where in the user's kernel an instruction was issued: the first stack frame outside trnsim."""

from __future__ import annotations

import os
import sys
import threading
import warnings

from trnsim.errors import KernelError

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../src/trnsim
_SKIP = (_PKG_DIR + os.sep, "<frozen ")
_KERNEL_FILES = (
    os.path.join(_PKG_DIR, "perf", "kernels") + os.sep,
    os.path.join(_PKG_DIR, "conformance", "drivers_sbuf.py"),
)
"""Kernel files shipped in the package (``trnsim.perf.tables``' kernel, the conformance
drivers that call library subkernels): their lines are the kernel's own, as for any kernel
file."""


class _Here(threading.local):
    where: tuple[str, int] | None = None


HERE = _Here()
"""Per thread: the (file, line) a deferred instruction was issued at, while it runs."""

_INSIDE: dict[str, bool] = {}
"""Per file name: whether its frames are skipped (trnsim's own code, frozen or importlib)."""


def _inside(filename: str) -> bool:
    inside = (
        filename.startswith(_SKIP) and not filename.startswith(_KERNEL_FILES)
    ) or "importlib" in filename
    _INSIDE[filename] = inside
    return inside


def kernel_location() -> tuple[str, int]:
    """(file, line) of the innermost frame outside the trnsim package (the kernel's own line).

    Captured eagerly for every instruction (a frame's line moves on), so the walk is kept
    cheap: one dictionary lookup per frame."""
    where = HERE.where
    if where is not None:
        return where
    frame = sys._getframe(1)
    known = _INSIDE.get
    while frame is not None:
        filename = frame.f_code.co_filename
        inside = known(filename)
        if inside is None:
            inside = _inside(filename)
        if not inside:
            return filename, frame.f_lineno
        frame = frame.f_back  # type: ignore[assignment]
    return "<unknown>", 0


def fail(rule: str, message: str) -> KernelError:
    """Build (not raise) a KernelError located at the kernel's line."""
    file, line = kernel_location()
    return KernelError(rule, message, file, line)


class KernelWarning(UserWarning):
    """A legal but suspicious kernel (e.g. accumulating into uninitialised PSUM)."""


def warn(rule: str, message: str) -> None:
    file, line = kernel_location()
    warnings.warn_explicit(f"{rule}: {message}", KernelWarning, file, line)
