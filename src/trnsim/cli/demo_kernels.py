"""Demo section: example NKI kernels run on the emulated NeuronCore-v4, checked live against
their NumPy goldens (small shapes, a few seconds)."""

from __future__ import annotations

import pathlib
import time

from rich.console import Console
from rich.table import Table

from trnsim.nki.kernelfile import run_file
from trnsim.report.tables import fit

EXAMPLES = pathlib.Path(__file__).resolve().parents[3] / "examples" / "kernels"
# (file, kernel or None): small default shapes from each file's make_inputs
KERNELS: list[tuple[str, str | None]] = [
    ("matmul.py", "matmul_blocked"),
    ("flash_attention.py", None),
    ("mx_matmul.py", None),
]


def section(console: Console) -> None:
    if not EXAMPLES.is_dir():
        console.print(f"examples/kernels not found next to the package ({EXAMPLES}); skipped")
        return
    t = Table(title="NKI kernels on the emulator vs NumPy goldens (trnsim run <file>)")
    for col in ("kernel", "time", "outputs", "max abs err", "max rel err", "check"):
        t.add_column(col, justify="right" if col not in ("kernel", "outputs") else "left")
    t.add_column("instructions")
    for name, kernel in KERNELS:
        t0 = time.perf_counter()
        r = run_file(str(EXAMPLES / name), kernel)
        outs = ", ".join(f"{o.dtype}[{','.join(map(str, o.shape))}]" for o in r.outputs)
        check = "-" if r.passed is None else ("pass" if r.passed else "FAIL")
        engines = " ".join(f"{e}:{n}" for e, n in r.by_engine.items())
        t.add_row(
            r.kernel,
            f"{time.perf_counter() - t0:.2f} s",
            outs,
            f"{r.max_abs_err:.2g}",
            f"{r.max_rel_err:.2g}",
            check,
            f"{r.instructions:,} ({engines})",
        )
    console.print(fit(t))
