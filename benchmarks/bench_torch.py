"""Speed of the PyTorch front end (``trnsim.torch``), each figure against a same-run baseline.

    python benchmarks/bench_torch.py [--repeat 5] [--steps 5]

1. One training step (forward, backward, AdamW) of the numerics study's small GPT (d 64, 2
   layers, batch 8 x 32 characters) under ``trn3(policy)`` for FP32, BF16, MXFP8, MXFP4 (RNE
   and SR), against the same step in plain PyTorch (the ratio is what Trn3 numerics cost).
2. An MXFP8 GEMM 512 x 512 x 512: ``trnsim.torch.gemm`` (one float64 BLAS call per K tile,
   proven exact) against ``nc_matmul_mx`` tile by tile (the specification path it replaces).
3. ``profile_step`` of Llama-3-8B (4096 tokens, shapes only) against ``trnsim train`` for six
   plans on a Trn3 Gen2 UltraServer (not speed: the agreement), with wall and CPU seconds.

Figures are medians of ``--repeat`` runs after a warm-up; ratios are medians of per-run
ratios with the case and its baseline timed back to back. Prints the machine's load. A
benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

import numpy as np


def paired(
    fn: Callable[[], object], base: Callable[[], object], repeat: int
) -> tuple[float, float, float]:
    """(median seconds of fn, of base, median of fn/base), timed alternately after a warm-up."""
    fn()
    base()
    tf, tb, ratios = [], [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        base()
        t1 = time.perf_counter()
        fn()
        t2 = time.perf_counter()
        tb.append(t1 - t0)
        tf.append(t2 - t1)
        ratios.append((t2 - t1) / (t1 - t0))
    return statistics.median(tf), statistics.median(tb), statistics.median(ratios)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--steps", type=int, default=5, help="training steps per timed run")
    args = p.parse_args()
    import torch

    import trnsim.torch as tt
    from trnsim.torch.models import GPT, GPTConfig, batches, corpus, encode

    torch.set_num_threads(1)  # as the torch verbs: tiny ops, no second thread to wake
    print(f"load average {os.getloadavg()[0]:.1f}, torch {torch.__version__}, one thread")
    cfg = GPTConfig(d_model=64, n_layers=2, n_heads=4, seq_len=32)
    data = encode(corpus(50_000))

    def steps(policy: str | None, rounding: str = "rne") -> Callable[[], object]:
        def go() -> None:
            model = GPT(cfg)
            opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
            it = batches(data, 8, cfg.seq_len)
            for i in range(args.steps):
                x, y = next(it)
                if policy is None:
                    loss = model(x, y)
                    loss.backward()
                else:
                    with tt.trn3(policy, rounding=rounding, seed=i):
                        loss = model(x, y)
                        loss.backward()
                opt.step()
                opt.zero_grad()

        return go

    print("\n1. small-GPT training step: trn3(policy) against plain PyTorch")
    print("| numerics | step | PyTorch step | ratio |")
    print("|---|---:|---:|---:|")
    for policy, rounding in [
        ("fp32", "rne"),
        ("bf16", "rne"),
        ("bf16", "stochastic"),
        ("mxfp8", "rne"),
        ("mxfp8", "stochastic"),
        ("mxfp4", "rne"),
        ("mxfp4", "stochastic"),
    ]:
        f, b, r = paired(steps(policy, rounding), steps(None), args.repeat)
        name = policy.upper() + (" SR" if rounding == "stochastic" else "")
        print(
            f"| {name} | {f / args.steps * 1e3:.1f} ms | {b / args.steps * 1e3:.1f} ms | {r:.1f}x |"
        )

    print("\n2. MXFP8 GEMM 512^3: exact float64 BLAS path against nc_matmul_mx tile by tile")
    from trnsim.torch import gemm as G
    from trnsim.torch.numerics import numerics

    rng = np.random.default_rng(0)
    a = rng.standard_normal((512, 512)).astype(np.float32)
    b = rng.standard_normal((512, 512)).astype(np.float32)
    pol = numerics("mxfp8")

    def spec() -> np.ndarray:
        qa = G.prepare(a[None], pol, 0, 0, 2).quantized
        qb = G.prepare(b[None], pol, 0, 1, 1).quantized
        (av,), (asv,) = G._mx_tiles(qa, 512)
        (bv,), (bsv,) = G._mx_tiles(qb, 512)
        out = np.empty((512, 512), np.float32)
        for m0 in range(0, 512, 128):
            ms = slice(m0, m0 + 128)
            out[ms, :] = G.mx_tile_product(av, asv, bv, bsv, ms, slice(0, 512), 0, 512, 0, 16)
        return out

    f, b_, r = paired(lambda: G.gemm(a, b, pol), spec, args.repeat)
    assert np.array_equal(G.gemm(a, b, pol), spec())  # the same bits (not a timed claim)
    print(f"gemm {f * 1e3:.1f} ms, specification {b_ * 1e3:.1f} ms: {1 / r:.1f}x faster, same bits")

    print("\n3. profile_step of Llama-3-8B (shapes only) against trnsim train, same plan")
    from trnsim.perf import ParallelPlan, estimate_training

    print("| plan | profile_step | trnsim train | ratio | wall | CPU |")
    print("|---|---:|---:|---:|---:|---:|")
    for tp, dp, zero, sp in [(1, 8, 3, True), (1, 8, 0, True), (2, 4, 1, True),
                             (4, 2, 3, True), (4, 2, 3, False), (8, 1, 1, True)]:  # fmt: skip
        plan = ParallelPlan(tp=tp, dp=dp, zero=zero, sequence_parallel=sp)
        w0, c0 = time.perf_counter(), time.process_time()
        step = tt.profile_step("llama-3-8b", system="trn3-gen2", seq_len=4096,
                               global_batch=2 * dp, parallel=plan)  # fmt: skip
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        est = estimate_training("llama-3-8b", "trn3-gen2", plan, global_batch=2 * dp,
                                seq_len=4096)  # fmt: skip
        name = f"tp {tp} dp {dp} zero {zero}" + (" sp" if sp and tp > 1 else "")
        print(
            f"| {name} | {step.step_time_s:.3f} s | {est.step_time_s:.3f} s | "
            f"{step.step_time_s / est.step_time_s:.3f} | {wall:.1f} s | {cpu:.1f} s |"
        )


if __name__ == "__main__":
    main()
