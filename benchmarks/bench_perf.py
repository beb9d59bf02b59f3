"""Speed of the performance model: one training estimate in-process (cold and warm caches), and
planner searches for Llama-3.1-405B on 16,384 Trn3 chips and on 16,384 H100 GPUs, and one
``trnsim validate`` pass over every calibration set. Trn3 uses the kernel-table compute
model by default (``trnsim.perf.table_model``); the same estimate with the roofline model is
timed in the same run as the baseline (cold: the table model also reads its JSON tables).

Run: ``.venv/bin/python benchmarks/bench_perf.py`` (prints Markdown table rows).
"""

from __future__ import annotations

import time

from trnsim.perf import calsets, estimate_training, plan_for_chips, tables
from trnsim.perf.compute import ComputeModel, RooflineComputeModel, pass_time
from trnsim.perf.planner import search_training
from trnsim.workloads import forward_graph


def one_estimate(model: ComputeModel | None = None) -> float:
    plan = plan_for_chips(144, tp=4, pp=4)
    t0 = time.perf_counter()
    estimate_training(
        "llama-3.1-70b", "trn3-gen2", plan, global_batch=1152, seq_len=8192, compute_model=model
    )
    return time.perf_counter() - t0


def clear() -> None:
    forward_graph.cache_clear()
    pass_time.cache_clear()
    tables.load.cache_clear()
    tables._seconds.cache_clear()


def main() -> None:
    clear()
    base = one_estimate(RooflineComputeModel())
    clear()
    cold = one_estimate()
    warm = min(one_estimate() for _ in range(20))
    clear()
    t0 = time.perf_counter()
    res = search_training(
        "llama-3.1-405b", "trn3-ultracluster", 16384, global_batch=2048, seq_len=8192
    )
    t_plan = time.perf_counter() - t0
    best = res.top[0]
    clear()
    t0 = time.perf_counter()
    gpu = search_training(
        "llama-3.1-405b", "h100-ib-cluster", 16384, global_batch=2048, seq_len=8192
    )
    t_gpu = time.perf_counter() - t0
    t0 = time.perf_counter()
    results = calsets.validate()
    t_val = time.perf_counter() - t0
    print("| Case | Time | Target |")
    print("|---|---:|---:|")
    print(
        f"| one training estimate, Llama-3.1-70B on 144 Trn3 (cold caches) | "
        f"{cold * 1e3:.2f} ms | < 20 ms |"
    )
    print(f"| one training estimate (warm caches, best of 20) | {warm * 1e3:.2f} ms | < 20 ms |")
    print(
        f"| baseline: the same estimate, roofline model (cold) | {base * 1e3:.2f} ms "
        f"(table model cold = {cold / base:.1f}x) | |"
    )
    print(
        f"| planner: Llama-3.1-405B on 16,384 Trn3, {res.considered} plans "
        f"({res.over_capacity} over capacity) | {t_plan:.2f} s | < 30 s |"
    )
    print(
        f"| planner: Llama-3.1-405B on 16,384 H100 (megatron-core), {gpu.considered} plans "
        f"({gpu.over_capacity} over capacity) | {t_gpu:.2f} s | < 30 s |"
    )
    print(
        f"| trnsim validate: {len(results)} rows of sets {', '.join(calsets.SETS)} "
        f"| {t_val:.2f} s | |"
    )
    print(
        f"\nbest plan: {best.plan.describe()}, {best.tokens_per_s:,.0f} tokens/s, "
        f"MFU {best.mfu:.1%}; on H100: {gpu.top[0].plan.describe()}, MFU {gpu.top[0].mfu:.1%}"
    )


if __name__ == "__main__":
    main()
