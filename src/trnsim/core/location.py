"""Where in the user's kernel an instruction was issued: the first stack frame outside trnsim."""

from __future__ import annotations

import os
import sys
import warnings

from trnsim.errors import KernelError

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../src/trnsim
_SKIP = (_PKG_DIR + os.sep, "<frozen ")


def kernel_location() -> tuple[str, int]:
    """(file, line) of the innermost frame outside the trnsim package (the kernel's own line)."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(_SKIP) and "importlib" not in filename:
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
