"""``trnsim compare A B ...``: hardware presets side by side, with ratios to the first."""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.table import Table

from trnsim import hw
from trnsim.errors import UsageError
from trnsim.hw.describe import kind_of, rows
from trnsim.report.output import print_json
from trnsim.report.tables import fit, prose
from trnsim.report.units import pretty


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("names", nargs="+", metavar="NAME", help="two or more presets, same kind")
    parser.add_argument("--json", action="store_true", help="machine-readable output, SI units")
    parser.add_argument("--keys", help="only figures whose key contains this text (e.g. peak)")


def comparison(names: list[str], keys: str | None = None) -> dict:
    """The comparison as data: per key, each preset's SI value and its ratio to the first."""
    if len(names) < 2:
        raise UsageError(f"compare needs at least two presets, got {len(names)}: {names}")
    presets = [hw.lookup(n) for n in names]
    kinds = {kind_of(p) for p in presets}
    for kind in ("system", "chip"):  # a name like "v5p" is a chip and a system: prefer one kind
        registry = hw.catalog.REGISTRIES[kind]
        if len(kinds) > 1 and kind in kinds and all(n in registry for n in names):
            presets, kinds = [registry.get(n) for n in names], {kind}
    if len(kinds) > 1:
        listed = ", ".join(f"{p.name} ({kind_of(p)})" for p in presets)
        raise UsageError(f"compare needs presets of one kind; got {listed}")
    per_preset = [{r.key: r for r in rows(p)} for p in presets]
    ordered: list[str] = []
    for table in per_preset:
        ordered += [k for k in table if k not in ordered]
    out_rows = []
    for key in ordered:
        if keys and keys not in key:
            continue
        cells = [t.get(key) for t in per_preset]
        values = [c.value if c else None for c in cells]
        unit = next((c.unit for c in cells if c), "")
        base = values[0]
        ratios = [
            v / base
            if isinstance(v, int | float)
            and isinstance(base, int | float)
            and base
            and not isinstance(v, bool)
            else None
            for v in values
        ]
        out_rows.append({"key": key, "unit": unit, "values": values, "ratios": ratios})
    if not out_rows:
        groups = sorted({k.split(".", 1)[0] for k in ordered})
        raise UsageError(f"--keys {keys!r} matches no figure; keys contain: {', '.join(groups)}")
    return {"presets": [p.name for p in presets], "kind": kinds.pop(), "rows": out_rows}


def run(args: argparse.Namespace) -> int:
    data = comparison(args.names, args.keys)
    if args.json:
        print_json(data)
        return 0
    first = data["presets"][0]
    table = Table(
        title=f"{data['kind']}s: " + " vs ".join(data["presets"]) + f" (ratio: to {first})",
        title_justify="left",
    )
    table.add_column("figure")
    for i, name in enumerate(data["presets"]):
        table.add_column(name, justify="right")
        if i:
            table.add_column("ratio", justify="right", style="cyan")
    for row in data["rows"]:
        cells = [row["key"]]
        for i, (v, r) in enumerate(zip(row["values"], row["ratios"], strict=True)):
            cells.append(pretty(v, row["unit"]))
            if i:
                cells.append(f"{r:.2f}x" if r is not None else "")
        table.add_row(*cells)
    console = Console()
    console.print(fit(table))
    if any("peak" in row["key"] for row in data["rows"]):
        console.print(prose(PEAK_NOTE, style="dim"))
    return 0


# Peaks are published per number format; a row compares one format ("-": not published).
PEAK_NOTE = (
    "peaks: each row is one number format (peak_flops.fp8 against fp8, never fp8 against "
    "fp4); dense unless the key says sparse; '-': the preset publishes no peak in that format"
)
