"""Demo section: the hardware catalog, and the UltraServer figures derived from chip figures."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from trnsim import hw
from trnsim.report.tables import fit, prose
from trnsim.report.units import pretty


def section(console: Console) -> None:
    console.print(
        prose(
            "Every figure in trnsim.hw names its source; system totals are derived from chip "
            "figures."
        )
    )
    table = Table(title="Scale-up systems (derived from per-chip figures)", title_justify="left")
    for col in ("system", "chips", "FP8 dense", "BF16 dense", "HBM", "HBM bw"):
        table.add_column(col, justify="right" if col != "system" else "left")
    for name in (
        "trn2-ultraserver",
        "trn3-gen1-ultraserver",
        "trn3-gen2-ultraserver",
        "gb300-nvl72",
    ):
        s = hw.system(name)
        table.add_row(
            name,
            f"{s.chips}",
            pretty(s.peak_flops("fp8"), "FLOP/s"),
            pretty(s.peak_flops("bf16"), "FLOP/s"),
            pretty(s.hbm_bytes, "B"),
            pretty(s.hbm_bw, "B/s"),
        )
    console.print(fit(table))
    gen2, trn2 = hw.system("trn3-gen2"), hw.system("trn2-ultraserver")
    ratio = gen2.peak_flops("fp8") / trn2.peak_flops("fp8")
    console.print(
        prose(f"Trn3 Gen2 vs Trn2 UltraServer FP8 compute: [bold]{ratio:.2f}x[/bold] (seed: 4.4x)")
    )
    core = hw.core("v4")
    bf16, mxfp8 = core.tensor.peak_flops("bf16"), core.tensor.peak_flops("mxfp8")
    console.print(
        prose(
            f"NeuronCore-v4: {core.tensor.rows}x{core.tensor.cols} Tensor engine at "
            f"{pretty(core.tensor.clock_hz, 'Hz')} -> {pretty(bf16, 'FLOP/s')}"
            f" BF16, {pretty(mxfp8, 'FLOP/s')} MXFP8; SBUF {pretty(core.sbuf_bytes, 'B')} "
            f"({pretty(core.sbuf_bytes_per_partition, 'B')}/partition)"
        )
    )
