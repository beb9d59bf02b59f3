"""Calibration of the timing model on public measurements: kernels run unmodified from local
checkouts, timed by ``trnsim.core.timing``, against the latencies their authors measured.

A row (``TimingRow``) is a measured latency with its source (the file in the checkout that
holds it, and the commit it was read at), the instance and statistic, the kernel launch(es)
that produced it (``Launch``: a kernel in the checkout and the arguments of the measured run),
and a numerics check (``Check``: the same kernel on inputs, against a NumPy reference written
here). The rows are data (``trnsim.conformance.timing_rows.ROWS``); ``run_rows`` runs them:
each check functionally, each launch timing-only at the measured shape, the launches' modelled
latencies added (a row measured as two launches, such as an unfused MLP, is two launches),
then every row's error and the MAPE. ``trnsim calibrate ROOT`` is the command.

Kernels come from the checkouts, never copied: a kernel file is imported from its checkout;
an Autocomp candidate is the ``code`` string of one ``CodeCandidate`` in a search trace
(``examples/trn-*/*_trace.py``), read with ``ast`` (the trace is never executed) and run with
the imports of the harness Autocomp measured it in (``harnesses/trn-*/..._test.py``).
"""

from __future__ import annotations

import ast
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from trnsim.errors import UsageError

CHECKOUT_MARKERS: dict[str, str] = {
    "autocomp": "examples/trn-tutorial",
    "trainium-kernel-fusion": "kernels/fused/attention.py",
    "sdk226": "general/nki",
}
"""Checkout name -> a path inside it that identifies it (``ROOT/<name>`` is looked for)."""


DEFECT = "source-defect"
"""A row's outcome where its public source cannot be what ran (``TimingRow.defect``)."""


@dataclass(frozen=True)
class KernelRef:
    """Where a kernel is in its checkout: ``path`` (a kernel file) and ``name`` (the function),
    or, for an Autocomp search trace, ``path`` (the trace), ``candidate`` (its index in the
    chain of ``CodeCandidate``s, 0 the baseline) and ``harness`` (the harness file whose
    imports the candidate's code expects); ``name`` is then the function the code defines.
    ``intact``: a file holding the same candidate's code whole, read instead of the trace's
    text where that text is damaged (Autocomp's ``*_opt.py`` is each trace's final kernel;
    ``timing_rows`` says per row what differs and a test checks it)."""

    path: str
    name: str
    candidate: int | None = None
    harness: str | None = None
    intact: str | None = None

    def describe(self) -> str:
        if self.candidate is None:
            return f"{self.path}::{self.name}"
        return f"{self.path}[{self.candidate}]::{self.name}"


@dataclass(frozen=True)
class Launch:
    """One measured launch: the kernel, and its arguments at the measured shape
    (``args()``: arrays, ``nt.tensor`` placeholders or scalars; ``kwargs``)."""

    kernel: KernelRef
    args: Callable[[], tuple[Any, ...]]
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Check:
    """The kernel's numerics, on the row's target: ``inputs(rng)`` (positional arguments),
    ``reference(*inputs, **kwargs)`` written here in NumPy, within ``rtol``/``atol``. ``key``
    names the check shared by rows timing the same kernel at other shapes (it runs once)."""

    key: str
    kernel: KernelRef
    inputs: Callable[[np.random.Generator], tuple[Any, ...]]
    reference: Callable[..., Any]
    rtol: float
    atol: float
    kwargs: dict[str, Any] = field(default_factory=dict)
    chain: tuple[KernelRef, ...] = ()
    """Further kernels the output goes through, in order (a two-launch pipeline)."""


@dataclass(frozen=True)
class TimingRow:
    """One published latency and how trnsim reproduces it."""

    name: str
    repo: str
    source: str
    commit: str
    measured_s: float
    statistic: str
    instance: str
    target: str
    toolchain: str
    launches: tuple[Launch, ...]
    check: Check | None
    notes: str = ""
    defect: str = ""
    """Non-empty where the public source holds code that cannot have been what was measured
    (the evidence, stated): the row is reported with it and neither run nor timed."""
    check_note: str = ""
    """Non-empty where the check is expected to fail because of the kernel's own arithmetic
    (the evidence, stated): a mismatch is reported with it; a pass is reported as a pass."""


@dataclass
class RowResult:
    """What ``run_rows`` found for one row."""

    name: str
    repo: str
    source: str
    instance: str
    target: str
    measured_s: float
    modelled_s: float | None = None
    check: str = ""  # "pass", "mismatch: ...", "error: ...", "" (no check)
    max_error: float | None = None
    error: str = ""  # why the row could not be timed
    seconds: float = 0.0
    profile: dict[str, Any] | None = None

    @property
    def source_defect(self) -> bool:
        """The row was not run: its public source cannot be what ran (``TimingRow.defect``)."""
        return self.error.startswith(DEFECT + ":")

    @property
    def rel_error(self) -> float | None:
        if self.modelled_s is None:
            return None
        return self.modelled_s / self.measured_s - 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "repo": self.repo,
            "source": self.source,
            "instance": self.instance,
            "target": self.target,
            "measured_s": self.measured_s,
            "modelled_s": self.modelled_s,
            "rel_error": self.rel_error,
            "check": self.check,
            "max_error": self.max_error,
            "error": self.error,
            "seconds": self.seconds,
            "profile": self.profile,
        }


def mape(results: list[RowResult]) -> float | None:
    """Mean absolute relative error over the rows that were timed."""
    errs = [abs(r.rel_error) for r in results if r.rel_error is not None]
    return sum(errs) / len(errs) if errs else None


# ---- checkouts and kernels -------------------------------------------------------------------


def find_checkouts(root: str | os.PathLike[str] | None, given: dict[str, str]) -> dict[str, Path]:
    """The checkouts to use: ``given`` (name -> path) over ``ROOT/<name>``; each must carry its
    marker. A name given but not a checkout, or a ROOT that is not a directory, is a
    ``UsageError``; a checkout missing under ROOT is left out (its rows are skipped)."""
    out: dict[str, Path] = {}
    for name, path in given.items():
        if name not in CHECKOUT_MARKERS:
            raise UsageError(
                f"--checkout {name}=...: unknown checkout; known: {', '.join(CHECKOUT_MARKERS)}"
            )
        p = Path(path)
        if not (p / CHECKOUT_MARKERS[name]).exists():
            raise UsageError(
                f"--checkout {name}={path}: not a {name} checkout (no {CHECKOUT_MARKERS[name]})"
            )
        out[name] = p.resolve()
    if root is not None:
        r = Path(root)
        if not r.is_dir():
            raise UsageError(f"ROOT {str(r)!r} is not a directory")
        for name, marker in CHECKOUT_MARKERS.items():
            if name not in out and (r / name / marker).exists():
                out[name] = (r / name).resolve()
    return out


@cache
def trace_candidates(trace: Path) -> tuple[tuple[float | None, str], ...]:
    """The ``(score, code)`` of each ``CodeCandidate`` of an Autocomp search trace, baseline
    first (the trace is a Python expression of nested ``CodeCandidate(parent=...)`` calls;
    read with ``ast``, never executed)."""
    tree = ast.parse(trace.read_text(), mode="eval")
    out = []
    node = tree.body
    while isinstance(node, ast.Call):
        kw = {k.arg: k.value for k in node.keywords}
        score = ast.literal_eval(kw["score"]) if "score" in kw else None
        code = ast.literal_eval(kw["code"]) if "code" in kw else ""
        out.append((score, code))
        node = kw.get("parent")
    return tuple(reversed(out))


def _harness_namespace(harness: Path) -> dict[str, Any]:
    """The names the harness's own imports bind (only its ``neuronxcc``, ``numpy`` and
    ``math`` imports: the others serve its own reference code)."""
    tree = ast.parse(harness.read_text())
    keep = []
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
            if all(m and m.split(".")[0] in ("neuronxcc", "numpy", "math") for m in mods):
                keep.append(node)
    ns: dict[str, Any] = {"__name__": f"_trnsim_autocomp_{harness.stem}"}
    exec(compile(ast.Module(body=keep, type_ignores=[]), str(harness), "exec"), ns)
    return ns


def load(ref: KernelRef, root: Path) -> Any:
    """The kernel ``ref`` names in the checkout at ``root``."""
    from trnsim.nki import install

    install()
    path = root / ref.path
    if not path.is_file():
        raise FileNotFoundError(f"{ref.path} is not in this checkout")
    if ref.candidate is not None:
        assert ref.harness is not None
        if ref.intact is not None:
            path = root / ref.intact
            code = path.read_text()
        else:
            _, code = trace_candidates(path)[ref.candidate]
        ns = _harness_namespace(root / ref.harness)
        # the candidate's code under a file name that says where it came from
        filename = f"{path}[candidate {ref.candidate}]"
        exec(compile(code, filename, "exec"), ns)
        return ns[ref.name]
    from trnsim.conformance.case import Case
    from trnsim.conformance.runner import load_kernel

    stub = Case(ref.name, "", ref.path, ref.name, inputs=lambda rng: (), reference=lambda: None)
    return load_kernel(stub, root)


@contextlib.contextmanager
def _imports(root: Path) -> Iterator[None]:
    """The checkout's root on ``sys.path`` (its kernels import their own packages); modules
    imported from it are forgotten afterwards."""
    before_path, before_mods = list(sys.path), set(sys.modules)
    sys.path.insert(0, str(root))
    try:
        yield
    finally:
        sys.path[:] = before_path
        for name in set(sys.modules) - before_mods:
            file = getattr(sys.modules[name], "__file__", None) or ""
            if str(Path(file).resolve()).startswith(str(root)):
                del sys.modules[name]


# ---- running ---------------------------------------------------------------------------------


def _check(check: Check, root: Path, seed: int, target: str) -> tuple[str, float | None]:
    from trnsim.conformance.runner import compare
    from trnsim.nki.simulate import run

    rng = np.random.default_rng(seed)
    inputs = check.inputs(rng)
    args = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in inputs]
    out = run(load(check.kernel, root), *args, target=target, **check.kwargs)
    y = out.outputs
    for nxt in check.chain:
        y = run(load(nxt, root), y, target=target).outputs
    ref = check.reference(*inputs, **check.kwargs)
    ok, err, why = compare(y, ref, check.rtol, check.atol)
    return ("pass" if ok else f"mismatch: {why}"), err


def _time(row: TimingRow, root: Path) -> tuple[float, dict[str, Any]]:
    from trnsim.core.calibration import TOOLCHAINS
    from trnsim.core.timing import schedule
    from trnsim.nki.benchmark import record

    eff = TOOLCHAINS[row.toolchain].dma_efficiency
    total = 0.0
    figures: dict[str, Any] = {}
    for launch in row.launches:
        k = load(launch.kernel, root)
        instrs = record(k, *launch.args(), target=row.target, **launch.kwargs)
        p = schedule(instrs, row.target, dma_efficiency=eff)
        total += p.total_s
        for key, v in p.neuron_profile().items():
            figures[key] = figures.get(key, 0) + v if "percent" not in key else v
        figures["instructions"] = figures.get("instructions", 0) + p.instructions
    return total, figures


def run_rows(
    rows: list[TimingRow],
    checkouts: dict[str, Path],
    seed: int = 0,
    check: bool = True,
    on_result: Callable[[RowResult], None] | None = None,
) -> list[RowResult]:
    """Run each row whose checkout is in ``checkouts`` (the others are skipped): its check
    (once per ``Check.key``) and its timing."""
    from trnsim.conformance.runner import classify

    results = []
    done_checks: dict[str, tuple[str, float | None]] = {}
    with (
        tempfile.TemporaryDirectory(prefix="trnsim-calibrate-") as scratch,
        contextlib.chdir(scratch),
        contextlib.redirect_stdout(sys.stderr),
    ):
        for row in rows:
            root = checkouts.get(row.repo)
            if root is None:
                continue
            res = RowResult(
                row.name, row.repo, row.source, row.instance, row.target, row.measured_s
            )
            t0 = time.perf_counter()
            if row.defect:
                res.error = f"{DEFECT}: {row.defect}"
                results.append(res)
                if on_result is not None:
                    on_result(res)
                continue
            with _imports(root):
                if check and row.check is not None:
                    key = row.check.key
                    if key not in done_checks:
                        try:
                            done_checks[key] = _check(row.check, root, seed, row.target)
                        except Exception as exc:
                            outcome, detail, loc = classify(exc, root)
                            where = f" ({loc})" if loc and loc not in detail else ""
                            done_checks[key] = (f"{outcome}: {detail}{where}", None)
                    res.check, res.max_error = done_checks[key]
                    if row.check_note and res.check.startswith("mismatch"):
                        res.check = f"{res.check} ({row.check_note})"
                try:
                    res.modelled_s, res.profile = _time(row, root)
                except Exception as exc:
                    outcome, detail, loc = classify(exc, root)
                    where = f" ({loc})" if loc and loc not in detail else ""
                    res.error = f"{outcome}: {detail}{where}"
            res.seconds = time.perf_counter() - t0
            results.append(res)
            if on_result is not None:
                on_result(res)
    return results
