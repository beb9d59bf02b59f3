"""Demo section: LLM training and inference estimates and a short side-by-side comparison."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from trnsim.cli.infer import show_inference
from trnsim.cli.train import show_training
from trnsim.perf import ParallelPlan, estimate_inference, estimate_training, plan_for_chips
from trnsim.perf.compare import compare
from trnsim.report.tables import fit
from trnsim.report.units import pretty, usd


def section(console: Console) -> None:
    plan = plan_for_chips(144, tp=4, pp=4, micro_batch=1, recompute="selective")
    est = estimate_training(
        "llama-3.1-70b", "trn3-gen2", plan, global_batch=1152, seq_len=8192, tokens_to_train=1e12
    )
    show_training(console, est)
    inf = estimate_inference(
        "llama-3.1-70b",
        "trn3-gen2",
        ParallelPlan(tp=4, dp=1),
        batch=16,
        input_tokens=2048,
        output_tokens=512,
    )
    show_inference(console, inf)
    rows = compare(
        "llama-3.1-8b",
        "train",
        ("trn3-gen2", "trn2-ultraserver", "gb300-nvl72"),
        chips=64,
        global_batch=512,
        seq_len=4096,
    )
    table = Table(
        title="Llama-3.1-8B training (bf16), 64 chips each, best plan per system",
        title_justify="left",
    )
    for col in ("system", "plan", "tokens/s/chip", "USD/Mtok"):
        table.add_column(col, justify="left" if col in ("system", "plan") else "right")
    for r in rows:
        table.add_row(
            r.system,
            r.plan_summary or r.plan,
            pretty(r.tokens_per_s_per_chip, "tok/s"),
            usd(r.usd_per_million_tokens),
        )
    console.print(fit(table))
