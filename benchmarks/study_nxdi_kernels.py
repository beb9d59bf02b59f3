"""Study (issue 23, session 9): NxD Inference's prefill kernels timed by trnsim's own kernel model,
against the ``nxd-inference`` serving profile, at the per-rank shapes of two Trn2 runs.

The two runs are:

- serving.md K3: Llama-3.1-8B, TP4 on one Trainium2 chip, a 4,096-token context graph. The
  measured one-user TTFT is 197.2 ms, runner and host included.
- peers.md H: Llama-3.3-70B, TP64 on a trn2.48xlarge (16 chips), a 12,288-token context graph.
  The measured TTFT is 814.2 ms, with the collectives over 16 chips included.

The ``nxd-inference`` profile was fitted to H (and S). It prices K3's prefill at 381.6 ms.

This study runs the public nki-library context-encoding kernels unmodified, from a local
checkout (``ROOT``, the nki-library repository). They are the kernels NxD Inference enables with
``--qkv-kernel-enabled --attn-kernel-enabled --mlp-kernel-enabled``. Each runs timing-only on
one logical NeuronCore-v3 (LNC=2: a grid of 2 physical cores) at the run's per-rank shape:

- ``qkv``: the fused QKV projection ``[S, H] x [H, (q + 2 kv) x d]``;
- ``attention_cte``: causal flash attention over the rank's query heads, ``[heads, S, d]``;
- ``output_projection_cte``: the attention output projection ``[S, q x d] x [q x d, H]``;
- the MLP as two projections. The library's ``mlp`` entry point (``core/mlp/mlp.py``) does not
  parse at the checkout read (its docstring is pasted twice: an ``IndentationError`` at line
  203). So its gate and up projections are timed with ``qkv`` (``[S, H] x [H, I]`` each) and
  its down projection with ``output_projection_cte`` (``[S, I] x [I, H]``).
- Where a projection exceeds the kernel's SBUF stack, it is timed in 2^k column (or K) slices
  and the slices are summed.

The per-layer sum times the layer count is set against ``StepCost(...).compute``: the profile's
compute time of the same prefill graph (table compute model, as ``trnsim validate`` uses on Trn2;
collectives and host excluded on both sides). Norms, RoPE and residual adds are not in the kernel
sum. They are a few per cent of a layer.

    .venv/bin/python benchmarks/study_nxdi_kernels.py /work/checkouts/nki-library

Takes about 30 s, most of it the 12,288-token attention.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import time
from pathlib import Path

import ml_dtypes
import numpy as np

import trnsim.perf.calsets as cs
from trnsim.conformance import runner
from trnsim.conformance.case import Case
from trnsim.conformance.cases_library import _path
from trnsim.core.timing import schedule
from trnsim.hw import core, system
from trnsim.nki.benchmark import record
from trnsim.perf.plan import ParallelPlan
from trnsim.perf.step import StepCost
from trnsim.workloads import SeqGroup, resolve_model

TARGET = "neuroncore-v3"
GRID = (2,)  # LNC=2: one logical core = two physical NeuronCore-v3
# bf16 peak of one rank: its GRID[0] physical cores at trnsim.hw's published per-core figure
PEAK_PER_RANK = GRID[0] * core(TARGET).tensor.published_peak_flops["bf16"]
QKV = "core/qkv/qkv.py"
ATTN = "core/attention/attention_cte.py"
OPROJ = "core/output_projection/output_projection_cte/output_projection_cte.py"

# (label, model, tp, context-graph tokens, measured TTFT ms, its source)
RUNS = (
    ("K3 Trn2 TP4, 4,096 graph", "llama-3.1-8b", 4, 4096, 197.2, "serving.md K3, sync"),
    ("H Trn2 TP64, 12,288 graph", "llama-3.3-70b", 64, 12288, 814.2, "peers.md H"),
)


def _z(*shape: int) -> np.ndarray:
    return np.zeros(shape, dtype=ml_dtypes.bfloat16)


def _timed(root: Path, path: str, name: str, args: tuple) -> tuple[float, int]:
    """Seconds and instructions of one launch (timing-only); the library's log lines dropped."""
    case = Case(name, "nki-library", _path(path), name, None, None, grid=GRID)
    with runner.checkout_imports(root, "nki-library"), contextlib.redirect_stdout(io.StringIO()):
        kernel = runner._launchable(runner.load_kernel(case, root), case)
        instrs = record(kernel, *args, target=TARGET)
    return schedule(instrs, TARGET).total_s, len(instrs)


def _sliced(root: Path, path: str, name: str, make, width: int) -> tuple[float, int, int]:
    """``make(w)`` launched on ``width`` split into the fewest equal slices the kernel takes:
    (seconds, instructions, slices), summed over the slices."""
    parts = 1
    while width % parts == 0 and width // parts >= 128:
        try:
            t, n = _timed(root, path, name, make(width // parts))
            return parts * t, parts * n, parts
        except AssertionError:  # the kernel's own input check (its SBUF stack)
            parts *= 2
    raise SystemExit(f"study_nxdi_kernels: {name} does not take any slice of {width}")


def layer(root: Path, s: int, h: int, inter: int, heads: int, kv: int, d: int) -> list[tuple]:
    """(kernel, seconds, instructions, flops, slices) of one layer's prefill on one rank."""
    rows = []
    t, n, p = _sliced(root, QKV, "qkv", lambda w: (_z(1, s, h), _z(h, w)), (heads + 2 * kv) * d)
    rows.append(("qkv", t, n, 2 * s * h * (heads + 2 * kv) * d, p))
    t, n = _timed(root, ATTN, "attention_cte", (_z(heads, s, d), _z(heads, d, s), _z(heads, s, d)))
    rows.append(("attention_cte", t, n, 2 * heads * s * s * d, 1))  # causal: half of 4 S^2 d
    t, n = _timed(root, OPROJ, "output_projection_cte", (_z(1, heads, d, s), _z(heads * d, h)))
    rows.append(("output_projection_cte", t, n, 2 * s * heads * d * h, 1))
    t, n, p = _sliced(root, QKV, "qkv", lambda w: (_z(1, s, h), _z(h, w)), inter)
    rows.append(("mlp gate + up (qkv x 2)", 2 * t, 2 * n, 4 * s * h * inter, p))
    dd = 128 if inter % 128 == 0 else 64
    t, n, p = _sliced(
        root, OPROJ, "output_projection_cte", lambda w: (_z(1, w // dd, dd, s), _z(w, h)), inter
    )
    rows.append(("mlp down (output_projection_cte)", t, n, 2 * s * inter * h, p))
    return rows


def profile_compute_s(model: str, tp: int, tokens: int) -> float:
    """The ``nxd-inference`` profile's compute time of the prefill graph (no collectives, no
    host), on the run's Trn2 deployment, with the table compute model."""
    sysm = system(cs.H_SYSTEM)
    plan = ParallelPlan(tp=tp, zero=0, recompute="none", ranks_per_chip=cs.H_RANKS_PER_CHIP)
    cm = cs.compute_model("table", sysm.chip, cs.H_RANKS_PER_CHIP)
    sc = StepCost(model, sysm, plan, stack="nxd-inference", compute_model=cm)
    return sc.step((SeqGroup(1, tokens, tokens, False),), compiled=True).compute


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", help="a local checkout of aws-neuron/nki-library")
    args = ap.parse_args()
    root = Path(args.root)
    if not (root / "src/nkilib_src/nkilib/core/qkv/qkv.py").is_file():
        print(f"study_nxdi_kernels: {root} is not an nki-library checkout", file=sys.stderr)
        raise SystemExit(2)
    for label, name, tp, s, ttft_ms, src in RUNS:
        m = resolve_model(name)
        heads, kv = m.n_heads // tp, max(1, m.n_kv_heads // tp)
        t0 = time.time()
        rows = layer(root, s, m.d_model, m.d_ff // tp, heads, kv, m.head_dim)
        per_layer = sum(r[1] for r in rows)
        kernels = per_layer * m.n_layers
        prof = profile_compute_s(name, tp, s)
        print(
            f"\n{label}: {name}, per rank {heads} q / {kv} kv heads, I = {m.d_ff // tp}, "
            f"S = {s} ({time.time() - t0:.0f} s)\n"
        )
        print("| kernel (one layer, one rank) | ms | instructions | TFLOPS | of peak | slices |")
        print("|---|---:|---:|---:|---:|---:|")
        for k, t, n, fl, p in rows:
            print(
                f"| {k} | {t * 1e3:.3f} | {n:,} | {fl / t / 1e12:.1f} | "
                f"{fl / t / PEAK_PER_RANK:.0%} | {p} |"
            )
        print(f"| **layer** | **{per_layer * 1e3:.3f}** | | | | |")
        print(
            f"\nkernels x {m.n_layers} layers: {kernels * 1e3:.1f} ms; the profile's compute "
            f"of the same graph: {prof * 1e3:.1f} ms ({prof / kernels:.2f}x); measured TTFT "
            f"{ttft_ms} ms ({src}), of which the kernels are {kernels * 1e3 / ttft_ms:.0%}"
        )


if __name__ == "__main__":
    main()
