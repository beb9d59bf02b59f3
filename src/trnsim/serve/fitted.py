"""Serving constants fitted to published rows (``shared/calibration/serving.md``); the rows
themselves, and the rows that check these fits, are set L of ``trnsim.serve.calibration``.

``HOST_SAMPLING_S_PER_LOGIT``: seconds per logit of sampling on the host (the logits' copy to
the CPU and the CPU sampler), fitted to the on-device vs host sampling study of serving.md K3
(huggingface/optimum-neuron ``benchmark/vllm/``, Llama-3.1-8B-Instruct on inf2.48xlarge, TP8,
compiled batch 32): one request at a time, the inter-token latency is 24.51 ms with on-device
sampling (row A, sync) and 48.22 ms with CPU sampling (row B, sync); a decode step samples the
whole compiled batch, 32 sequences x 128,256 vocabulary logits, so (48.22 - 24.51) ms / (32 x
128,256) = 5.78 ns per logit. One constant from one pair of rows: the two "sync ITL" rows are
the fit (their difference).

``OPTIMUM_HOST_STEP_S``, ``OPTIMUM_HOST_PREFILL_S``: optimum-neuron's runner (below).
"""

from __future__ import annotations

K3_SYNC_ITL_DEVICE_S = 24.51e-3  # serving.md K3, inf2.48xlarge, A: on-device sampling, sync
K3_SYNC_ITL_HOST_S = 48.22e-3  # serving.md K3, inf2.48xlarge, B: CPU sampling, sync
K3_COMPILED_BATCH = 32
LLAMA3_VOCAB = 128256

HOST_SAMPLING_S_PER_LOGIT = (K3_SYNC_ITL_HOST_S - K3_SYNC_ITL_DEVICE_S) / (
    K3_COMPILED_BATCH * LLAMA3_VOCAB
)

# optimum-neuron's runner (trnsim.serve.policies.optimum_neuron): host seconds per step and per
# prompt prefilled, fitted (``fit_optimum_host``) to the two one-user rows of serving.md K3 on
# Trn2 (Llama-3.1-8B-Instruct, TP4 at LNC=2, compiled batch 32, sequence 4096): the ITL, 22.14
# ms, is one decode graph (batch 32, 2,048-token bucket) plus the step's host time; the TTFT,
# 197.2 ms, one prefill graph (2,048-token bucket) plus the step's and the prefill's host
# time. Two constants, two rows: those rows are fits, every other K3 row (Trn2 under load,
# Inf2) checks them. Refit when trnsim.perf's step model changes (a test compares).
K3_TRN2_SYNC_ITL_S = 22.14e-3
K3_TRN2_SYNC_TTFT_S = 197.2e-3
OPTIMUM_HOST_STEP_S = 1.692e-3
OPTIMUM_HOST_PREFILL_S = 23.96e-3


def fit_optimum_host() -> tuple[float, float]:
    """(host seconds per step, per prompt prefilled) of optimum-neuron's runner: the K3 Trn2
    one-user ITL and TTFT less the step model's decode and prefill graphs (see above)."""
    from trnsim.hw import system
    from trnsim.perf.plan import ParallelPlan
    from trnsim.perf.step import StepCost

    plan = ParallelPlan(tp=4, ranks_per_chip=4, zero=0, recompute="none")
    sc = StepCost("llama-3.1-8b", system("trn2.48xlarge"), plan)
    step = K3_TRN2_SYNC_ITL_S - sc.decode(K3_COMPILED_BATCH, 2048).total
    prefill = K3_TRN2_SYNC_TTFT_S - sc.prefill(1, 2048, 2048).total - step
    return step, prefill
