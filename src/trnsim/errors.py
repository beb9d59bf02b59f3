"""trnsim's exception types.

A leaf module: it imports nothing, so every layer (including ``hw`` and ``numerics``) may use it.
Every error is an explanation: it names the rule that was broken and the offending values; kernel
errors also carry the kernel's own file and line.
"""

from __future__ import annotations


class TrnsimError(Exception):
    """Base class of every error trnsim raises on purpose."""


class UnknownNameError(TrnsimError, KeyError):
    """A lookup by name failed; the message lists the valid names."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class DuplicateNameError(TrnsimError, ValueError):
    """A registry refused a second entry under an existing name."""


class ConfigError(TrnsimError, ValueError):
    """A configuration (spec, plan, option) breaks a stated rule."""


class NumericsError(TrnsimError, ValueError):
    """A number-format rule was broken (unencodable value, block shape, sparsity pattern)."""


class KernelError(TrnsimError, ValueError):
    """An illegal kernel: names the rule, the offending values and the kernel's file and line.

    Formats as ``"rule: values (kernel.py:42)"``.
    """

    def __init__(
        self,
        rule: str,
        message: str,
        kernel_file: str | None = None,
        kernel_line: int | None = None,
    ) -> None:
        self.rule = rule
        self.message = message
        self.kernel_file = kernel_file
        self.kernel_line = kernel_line
        short = kernel_file.replace("\\", "/").rsplit("/", 1)[-1] if kernel_file else ""
        where = f" ({short}:{kernel_line})" if kernel_file else ""
        super().__init__(f"{rule}: {message}{where}")


class UsageError(TrnsimError, ValueError):
    """Bad usage or input from the user (a flag value, a path, a kernel file): exit status 2."""


class InputError(UsageError, ConfigError):
    """A number given to trnsim (a flag, a function's argument) broke a rule of
    ``trnsim.inputs``: a usage error (exit status 2), and a ``ConfigError`` for callers that
    catch those."""


class Stop(BaseException):
    """trnsim stopping a run on purpose: a time limit, Ctrl-C or SIGTERM (``trnsim.nki.watchdog``).

    A ``BaseException``, like ``KeyboardInterrupt``, so that a kernel file's ``except Exception``
    does not swallow it. ``file`` / ``line``: where the user's code was when it came; ``stage``:
    what the run was doing (``make_inputs``, ``kernel 'k'``...)."""

    def __init__(
        self, message: str = "", file: str | None = None, line: int | None = None, stage: str = ""
    ) -> None:
        super().__init__(message)
        self.message, self.file, self.line, self.stage = message, file, line, stage

    @property
    def where(self) -> str:
        """`` (in make_inputs, k.py:12)``, or ``""`` when nothing is known."""
        short = self.file.replace("\\", "/").rsplit("/", 1)[-1] if self.file else ""
        parts = [f"in {self.stage}" if self.stage else "", f"{short}:{self.line}" if short else ""]
        text = ", ".join(p for p in parts if p)
        return f" ({text})" if text else ""

    def again(self) -> Stop:
        """A fresh instance of the same stop (raised again when user code caught the first)."""
        return type(self)(self.message, self.file, self.line, self.stage)

    def __str__(self) -> str:
        return f"{self.message}{self.where}"


class Deadline(Stop):
    """The run's time limit (``--timeout``) passed."""


class Interrupted(Stop, KeyboardInterrupt):
    """Ctrl-C (SIGINT). A ``KeyboardInterrupt`` too, for code that cleans up on one."""


class Terminated(Stop):
    """SIGTERM, raised in the main thread so ``finally`` blocks remove temporary files."""
