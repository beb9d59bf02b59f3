"""Serving simulator speed (issue 23): 10,000 requests on one replica in under 10 s on one core,
memory bounded by the live requests, against a baseline measured in the same run.

    .venv/bin/python benchmarks/bench_serve.py              # both cases, 10,000 requests
    .venv/bin/python benchmarks/bench_serve.py --requests 2000 --cases trn3-neuron

Each measurement is a fresh subprocess (its peak RSS is its own; ``ru_maxrss``) and reports CPU
seconds (``time.process_time``: one core, whatever else the machine runs) and wall seconds.

- The fast path: ``simulate`` as shipped (runs of identical decode steps timed at once, step
  times kept per compiled shape).
- The baseline, same run: the plain path, one scheduler step at a time (``max_run=1``), on the
  first ``--baseline`` requests of the same workload; the ratio is the plain path's CPU time
  per request over the fast path's (both are the same simulation: on Neuron their results are
  equal, which the child checks).
- Memory: the same case at a fifth of the requests; per-request records are streamed (not
  kept), so the two peaks should be about equal.

Cases: Llama-3.1-8B on one Trn3 chip (vllm-neuron native policy, on-device sampling, 64
sequences, 4096 tokens) and on one H100 (vLLM V1), Poisson arrivals at about 70 % of what the
replica sustains (2/s on Trn3, 12/s on the H100), prompts 1024 +- 256 and outputs 256 +- 64
tokens (uniform).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time
from trnsim.perf import ParallelPlan
from trnsim.serve import Deployment, EngineConfig, Lengths, OpenLoop, Synthetic, simulate
case, n, max_run, check = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
syn = Synthetic(Lengths(1024, 256, "uniform"), Lengths(256, 64, "uniform"), seed=11)
if case == "trn3-neuron":
    dep = Deployment("llama-3.1-8b", "trn3-gen2-ultraserver", ParallelPlan(tp=1))
    eng = EngineConfig(policy="neuron", sampling="device", max_num_seqs=64, max_model_len=4096)
    rate = 2.0
else:
    dep = Deployment("llama-3.1-8b", "p5.48xlarge", ParallelPlan(tp=1))
    eng = EngineConfig(policy="vllm-v1", max_model_len=4096)
    rate = 12.0
t0, c0 = time.perf_counter(), time.process_time()
res = simulate(dep, OpenLoop(rate, n, lengths=syn), eng, max_run=max_run, keep_records=bool(check))
cpu, wall = time.process_time() - c0, time.perf_counter() - t0
s = res.summary()
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
out = {"cpu": cpu, "wall": wall, "rss_mb": rss, "done": res.metrics.done,
       "ttft_p50": s["ttft_s"]["p50"], "tpot_p50": s["tpot_s"]["p50"],
       "tok_s": s["throughput"]["output_tokens_per_s"]}
if check:
    out["e2e"] = [r[9] for r in sorted(res.metrics.records)]
print(json.dumps(out))
"""


def child(case: str, n: int, max_run: int, check: bool = False) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, case, str(n), str(max_run), str(int(check))],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=10000)
    ap.add_argument("--baseline", type=int, default=1000, help="requests of the plain path")
    ap.add_argument("--cases", default="trn3-neuron,h100-vllm")
    args = ap.parse_args()
    big = 1 << 30
    print(
        f"{'case':12} {'path':8} {'requests':>8} {'CPU s':>7} {'wall s':>7} {'req/s CPU':>10} "
        f"{'peak MB':>8}  TTFT p50 / TPOT p50"
    )
    for case in args.cases.split(","):
        fast = child(case, args.requests, big)
        small = child(case, max(1, args.requests // 5), big)
        base_fast = child(case, args.baseline, big, check=True)
        plain = child(case, args.baseline, 1, check=True)
        for label, r, n in (
            ("fast", fast, args.requests),
            ("fast", small, max(1, args.requests // 5)),
            ("fast", base_fast, args.baseline),
            ("plain", plain, args.baseline),
        ):
            print(
                f"{case:12} {label:8} {n:8d} {r['cpu']:7.2f} {r['wall']:7.2f} "
                f"{n / r['cpu']:10.0f} {r['rss_mb']:8.0f}  {r['ttft_p50'] * 1e3:.1f} ms / "
                f"{r['tpot_p50'] * 1e3:.2f} ms"
            )
        ratio = (plain["cpu"] / args.baseline) / (fast["cpu"] / args.requests)
        worst = max(
            abs(a / b - 1) for a, b in zip(base_fast["e2e"], plain["e2e"], strict=True) if b
        )
        print(
            f"{'':12} {args.requests} requests in {fast['cpu']:.2f} s CPU "
            f"({'under' if fast['cpu'] < 10 else 'OVER'} 10 s); plain path / fast path per "
            f"request: {ratio:.1f}x; E2E fast vs plain, worst: {worst:.1e}; peak memory "
            f"{fast['rss_mb']:.0f} MB at {args.requests} vs {small['rss_mb']:.0f} MB at "
            f"{args.requests // 5}"
        )


if __name__ == "__main__":
    main()
