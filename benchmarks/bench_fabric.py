"""Fabric benchmarks (issue 6): speed of both evaluators, the calibration fit, the seeds' claims.

    .venv/bin/python benchmarks/bench_fabric.py

Prints every figure recorded in benchmarks/RESULTS.md, section "Fabric (issue 6)".
"""

from __future__ import annotations

import time

from trnsim.fabric import collective_time
from trnsim.fabric.calibration import D_SYSTEM, fit
from trnsim.fabric.claims import interchip_bandwidth, moe_all_to_all, moe_dispatch_bytes
from trnsim.fabric.collectives import _cached
from trnsim.fabric.flowsim import simulate
from trnsim.fabric.nccl_calibration import G_SYSTEM
from trnsim.fabric.nccl_calibration import fit as fit_nccl
from trnsim.fabric.topology import group

GiB, MiB = 2**30, 2**20


def best_of(fn, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        _cached.cache_clear()
        group.cache_clear()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    print("== speed ==")
    t = best_of(lambda: collective_time("all-reduce", GiB, 999_936, "trn3-ultracluster"))
    r = collective_time("all-reduce", GiB, 999_936, "trn3-ultracluster")
    print(
        f"closed form, all-reduce 1 GiB on 999,936 chips: {t * 1e3:.3f} ms (cold cache), "
        f"model time {r.time_s * 1e3:.2f} ms, algo {r.algo}, busbw {r.busbw / 1e9:.1f} GB/s"
    )
    t = best_of(lambda: collective_time("all-reduce", GiB, 999_936, "trn3-ultracluster", "best"))
    print(f"closed form, same with algo='best' (all 5 algorithms): {t * 1e3:.3f} ms")
    t = best_of(lambda: simulate("all-to-all", 64 * MiB, 144, "trn3-gen2", "direct"), 3)
    print(f"flow simulation, all-to-all 64 MiB on 144 chips (20,592 flows): {t:.3f} s")
    t = best_of(lambda: simulate("all-reduce", 64 * MiB, 144, "trn3-gen2", "ring"), 3)
    print(f"flow simulation, ring all-reduce 64 MiB on 144 chips (286 phases): {t:.3f} s")

    print(f"\n== calibration (section D, assumed {D_SYSTEM}, 2 ranks) ==")
    f = fit()
    print(
        f"t_sw = {f.overheads.software_s * 1e6:.2f} us, "
        f"link efficiency = {f.overheads.link_efficiency:.4f}"
    )
    print(f"{'bytes':>14} {'measured us':>12} {'model us':>10} {'error':>8}")
    for row in f.rows:
        print(
            f"{row.nbytes:>14,} {row.measured_s * 1e6:>12.1f} {row.model_s * 1e6:>10.1f} "
            f"{row.error * 100:>+7.1f}%"
        )
    print(f"MAPE {f.mape * 100:.1f} %, max |error| {f.max_error * 100:.1f} %")

    print(f"\n== calibration G (NCCL all-reduce, 8x H100, modelled as {G_SYSTEM}) ==")
    g = fit_nccl()
    for p in g.params.protocols:
        print(f"{p.name:>6}: latency {p.latency_s * 1e6:.2f} us, efficiency {p.efficiency:.4f}")
    print(
        f"ring efficiency {g.params.ring_efficiency:.4f} (stated), NVLS efficiency "
        f"{g.params.nvls_efficiency:.4f} (fitted); settled after {g.iterations} iteration(s)"
    )
    print(f"{'bytes':>14} {'measured us':>12} {'model us':>10} {'pick':>12} {'error':>8}")
    for row in g.rows:
        print(
            f"{row.nbytes:>14,} {row.measured_s * 1e6:>12.1f} {row.model_s * 1e6:>10.1f} "
            f"{row.algo + '/' + row.protocol:>12} {row.error * 100:>+7.1f}%"
        )
    print(f"MAPE {g.mape * 100:.1f} %, max |error| {g.max_error * 100:.1f} %")
    t = best_of(lambda: collective_time("all-reduce", GiB, 16_384, "h100-ib-cluster"))
    r = collective_time("all-reduce", GiB, 16_384, "h100-ib-cluster")
    print(
        f"NCCL closed form, all-reduce 1 GiB on 16,384 H100: {t * 1e3:.3f} ms (cold cache), "
        f"model {r.time_s * 1e3:.2f} ms, {r.algo}/{r.protocol}, busbw {r.busbw / 1e9:.1f} GB/s"
    )

    print("\n== claim: built for MoE all-to-all ==")
    for tokens in (64, 4096):
        m = moe_dispatch_bytes(tokens)
        print(f"dispatch of {tokens} tokens/chip (x8 experts x 7168 x FP8 = {m / 1e6:.1f} MB/rank)")
        rows = moe_all_to_all(tokens)
        for row in rows:
            flow = simulate("all-to-all", m, row.ranks, row.system, "direct").time_s
            print(
                f"  {row.label:32s} {row.ranks:>4} ranks  closed {row.time_s * 1e6:8.1f} us  "
                f"flow {flow * 1e6:8.1f} us  busbw {row.busbw / 1e9:6.1f} GB/s"
            )
        base = {r.label: r for r in rows}
        g144, t64 = base["Trn3 Gen2 UltraServer"], base["Trn2 UltraServer (4x4x4 torus)"]
        g64 = base["Trn3 Gen2, 64 ranks"]
        print(
            f"  Trn2 UltraServer / Gen2 time: whole systems {t64.time_s / g144.time_s:.2f}x, "
            f"64 ranks each {t64.time_s / g64.time_s:.2f}x"
        )

    print("\n== claim: doubling Trn2's inter-chip bandwidth ==")
    c = interchip_bandwidth()
    print(
        f"headline per-chip link bandwidth (hw): Trn3 {c.headline_trn3 / 1e12:.2f} TB/s, "
        f"Trn2 {c.headline_trn2 / 1e12:.2f} TB/s -> {c.headline_ratio:.2f}x"
    )
    print(
        f"per-level figures (hw, GB/s per chip): Gen2 "
        f"{ {k: v / 1e9 for k, v in c.levels_trn3.items()} } "
        f"vs Trn2 UltraServer { {k: v / 1e9 for k, v in c.levels_trn2.items()} } "
        f"-> sum ratio {c.level_sum_ratio:.2f}x"
    )
    for what, d in (("all-reduce (best)", c.allreduce_busbw), ("all-to-all", c.alltoall_busbw)):
        g, t2 = d["trn3-gen2-ultraserver"], d["trn2-ultraserver"]
        print(
            f"{what} of 1 GiB over the whole UltraServer: Gen2 {g / 1e9:.0f} GB/s busbw, "
            f"Trn2 UltraServer {t2 / 1e9:.0f} GB/s -> {g / t2:.2f}x"
        )


if __name__ == "__main__":
    main()
