"""Study (issue 23, session 9): how well-conditioned are the K1 latency rows of set L?

The MLPerf Server and Interactive runs of serving.md K1 report p50 TTFT and TPOT of replicas run
close to their capacity. A replica's TPOT there is the fixed point of its step time: the step
holds the sequences in flight, which Little's law ties to the TPOT itself,

    T = S(N(T), P(T)),   N = D x T decoding sequences,   P = r x I x T prompt tokens a step,

with D the replica's output tokens/s, r its requests/s (both from the log) and I the mean
prompt length (NOT in the logs: ``trnsim.serve.calibration.K1_INPUT_MEAN``, ASSUMED). A model
whose step time is off by e at the measured operating point lands its simulated TPOT off by
about e / (1 - g), where g = dS/dT along that line (the share of the step that grows with the
load); TTFT adds the queue in front of the prefill, steeper still.

Part 1 (default, under 1 s): for every K1 Server and Interactive run, the operating point the log
implies (N, P at the measured p50 TPOT), trnsim's step time there (``trnsim.perf.step.StepCost``
of the run's stack, system, precision and KV-cache type; decodes at the mean context I + half
the output, the step's prompt tokens as one chunk; a pp-stage pipeline as pp micro-batches of
N/pp and P/pp whose round takes one full-model step of that size), its error against the
measured TPOT, the gain g (central difference, T x (1 +- 2 %)), the amplification 1 / (1 - g),
the share of the run's token budget (pp micro-batches of ``max_num_tokens`` a round) those
tokens fill, and the largest prompt mean the budget admits at the measured TPOT and rates.
Part 1 is a steady-state reading (every decode at the mean context, a step's prompt tokens as
one chunk), not the simulator's own step mix. At the simulated operating points of set L
(prompt mean 300), it prices the H200 Server step (605 decodes, 620 prompt tokens) at 146.6 ms
against the simulated TPOT p50 of 145.9 ms, and the B200 Interactive step (253 and 276) at 31.0
ms against 33.6 ms. Its error column is therefore good to a few per cent. The budget columns use
the logs and configs only, no model.

Part 2 (``--sweep``, about 30 s a value): the K1 rows of ``trnsim validate --sets L``
simulated with other assumed prompt means (default 285, 300, 315): how far the judged figures
move for a +-5 % change in a number the logs do not give.

Part 3 (``--mlperf DIR``, under 1 s): the spread of the published runs themselves. It reads every
Llama-2-70B (99 %) Server and Interactive ``mlperf_log_summary.txt`` of H200 SXM and B200 SXM
systems under ``DIR`` (a checkout of the MLPerf Inference v5.1 results, e.g. mlcommons/
inference_results_v5.1 or its mirror ntuhpc/inference_results_v5.1 @ 387c3dd0:
``closed/<submitter>/results/<system>/llama2-70b-99/<scenario>/performance/run_1/``). For each
run it gives the scheduled QPS per GPU, the tokens/s per GPU, and the p50 TTFT and TPOT, sorted
by load. The runs are other submitters' systems built on the same GPUs, most of them on NVIDIA's
configuration: the spread of their p50 latencies at nearly equal loads is the spread any model
faces on these rows.

    .venv/bin/python benchmarks/study_k1_conditioning.py [--input-mean N] [--sweep [--means ...]]
        [--mlperf DIR]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import trnsim.serve.calibration as cal
from trnsim.hw import system
from trnsim.perf.plan import ParallelPlan
from trnsim.perf.precision import precision, with_kv_cache
from trnsim.perf.step import StepCost
from trnsim.workloads import SeqGroup

GAIN_STEP = 0.02


def _step_s(sc: StepCost, n: float, p: float, context: float) -> float:
    seqs = []
    if n >= 0.5:
        seqs.append(SeqGroup(round(n), 1, round(context), True))
    if p >= 0.5:
        seqs.append(SeqGroup(1, round(p), round(p), False))
    return sc.step(tuple(seqs)).total


def operating_points(input_mean: float) -> list[dict]:
    """Part 1's figures for every K1 run with latencies."""
    out = []
    for row in cal.K1_ROWS:
        if row.tpot is None:
            continue
        sysm = system(row.system)
        sc = StepCost(
            "llama-2-70b",
            sysm,
            ParallelPlan(tp=row.tp, zero=0, recompute="none"),
            prec=with_kv_cache(precision(row.precision), row.kv_dtype),
            stack=cal.gpu_stack(),
        )
        d = row.tokens_s / row.replicas
        r = row.samples_s / row.replicas
        context = input_mean + row.output_mean / 2

        def model_tpot(t: float, row=row, d=d, r=r, sc=sc, context=context) -> float:
            n, p = d * t, r * input_mean * t
            return _step_s(sc, n / row.pp, p / row.pp, context)

        t = row.tpot[0] / 1e3
        s = model_tpot(t)
        g = (model_tpot(t * (1 + GAIN_STEP)) - model_tpot(t * (1 - GAIN_STEP))) / (
            2 * GAIN_STEP * t
        )
        out.append(
            {
                "row": row.label,
                "decodes": d * t,
                "prompt_tokens": r * input_mean * t,
                "tpot_ms": row.tpot[0],
                "step_ms": s * 1e3,
                "error": s / t - 1,
                "gain": g,
                "amplification": 1 / (1 - g) if g < 1 else float("inf"),
                "budget_used": (d * t + r * input_mean * t) / (row.pp * row.max_tokens),
                "max_input_mean": (row.pp * row.max_tokens - d * t) / (r * t),
            }
        )
    return out


def sweep(means: list[float]) -> dict[float, dict[tuple[str, str], float]]:
    """Part 2: each judged K1 figure's error under each assumed prompt mean."""
    names = [r.name for r in cal.K1_ROWS]
    saved = cal.K1_INPUT_MEAN
    out: dict[float, dict[tuple[str, str], float]] = {}
    try:
        for m in means:
            cal.K1_INPUT_MEAN = m
            res = cal.validate(only=names)
            out[m] = {(x.label, x.metric): x.error for x in cal.judged(res)}
    finally:
        cal.K1_INPUT_MEAN = saved
    return out


GPU_KINDS = (("H200 SXM", re.compile(r"H200[-_]SXM")), ("B200 SXM", re.compile(r"(?<!G)B200")))
SUMMARY = "closed/*/results/*/llama2-70b-99/{}/performance/run_1/mlperf_log_summary.txt"
FIELDS = {
    "qps": "Scheduled samples per second",
    "tok_s": "Completed tokens per second",
    "ttft_ns": "50.00 percentile first token latency (ns)",
    "tpot_ns": "50.00 percentile time to output token (ns)",
}
GPUS_IN_NAME = re.compile(r"x(\d+)(?:_TRT)?$")


def published_runs(root: Path) -> list[dict]:
    """Part 3: every H200 SXM / B200 SXM Llama-2-70B Server and Interactive run under ``root``."""
    out = []
    for scenario in ("Server", "Interactive"):
        for f in sorted(root.glob(SUMMARY.format(scenario))):
            system_name = f.parts[-6]
            kind = next((k for k, rx in GPU_KINDS if rx.search(system_name)), None)
            gpus = GPUS_IN_NAME.search(system_name)
            if kind is None or gpus is None or "NVL" in system_name:
                continue
            values: dict[str, float] = {}
            for line in f.read_text(errors="replace").splitlines():
                name, _, value = line.partition(":")
                for key, label in FIELDS.items():
                    if name.strip() == label and key not in values:
                        values[key] = float(value)
            if len(values) < len(FIELDS):
                continue
            n = int(gpus.group(1))
            out.append(
                {
                    "gpu": kind,
                    "scenario": scenario,
                    "run": f"{f.parts[-8]}/{system_name}",
                    "qps_per_gpu": values["qps"] / n,
                    "tok_s_per_gpu": values["tok_s"] / n,
                    "ttft_ms": values["ttft_ns"] / 1e6,
                    "tpot_ms": values["tpot_ns"] / 1e6,
                }
            )
    out.sort(key=lambda x: (x["gpu"], x["scenario"], x["qps_per_gpu"]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweep", action="store_true", help="also simulate other prompt means")
    ap.add_argument("--means", default="285,300,315", help="prompt means for --sweep")
    ap.add_argument(
        "--input-mean", type=float, default=cal.K1_INPUT_MEAN, help="prompt mean for part 1"
    )
    ap.add_argument("--mlperf", metavar="DIR", help="a checkout of the v5.1 results (part 3)")
    args = ap.parse_args()
    try:
        means = [float(v) for v in args.means.split(",")]
    except ValueError:
        ap.error(f"--means: {args.means!r} is not a comma-separated list of numbers")
    if min([*means, args.input_mean]) <= 0:
        ap.error("prompt means must be > 0")
    runs = None
    if args.mlperf is not None:
        runs = published_runs(Path(args.mlperf))
        if not runs:
            print(
                f"study_k1_conditioning: no H200 / B200 Llama-2-70B Server or Interactive "
                f"summaries under {args.mlperf}",
                file=sys.stderr,
            )
            raise SystemExit(2)
    i = args.input_mean
    print(f"Part 1: trnsim's step at each run's operating point (prompt mean {i:g}, ASSUMED)\n")
    print(
        "| run | decodes | prompt tok | TPOT p50 ms | step ms | error | gain g | 1/(1-g) "
        "| budget used | largest prompt mean |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for x in operating_points(i):
        print(
            f"| {x['row']} | {x['decodes']:.0f} | {x['prompt_tokens']:.0f} | "
            f"{x['tpot_ms']:.1f} | {x['step_ms']:.1f} | {x['error']:+.1%} | "
            f"{x['gain']:.2f} | {x['amplification']:.1f} | {x['budget_used']:.0%} | "
            f"{x['max_input_mean']:.0f} |"
        )
    if runs:
        _print_runs(runs)
    if not args.sweep:
        return
    table = sweep(means)
    keys = list(table[means[0]])
    print("\nPart 2: judged K1 figures of set L under each assumed prompt mean\n")
    print("| row | metric | " + " | ".join(f"mean {m:g}" for m in means) + " |")
    print("|---|---|" + "---:|" * len(means))
    for label, metric in keys:
        cells = " | ".join(f"{table[m][(label, metric)]:+.1%}" for m in means)
        print(f"| {label} | {metric} | {cells} |")


def _print_runs(runs: list[dict]) -> None:
    print("\nPart 3: the published runs on the same GPUs, sorted by load\n")
    print("| GPU | scenario | run | QPS / GPU | tok/s / GPU | TTFT p50 ms | TPOT p50 ms |")
    print("|---|---|---|---:|---:|---:|---:|")
    for x in runs:
        print(
            f"| {x['gpu']} | {x['scenario']} | {x['run']} | {x['qps_per_gpu']:.2f} | "
            f"{x['tok_s_per_gpu']:,.0f} | {x['ttft_ms']:.1f} | {x['tpot_ms']:.1f} |"
        )


if __name__ == "__main__":
    main()
