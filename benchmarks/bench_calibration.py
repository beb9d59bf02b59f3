"""Timing calibration on public measurements (issue 27): the fits behind the constants.

Run: ``.venv/bin/python benchmarks/bench_calibration.py [ROOT]`` (ROOT holds the checkouts;
default /work/checkouts). Prints:

- ``--launch``: the launch-overhead fit (``trnsim.core.calibration.LAUNCH_OVERHEAD_S``): per
  single-tile MLP row of trainium-kernel-fusion, measured latency minus the modelled stream
  (``launch_s=0``), per launch, and their median;
- ``--toolchain``: the SDK 2.20 tutorial toolchain's DMA efficiency sweep (the four matmul
  tutorial rows, trnsim's versions of the kernels);
- with neither: both.

The rows' table itself: ``trnsim calibrate ROOT --markdown`` (benchmarks/RESULTS.md).
"""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path

from trnsim.core import calibration
from trnsim.core.timing import schedule


def launch_fit(root: str) -> None:
    from trnsim.conformance.timing import _imports, find_checkouts, load
    from trnsim.conformance.timing_rows import ROWS
    from trnsim.nki.benchmark import record

    checkouts = find_checkouts(root, {})
    if "trainium-kernel-fusion" not in checkouts:
        print(f"no trainium-kernel-fusion checkout under {root}")
        return
    print("| row | measured | modelled stream | implied launch overhead |")
    print("|---|---:|---:|---:|")
    implied = []
    for row in ROWS:
        if not (row.name.startswith("tkf/mlp/") and row.name.endswith("/128x128x512")):
            continue
        base = checkouts[row.repo]
        body = 0.0
        with _imports(base):
            for launch in row.launches:
                k = load(launch.kernel, base)
                stream = record(k, *launch.args(), target=row.target, **launch.kwargs)
                body += schedule(stream, row.target, launch_s=0.0).total_s
        per = (row.measured_s - body) / len(row.launches)
        implied.append(per)
        print(
            f"| {row.name} | {row.measured_s * 1e6:.1f} us | {body * 1e6:.1f} us | "
            f"{per * 1e6:.1f} us |"
        )
    print(
        f"\nmedian {statistics.median(implied) * 1e6:.1f} us (LAUNCH_OVERHEAD_S = "
        f"{calibration.LAUNCH_OVERHEAD_S * 1e6:.1f} us)\n"
    )


def toolchain_fit() -> None:
    from trnsim.nki.benchmark import record
    from trnsim.nki.kernelfile import load_module

    examples = Path(__file__).resolve().parents[1] / "examples" / "kernels" / "timing"
    mt = load_module(str(examples / "matmul_tutorial.py"))
    m, k, n = calibration.SHAPE
    lhs_t, rhs = mt.make_inputs(M=m, K=k, N=n, empty=True)
    streams = {
        r.variant: record(mt.VARIANTS[r.variant], lhs_t, rhs, target="gen2")
        for r in calibration.MEASUREMENTS
    }
    variants = " | ".join(r.variant for r in calibration.MEASUREMENTS)
    print(f"| DMA efficiency | {variants} | sum of squared log errors |")
    print("|---:|" + "---:|" * (len(calibration.MEASUREMENTS) + 1))
    best = None
    for step in range(36, 47):
        eff = step / 100
        errs = [
            schedule(streams[r.variant], "gen2", dma_efficiency=eff).total_s / r.latency_s
            for r in calibration.MEASUREMENTS
        ]
        sse = sum(math.log(e) ** 2 for e in errs)
        best = min(best or (sse, eff), (sse, eff))
        cells = " | ".join(f"{e - 1:+.1%}" for e in errs)
        print(f"| {eff:.2f} | {cells} | {sse:.5f} |")
    print(
        f"\nbest {best[1]:.2f} (TUTORIAL_TOOLCHAIN: "
        f"{calibration.TUTORIAL_TOOLCHAIN.dma_efficiency:.2f})\n"
    )


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    root = args[0] if args else "/work/checkouts"
    flags = {a for a in sys.argv[1:] if a.startswith("--")}
    if not flags or "--launch" in flags:
        launch_fit(root)
    if not flags or "--toolchain" in flags:
        toolchain_fit()


if __name__ == "__main__":
    main()
