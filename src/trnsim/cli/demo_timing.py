"""Demo section: the timing model profiles a blocked matmul on NeuronCore-v2, v3 and v4."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from trnsim.core import calibration
from trnsim.report.tables import fit

KERNEL_FILE = Path(__file__).resolve().parents[3] / "examples" / "kernels" / "timing"


def section(console: Console) -> None:
    from trnsim.cli.profile import profile_file

    path = KERNEL_FILE / "matmul_tutorial.py"
    if not path.is_file():
        console.print(f"(kernel file {path} not found: run from a source checkout)")
        return
    console.print(
        "A blocked bf16 matmul (M=2048, K=1024, N=2048; trnsim's version of the NKI tutorial's "
        "optimized kernel), recorded in timing-only mode and scheduled on each generation."
    )
    table = Table(title="trnsim profile (timing model)", title_justify="left")
    for col in ("core", "latency", "TFLOP/s", "MFU", "MBU", "tensor busy", "top critical op"):
        table.add_column(col, justify="left" if col in ("core", "top critical op") else "right")
    for target in ("gen2", "gen3", "gen4"):
        _, p = profile_file(str(path), "optimized", target, kwargs={"empty": True})
        top = p.critical_path[0]
        table.add_row(
            p.target.replace("neuroncore-", "NC-"),
            f"{p.total_s * 1e6:,.1f} us",
            f"{p.flops_per_s / 1e12:.1f}",
            f"{p.mfu:.1%}",
            f"{p.mbu:.1%}",
            f"{p.engine('tensor').utilisation:.0%}",
            f"{top.opcode} ({top.fraction:.0%})",
        )
    console.print(fit(table))
    console.print(
        "DMA from the bandwidth guide's per-engine figures and descriptor cost; calibrated on "
        "public measurements (Autocomp on trn1, trainium-kernel-fusion on trn2, the SDK "
        f"tutorials; launch overhead {calibration.LAUNCH_OVERHEAD_S * 1e6:.1f} us): "
        "'trnsim calibrate', benchmarks/RESULTS.md."
    )
