"""Peak memory and time of full-size timing-only profiles (issue 16: memory proportional to
what is kept; the legacy-API issue: full-size kernels time in under 20 s and 1 GB).

Run: ``.venv/bin/python benchmarks/bench_memory.py [--against REV] [--rounds N]`` (about a
minute per round and revision). Each case runs in a fresh process, as ``trnsim profile FILE
--no-files`` does (``trnsim.cli.profile.profile_file``: load the kernel file, record the kernel
in timing-only mode, schedule the stream), and reports its instructions, wall and CPU seconds,
the process's peak resident memory (``ru_maxrss``) and its resident memory after the imports.
``--against REV`` runs the same cases on ``src/`` of git revision ``REV`` too, alternating
with the working tree, and checks both model the same latency. Prints the markdown of the
"Memory of timing-only profiles" part of ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import time
from pathlib import Path

import baseline

KERNELS = Path(__file__).resolve().parents[1] / "examples" / "kernels"
CASES: dict[str, tuple[str, str, str, dict[str, object]]] = {
    # name: (kernel file under examples/kernels, kernel, target, make_inputs arguments)
    "matmul 4096x8192x8192 bf16 (tutorial tiled, gen2)": (
        "timing/matmul_tutorial.py",
        "tiled",
        "gen2",
        {"M": 4096, "K": 8192, "N": 8192, "empty": True},
    ),
    "flash attention S=4096 d=128 fp32 (gen4)": (
        "flash_attention.py",
        "flash_attention_fwd",
        "gen4",
        {"S": 4096, "d": 128},
    ),
}


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def child(case: str) -> None:
    """One case in this (fresh) process; prints one JSON line."""
    from trnsim.cli.profile import profile_file

    start_rss = _rss_mib()
    path, kernel, target, kwargs = CASES[case]
    t, c = time.perf_counter(), time.process_time()
    _, prof = profile_file(str(KERNELS / path), kernel, target, kwargs=kwargs)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    print(
        json.dumps(
            {
                "instructions": prof.instructions,
                "total_s": prof.total_s,
                "wall_s": wall,
                "cpu_s": cpu,
                "peak_mib": _rss_mib(),
                "start_mib": start_rss,
            }
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--against", metavar="REV", help="also run git revision REV's src/")
    ap.add_argument("--rounds", type=int, default=2, help="runs of each case and tree")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child)
        return
    trees = [("working tree", baseline.WORKING_SRC)]
    if args.against:
        trees.insert(0, (baseline.label(args.against), baseline.tree(args.against)))
    runs: dict[tuple[str, str], list[dict]] = {}
    for _ in range(args.rounds):
        for case in CASES:
            for name, src in trees:
                res = baseline.run_child(Path(__file__), ["--child", case], src)
                runs.setdefault((case, name), []).append(res)
    print(
        f"Machine: {platform.python_implementation()} {platform.python_version()}, "
        f"{platform.machine()}, load average {os.getloadavg()[0]:.1f}; "
        f"median of {args.rounds} fresh processes per row.\n"
    )
    print("| kernel | code | instructions | wall | CPU | peak RSS | RSS after imports |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for case in CASES:
        latencies = set()
        for name, _ in trees:
            rs = runs[(case, name)]
            latencies.update(r["total_s"] for r in rs)

            def med(key: str, rs: list[dict] = rs) -> float:
                return statistics.median(r[key] for r in rs)

            print(
                f"| {case} | {name} | {rs[0]['instructions']:,} | {med('wall_s'):.2f} s | "
                f"{med('cpu_s'):.2f} s | {med('peak_mib'):.0f} MiB | {med('start_mib'):.0f} MiB |"
            )
        if len(latencies) != 1:
            raise SystemExit(f"{case}: the trees model different latencies: {sorted(latencies)}")


if __name__ == "__main__":
    main()
