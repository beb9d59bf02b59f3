"""Demo section: a sweep of ``trnsim infer`` over tensor parallelism, batch and precision on
every core, and the Pareto front of latency per token against throughput."""

from __future__ import annotations

import tempfile
from pathlib import Path

from rich.console import Console

from trnsim.cli.sweep import show_summary, summary
from trnsim.report.progress import progress

SPEC = {
    "verb": "infer",
    "fixed": {"model": "llama-3.1-70b", "system": "trn3-gen2", "input_tokens": 2048,
              "output_tokens": 512},
    "grid": {"tp": [2, 4, 8, 16], "batch": [1, 4, 16, 64], "precision": ["bf16", "fp8"]},
    "constraints": ["tp * batch <= 512"],
    "pareto": {"x": "tpot_s", "y": "throughput_tokens_per_s"},
}  # fmt: skip


def section(console: Console) -> None:
    from trnsim.sweep import Pool, parse
    from trnsim.sweep.engine import run_spec
    from trnsim.sweep.table import Table

    spec = parse(SPEC, "demo")
    pool = Pool(preload=("trnsim.cli.infer",))
    console.print(
        f"trnsim sweep: Llama-3.1-70B serving at {len(spec.points)} points "
        f"({spec.pruned} pruned by a constraint), {pool.describe()}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        table = Table(Path(tmp) / "infer.csv", spec.columns)
        with progress("sweep infer", total=len(spec.points), eta=True) as bar:
            _, outcome = run_spec(spec, table, pool, bar)
        show_summary(console, summary(spec, "infer.csv", table, outcome, pool, None))
    console.print(
        "[dim]the same as a spec file: trnsim sweep examples/sweeps/infer_serving.json "
        "(--ray for Ray; trnsim tune for kernels)[/dim]"
    )
