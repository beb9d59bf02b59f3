"""Run an NKI kernel *file* the way ``trnsim run kernel.py`` does.

Kernel-file convention (every file in ``examples/kernels/`` follows it):

- The file imports NKI as on hardware (``import nki``, ``nki.language as nl``, ``nki.isa as
  nisa``) and defines one or more ``@nki.jit`` kernels. With several, ``KERNEL = "name"`` names
  the default one (else the first defined); ``--kernel NAME`` picks another.
- Inputs: ``make_inputs_<kernel>(rng, **args)`` if defined, else ``make_inputs(rng, **args)``,
  returning the kernel's positional arguments (a tuple of NumPy arrays, or one array); ``rng``
  is a ``numpy.random.Generator`` seeded by ``--seed``; ``args`` come from ``--arg KEY=VALUE``.
  A module-level ``INPUTS`` tuple may be given instead of a function.
- Optional golden: ``golden_<kernel>(*inputs)`` if defined, else ``golden(*inputs)``, returning
  the expected output(s) (same structure as the kernel's return value), computed independently
  in NumPy.
- Optional ``TOLERANCE = {"rtol": ..., "atol": ...}`` (or ``TOLERANCE_<kernel>``): the run
  passes when ``|out - golden| <= atol + rtol * |golden|`` everywhere. Without one, a default
  from the output dtype applies (``default_tolerance``), so a golden is always checked.

Errors: ``max_abs_err = max |out - golden|``; ``max_rel_err = max_abs_err / max |golden|``
(normwise, so zeros in the golden do not blow it up), over all outputs. A NaN or Inf in an
output fails the check unless the golden has the same value at the same place (the emulator
fills uninitialised memory with NaN, so an output never written is all NaN); such outputs make
both errors ``inf``.

What goes wrong is reported in one line, the kernel file's own ``file:line`` first:

- the file cannot be loaded (syntax error, an exception at import), ``make_inputs`` or
  ``golden`` raises, or a ``--arg`` / ``TOLERANCE`` value is bad: ``UsageError`` (exit 2);
- the kernel raises while running (any Python exception), breaks a rule, issues more than
  ``max_instructions`` instructions or runs past ``timeout`` seconds: ``KernelError`` (exit 1).
"""

from __future__ import annotations

import ast
import contextlib
import ctypes
import importlib.util
import inspect
import math
import os
import signal
import sys
import threading
import traceback
import types
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType, ModuleType, TracebackType
from typing import Any

import ml_dtypes
import numpy as np

from trnsim.errors import KernelError, TrnsimError, UsageError
from trnsim.nki.compat import install
from trnsim.nki.simulate import Kernel, RunResult, record_run, run
from trnsim.numerics import get_format

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
    by_engine: dict[str, int] = field(default_factory=dict)
    by_opcode: dict[str, int] = field(default_factory=dict)

    @property
    def instructions(self) -> int:
        return sum(self.by_engine.values())

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


def _user_frame(frames: list[tuple[str, int]], kernel_path: str | None) -> tuple[str, int]:
    """The innermost (file, line) in the kernel file, else outside trnsim, else innermost."""
    if kernel_path:
        kabs = os.path.abspath(kernel_path)
        for f, line in reversed(frames):
            if os.path.abspath(f) == kabs:
                return kernel_path, line
    for f, line in reversed(frames):
        if not f.startswith(_LIBRARY_DIRS) and "importlib" not in f and "<frozen" not in f:
            return f, line
    return frames[-1] if frames else ("<unknown>", 0)


def exception_location(exc: BaseException, kernel_path: str | None = None) -> tuple[str, int]:
    """(file, line) of an exception in the user's code: the kernel file's innermost frame."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return _shown(exc.filename, kernel_path), exc.lineno or 0
    tb: TracebackType | None = exc.__traceback__
    frames = [(fs.filename, fs.lineno or 0) for fs in traceback.extract_tb(tb)]
    return _user_frame(frames, kernel_path)


def frame_location(frame: FrameType | None, kernel_path: str | None = None) -> tuple[str, int]:
    """(file, line) of a running frame stack (innermost ``frame``) in the user's code."""
    frames: list[tuple[str, int]] = []
    while frame is not None:
        frames.append((frame.f_code.co_filename, frame.f_lineno))
        frame = frame.f_back
    return _user_frame(frames[::-1], kernel_path)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, SyntaxError):
        return f"SyntaxError: {exc.msg}"
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _usage(exc: BaseException, kernel_path: str, what: str) -> UsageError:
    file, line = exception_location(exc, kernel_path)
    return UsageError(f"{file}:{line}: {_describe(exc)} ({what})")


def kernel_raised(exc: BaseException, kernel_path: str | None, kernel: str) -> KernelError:
    """A Python exception raised by a kernel while it ran, as a one-line ``KernelError``."""
    file, line = exception_location(exc, kernel_path)
    err = KernelError("kernel-raised", f"{_describe(exc)}", file, line)
    err.args = (f"{file}:{line}: {_describe(exc)} (raised by kernel {kernel!r} while running)",)
    return err


# ---- loading --------------------------------------------------------------------------------


def load_module(path: str) -> ModuleType:
    """Import a kernel file (after ``install()`` so its ``import nki`` resolves to trnsim)."""
    if os.path.isdir(path):
        raise UsageError(f"kernel file {path!r} is a directory")
    if not os.path.exists(path):
        raise UsageError(f"kernel file {path!r} does not exist")
    if not os.path.isfile(path):
        raise UsageError(f"kernel file {path!r} is not a regular file")
    install()
    name = _MODULE_PREFIX + os.path.splitext(os.path.basename(path))[0].replace("-", "_")
    spec = importlib.util.spec_from_file_location(name, os.path.abspath(path))
    if spec is None or spec.loader is None:
        raise UsageError(f"cannot import {path!r} as a Python file")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    # the file's own directory comes first on sys.path while it loads, as for a script: a
    # wrapper file imports the kernel file beside it (``from foreign import kernel``)
    folder = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(mod)
    except TrnsimError:
        sys.modules.pop(name, None)
        raise
    except (Exception, SystemExit) as exc:  # the user's code: one line, not a traceback
        sys.modules.pop(name, None)
        raise _usage(exc, path, "while loading the kernel file") from None
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(folder)
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


def pick_kernel(mod: ModuleType, name: str | None) -> tuple[str, Kernel]:
    kernels = kernels_of(mod)
    if not kernels:
        raise UsageError(f"{mod.__file__} defines no @nki.jit kernel")
    if name is None:
        name = getattr(mod, "KERNEL", None) or next(iter(kernels))
    if name not in kernels:
        raise UsageError(
            f"kernel {name!r} not found in {os.path.basename(str(mod.__file__))}; "
            f"kernels: {', '.join(kernels)}"
        )
    return name, kernels[name]


# ---- inputs ---------------------------------------------------------------------------------


def parse_arg(pair: str) -> tuple[str, Any]:
    """``--arg KEY=VALUE``: VALUE is a Python literal (``4096``, ``0.5``, ``'tiled'``,
    ``(2, 3)``), or ``true``/``false``; numbers must be finite."""
    if "=" not in pair:
        raise UsageError(f"--arg {pair!r}: expected KEY=VALUE")
    key, text = (s.strip() for s in pair.split("=", 1))
    if not key.isidentifier():
        raise UsageError(f"--arg {pair!r}: {key!r} is not a parameter name")
    if text.lower() in ("true", "false"):
        return key, text.lower() == "true"
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise UsageError(
            f"--arg {key}={text}: {text!r} is not a Python literal "
            "(a number, true/false, a quoted string, a tuple)"
        ) from None
    if isinstance(value, float | complex) and not np.isfinite(value):
        raise UsageError(f"--arg {key}={text}: must be finite")
    return key, value


def parse_args(pairs: list[str]) -> dict[str, Any]:
    return dict(parse_arg(p) for p in pairs)


def inputs_for(
    mod: ModuleType, kernel: str, seed: int = 0, kwargs: dict[str, Any] | None = None
) -> tuple[Any, ...]:
    """The kernel's arguments under the kernel-file convention (make_inputs / INPUTS)."""
    kwargs = kwargs or {}
    path = str(mod.__file__)
    fn = getattr(mod, f"make_inputs_{kernel}", None) or getattr(mod, "make_inputs", None)
    if fn is not None:
        _check_callable(fn, path, "make_inputs")
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            params = {}  # type: ignore[assignment]
        takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        unknown = set(kwargs) - set(params)
        if unknown and not takes_any:
            raise UsageError(
                f"--arg {', '.join(sorted(unknown))}: {fn.__name__} has no such parameter; "
                f"parameters: {', '.join(p for p in params if p != 'rng') or 'none'}"
            )
        try:
            args = fn(np.random.default_rng(seed), **kwargs)
        except (Exception, SystemExit) as exc:
            given = " ".join(f"{k}={v!r}" for k, v in kwargs.items())
            what = f"{fn.__name__} rejected --arg {given}" if given else f"in {fn.__name__}(rng)"
            raise _usage(exc, _given_path(mod), what) from None
    elif hasattr(mod, "INPUTS"):
        if kwargs:
            raise UsageError(f"--arg given but {os.path.basename(path)} has INPUTS, no make_inputs")
        args = mod.INPUTS
    else:
        raise UsageError(no_inputs_message(mod, kernel))
    args = tuple(args) if isinstance(args, tuple | list) else (args,)
    _check_arity(mod, kernel, args, fn.__name__ if fn is not None else "INPUTS")
    for i, a in enumerate(args):
        if isinstance(a, np.ndarray) and a.size == 0:
            source = fn.__name__ if fn is not None else "INPUTS"
            raise UsageError(
                f"{os.path.basename(path)}: {source} gives input {i} of shape "
                f"{list(a.shape)}, an empty tensor (every dimension must be >= 1)"
            )
        if isinstance(a, np.ndarray):
            try:
                get_format(a.dtype)
            except Exception:
                source = fn.__name__ if fn is not None else "INPUTS"
                raise UsageError(
                    f"{os.path.basename(path)}: {source} gives input {i} of dtype {a.dtype}, "
                    "not an NKI dtype (e.g. float32, bfloat16, float8_e4m3fn, int32)"
                ) from None
    return args


def _check_callable(fn: Any, path: str, name: str) -> None:
    if not callable(fn):
        raise UsageError(
            f"{os.path.basename(path)}: {name} is {type(fn).__name__} {fn!r:.40}, not a function"
        )


# Inputs no kernel can take: a generator (make_inputs that yields), a dict, a set.
_NOT_INPUTS = (types.GeneratorType, dict, set, frozenset)


def no_inputs_message(mod: ModuleType, kernel: str) -> str:
    """The one-line error of a kernel file without inputs (a foreign kernel, say), saying how
    to add them and a golden: in the file, or in a wrapper file that imports the kernel."""
    base = os.path.basename(str(mod.__file__))
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
    target = getattr(getattr(mod, kernel, None), "fn", None)
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
    return getattr(mod, "__trnsim_path__", None) or str(mod.__file__)


# ---- bounded runs ---------------------------------------------------------------------------


@contextmanager
def time_limit(seconds: float | None, kernel_path: str | None = None) -> Iterator[None]:
    """Stop the ``with`` block after ``seconds`` of wall-clock time with a ``KernelError``
    naming the kernel's current line.

    A ``SIGALRM`` timer (main thread only; elsewhere, and with ``seconds`` None, no limit): the
    handler raises in the main thread, and in any other thread running the kernel file's code
    (LNC=2 programs) an exception is set asynchronously, so a kernel looping in plain Python
    (no instructions) stops too."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return
    message = f"kernel file ran longer than the time limit of {seconds:g} s (--timeout)"

    def on_alarm(signum: int, frame: FrameType | None) -> None:
        file, line = frame_location(frame, kernel_path)
        if not _in_kernel_file(frame):  # the main thread waits for LNC=2 programs
            others = kernel_threads()
            if others:
                file, line = frame_location(others[0][1], kernel_path)
        stop_kernel_threads(_timeout_type(message, file, line))
        if kernel_path and os.path.abspath(file) != os.path.abspath(kernel_path):
            # stopped inside trnsim (loading, simulating, comparing): no kernel line to name
            where = f"{os.path.basename(kernel_path)}, stopped in trnsim outside the file's code"
            raise KernelError("timeout", f"{message} ({where})")
        raise KernelError("timeout", message, file, line)

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, MIN_TIMEOUT_S))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _in_kernel_file(frame: FrameType | None) -> bool:
    """Whether a frame stack runs code of a kernel file (a module ``load_module`` made)."""
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).startswith(_MODULE_PREFIX):
            return True
        frame = frame.f_back
    return False


def kernel_threads() -> list[tuple[int, FrameType]]:
    """(thread id, frame) of every thread but this one running a kernel file's code."""
    me = threading.get_ident()
    return [
        (tid, frame)
        for tid, frame in sys._current_frames().items()
        if tid != me and _in_kernel_file(frame)
    ]


def stop_kernel_threads(exc_type: type[BaseException]) -> None:
    """Raise ``exc_type`` asynchronously in every other thread running kernel code (the
    programs of an LNC=2 launch), so an interrupted or timed-out run does not leave them
    running (the interpreter would wait for them at exit)."""
    for tid, _ in kernel_threads():
        _raise_in_thread(tid, exc_type)


def _timeout_type(message: str, file: str, line: int) -> type[KernelError]:
    class KernelTimeout(KernelError):  # raised with no arguments by the interpreter
        def __init__(self) -> None:
            super().__init__("timeout", message, file, line)

    return KernelTimeout


def _raise_in_thread(thread_id: int, exc_type: type[BaseException]) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(exc_type)
    )


# ---- checking -------------------------------------------------------------------------------


def _flat(x: Any) -> list[np.ndarray]:
    if isinstance(x, tuple | list):
        return [a for y in x for a in _flat(y)]
    if isinstance(x, dict):
        return [a for y in x.values() for a in _flat(y)]
    return [np.asarray(x)]


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


def compare(outputs: list[np.ndarray], goldens: list[np.ndarray]) -> tuple[float, float, int]:
    """(max abs error, normwise max relative error, non-finite mismatches), in float64.

    Elements where both sides are NaN (or the same Inf) are equal; a NaN or Inf in the output
    where the golden is anything else makes both errors ``inf``."""
    if len(outputs) != len(goldens):
        raise KernelError(
            "golden", f"kernel returned {len(outputs)} outputs, golden {len(goldens)}"
        )
    abs_err, scale, bad = 0.0, 0.0, 0
    for o, g in zip(outputs, goldens, strict=True):
        o64, g64 = _as_float64(o, g)
        bad += int(np.count_nonzero(_nonfinite_mismatch(o64, g64)))
        both = np.isfinite(o64) & np.isfinite(g64)
        # a finite output where the golden is NaN/Inf is a mismatch too
        bad += int(np.count_nonzero(~np.isfinite(g64) & np.isfinite(o64)))
        with np.errstate(invalid="ignore", over="ignore"):  # inf - inf where both are inf
            diff = np.abs(o64 - g64)
        abs_err = max(abs_err, float(np.max(diff, where=both, initial=0.0)))
        scale = max(scale, float(np.max(np.abs(g64), where=np.isfinite(g64), initial=0.0)))
    if bad:
        return math.inf, math.inf, bad
    return abs_err, (abs_err / scale if scale > 0 else abs_err), 0


def _within(o: np.ndarray, g: np.ndarray, rtol: float, atol: float) -> bool:
    o64, g64 = _as_float64(o, g)
    same = (np.isnan(o64) & np.isnan(g64)) | (np.isinf(o64) & (o64 == g64))
    with np.errstate(invalid="ignore", over="ignore"):
        close = np.abs(o64 - g64) <= atol + rtol * np.abs(g64)  # False wherever a NaN is
    return bool(np.all(same | close))


def _checked_tolerance(tol: Any, where: str) -> dict[str, float]:
    if not isinstance(tol, dict) or set(tol) - {"rtol", "atol"}:
        raise UsageError(f"{where}: expected a dict with keys 'rtol' and/or 'atol', got {tol!r}")
    out = {}
    for key, value in tol.items():
        try:
            v = float(value)
        except (TypeError, ValueError):
            raise UsageError(f"{where}: {key} {value!r} is not a number") from None
        if not math.isfinite(v) or v < 0:
            raise UsageError(f"{where}: {key} {value!r} must be a finite number >= 0")
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
    name = f"TOLERANCE_{kernel}" if hasattr(mod, f"TOLERANCE_{kernel}") else "TOLERANCE"
    given = getattr(mod, name, None)
    where = f"{os.path.basename(str(mod.__file__))}: {name}"
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
    exception from the kernel's own code as a one-line ``KernelError`` at the kernel's line."""
    runner = record_run if options.pop("record_only", False) else run
    if runner is record_run:
        options.pop("functional", None)
    try:
        return runner(k, *args, **options)
    except TrnsimError:
        raise
    except (Exception, SystemExit) as exc:  # a sys.exit() in a kernel is its error too
        raise kernel_raised(exc, _given_path(mod), name) from None


def load(path: str) -> ModuleType:
    """``load_module`` remembering the path as the user gave it (for ``file:line``)."""
    mod = load_module(path)
    mod.__trnsim_path__ = path  # type: ignore[attr-defined]
    return mod


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
) -> FileRun:
    """Run one kernel of a kernel file on the emulator and compare it with its golden.

    ``timeout`` bounds the whole file's code: loading, ``make_inputs``, the kernel, ``golden``."""
    with time_limit(timeout, path):
        mod = load(path)
        name, k = pick_kernel(mod, kernel)
        args = inputs_for(mod, name, seed, kwargs)
        res = run_kernel(mod, name, k, args, target=target, max_instructions=max_instructions)
        gold = getattr(mod, f"golden_{name}", None) or getattr(mod, "golden", None)
        goldens = None
        if gold is not None:
            _check_callable(
                gold, path, f"golden_{name}" if hasattr(mod, f"golden_{name}") else "golden"
            )
            try:
                goldens = _flat(gold(*args))
            except (Exception, SystemExit) as exc:
                raise _usage(exc, path, f"in {gold.__name__}()") from None
            for i, g in enumerate(goldens):
                if g.dtype.kind not in "biuf" and not g.dtype.name.startswith(("bfloat", "float")):
                    raise UsageError(
                        f"{os.path.basename(path)}: {gold.__name__}() gives golden {i} "
                        f"{_short(g)}: not a numeric array"
                    )
    outputs = _flat(res.outputs)
    out = FileRun(
        path=path,
        kernel=name,
        target=res.cores[0].spec.name,
        result=res,
        outputs=outputs,
        has_golden=False,
    )
    counts = Counter(i.engine.value for i in res.instructions)
    out.by_engine = dict(sorted(counts.items()))
    out.by_opcode = dict(Counter(i.opcode.value for i in res.instructions).most_common())
    if goldens is None:
        return out
    out.has_golden = True
    out.max_abs_err, out.max_rel_err, out.nonfinite = compare(outputs, goldens)
    tol = resolve_tolerance(mod, name, outputs, goldens, rtol, atol)
    out.tolerance = tol
    out.passed = out.nonfinite == 0 and all(
        _within(o, g, tol["rtol"], tol["atol"]) for o, g in zip(outputs, goldens, strict=True)
    )
    return out
