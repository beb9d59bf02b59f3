"""Timing-model benchmarks (issue 5): calibration table, v3/v4 figures, HBM copy, speed.

Run: ``.venv/bin/python benchmarks/bench_timing.py`` (about a minute). Prints the markdown of
the 'Timing model (issue 5)' section of ``benchmarks/RESULTS.md``. ``--speed``: only the speed
part (recording and scheduling 111,744 instructions; about 20 s). ``--against REV [--rounds
N]``: the speed part on git revision ``REV``'s ``src/`` and on the working tree, alternating in
fresh processes (N rounds, default 3), to compare before and after in one run.
"""

from __future__ import annotations

import gc
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import baseline
from trnsim.core import calibration
from trnsim.core.costs import DmaModel
from trnsim.core.timing import schedule
from trnsim.hw import core
from trnsim.nki.benchmark import profile_kernel, record
from trnsim.nki.kernelfile import load_module

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "kernels" / "timing"


def main() -> None:
    mt = load_module(str(EXAMPLES / "matmul_tutorial.py"))
    M, K, N = calibration.SHAPE
    lhsT, rhs = mt.make_inputs(M=M, K=K, N=N, empty=True)
    streams, rec_s = {}, {}
    for m in calibration.MEASUREMENTS:
        t = time.perf_counter()
        streams[m.variant] = record(mt.VARIANTS[m.variant], lhsT, rhs, target="gen2")
        rec_s[m.variant] = time.perf_counter() - t
    print(f"### Calibration: NKI matmul tutorial, M={M} K={K} N={N} bf16, NeuronCore-v2\n")
    print("| variant | instructions | published | modelled | error | MFU (model) |")
    print("|---|---:|---:|---:|---:|---:|")
    eff = calibration.TUTORIAL_TOOLCHAIN.dma_efficiency
    profiles = {
        g: {v: schedule(s, g) for v, s in streams.items()} for g in ("gen2", "gen3", "gen4")
    }
    tutorial = {v: schedule(s, "gen2", dma_efficiency=eff) for v, s in streams.items()}
    table = calibration.error_table({v: p.total_s for v, p in tutorial.items()})
    for r in table:
        p = tutorial[r.variant]
        print(
            f"| {r.description} | {len(streams[r.variant]):,} | {r.published_s * 1e3:.2f} ms | "
            f"{r.modelled_s * 1e3:.2f} ms | {r.error:+.1%} | {p.mfu:.1%} |"
        )
    mape = sum(abs(r.error) for r in table) / len(table)
    print(
        f"\nMean absolute error {mape:.1%}; the SDK 2.20 toolchain's fitted DMA efficiency "
        f"{eff} (trnsim.core.calibration.TUTORIAL_TOOLCHAIN).\n"
    )
    print(
        "### Same kernels, current toolchain (the documents' DMA figures; no published figures)\n"
    )
    print("| variant | v2 | v3 | v4 | v4 MFU |")
    print("|---|---:|---:|---:|---:|")
    for v in streams:
        row = [profiles[g][v] for g in ("gen2", "gen3", "gen4")]
        print(
            f"| {v} | "
            + " | ".join(f"{p.total_s * 1e3:.2f} ms" for p in row)
            + f" | {row[2].mfu:.1%} |"
        )
    p4 = profiles["gen4"]["optimized"]
    print(
        f"\nWell-blocked bf16 matmul on v4: {p4.flops_per_s / 1e12:.1f} TFLOP/s = "
        f"{p4.mfu:.1%} of the {p4.peak_flops / 1e12:.1f} TFLOP/s peak (target >= 85%).\n"
    )
    cp = load_module(str(EXAMPLES / "hbm_copy.py"))
    (src,) = cp.make_inputs(rows=8192, cols=4096, empty=True)
    print("### Pure HBM copy (8192 x 4096 bf16 through SBUF, 64 MiB read + 64 MiB written)\n")
    print("| core | latency | achieved | DMA bound | MBU reference (dma_bw) | MBU |")
    print("|---|---:|---:|---:|---:|---:|")
    for g in ("gen2", "gen3", "gen4"):
        p = profile_kernel(cp.hbm_copy, src, target=g)
        moved = dict(p.bytes_by_memory)["hbm"]
        bound = DmaModel.for_core(core(g)).core_bw
        print(
            f"| {p.target} | {p.total_s * 1e6:,.0f} us | {moved / p.total_s / 1e9:.0f} GB/s | "
            f"{bound / 1e9:.0f} GB/s | {p.dma_bw / 1e9:.0f} GB/s | {p.mbu:.1%} |"
        )
    speed()
    print("- Calibration recordings: " + ", ".join(f"{v} {rec_s[v]:.1f} s" for v in rec_s))


def speed(records: int = 2, schedules: int = 5, quiet: bool = False) -> dict[str, float]:
    """Timing-only speed on the 111,744-instruction tiled matmul (issue 5 benchmark)."""
    mt = load_module(str(EXAMPLES / "matmul_tutorial.py"))
    M, K, _ = calibration.SHAPE
    big_n = 9216
    lhsT, rhs = mt.make_inputs(M=M, K=K, N=big_n, empty=True)
    rec, rec_cpu, big = _best(lambda: record(mt.tiled, lhsT, rhs, target="gen2"), records)
    sched, sched_cpu, prof = _best(lambda: schedule(big, "gen2"), schedules)
    n = len(big)
    figures = {
        "instructions": n,
        "record_s": rec,
        "record_cpu_s": rec_cpu,
        "schedule_s": sched,
        "schedule_cpu_s": sched_cpu,
        "total_s": prof.total_s,
    }
    if quiet:
        return figures
    print(
        f"\n### Speed ({platform.python_implementation()} {platform.python_version()}, "
        f"{platform.machine()}, load average {os.getloadavg()[0]:.1f})\n"
    )
    print(
        f"- Scheduler (timing model on a recorded stream): tiled matmul M={M} K={K} "
        f"N={big_n}, {n:,} instructions in {sched:.3f} s = **{n / sched:,.0f} instructions/s** "
        f"(best of {schedules}; CPU time {n / sched_cpu:,.0f}/s; issue 12 target >= 300,000)."
    )
    print(
        f"- Recording the same stream in timing-only mode (nki front end, rules checked, no "
        f"data): {rec:.2f} s = **{n / rec:,.0f} instructions/s** (best of {records}; CPU time "
        f"{n / rec_cpu:,.0f}/s)."
    )
    print(
        f"- End to end (record + schedule): {rec + sched:.2f} s = "
        f"**{n / (rec + sched):,.0f} instructions/s**."
    )
    return figures


def against(rev: str, rounds: int) -> None:
    """The speed part on ``rev``'s src/ and on the working tree, alternating (one fresh
    process each), and the medians; both must model the same latency."""
    trees = [(baseline.label(rev), baseline.tree(rev)), ("working tree", baseline.WORKING_SRC)]
    runs: dict[str, list[dict]] = {name: [] for name, _ in trees}
    for _ in range(rounds):
        for name, src in trees:
            runs[name].append(baseline.run_child(Path(__file__), ["--speed-json"], src))
    print(
        f"\n### Speed before and after ({platform.python_implementation()} "
        f"{platform.python_version()}, {platform.machine()}, load average "
        f"{os.getloadavg()[0]:.1f}; median of {rounds} alternating fresh processes, each the "
        "best of 2 recordings and 5 schedules)\n"
    )
    print("| code | scheduler | (CPU) | recording | (CPU) | record + schedule |")
    print("|---|---:|---:|---:|---:|---:|")
    latencies = set()
    for name, _ in trees:
        rs = runs[name]
        latencies.update(r["total_s"] for r in rs)
        n = rs[0]["instructions"]

        def rate(key: str, rs: list[dict] = rs, n: int = n) -> str:
            return f"{n / statistics.median(r[key] for r in rs):,.0f}/s"

        end_to_end = n / statistics.median(r["record_s"] + r["schedule_s"] for r in rs)
        print(
            f"| {name} | {rate('schedule_s')} | {rate('schedule_cpu_s')} | {rate('record_s')} "
            f"| {rate('record_cpu_s')} | {end_to_end:,.0f}/s |"
        )
    if len(latencies) != 1:
        raise SystemExit(f"the trees model different latencies: {sorted(latencies)}")


def _best(fn, repeats: int):  # type: ignore[no-untyped-def]
    """(best wall seconds, best CPU seconds, last result) of ``repeats`` calls."""
    wall = cpu = float("inf")
    out = None
    for _ in range(repeats):
        out = None  # free the previous result first
        gc.collect()
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        wall = min(wall, time.perf_counter() - t)
        cpu = min(cpu, time.process_time() - c)
    return wall, cpu, out


if __name__ == "__main__":
    argv = sys.argv[1:]
    if "--speed-json" in argv:
        print(json.dumps(speed(quiet=True)))
    elif "--against" in argv:
        rounds = int(argv[argv.index("--rounds") + 1]) if "--rounds" in argv else 3
        against(argv[argv.index("--against") + 1], rounds)
    elif "--speed" in argv:
        speed()
    else:
        main()
