"""``trnsim specs [NAME]``: one hardware preset as a table (or JSON), or the list of presets."""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.table import Table

from trnsim import hw
from trnsim.hw.describe import rows, to_dict
from trnsim.report.output import print_json
from trnsim.report.tables import fit
from trnsim.report.units import pretty


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", nargs="?", help="preset name (omit to list every preset)")
    parser.add_argument("--json", action="store_true", help="machine-readable output, SI units")
    parser.add_argument("--no-sources", action="store_true", help="hide the source column")


def _listing() -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for kind, registry in hw.catalog.REGISTRIES.items():
        out[kind] = [
            {"name": name, "aliases": registry.aliases_of(name), "summary": _summary(spec)}
            for name, spec in registry
        ]
    return out


def _summary(spec: hw.CoreSpec | hw.ChipSpec | hw.SystemSpec) -> str:
    if isinstance(spec, hw.SystemSpec):
        return f"{spec.chips:,} x {spec.chip.name}; {spec.description}"
    if isinstance(spec, hw.ChipSpec):
        tag = " (PROJECTED)" if spec.projected else ""
        hbm = pretty(spec.hbm_bytes, "B")
        return f"{spec.vendor} {spec.family}{tag}; {peak_summary(spec)}; {hbm} HBM"
    return f"generation {spec.generation}; {pretty(spec.sbuf_bytes, 'B')} SBUF"


def peak_summary(chip: hw.ChipSpec) -> str:
    """The chip's highest dense peak and the number format(s) it is in ("2.517 PFLOP/s dense
    FP8/MXFP8/MXFP4"): peaks of different formats are never compared unnamed."""
    best = max(chip.peak_flops.values())
    formats = [d.upper() for d, v in chip.peak_flops.items() if v == best]
    return f"{pretty(best, 'FLOP/s')} dense {'/'.join(formats)}"


def run(args: argparse.Namespace) -> int:
    console = Console()
    if args.name is None:
        listing = _listing()
        if args.json:
            print_json(listing)
            return 0
        for kind, entries in listing.items():
            table = Table(title=f"{kind} presets", title_justify="left")
            table.add_column("name", style="bold")
            table.add_column("aliases")
            table.add_column("summary")
            for e in entries:
                table.add_row(e["name"], ", ".join(e["aliases"]), e["summary"])
            console.print(fit(table))
        return 0
    preset = hw.lookup(args.name)
    if args.json:
        print_json(to_dict(preset))
        return 0
    table = Table(title=f"{preset.name}", title_justify="left")
    table.add_column("figure")
    table.add_column("value", justify="right")
    if not args.no_sources:
        table.add_column("source", style="dim", overflow="fold")
    for r in rows(preset):
        cells = [r.key, pretty(r.value, r.unit)]
        if not args.no_sources:
            cells.append(r.source)
        table.add_row(*cells)
    console.print(fit(table))
    return 0
