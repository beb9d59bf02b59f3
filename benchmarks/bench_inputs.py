"""What the input rules and the 80-column layout cost (issue 21: "no new slowness").

In one run, each case against its baseline:

- the planner (Llama-3.1-405B on 16,384 Trn3 chips, about 1,200 plans) and 2,000 warm training
  estimates, with the rules of ``trnsim.inputs`` checked as shipped, against the same with
  every check replaced by a no-op (the baseline: what the code cost without the rules);
- ``report.tables.fit`` laying out the ``validate`` table (about 130 rows) at 80 columns,
  against rich rendering the same table unfitted;
- ``trnsim demo`` as a process, CPU seconds (user + system, best of ``--repeat``), this
  checkout against ``--against REV`` (default ``main``) checked out in a temporary worktree and
  run with the same interpreter (``PYTHONPATH``).

Run: ``.venv/bin/python benchmarks/bench_inputs.py [--against main] [--repeat 3]``
(prints Markdown table rows).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _best(fn, repeat: int) -> float:
    return min(fn() for _ in range(repeat))


def planner_and_estimates(repeat: int) -> tuple[float, float]:
    from trnsim.perf import estimate_training, plan_for_chips
    from trnsim.perf.planner import search_training

    def plan() -> float:
        t0 = time.perf_counter()
        search_training(
            "llama-3.1-405b", "trn3-ultracluster", 16384, global_batch=2048, seq_len=8192
        )
        return time.perf_counter() - t0

    p = plan_for_chips(144, tp=4, pp=4)

    def estimates() -> float:
        t0 = time.perf_counter()
        for _ in range(2000):
            estimate_training(
                "llama-3.1-70b",
                "trn3-gen2",
                p,
                global_batch=1152,
                seq_len=8192,
                tokens_to_train=1e12,
            )
        return time.perf_counter() - t0

    plan()  # warm the caches shared by both variants
    return _best(plan, repeat), _best(estimates, repeat)


@contextlib.contextmanager
def rules_off():
    """Every check of ``trnsim.inputs`` a no-op (the baseline)."""
    from trnsim import inputs

    saved = {
        name: getattr(inputs, name)
        for name in (
            "check",
            "check_training",
            "check_inference",
            "check_finite",
            "check_step_tokens",
            "check_train_context",
        )
    }
    for name in saved:
        setattr(inputs, name, lambda *a, **k: None)
    inputs.check = lambda name, value, **k: value  # type: ignore[assignment]
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(inputs, name, fn)


def layout(repeat: int) -> tuple[float, float]:
    from rich.console import Console
    from rich.table import Table

    from trnsim.perf import calsets
    from trnsim.report.tables import fit

    results = calsets.validate(sets=["B", "B2", "C", "F", "H", "I", "X"])

    def table() -> Table:
        t = Table(title="trnsim vs published measurements")
        for c in ("set", "stack", "row", "metric", "measured", "trnsim", "error"):
            t.add_column(c)
        for r in results:
            t.add_row(
                r.set,
                r.stack,
                r.label,
                r.metric,
                f"{r.measured:,.4g}",
                f"{r.predicted:,.4g}",
                f"{r.error:+.1%}",
            )
        return t

    def render(fitted: bool) -> float:
        console = Console(file=io.StringIO(), width=80)
        t = table()
        t0 = time.perf_counter()
        console.print(fit(t) if fitted else t)
        return time.perf_counter() - t0

    return _best(lambda: render(True), repeat), _best(lambda: render(False), repeat)


def demo_cpu(src: Path, repeat: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(src), "TRNSIM_PROGRESS": "0", "COLUMNS": "80"}
    best = float("inf")
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(
            [sys.executable, "-m", "trnsim", "demo"],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
            cwd=tempfile.gettempdir(),
        )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        best = min(best, cpu)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--against", default="main", help="git revision of the demo baseline")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with_rules = planner_and_estimates(args.repeat)
    with rules_off():
        without = planner_and_estimates(args.repeat)
    fitted, plain = layout(args.repeat)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(base), args.against],
            check=True,
        )
        try:
            demo_base = demo_cpu(base / "src", args.repeat)
            demo_here = demo_cpu(ROOT / "src", args.repeat)
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], check=True
            )
    print("| Case | This branch | Baseline (same run) | Ratio |")
    print("|---|---:|---:|---:|")
    print(
        f"| planner, Llama-3.1-405B on 16,384 Trn3 (rules checked vs all checks no-ops) | "
        f"{with_rules[0]:.3f} s | {without[0]:.3f} s | {with_rules[0] / without[0]:.2f}x |"
    )
    print(
        f"| 2,000 warm training estimates (rules vs no-ops) | {with_rules[1]:.3f} s | "
        f"{without[1]:.3f} s | {with_rules[1] / without[1]:.2f}x |"
    )
    print(
        f"| validate table at 80 columns (fit vs rich unfitted) | {fitted * 1e3:.1f} ms | "
        f"{plain * 1e3:.1f} ms | {fitted / plain:.2f}x |"
    )
    print(
        f"| trnsim demo, CPU s (user + sys; vs {args.against}) | {demo_here:.2f} s | "
        f"{demo_base:.2f} s | {demo_here / demo_base:.2f}x |"
    )


if __name__ == "__main__":
    main()
