"""Run conformance cases: public kernels from a local checkout, unmodified, against references
written here.

A cases module (``cases_library``, ``cases_samples``, ``cases_legacy``...) is a module with one
name, ``CASES: list[Case]``; ``CASE_MODULES`` lists them. ``run_checkout(path)`` finds which
checkout ``path`` is, imports each case's kernel from that checkout (never a copy), calls it on
the case's inputs, compares with the case's reference and classifies the result:

- ``pass``: every output within ``rtol``/``atol`` of the reference (NaN never passes);
- ``mismatch``: it ran, and the numbers differ (the max error is reported): a bug to find;
- ``trnsim-missing``: the kernel uses NKI surface trnsim does not emulate yet (the name);
- ``kernel-error``: trnsim found an illegal use (rule, values, the kernel's file:line);
- ``trnsim-error``: a Python exception inside trnsim itself (a trnsim bug);
- ``external``: a failure outside trnsim and the kernel's NKI use (a syntax error in the
  library, an import of torch or another package not installed).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trnsim.conformance.case import Call, Case
from trnsim.conformance.refs import Bounds
from trnsim.errors import KernelError, Stop, UsageError
from trnsim.nki.kernelfile import describe, safe_text

CASE_MODULES = (
    "trnsim.conformance.cases_library",
    "trnsim.conformance.cases_library_tkg",
    "trnsim.conformance.cases_library_moe",
    "trnsim.conformance.cases_library_mx",
    "trnsim.conformance.cases_library_bwd",
    "trnsim.conformance.cases_library_utils",
    "trnsim.conformance.cases_library_coll",
    "trnsim.conformance.cases_library_attn",
    "trnsim.conformance.cases_library_moetkg",
    "trnsim.conformance.cases_samples",
    "trnsim.conformance.cases_legacy",
)
"""Every module that holds a ``CASES`` list; one that does not exist yet is skipped."""

OUTCOMES = ("pass", "mismatch", "trnsim-missing", "kernel-error", "trnsim-error", "external")

# checkout name -> (a path inside it that identifies it, the import roots under it)
CHECKOUTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "nki-library": ("src/nkilib_src/nkilib/__init__.py", ("src/nkilib_src",)),
    "nki-samples": ("src/nki_samples/tutorials", ()),
    "sdk": ("nki/api", ()),
    "sdk226": ("general/nki", ()),
}

_TRNSIM_DIR = str(Path(__file__).resolve().parents[1]) + os.sep
_NKI_NAMES = ("nki", "neuronxcc")
_NKI_ENUMS = ("nc_version", "engine", "dge_mode", "oob_mode", "reduce_cmd", "matmul_perf_mode")


def all_cases() -> list[Case]:
    """Every case of every existing cases module (names must be unique)."""
    cases: list[Case] = []
    for name in CASE_MODULES:
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            raise
        cases.extend(mod.CASES)
    seen: set[str] = set()
    for c in cases:
        if c.name in seen:
            raise ValueError(f"duplicate conformance case name {c.name!r}")
        seen.add(c.name)
    return cases


def detect_checkout(path: str | os.PathLike[str]) -> str:
    """Which checkout ``path`` is (a key of ``CHECKOUTS``); ``UsageError`` if none."""
    root = Path(path)
    if not root.is_dir():
        raise UsageError(f"PATH {str(root)!r} is not a directory")
    for name, (marker, _) in CHECKOUTS.items():
        if (root / marker).exists():
            return name
    raise UsageError(
        f"PATH {str(root)!r} is not a checkout trnsim knows (looked for "
        + ", ".join(f"{m} ({n})" for n, (m, _) in CHECKOUTS.items())
        + ")"
    )


@dataclass
class Result:
    """One case's outcome."""

    name: str
    kernel: str
    path: str
    shapes: str
    outcome: str
    max_error: float | None
    seconds: float
    detail: str = ""
    location: str = ""
    profile_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kernel": self.kernel,
            "path": self.path,
            "shapes": self.shapes,
            "outcome": self.outcome,
            "max_error": self.max_error,
            "seconds": self.seconds,
            "detail": self.detail,
            "location": self.location,
            "profile_s": self.profile_s,
        }


def describe_inputs(inputs: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """``"bfloat16[128,512], float32[128,1], 2"``: the call's argument shapes."""

    def one(x: Any) -> str:
        if isinstance(x, np.ndarray):
            return f"{x.dtype}[{','.join(str(n) for n in x.shape)}]"
        if isinstance(x, tuple | list) and x and all(isinstance(y, np.ndarray) for y in x):
            return "(" + ", ".join(one(y) for y in x) + ")"
        return repr(x) if not callable(x) else getattr(x, "__name__", "fn")

    parts = [one(x) for x in inputs] + [f"{k}={one(v)}" for k, v in kwargs.items()]
    return ", ".join(parts)


def _flat(x: Any) -> list[Any]:
    if isinstance(x, tuple | list):
        return [y for z in x for y in _flat(z)]
    if isinstance(x, dict):
        return [y for k in sorted(x) for y in _flat(x[k])]
    return [x]


def compare(out: Any, ref: Any, rtol: float, atol: float) -> tuple[bool, float | None, str]:
    """(passed, max abs error, why not). NaN or a shape difference never passes. A reference
    output given as ``Bounds``: the error is the distance outside the interval."""
    outs, refs = _flat(out), _flat(ref)
    if len(outs) != len(refs):
        return False, None, f"{len(outs)} outputs, the reference has {len(refs)}"
    worst = 0.0
    ok = True
    why = ""
    for i, (o, r) in enumerate(zip(outs, refs, strict=True)):
        if r is None:  # an output the reference does not check (documented in the case)
            continue
        if isinstance(r, Bounds):
            o64 = np.asarray(o).astype(np.float64)
            lo, hi = r.lo.astype(np.float64), r.hi.astype(np.float64)
            if o64.shape != lo.shape:
                shapes = f"shape {list(o64.shape)}, reference {list(lo.shape)}"
                return False, None, f"output {i}: {shapes}"
            if not np.isfinite(o64).all():
                return False, None, f"output {i}: non-finite values"
            out = np.maximum(lo - o64, o64 - hi).clip(min=0)  # distance outside [lo, hi]
            worst = max(worst, float(out.max()) if out.size else 0.0)
            tol = atol + rtol * np.maximum(np.abs(lo), np.abs(hi))
            bad = out > tol
            if bad.any():
                ok = False
                why = why or f"output {i}: {int(bad.sum())} of {out.size} elements outside bounds"
            continue
        o = np.asarray(o)
        r = np.asarray(r)
        if o.shape != r.shape:
            return False, None, f"output {i}: shape {list(o.shape)}, reference {list(r.shape)}"
        o64, r64 = o.astype(np.float64), r.astype(np.float64)
        if not np.isfinite(o64[np.isfinite(r64)]).all():
            return False, None, f"output {i}: non-finite values where the reference is finite"
        finite = np.isfinite(r64)
        if (o64[~finite] != r64[~finite]).any():
            return False, None, f"output {i}: differs where the reference is non-finite"
        diff = np.abs(o64[finite] - r64[finite])
        if diff.size:
            worst = max(worst, float(diff.max()))
            bad = diff > atol + rtol * np.abs(r64[finite])
            if bad.any():
                ok = False
                why = why or f"output {i}: {int(bad.sum())} of {diff.size} elements out of tol"
    return ok, worst, why


_ASSERT_HELPERS = ("kernel_assert", "assert_shape")
"""nki-library's validation helpers (``core/utils/kernel_assert.py``): a failed check is located
at the line that called them, not at their own ``assert``."""


def _location(tb: Any, root: Path) -> str:
    """file:line of the innermost frame inside the checkout (the kernel's own line), skipping
    the library's assertion helpers."""
    where = ""
    for frame in traceback.extract_tb(tb):
        if frame.name in _ASSERT_HELPERS and where:
            break
        if str(Path(frame.filename).resolve()).startswith(str(root)):
            where = f"{Path(frame.filename).resolve().relative_to(root)}:{frame.lineno}"
    return where


def classify(exc: BaseException, root: Path) -> tuple[str, str, str]:
    """(outcome, detail, location) of a failed case (any exception, ``BaseException``
    subclasses such as a library's ``SystemExit`` at import included)."""
    loc = _location(exc.__traceback__, root)
    msg = describe(exc)
    if isinstance(exc, KernelError):
        file = exc.kernel_file
        kernel_loc = f"{file}:{exc.kernel_line}" if file else loc
        kernel_loc = kernel_loc.replace(str(root) + os.sep, "")
        missing = exc.rule == "not-implemented"
        return ("trnsim-missing" if missing else "kernel-error"), safe_text(exc), kernel_loc
    if isinstance(exc, SyntaxError):
        file = str(exc.filename or "").replace(str(root) + os.sep, "")
        where = f"{file}:{exc.lineno}"
        return "external", f"{type(exc).__name__} in the library: {safe_text(exc.msg)}", where
    if not isinstance(exc, Exception):  # SystemExit, KeyboardInterrupt... raised by the code
        return "kernel-error", msg, loc
    if isinstance(exc, ImportError):
        mod = (exc.name or "").split(".")[0]
        if mod in _NKI_NAMES or mod == "trnsim":
            return "trnsim-missing", msg, loc
        if mod and mod not in ("nkilib",):
            return "external", f"imports {exc.name!r}, not installed here", loc
        return "trnsim-missing", msg, loc
    text = safe_text(exc)
    if isinstance(exc, TypeError) and "unexpected keyword argument" in text:
        return "trnsim-missing", msg, loc  # a documented keyword trnsim does not take yet
    if isinstance(exc, TypeError) and any(f"'{e}'" in text for e in _NKI_ENUMS):
        return "trnsim-missing", msg, loc  # an operation on an nki.isa enum trnsim lacks
    frames = traceback.extract_tb(exc.__traceback__)
    innermost = frames[-1].filename if frames else ""
    if isinstance(exc, AttributeError) and ("trnsim" in text or "nki" in text):
        return "trnsim-missing", msg, loc
    if innermost.startswith(_TRNSIM_DIR):
        return "trnsim-error", f"{msg} (trnsim {Path(innermost).name}:{frames[-1].lineno})", loc
    return "kernel-error", msg, loc


@contextmanager
def checkout_imports(
    root: Path, checkout: str, roots: tuple[str, ...] | None = None
) -> Iterator[None]:
    """The checkout's import roots on ``sys.path`` (``roots``, else the known checkout's) and
    trnsim's ``nki`` installed; afterwards every module imported from the checkout is
    forgotten (the next run imports afresh)."""
    from trnsim.nki import compat

    extra = [str(root / p) for p in (CHECKOUTS[checkout][1] if roots is None else roots)]
    before_path = list(sys.path)
    before_mods = set(sys.modules)
    compat.install()
    sys.path[:0] = extra
    try:
        yield
    finally:
        sys.path[:] = before_path
        for name in set(sys.modules) - before_mods:
            file = getattr(sys.modules[name], "__file__", None) or ""
            if str(Path(file).resolve()).startswith(str(root)):
                del sys.modules[name]


def load_kernel(case: Case, root: Path, roots: tuple[str, ...] | None = None) -> Any:
    """Import the case's file from the checkout (as a package module when it sits under an
    import root, ``roots`` or the known checkout's, else with its directory on ``sys.path``)
    and return ``case.kernel``."""
    file = (root / case.path).resolve()
    if not file.is_file():
        raise FileNotFoundError(f"{case.path} is not in this checkout")
    for imp_root in CHECKOUTS.get(case.repo, ("", ()))[1] if roots is None else roots:
        base = (root / imp_root).resolve()
        if str(file).startswith(str(base) + os.sep):
            modname = ".".join(file.relative_to(base).with_suffix("").parts)
            mod = importlib.import_module(modname)
            break
    else:
        folder = str(file.parent)
        if folder not in sys.path:
            sys.path.insert(0, folder)
        modname = "_conformance_" + "_".join(file.relative_to(root).with_suffix("").parts)
        modname = modname.replace("-", "_")
        spec = importlib.util.spec_from_file_location(modname, file)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[modname] = mod
        spec.loader.exec_module(mod)
    obj: Any = mod
    for part in case.kernel.split("."):
        obj = getattr(obj, part)
    return obj


def _launchable(kernel: Any, case: Case) -> Any:
    from trnsim.nki.simulate import Kernel

    if case.driver is not None:  # a kernel written here around the unmodified one
        kernel = case.driver(kernel)
    if not isinstance(kernel, Kernel):
        kernel = Kernel(kernel)
    if case.grid is not None:
        kernel = kernel[case.grid]
    return kernel


def _copied(x: Any) -> Any:
    """A kernel's own copy of an input (arrays, and arrays in lists and tuples), so what the
    kernel writes in place never reaches the reference's inputs."""
    if isinstance(x, np.ndarray):
        return np.array(x, copy=True)
    if isinstance(x, list | tuple) and not hasattr(x, "_fields"):
        return type(x)(_copied(y) for y in x)
    return x


def run_case(
    case: Case,
    root: Path,
    seed: int = 0,
    profile: bool = False,
    roots: tuple[str, ...] | None = None,
) -> Result:
    """Run one case from the checkout at ``root`` (import roots ``roots``, else the known
    checkout's) and classify it."""
    from trnsim.nki.simulate import observe_runs, run

    root = root.resolve()
    rng = np.random.default_rng(seed)
    res = Result(case.name, case.kernel, case.path, "", "pass", None, 0.0)
    t0 = time.perf_counter()
    try:
        made = case.inputs(rng)
    except Stop:
        raise
    except BaseException as exc:  # building inputs may import the library's own classes
        res.outcome, res.detail, res.location = classify(exc, root)
        return res
    if case.ranks is not None:
        return _run_ranked(case, made, root, res, t0, profile, roots)
    inputs, kwargs = _arguments(case, made)
    res.shapes = describe_inputs(inputs, kwargs)
    args = [_copied(a) for a in inputs]
    kw = {k: _copied(v) for k, v in kwargs.items()}
    try:
        kernel = _launchable(load_kernel(case, root, roots), case)
        with observe_runs() as launches:
            result = run(
                kernel, *args, target=case.target, allow_unwritten=case.unwritten or False, **kw
            )
        out = result.outputs
        if case.out_args:  # output buffers passed in: run() wrote them back into ``args``
            outs = tuple(args[i] for i in case.out_args)
            out = outs[0] if len(outs) == 1 else outs
    except Stop:
        raise
    except BaseException as exc:  # a library's SystemExit at import is the case's failure
        res.outcome, res.detail, res.location = classify(exc, root)
        res.seconds = time.perf_counter() - t0
        return res
    res.seconds = time.perf_counter() - t0
    if _checked(res, case, out, lambda: case.reference(*inputs, **kwargs)) and profile:
        # the functional run's own record: data-dependent control flow (registers, indirect
        # offsets) took the paths the data chose, which a timing-only run cannot know
        # a kernel caller's own run records nothing: its launches (run one after another)
        # hold the instructions; a kernel's own run is the last launch to finish
        _profile(res, root, launches, sum)
    return res


def _run_ranked(
    case: Case,
    made: Any,
    root: Path,
    res: Result,
    t0: float,
    profile: bool,
    roots: tuple[str, ...] | None = None,
) -> Result:
    """``run_case`` for a multi-rank case: ``made`` holds one argument tuple (or ``Call``) per
    rank; the kernel runs as ``case.ranks`` launches (``run_ranks``)."""
    from trnsim.nki.simulate import run_ranks

    per_rank = [_arguments(case, m) for m in made]
    if len(per_rank) != case.ranks:
        res.outcome = "trnsim-error"
        res.detail = f"the case made inputs for {len(per_rank)} ranks, not {case.ranks}"
        return res
    res.shapes = describe_inputs(*per_rank[0]) + f" (x {case.ranks} ranks)"
    calls = [
        (tuple(_copied(a) for a in args), {k: _copied(v) for k, v in kw.items()})
        for args, kw in per_rank
    ]
    try:
        kernel = _launchable(load_kernel(case, root, roots), case)
        runs = run_ranks(kernel, calls, target=case.target, allow_unwritten=case.unwritten or False)
        out = [r.outputs for r in runs]
    except Stop:
        raise
    except BaseException as exc:
        res.outcome, res.detail, res.location = classify(exc, root)
        res.seconds = time.perf_counter() - t0
        return res
    res.seconds = time.perf_counter() - t0

    def reference() -> Any:
        return case.reference([args for args, _ in per_rank])

    if _checked(res, case, out, reference) and profile:
        _profile(res, root, runs, max)  # the ranks run side by side: the slowest one's time
    return res


def _arguments(case: Case, made: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The positional and keyword arguments of one call (``Case.inputs``' tuple or ``Call``;
    the case's ``kwargs`` under the call's own)."""
    if isinstance(made, Call):
        return tuple(made.args), {**case.kwargs, **made.kwargs}
    return tuple(made), dict(case.kwargs)


def _checked(res: Result, case: Case, out: Any, reference: Callable[[], Any]) -> bool:
    """Compare ``out`` with the case's reference; record a failure in ``res`` (False)."""
    try:
        ref = reference()
    except Stop:
        raise
    except BaseException as exc:  # the reference is ours: a bug here is a trnsim bug
        res.outcome = "trnsim-error"
        res.detail = f"reference failed: {describe(exc)}"
        return False
    if case.decode is not None:
        out = case.decode(out)
    ok, err, why = compare(out, ref, case.rtol, case.atol)
    res.max_error = err
    if not ok:
        res.outcome, res.detail = "mismatch", why
    return ok


def _profile(res: Result, root: Path, runs: Any, combine: Callable[..., float]) -> None:
    """``res.profile_s``: the runs' modelled times (each run's own record), combined."""
    from trnsim.core.timing import schedule

    try:
        res.profile_s = combine(
            schedule(r.instructions, r.cores[0].spec).total_s for r in runs if r.instructions
        )
    except Stop:
        raise
    except BaseException as exc:
        res.outcome, res.detail, res.location = classify(exc, root)
        res.detail = "profile: " + res.detail


def run_checkout(
    path: str | os.PathLike[str],
    only: str | None = None,
    seed: int = 0,
    profile: bool = False,
    on_result: Callable[[Result], None] | None = None,
    verbose: bool = False,
    cases_file: str | os.PathLike[str] | None = None,
) -> tuple[str, str, list[Result]]:
    """Run every case of the checkout at ``path`` -> (checkout name, its commit, results).

    ``only``: run just the cases whose name contains it. ``cases_file``: run the cases of
    that file (``load_cases_file``) on ``path``, any directory, instead of trnsim's own. What
    the kernels print (nki-library's ``[INFO]`` logger prints to stdout) is dropped unless
    ``verbose``, then it goes to stderr; nki-library's logger is also set to warnings only
    (``NKILIB_LOG_LEVEL=WARN``) unless the environment sets it."""
    roots: tuple[str, ...] | None = None
    if cases_file is not None:
        root = Path(path)
        if not root.is_dir():
            raise UsageError(f"PATH {str(root)!r} is not a directory")
        root = root.resolve()
        cases, roots = load_cases_file(cases_file, root)
        checkout = root.name
    else:
        checkout = detect_checkout(path)
        root = Path(path).resolve()
        cases = [c for c in all_cases() if c.repo == checkout]
    if only:
        cases = [c for c in cases if only in c.name]
        if not cases:
            raise UsageError(f"--only {only!r} matches no case of {checkout}")
    results = []
    # a kernel's own prints go to stderr: stdout carries the table or the JSON; files a kernel
    # writes where it runs (nki-samples' attn_fwd_v10: @baremetal(save_neff_name=...)) go to a
    # scratch directory, not the user's
    with (
        _library_log_level(verbose),
        checkout_imports(root, checkout, roots),
        redirect_stdout(sys.stderr if verbose else io.StringIO()),
        tempfile.TemporaryDirectory(prefix="trnsim-conformance-") as scratch,
        contextlib.chdir(scratch),
    ):
        for case in cases:
            r = run_case(case, root, seed=seed, profile=profile, roots=roots)
            results.append(r)
            if on_result:
                on_result(r)
    return checkout, commit_of(root), results


@contextmanager
def _library_log_level(verbose: bool) -> Iterator[None]:
    """nki-library's own logger (``nkilib.core.utils.logging``) reads ``NKILIB_LOG_LEVEL`` when
    it is imported: WARN while the checkout runs, unless verbose or the user set it."""
    if verbose or "NKILIB_LOG_LEVEL" in os.environ:
        yield
        return
    os.environ["NKILIB_LOG_LEVEL"] = "WARN"
    try:
        yield
    finally:
        os.environ.pop("NKILIB_LOG_LEVEL", None)


CASES_FILE_HELP = (
    "a cases file is Python: 'from trnsim.conformance import Case', then 'CASES = [Case(name, "
    "repo, path, kernel, inputs, reference, ...)]' with path relative to PATH (optional "
    "IMPORT_ROOTS = ['src']); see the README, 'Bring your own kernels'"
)


def load_cases_file(file: str | os.PathLike[str], root: Path) -> tuple[list[Case], tuple[str, ...]]:
    """The cases of a user's cases file (a Python file defining ``CASES``, a list of ``Case``,
    and optionally ``IMPORT_ROOTS``, directories under ``root`` to import the kernels' files
    as packages from), checked against the checkout at ``root``. Anything wrong is one
    ``UsageError`` line naming the file (and line), the rule and the values."""
    import ast

    path = Path(file)
    where = str(file)
    if not path.is_file():
        raise UsageError(f"--cases {where!r}: no such file ({CASES_FILE_HELP})")
    try:
        text = path.read_text()
        tree = ast.parse(text, filename=where)
    except SyntaxError as exc:
        raise UsageError(f"{where}:{exc.lineno}: SyntaxError: {exc.msg}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--cases {where!r}: cannot read it: {exc}") from None
    del tree
    modname = "_trnsim_cases_" + "".join(ch if ch.isalnum() else "_" for ch in path.stem)
    spec = importlib.util.spec_from_file_location(modname, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except Exception as exc:
        tb = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == str(path)]
        line = f":{tb[-1].lineno}" if tb else ""
        msg = f"{type(exc).__name__}: {exc}".splitlines()[0]
        raise UsageError(f"{where}{line}: loading the cases file raised {msg}") from None
    cases = getattr(mod, "CASES", None)
    if cases is None:
        raise UsageError(f"{where} defines no CASES ({CASES_FILE_HELP})")
    if not isinstance(cases, list | tuple) or not cases:
        raise UsageError(
            f"{where}: CASES must be a non-empty list of Case, got {type(cases).__name__}"
            + (" (empty)" if isinstance(cases, list | tuple) else "")
        )
    roots = getattr(mod, "IMPORT_ROOTS", ("",))
    if not isinstance(roots, list | tuple) or not all(isinstance(r, str) for r in roots):
        raise UsageError(f"{where}: IMPORT_ROOTS must be a list of directory names under PATH")
    for r in roots:
        if not (root / r).is_dir():
            raise UsageError(f"{where}: IMPORT_ROOTS entry {r!r} is not a directory in {root}")
    seen: set[str] = set()
    for i, c in enumerate(cases):
        if not isinstance(c, Case):
            raise UsageError(
                f"{where}: CASES[{i}] is a {type(c).__name__}, not a trnsim.conformance.Case"
            )
        if not c.name or c.name in seen:
            raise UsageError(
                f"{where}: CASES[{i}] "
                + (f"repeats the name {c.name!r}" if c.name else "has no name")
            )
        seen.add(c.name)
        for attr in ("inputs", "reference"):
            if not callable(getattr(c, attr)):
                raise UsageError(f"{where}: case {c.name!r}: {attr} must be a function")
        kfile = root / c.path
        if not kfile.is_file():
            raise UsageError(f"{where}: case {c.name!r}: {c.path!r} is not a file in {root}")
        if not _defines(kfile, c.kernel.split(".")[0]):
            raise UsageError(
                f"{where}: case {c.name!r}: {c.path} defines no {c.kernel.split('.')[0]!r} "
                "at module level"
            )
        if c.target not in ("gen2", "gen3", "gen4", "trn1", "trn2", "trn3"):
            raise UsageError(
                f"{where}: case {c.name!r}: target {c.target!r} is not gen2, gen3 or gen4"
            )
        if not (c.rtol >= 0 and c.atol >= 0):
            raise UsageError(f"{where}: case {c.name!r}: rtol and atol must be >= 0")
    return list(cases), tuple(roots)


def _defines(file: Path, name: str) -> bool:
    """Whether a Python file binds ``name`` at module level (a def, class, assignment or
    import), read with ``ast`` (not executed)."""
    import ast

    try:
        tree = ast.parse(file.read_text(), filename=str(file))
    except (SyntaxError, OSError, UnicodeDecodeError):
        return True  # the run reports it (an ``external`` syntax error)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.name == name:
                return True
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(t)):
                    return True
        elif isinstance(node, ast.Import | ast.ImportFrom):
            if any((a.asname or a.name.split(".")[0]) == name for a in node.names):
                return True
        elif isinstance(node, ast.If | ast.Try | ast.With) and any(
            isinstance(n, ast.FunctionDef | ast.ClassDef) and n.name == name for n in ast.walk(node)
        ):
            return True
    return False


def commit_of(root: Path) -> str:
    """The checkout's HEAD commit (short), or ``"unknown"`` (not a git checkout)."""
    import subprocess

    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() or "unknown"
