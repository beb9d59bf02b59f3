"""Demo section: collectives on Trn3 Gen2 vs Trn2, computed live from the fabric model."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from trnsim.fabric import collective_time
from trnsim.fabric.claims import interchip_bandwidth, moe_all_to_all
from trnsim.fabric.flowsim import simulate
from trnsim.report.tables import fit


def section(console: Console) -> None:
    t = Table(title="all-reduce of 1 GiB over a whole UltraServer (closed form)")
    for col in ("system", "ranks", "algorithm", "time (ms)", "busbw (GB/s)"):
        t.add_column(col, justify="right")
    for name, ranks in (("trn3-gen2", 144), ("trn2-ultraserver", 64), ("gb300-nvl72", 72)):
        r = collective_time("all-reduce", 2**30, ranks, name)
        t.add_row(r.system, str(ranks), r.algo, f"{r.time_s * 1e3:.2f}", f"{r.busbw / 1e9:.0f}")
    console.print(fit(t))

    t = Table(title="MoE dispatch all-to-all, 4096 tokens/chip x top-8 x 7168 x FP8")
    for col in ("system", "ranks", "per-rank MB", "time (us)", "busbw (GB/s)"):
        t.add_column(col, justify="right")
    for row in moe_all_to_all(4096):
        t.add_row(row.label, str(row.ranks), f"{row.nbytes / 1e6:.0f}",
                  f"{row.time_s * 1e6:.0f}", f"{row.busbw / 1e9:.0f}")  # fmt: skip
    console.print(fit(t))

    flow = simulate("all-to-all", 64 * 2**20, 144, "trn3-gen2", "direct")
    closed = collective_time("all-to-all", 64 * 2**20, 144, "trn3-gen2", "direct")
    console.print(
        f"144-chip all-to-all of 64 MiB: closed form {closed.time_s * 1e6:.0f} us, "
        f"flow simulation {flow.time_s * 1e6:.0f} us"
    )
    c = interchip_bandwidth()
    console.print(
        f"Inter-chip bandwidth, Gen2 vs Trn2 UltraServer: headline {c.headline_ratio:.2f}x; "
        f"per-level sum {c.level_sum_ratio:.2f}x; achieved all-reduce busbw "
        f"{c.allreduce_busbw['trn3-gen2-ultraserver'] / c.allreduce_busbw['trn2-ultraserver']:.2f}x"
    )
