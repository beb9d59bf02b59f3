"""What ``trnsim run``'s guards cost (issue 21): a kernel file run against the same work unguarded.

Run: ``.venv/bin/python benchmarks/bench_run_guard.py [--rounds 5]``.

Measured, same process, same run, each the best of ``--rounds`` (CPU time of this process):

- **guarded**: ``trnsim.nki.kernelfile.run_file`` on a kernel file (the file loaded and compiled,
  ``make_inputs``, copies of the inputs for the kernel, one budget with its signal handlers
  and heartbeat thread, the output rules: returned tensors in HBM, every element written,
  then the golden and the comparison);
- **baseline**: what ``run_file`` did before the guards: load the file (``kf.load``), pick the
  kernel, ``make_inputs``, ``trnsim.nki.run`` with ``allow_unwritten=True``, the same golden
  and comparison; no copies, no budget, no output check.

The ratio guarded / baseline is the price of the guards for one run of a small kernel (where it
is largest: the kernel's own work is short) and a mid-size one. Also prints the CPU seconds of
the CLI, ``trnsim run examples/kernels/matmul.py`` (a process each, best of ``--rounds``), the
figure the issue asks to keep.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CASES = [  # (kernel file, kernel)
    (ROOT / "examples" / "kernels" / "matmul.py", None),
    (ROOT / "examples" / "kernels" / "softmax.py", None),
    (ROOT / "examples" / "kernels" / "flash_attention.py", None),
]


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def best(fn, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t0 = cpu()
        fn()
        times.append(cpu() - t0)
    return min(times)


def baseline_runner(path: Path, kernel: str | None):
    from trnsim import nki as tn
    from trnsim.nki import kernelfile as kf

    def once() -> bool:
        mod = kf.load(str(path))
        name, k = kf.pick_kernel(mod, kernel)
        gold = getattr(mod, f"golden_{name}", None) or mod.golden
        args = kf.inputs_for(mod, name)
        res = tn.run(k, *args, allow_unwritten=True)
        outs = kf._flat(res.outputs)
        goldens = kf._flat(gold(*args))
        tol = kf.resolve_tolerance(mod, name, outs, goldens)
        kf.compare(outs, goldens)
        return all(
            kf._within(o, g, tol["rtol"], tol["atol"]) for o, g in zip(outs, goldens, strict=True)
        )

    return once


def cli_cpu(rounds: int) -> float:
    times = []
    env = {**os.environ, "TRNSIM_PROGRESS": "0"}
    for _ in range(rounds):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(
            [sys.executable, "-m", "trnsim", "run", str(CASES[0][0])],
            check=True,
            capture_output=True,
            env=env,
        )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        times.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    from trnsim.nki import kernelfile as kf

    print(f"load average {os.getloadavg()[0]:.1f}; best of {args.rounds}, CPU seconds\n")
    print("| kernel file | baseline | guarded (run_file) | ratio |")
    print("|---|---:|---:|---:|")
    for path, kernel in CASES:
        once = baseline_runner(path, kernel)
        assert once()
        r = kf.run_file(str(path), kernel)
        assert r.passed, path
        base = best(once, args.rounds)
        guarded = best(lambda p=path, k=kernel: kf.run_file(str(p), k), args.rounds)
        print(f"| {path.name} | {base:.4f} s | {guarded:.4f} s | {guarded / base:.2f}x |")
    t0 = time.perf_counter()
    c = cli_cpu(args.rounds)
    print(
        f"\n`trnsim run examples/kernels/matmul.py`: {c:.2f} s CPU per process "
        f"(best of {args.rounds}; {time.perf_counter() - t0:.1f} s wall for all)"
    )
    np.testing.assert_(c > 0)


if __name__ == "__main__":
    main()
