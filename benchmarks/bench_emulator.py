"""Functional speed of the emulator: the blocked bf16 matmul kernel (examples/kernels/matmul.py)
at M = N = K = 2048 against one NumPy float32 matmul of the same shape, in the same run.

Run: ``.venv/bin/python benchmarks/bench_emulator.py`` (prints a Markdown table row: best and
median of 7 of each, the runs of each kind interleaved; the emulator as it runs by default,
with the accelerators on (``CoreOptions(deferred=True, fast_paths=True)``: the data work on
other threads, ``trnsim.core.accel``), and the plain interpreter (``CoreOptions()``, the
default: synchronous, no caches); the tile-matmul column is the kernel's 1024 tile products
alone on one BLAS thread; last, the load average).
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import statistics
import time

import numpy as np

import trnsim.nki
from trnsim.core.blas import single_threaded_blas
from trnsim.core.options import CoreOptions

ROOT = pathlib.Path(__file__).resolve().parents[1]


def main(size: int = 2048, repeats: int = 7) -> dict[str, float]:
    trnsim.nki.install()
    spec = importlib.util.spec_from_file_location("mm", ROOT / "examples/kernels/matmul.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    lhsT, rhs = mod.make_inputs(np.random.default_rng(0), K=size, M=size, N=size)
    a32, b32 = lhsT.astype(np.float32).T.copy(), rhs.astype(np.float32)
    with single_threaded_blas():  # what the emulator's tile matmuls run with
        # the kernel's 128x128 by 128x512 tile products, one np.matmul each
        # (semantics.nc_matmul), on contiguous float32 tiles
        st = np.ascontiguousarray(a32[:128, :128])
        mv = np.ascontiguousarray(b32[:128, :512])
        tiles = (size // 128) * (size // 128) * (size // 512)
        t_tiles = min(_time(lambda: _products(st, mv, tiles)) for _ in range(3))
    times: dict[str, list[float]] = {"numpy": [], "numpy1": [], "deferred": [], "sync": []}
    options = {"deferred": CoreOptions(deferred=True, fast_paths=True), "sync": CoreOptions()}
    for _ in range(repeats):
        times["numpy"].append(_time(lambda: a32 @ b32))
        with single_threaded_blas():
            times["numpy1"].append(_time(lambda: a32 @ b32))
        for kind, opts in options.items():
            times[kind].append(
                _time(lambda o=opts: trnsim.nki.run(mod.matmul_blocked, lhsT, rhs, options=o))
            )
    best = {k: min(v) for k, v in times.items()}
    med = {k: statistics.median(v) for k, v in times.items()}
    n_instr = len(trnsim.nki.run(mod.matmul_blocked, lhsT, rhs).instructions)
    out = {
        "numpy_s": best["numpy"],
        "numpy_1thread_s": best["numpy1"],
        "emulator_s": best["deferred"],
        "emulator_median_s": med["deferred"],
        "synchronous_s": best["sync"],
        "plain_ratio": best["sync"] / best["numpy"],
        "ratio": best["deferred"] / best["numpy"],
        "ratio_median": med["deferred"] / med["numpy"],
        "instructions": n_instr,
        "tile_matmuls_s": t_tiles,
    }
    print(
        f"| {size}^3 bf16 | {best['deferred']:.3f} s ({med['deferred']:.3f}) | "
        f"{best['sync']:.3f} s ({med['sync']:.3f}) | **{out['plain_ratio']:.2f}x** | "
        f"{best['numpy']:.3f} s ({med['numpy']:.3f}) | "
        f"**{out['ratio']:.2f}x** ({out['ratio_median']:.2f}x) | "
        f"{best['numpy1']:.3f} s | {best['deferred'] / best['numpy1']:.2f}x | "
        f"{t_tiles:.3f} s | {n_instr} | {os.getloadavg()[0]:.1f} |"
    )
    return out


def _products(st: np.ndarray, mv: np.ndarray, n: int) -> None:
    for _ in range(n):
        np.matmul(st, mv)  # each result freed at once, as in the emulator


def _time(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()
