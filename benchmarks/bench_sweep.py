"""Speed of sweeps and autotuning by backend: a 200-point ``train`` sweep (the planner picks each
point's plan: about 0.3-1 s of work per point) and a 16-candidate ``tune`` of the blocked
matmul (1024 x 4096 x 1024, bf16: each candidate an emulation, a golden check and a timing),
each run serially in this process (the baseline), on a local process pool of 2 workers and on
a local Ray runtime of 2 CPUs, in the same run. Every backend's results are checked equal to
the serial ones, row for row, before any time is reported.

The serial path runs with every module already imported (its warmest case); the pool's time
includes starting its workers (forked from this process, as the CLI's are: the serial and
pool runs come before Ray's threads start here), Ray's includes its workers' first imports
but not starting the runtime, timed apart (``ray init``): a sweep on an existing cluster
(``--ray ADDRESS``) does not pay it. A tune's process keeps the kernel file's inputs and
golden for its candidates (``trnsim.sweep.tune.memo``); they are dropped after every run, so
no backend starts with what another made.

Run: ``.venv/bin/python benchmarks/bench_sweep.py`` (``--points N``, ``--only sweep|tune``;
prints Markdown rows and the load average before and after).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from trnsim import extras
from trnsim.sweep import spec as specs
from trnsim.sweep import tune
from trnsim.sweep.backends import Pool, RayBackend, Serial
from trnsim.sweep.engine import drive, run_spec
from trnsim.sweep.points import run_point
from trnsim.sweep.table import Table

ROOT = Path(__file__).resolve().parents[1]
MATMUL = str(ROOT / "examples" / "kernels" / "matmul.py")


class Quiet:
    """No progress bar."""

    def advance(self, steps: float = 1) -> None:
        pass


SWEEP = {
    "verb": "train",
    "fixed": {"system": "trn3-gen2"},
    "grid": {
        "model": ["llama-3.1-8b", "llama-3.1-70b"],
        "chips": [32, 64, 128, 256, 512],
        "precision": ["bf16", "fp8"],
        "global_batch": [256, 512, 1024, 2048, 4096],
        "seq_len": [2048, 4096],
    },
}


def sweep_once(backend: Any, n: int, tmp: Path) -> tuple[float, list[dict[str, Any]]]:
    spec = specs.parse(SWEEP, "bench")
    spec = spec.__class__(**{**spec.__dict__, "points": spec.points[:n]})
    table = Table(tmp / f"{backend.name}.csv", spec.columns, fresh=True)
    t0 = time.perf_counter()
    run_spec(spec, table, backend, Quiet())
    return time.perf_counter() - t0, table.rows


def tune_once(backend: Any) -> tuple[float, list[dict[str, Any]]]:
    values = [1, 2, 4, 8]
    jobs = [
        (
            f"{m}x{n}",
            tune.CandidateJob(
                MATMUL,
                "matmul_blocked",
                "gen4",
                0,
                (("K", 1024), ("M", 1024), ("N", 4096)),
                (("TILES_IN_BLOCK_M", m), ("TILES_IN_BLOCK_N", n)),
            ),
        )
        for m in values
        for n in values
    ]
    columns = ("point", "status", "exit", "error", *tune.METRICS)
    table = Table(None, columns)
    t0 = time.perf_counter()
    drive(jobs, tune.run_candidate, lambda pid, c: {"point": pid, **c}, table, backend, Quiet())
    return time.perf_counter() - t0, sorted(table.rows, key=lambda r: r["point"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=200)
    ap.add_argument("--only", choices=("sweep", "tune"))
    args = ap.parse_args()
    os.environ["TRNSIM_PROGRESS"] = "0"
    load0 = os.getloadavg()
    assert run_point  # imported: the serial baseline starts warm
    tmp = Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    # each case's pool preloads what its CLI verb's pool does (train's module; tune.PRELOAD)
    pools = {"sweep": Pool(2, ("trnsim.cli.train",)), "tune": Pool(2, tune.PRELOAD)}
    cases = [c for c in ("sweep", "tune") if not args.only or c == args.only]
    what = {"sweep": f"{args.points}-point train sweep", "tune": "16-candidate tune"}

    def once(case: str, b: Any) -> tuple[float, list[dict[str, Any]]]:
        got = sweep_once(b, args.points, tmp) if case == "sweep" else tune_once(b)
        tune.forget()  # each backend's run starts without the serial run's inputs and golden
        return got

    # the serial and pool runs first: the pool forks its workers from this process, as the
    # CLI's does, which it may not once Ray's threads run here (``backends.forkable``)
    results: dict[str, list[tuple[str, float, list[dict[str, Any]]]]] = {c: [] for c in cases}
    for case in cases:
        for b in (Serial(), pools[case]):
            seconds, got = once(case, b)
            results[case].append((b.name, seconds, got))
    t0 = time.perf_counter()
    ray, _ = extras.connect(None, num_cpus=2)
    t_init = time.perf_counter() - t0
    for case in cases:
        seconds, got = once(case, RayBackend())
        results[case].append(("ray", seconds, got))
    extras.shutdown(ray)
    rows = ["| Case | Backend | Time | Speed-up over serial |", "|---|---|---:|---:|"]
    for case in cases:
        (_, base, ref), *_ = results[case]
        for name, seconds, got in results[case]:
            assert got == ref, f"{name} {case}: rows differ from the serial path's"
            rows.append(f"| {what[case]} | {name} | {seconds:.1f} s | {base / seconds:.2f}x |")
        ok = sum(1 for r in ref if r["status"] == "ok")
        rows.append(f"| ({case}: {ok} of {len(ref)} ok, every backend's rows equal) | | | |")
    rows.append(
        f"| ray init (local runtime, 2 CPUs; not in the Ray times above) | | {t_init:.1f} s | |"
    )
    print("\n".join(rows))
    load1 = os.getloadavg()
    print(
        f"\nload average (1, 5, 15 min): before {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}, "
        f"after {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}; cores {os.cpu_count()}"
    )


if __name__ == "__main__":
    main()
