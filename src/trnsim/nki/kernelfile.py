"""Run an NKI kernel *file* the way ``trnsim run kernel.py`` does.

Kernel-file convention (every file in ``examples/kernels/`` follows it):

- The file imports NKI as on hardware (``import nki``, ``nki.language as nl``, ``nki.isa as
  nisa``) and defines one or more ``@nki.jit`` kernels. With several, ``KERNEL = "name"`` names
  the default one (else the first defined); ``--kernel NAME`` picks another. The file may import
  modules that sit beside it (its directory is searched first, as Python does for a script).
- Inputs: ``make_inputs_<kernel>(rng, **args)`` if defined, else ``make_inputs(rng, **args)``,
  returning the kernel's positional arguments (a tuple of NumPy arrays, or one array); ``rng``
  is a ``numpy.random.Generator`` seeded by ``--seed``; ``args`` come from ``--arg KEY=VALUE``.
  A module-level ``INPUTS`` tuple may be given instead of a function.
- The kernel returns its outputs: HBM tensors (``nl.ndarray(..., buffer=nl.shared_hbm)``); a
  kernel that works in place returns the argument it wrote. It runs on copies of the inputs.
- Optional golden: ``golden_<kernel>(*inputs)`` if defined, else ``golden(*inputs)``, returning
  the expected output(s) (same structure as the kernel's return value), computed independently
  in NumPy from the original inputs (never the ones the kernel wrote).
- Optional ``TOLERANCE = {"rtol": ..., "atol": ...}`` (or ``TOLERANCE_<kernel>``): the run
  passes when ``|out - golden| <= atol + rtol * |golden|`` everywhere. Without one, a default
  from the output dtype applies (``default_tolerance``), so a golden is always checked.
- Every element of every output must be written by the kernel (``trnsim.nki.outputs``); one that
  is not fails the run, golden or not, unless the file declares it: ``UNWRITTEN = "why"`` (or
  ``UNWRITTEN_<kernel>``), the reason the kernel leaves elements unwritten. Declared elements are
  reported and left out of the comparison.

Errors: ``max_abs_err = max |out - golden|``; ``max_rel_err = max_abs_err / max |golden|``
(normwise, so zeros in the golden do not blow it up), over all outputs. A NaN or Inf in an
output fails the check unless the golden has the same value at the same place; such outputs
make both errors ``inf``.

What goes wrong is reported in one line, the kernel file's own ``file:line`` first:

- the file cannot be read or loaded (syntax error, an exception at import), ``make_inputs`` or
  ``golden`` raises (any exception, ``BaseException`` subclasses included), or a ``--arg``,
  ``KERNEL``, ``TOLERANCE`` or ``UNWRITTEN`` value is bad: ``UsageError`` (exit 2);
- the kernel raises while running, breaks a rule, returns something other than HBM tensors,
  leaves output elements unwritten, issues more than ``max_instructions`` instructions or runs
  past ``timeout`` seconds: ``KernelError`` (exit 1).

Every stage (loading, ``make_inputs``, the kernel, ``golden``, the comparison) runs under one
budget (``trnsim.nki.watchdog.guard``): ``timeout`` and Ctrl-C / SIGTERM stop it wherever it is,
in plain Python too, naming the file and line it was at.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import math
import os
import sys
import types
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from types import FrameType, ModuleType, TracebackType
from typing import Any

import ml_dtypes
import numpy as np

from trnsim.errors import Deadline, KernelError, Stop, TrnsimError, UsageError
from trnsim.nki.compat import install
from trnsim.nki.outputs import (
    Unwritten,
    checked_allowance,
    kernel_rule,
    returned_tensors,
)
from trnsim.nki.simulate import Kernel, RunResult, record_run, run
from trnsim.nki.watchdog import Progress, guard, kernel_threads, stop_kernel_threads
from trnsim.numerics import get_format

__all__ = [  # used by the CLI and tests beyond the run_file/profile entry points
    "kernel_threads",
    "stop_kernel_threads",
]

DEFAULT_MAX_INSTRUCTIONS = 2_000_000
"""Instructions one core may issue in a kernel run before it is stopped (``--max-instructions``):
20x the full-size NKI matmul tutorial (99k instructions). It bounds memory too: a recorded
instruction costs about 100 B in a timing-only run and up to about 1 kB in a functional one, so
a runaway kernel stops at a few GB at most."""
DEFAULT_TIMEOUT_S = 600.0
"""Wall-clock limit of loading and running a kernel file, in seconds (``--timeout``)."""
MIN_TIMEOUT_S, MAX_TIMEOUT_S = 1e-3, 1e8
"""The range ``--timeout`` accepts (a timer below 1 ms is none at all to ``setitimer``; above
1e8 s, about 3 years, it overflows the platform's time_t on some systems)."""

FP32_ACCUMULATION_RTOL = 1e-5
"""Floor of the default relative tolerance. Wide outputs (fp32) usually come from sums over many
terms in an order that differs from NumPy's (pairwise) one; that rounding error grows with the
term count (about sqrt(n) eps typically, n eps at worst), so 2 eps of fp32 (2.4e-7) would fail
correct kernels. 1e-5 (84 fp32 eps) covers sums of a few thousand terms."""

MESSAGE_CHARS = 300
"""Longest text of a user's exception kept in a one-line error."""

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../src/trnsim
_LIBRARY_DIRS = tuple(  # trnsim, the standard library, installed packages: not the user's code
    d + os.sep
    for d in {_PKG_DIR, os.path.dirname(os.__file__)}
    | {p for p in sys.path if p.endswith(("site-packages", "dist-packages"))}
)
_MODULE_PREFIX = "trnsim_kernelfile_"  # the module name of a loaded kernel file


@dataclass
class FileRun:
    """The result of running one kernel of a kernel file."""

    path: str
    kernel: str
    target: str
    result: RunResult
    outputs: list[np.ndarray]
    has_golden: bool
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    tolerance: dict[str, Any] | None = None
    passed: bool | None = None
    nonfinite: int = 0
    """Output elements that are NaN or Inf where the golden does not hold the same value."""
    unwritten: list[Unwritten] = field(default_factory=list)
    """Outputs with elements the kernel never wrote (``trnsim.nki.outputs``)."""
    unwritten_declared: str | None = None
    """The file's ``UNWRITTEN`` reason (such elements then pass, left out of the comparison)."""
    by_engine: dict[str, int] = field(default_factory=dict)
    by_opcode: dict[str, int] = field(default_factory=dict)

    @property
    def instructions(self) -> int:
        return sum(self.by_engine.values())

    @property
    def unwritten_count(self) -> int:
        return sum(u.count for u in self.unwritten)

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.path,
            "kernel": self.kernel,
            "target": self.target,
            "outputs": [{"shape": list(o.shape), "dtype": str(o.dtype)} for o in self.outputs],
            "golden": self.has_golden,
            "max_abs_err": _finite_or_none(self.max_abs_err),
            "max_rel_err": _finite_or_none(self.max_rel_err),
            "nonfinite_mismatches": self.nonfinite,
            "unwritten": [u.to_dict() for u in self.unwritten],
            "unwritten_declared": self.unwritten_declared,
            "tolerance": self.tolerance,
            "passed": self.passed,
            "instructions": self.instructions,
            "instructions_by_engine": self.by_engine,
            "instructions_by_opcode": self.by_opcode,
        }


def _finite_or_none(x: float | None) -> float | None:
    """JSON has no Inf: an infinite error (NaN/Inf outputs) is ``null`` there."""
    return x if x is not None and math.isfinite(x) else None


# ---- where in the kernel file ---------------------------------------------------------------


def _shown(filename: str, kernel_path: str | None) -> str:
    """A frame's file as the user knows it: the kernel file as given on the command line."""
    if kernel_path and os.path.abspath(filename) == os.path.abspath(kernel_path):
        return kernel_path
    return filename


def _is_user_file(filename: str) -> bool:
    """A file of the user's (the kernel file, a module beside it), not trnsim, the standard
    library, an installed package or the import machinery."""
    return not filename.startswith(_LIBRARY_DIRS) and not filename.startswith("<")


def _user_frame(frames: list[tuple[str, int]], kernel_path: str | None) -> tuple[str, int] | None:
    """The innermost (file, line) of the user's code: the kernel file (as the user named it), or
    a module of theirs it imported (one beside it)."""
    for f, line in reversed(frames):
        if _is_user_file(f):
            return _shown(f, kernel_path), line
    return None


def exception_location(exc: BaseException, kernel_path: str | None = None) -> tuple[str, int]:
    """(file, line) of an exception in the user's code: the kernel file's innermost frame."""
    return _user_location(exc, kernel_path) or _innermost(exc)


def _user_location(exc: BaseException, kernel_path: str | None) -> tuple[str, int] | None:
    if isinstance(exc, SyntaxError) and exc.filename and not str(exc.filename).startswith("<"):
        return _shown(exc.filename, kernel_path), exc.lineno or 0
    return _user_frame(_frames(exc.__traceback__), kernel_path)


def _frames(tb: TracebackType | None) -> list[tuple[str, int]]:
    frames = []
    while tb is not None:
        frames.append((tb.tb_frame.f_code.co_filename, tb.tb_lineno))
        tb = tb.tb_next
    return frames


def _innermost(exc: BaseException) -> tuple[str, int]:
    frames = _frames(exc.__traceback__)
    return frames[-1] if frames else ("<unknown>", 0)


def frame_location(frame: FrameType | None, kernel_path: str | None = None) -> tuple[str, int]:
    """(file, line) of a running frame stack (innermost ``frame``) in the user's code."""
    return _running_location(frame, kernel_path) or ("<unknown>", 0)


_RUNNERS = ("trnsim.nki.kernelfile", "trnsim.cli.profile")
"""Modules whose frames call the user's code: a running frame stack is the user's only inside
them (the caller of ``run_file`` may be a user's script, and is not where a kernel file is)."""


def _running_location(frame: FrameType | None, kernel_path: str | None) -> tuple[str, int] | None:
    """The innermost frame of the user's code running inside ``run_file`` / ``profile_file``."""
    while frame is not None:
        if frame.f_globals.get("__name__") in _RUNNERS:
            return None
        if _is_user_file(frame.f_code.co_filename):
            return _shown(frame.f_code.co_filename, kernel_path), frame.f_lineno
        frame = frame.f_back
    return None


def safe_text(x: Any, limit: int = MESSAGE_CHARS) -> str:
    """``str(x)``'s first line, at most ``limit`` characters; never raises (a user's object
    whose ``__str__`` raises is described instead)."""
    try:
        text = str(x)
    except BaseException as exc:  # the user's __str__, whatever it raises
        if isinstance(exc, Stop):
            raise
        return f"<{type(x).__name__} whose __str__ raised {type(exc).__name__}>"
    lines = text.strip().splitlines()
    first = lines[0] if lines else ""
    return first if len(first) <= limit else first[: limit - 3] + "..."


def safe_repr(x: Any, limit: int = 60) -> str:
    """``repr(x)`` cut to ``limit`` characters; never raises."""
    try:
        text = repr(x)
    except BaseException as exc:  # the user's __repr__
        if isinstance(exc, Stop):
            raise
        return f"<{type(x).__name__}>"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe(exc: BaseException) -> str:
    """``Type: first line of the message`` (``Type`` alone without one)."""
    if isinstance(exc, SyntaxError):
        return f"{type(exc).__name__}: {safe_text(exc.msg)}"
    text = safe_text(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def user_error(exc: BaseException, kernel_path: str, what: str) -> UsageError:
    """An exception raised by the user's code, as a one-line ``UsageError`` at its line."""
    file, line = exception_location(exc, kernel_path)
    return UsageError(f"{file}:{line}: {describe(exc)} ({what})")


@contextmanager
def user_code(kernel_path: str, what: str) -> Iterator[None]:
    """Run a piece of the user's code (``make_inputs``, ``golden``, the module): any exception it
    raises, ``BaseException`` subclasses included, becomes a one-line ``UsageError`` at its
    file and line; trnsim's own errors and stops pass through."""
    try:
        yield
    except (Stop, TrnsimError):
        raise
    except BaseException as exc:  # SystemExit, GeneratorExit... from the user
        raise user_error(exc, kernel_path, what) from None


def kernel_raised(exc: BaseException, kernel_path: str | None, kernel: str) -> KernelError:
    """A Python exception raised by a kernel while it ran, as a one-line ``KernelError``.

    Raised inside trnsim (a call that trnsim did not check, or a bug in trnsim), it says so."""
    file, line = exception_location(exc, kernel_path)
    inner = _innermost(exc)[0]
    inside = " inside trnsim, called from this line" if inner.startswith(_PKG_DIR) else ""
    text = describe(exc)
    err = KernelError("kernel-raised", text, file, line)
    err.args = (f"{file}:{line}: {text} (raised{inside} by kernel {kernel!r} while running)",)
    return err


# ---- loading --------------------------------------------------------------------------------


@contextmanager
def file_imports(path: str, forget: bool = True) -> Iterator[None]:
    """The kernel file's directory first on ``sys.path`` for the ``with`` block (a file may
    import a module beside it, as a Python script may); afterwards the directory is removed
    and, with ``forget``, so are the modules imported from it (the next file imports its own)."""
    folder = os.path.dirname(os.path.abspath(path))
    if sys.path and sys.path[0] == folder:  # an enclosing block put it there
        yield
        return
    before = set(sys.modules)
    sys.path.insert(0, folder)
    try:
        yield
    finally:
        with suppress(ValueError):
            sys.path.remove(folder)
        if forget:
            for name in set(sys.modules) - before:
                mod_file = getattr(sys.modules.get(name), "__file__", None) or ""
                if os.path.dirname(os.path.abspath(mod_file)) == folder and not name.startswith(
                    _MODULE_PREFIX
                ):
                    sys.modules.pop(name, None)


def _read_source(path: str) -> bytes:
    if os.path.isdir(path):
        raise UsageError(f"kernel file {path!r} is a directory")
    if not os.path.exists(path):
        raise UsageError(f"kernel file {path!r} does not exist")
    if not os.path.isfile(path):
        raise UsageError(f"kernel file {path!r} is not a regular file")
    if not path.endswith(".py"):
        raise UsageError(f"kernel file {path!r} is not a Python file (a .py file)")
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise UsageError(f"cannot read kernel file {path!r}: {exc.strerror or exc}") from None


def _compiled(source: bytes, path: str) -> types.CodeType:
    """The file's code; a syntax error names the file and line (a NUL byte too: Python 3.11
    says "source code string cannot contain null bytes" with no line)."""
    try:
        return compile(source, os.path.abspath(path), "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None)
        if not line and b"\0" in source:
            line = source[: source.index(b"\0")].count(b"\n") + 1
        elif not line:  # an unknown coding cookie (line 1 or 2), else the file as a whole
            line = 2 if b"coding" in b"".join(source.splitlines()[1:2]) else 1
        msg = exc.msg if isinstance(exc, SyntaxError) else safe_text(exc)
        raise UsageError(
            f"{path}:{line}: SyntaxError: {msg} (while loading the kernel file)"
        ) from None
    except (MemoryError, RecursionError) as exc:
        raise UsageError(
            f"{path}:0: {type(exc).__name__}: the file is too large or too deeply nested "
            "to compile (while loading the kernel file)"
        ) from None


def load_module(path: str) -> ModuleType:
    """Import a kernel file (after ``install()`` so its ``import nki`` resolves to trnsim).

    The file is read and compiled here, so an unreadable file or a syntax error names the file
    and line; an exception raised while the module runs (any, ``BaseException`` subclasses
    included) is a one-line ``UsageError`` at its line."""
    source = _read_source(path)
    code = _compiled(source, path)
    install()
    stem = os.path.splitext(os.path.basename(path))[0]
    name = _MODULE_PREFIX + "".join(c if c.isalnum() else "_" for c in stem)
    spec = importlib.util.spec_from_file_location(name, os.path.abspath(path))
    if spec is None:
        raise UsageError(f"cannot import {path!r} as a Python file")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        with file_imports(path, forget=False), user_code(path, "while loading the kernel file"):
            exec(code, mod.__dict__)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return mod


def kernels_of(mod: ModuleType) -> dict[str, Kernel]:
    """The ``@nki.jit`` kernels a module defines, in definition order."""
    found = [(k, v) for k, v in vars(mod).items() if isinstance(v, Kernel)]
    found.sort(key=lambda kv: _first_line(kv[1]))
    return dict(found)


def _first_line(k: Kernel) -> int:
    try:
        return inspect.getsourcelines(k.fn)[1]
    except (OSError, TypeError):
        return 0


def _defined(mod: ModuleType, name: str) -> Any:
    """A module-level name of the file, read from its namespace (a module ``__getattr__`` is not
    consulted: it is the user's code, and may raise)."""
    return vars(mod).get(name)


def pick_kernel(mod: ModuleType, name: str | None) -> tuple[str, Kernel]:
    kernels = kernels_of(mod)
    base = os.path.basename(_given_path(mod))
    if not kernels:
        raise UsageError(f"{_given_path(mod)} defines no @nki.jit kernel")
    if name is None:
        default = _defined(mod, "KERNEL")
        if default is not None and not isinstance(default, str):
            raise UsageError(
                f"{base}: KERNEL = {safe_repr(default)} must be a kernel's name (a string); "
                f"kernels: {', '.join(kernels)}"
            )
        name = default or next(iter(kernels))
    if name not in kernels:
        raise UsageError(f"kernel {name!r} not found in {base}; kernels: {', '.join(kernels)}")
    return name, kernels[name]


# ---- inputs ---------------------------------------------------------------------------------


def parse_arg(pair: str) -> tuple[str, Any]:
    """``--arg KEY=VALUE``: VALUE is a Python literal (``4096``, ``0.5``, ``'tiled'``,
    ``(2, 3)``), or ``true``/``false``; numbers must be finite."""
    if "=" not in pair:
        raise UsageError(f"--arg {pair!r}: expected KEY=VALUE")
    key, text = (s.strip() for s in pair.split("=", 1))
    if not key.isidentifier():
        raise UsageError(f"--arg {safe_repr(pair)}: {safe_repr(key)} is not a parameter name")
    if text.lower() in ("true", "false"):
        return key, text.lower() == "true"
    shown = text if len(text) <= 60 else text[:57] + "..."
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:
        if "limit" in safe_text(exc) and "digits" in safe_text(exc):  # the int-string limit
            raise UsageError(
                f"--arg {key}={shown}: a number of {len(text):,} characters is not a Python "
                f"literal trnsim reads (at most {sys.get_int_max_str_digits():,} digits)"
            ) from None
        raise UsageError(
            f"--arg {key}={shown}: {shown!r} is not a Python literal "
            "(a number, true/false, a quoted string, a tuple)"
        ) from None
    if not _finite_everywhere(value):
        raise UsageError(f"--arg {key}={shown}: numbers must be finite")
    return key, value


def _finite_everywhere(value: Any) -> bool:
    """No NaN or infinity anywhere in a literal (numbers, and inside tuples, lists, dicts)."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, float | complex) and not np.isfinite(v):
            return False
        if isinstance(v, tuple | list | set | frozenset):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
    return True


def parse_args(pairs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for p in pairs:
        key, value = parse_arg(p)
        if key in out:
            raise UsageError(f"--arg {key} given twice ({out[key]!r:.30} and {value!r:.30})")
        out[key] = value
    return out


def inputs_for(
    mod: ModuleType, kernel: str, seed: int = 0, kwargs: dict[str, Any] | None = None
) -> tuple[Any, ...]:
    """The kernel's arguments under the kernel-file convention (make_inputs / INPUTS)."""
    kwargs = kwargs or {}
    path = _given_path(mod)
    base = os.path.basename(path)
    name = f"make_inputs_{kernel}" if _defined(mod, f"make_inputs_{kernel}") else "make_inputs"
    fn = _defined(mod, name)
    if fn is not None:
        _check_callable(fn, path, name)
        params = _parameters(fn)
        takes_any = params is None or any(
            p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()
        )
        unknown = set(kwargs) - set(params or {})
        if unknown and not takes_any:
            raise UsageError(
                f"--arg {', '.join(sorted(unknown))}: {name} has no such parameter; "
                f"parameters: {', '.join(p for p in params or {} if p != 'rng') or 'none'}"
            )
        given = " ".join(f"{k}={safe_repr(v, 30)}" for k, v in kwargs.items())
        what = f"{name} rejected --arg {given}" if given else f"in {name}(rng)"
        with user_code(path, what):
            args = fn(np.random.default_rng(seed), **kwargs)
    elif "INPUTS" in vars(mod):
        if kwargs:
            raise UsageError(f"--arg given but {base} has INPUTS, no make_inputs")
        name = "INPUTS"
        args = vars(mod)["INPUTS"]
    else:
        raise UsageError(no_inputs_message(mod, kernel))
    args = tuple(args) if type(args) in (tuple, list) else (args,)
    _check_arity(mod, kernel, args, name)
    for i, a in enumerate(args):
        if isinstance(a, np.ndarray) and a.size == 0:
            raise UsageError(
                f"{base}: {name} gives input {i} of shape "
                f"{list(a.shape)}, an empty tensor (every dimension must be >= 1)"
            )
        if isinstance(a, np.ndarray):
            try:
                get_format(a.dtype)
            except Exception:
                raise UsageError(
                    f"{base}: {name} gives input {i} of dtype {a.dtype}, "
                    "not an NKI dtype (e.g. float32, bfloat16, float8_e4m3fn, int32)"
                ) from None
    return args


def _parameters(fn: Any) -> Any:
    """``fn``'s parameters, or None when they cannot be read (take every ``--arg`` then)."""
    try:
        return inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return None


def _check_callable(fn: Any, path: str, name: str) -> None:
    if not callable(fn):
        raise UsageError(
            f"{os.path.basename(path)}: {name} is {type(fn).__name__} {safe_repr(fn, 40)}, "
            "not a function"
        )


# Inputs no kernel can take: a generator (make_inputs that yields), a dict, a set.
_NOT_INPUTS = (types.GeneratorType, dict, set, frozenset)


def no_inputs_message(mod: ModuleType, kernel: str) -> str:
    """The one-line error of a kernel file without inputs (a foreign kernel, say), saying how
    to add them and a golden: in the file, or in a wrapper file that imports the kernel."""
    base = os.path.basename(_given_path(mod))
    params: list[str] = []
    target = getattr(getattr(mod, kernel, None), "fn", None)
    if target is not None:
        try:
            params = [
                p.name
                for p in inspect.signature(target).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
            ]
        except (TypeError, ValueError):
            params = []
    args = ", ".join(params)
    return (
        f"{base} gives no inputs for kernel {kernel!r}: add 'def make_inputs(rng): return "
        f"({args}{',' if len(params) == 1 else ''})' (NumPy arrays; rng is "
        f"numpy.random.default_rng(--seed)) and, to check the outputs, 'def golden({args}): "
        f"return expected', to {base} or to a wrapper file that does 'from "
        f"{os.path.splitext(base)[0]} import {kernel}' (README: 'Kernel files')"
    )


def _check_arity(mod: ModuleType, kernel: str, args: tuple[Any, ...], source: str) -> None:
    """The inputs must fit the kernel's parameters and none may be None (a ``make_inputs``
    that forgot to return): a ``UsageError`` naming both, before the kernel runs."""
    base = os.path.basename(_given_path(mod))
    for i, a in enumerate(args):
        if a is None:
            raise UsageError(f"{base}: {source} gives input {i} = None (did it return its arrays?)")
        if isinstance(a, _NOT_INPUTS):
            raise UsageError(
                f"{base}: {source} gives input {i} as a {type(a).__name__}, not an array or "
                "a Python value (did it yield, or return a dict?)"
            )
    target = getattr(_defined(mod, kernel), "fn", None)
    if target is None:
        return
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        return
    try:
        sig.bind(*args)
    except TypeError as exc:
        raise UsageError(
            f"{base}: {source} gives {len(args)} input(s) but kernel {kernel!r}{sig} "
            f"cannot take them ({exc})"
        ) from None


def _given_path(mod: ModuleType) -> str:
    return vars(mod).get("__trnsim_path__") or str(mod.__file__)


def _copied(x: Any) -> Any:
    """The kernel's own copy of an input (arrays, and arrays in lists and tuples), so what it
    writes in place never reaches the golden's inputs. Array subclasses become plain arrays."""
    if isinstance(x, np.ndarray):
        return np.array(x, copy=True, subok=False)
    if type(x) in (list, tuple):
        return type(x)(_copied(y) for y in x)
    return x


# ---- one budget for every stage -------------------------------------------------------------


@contextmanager
def budget(
    path: str,
    seconds: float | None,
    progress: Progress | None = None,
    on_beat: Callable[[str], None] | None = None,
    on_stuck: Callable[[BaseException], None] | None = None,
) -> Iterator[Progress]:
    """The stages of a kernel-file run (loading, ``make_inputs``, the kernel, ``golden``,
    checking) under one time limit and the stop signals (``trnsim.nki.watchdog.guard``), with
    the file's directory on ``sys.path``. The time limit ends in a ``KernelError`` (rule
    ``timeout``) naming the stage and the file's line; an exception from the user's code
    that trnsim's own code met (a module ``__getattr__``, an input's ``__len__``...) in a
    one-line ``UsageError`` at the user's line."""
    progress = progress or Progress()

    def locate(frame: FrameType | None) -> tuple[str, int] | None:
        return _running_location(frame, path)

    def stuck(stop: Stop) -> None:
        assert on_stuck is not None
        on_stuck(timeout_error(stop, path) if isinstance(stop, Deadline) else stop)

    try:
        with (
            guard(
                seconds,
                locate,
                progress=progress,
                on_beat=on_beat,
                on_stuck=stuck if on_stuck is not None else None,
            ),
            file_imports(path),
        ):
            yield progress
    except Deadline as stop:
        raise timeout_error(stop, path) from None
    except (Stop, TrnsimError):
        raise
    except BaseException as exc:  # raised by the user's code, met by trnsim's
        at = _user_location(exc, path)
        if at is None:  # trnsim's own bug: the CLI's "internal error"
            raise
        raise UsageError(f"{at[0]}:{at[1]}: {describe(exc)} (in {progress.stage})") from None


def timeout_error(stop: Deadline, path: str) -> KernelError:
    """The time limit, as the ``KernelError`` (rule ``timeout``) naming the stage and line."""
    if stop.file:
        return KernelError("timeout", f"kernel file {stop.message} while in {stop.stage}",
                           stop.file, stop.line)  # fmt: skip
    where = f"{os.path.basename(path)}, stopped in trnsim outside the file's code"
    return KernelError("timeout", f"kernel file {stop.message} while in {stop.stage} ({where})")


def time_limit(seconds: float | None, kernel_path: str | None = None) -> Any:
    """``budget`` for a kernel file's code (kept for callers of the older name)."""
    return budget(kernel_path or "", seconds)


# ---- checking -------------------------------------------------------------------------------


def _flat(x: Any) -> list[np.ndarray]:
    """Every leaf as an array, flattened in order (tuples, lists, dict values)."""
    return [np.asarray(y) for y in returned_tensors(x)]


def default_tolerance(dtype: Any) -> dict[str, float]:
    """The tolerance of an output dtype when the file states none.

    Integer and boolean outputs must match exactly. Floating-point outputs: rtol = 2 eps of the
    output format (the kernel and the golden may each round the true value once to the output
    format, half an ulp each, and an ulp is at most 2 eps relative), floored at
    ``FP32_ACCUMULATION_RTOL`` for wide formats; atol is the same fraction of the golden's
    largest magnitude (``atol_scale``), so cancellation near zero does not fail a correct sum.
    bf16: rtol 2^-6 = 0.0156; fp16: 0.00195; fp8 e4m3: 0.25; fp32: 1e-5."""
    dt = np.dtype(dtype)
    if dt.kind in "biu":
        return {"rtol": 0.0, "atol_scale": 0.0}
    try:
        eps = float(ml_dtypes.finfo(dt).eps)
    except (TypeError, ValueError):
        eps = float(np.finfo(np.float32).eps)
    rtol = max(2.0 * eps, FP32_ACCUMULATION_RTOL)
    return {"rtol": rtol, "atol_scale": rtol}


def _as_float64(o: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    for what, x in (("kernel output", o), ("golden", g)):
        if x.dtype.kind not in "biuf" and not x.dtype.name.startswith(("bfloat", "float")):
            raise KernelError("golden", f"{what} {_short(x)} is not a numeric array")
    if o.shape != g.shape and o.size == g.size:
        g = g.reshape(o.shape)
    if o.shape != g.shape:
        raise KernelError(
            "golden", f"kernel output of shape {list(o.shape)} != golden shape {list(g.shape)}"
        )
    return o.astype(np.float64), g.astype(np.float64)


def _short(x: np.ndarray) -> str:
    text = repr(x.item()) if x.dtype == object and x.size == 1 else f"of dtype {x.dtype}"
    return text[:60]


def _nonfinite_mismatch(o: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Where the output is NaN/Inf and the golden does not hold that same value."""
    same = (np.isnan(o) & np.isnan(g)) | (np.isinf(o) & (o == g))
    return ~np.isfinite(o) & ~same


def compare(
    outputs: list[np.ndarray],
    goldens: list[np.ndarray],
    skip: list[np.ndarray | None] | None = None,
) -> tuple[float, float, int]:
    """(max abs error, normwise max relative error, non-finite mismatches), in float64.

    Elements where both sides are NaN (or the same Inf) are equal; a NaN or Inf in the output
    where the golden is anything else makes both errors ``inf``. ``skip[i]``: elements of
    output ``i`` left out (declared unwritten)."""
    if len(outputs) != len(goldens):
        raise KernelError(
            "golden", f"kernel returned {len(outputs)} outputs, golden {len(goldens)}"
        )
    abs_err, scale, bad = 0.0, 0.0, 0
    for i, (o, g) in enumerate(zip(outputs, goldens, strict=True)):
        o64, g64 = _as_float64(o, g)
        keep = _kept(skip, i, o64.shape)
        bad += int(np.count_nonzero(_nonfinite_mismatch(o64, g64) & keep))
        both = np.isfinite(o64) & np.isfinite(g64) & keep
        # a finite output where the golden is NaN/Inf is a mismatch too
        bad += int(np.count_nonzero(~np.isfinite(g64) & np.isfinite(o64) & keep))
        with np.errstate(invalid="ignore", over="ignore"):  # inf - inf where both are inf
            diff = np.abs(o64 - g64)
        abs_err = max(abs_err, float(np.max(diff, where=both, initial=0.0)))
        scale = max(scale, float(np.max(np.abs(g64), where=np.isfinite(g64), initial=0.0)))
    if bad:
        return math.inf, math.inf, bad
    return abs_err, (abs_err / scale if scale > 0 else abs_err), 0


def _kept(skip: list[np.ndarray | None] | None, i: int, shape: tuple[int, ...]) -> Any:
    """True where output ``i`` is compared (everywhere unless ``skip`` leaves some out)."""
    mask = skip[i] if skip is not None and i < len(skip) else None
    return True if mask is None else ~mask.reshape(shape)


def _within(
    o: np.ndarray, g: np.ndarray, rtol: float, atol: float, skip: np.ndarray | None = None
) -> bool:
    o64, g64 = _as_float64(o, g)
    same = (np.isnan(o64) & np.isnan(g64)) | (np.isinf(o64) & (o64 == g64))
    with np.errstate(invalid="ignore", over="ignore"):
        close = np.abs(o64 - g64) <= atol + rtol * np.abs(g64)  # False wherever a NaN is
    if skip is not None:
        same |= skip.reshape(o64.shape)
    return bool(np.all(same | close))


def _checked_tolerance(tol: Any, where: str) -> dict[str, float]:
    if not isinstance(tol, dict) or not all(k in ("rtol", "atol") for k in tol):
        raise UsageError(
            f"{where}: expected a dict with keys 'rtol' and/or 'atol', got {safe_repr(tol)}"
        )
    out = {}
    for key, value in tol.items():
        try:
            v = float(value)
        except (TypeError, ValueError, OverflowError):
            raise UsageError(
                f"{where}: {key} {safe_repr(value, 40)} is not a finite number"
            ) from None
        if not math.isfinite(v) or v < 0:
            raise UsageError(f"{where}: {key} {safe_repr(value, 40)} must be a finite number >= 0")
        out[key] = v
    return out


def resolve_tolerance(
    mod: ModuleType,
    kernel: str,
    outputs: list[np.ndarray],
    goldens: list[np.ndarray],
    rtol: float | None = None,
    atol: float | None = None,
) -> dict[str, Any]:
    """The tolerance that applies: flags > the file's ``TOLERANCE[_<kernel>]`` > the default
    for the least precise output dtype. ``source`` says which."""
    name = f"TOLERANCE_{kernel}" if f"TOLERANCE_{kernel}" in vars(mod) else "TOLERANCE"
    given = _defined(mod, name)
    where = f"{os.path.basename(_given_path(mod))}: {name}"
    tol = _checked_tolerance(given, where) if given is not None else {}
    flags = _checked_tolerance(
        {k: v for k, v in (("rtol", rtol), ("atol", atol)) if v is not None}, "--rtol/--atol"
    )
    if tol or flags:
        source = "--rtol/--atol" if flags and not tol else name
        if flags and tol:
            source = f"{name} with --rtol/--atol"
        tol.update(flags)
        return {"rtol": tol.get("rtol", 0.0), "atol": tol.get("atol", 0.0), "source": source}
    loosest = max(outputs, key=lambda o: default_tolerance(o.dtype)["rtol"])
    d = default_tolerance(loosest.dtype)
    scale = max(
        (
            float(np.max(np.abs(g64), where=np.isfinite(g64), initial=0.0))
            for g64 in (g.astype(np.float64) for g in goldens)
        ),
        default=0.0,
    )
    return {
        "rtol": d["rtol"],
        "atol": d["atol_scale"] * scale,
        "source": f"default for {loosest.dtype} output: rtol 2 eps (min 1e-5), "
        "atol rtol x max|golden|",
    }


# ---- running --------------------------------------------------------------------------------


def run_kernel(
    mod: ModuleType,
    name: str,
    k: Kernel,
    args: tuple[Any, ...],
    **options: Any,
) -> RunResult:
    """``simulate.run`` (``simulate.record_run`` with ``record_only=True``) with a Python
    exception from the kernel's own code (any, ``BaseException`` subclasses included) as a
    one-line ``KernelError`` at the kernel's line."""
    runner = record_run if options.pop("record_only", False) else run
    if runner is record_run:
        options.pop("functional", None)
        options.pop("allow_unwritten", None)
    try:
        return runner(k, *args, **options)
    except (Stop, TrnsimError):
        raise
    except BaseException as exc:  # a sys.exit() in a kernel is its error too
        raise kernel_raised(exc, _given_path(mod), name) from None


def golden_kwargs(gold: Any, kernel_kwargs: dict[str, Any]) -> dict[str, Any]:
    """The kernel keyword arguments the golden takes too (by name, or all with ``**kw``)."""
    try:
        params = inspect.signature(gold).parameters
    except (TypeError, ValueError):
        return {}
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return dict(kernel_kwargs)
    return {k: v for k, v in kernel_kwargs.items() if k in params}


def load(path: str) -> ModuleType:
    """``load_module`` remembering the path as the user gave it (for ``file:line``)."""
    mod = load_module(path)
    mod.__trnsim_path__ = path  # type: ignore[attr-defined]
    return mod


def declared_unwritten(mod: ModuleType, kernel: str) -> str | None:
    """The file's ``UNWRITTEN_<kernel>`` (or ``UNWRITTEN``) reason, if it gives one."""
    name = f"UNWRITTEN_{kernel}" if f"UNWRITTEN_{kernel}" in vars(mod) else "UNWRITTEN"
    base = os.path.basename(_given_path(mod))
    allowed = checked_allowance(_defined(mod, name), f"{base}: {name}")
    if allowed is False:
        return None
    return "declared" if allowed is True else safe_text(allowed, 120)


def check_returned(res: RunResult, kernel: str, k: Kernel) -> None:
    """``trnsim run`` compares outputs: the kernel must return at least one tensor, and only
    HBM tensors (``run`` refused SBUF and PSUM ones already)."""
    leaves = returned_tensors(res.outputs)
    problem = ""
    if not leaves or all(x is None for x in leaves):
        problem = "returns None"
    else:
        for i, x in enumerate(leaves):
            if not isinstance(x, np.ndarray):
                problem = f"returns {type(x).__name__} {safe_repr(x, 30)} as output {i}"
                break
    if problem:
        raise kernel_rule(
            "output-not-hbm",
            f"kernel {kernel!r} {problem}; a kernel returns its outputs, HBM tensors made with "
            "nl.ndarray(shape, dtype, buffer=nl.shared_hbm) (an in-place kernel returns the "
            "argument it wrote)",
            k,
        )


@dataclass
class Memo:
    """What a kernel file's runs in one process can share: the inputs ``make_inputs`` made and
    the golden's outputs, for the last (file, kernel, seed, input arguments), and the golden's
    keyword arguments. ``trnsim tune`` gives one to every candidate a process runs: candidates
    differ only in kernel parameters, so the inputs and (unless the golden takes a tuned
    parameter) the goldens are the same, and making them again is wasted work. Both are made
    from copies of the inputs, so what the kernel or golden writes in place never reaches
    the next run. One entry each: a memo holds at most one set of inputs."""

    key: tuple[Any, ...] | None = None
    args: tuple[Any, ...] = ()
    golden_key: str | None = None
    goldens: list[np.ndarray] | None = None

    def inputs(self, key: tuple[Any, ...], make: Callable[[], tuple[Any, ...]]) -> tuple[Any, ...]:
        if key != self.key:
            self.clear()  # nothing stale is kept if make() raises
            self.args = make()
            self.key = key
        return self.args

    def clear(self) -> None:
        self.key, self.args, self.golden_key, self.goldens = None, (), None, None


def _memo_key(path: str, kernel: str, seed: int, kwargs: dict[str, Any]) -> tuple[Any, ...]:
    st = os.stat(path)
    return (
        os.path.abspath(path),
        st.st_mtime_ns,
        st.st_size,
        kernel,
        seed,
        repr(sorted(kwargs.items())),
    )


def run_file(
    path: str,
    kernel: str | None = None,
    *,
    target: str | None = None,
    seed: int = 0,
    rtol: float | None = None,
    atol: float | None = None,
    kwargs: dict[str, Any] | None = None,
    max_instructions: int | None = DEFAULT_MAX_INSTRUCTIONS,
    timeout: float | None = None,
    on_beat: Callable[[str], None] | None = None,
    on_stuck: Callable[[BaseException], None] | None = None,
    kernel_kwargs: dict[str, Any] | None = None,
    memo: Memo | None = None,
) -> FileRun:
    """Run one kernel of a kernel file on the emulator and compare it with its golden.

    ``timeout`` bounds the whole run, every stage: loading the file, ``make_inputs``, the kernel,
    ``golden`` and the comparison (``budget``). ``on_beat(text)``: a progress line now and then
    on long runs; ``on_stuck(stop)``: what to do when the file's code keeps catching a stop
    (``trnsim.nki.watchdog``). ``kernel_kwargs``: keyword arguments of the kernel itself (its
    parameters with defaults, e.g. tile sizes: what ``trnsim tune`` varies), also given to the
    golden where it takes a parameter of that name. ``memo``: inputs and goldens shared with
    the other runs of this file in this process (``Memo``)."""
    kernel_kwargs = kernel_kwargs or {}
    with budget(path, timeout, on_beat=on_beat, on_stuck=on_stuck) as progress:
        progress.stage = f"loading {os.path.basename(path)}"
        mod = load(path)
        name, k = pick_kernel(mod, kernel)
        declared = declared_unwritten(mod, name)
        gold_name = f"golden_{name}" if _defined(mod, f"golden_{name}") else "golden"
        gold = _defined(mod, gold_name)
        if gold is not None:
            _check_callable(gold, path, gold_name)
        progress.stage = f"make_inputs for kernel {name!r}"
        if memo is None:
            args = inputs_for(mod, name, seed, kwargs)
        else:
            key = _memo_key(path, name, seed, kwargs or {})
            args = memo.inputs(key, lambda: inputs_for(mod, name, seed, kwargs))
        progress.stage = f"kernel {name!r}"
        res = run_kernel(
            mod,
            name,
            k,
            # the golden (and the memo's next run) sees the inputs as made
            _copied(args) if gold is not None or memo is not None else args,
            target=target,
            max_instructions=max_instructions,
            allow_unwritten=True,  # reported below, and failing unless the file declares them
            **kernel_kwargs,
        )
        check_returned(res, name, k)
        goldens = None
        if gold is not None:
            progress.stage = f"{gold_name}()"
            gkw = golden_kwargs(gold, kernel_kwargs)
            gkey = f"{gold_name} {sorted(gkw.items())!r}"
            if memo is not None and memo.golden_key == gkey and memo.goldens is not None:
                goldens = memo.goldens
            else:
                with user_code(path, f"in {gold_name}()"):
                    goldens = _flat(gold(*(args if memo is None else _copied(args)), **gkw))
                if memo is not None:
                    memo.golden_key, memo.goldens = gkey, goldens
            for i, g in enumerate(goldens):
                if g.dtype.kind not in "biuf" and not g.dtype.name.startswith(("bfloat", "float")):
                    raise UsageError(
                        f"{os.path.basename(path)}: {gold_name}() gives golden {i} "
                        f"{_short(g)}: not a numeric array"
                    )
        progress.stage = "checking the outputs"
        return _checked(mod, path, name, res, goldens, declared, rtol, atol)


def _checked(
    mod: ModuleType,
    path: str,
    name: str,
    res: RunResult,
    goldens: list[np.ndarray] | None,
    declared: str | None,
    rtol: float | None,
    atol: float | None,
) -> FileRun:
    outputs = _flat(res.outputs)
    out = FileRun(
        path=path,
        kernel=name,
        target=res.cores[0].spec.name,
        result=res,
        outputs=outputs,
        has_golden=goldens is not None,
        unwritten=list(res.unwritten),
        unwritten_declared=declared if res.unwritten else None,
    )
    counts = Counter(i.engine.value for i in res.instructions)
    out.by_engine = dict(sorted(counts.items()))
    out.by_opcode = dict(Counter(i.opcode.value for i in res.instructions).most_common())
    unwritten_ok = not res.unwritten or declared is not None
    if goldens is None:
        out.passed = None if unwritten_ok else False
        return out
    skip: list[np.ndarray | None] = [None] * len(outputs)
    if declared is not None:
        for u in res.unwritten:
            skip[u.output] = u.mask
    out.max_abs_err, out.max_rel_err, out.nonfinite = compare(outputs, goldens, skip)
    tol = resolve_tolerance(mod, name, outputs, goldens, rtol, atol)
    out.tolerance = tol
    out.passed = (
        unwritten_ok
        and out.nonfinite == 0
        and all(
            _within(o, g, tol["rtol"], tol["atol"], m)
            for o, g, m in zip(outputs, goldens, skip, strict=True)
        )
    )
    return out
