"""Serving rows outside the calibration sets, predicted by stacks fitted elsewhere (never fitted
to these): a check of generality, every row's error and the MAPE per group.

- TensorRT-LLM maximum throughput (``trt-llm``, fitted to serving.md K2's 1000/1000 rows): the
  other ISL/OSL of the same table, NVIDIA/TensorRT-LLM docs/source/performance/perf-overview.md
  @ 00f37686 (v1.0), total output tokens/s; batch and token budget as trtllm-bench tunes them
  (``trnsim.perf.calsets.trtllm_bench_batch``).
- Inferentia2 (inf2.48xlarge, TP24 = 12 chips), Transformers-NeuronX 2.18: the decoder rows of
  aws-neuron-sdk about-neuron/benchmarks/inf2/{latency,throughput}_data_decoder.csv (read from
  a checkout: ``--sdk PATH``, default $TRNSIM_NEURON_SDK or /work/checkouts/sdk; skipped when
  absent), TTFT and TPOT p50, each row with its sample's attention-layout stack (fitted to
  Trn1's C).

    .venv/bin/python benchmarks/bench_serving_checks.py [--sdk PATH] [--markdown]
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
from pathlib import Path

import numpy as np

from trnsim.hw import system
from trnsim.perf import ParallelPlan, estimate_inference
from trnsim.perf.calsets import trtllm_bench_batch
from trnsim.perf.table_model import compute_model

# model, system, TP, precision, {(ISL, OSL): output tok/s} (K2's 1000/1000 left out: fitted)
TRT_LLM = (
    ("llama-3.1-8b", "dgx-h200", 1, "fp8", {(128, 128): 27911, (128, 2048): 26221,
     (128, 4096): 18027, (500, 2000): 20770, (1000, 2000): 16828, (2048, 128): 3538,
     (2048, 2048): 12194, (5000, 500): 3902, (20000, 2000): 1804}),
    ("llama-3.1-8b", "dgx-h100", 1, "fp8", {(128, 128): 28312, (128, 2048): 22714,
     (128, 4096): 14325, (500, 2000): 17660, (1000, 2000): 13899, (2048, 128): 3450,
     (2048, 2048): 9305, (5000, 500): 3459, (20000, 2000): 1351}),
    ("llama-3.3-70b", "dgx-h200", 1, "fp8", {(128, 128): 3803, (128, 2048): 4336,
     (128, 4096): 2872, (500, 2000): 3666, (1000, 2000): 2994, (2048, 128): 442,
     (2048, 2048): 2003, (5000, 500): 566, (20000, 2000): 283}),
    ("llama-3.3-70b", "dgx-h100", 2, "fp8", {(128, 128): 6378, (128, 2048): 6651,
     (128, 4096): 4199, (500, 2000): 5222, (1000, 2000): 4146, (2048, 128): 762,
     (2048, 2048): 3082, (5000, 500): 898, (20000, 2000): 437}),
    ("llama-3.3-70b", "dgx-b200", 1, "nvfp4", {(128, 128): 11147, (128, 2048): 9922,
     (128, 4096): 6831, (500, 2000): 7762, (1000, 2000): 6271, (2048, 128): 1339,
     (2048, 2048): 4783, (5000, 500): 1459, (20000, 2000): 665}),
)  # fmt: skip

INF2_NAMES = {
    "Llama-3-8B": "llama-3-8b",
    "Llama-3-70B": "llama-3-70b",
    "Llama-2-7b": "llama-2-7b",
    "Llama-2-13b": "llama-2-13b",
    "Llama-2-70b": "llama-2-70b",
    "Mistral-7B-Instruct-v0.2": "mistral-7b",
    "CodeLlama-13b-hf": "codellama-13b",
}


def trt_rows() -> list[tuple[str, float, float]]:
    out = []
    for model, sys_name, tp, prec, table in TRT_LLM:
        sysm = system(sys_name)
        plan = ParallelPlan(tp=tp, zero=0, recompute="none")
        for (isl, osl), tok_s in table.items():
            batch, tokens = trtllm_bench_batch(model, sysm, plan, isl, osl, prec)
            est = estimate_inference(
                model, sysm, plan, batch=batch, input_tokens=isl, output_tokens=osl,
                precision_name=prec, stack="trt-llm", kv_cache_dtype="fp8",
                max_prefill_tokens=tokens,
            )  # fmt: skip
            label = f"{model} {sys_name} TP{tp} {prec} {isl}/{osl} b{batch}"
            out.append((label, tok_s, est.throughput_tokens_per_s))
    return out


def inf2_rows(sdk: Path) -> list[tuple[str, str, float, float]]:
    base = sdk / "about-neuron" / "benchmarks" / "inf2"
    sysm = system("inf2.48xlarge")
    cm = compute_model("auto", sysm.chip, 2)
    seen, out = set(), []
    for name in ("latency_data_decoder.csv", "throughput_data_decoder.csv"):
        for r in csv.DictReader((base / name).read_text().splitlines()):
            model = INF2_NAMES.get(r["Model"])
            key = tuple(r.get(k) for k in ("Model", "Batch Size", "Sequence Length",
                                           "Input Length", "Output Length"))  # fmt: skip
            if model is None or key in seen:
                continue
            seen.add(key)
            stack = "transformers-neuronx" if model.startswith("llama-3") else (
                "transformers-neuronx-hsb")  # fmt: skip
            plan = ParallelPlan(tp=int(r["TP Degree"]), ranks_per_chip=2, pad_heads=True,
                                zero=0, recompute="none")  # fmt: skip
            est = estimate_inference(
                model, sysm, plan, batch=int(r["Batch Size"]),
                input_tokens=int(r["Input Length"]), output_tokens=int(r["Output Length"]),
                precision_name=r["Weight Storage Data Type"],
                max_seq_len=int(r["Sequence Length"]), compute_model=cm, stack=stack,
            )  # fmt: skip
            label = (f"{model} b{r['Batch Size']} in{r['Input Length']} "
                     f"seq{r['Sequence Length']} ({r['Neuron Version']})")  # fmt: skip
            out.append((label, "TTFT ms", float(r["TTFT Latency P50 (ms)"]), est.ttft_s * 1e3))
            out.append((label, "TPOT ms", float(r["TPOT Latency P50 (ms)"]), est.tpot_s * 1e3))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sdk", default=os.environ.get("TRNSIM_NEURON_SDK", "/work/checkouts/sdk"))
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args(argv)
    md = args.markdown
    trt = trt_rows()
    print("TensorRT-LLM (trt-llm stack, fitted to K2 only):\n")
    if md:
        print("| row | measured tok/s | trnsim | error |\n|---|---:|---:|---:|")
    for label, meas, pred in trt:
        line = f"| {label} | {meas:,.0f} | {pred:,.0f} | {pred / meas - 1:+.1%} |"
        print(line if md else line.strip("| ").replace(" | ", "  "))
    errs = [abs(p / m - 1) for _, m, p in trt]
    print(f"\nMAPE TensorRT-LLM checks: {np.mean(errs):.1%} ({len(errs)} rows)\n")
    sdk = Path(args.sdk)
    if not (sdk / "about-neuron" / "benchmarks" / "inf2").is_dir():
        print(f"Inferentia2 rows skipped: no aws-neuron-sdk checkout at {sdk}", file=sys.stderr)
        return 0
    inf2 = inf2_rows(sdk)
    print("Inferentia2, Transformers-NeuronX (stacks fitted to Trn1's C only):\n")
    if md:
        print("| row | metric | measured | trnsim | error |\n|---|---|---:|---:|---:|")
    for label, metric, meas, pred in inf2:
        line = f"| {label} | {metric} | {meas:,.4g} | {pred:,.4g} | {pred / meas - 1:+.1%} |"
        print(line if md else line.strip("| ").replace(" | ", "  "))
    for metric in ("TTFT ms", "TPOT ms"):
        e = [abs(p / m - 1) for _, mt, m, p in inf2 if mt == metric]
        print(f"\nMAPE Inferentia2 {metric}: {np.mean(e):.1%} ({len(e)} rows)")
    e = [abs(p / m - 1) for _, _, m, p in inf2]
    print(f"MAPE Inferentia2 all: {np.mean(e):.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
