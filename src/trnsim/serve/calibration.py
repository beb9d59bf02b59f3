"""Serving constants fitted to published measurements, with the rows they came from.

``HOST_SAMPLING_S_PER_LOGIT``: seconds per logit of sampling on the host (the logits' copy to
the CPU and the CPU sampler), fitted to the on-device vs host sampling study of
``shared/calibration/serving.md`` K3 (huggingface/optimum-neuron ``benchmark/vllm/``,
Llama-3.1-8B-Instruct on inf2.48xlarge, TP8, compiled batch 32): one request at a time, the
inter-token latency is 24.51 ms with on-device sampling (row A, sync) and 48.22 ms with CPU
sampling (row B, sync); a decode step samples the whole compiled batch, 32 sequences x 128,256
vocabulary logits, so (48.22 - 24.51) ms / (32 x 128,256) = 5.78 ns per logit. One constant
from one pair of rows (a fit); the loaded rows of the same study (A and B "max") check it.
"""

from __future__ import annotations

K3_SYNC_ITL_DEVICE_S = 24.51e-3  # serving.md K3, inf2.48xlarge, A: on-device sampling, sync
K3_SYNC_ITL_HOST_S = 48.22e-3  # serving.md K3, inf2.48xlarge, B: CPU sampling, sync
K3_COMPILED_BATCH = 32
LLAMA3_VOCAB = 128256

HOST_SAMPLING_S_PER_LOGIT = (K3_SYNC_ITL_HOST_S - K3_SYNC_ITL_DEVICE_S) / (
    K3_COMPILED_BATCH * LLAMA3_VOCAB
)
