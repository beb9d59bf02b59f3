"""Serving constants fitted to published rows (``shared/calibration/serving.md``); the rows
themselves, and the rows that check these fits, are set L of ``trnsim.serve.calibration``.

``HOST_SAMPLING_STEP_S``, ``HOST_SAMPLING_S_PER_LOGIT``: sampling on the host, a step that
samples there costs a fixed round trip (the device-to-host handoff the source names: "on-device
sampling saves about 24 ms per decode step (the device-to-host round trip for sampling)") plus
a time per logit of the sequences actually sampled (the CPU sampler's work over each real
sequence's vocabulary; padding rows are not sampled). Fitted to the on-device vs host sampling
study of serving.md K3 (huggingface/optimum-neuron ``benchmark/vllm/``, Llama-3.1-8B-Instruct on
inf2.48xlarge, TP8, compiled batch 32), as differences of the host (B) and device (A) rows, so
that the device model cancels: one user, the inter-token latency differs by 48.22 - 24.51 =
23.71 ms with one sequence sampled per step; under full load (guidellm's throughput profile)
by 123.80 - 59.09 = 64.71 ms with ``K3_MAX_DECODE_BATCH`` sequences per decode step (the mean
decode batch of the simulated B run, 25.1: the source does not give it). Two constants, two
differences: the "B sync" and "B max" ITL rows are the fit; every other row checks it. (Until
issue 23's second round the cost was one constant per logit of the whole padded batch, fitted
to the one-user pair alone: under load it gave ITL -44 % and tokens/s +89 % on B max.)

``OPTIMUM_HOST_STEP_S``, ``OPTIMUM_HOST_PREFILL_S``: optimum-neuron's runner (below).
"""

from __future__ import annotations

K3_SYNC_ITL_DEVICE_S = 24.51e-3  # serving.md K3, inf2.48xlarge, A: on-device sampling, sync
K3_SYNC_ITL_HOST_S = 48.22e-3  # serving.md K3, inf2.48xlarge, B: CPU sampling, sync
K3_COMPILED_BATCH = 32
LLAMA3_VOCAB = 128256

K3_MAX_ITL_DEVICE_S = 59.09e-3  # serving.md K3, inf2.48xlarge, A: on-device sampling, max
K3_MAX_ITL_HOST_S = 123.80e-3  # serving.md K3, inf2.48xlarge, B: CPU sampling, max
K3_MAX_DECODE_BATCH = 25.1  # mean sequences per decode step of the simulated B max run

HOST_SAMPLING_S_PER_LOGIT = (
    (K3_MAX_ITL_HOST_S - K3_MAX_ITL_DEVICE_S) - (K3_SYNC_ITL_HOST_S - K3_SYNC_ITL_DEVICE_S)
) / ((K3_MAX_DECODE_BATCH - 1) * LLAMA3_VOCAB)
HOST_SAMPLING_STEP_S = (
    K3_SYNC_ITL_HOST_S - K3_SYNC_ITL_DEVICE_S - HOST_SAMPLING_S_PER_LOGIT * LLAMA3_VOCAB
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
