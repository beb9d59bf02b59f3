"""Demo section: Trainium3 number formats computed bit-exactly (MX, stochastic rounding, M:N)."""

from __future__ import annotations

import numpy as np
from rich.console import Console
from rich.table import Table

from trnsim import numerics as nx
from trnsim.report.tables import fit


def section(console: Console) -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((128, 512)).astype(np.float32)
    b = rng.standard_normal((512, 128)).astype(np.float32)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    table = Table(title="128x512 @ 512x128 in MX formats vs float64", title_justify="left")
    for col in ("A x B formats", "scale rule", "max rel error"):
        table.add_column(col)
    for fa, fb, rule in (
        ("float8_e4m3fn", "float8_e4m3fn", "ocp"),
        ("float8_e4m3fn", "float8_e4m3fn", "nki"),
        ("float4_e2m1fn", "float8_e4m3fn", "ocp"),
    ):
        qa = nx.quantize(a, fa, axis=1, scale_rule=rule)
        qb = nx.quantize(b, fb, axis=0, scale_rule=rule)
        err = np.abs(nx.mx_matmul(qa, qb) - exact).max() / np.abs(exact).max()
        table.add_row(f"{fa} x {fb}", rule, f"{err:.2e}")
    console.print(fit(table))

    x = np.full(1 << 16, 1.0 + 2.0**-10, dtype=np.float32)  # between two bf16 neighbours
    rne = nx.to_float32(nx.cast(x, "bfloat16"), "bfloat16").mean()
    sr = nx.to_float32(nx.cast(x, "bfloat16", rounding="stochastic", rng=7), "bfloat16").mean()
    console.print(
        f"bf16 of 1 + 2^-10 (65,536 copies): RNE mean {rne:.6f}, stochastic mean {sr:.6f}, "
        f"exact {x[0]:.6f} (stochastic rounding is unbiased)"
    )
    w = rng.standard_normal((4, 16)).astype(np.float32)
    pruned = nx.prune(w, "2:4")
    nx.check(pruned, "2:4")
    kept = np.count_nonzero(pruned) / pruned.size
    console.print(f"2:4 structured sparsity: pruned a 4x16 weight, {kept:.0%} kept, check passes")
