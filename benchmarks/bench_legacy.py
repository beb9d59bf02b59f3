"""Legacy front end (issue 14): full-size legacy kernels timed with ``nki.benchmark``.

Run: ``.venv/bin/python benchmarks/bench_legacy.py`` (a few minutes). Each kernel runs in its own
process (so its peak memory is its own): the SDK 2.26 matrix-multiplication tutorial's four
kernels at the tutorial's benchmark size (``nt.tensor[[8192, 4096], bf16]`` x ``[[8192, 8192],
bf16]``, M=4096 K=8192 N=8192) on Trn1 (gen2, where AWS published latencies: table A of
``/work/shared/calibration/trainium.md``) and on the default target; the nki-samples attention
tutorial at 4096 tokens (d_head 128, bf16). Baseline, same run: the new-API port of the same
matmul kernels (``examples/kernels/timing/matmul_tutorial.py``) recorded and timed the same
way, so "legacy / new" is the legacy front end's cost over the new API's.

Prints the markdown of the 'Legacy NKI front end (issue 14)' section of RESULTS.md.
Needs the checkouts at /work/checkouts (``--sdk226``, ``--samples`` to move them).
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
MM_FILE = "general/nki/examples/matrix_multiplication/matrix_multiplication_nki_kernels.py"
ATT_FILE = "src/nki_samples/tutorials/attention_fwd_performance/attention_kernels.py"
MATMULS = {  # legacy kernel -> (new-API port variant, calibration variant)
    "nki_matmul_tiled_": "tiled",
    "nki_matmul_hoist_load_": "hoisted",
    "nki_matmul_block_free_dimension_": "blocked",
    "nki_matmul_fully_optimized_": "optimized",
}
ATTENTION = (
    "attn_fwd_v3",
    "attn_fwd_v4",
    "attn_fwd_v5",
    "attn_fwd_v6",
    "attn_fwd_v7",
    "attn_fwd_v8",
    "attn_fwd_v9",
    "attn_fwd_v10",
    "attn_fwd_v11",
)


def _load(path: str):
    import importlib.util

    sys.path.insert(0, os.path.dirname(path))
    spec = importlib.util.spec_from_file_location("bench_legacy_kernels", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def one(kind: str, name: str, target: str, sdk226: str, samples: str) -> dict:
    """Run one benchmark in this process; return its figures."""
    import trnsim.nki as tnki

    tnki.install()
    import neuronxcc.nki as nki
    import neuronxcc.nki.language as nl
    import neuronxcc.nki.typing as nt

    t0 = time.perf_counter()
    if kind == "new":
        import ml_dtypes
        import numpy as np

        from trnsim.nki.benchmark import profile_kernel
        from trnsim.nki.kernelfile import load_module

        mt = load_module(str(ROOT / "examples" / "kernels" / "timing" / "matmul_tutorial.py"))
        lhs_t = np.empty((8192, 4096), ml_dtypes.bfloat16)
        rhs = np.empty((8192, 8192), ml_dtypes.bfloat16)
        latency = profile_kernel(mt.VARIANTS[name], lhs_t, rhs, target=target).total_s
    else:
        if kind == "matmul":
            kernel = getattr(_load(os.path.join(sdk226, MM_FILE)), name)
            args = (nt.tensor[[8192, 4096], nl.bfloat16], nt.tensor[[8192, 8192], nl.bfloat16])
        else:
            kernel = getattr(_load(os.path.join(samples, ATT_FILE)), name)
            args = tuple(nt.tensor[[128, 4096], nl.bfloat16] for _ in range(3))
        bench = nki.benchmark(warmup=5, iters=10, platform_target=target)(kernel)
        bench(*args)
        latency = bench.benchmark_result.nc_latency.get_latency_percentile(99) / 1e6
    wall = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    out = {"latency_s": latency, "wall_s": wall, "peak_rss_bytes": rss}
    if kind == "matmul" and target == "trn1":
        # The published table was measured with the Neuron 2.20 toolchain, whose DMA reached
        # a fraction of the documents' bandwidth (trnsim.core.calibration.TUTORIAL_TOOLCHAIN,
        # as `trnsim calibrate` times the sdk/matmul rows): the same stream at that efficiency.
        import ml_dtypes
        import numpy as np

        from trnsim.core.calibration import TUTORIAL_TOOLCHAIN
        from trnsim.core.timing import schedule
        from trnsim.nki.benchmark import record
        from trnsim.nki.simulate import resolve_target

        arrays = [np.empty(tuple(t.shape), ml_dtypes.bfloat16) for t in args]
        instrs = record(kernel, *arrays, target=target)
        eff = TUTORIAL_TOOLCHAIN.dma_efficiency
        gen = resolve_target(target)
        out["tutorial_toolchain_s"] = schedule(instrs, gen, dma_efficiency=eff).total_s
    return out


def _child(kind: str, name: str, target: str, a: argparse.Namespace) -> dict:
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--one",
        kind,
        name,
        target,
        "--sdk226",
        a.sdk226,
    ]
    cmd += ["--samples", a.samples]
    with tempfile.TemporaryDirectory() as cwd:  # kernels decorated with save_neff_name etc.
        out = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=cwd)
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sdk226", default="/work/checkouts/sdk226")
    ap.add_argument("--samples", default="/work/checkouts/nki-samples")
    ap.add_argument("--one", nargs=3, metavar=("KIND", "NAME", "TARGET"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print(json.dumps(one(*a.one, a.sdk226, a.samples)))
        return
    from trnsim.core import calibration

    published = {m.variant: m.latency_s for m in calibration.MEASUREMENTS}
    print("### Matrix-multiplication tutorial, M=4096 K=8192 N=8192 bf16 (nki.benchmark)\n")
    print(
        "| legacy kernel | target | trnsim latency | at the 2.20 toolchain's DMA | published "
        "Trn1 (2.20) | error | new-API port latency | wall (legacy) | wall (new API) | "
        "legacy / new | peak RSS (legacy) |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, variant in MATMULS.items():
        for target in ("trn1", "trn3"):
            leg = _child("matmul", name, target, a)
            new = _child("new", variant, target, a)
            if "error" in leg or "error" in new:
                print(f"| {name} | {target} | error: {leg.get('error') or new.get('error')} |")
                continue
            pub = published.get(variant) if target == "trn1" else None
            at_pub = leg.get("tutorial_toolchain_s")
            err = f"{(at_pub / pub - 1) * 100:+.1f}%" if pub and at_pub else ""
            pub_s = f"{pub * 1e3:.2f} ms" if pub else ""
            at_pub_s = f"{at_pub * 1e3:.2f} ms" if at_pub else ""
            print(
                f"| {name} | {target} | {leg['latency_s'] * 1e3:.2f} ms | {at_pub_s} | {pub_s} "
                f"| {err} | "
                f"{new['latency_s'] * 1e3:.2f} ms | {leg['wall_s']:.1f} s | {new['wall_s']:.1f} s "
                f"| {leg['wall_s'] / new['wall_s']:.2f}x | "
                f"{leg['peak_rss_bytes'] / 2**20:.0f} MiB |"
            )
    print("\n### Attention tutorial (nki-samples), 4096 tokens, d_head 128, bf16\n")
    print("| legacy kernel | target | trnsim latency | wall | peak RSS |")
    print("|---|---|---:|---:|---:|")
    for name in ATTENTION:
        r = _child("attention", name, "trn3", a)
        if "error" in r:
            print(f"| {name} | trn3 | error: {r['error']} | | |")
            continue
        print(
            f"| {name} | trn3 | {r['latency_s'] * 1e3:.3f} ms | {r['wall_s']:.1f} s | "
            f"{r['peak_rss_bytes'] / 2**20:.0f} MiB |"
        )


if __name__ == "__main__":
    main()
