"""Functional speed of the emulator: the blocked bf16 matmul kernel (examples/kernels/matmul.py)
at M = N = K = 2048 against one NumPy float32 matmul of the same shape, in the same run.

Run: ``.venv/bin/python benchmarks/bench_emulator.py`` (prints a Markdown table row: best of 5
of each; the tile-matmul column is the floor the specification sets, the kernel's 1024 tile
products alone on one BLAS thread, and its ratio to the NumPy matmul; last, the load average).
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import time

import numpy as np

import trnsim.nki
from trnsim.core.blas import single_threaded_blas

ROOT = pathlib.Path(__file__).resolve().parents[1]


def main(size: int = 2048, repeats: int = 5) -> dict[str, float]:
    trnsim.nki.install()
    spec = importlib.util.spec_from_file_location("mm", ROOT / "examples/kernels/matmul.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    lhsT, rhs = mod.make_inputs(np.random.default_rng(0), K=size, M=size, N=size)
    a32, b32 = lhsT.astype(np.float32).T.copy(), rhs.astype(np.float32)
    t_np = min(_time(lambda: a32 @ b32) for _ in range(repeats))
    with single_threaded_blas():  # what the emulator's tile matmuls run with
        t_np1 = min(_time(lambda: a32 @ b32) for _ in range(repeats))
        # the floor the specification sets: the kernel's 128x128 by 128x512 tile products,
        # one np.matmul each (semantics.nc_matmul), on contiguous float32 tiles
        st = np.ascontiguousarray(a32[:128, :128])
        mv = np.ascontiguousarray(b32[:128, :512])
        tiles = (size // 128) * (size // 128) * (size // 512)
        t_tiles = min(_time(lambda: _products(st, mv, tiles)) for _ in range(3))
    res = {}
    t_emu = min(
        _time(lambda: res.setdefault("r", trnsim.nki.run(mod.matmul_blocked, lhsT, rhs)))
        for _ in range(repeats)
    )
    n_instr = len(trnsim.nki.run(mod.matmul_blocked, lhsT, rhs).instructions)
    out = {
        "numpy_s": t_np,
        "numpy_1thread_s": t_np1,
        "emulator_s": t_emu,
        "ratio": t_emu / t_np,
        "instructions": n_instr,
        "tile_matmuls_s": t_tiles,
    }
    print(
        f"| {size}^3 bf16 | {t_emu:.3f} s | {t_np:.3f} s | {t_emu / t_np:.2f}x | "
        f"{t_np1:.3f} s | {t_emu / t_np1:.2f}x | {t_tiles:.3f} s ({t_tiles / t_np:.2f}x) | "
        f"{n_instr} | {os.getloadavg()[0]:.1f} |"
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
