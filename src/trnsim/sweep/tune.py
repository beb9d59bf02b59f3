"""Autotuning an NKI kernel file: every combination of the given parameter values, each run on
the emulator, checked against the file's golden and timed on the timing model.

A tunable parameter is one of the kernel file's ``make_inputs`` (``make_inputs_<kernel>``)
parameters (the problem: ``M``, ``N``...) or one of the kernel's own parameters that has a
default (``TILES_IN_BLOCK_M=4``: the schedule), as ``trnsim run --arg`` and the kernel's
keyword arguments take them; the kernel's own values also go to the golden where it takes a
parameter of that name (``trnsim.nki.kernelfile.run_file``). A candidate:

1. runs functionally (``run_file``) and is checked against the golden with the file's
   tolerance (or the default of its output dtype, or ``--rtol/--atol``);
2. is timed by scheduling that same run's instruction record (``trnsim.core.timing``): the
   record of the data the check saw, so data-dependent control flow is timed as it ran.

A process makes the file's inputs, and the golden's outputs, once for all the candidates it
runs (``memo``): only the kernel's parameters differ between them, so the check is the same.

Candidates that break a rule, raise, or fail the check are kept with their error (status
``failed``, ``invalid`` for inputs ``make_inputs`` refuses). The best is the fastest that
passed (ties: the first in candidate order), re-run here for its full profile, which must give
the same latency to the last bit (every backend runs the same code on the same inputs).
"""

from __future__ import annotations

import ast
import inspect
import itertools
from dataclasses import dataclass
from typing import Any

from trnsim.errors import KernelError, TrnsimError, UsageError
from trnsim.sweep.points import one_line, quiet
from trnsim.sweep.spec import point_id

#: What a worker of a tune imports before its first candidate (a pool's fork server loads
#: these once: the kernel-file loader, the emulator, the timing model and what a kernel
#: file's first load imports; measured in benchmarks/bench_sweep.py).
PRELOAD = (
    "trnsim.sweep.tune",
    "trnsim.nki.kernelfile",
    "trnsim.core.timing",
    "trnsim.core.calibration",
    "trnsim.nki.collectives",
    "trnsim.nki.legacy",  # what installing the nki / neuronxcc.nki names imports
    "numpy.random",
)

# keywords trnsim.nki.simulate.run takes itself: a kernel parameter of these names cannot be
# passed through it
RESERVED = (
    "target",
    "lnc",
    "rounding",
    "seed",
    "functional",
    "options",
    "max_instructions",
    "allow_unwritten",
)
METRICS = (
    "passed",
    "latency_s",
    "max_abs_err",
    "max_rel_err",
    "instructions",
    "mfu",
    "mbu",
    "flops_per_s",
)
MAX_CANDIDATES = 100_000


def parse_values(text: str) -> list[Any]:
    """``v1,v2,...``: Python literals (numbers, quoted strings, tuples) or true/false."""
    try:
        tree = ast.parse(f"[{text}]", mode="eval").body
    except SyntaxError:
        raise UsageError(f"{text!r} is not a comma-separated list of Python literals") from None
    assert isinstance(tree, ast.List)
    out: list[Any] = []
    for node in tree.elts:
        if isinstance(node, ast.Name) and node.id.lower() in ("true", "false"):
            out.append(node.id.lower() == "true")
            continue
        try:
            out.append(ast.literal_eval(node))
        except ValueError:
            shown = ast.get_source_segment(f"[{text}]", node) or "?"
            raise UsageError(
                f"{shown!r} is not a Python literal (a number, true/false, a quoted string, a "
                "tuple)"
            ) from None
    return out


def parse_param(text: str) -> tuple[str, list[Any]]:
    """``--param NAME=v1,v2,...`` -> (NAME, values)."""
    name, sep, values = str(text).partition("=")
    name = name.strip()
    if not sep or not name.isidentifier():
        raise UsageError(f"{text!r}: expected NAME=v1,v2,... (e.g. TILE=128,256)")
    if not values.strip():
        raise UsageError(f"{text!r}: no values (give NAME=v1,v2,...)")
    try:
        vals = parse_values(values)
    except UsageError as exc:
        raise UsageError(f"{text!r}: {exc}") from None
    if not vals:
        raise UsageError(f"{text!r}: no values (give NAME=v1,v2,...)")
    return name, list(dict.fromkeys(vals))


@dataclass(frozen=True)
class Tunable:
    """What a kernel file lets a tune vary: its kernel's name, ``make_inputs``' parameters and
    the kernel's parameters that have defaults; and whether it has a golden."""

    kernel: str
    inputs: tuple[str, ...]
    schedule: tuple[str, ...]
    golden: bool


def tunable(path: str, kernel: str | None) -> Tunable:
    """Load the kernel file (its module-level code runs) and list what it lets a tune vary."""
    from trnsim.nki.kernelfile import load, pick_kernel

    with quiet():
        mod = load(path)
        name, k = pick_kernel(mod, kernel)
    make = getattr(mod, f"make_inputs_{name}", None) or getattr(mod, "make_inputs", None)
    inputs: tuple[str, ...] = ()
    if callable(make):
        inputs = tuple(
            p.name
            for p in _signature(make)
            if p.name != "rng" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        )
    schedule = tuple(
        p.name
        for p in _signature(getattr(k, "fn", k))
        if p.default is not p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    )
    gold = getattr(mod, f"golden_{name}", None) or getattr(mod, "golden", None)
    return Tunable(name, inputs, schedule, gold is not None)


def _signature(fn: Any) -> list[inspect.Parameter]:
    try:
        return list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return []


def check_params(t: Tunable, path: str, names: list[str]) -> None:
    """Each tuned name is a parameter of make_inputs or of the kernel (with a default)."""
    if not t.golden:
        raise UsageError(
            f"{path}: no golden_{t.kernel}() or golden(): tune checks every candidate against it"
        )
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise UsageError(f"--param {name} is given twice")
        seen.add(name)
        if name in t.schedule and name in RESERVED:
            raise UsageError(
                f"--param {name}: kernel parameter {name!r} shadows a keyword of "
                "trnsim.nki.run; rename it in the kernel"
            )
        if name not in t.inputs and name not in t.schedule:
            raise UsageError(
                f"--param {name}: neither make_inputs nor kernel {t.kernel!r} takes it; "
                f"make_inputs takes {', '.join(t.inputs) or 'nothing'}, the kernel (with "
                f"defaults) {', '.join(t.schedule) or 'nothing'}"
            )


@dataclass(frozen=True, slots=True)
class CandidateJob:
    """One candidate: everything a worker needs to run, check and time it."""

    path: str
    kernel: str
    target: str
    seed: int
    inputs: tuple[tuple[str, Any], ...]
    schedule: tuple[tuple[str, Any], ...]
    rtol: float | None = None
    atol: float | None = None
    max_instructions: int | None = None
    timeout: float | None = None


def candidates(params: list[tuple[str, list[Any]]]) -> list[dict[str, Any]]:
    """Every combination, the first parameter varying slowest."""
    total = 1
    for _, values in params:
        total *= len(values)
    if total > MAX_CANDIDATES:
        raise UsageError(f"{total:,} candidates: more than {MAX_CANDIDATES:,}; give fewer values")
    names = [n for n, _ in params]
    return [
        dict(zip(names, combo, strict=True)) for combo in itertools.product(*(v for _, v in params))
    ]


def candidate_id(job: CandidateJob, fixed: dict[str, Any]) -> str:
    return point_id(
        {
            "file": job.path,
            "kernel": job.kernel,
            "target": job.target,
            "seed": job.seed,
            "args": fixed,
            **dict(job.inputs),
            **dict(job.schedule),
        }
    )


#: The inputs and goldens this process's candidates share (``trnsim.nki.kernelfile.Memo``):
#: a tune's candidates differ only in kernel parameters, so a worker makes them once, not once
#: per candidate. Per process (each pool or Ray worker has its own); ``forget()`` drops them.
_MEMO: Any = None


def memo() -> Any:
    global _MEMO
    if _MEMO is None:
        from trnsim.nki.kernelfile import Memo

        _MEMO = Memo()
    return _MEMO


def forget() -> None:
    """Drop the inputs and goldens this process keeps for its candidates (after a tune)."""
    if _MEMO is not None:
        _MEMO.clear()


def _file_run(job: CandidateJob) -> Any:
    from trnsim.nki.kernelfile import run_file

    return run_file(
        job.path,
        job.kernel,
        target=job.target,
        seed=job.seed,
        rtol=job.rtol,
        atol=job.atol,
        kwargs=dict(job.inputs),
        max_instructions=job.max_instructions,
        timeout=job.timeout,
        kernel_kwargs=dict(job.schedule),
        memo=memo(),
    )


def profile_of(job: CandidateJob, run: Any) -> Any:
    """The timing model's profile of a candidate's functional run record."""
    from trnsim.core.timing import schedule
    from trnsim.nki.simulate import resolve_target

    return schedule(run.result.instructions, resolve_target(job.target))


def run_candidate(job: CandidateJob) -> dict[str, Any]:
    """Run, check and time one candidate: the result cells (status, error, ``METRICS``)."""
    row: dict[str, Any] = dict.fromkeys(METRICS)
    with quiet():
        try:
            run = _file_run(job)
            prof = profile_of(job, run)
        except KernelError as exc:
            return {**row, "status": "failed", "exit": 1, "error": one_line(str(exc))}
        except TrnsimError as exc:
            return {**row, "status": "invalid", "exit": 2, "error": one_line(str(exc))}
        except Exception as exc:
            text = one_line(f"internal error: {type(exc).__name__}: {exc}")
            return {**row, "status": "internal-error", "exit": 3, "error": text}
    row.update(
        passed=bool(run.passed),
        latency_s=prof.total_s,
        max_abs_err=_finite(run.max_abs_err),
        max_rel_err=_finite(run.max_rel_err),
        instructions=prof.instructions,
        mfu=prof.mfu,
        mbu=prof.mbu,
        flops_per_s=prof.flops_per_s,
    )
    if run.passed:
        return {**row, "status": "ok", "exit": 0, "error": ""}
    tol = run.tolerance or {}
    why = (
        f"{run.nonfinite:,} NaN/Inf outputs where the golden has none"
        if run.nonfinite
        else f"max abs err {run.max_abs_err:.3g}, max rel err {run.max_rel_err:.3g}"
    )
    error = (
        f"check failed: {why} (rtol {tol.get('rtol', 0):g}, atol {tol.get('atol', 0):g}; "
        f"{tol.get('source', '')})"
    )
    return {**row, "status": "failed", "exit": 1, "error": one_line(error)}


def _finite(x: float | None) -> float | None:
    import math

    return x if x is not None and math.isfinite(x) else None


def best(rows: list[dict[str, Any]], order: dict[str, int]) -> dict[str, Any] | None:
    """The fastest candidate that passed its check (ties: the first in candidate order)."""
    ok = [r for r in rows if r.get("status") == "ok" and r.get("latency_s") is not None]
    if not ok:
        return None
    return min(ok, key=lambda r: (float(r["latency_s"]), order.get(str(r["point"]), len(order))))


def best_profile(job: CandidateJob, latency: float) -> tuple[Any, Any]:
    """Re-run the best candidate here for its full profile; its latency must be the one its
    row holds (``latency``), else determinism is broken, a bug."""
    with quiet():
        run = _file_run(job)
        prof = profile_of(job, run)
    if prof.total_s != latency:
        raise RuntimeError(
            f"the best candidate re-run here took {prof.total_s!r} s, its row says {latency!r} s: "
            "a run is not deterministic"
        )
    return run, prof
