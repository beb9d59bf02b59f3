"""Full-size legacy kernels (issue 27): timing-only and functional runs against NumPy.

Run: ``.venv/bin/python benchmarks/bench_legacy_full.py`` (several minutes). The kernels are
``examples/kernels/legacy/full_size.py`` (written for trnsim in the legacy API, in the shapes
public kernels use): a 4096 x 12288 x 5120 bf16 matmul blocked as the SDK tutorial's last step,
a compiler-emitted batched matmul (16 x 2048 x 512 x 2000, ragged, lazy PSUM zeros), a LoRA
layer (4096 x 4096 x 4096, rank 64). Each run is a process of its own: the timing-only run is
``nki.benchmark`` (record + schedule, what a kernel developer waits for), the functional run is
``simulate_kernel`` checked element by element against the NumPy golden. Baseline, in the same
process: NumPy doing the same arithmetic in float32 (``np.matmul``), so "trnsim / NumPy" is the
emulator's cost over the plain computation. Prints the markdown of RESULTS.md's section
"Legacy memory model and full-size kernels (issue 27, part A)".
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FULL = ROOT / "examples" / "kernels" / "legacy" / "full_size.py"
TARGET = "trn1"


def _numpy_same_work(name: str, args: tuple) -> float:
    """Seconds NumPy takes for the kernel's arithmetic in float32."""
    import numpy as np

    f = [np.asarray(a, np.float32) if isinstance(a, np.ndarray) else a for a in args]
    t0 = time.perf_counter()
    if name == "matmul":
        f[0].T @ f[1]
    elif name == "bmm":
        np.matmul(f[0].transpose(0, 2, 1), f[1])
    else:
        x, w, a, b, alpha = f
        w.T @ x + b.T @ ((a.T @ x) * alpha)
    return time.perf_counter() - t0


def one(name: str, mode: str) -> dict:
    """One run in this process."""
    import importlib.util

    import numpy as np

    import trnsim.nki as tnki

    tnki.install()
    import neuronxcc.nki as nki

    spec = importlib.util.spec_from_file_location("full_size", FULL)
    fs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fs)
    rng = np.random.default_rng(0)
    args = fs.make_inputs(name, rng)
    base = _numpy_same_work(name, args)
    kernel = fs.KERNELS[name]
    out: dict = {"numpy_s": base}
    t0 = time.perf_counter()
    if mode == "timing":
        bench = nki.benchmark(warmup=1, iters=1, platform_target=TARGET)(kernel)
        bench(*args)
        out["latency_s"] = bench.benchmark_result.nc_latency.get_latency_percentile(50) / 1e6
        out["wall_s"] = time.perf_counter() - t0
    else:
        got = nki.simulate_kernel(kernel, *args)
        out["wall_s"] = time.perf_counter() - t0
        want = fs.golden(name, *args)
        a, b = np.asarray(got, np.float32), np.asarray(want, np.float32)
        out["exact"] = bool(np.array_equal(a, b))
        out["mismatched"] = int((a != b).sum())
    out["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return out


def _child(name: str, mode: str) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--one", name, mode]
    env = {**os.environ, "NEURON_PLATFORM_TARGET_OVERRIDE": TARGET}
    with tempfile.TemporaryDirectory() as cwd:
        res = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=cwd, env=env)
    if res.returncode != 0:
        return {"error": (res.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--one", nargs=2, metavar=("KERNEL", "MODE"), help=argparse.SUPPRESS)
    ap.add_argument("--only", default="", help="run only the kernels whose name has this")
    a = ap.parse_args()
    if a.one:
        print(json.dumps(one(*a.one)))
        return
    text = FULL.read_text()  # the shapes, from SHAPES in the kernels' file
    print("| kernel | shape | mode | trnsim wall | NumPy (same work) | trnsim / NumPy | "
          "result | modelled latency (trn1) | peak RSS |")  # fmt: skip
    print("|---|---|---|---:|---:|---:|---|---:|---:|")
    for name in ("matmul", "bmm", "lora"):
        if a.only not in name:
            continue
        shape = text.split(f'"{name}": ', 1)[1].split("}", 1)[0] + "}"
        for mode in ("timing", "functional"):
            r = _child(name, mode)
            if "error" in r:
                print(f"| {name} | {shape} | {mode} | error: {r['error']} | | | | | |")
                continue
            res = (
                "exact" if r.get("exact") else f"{r.get('mismatched')} mismatched"
            ) if mode == "functional" else ""  # fmt: skip
            lat = f"{r['latency_s'] * 1e3:.2f} ms" if "latency_s" in r else ""
            print(
                f"| {name} | {shape} | {mode} | {r['wall_s']:.1f} s | {r['numpy_s']:.1f} s | "
                f"{r['wall_s'] / r['numpy_s']:.1f}x | {res} | {lat} | "
                f"{r['peak_rss_bytes'] / 2**20:.0f} MiB |"
            )


if __name__ == "__main__":
    main()
