"""trnsim's exception types.

A leaf module: it imports nothing, so every layer (including ``hw`` and ``numerics``) may use it.
Every error is an explanation: it names the rule that was broken and the offending values; kernel
errors also carry the kernel's own file and line.
"""


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
