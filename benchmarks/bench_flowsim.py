"""Flow simulator at scale (issue 16): the grouped engine against the per-flow specification.

    .venv/bin/python benchmarks/bench_flowsim.py          # old engine only where it is feasible
    .venv/bin/python benchmarks/bench_flowsim.py --all    # also the old engine on the big cases

Each run is a fresh subprocess (so its peak memory is its own): wall time, peak RSS and the
simulated time, for both engines where the old one runs; the ratio is old / new in this run.
Prints every figure recorded in benchmarks/RESULTS.md, section "Flow simulator at scale".
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = """
import json, resource, sys, time
from trnsim.fabric.flowsim import simulate
op, size, ranks, system = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
grouped = sys.argv[5] == "1"
t0 = time.perf_counter()
r = simulate(op, size, ranks, system, grouped=grouped)
wall = time.perf_counter() - t0
print(json.dumps({"wall": wall, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "time_s": r.time_s, "algo": r.algo}))
"""

GiB = 2**30
#: (label, op, bytes, ranks, system, old engine feasible by default)
CASES = [
    ("all-to-all 1 GiB, 1,024 ranks", "all-to-all", GiB, 1024, "trn3-ultracluster", True),
    ("all-to-all 1 GiB, 4,096 ranks", "all-to-all", GiB, 4096, "trn3-ultracluster", False),
    ("all-reduce 1 GiB, 20,736 ranks", "all-reduce", GiB, 20736, "trn3-ultracluster", True),
    ("all-reduce 1 GiB, 999,936 ranks", "all-reduce", GiB, 999936, "trn3-ultracluster", False),
]


def run(op: str, size: float, ranks: int, system: str, grouped: bool) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, op, repr(size), str(ranks), system, "1" if grouped else "0"],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--all", action="store_true", help="run the per-flow engine on every case")
    args = ap.parse_args()
    print(f"{'case':34} {'engine':8} {'wall s':>8} {'peak MB':>8} {'simulated us':>14}  ratio")
    for label, op, size, ranks, system, feasible in CASES:
        new = run(op, size, ranks, system, True)
        line = f"{new['wall']:8.2f} {new['rss_mb']:8.0f} {new['time_s'] * 1e6:14.3f}"
        print(f"{label:34} {'grouped':8} {line}")
        if feasible or args.all:
            old = run(op, size, ranks, system, False)
            same = abs(old["time_s"] - new["time_s"]) / old["time_s"]
            line = f"{old['wall']:8.2f} {old['rss_mb']:8.0f} {old['time_s'] * 1e6:14.3f}"
            print(
                f"{'':34} {'per-flow':8} {line}  {old['wall'] / new['wall']:.1f}x faster, "
                f"{old['rss_mb'] / new['rss_mb']:.1f}x less memory, rel. diff {same:.1e}"
            )


if __name__ == "__main__":
    main()
