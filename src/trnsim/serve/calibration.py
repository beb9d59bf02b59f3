"""Serving under load against published measurements (``shared/calibration/serving.md``).

Fitted (openly), each with the rows it came from: the constants of ``trnsim.serve.fitted``
(sampling on the host, optimum-neuron's runner); the rows they were fitted to are marked
``fitted`` here and every other row checks them.

The rows (set ``L`` of ``trnsim validate``; ``rows()``): every published figure of K1, K2 and
K3, each predicted by a simulation of the run that produced it (``scenarios()``: deployment,
engine, workload, as the source describes them; what the source does not say is stated as an
assumption in the scenario's note). The target (issue 23): p50 (or mean, where the source
gives means) TTFT and TPOT/ITL and throughput within 20 %; p99 rows are reported, not judged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from trnsim.serve.fitted import (  # noqa: F401 (re-exported: the fits beside their rows)
    HOST_SAMPLING_S_PER_LOGIT,
    K3_COMPILED_BATCH,
    K3_SYNC_ITL_DEVICE_S,
    K3_SYNC_ITL_HOST_S,
    K3_TRN2_SYNC_ITL_S,
    K3_TRN2_SYNC_TTFT_S,
    LLAMA3_VOCAB,
    OPTIMUM_HOST_PREFILL_S,
    OPTIMUM_HOST_STEP_S,
    fit_optimum_host,
)

SET = "L"
SET_TITLE = "serving under load: MLPerf server, trtllm-bench, vLLM on Trn2/Inf2 (serving.md)"
TARGET = 0.20


@dataclass(frozen=True, slots=True)
class Scenario:
    """One published run: how to simulate it (``build`` returns deployment, workload, engine
    and keyword arguments of ``simulate``) and what was assumed."""

    name: str
    source: str
    build: Callable[[int], tuple[Any, Any, Any, dict]]
    note: str = ""


@dataclass(frozen=True, slots=True)
class ServeRow:
    """One published figure: the scenario that produced it, the metric and the value."""

    source: str
    scenario: str
    label: str
    metric: str
    measured: float
    judged: bool = True
    fitted: bool = False


# --- K1: MLPerf Inference v5.1 Llama-2-70B (Server, Interactive, Offline) -----------------------

K1_OUTPUT_MEAN = 274  # serving.md: tokens/s / samples/s
# Per replica: the load runs for K1_RAMP_S + K1_WINDOW_S seconds and the steady state is the
# last K1_WINDOW_S (MLPerf runs for 10 minutes, so its ramp-up is negligible; ours is cut off).
# The ramp exceeds the longest published p50 end-to-end latency (H200 Server: 357 ms + 274 x
# 171.7 ms = 47 s), so the requests in flight when the window opens arrived under full load.
K1_RAMP_S = 60.0
K1_WINDOW_S = 60.0
# Offline: every sample queued at once; the benchmark's 24,576 OpenOrca samples
# (open_orca_gpt4_tokenized_llama.sampled_24576, closed/NVIDIA/code/llama2-70b-99.9/tensorrt/
# README.md in MLCommons' v5.1 results, mirror ntuhpc/inference_results_v5.1 @ a634ab7) over
# the 8 replicas: one replica's share.
K1_OFFLINE_REQUESTS = 24576 // 8
# ASSUMED (not in the logs): OpenOrca prompts under the 1,024-token limit of MLCommons'
# processorca.py, lognormal with mean 300 and s.d. 250 tokens; outputs lognormal with the
# derived mean 274 and s.d. 250, at most 1,024 tokens.
K1_NOTE = (
    "TensorRT-LLM run as the vllm-v1 policy (in-flight batching with chunked context); "
    "input lengths ASSUMED (lognormal mean 300, s.d. 250, < 1024: not in the MLPerf logs); "
    "outputs lognormal mean 274 (derived) s.d. 250; FP8 KV cache; one replica per GPU "
    "(TP2 on 80 GB H100s: the parallelism is not in the logs; NVIDIA's rule of thumb, "
    "closed/NVIDIA/code/llama2-70b-99.9/tensorrt/README.md in MLCommons' v5.1 results, mirror "
    "ntuhpc/inference_results_v5.1 @ a634ab7: TP1 above 90 GB, TP2 at 80 GB) "
    "simulated with its share of the Poisson load, the system's tokens/s "
    "their sum; latencies and tokens/s of the steady state (MLPerf runs for 10 minutes)"
)

# (name, label, system, gpus, tp, precision, scenario, tokens/s, ttft p50/p99, tpot p50/p99 ms)
K1_ROWS = (
    (
        "k1-h200-server",
        "Llama-2-70B Server, 8x H200 FP8",
        "dgx-h200",
        8,
        1,
        "fp8",
        "server",
        33244,
        (357.0, 922.1),
        (171.7, 180.8),
    ),
    (
        "k1-b200-server",
        "Llama-2-70B Server, 8x B200 FP4",
        "dgx-b200",
        8,
        1,
        "nvfp4",
        "server",
        99123,
        (244.2, 436.3),
        (126.1, 132.4),
    ),
    (
        "k1-h100-server",
        "Llama-2-70B Server, 16x H100 FP8",
        "h100-ib-cluster",
        16,
        2,
        "fp8",
        "server",
        61101,
        (353.7, 1896.0),
        (143.1, 145.2),
    ),
    (
        "k1-h200-interactive",
        "Llama-2-70B Interactive, 8x H200 FP8",
        "dgx-h200",
        8,
        1,
        "fp8",
        "interactive",
        21916,
        (103.9, 367.1),
        (37.2, 38.8),
    ),
    (
        "k1-b200-interactive",
        "Llama-2-70B Interactive, 8x B200 FP4",
        "dgx-b200",
        8,
        1,
        "nvfp4",
        "interactive",
        59545,
        (63.3, 140.4),
        (34.5, 38.1),
    ),
    (
        "k1-h200-offline",
        "Llama-2-70B Offline, 8x H200 FP8",
        "dgx-h200",
        8,
        1,
        "fp8",
        "offline",
        35317,
        None,
        None,
    ),
    (
        "k1-b200-offline",
        "Llama-2-70B Offline, 8x B200 FP4",
        "dgx-b200",
        8,
        1,
        "nvfp4",
        "offline",
        101527,
        None,
        None,
    ),
)

# --- K2: trtllm-bench maximum throughput ---------------------------------------------------------

K2_NOTE = (
    "trtllm-bench at an infinite rate (every request queued at once) run as the vllm-v1 "
    "policy (in-flight batching, chunked context) with trtllm-bench's tuned batch and tokens "
    "per pass (trnsim.perf.calsets.trtllm_bench_batch) and an FP8 KV cache; 3,000 requests of "
    "exactly 1,000 + 1,000 tokens (perf-overview.md's dataset for 1000/1000); tokens/s over "
    "the whole run, as trtllm-bench's Total Output Throughput"
)
# (name, model, system, tp, precision, output tokens/s)
K2_REQUESTS = 3000  # NVIDIA/TensorRT-LLM docs/source/performance/perf-overview.md @ 00f37686
K2_ROWS = (
    ("k2-70b-h100", "llama-3.3-70b", "dgx-h100", 2, "fp8", 4205),
    ("k2-70b-h200", "llama-3.3-70b", "dgx-h200", 1, "fp8", 2909),
    ("k2-70b-b200", "llama-3.3-70b", "dgx-b200", 1, "nvfp4", 7007),
    ("k2-8b-h100", "llama-3.1-8b", "dgx-h100", 1, "fp8", 15220),
    ("k2-8b-h200", "llama-3.1-8b", "dgx-h200", 1, "fp8", 17744),
)

# --- K3: vLLM on Trn2 / Inf2 under load (optimum-neuron, guidellm 0.1.0) -------------------------

K3_NOTE = (
    "optimum-neuron's vLLM integration (the optimum-neuron policy: vLLM's scheduler, decode "
    "then prefill graphs each step, static batch 32, max_model_len 4096, NxD buckets; A and B "
    "run standard context encoding, per the source's chunked-prefill/README.md); guidellm "
    "prompts 1500 +- 150 tokens taken as normal, outputs as produced (derived: output tok/s / "
    "req/s, 236 on Trn2, 214 on Inf2) +- 20; 'sync' = one user, 'rate' = constant arrivals, "
    "'max' = 32 concurrent users (closed loop; the README's 'Concurrent users 32'), each for "
    "guidellm's 120 s window (requests unfinished at its end not counted); the source's "
    "figures are means"
)
# (name, label, system, tp, ranks/chip, chunk, sampling, workload, req/s, ttft, itl, tok/s)
K3_ROWS = (
    (
        "k3-trn2-sync",
        "Trn2 TP4, sync",
        "trn2.48xlarge",
        4,
        4,
        None,
        "device",
        ("closed", 1),
        0.184,
        197.2,
        22.14,
        43.5,
    ),
    (
        "k3-trn2-rate",
        "Trn2 TP4, rate 2.46/s",
        "trn2.48xlarge",
        4,
        4,
        None,
        "device",
        ("constant", 2.46),
        2.27,
        211.3,
        47.56,
        537.1,
    ),
    (
        "k3-trn2-max",
        "Trn2 TP4, max (32 users)",
        "trn2.48xlarge",
        4,
        4,
        None,
        "device",
        ("closed", 32),
        2.46,
        1253.8,
        44.46,
        578.8,
    ),
    (
        "k3-inf2-a-sync",
        "Inf2 TP8 A (device sampling), sync",
        "inf2.48xlarge",
        8,
        2,
        None,
        "device",
        ("closed", 1),
        0.173,
        321.9,
        24.51,
        38.5,
    ),
    (
        "k3-inf2-a-max",
        "Inf2 TP8 A (device sampling), max",
        "inf2.48xlarge",
        8,
        2,
        None,
        "device",
        ("closed", 32),
        2.00,
        2138.0,
        59.09,
        426.2,
    ),
    (
        "k3-inf2-b-sync",
        "Inf2 TP8 B (host sampling), sync",
        "inf2.48xlarge",
        8,
        2,
        None,
        "host",
        ("closed", 1),
        0.093,
        340.1,
        48.22,
        20.1,
    ),
    (
        "k3-inf2-b-max",
        "Inf2 TP8 B (host sampling), max",
        "inf2.48xlarge",
        8,
        2,
        None,
        "host",
        ("closed", 32),
        0.858,
        3936.1,
        123.80,
        177.0,
    ),
)


# guidellm runs each benchmark of the sweep for a fixed time (optimum-neuron's benchmark
# scripts pass ``--max-seconds 120``); requests still running at the end are not counted. The
# "rate" row shows it: 2.46 req/s offered, 2.27 completed (in 120 s, the last ~11 s of arrivals
# cannot finish).
K3_WINDOW_S = 120.0
K3_WINDOW_REQUESTS = 2000  # more than any run can send in the window


def k3_output_tokens(machine: str) -> float:
    """Output tokens per request the K3 runs produced (guidellm's 250 +- 20 is the request;
    what came back is derived from the rows themselves: output tok/s / req/s), averaged over
    the runs of one machine."""
    rows = [r for r in K3_ROWS if r[2] == machine]
    return sum(r[-1] / r[-4] for r in rows) / len(rows)


def gpu_stack() -> str | None:
    """The TensorRT-LLM profile for the K1/K2 runs when ``trnsim.perf.stacks`` has one (its K2
    fit), else the default NVIDIA serving stack (vLLM's, unfitted)."""
    from trnsim.perf.stacks import STACKS

    return "trt-llm" if "trt-llm" in STACKS else None


def scenarios() -> dict[str, Scenario]:
    """Every scenario of the set, by name."""
    from trnsim.perf.plan import ParallelPlan
    from trnsim.serve.engine import Deployment, EngineConfig
    from trnsim.serve.workload import ClosedLoop, Lengths, OpenLoop, Synthetic

    out: dict[str, Scenario] = {}
    k1_lengths = Synthetic(
        Lengths(300, 250, "lognormal", max=1023),
        Lengths(K1_OUTPUT_MEAN, 250, "lognormal", max=1024),
    )
    for name, _label, sysname, gpus, tp, prec, kind, tps, _ttft, _tpot in K1_ROWS:

        def build(scale: float, sysname=sysname, gpus=gpus, tp=tp, prec=prec, kind=kind, tps=tps):
            # One of the gpus / tp replicas, with its share of the load (Poisson arrivals split
            # at random stay Poisson); the system's throughput is the replicas' sum.
            dep = Deployment(
                "llama-2-70b",
                sysname,
                ParallelPlan(tp=tp, zero=0, recompute="none"),
                precision=prec,
                stack=gpu_stack(),
            )
            eng = EngineConfig(policy="vllm-v1", kv_cache_dtype="fp8", max_model_len=2048)
            qps = tps / K1_OUTPUT_MEAN / (gpus // tp)
            if kind == "offline":
                n = max(50, round(scale * K1_OFFLINE_REQUESTS))
                wl = OpenLoop(1e6, n, "constant", lengths=k1_lengths)
                return dep, wl, eng, {"scale": gpus // tp}
            ramp, window = scale * K1_RAMP_S, scale * K1_WINDOW_S
            wl = OpenLoop(qps, max(50, round(qps * (ramp + window))), "poisson", lengths=k1_lengths)
            return dep, wl, eng, {"steady": (ramp, ramp + window), "scale": gpus // tp}

        out[name] = Scenario(name, "K1", build, K1_NOTE)
    k2_lengths = Synthetic(Lengths(1000), Lengths(1000))
    for name, model, sysname, tp, prec, _tps in K2_ROWS:

        def build(scale: float, model=model, sysname=sysname, tp=tp, prec=prec):
            from trnsim.perf.calsets import K2_ISL, K2_OSL, trtllm_bench_batch

            n = max(50, round(scale * K2_REQUESTS))
            plan = ParallelPlan(tp=tp, zero=0, recompute="none")
            dep = Deployment(model, sysname, plan, precision=prec, stack=gpu_stack())
            batch, tokens = trtllm_bench_batch(model, dep.system, plan, K2_ISL, K2_OSL, prec)
            eng = EngineConfig(
                policy="vllm-v1",
                kv_cache_dtype="fp8",
                max_model_len=4096,
                max_num_seqs=batch,
                max_num_batched_tokens=tokens,
            )
            return dep, OpenLoop(1e6, n, "constant", lengths=k2_lengths), eng, {}

        out[name] = Scenario(name, "K2", build, K2_NOTE)
    for name, _label, sysname, tp, rpc, chunk, sampling, load, *_ in K3_ROWS:
        out_mean = round(k3_output_tokens(sysname))
        k3_lengths = Synthetic(Lengths(1500, 150, "normal"), Lengths(out_mean, 20, "normal"))

        def build(
            scale: float,
            sysname=sysname,
            tp=tp,
            rpc=rpc,
            chunk=chunk,
            sampling=sampling,
            load=load,
            k3_lengths=k3_lengths,
        ):
            dep = Deployment(
                "llama-3.1-8b",
                sysname,
                ParallelPlan(tp=tp, zero=0, recompute="none", ranks_per_chip=rpc),
            )
            eng = EngineConfig(
                policy="optimum-neuron",
                max_num_seqs=32,
                max_model_len=4096,
                prefill_chunk_size=chunk,
                sampling=sampling,
            )
            kind, x = load
            if kind == "closed":
                wl = ClosedLoop(int(x), K3_WINDOW_REQUESTS, k3_lengths)
            else:
                wl = OpenLoop(x, K3_WINDOW_REQUESTS, "constant", lengths=k3_lengths)
            return dep, wl, eng, {"max_seconds": K3_WINDOW_S}

        out[name] = Scenario(name, "K3", build, K3_NOTE)
    return out


def rows() -> list[ServeRow]:
    """Every published figure of the set."""
    out: list[ServeRow] = []
    for name, label, *_rest, tps, ttft, tpot in K1_ROWS:
        out.append(ServeRow("K1", name, label, "output tok/s", tps))
        if ttft is not None:
            out.append(ServeRow("K1", name, label, "TTFT p50 ms", ttft[0]))
            out.append(ServeRow("K1", name, label, "TPOT p50 ms", tpot[0]))
            out.append(ServeRow("K1", name, label, "TTFT p99 ms", ttft[1], judged=False))
            out.append(ServeRow("K1", name, label, "TPOT p99 ms", tpot[1], judged=False))
    for name, model, sysname, tp, prec, tps in K2_ROWS:
        label = f"{model} {sysname} TP{tp} {prec} 1000/1000"
        out.append(ServeRow("K2", name, label, "output tok/s", tps))
    for name, label, *_mid, _rps, ttft, itl, tps in K3_ROWS:
        fit = name.endswith("-sync") and name.startswith("k3-inf2")
        trn2 = name == "k3-trn2-sync"
        out.append(ServeRow("K3", name, label, "TTFT mean ms", ttft, fitted=trn2))
        out.append(ServeRow("K3", name, label, "ITL mean ms", itl, fitted=fit or trn2))
        out.append(ServeRow("K3", name, label, "output tok/s", tps))
    return out


def predict(result: Any, metric: str) -> float:
    """The figure ``metric`` of a simulated run."""
    m = result.metrics
    if metric == "output tok/s":
        return result.output_tokens_per_s
    q = {"TTFT": m.ttft, "TPOT": m.tpot, "ITL": m.tpot}[metric.split()[0]]
    stat = metric.split()[1]
    value = q.mean if stat == "mean" else q.quantile(float(stat[1:]) / 100)
    return (value or 0.0) * 1e3


def validate(
    scale: float = 1.0,
    advance: Callable[[], None] | None = None,
    only: Iterable[str] | None = None,
) -> list[Any]:
    """Every row's prediction (``trnsim.perf.calsets.RowResult``s with set ``L``): each
    scenario simulated once (``scale`` < 1: fewer requests, for quick checks)."""
    from trnsim.perf.calsets import RowResult
    from trnsim.serve.api import simulate

    wanted = set(only) if only else None
    runs: dict[str, Any] = {}
    out = []
    sc = scenarios()
    for row in rows():
        if wanted is not None and row.scenario not in wanted:
            continue
        if row.scenario not in runs:
            dep, wl, eng, kw = sc[row.scenario].build(scale)
            share = kw.pop("scale", 1)  # one replica of several: its share of the throughput
            runs[row.scenario] = (simulate(dep, wl, eng, **kw), share)
            if advance:
                advance()
        res, share = runs[row.scenario]
        label = f"{row.source} {row.label}" + (" [fit]" if row.fitted else "")
        if not row.judged:
            label += " [reported]"
        value = predict(res, row.metric) * (share if row.metric == "output tok/s" else 1)
        out.append(
            RowResult(SET, res.deployment.stack.name, label, row.metric, row.measured, value)
        )
    return out


def judged(results: Iterable[Any]) -> list[Any]:
    """The rows the 20 % target applies to (not the reported p99s)."""
    return [r for r in results if "[reported]" not in r.label]
