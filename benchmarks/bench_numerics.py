"""Speed of trnsim.numerics against plain ml_dtypes casts, measured in the same run.

    python benchmarks/bench_numerics.py [--log2n 24] [--repeat 5]

1. MXFP8 quantize (E4M3, blocks of 32, OCP and NKI scale rules; E5M2) of 2^24 bf16 values
   vs one ml_dtypes ``astype(float8_e4m3fn)`` of the same bf16 array. Target: ratio <= 3.
2. Stochastic-rounding cast vs RNE cast (fp32 -> bf16 and fp32 -> float8_e4m3fn).

Each figure is the median of ``--repeat`` timed runs after one warm-up run; each ratio is the
median of per-run ratios, the case and its baseline timed back to back (interleaved), so that
load from other processes on a shared machine hits both alike. A benchmark, not a test: it
asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable

import ml_dtypes
import numpy as np

from trnsim.numerics import cast, quantize


def median_seconds(fn: Callable[[], object], repeat: int) -> float:
    fn()  # warm-up: page faults and caches
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def paired(
    fn: Callable[[], object], base: Callable[[], object], repeat: int
) -> tuple[float, float]:
    """(median seconds of fn, median of fn/base ratios), fn and base timed alternately."""
    fn()
    base()
    times, ratios = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        base()
        t1 = time.perf_counter()
        fn()
        t2 = time.perf_counter()
        times.append(t2 - t1)
        ratios.append((t2 - t1) / (t1 - t0))
    return statistics.median(times), statistics.median(ratios)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log2n", type=int, default=24)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    n = 1 << args.log2n
    rng = np.random.default_rng(0)
    x32 = (rng.standard_normal(n) * np.exp2(rng.integers(-8, 8, n))).astype(np.float32)
    xbf = x32.astype(ml_dtypes.bfloat16)

    print(
        f"machine: {platform.machine()} {platform.processor() or ''} cpus={os.cpu_count()} "
        f"python {platform.python_version()} numpy {np.__version__} ml_dtypes "
        f"{ml_dtypes.__version__}; n = 2^{args.log2n}, median of {args.repeat}"
    )
    base = median_seconds(lambda: xbf.astype(ml_dtypes.float8_e4m3fn), args.repeat)
    print(f"{'ml_dtypes bf16 -> float8_e4m3fn astype':44s} {base * 1e3:8.1f} ms   1.00x")
    cases = {
        "MXFP8 E4M3 quantize (ocp)": lambda: quantize(xbf, "float8_e4m3fn"),
        "MXFP8 E4M3 quantize (nki)": lambda: quantize(xbf, "float8_e4m3fn", scale_rule="nki"),
        "MXFP8 E5M2 quantize (ocp)": lambda: quantize(xbf, "float8_e5m2"),
        "MXFP4 E2M1 quantize (ocp)": lambda: quantize(xbf, "float4_e2m1fn"),
    }

    def baseline() -> object:
        return xbf.astype(ml_dtypes.float8_e4m3fn)

    for name, fn in cases.items():
        t, ratio = paired(fn, baseline, args.repeat)
        print(f"{name:44s} {t * 1e3:8.1f} ms {ratio:6.2f}x")

    print()
    for target in ("bfloat16", "float8_e4m3fn"):
        rne = median_seconds(lambda t=target: cast(x32, t), args.repeat)
        sr, ratio = paired(
            lambda t=target: cast(x32, t, rounding="stochastic", rng=1),
            lambda t=target: cast(x32, t),
            args.repeat,
        )
        print(f"{'cast fp32 -> ' + target + ' RNE':44s} {rne * 1e3:8.1f} ms   1.00x")
        print(f"{'cast fp32 -> ' + target + ' stochastic':44s} {sr * 1e3:8.1f} ms {ratio:6.2f}x")


if __name__ == "__main__":
    main()
