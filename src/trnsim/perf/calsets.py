"""Every calibration set, each predicted with its own software stack, and the per-stack fits.

Sets (``shared/calibration/``): trainium.md B and B2 (Trn1 training, NxD Training and
NeMo-Megatron on Neuron), C (Trn1 serving, Transformers-NeuronX); peers.md F (Megatron-Core on
H100), G (NCCL all-reduce on one 8x H100 node: the fit is ``trnsim.fabric.nccl_calibration``'s,
reported here), H (Trn2 serving, NxD Inference), I (MaxText on TPU v5p/v5e: model shapes,
batch and parallelism from MaxText's configs, ``maxtext_model``), J (NeMo 25.11 pre-training on
DGX-H100 and DGX-GB200, dense and MoE, each row's parallelism as published: ``J_ROWS``). X and
JC hold published measurements outside those sets that only check the model (``CHECK_SETS``:
never fitted; JC is the same NeMo page's DGX-GB300 and DGX-B200 rows).

A row is (set, label, metric, measured, a prediction function of the stack's ``Efficiency``,
the (chip family, precision) whose stack variant applies, whether its plan fits in memory).
``fit_stack(name)`` fits ONE profile for a stack to all of that stack's rows (mean absolute log
error, Nelder-Mead over the stack's ``FIT_PARAMS`` inside their bounds, base fields and
per-generation/precision variant fields; no per-row factors);
``validate()`` reports every row's error and each set's MAPE with the stored profiles.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

import numpy as np

from trnsim.hw import system
from trnsim.perf import calibrate
from trnsim.perf.calibrate import nelder_mead
from trnsim.perf.compute import ComputeModel, Efficiency, RooflineComputeModel
from trnsim.perf.infer import Speculative, estimate_inference, max_batch
from trnsim.perf.plan import ParallelPlan
from trnsim.perf.stacks import STACKS
from trnsim.perf.table_model import compute_model
from trnsim.perf.train import estimate_training
from trnsim.workloads import ModelArgs
from trnsim.workloads.hf_config import synthetic_gpt

Predict = Callable[[Efficiency], float]


@dataclass(frozen=True, slots=True)
class CalRow:
    """One published measurement and how to predict it with a profile of ``stack``.

    ``variant``: the (chip family, precision) whose stack variant applies (``SoftwareStack.
    variants``; empty: the base profile). ``fits``: whether the row's plan fits in memory with
    the stack's stored profile (None: not a training row)."""

    set: str
    stack: str
    label: str
    metric: str
    measured: float
    predict: Predict
    variant: tuple[str, str] = ()
    fits: Callable[[], bool] | None = None


@dataclass(frozen=True, slots=True)
class RowResult:
    """A row's prediction; ``fits``: False when the row's plan does not fit in memory in the
    model (a published run the memory model calls DOES NOT FIT), None for non-training rows."""

    set: str
    stack: str
    label: str
    metric: str
    measured: float
    predicted: float
    fits: bool | None = None

    @property
    def error(self) -> float:
        """Signed relative error (predicted / measured - 1)."""
        return self.predicted / self.measured - 1

    def as_dict(self) -> dict[str, object]:
        return {
            "set": self.set,
            "stack": self.stack,
            "row": self.label,
            "metric": self.metric,
            "measured": self.measured,
            "predicted": self.predicted,
            "error": self.error,
            "fits": self.fits,
        }


SETS = {
    "B": "Trn1 training, current table (trainium.md B)",
    "B2": "Trn1 training, older rows (trainium.md B2)",
    "BE": "Trn1 encoder training, HF Trainer on torch-neuronx (trainium.md B: BERT, ViT)",
    "C": "Trn1 serving, Transformers-NeuronX (trainium.md C)",
    "F": "Megatron-Core weak scaling on H100 (peers.md F)",
    "G": "NCCL all-reduce, 8x H100 NVLS (peers.md G; fit: trnsim.fabric.nccl_calibration)",
    "H": "Trn2 serving, NxD Inference on trn2.48xlarge (peers.md H)",
    "I": "MaxText synthetic dense models on TPU v5p and v5e (peers.md I)",
    "J": "NeMo 25.11 pre-training on DGX-GB200 and DGX-H100, dense and MoE (peers.md J)",
    "X": "held-out checks, never fitted: Trn2 serving in the vLLM-Neuron EAGLE3 tutorials",
    "S": "Trn2 speculative decoding (EAGLE-3), NxD Inference behind vLLM: the vLLM-Neuron EAGLE3 "
    "tutorials' TPOT with their measured acceptance",
    "K2": "TensorRT-LLM trtllm-bench maximum throughput on H100, H200, B200 (serving.md K2)",
    "JC": "held-out checks, never fitted: NeMo 25.11 on DGX-GB300 and DGX-B200 (same page as J)",
}
# Sets whose rows check the model and are never fitted to (``fit_stack`` skips them).
CHECK_SETS = frozenset({"X", "JC"})
# Training sets (the target: MAPE <= 12 % on each).
TRAINING_SETS = ("B", "B2", "F", "I", "J")


# --- B, B2, C: the Trn1 rows of trnsim.perf.calibrate --------------------------------------------


def _trn1_rows(cm: ComputeModel) -> list[CalRow]:
    rows = []
    for r in calibrate.TRAIN_ROWS:
        stack = "nemo-neuron" if r.framework.startswith("NeMo") else "nxd-training"
        rows.append(
            CalRow(
                r.section,
                stack,
                r.label,
                "seq/s",
                r.measured_seq_per_s,
                lambda eff, r=r: calibrate.predict_train(r, eff, cm),
                fits=lambda r=r: bool(calibrate.train_estimate(r, None, cm).fits),
            )
        )
    for r in calibrate.INFER_ROWS:
        for i, metric, meas in ((0, "TTFT ms", r.ttft_ms), (1, "TPOT ms", r.tpot_ms)):
            rows.append(
                CalRow(
                    "C",
                    r.stack,
                    r.label,
                    metric,
                    meas,
                    lambda eff, r=r, i=i: calibrate.predict_infer(r, eff, cm)[i] * 1e3,
                )
            )
    return rows


# --- BE: the encoder rows of trainium.md B ----------------------------------------------------

# about-neuron/benchmarks/trn1/training_data_encoder.csv and training_data_vision_transformers.csv
# (aws-neuron-sdk): model, trn1.32xlarge nodes (16 chips, 32 NeuronCores each, all data
# parallel), micro-batch, global batch, sequence (ViT-B/16 at 224 x 224: 197 tokens),
# precision (BF16 autocast; "FP32": fp32 storage with neuronx-cc's default matmul auto-cast to
# bf16), measured sequences/s. HF Trainer: plain DDP (no ZeRO), no activation checkpointing.
BE_ROWS = (
    ("bert-large", 16, 16, 1048576, 128, "bf16", 57407.92, "2.28.0, LAMB"),
    ("bert-large", 16, 8, 1048576, 128, "fp32-autocast", 32362.67, "2.28.0, LAMB"),
    ("bert-large", 1, 16, 16384, 128, "bf16", 3826.61, "2.28.0, AdamW"),
    ("vit-base-16", 1, 64, 2048, 197, "bf16", 6587.25, "2.25.0, AdamW, fine-tuning"),
)


def _be_rows(cm: ComputeModel) -> list[CalRow]:
    rows = []
    for name, nodes, mb, gb, seq, prec, sps, note in BE_ROWS:
        ranks = nodes * calibrate.CORES_PER_NODE
        plan = ParallelPlan(
            dp=ranks, micro_batch=mb, zero=0, recompute="none",
            ranks_per_chip=calibrate.RANKS_PER_CHIP,
        )  # fmt: skip

        def predict(eff: Efficiency, name=name, plan=plan, gb=gb, seq=seq, prec=prec) -> float:
            est = estimate_training(
                name, calibrate.SYSTEM, plan, global_batch=gb, seq_len=seq,
                precision_name=prec, eff=eff, compute_model=cm,
            )  # fmt: skip
            return est.seq_per_s

        label = f"{name} {nodes}n DP{ranks} mb{mb} s{seq} {prec} ({note})"
        rows.append(CalRow("BE", "hf-neuronx", label, "seq/s", sps, predict))
    return rows


# --- F: Megatron-Core on H100 ------------------------------------------------------------------

F_SYSTEM = "h100-ib-cluster"  # DGX H100 nodes, 8 GPUs on NVSwitch, InfiniBand NDR 400 Gb/s/GPU
F_SEQ = 4096
# heads, hidden, layers, TP, PP, DP, global batch, measured model TFLOP/s per GPU
F_ROWS = (
    (16, 2048, 24, 1, 1, 48, 192, 408.8),
    (32, 4096, 30, 2, 1, 48, 192, 465.9),
    (48, 6144, 32, 4, 1, 48, 192, 489.1),
    (56, 7168, 48, 8, 1, 48, 192, 459.6),
    (64, 8192, 84, 8, 2, 48, 384, 419.7),
    (80, 10240, 92, 8, 4, 48, 768, 420.5),
    (96, 12288, 96, 8, 6, 48, 1152, 432.8),
    (128, 16384, 96, 8, 8, 48, 1536, 474.4),
    (144, 18432, 112, 8, 16, 48, 3072, 459.9),
)


def megatron_flops_per_token(m: ModelArgs, seq_len: int) -> float:
    """Model FLOPs per token as Megatron-LM counts them (``num_floating_point_operations``):
    6 x the matmul parameters (weights, LM head) plus full, non-causal attention: scores and
    P.V are 2 x 2 x seq x (heads x head_dim) FLOPs per token per layer forward, x 3 for the
    backward: 12 x layers x seq x heads x head_dim."""
    return 6 * m.n_matmul_params_active + 12 * m.n_layers * seq_len * m.n_heads * m.head_dim


def _f_rows() -> list[CalRow]:
    cm = RooflineComputeModel()
    sysm = system(F_SYSTEM)
    rows = []
    for heads, hidden, layers, tp, pp, dp, gb, tflops in F_ROWS:
        m = synthetic_gpt(hidden, layers, heads, seq_len=F_SEQ)
        # Megatron-Core: distributed optimizer (ZeRO-1), no recomputation, sequence parallel.
        plan = ParallelPlan(tp=tp, pp=pp, dp=dp, zero=1, recompute="none")

        def predict(eff: Efficiency, m=m, plan=plan, gb=gb) -> float:
            est = estimate_training(
                m, sysm, plan, global_batch=gb, seq_len=F_SEQ, eff=eff, compute_model=cm
            )
            return est.tokens_per_s * megatron_flops_per_token(m, F_SEQ) / plan.chips / 1e12

        def fits(m=m, plan=plan, gb=gb) -> bool:
            est = estimate_training(m, sysm, plan, global_batch=gb, seq_len=F_SEQ, compute_model=cm)
            return bool(est.fits)

        label = f"GPT {m.n_params / 1e9:.0f}B TP{tp} PP{pp} DP{dp} ({plan.chips} GPUs)"
        rows.append(CalRow("F", "megatron-core", label, "TFLOP/s/GPU", tflops, predict, fits=fits))
    return rows


# --- H: Trn2 serving, NxD Inference ------------------------------------------------------------

H_SYSTEM = "trn2.48xlarge"
H_RANKS_PER_CHIP = 4  # LNC=2: 4 logical NeuronCores per Trainium2 chip; TP counts them
# model, TP (logical cores), batch, input, output, TTFT ms (None: not published), TPOT ms
H_ROWS = (
    ("llama-3.3-70b", 64, 1, 10000, 1500, 814.2, 19.6),
    ("llama-3.1-8b", 8, 2, 512, 128, None, 10.52),
)


# X: published Trn2 serving numbers outside shared/calibration, used only to check the model:
# aws-neuron-sdk (commit 81ce03ae) vllm-neuron/docs/tutorials/
# tutorial-eagle3-speculative-decoding-gpt-oss.md (GPT-OSS-120B, BF16, tensor-parallel-size 16,
# max-num-seqs 1, sonnet 512 in / 128 out, baseline median TTFT and TPOT) and
# tutorial-eagle3-speculative-decoding-llama-3-1.md (the baseline run of H's 8B row: its median
# TTFT, which peers.md H leaves out). Same system and counting as H (LNC=2, TP in logical cores).
X_ROWS = (
    ("gpt-oss-120b", 16, 1, 512, 128, 252.33, 7.00),
    ("llama-3.1-8b", 8, 2, 512, 128, 51.07, None),
)


# S: the same tutorials' EAGLE-3 runs (aws-neuron-sdk @ 81ce03ae vllm-neuron/docs/tutorials/
# tutorial-eagle3-speculative-decoding-{llama-3-1,gpt-oss}.md): model, TP, batch, input, output,
# draft tokens per step, the run's measured per-position acceptance (an input, as the batch is),
# median TPOT ms. They fix the stack's draft_step_overhead_s (one parameter, two rows).
S_ROWS = (
    ("llama-3.1-8b", 8, 2, 512, 128, 3, (0.865, 0.725, 0.635), 6.41),
    ("gpt-oss-120b", 16, 1, 512, 128, 1, (0.69,), 5.82),
)


def _s_rows(cm_name: str) -> list[CalRow]:
    sysm = system(H_SYSTEM)
    cm = compute_model(cm_name, sysm.chip, H_RANKS_PER_CHIP)
    rows = []
    for name, tp, batch, n_in, n_out, k, positions, tpot in S_ROWS:
        plan = ParallelPlan(tp=tp, zero=0, recompute="none", ranks_per_chip=H_RANKS_PER_CHIP)
        spec = Speculative("eagle3", k, per_position=positions)

        def run(eff: Efficiency, name=name, plan=plan, batch=batch, n_in=n_in, n_out=n_out,
                spec=spec) -> float:  # fmt: skip
            est = estimate_inference(
                name,
                sysm,
                plan,
                batch=batch,
                input_tokens=n_in,
                output_tokens=n_out,
                eff=eff,
                compute_model=cm,
                stack="nxd-inference",
                speculative=spec,
            )
            return est.tpot_s * 1e3

        label = f"{name} TP{tp} b{batch} in{n_in} out{n_out} eagle3 k{k}"
        rows.append(CalRow("S", "nxd-inference", label, "TPOT ms", tpot, run))
    return rows


def _h_rows(cm_name: str, set_name: str = "H", table: tuple = H_ROWS) -> list[CalRow]:
    sysm = system(H_SYSTEM)
    cm = compute_model(cm_name, sysm.chip, H_RANKS_PER_CHIP)
    rows = []
    for name, tp, batch, n_in, n_out, ttft, tpot in table:
        plan = ParallelPlan(tp=tp, zero=0, recompute="none", ranks_per_chip=H_RANKS_PER_CHIP)

        def run(eff: Efficiency, name=name, plan=plan, batch=batch, n_in=n_in, n_out=n_out):
            return estimate_inference(
                name,
                sysm,
                plan,
                batch=batch,
                input_tokens=n_in,
                output_tokens=n_out,
                eff=eff,
                compute_model=cm,
                stack="nxd-inference",
            )

        label = f"{name} TP{tp} b{batch} in{n_in} out{n_out}"
        if ttft is not None:
            rows.append(
                CalRow(
                    set_name,
                    "nxd-inference",
                    label,
                    "TTFT ms",
                    ttft,
                    lambda e, f=run: f(e).ttft_s * 1e3,
                )
            )
        if tpot is not None:
            rows.append(
                CalRow(
                    set_name,
                    "nxd-inference",
                    label,
                    "TPOT ms",
                    tpot,
                    lambda e, f=run: f(e).tpot_s * 1e3,
                )
            )
    return rows


# --- K2: TensorRT-LLM maximum throughput ---------------------------------------------------------

# shared/calibration/serving.md K2 (NVIDIA/TensorRT-LLM docs/source/performance/perf-overview.md
# @ 00f37686): model, system, GPUs (TP), precision, total output tokens/s at ISL/OSL 1000/1000.
# The checkpoints are NVIDIA's ModelOpt FP8 / NVFP4 ones, whose KV cache is FP8
# (kv_cache_quant_algo FP8). trtllm-bench runs an offline maximum-throughput scenario: every
# request queued at once, the batch sized from the KV cache the free memory holds (capped at
# 4,096; tensorrt_llm/bench/build/tuning.py); in-flight batching keeps that many in flight, so
# each takes a prefill of 1,000 tokens and 1,000 decode steps at that batch
# (``infer.max_batch``, ``throughput_tokens_per_s``).
K2_ISL = K2_OSL = 1000


def trtllm_bench_settings(requests: float, isl: int, osl: int, pp: int = 1) -> tuple[int, int]:
    """(max batch size, max num tokens) as ``trtllm-bench`` tunes them from the requests its KV
    cache holds (NVIDIA/TensorRT-LLM tensorrt_llm/bench/build/tuning.py ``finetune_setting``,
    optimistic tuning): the batch capped at 4,096 / pp and rounded up (to 32 below 256, 128
    below 1,024, else 256; at least 64); the tokens per pass batch x (1 + ISL / OSL), capped at
    32,768, rounded up (to 256 below 4,096, 512 below 8,192, else 1,024; at least 2,048)."""
    raw_bs = min(requests, 4096) / pp
    raw_token = min(raw_bs * (1 + isl / osl), 32768)
    if raw_bs < 256:
        bs = max(64, 32 * math.ceil(raw_bs / 32))
    elif raw_bs < 1024:
        bs = 128 * math.ceil(raw_bs / 128)
    else:
        bs = 256 * math.ceil(raw_bs / 256)
    if raw_token < 4096:
        tokens = max(2048, 256 * math.ceil(raw_token / 256))
    elif raw_token < 8192:
        tokens = 512 * math.ceil(raw_token / 512)
    else:
        tokens = 1024 * math.ceil(raw_token / 1024)
    return bs, tokens


def trtllm_bench_batch(
    name: str, sysm, plan: ParallelPlan, isl: int, osl: int, prec: str
) -> tuple[int, int]:
    """(batch, max num tokens) of a trtllm-bench maximum-throughput run: the requests the KV
    cache holds (``infer.max_batch``, FP8 KV cache), at most the engine's tuned batch size."""
    kw = dict(input_tokens=isl, output_tokens=osl, precision_name=prec, kv_cache_dtype="fp8")
    first = max_batch(name, sysm, plan, max_prefill_tokens=2048, **kw)
    bs, tokens = trtllm_bench_settings(first, isl, osl, plan.pp)
    fits = max_batch(name, sysm, plan, max_prefill_tokens=tokens, **kw)
    return min(fits, bs), tokens


K2_ROWS = (
    ("llama-3.3-70b", "dgx-h100", 2, "fp8", 4205),
    ("llama-3.3-70b", "dgx-h200", 1, "fp8", 2909),
    ("llama-3.3-70b", "dgx-b200", 1, "nvfp4", 7007),
    ("llama-3.1-8b", "dgx-h100", 1, "fp8", 15220),
    ("llama-3.1-8b", "dgx-h200", 1, "fp8", 17744),
)


def _k2_rows() -> list[CalRow]:
    cm = RooflineComputeModel()
    rows = []
    for name, sys_name, tp, prec, tok_s in K2_ROWS:
        sysm = system(sys_name)
        plan = ParallelPlan(tp=tp, zero=0, recompute="none")
        batch, tokens = trtllm_bench_batch(name, sysm, plan, K2_ISL, K2_OSL, prec)

        def predict(eff: Efficiency, name=name, sysm=sysm, plan=plan, prec=prec, b=batch,
                    tokens=tokens) -> float:  # fmt: skip
            est = estimate_inference(
                name,
                sysm,
                plan,
                batch=b,
                input_tokens=K2_ISL,
                output_tokens=K2_OSL,
                precision_name=prec,
                eff=eff,
                compute_model=cm,
                stack="trt-llm",
                kv_cache_dtype="fp8",
                max_prefill_tokens=tokens,
            )
            return est.throughput_tokens_per_s

        label = f"{name} {sys_name.removeprefix('dgx-')} TP{tp} {prec} b{batch}"
        rows.append(
            CalRow(
                "K2",
                "trt-llm",
                label,
                "output tok/s",
                tok_s,
                predict,
                variant=(sysm.chip.family, prec),
            )
        )
    return rows


# --- I: MaxText on TPU v5p / v5e -----------------------------------------------------------------

# MaxText's synthetic models: ``global_parameter_scale`` s = 2^n scales base.yml's dimensions
# (emb 2048, 16 query and 16 KV heads of 128, SwiGLU MLP 7168, 16 layers, vocabulary 32,000) by
# rotating doublings: with n = 3b + r, heads and MLP x 2^(b + (r > 0)), embedding x 2^(b +
# (r > 1)), layers x 2^b (AI-Hypercomputer/maxtext MaxText/pyconfig.py get_individual_scales,
# MaxText/configs/base.yml). The runs (MaxText/configs/v5p/*.sh, v5e/*.sh): sequence 2048, FSDP
# over the slice (ZeRO-3) with the stated tensor parallelism, per-device batch x devices per step.
I_SEQ = 2048


def maxtext_model(scale: int) -> ModelArgs:
    n = int(math.log2(scale))
    if 2**n != scale:
        raise ValueError(f"MaxText global_parameter_scale must be a power of two, got {scale}")
    b, r = divmod(n, 3)
    heads = 16 * 2 ** (b + (r > 0))
    return ModelArgs(
        name=f"maxtext-{scale}b",
        d_model=2048 * 2 ** (b + (r > 1)),
        n_layers=16 * 2**b,
        n_heads=heads,
        n_kv_heads=heads,
        head_dim=128,
        d_ff=7168 * 2 ** (b + (r > 0)),
        vocab=32000,
        max_seq_len=I_SEQ,
        source="MaxText base.yml scaled by global_parameter_scale (pyconfig.py)",
    )


# chip, scale, slice preset, slices, per-device batch, TP, remat, measured TFLOP/s per chip
I_ROWS = (
    ("v5p", 32, "tpu-v5p-128", 1, 7, 4, "selective", 328),
    ("v5p", 32, "tpu-v5p-128", 2, 7, 4, "selective", 319),
    ("v5p", 64, "tpu-v5p-128", 1, 3, 4, "selective", 323),
    ("v5p", 128, "tpu-v5p-256", 1, 1, 8, "selective", 315),
    ("v5p", 128, "tpu-v5p-512", 1, 1, 8, "selective", 316),
    ("v5p", 128, "tpu-v5p-512", 2, 1, 8, "selective", 274),
    ("v5p", 256, "tpu-v5p-1024", 1, 1, 8, "selective", 308),
    ("v5p", 512, "tpu-v5p-1024", 1, 2, 8, "full", 294),
    ("v5p", 1024, "tpu-v5p-2048", 1, 2, 8, "full", 254),
    ("v5p", 1024, "tpu-v5p-4096", 1, 2, 8, "full", 297),
    ("v5e", 16, "tpu-v5e-256", 1, 6, 1, "full", 120),
    ("v5e", 32, "tpu-v5e-256", 1, 4, 1, "full", 132),
    ("v5e", 64, "tpu-v5e-256", 1, 2, 1, "full", 118),
    ("v5e", 128, "tpu-v5e-256", 1, 1, 16, "selective", 110),
)


# Runs whose remat policy offloads the saved activations to host memory: v5e 128B
# (MaxText/configs/v5e/128b.sh: remat_policy=minimal_offloaded), every layer.
I_OFFLOADED = frozenset({("v5e", 128)})


def _i_rows() -> list[CalRow]:
    cm = RooflineComputeModel()
    rows = []
    for chip_name, scale, preset, slices, pdbs, tp, remat, tflops in I_ROWS:
        sysm = system(preset)
        m = maxtext_model(scale)
        chips = sysm.chips * slices
        offload = m.n_layers if (chip_name, scale) in I_OFFLOADED else 0
        plan = ParallelPlan(
            tp=tp,
            dp=chips // tp,
            micro_batch=pdbs * tp,
            zero=3,
            recompute=remat,
            offload_layers=offload,
        )

        def predict(eff: Efficiency, m=m, plan=plan, sysm=sysm, gb=pdbs * chips) -> float:
            est = estimate_training(
                m, sysm, plan, global_batch=gb, seq_len=I_SEQ, eff=eff, compute_model=cm
            )
            return est.tokens_per_s * megatron_flops_per_token(m, I_SEQ) / plan.chips / 1e12

        def fits(m=m, plan=plan, sysm=sysm, gb=pdbs * chips) -> bool:
            est = estimate_training(m, sysm, plan, global_batch=gb, seq_len=I_SEQ, compute_model=cm)
            return bool(est.fits)

        label = f"{m.name} {slices}x {preset} TP{tp} ({chips} chips)"
        rows.append(CalRow("I", "maxtext", label, "TFLOP/s/chip", tflops, predict, fits=fits))
    return rows


# --- J: NeMo 25.11 (Megatron-Bridge) on DGX-H100 and DGX-GB200, dense and MoE -------------------

# NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md @ 00b7660b ("25.11 NeMo Container",
# pre-training): every row's parallelism exactly as published; what the table does not state
# comes from the same commit's recipes (scripts/performance/configs/*/*_workload_base_configs.py
# and *_llm_pretrain.py): Megatron's distributed optimizer (ZeRO-1) unless FSDP = 1 (Megatron
# FSDP, ZeRO-3); sequence parallelism with TP > 1; CPU activation offloading (Llama3 70B GB200
# FP8-CS: cpu_offloading_num_layers 40 of 80; GB300: 20); full recomputation of 5 layers (Llama3
# 8B H100 FP8-CS: recompute_num_layers 5, method block); MoE: expert_tensor_parallel_size 1, the
# HybridEP flex dispatcher where the recipe sets moe_flex_dispatcher_backend (GB200/GB300 DeepSeek
# and Qwen3), the all-to-all dispatcher otherwise, moe_a2a_overlap where set (H100 Qwen3-235B),
# dropless with force-balanced routing (the page's note: moe_imbalance 1). The recipes' module
# recomputation of cheap elementwise ops (layernorm, moe_act, mla_up_proj) is not modelled
# (recompute none). DGX-GB200 is gb200-nvl72-ib-cluster (NVL72 racks on InfiniBand), DGX-H100
# is h100-ib-cluster (8-GPU NVSwitch nodes on NDR InfiniBand). Metric: tokens/s per GPU.


@dataclass(frozen=True, slots=True)
class NemoRow:
    """One row of the Megatron-Bridge performance summary (module comment above)."""

    system: str
    model: str
    gpus: int
    precision: str
    gbs: int
    mbs: int
    seq: int
    fsdp: int
    tp: int
    pp: int
    cp: int
    vp: int
    ep: int
    tok_s_gpu: float
    dispatcher: str = "alltoall"
    a2a_overlap: bool = False
    offload: int = 0
    recompute_layers: int = 0

    def plan(self) -> ParallelPlan:
        dp = self.gpus // (self.tp * self.pp * self.cp)
        return ParallelPlan(
            tp=self.tp,
            pp=self.pp,
            dp=dp,
            cp=self.cp,
            ep=self.ep,
            etp=1 if self.ep > 1 else None,
            micro_batch=self.mbs,
            zero=3 if self.fsdp else 1,
            recompute="full" if self.recompute_layers else "none",
            recompute_layers=self.recompute_layers,
            sequence_parallel=self.tp > 1,
            schedule="interleaved" if self.vp > 1 else "1f1b",
            chunks=self.vp,
            moe_dispatcher=self.dispatcher,  # type: ignore[arg-type]
            moe_a2a_overlap=self.a2a_overlap,
            offload_layers=self.offload,
        )

    @property
    def label(self) -> str:
        par = f"TP{self.tp} PP{self.pp}" + (f" VP{self.vp}" if self.vp > 1 else "")
        par += (f" CP{self.cp}" if self.cp > 1 else "") + (f" EP{self.ep}" if self.ep > 1 else "")
        par += " FSDP" if self.fsdp else ""
        sysname = {
            "gb200-nvl72-ib-cluster": "GB200",
            "h100-ib-cluster": "H100",
            "gb300-nvl72": "GB300",
            "b200-ib-cluster": "B200",
        }.get(self.system, self.system)
        return f"{sysname} {self.model} {self.precision} {par} ({self.gpus} GPUs)"


_GB, _H = "gb200-nvl72-ib-cluster", "h100-ib-cluster"
# system, model, GPUs, precision, GBS, MBS, seq, FSDP, TP, PP, CP, VP, EP, tokens/s/GPU
J_ROWS: tuple[NemoRow, ...] = (
    NemoRow(_GB, "llama-3-8b", 8, "fp8", 128, 2, 8192, 0, 1, 1, 1, 1, 1, 31508),
    NemoRow(_GB, "llama-3-8b", 8, "mxfp8", 128, 2, 8192, 0, 1, 1, 1, 1, 1, 29789),
    NemoRow(_GB, "llama-3-70b", 64, "fp8", 256, 2, 8192, 1, 1, 1, 1, 1, 1, 4312, offload=40),
    NemoRow(_GB, "llama-3.1-405b", 256, "fp8", 1536, 1, 8192, 0, 4, 16, 1, 4, 1, 813),
    NemoRow(_GB, "deepseek-v3", 256, "bf16", 4096, 1, 4096, 0, 1, 4, 1, 4, 64, 3139, "flex"),
    NemoRow(_GB, "deepseek-v3", 256, "mxfp8", 4096, 1, 4096, 0, 1, 8, 1, 4, 32, 4018, "flex"),
    NemoRow(_GB, "gpt-oss-120b", 64, "bf16", 1280, 1, 8192, 0, 1, 1, 1, 1, 64, 15876),
    NemoRow(_GB, "qwen3-30b-a3b", 8, "mxfp8", 512, 4, 4096, 0, 1, 1, 1, 1, 8, 23766, "flex"),
    NemoRow(_GB, "qwen3-235b-a22b", 256, "bf16", 8192, 1, 4096, 0, 1, 8, 1, 3, 32, 4916, "flex"),
    NemoRow(_H, "llama-3-8b", 8, "fp8", 128, 1, 8192, 1, 1, 1, 1, 1, 1, 14451, recompute_layers=5),
    NemoRow(_H, "llama-3-70b", 64, "fp8", 128, 1, 8192, 0, 4, 8, 1, 5, 1, 1602),
    NemoRow(_H, "llama-3.1-405b", 1024, "fp8", 512, 1, 8192, 0, 8, 8, 2, 8, 1, 292),
    NemoRow(_H, "gpt-oss-120b", 64, "bf16", 512, 4, 4096, 0, 1, 4, 1, 1, 8, 5630),
    NemoRow(_H, "qwen3-30b-a3b", 16, "fp8", 512, 2, 4096, 0, 1, 2, 1, 24, 8, 5275),
    NemoRow(
        _H, "qwen3-235b-a22b", 256, "fp8", 2048, 1, 4096, 0, 2, 8, 1, 4, 32, 1575, a2a_overlap=True
    ),
)

# JC: the other systems of the same page and container (DGX-GB300, DGX-B200), checks only
# (never fitted). DGX-GB300 is gb300-nvl72 grown to the row's GPUs over its scale-out level;
# DGX-B200 is b200-ib-cluster. Settings the table omits from the same commit's recipes (GB300
# Llama3 70B FP8-CS: 20 layers offloaded; GB300 DeepSeek/Qwen3: HybridEP; B200: all-to-all).
_G3, _B2 = "gb300-nvl72", "b200-ib-cluster"
JC_ROWS: tuple[NemoRow, ...] = (
    NemoRow(_G3, "llama-3-8b", 8, "fp8", 128, 2, 8192, 0, 1, 1, 1, 1, 1, 37556),
    NemoRow(_G3, "llama-3-8b", 8, "mxfp8", 128, 2, 8192, 0, 1, 1, 1, 1, 1, 36108),
    NemoRow(_G3, "llama-3-70b", 64, "fp8", 256, 2, 8192, 1, 1, 1, 1, 1, 1, 4520, offload=20),
    NemoRow(_G3, "llama-3.1-405b", 256, "fp8", 1536, 1, 8192, 0, 2, 8, 2, 4, 1, 999),
    NemoRow(_G3, "deepseek-v3", 256, "bf16", 4096, 1, 4096, 0, 1, 2, 1, 4, 32, 3848, "flex"),
    NemoRow(_G3, "deepseek-v3", 256, "mxfp8", 4096, 1, 4096, 0, 1, 2, 1, 4, 32, 4357, "flex"),
    NemoRow(_G3, "gpt-oss-120b", 64, "bf16", 1280, 2, 8192, 0, 1, 1, 1, 1, 64, 18347),
    NemoRow(_G3, "qwen3-30b-a3b", 8, "mxfp8", 512, 4, 4096, 0, 1, 1, 1, 1, 8, 28934, "flex"),
    NemoRow(_G3, "qwen3-235b-a22b", 256, "bf16", 8192, 2, 4096, 0, 1, 4, 1, 12, 16, 6131, "flex"),
    NemoRow(_B2, "llama-3-8b", 8, "fp8", 128, 2, 8192, 0, 1, 1, 1, 1, 1, 30624),
    NemoRow(_B2, "llama-3-8b", 8, "mxfp8", 128, 2, 8192, 0, 1, 1, 1, 1, 1, 29521),
    NemoRow(_B2, "llama-3.1-405b", 128, "fp8", 64, 1, 8192, 0, 4, 8, 2, 8, 1, 661),
    NemoRow(_B2, "llama-3.1-405b", 128, "mxfp8", 64, 1, 8192, 0, 4, 8, 2, 8, 1, 624),
    NemoRow(_B2, "deepseek-v3", 256, "mxfp8", 2048, 1, 4096, 0, 1, 16, 1, 1, 8, 2139),
    NemoRow(_B2, "gpt-oss-120b", 64, "bf16", 512, 4, 4096, 0, 1, 1, 1, 1, 8, 8213),
    NemoRow(_B2, "qwen3-30b-a3b", 8, "mxfp8", 512, 1, 4096, 0, 1, 1, 1, 1, 8, 9299),
    NemoRow(_B2, "qwen3-235b-a22b", 64, "mxfp8", 1024, 1, 4096, 0, 1, 8, 1, 2, 8, 3269),
)


def _nemo_rows(set_name: str, table: tuple[NemoRow, ...]) -> list[CalRow]:
    cm = RooflineComputeModel()
    rows = []
    for r in table:
        sysm = system(r.system)
        if sysm.chips < r.gpus:
            sysm = sysm.with_chips(r.gpus)
        plan = r.plan()

        def predict(eff: Efficiency, r=r, plan=plan, sysm=sysm) -> float:
            est = estimate_training(
                r.model,
                sysm,
                plan,
                global_batch=r.gbs,
                seq_len=r.seq,
                precision_name=r.precision,
                eff=eff,
                compute_model=cm,
            )
            return est.tokens_per_s / plan.chips

        def fits(r=r, plan=plan, sysm=sysm) -> bool:
            return bool(
                estimate_training(
                    r.model,
                    sysm,
                    plan,
                    global_batch=r.gbs,
                    seq_len=r.seq,
                    precision_name=r.precision,
                    compute_model=cm,
                ).fits
            )

        rows.append(
            CalRow(
                set_name,
                "megatron-core",
                r.label,
                "tok/s/GPU",
                r.tok_s_gpu,
                predict,
                (sysm.chip.family, r.precision),
                fits,
            )
        )
    return rows


# --- all rows, validation, fitting ---------------------------------------------------------------


def rows(compute: str = "auto", sets: Iterable[str] | None = None) -> list[CalRow]:
    """Every row of the expressible sets (G is reported by ``nccl_rows``)."""
    want = set(sets or SETS)
    out: list[CalRow] = []
    if want & {"B", "B2", "C"}:
        out += [r for r in _trn1_rows(calibrate.model_for(compute)) if r.set in want]
    if "BE" in want:
        out += _be_rows(calibrate.model_for(compute))
    if "F" in want:
        out += _f_rows()
    if "H" in want:
        out += _h_rows(compute)
    if "I" in want:
        out += _i_rows()
    if "X" in want:
        out += _h_rows(compute, "X", X_ROWS)
    if "J" in want:
        out += _nemo_rows("J", J_ROWS)
    if "JC" in want:
        out += _nemo_rows("JC", JC_ROWS)
    if "S" in want:
        out += _s_rows(compute)
    if "K2" in want:
        out += _k2_rows()
    return out


def _profile(stack: str, compute: str, variant: tuple[str, str] | tuple = ()) -> Efficiency:
    """The stored profile of ``stack`` for ``compute``, with ``variant``'s values if any."""
    cm_name = "table" if compute in ("auto", "table") else "roofline"
    sw = STACKS[stack]
    eff = sw.table if (cm_name == "table" and sw.table is not None) else sw.roofline
    v = sw.variant(*variant) if variant else None
    return v.apply(eff) if v is not None else eff


@dataclass(frozen=True, slots=True)
class StackFit:
    """A stack's profile as fitted: the base ``Efficiency`` and, per (chip family, precision),
    the values of its variants (``SoftwareStack.variants``)."""

    base: Efficiency
    variants: tuple[tuple[tuple[str, str], tuple[tuple[str, float], ...]], ...] = ()

    def eff(self, variant: tuple[str, str] | tuple = ()) -> Efficiency:
        """The base with the family's ``"*"`` values and then the variant's own applied."""
        if not variant:
            return self.base
        vals: dict[str, float] = {}
        for key, v in self.variants:
            if key == (variant[0], "*"):
                vals = dict(v) | vals
            if key == tuple(variant):
                vals = vals | dict(v)
        return replace(self.base, **vals) if vals else self.base

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = dict(self.base.as_dict())
        for (fam, prec), vals in self.variants:
            out[f"{fam}/{prec}"] = dict(vals)
        return out


def _row_eff(r: CalRow, compute: str, profiles: dict[str, StackFit | Efficiency]) -> Efficiency:
    given = profiles.get(r.stack)
    if isinstance(given, StackFit):
        return given.eff(r.variant)
    if given is not None:
        return given
    return _profile(r.stack, compute, r.variant)


_UNITS = ((30, "GiB"), (20, "MiB"), (10, "KiB"), (0, "B"))


def nccl_rows() -> list[RowResult]:
    """Set G, as ``trnsim.fabric.nccl_calibration.report`` predicts it (15hw's NCCL fit)."""
    from trnsim.fabric import nccl_calibration

    out = []
    for r in nccl_calibration.report().rows:
        size = next(f"{r.nbytes / 2**p:g} {u}" for p, u in _UNITS if r.nbytes >= 2**p)
        label = f"all-reduce {size} ({r.algo}/{r.protocol})"
        out.append(RowResult("G", "nccl", label, "time s", r.measured_s, r.model_s))
    return out


def validate(
    compute: str = "auto",
    profiles: dict[str, StackFit | Efficiency] | None = None,
    sets: Iterable[str] | None = None,
    advance: Callable[[], None] | None = None,
) -> list[RowResult]:
    """Every row's prediction with the stored (or given) profile of its stack, and for
    training rows whether the row's plan fits in memory (``RowResult.fits``)."""
    profiles = profiles or {}
    want = list(sets or SETS)
    out = []
    for r in rows(compute, want):
        eff = _row_eff(r, compute, profiles)
        fits = r.fits() if r.fits is not None else None
        out.append(RowResult(r.set, r.stack, r.label, r.metric, r.measured, r.predict(eff), fits))
        if advance:
            advance()
    if "G" in want:
        out += nccl_rows()
    return out


def mape(results: Iterable[RowResult], set_name: str, metric: str | None = None) -> float:
    errs = [
        abs(r.error)
        for r in results
        if r.set == set_name and (metric is None or r.metric == metric)
    ]
    return float(np.mean(errs)) if errs else float("nan")


# Parameters each stack fits, with bounds (the others keep the stored profile's values). Few
# parameters for few rows: NeMo on Neuron (4 rows) fits its matmul efficiency only;
# NxD Inference (3 published numbers) its matmul, attention and HBM efficiency. No stack fits
# ``step_overhead_s``: in C it is not separable from ``op_overhead_s`` (fitted with both free,
# the fixed cost moves from per op to per step and the MAPE does not move: RESULTS.md), and H
# has as many parameters as published numbers already.
FIT_PARAMS: dict[str, dict[str, tuple[float, float]]] = {
    "nxd-training": {
        "kernel_matmul": (0.05, 1.0),
        "attention": (0.02, 1.0),
        "hbm": (0.05, 1.0),
        "tp_overlap": (0.0, 0.99),
    },
    "nemo-neuron": {"kernel_matmul": (0.05, 1.0)},
    "hf-neuronx": {"kernel_matmul": (0.05, 1.0), "hbm": (0.05, 1.0)},
    "transformers-neuronx": {
        "kernel_matmul": (0.01, 1.0),
        "hbm": (0.05, 1.0),
        "kv_hbm": (0.005, 1.0),
        "op_overhead_s": (0.0, 1e-4),
        "score_bytes": (0.0, 1024.0),
        "prefill_overhead_s": (0.0, 0.03),
    },
    "nxd-inference": {
        "kernel_matmul": (0.05, 1.0),
        "attention": (0.02, 1.0),
        "hbm": (0.05, 1.0),
        "draft_step_overhead_s": (0.0, 0.02),
    },
    # Megatron-Core / NeMo (F + J, 24 rows): the base (Hopper BF16) matmul; per generation and
    # precision the matmul of Hopper FP8, Blackwell FP8 and Blackwell MXFP8 and Blackwell's
    # attention (every precision: the attention runs in BF16); the MoE operators' grouped-GEMM
    # factor and host synchronisation. Blackwell BF16 matmul is not fitted (J has no dense
    # BF16 Blackwell row): borrowed from the base. Overlap fractions are stated, not fitted.
    "megatron-core": {
        "matmul": (0.2, 1.0),
        "Hopper/fp8:matmul": (0.2, 1.0),
        "Blackwell/fp8:matmul": (0.2, 1.0),
        "Blackwell/mxfp8:matmul": (0.2, 1.0),
        "grouped": (0.1, 1.0),
        "moe_sync_s": (0.0, 5e-3),
        "expert_overhead_s": (0.0, 2e-4),
    },
    "trt-llm": {
        "matmul": (0.05, 1.0),
        "hbm": (0.05, 1.0),
        "kv_hbm": (0.05, 1.0),
        "Blackwell/nvfp4:kv_hbm": (0.02, 1.0),
    },
    "maxtext": {"matmul": (0.2, 1.0), "tp_overlap": (0.0, 0.99)},
}


# Stacks fitted jointly with another: member -> (the stack whose profile it shares, the
# parameters it has of its own, with bounds). A member's profile is the parent's with those
# parameters replaced; ``fit_stacks(parent)`` fits both on the rows of both.
JOINT: dict[str, tuple[str, dict[str, tuple[float, float]]]] = {
    "transformers-neuronx-hsb": ("transformers-neuronx", {"score_bytes": (0.0, 1024.0)}),
}


def fit_stacks(
    stack: str, compute: str = "auto", iters: int = 200, advance: Callable[[], None] | None = None
) -> dict[str, StackFit]:
    """Fit one profile of ``stack`` (and of the stacks ``JOINT`` ties to it) to all their rows
    (mean |log error|; module docstring). Returns each fitted stack's profile."""
    members = {m: own for m, (parent, own) in JOINT.items() if parent == stack}
    if not members:
        return {stack: _fit_one(stack, compute, iters, advance)}
    bounds = dict(FIT_PARAMS[stack])
    table = compute != "roofline" and STACKS[stack].table is not None
    if not table and "kernel_matmul" in bounds:
        bounds = {"matmul": bounds.pop("kernel_matmul"), **bounds}
    for m, own in members.items():
        bounds.update({f"{m}.{k}": v for k, v in own.items()})
    group = {stack, *members}
    mine = [r for r in rows(compute) if r.stack in group and r.set not in CHECK_SETS]
    base = _profile(stack, compute)
    names = list(bounds)
    # the members' own parameters start from their stored values
    stored = {
        f"{m}.{k}": getattr(_profile(m, compute), k) for m, own in members.items() for k in own
    }

    def profiles(x: np.ndarray) -> dict[str, Efficiency]:
        vals = dict(zip(names, _values(names, bounds, x), strict=True))
        own_vals = {n: v for n, v in vals.items() if "." in n}
        shared = replace(base, **{n: v for n, v in vals.items() if "." not in n})
        out = {stack: shared}
        for m, own in members.items():
            out[m] = replace(shared, **{k: own_vals[f"{m}.{k}"] for k in own})
        return out

    def loss(x: np.ndarray) -> float:
        if advance:
            advance()
        effs = profiles(x)
        return float(np.mean([abs(math.log(r.predict(effs[r.stack]) / r.measured)) for r in mine]))

    # Start inside the bounds (a parameter stored at a bound, such as an overhead of 0, would
    # start the simplex where the logistic map is flat and never leave it).
    x0 = np.clip(_from_values(names, bounds, {**base.as_dict(), **stored}), -3.0, 3.0)
    x = nelder_mead(loss, x0, iters=iters)
    return {name: StackFit(eff) for name, eff in profiles(x).items()}


def _values(names: list[str], bounds: dict, x: np.ndarray) -> list[float]:
    """The logistic map of ``calibrate._to_eff``: each coordinate into its bounds."""
    out = []
    for n, xi in zip(names, x, strict=True):
        lo, hi = bounds[n]
        out.append(lo + (hi - lo) / (1 + math.exp(-xi)))
    return out


def _from_values(names: list[str], bounds: dict, values: dict[str, float]) -> np.ndarray:
    out = []
    for n in names:
        lo, hi = bounds[n]
        f = min(max((values[n] - lo) / (hi - lo), 1e-4), 1 - 1e-4)
        out.append(math.log(f / (1 - f)))
    return np.array(out)


def fit_stack(
    stack: str, compute: str = "auto", iters: int = 200, advance: Callable[[], None] | None = None
) -> StackFit:
    """Fit one profile of ``stack`` to all its rows (``fit_stacks``; a ``JOINT`` member is
    fitted with its parent)."""
    parent = JOINT[stack][0] if stack in JOINT else stack
    return fit_stacks(parent, compute, iters, advance)[stack]


def _fit_one(
    stack: str, compute: str = "auto", iters: int = 200, advance: Callable[[], None] | None = None
) -> StackFit:
    """Fit one profile of ``stack`` to all its rows (mean |log error|; module docstring).

    A parameter named ``"Family/precision:field"`` is a variant's value (``SoftwareStack.
    variants``) and moves only the rows of that chip family and precision; a plain name is a
    base-profile field and moves every row of the stack (those of a variant that does not set
    it too)."""
    bounds = dict(FIT_PARAMS[stack])
    table = compute != "roofline" and STACKS[stack].table is not None
    if not table and "kernel_matmul" in bounds:
        bounds = {"matmul": bounds.pop("kernel_matmul"), **bounds}
    mine = [r for r in rows(compute) if r.stack == stack and r.set not in CHECK_SETS]
    sw = STACKS[stack]
    base = _profile(stack, compute)
    start = {**base.as_dict()}
    for v in sw.variants:
        for k, val in v.values:
            start[f"{v.family}/{v.precision}:{k}"] = val
    names = list(bounds)

    def build(x: np.ndarray) -> StackFit:
        vals = {}
        for n, xi in zip(names, x, strict=True):
            lo, hi = bounds[n]
            vals[n] = lo + (hi - lo) / (1 + math.exp(-xi))
        b = replace(base, **{n: v for n, v in vals.items() if ":" not in n})
        variants: dict[tuple[str, str], dict[str, float]] = {}
        for v in sw.variants:
            variants[(v.family, v.precision)] = dict(v.values)
        for n, val in vals.items():
            if ":" in n:
                key, field_name = n.split(":")
                fam, prec = key.split("/")
                variants.setdefault((fam, prec), {})[field_name] = val
        return StackFit(b, tuple((k, tuple(d.items())) for k, d in variants.items()))

    def loss(x: np.ndarray) -> float:
        if advance:
            advance()
        fit = build(x)
        return float(
            np.mean([abs(math.log(r.predict(fit.eff(r.variant)) / r.measured)) for r in mine])
        )

    x0 = []
    for n in names:
        lo, hi = bounds[n]
        f = min(
            max((start.get(n, start.get(n.split(":")[-1], lo)) - lo) / (hi - lo), 1e-4), 1 - 1e-4
        )
        x0.append(math.log(f / (1 - f)))
    # Start inside the bounds (a parameter stored at a bound, such as an overhead of 0, would
    # start the simplex where the logistic map is flat and never leave it).
    x = nelder_mead(loss, np.clip(np.array(x0), -3.0, 3.0), iters=iters)
    return build(x)
