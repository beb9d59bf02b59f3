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

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from trnsim.serve.fitted import (  # noqa: F401 (re-exported: the fits beside their rows)
    HOST_SAMPLING_S_PER_LOGIT,
    HOST_SAMPLING_STEP_S,
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

# Each row is the submission's own run (mirror ntuhpc/inference_results_v5.1 @ 387c3dd0):
# its loadgen summary (``closed/<submitter>/results/<system>/llama2-70b-99/<scenario>/
# performance/run_1/mlperf_log_summary.txt``: scheduled samples/s = the Poisson rate offered,
# completed samples/s and tokens/s, whose ratio is the run's mean output length) and its
# TensorRT-LLM settings (``closed/<submitter>/configs/<system>/<scenario>/llama2-70b.py``:
# ``gpu_batch_size`` = max_batch_size, ``max_num_tokens``, ``kvcache_free_gpu_mem_frac``,
# ``batch_scheduler_policy: max_util``, ``enable_chunked_context`` with
# ``first_come_first_served`` chunking, ``tokens_per_block`` 32, the KV cache's type
# (``K1Row.kv_dtype``), ``max_seq_len`` 2048, tensor and pipeline parallelism).
K1_MIRROR = "ntuhpc/inference_results_v5.1 @ 387c3dd0"
K1_SEQ = 2048  # max_seq_len (max_input_len 1024 + 1024 output)
K1_INPUT_MAX = 1024  # max_input_len; processorca.py --seqlen_limit=1024
# Per replica, Server and Interactive run for K1_RAMP_S + K1_WINDOW_S seconds and the steady
# state is the last K1_WINDOW_S (MLPerf runs for 10 to 40 minutes: Dell's configs set
# loadgen min_duration 2,400,000 ms; so its ramp-up is negligible; ours is cut off). The ramp
# exceeds the longest published p50 end-to-end latency (H200 Server: 43 s), so the requests in
# flight when the window opens arrived under full load. The window is 300 s: these runs sit
# at 60 to 98 % of the replica's capacity, where a 60 s window (about 850 requests of an 8x
# H200 replica) left the offered load's sampling error at about +-4 % and hid a queue that
# grows over minutes (seeds 0-3 at 60 s: H200 Interactive TTFT p50 +262 % to +1,899 %, H200
# Server tokens/s -0.8 % to +11.4 %). At 300 s, seeds 0-2 agree on tokens/s and TPOT within
# 4 %, on the B200 and H200 Interactive TTFTs within 7 %; the TTFT of a replica that cannot
# sustain the rate (H100 and H200 Server) still grows with the run: RESULTS.md, set L.
K1_RAMP_S = 60.0
K1_WINDOW_S = 300.0
# Offline: loadgen issues every sample at once and the run lasts 40+ minutes (396,000 samples
# on the H200, 992,640 on the B200: ``samples_per_query`` of the logs), so what it measures is
# a saturated server's steady state; simulated as users that always keep a request waiting
# (a closed loop of max_batch_size + K1_OFFLINE_QUEUE users), measured in a window after the
# first requests have cycled.
K1_OFFLINE_QUEUE = 256
K1_OFFLINE_RAMP_S = 120.0
K1_OFFLINE_WINDOW_S = 60.0
# ASSUMED (the logs do not give input lengths): OpenOrca prompts under the 1,024-token limit
# of MLCommons' processorca.py, lognormal with mean 300 and s.d. 250 tokens (after the limit).
K1_INPUT_MEAN = 300
K1_LENGTH_SD = 250.0
K1_NOTE = (
    "TensorRT-LLM's in-flight batching (policy trtllm: max_util capacity scheduler, chunked "
    "context first come first served) with each submission's own max_batch_size, "
    "max_num_tokens and KV-cache fraction (its configs/<system>/<scenario>/llama2-70b.py); "
    "Poisson arrivals at the log's scheduled rate, outputs lognormal with the log's mean "
    "(tokens/s / samples/s) and s.d. 250, at most 1,024; input lengths ASSUMED (lognormal "
    "mean 300, s.d. 250, at most 1,024: not in the logs); one replica (its share of the "
    "load) simulated, the system's tokens/s their sum; latencies and tokens/s of the steady "
    f"state; mirror {K1_MIRROR}"
)


@dataclass(frozen=True, slots=True)
class K1Row:
    """One MLPerf run: what the log says (``tokens_s``, ``samples_s``, ``scheduled_qps``, the
    latency percentiles in ms) and how the submission ran it (``batch``, ``max_tokens``,
    ``kv_fraction``, ``tp``, ``pp``, ``kv_dtype``: the KV cache's element type)."""

    name: str
    label: str
    system: str
    gpus: int
    tp: int
    pp: int
    precision: str
    scenario: str
    tokens_s: float
    samples_s: float
    scheduled_qps: float
    ttft: tuple[float, float] | None
    tpot: tuple[float, float] | None
    batch: int
    max_tokens: int
    kv_fraction: float
    source: str
    kv_dtype: str = "fp8"

    @property
    def output_mean(self) -> float:
        """The run's mean output tokens per sample (tokens/s / samples/s)."""
        return self.tokens_s / self.samples_s

    @property
    def replicas(self) -> int:
        return self.gpus // (self.tp * self.pp)


# The KV cache's type is the config's ``trtllm_checkpoint_flags['kv_cache_dtype']``: 'fp8' in
# every K1 config but NVIDIA's B200 Interactive one, which sets none (nor does any of the 14
# B200 Interactive configs in the mirror, 10 submitters). The harness's default is
# None (closed/NVIDIA/code/llmlib/config.py ``DEFAULT_CHECKPOINT_FLAGS``), and with it
# ``hf_quantize.py`` adds no KV-cache quantizer to the NVFP4 recipe. The cache then holds the
# checkpoint's fp16 (Llama-2-70b-chat-hf's ``torch_dtype``).
K1_B200_INTERACTIVE_KV = "fp16"
_DELL = "closed/Dell/{}/XE9680_H200_SXM_141GBx8{}"
_NV = "closed/NVIDIA/{}/B200-SXM-180GBx8{}"
K1_ROWS = (
    K1Row(
        "k1-h200-server", "Llama-2-70B Server, 8x H200 FP8", "dgx-h200", 8, 1, 1, "fp8",
        "server", 33244.25, 113.35, 114.23, (357.0, 922.1), (171.7, 180.8), 2048, 1536, 0.9,
        _DELL.format("results", "_TRT") + "; " + _DELL.format("configs", "/Server"),
    ),
    K1Row(
        "k1-b200-server", "Llama-2-70B Server, 8x B200 FP4", "dgx-b200", 8, 1, 1, "nvfp4",
        "server", 99123.04, 361.30, 363.79, (244.2, 436.3), (126.1, 132.4), 2048, 3584, 0.95,
        _NV.format("results", "_TRT") + "; " + _NV.format("configs", "/Server"),
    ),
    # Cisco's 2 x 8 H100 ran NVIDIA's pipeline-parallel H100 configuration (TP1 PP2, batch
    # 1024, max_num_tokens 1024, KV fraction 0.95: closed/Cisco/configs/llama2-70b/Server/
    # __init__.py H100_SXM_80GB_PP2x4, 107 QPS per 8 GPUs; its TP2 configuration targets 75):
    # INFERRED from the run's 210 QPS (105 per 8 GPUs), the log does not name it.
    K1Row(
        "k1-h100-server", "Llama-2-70B Server, 16x H100 FP8", "h100-ib-cluster", 16, 1, 2,
        "fp8", "server", 61101.32, 208.63, 209.94, (353.7, 1896.0), (143.1, 145.2), 1024, 1024,
        0.95, "closed/Cisco/results/HGX-H100_H100-SXM-80GBx16_TRT; "
        "closed/Cisco/configs/llama2-70b/Server/__init__.py",
    ),
    # Dell's v5.1 Interactive config (closed/Dell/configs/XE9680_H200_SXM_141GBx8/
    # Interactive/llama2-70b.py in the mirror): batch 512, max_num_tokens 256, KV fraction
    # 0.9, FP8 KV, TP1 PP1, chunked context first come first served, no CUDA graphs; the
    # same settings as its v5.0 config (ntuhpc/mlperf_inference_results_v5.0 @ cf354115).
    K1Row(
        "k1-h200-interactive", "Llama-2-70B Interactive, 8x H200 FP8", "dgx-h200", 8, 1, 1,
        "fp8", "interactive", 21915.57, 74.73, 75.19, (103.9, 367.1), (37.2, 38.8), 512, 256,
        0.9, _DELL.format("results", "_TRT") + "; " + _DELL.format("configs", "/Interactive"),
    ),
    K1Row(
        "k1-b200-interactive", "Llama-2-70B Interactive, 8x B200 FP4", "dgx-b200", 8, 1, 1,
        "nvfp4", "interactive", 59545.45, 218.82, 220.11, (63.3, 140.4), (34.5, 38.1), 768,
        768, 0.95, _NV.format("results", "_TRT") + "; " + _NV.format("configs", "/Interactive"),
        K1_B200_INTERACTIVE_KV,
    ),
    K1Row(
        "k1-h200-offline", "Llama-2-70B Offline, 8x H200 FP8", "dgx-h200", 8, 1, 1, "fp8",
        "offline", 35316.7, 120.831, 0.0, None, None, 2048, 1536, 0.9,
        _DELL.format("results", "_TRT") + "; " + _DELL.format("configs", "/Offline"),
    ),
    K1Row(
        "k1-b200-offline", "Llama-2-70B Offline, 8x B200 FP4", "dgx-b200", 8, 1, 1, "nvfp4",
        "offline", 101527.0, 371.423, 0.0, None, None, 2048, 3584, 0.95,
        _NV.format("results", "_TRT") + "; " + _NV.format("configs", "/Offline"),
    ),
)  # fmt: skip


def _phi(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def capped_lognormal_mean(mean: float, sd: float, cap: float) -> float:
    """E[min(X, cap)] for X lognormal with mean ``mean`` and s.d. ``sd`` (the partial
    expectation of the lognormal)."""
    s2 = math.log1p((sd / mean) ** 2)
    s = math.sqrt(s2)
    mu = math.log(mean) - s2 / 2
    z = (math.log(cap) - mu) / s
    return mean * _phi(z - s) + cap * (1.0 - _phi(z))


def lognormal_for_capped_mean(target: float, sd: float, cap: float) -> float:
    """The lognormal mean whose draws, capped at ``cap``, average ``target`` (bisection)."""
    lo, hi = target, 4.0 * target
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if capped_lognormal_mean(mid, sd, cap) < target:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def k1_lengths(output_mean: float) -> Any:
    """K1 prompt and output lengths (``K1_NOTE``): lognormal, capped at the limits, with the
    stated means after the cap."""
    from trnsim.serve.workload import Lengths, Synthetic

    inp = lognormal_for_capped_mean(K1_INPUT_MEAN, K1_LENGTH_SD, K1_INPUT_MAX)
    out = lognormal_for_capped_mean(output_mean, K1_LENGTH_SD, K1_SEQ - K1_INPUT_MAX)
    return Synthetic(
        Lengths(round(inp), K1_LENGTH_SD, "lognormal", max=K1_INPUT_MAX),
        Lengths(round(out), K1_LENGTH_SD, "lognormal", max=K1_SEQ - K1_INPUT_MAX),
    )


# --- K2: trtllm-bench maximum throughput ---------------------------------------------------------

K2_NOTE = (
    "trtllm-bench at an infinite rate (every request queued at once) as TensorRT-LLM runs it "
    "(policy trtllm with its defaults: guaranteed_no_evict, no chunked context, KV fraction "
    "0.9) with trtllm-bench's tuned batch and tokens per pass (trnsim.perf.calsets."
    "trtllm_bench_batch) and an FP8 KV cache; 3,000 requests of exactly 1,000 + 1,000 tokens "
    "(perf-overview.md's dataset for 1000/1000); tokens/s over the whole run, as "
    "trtllm-bench's Total Output Throughput"
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
    "0.1.0 as optimum-neuron's performance.sh runs it (its default 'sweep': neuralmagic/"
    "guidellm @ v0.1.0 executor/profile_generator.py, scheduler/base.py): prompts 1500 +- 150 "
    "tokens taken as normal, outputs the row's own (tok/s / req/s) +- 20; 'sync' = one user "
    "for 120 s (requests unfinished then are dropped); 'rate' = constant arrivals for 120 s; "
    "'max' = guidellm's throughput profile: at most 31 requests in flight (it waits while "
    "index + 1 - completed >= GUIDELLM__MAX_CONCURRENCY = 32) and 5 x the sync run's "
    "completed requests in all; TTFT and ITL are means over requests and over every token gap, "
    "rates over the first request's start to the last one's end"
)
# (name, label, system, tp, ranks/chip, chunk, sampling, workload, req/s, ttft, itl, tok/s)
K3_ROWS = (
    ("k3-trn2-sync", "Trn2 TP4, sync", "trn2.48xlarge", 4, 4, None, "device",
     ("sync", 0), 0.1839959922297138, 197.2, 22.14, 43.5),
    ("k3-trn2-rate", "Trn2 TP4, rate 2.46/s", "trn2.48xlarge", 4, 4, None, "device",
     ("constant", 2.46), 2.273251542201194, 211.3, 47.56, 537.1),
    ("k3-trn2-max", "Trn2 TP4, max (32 users)", "trn2.48xlarge", 4, 4, None, "device",
     ("max", "k3-trn2-sync"), 2.4602618311878577, 1253.8, 44.46, 578.8),
    ("k3-inf2-a-sync", "Inf2 TP8 A (device sampling), sync", "inf2.48xlarge", 8, 2, None,
     "device", ("sync", 0), 0.172984445311499, 321.9, 24.51, 38.5),
    ("k3-inf2-a-max", "Inf2 TP8 A (device sampling), max", "inf2.48xlarge", 8, 2, None,
     "device", ("max", "k3-inf2-a-sync"), 2.0015373021097185, 2138.0, 59.09, 426.2),
    ("k3-inf2-b-sync", "Inf2 TP8 B (host sampling), sync", "inf2.48xlarge", 8, 2, None, "host",
     ("sync", 0), 0.09304205307708972, 340.1, 48.22, 20.1),
    ("k3-inf2-b-max", "Inf2 TP8 B (host sampling), max", "inf2.48xlarge", 8, 2, None, "host",
     ("max", "k3-inf2-b-sync"), 0.857901330416405, 3936.1, 123.80, 177.0),
)  # fmt: skip
# The request rates are the CSVs' full-precision "Requests per Second" (huggingface/
# optimum-neuron benchmark/vllm/single-instance/llama-3.1-8b-trn2/vllm-results.csv and
# chunked-prefill/std-ods.csv, std-cpu-sampling.csv); serving.md rounds them.

# guidellm runs each benchmark for at most ``--max-seconds`` (120 by default, which
# performance.sh keeps); requests still running then are cancelled and not counted.
K3_WINDOW_S = 120.0
K3_WINDOW_REQUESTS = 2000  # more than any run can send in the window
GUIDELLM_CONCURRENCY = 31  # GUIDELLM__MAX_CONCURRENCY=32: index + 1 - completed < 32
GUIDELLM_SWEEP_FACTOR = 5  # profile_generator.py: max_number = sync request_count * 5


def k3_output_tokens(row: tuple) -> float:
    """Output tokens per request of a K3 run (guidellm asks 250 +- 20; what came back is the
    row's own tok/s / req/s)."""
    return row[-1] / row[-4]


def k3_sync_count(sync_rps: float) -> int:
    """Requests a guidellm sync benchmark completes in its 120 s: one at a time, each taking
    1 / req/s, and one that cannot finish by then is cancelled."""
    return int(K3_WINDOW_S * sync_rps + 1e-9)


def gpu_stack() -> str | None:
    """The TensorRT-LLM profile for the K1/K2 runs when ``trnsim.perf.stacks`` has one (its K2
    fit), else the default NVIDIA serving stack (vLLM's, unfitted)."""
    from trnsim.perf.stacks import STACKS

    return "trt-llm" if "trt-llm" in STACKS else None


def _k1_build(row: K1Row) -> Callable[[float], tuple[Any, Any, Any, dict]]:
    def build(scale: float) -> tuple[Any, Any, Any, dict]:
        from trnsim.perf.plan import ParallelPlan
        from trnsim.serve.engine import Deployment, EngineConfig
        from trnsim.serve.workload import ClosedLoop, OpenLoop

        plan = ParallelPlan(tp=row.tp, pp=row.pp, zero=0, recompute="none")
        dep = Deployment(
            "llama-2-70b", row.system, plan, precision=row.precision, stack=gpu_stack()
        )
        eng = EngineConfig(
            policy="trtllm",
            kv_cache_dtype=row.kv_dtype,
            max_model_len=K1_SEQ,
            max_num_seqs=row.batch,
            max_num_batched_tokens=row.max_tokens,
            block_size=32,
            chunked_prefill=True,
            capacity_policy="max_utilization",
            kv_free_fraction=row.kv_fraction,
        )
        lengths = k1_lengths(row.output_mean)
        if row.scenario == "offline":
            ramp, window = scale * K1_OFFLINE_RAMP_S, scale * K1_OFFLINE_WINDOW_S
            users = row.batch * row.pp + K1_OFFLINE_QUEUE
            rate = row.samples_s / row.replicas  # to size the run, not to pace it
            n = users + round(2 * rate * (ramp + window))
            wl = ClosedLoop(users, n, lengths)
            return dep, wl, eng, {"steady": (ramp, ramp + window), "scale": row.replicas}
        qps = row.scheduled_qps / row.replicas
        ramp, window = scale * K1_RAMP_S, scale * K1_WINDOW_S
        wl = OpenLoop(qps, max(50, round(qps * (ramp + window))), "poisson", lengths=lengths)
        return dep, wl, eng, {"steady": (ramp, ramp + window), "scale": row.replicas}

    return build


def scenarios() -> dict[str, Scenario]:
    """Every scenario of the set, by name."""
    from trnsim.perf.plan import ParallelPlan
    from trnsim.serve.engine import Deployment, EngineConfig
    from trnsim.serve.workload import ClosedLoop, Lengths, OpenLoop, Synthetic

    out: dict[str, Scenario] = {}
    for row in K1_ROWS:
        out[row.name] = Scenario(row.name, "K1", _k1_build(row), K1_NOTE + f"; {row.source}")
    k2_lengths = Synthetic(Lengths(1000), Lengths(1000))
    for name, model, sysname, tp, prec, _tps in K2_ROWS:

        def build(scale: float, model=model, sysname=sysname, tp=tp, prec=prec):
            from trnsim.perf.calsets import K2_ISL, K2_OSL, trtllm_bench_batch

            n = max(50, round(scale * K2_REQUESTS))
            plan = ParallelPlan(tp=tp, zero=0, recompute="none")
            dep = Deployment(model, sysname, plan, precision=prec, stack=gpu_stack())
            batch, tokens = trtllm_bench_batch(model, dep.system, plan, K2_ISL, K2_OSL, prec)
            eng = EngineConfig(
                policy="trtllm",
                kv_cache_dtype="fp8",
                max_model_len=4096,
                max_num_seqs=batch,
                max_num_batched_tokens=tokens,
            )
            return dep, OpenLoop(1e6, n, "constant", lengths=k2_lengths), eng, {}

        out[name] = Scenario(name, "K2", build, K2_NOTE)
    by_name = {r[0]: r for r in K3_ROWS}
    for row in K3_ROWS:
        name, _label, sysname, tp, rpc, chunk, sampling, load, *_ = row
        k3_lengths = Synthetic(
            Lengths(1500, 150, "normal"), Lengths(round(k3_output_tokens(row)), 20, "normal")
        )

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
            if kind == "sync":
                wl = ClosedLoop(1, K3_WINDOW_REQUESTS, k3_lengths)
                return dep, wl, eng, {"max_seconds": K3_WINDOW_S}
            if kind == "max":  # guidellm's throughput profile: its request cap ends it first
                n = GUIDELLM_SWEEP_FACTOR * k3_sync_count(by_name[x][-4])
                return dep, ClosedLoop(GUIDELLM_CONCURRENCY, n, k3_lengths), eng, {}
            wl = OpenLoop(x, K3_WINDOW_REQUESTS, "constant", lengths=k3_lengths)
            return dep, wl, eng, {"max_seconds": K3_WINDOW_S}

        out[name] = Scenario(name, "K3", build, K3_NOTE)
    return out


def rows() -> list[ServeRow]:
    """Every published figure of the set."""
    out: list[ServeRow] = []
    for r in K1_ROWS:
        out.append(ServeRow("K1", r.name, r.label, "output tok/s", r.tokens_s))
        if r.ttft is not None and r.tpot is not None:
            out.append(ServeRow("K1", r.name, r.label, "TTFT p50 ms", r.ttft[0]))
            out.append(ServeRow("K1", r.name, r.label, "TPOT p50 ms", r.tpot[0]))
            out.append(ServeRow("K1", r.name, r.label, "TTFT p99 ms", r.ttft[1], judged=False))
            out.append(ServeRow("K1", r.name, r.label, "TPOT p99 ms", r.tpot[1], judged=False))
    for name, model, sysname, tp, prec, tps in K2_ROWS:
        label = f"{model} {sysname} TP{tp} {prec} 1000/1000"
        out.append(ServeRow("K2", name, label, "output tok/s", tps))
    for name, label, *_mid, _rps, ttft, itl, tps in K3_ROWS:
        # the host-sampling fit: the Inf2 B ITLs (less the A ones), one user and full load
        fit = (name.endswith("-sync") and name.startswith("k3-inf2")) or name == "k3-inf2-b-max"
        trn2 = name == "k3-trn2-sync"
        out.append(ServeRow("K3", name, label, "TTFT mean ms", ttft, fitted=trn2))
        out.append(ServeRow("K3", name, label, "ITL mean ms", itl, fitted=fit or trn2))
        out.append(ServeRow("K3", name, label, "output tok/s", tps))
    return out


def predict(result: Any, metric: str, span: bool = False) -> float:
    """The figure ``metric`` of a simulated run. ``span``: rates over the first request's
    start to the last one's end (guidellm's ``duration``), not the run's window; "ITL" is the
    mean over every token gap (guidellm's ``inter_token_latency``)."""
    m = result.metrics
    if metric == "output tok/s":
        if span:
            d = m.last_finish - m.first_arrival
            return m.output_tokens / d if d > 0 else 0.0
        return result.output_tokens_per_s
    if metric.startswith("ITL"):
        return (m.itl.mean or 0.0) * 1e3
    q = {"TTFT": m.ttft, "TPOT": m.tpot}[metric.split()[0]]
    stat = metric.split()[1]
    value = q.mean if stat == "mean" else q.quantile(float(stat[1:]) / 100)
    return (value or 0.0) * 1e3


# Simulated runs kept for the process (``validate(reuse=True)``, what ``trnsim validate``
# asks): a scenario is seeded, so a second run would repeat the first exactly; a process that
# validates twice (the test suite) pays once. Bounded: one entry per scenario and scale.
_RUNS: dict[tuple[str, float], tuple[Any, int]] = {}


def validate(
    scale: float = 1.0,
    advance: Callable[[], None] | None = None,
    only: Iterable[str] | None = None,
    reuse: bool = False,
) -> list[Any]:
    """Every row's prediction (``trnsim.perf.calsets.RowResult``s with set ``L``): each
    scenario simulated once (``scale`` < 1: fewer requests, for quick checks; ``reuse``: take
    a run this process already made of the scenario at this scale, ``_RUNS``)."""
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
            key = (row.scenario, scale)
            if reuse and key in _RUNS:
                runs[row.scenario] = _RUNS[key]
            else:
                dep, wl, eng, kw = sc[row.scenario].build(scale)
                share = kw.pop("scale", 1)  # one replica of several: its throughput share
                runs[row.scenario] = (simulate(dep, wl, eng, **kw), share)
                if reuse:
                    _RUNS[key] = runs[row.scenario]
            if advance:
                advance()
        res, share = runs[row.scenario]
        label = f"{row.source} {row.label}" + (" [fit]" if row.fitted else "")
        if not row.judged:
            label += " [reported]"
        span = row.source == "K3"
        value = predict(res, row.metric, span) * (share if row.metric == "output tok/s" else 1)
        out.append(
            RowResult(SET, res.deployment.stack.name, label, row.metric, row.measured, value)
        )
    return out


def judged(results: Iterable[Any]) -> list[Any]:
    """The rows the 20 % target applies to (not the reported p99s)."""
    return [r for r in results if "[reported]" not in r.label]
