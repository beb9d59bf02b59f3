"""``trnsim validate``: the performance model against the Trn1 calibration rows (B, B2, C):
every row's error and the MAPE per table. ``--fit`` refits the global efficiency profiles;
``--compute`` picks the compute model (the kernel tables by default, or the roofline);
``--build-tables`` regenerates the kernel tables (``trnsim.perf.tables``) first."""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.table import Table

from trnsim.cli.train import dump
from trnsim.perf import calibrate, tables
from trnsim.perf.table_model import COMPUTE_MODELS
from trnsim.report.tables import fit


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--fit",
        action="store_true",
        help="refit the train/serve efficiency profiles (about a minute)",
    )
    parser.add_argument(
        "--compute",
        choices=COMPUTE_MODELS,
        default="auto",
        help="compute model: auto (kernel tables on Trn1), table or roofline",
    )
    parser.add_argument(
        "--build-tables",
        action="store_true",
        help="regenerate the matmul kernel tables with the core timing model first (minutes)",
    )
    parser.add_argument("--markdown", action="store_true", help="print a Markdown report")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def markdown(rep: calibrate.Report, base: calibrate.Report | None = None) -> str:
    """Per-row errors and MAPE per table; with ``base`` (another compute model's report) its
    predictions and errors side by side."""
    extra = f" {base.model} | error |" if base else ""
    lines = [f"Compute model: {rep.model}" + (f" (beside: {base.model})" if base else "")]
    for table, metrics in (("B", ["seq/s"]), ("B2", ["seq/s"]), ("C", ["TTFT ms", "TPOT ms"])):
        lines += [
            "",
            f"Table {table}:",
            "",
            f"| row | metric | measured | trnsim ({rep.model}) | error |{extra}",
            "|---|---|---|---|---|" + ("---|---|" if base else ""),
        ]
        others = [r for r in base.rows if r.table == table] if base else []
        mine = [r for r in rep.rows if r.table == table]
        for i, r in enumerate(mine):
            cells = f"| {r.label} | {r.metric} | {r.measured:,.2f} | {r.predicted:,.2f} | "
            cells += f"{r.error:+.1%} |"
            if others:
                cells += f" {others[i].predicted:,.2f} | {others[i].error:+.1%} |"
            lines.append(cells)
        for mt in metrics:
            line = f"\nMAPE {table} {mt}: **{rep.mape(table, mt):.1%}**"
            if base:
                line += f" ({base.model}: {base.mape(table, mt):.1%})"
            lines.append(line)
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    if args.build_tables:
        tables.main(["build"])
    profiles = calibrate.fit(model=args.compute) if args.fit else None
    rep = calibrate.report(profiles, model=args.compute)
    profiles = rep.profiles
    summary = {
        "mape_B": rep.mape("B"),
        "mape_B2": rep.mape("B2"),
        "mape_B_all": float(
            sum(abs(r.error) for r in rep.rows if r.table in ("B", "B2"))
            / sum(1 for r in rep.rows if r.table in ("B", "B2"))
        ),
        "mape_C_ttft": rep.mape("C", "TTFT ms"),
        "mape_C_tpot": rep.mape("C", "TPOT ms"),
        "mape_C": rep.mape("C"),
    }
    if args.json:
        dump(
            {
                "compute_model": rep.model,
                "profiles": {
                    "train": profiles.train.as_dict(),
                    "serve": profiles.serve.as_dict(),
                    "source": profiles.source,
                },
                "summary": summary,
                "rows": [
                    {
                        "table": r.table,
                        "row": r.label,
                        "metric": r.metric,
                        "measured": r.measured,
                        "predicted": r.predicted,
                        "error": r.error,
                    }
                    for r in rep.rows
                    if r.table != "C-thr"
                ],
            }
        )
        return 0
    if args.markdown:
        other = "roofline" if rep.model == "table" else None
        print(markdown(rep, calibrate.report(model=other) if other else None))
        return 0
    console = Console()
    table = Table(title="trnsim vs published Trn1 measurements", title_justify="left")
    for c in ("table", "row", "metric", "measured", "trnsim", "error"):
        table.add_column(c)
    for r in rep.rows:
        if r.table == "C-thr":
            continue
        style = "red" if abs(r.error) > 0.15 else ""
        table.add_row(
            r.table,
            r.label,
            r.metric,
            f"{r.measured:,.2f}",
            f"{r.predicted:,.2f}",
            f"[{style}]{r.error:+.1%}[/{style}]" if style else f"{r.error:+.1%}",
        )
    console.print(fit(table))
    for k, v in summary.items():
        console.print(f"{k}: [bold]{v:.1%}[/bold]")
    console.print(f"[dim]compute model: {rep.model}; profiles: {profiles.source}[/dim]")
    return 0
