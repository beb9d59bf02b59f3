"""Software stacks: the efficiency profiles of the frameworks people run, one per stack.

A ``SoftwareStack`` is one framework on one vendor's hardware (NxD Training on Trainium,
Megatron-Core on NVIDIA GPUs, MaxText on TPUs, ...). It carries the ``Efficiency`` profiles
that framework reaches: one per mode (``train``, ``serve``) and per compute model (``roofline``
for every chip, ``table`` for Trainium chips whose NeuronCore is in the kernel tables), each
fitted openly to that stack's own calibration rows (``trnsim.perf.calsets``) and stored here with
the rows it came from. A profile is never reused on another vendor: ``resolve_stack`` refuses a
stack whose vendor is not the chip's, and every system has a default stack by vendor and chip
(``default_stack``). A stack with no calibration rows says so in ``source`` and runs the
``Efficiency`` defaults: an estimate names the stack and where its profile comes from.

Serving stacks also say how they run a model: ``sequence_parallel_prefill`` (the prefill's
norms and residuals are split over the TP ranks by sequence and the TP all-reduces become
reduce-scatter + all-gather, as NxD Inference does for long contexts).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from trnsim.errors import ConfigError, UnknownNameError
from trnsim.hw import ChipSpec
from trnsim.perf.compute import FITTED, ComputeModel, Efficiency
from trnsim.perf.table_model import FITTED_TABLE

Mode = Literal["train", "serve"]


@dataclass(frozen=True, slots=True)
class SoftwareStack:
    """One software stack and its fitted efficiency profiles.

    Attributes:
        name: the ``--stack`` name.
        title: what users call it.
        vendor: the chip vendor it runs on (``ChipSpec.vendor``).
        mode: ``train`` or ``serve``.
        roofline: the profile with the roofline compute model.
        table: the profile with the kernel-table compute model (Trainium only; None: the
            roofline profile is used with either model).
        source: the calibration rows the profiles were fitted to ("not fitted: ..." if none).
        sequence_parallel_prefill: (serve) the prefill runs sequence-parallel over TP.
        moe_prefill_block: (serve) the prefill runs routed experts as a blockwise matmul with
            this many tokens per block, every provisioned block computed (0: each expert's
            matmul sized by its own tokens; ``trnsim.perf.compute.moe_blocks``).
    """

    name: str
    title: str
    vendor: str
    mode: Mode
    roofline: Efficiency
    source: str
    table: Efficiency | None = None
    sequence_parallel_prefill: bool = False
    moe_prefill_block: int = 0

    def profile(self, cm: ComputeModel) -> Efficiency:
        """The profile for compute model ``cm`` (``table`` or the roofline)."""
        if getattr(cm, "name", "") == "table" and self.table is not None:
            return self.table
        return self.roofline

    def describe(self) -> str:
        return f"stack: {self.title} ({self.name}); profile {self.source}"


_B = "shared/calibration/trainium.md"
_P = "shared/calibration/peers.md"
UNFITTED = Efficiency()
NEMO_TABLE_MATMUL = 0.4694
NEMO_ROOF_MATMUL = 0.4613

# --- the profiles (fitted by `trnsim validate --fit`; RESULTS.md lists every row's error) -----

# NxD Training: fitted to the NxD rows of B + B2 (16 rows); the parameters not fitted keep the
# values of the earlier joint Trn1 fit (compute.FITTED, table_model.FITTED_TABLE).
# A table profile's ``matmul`` (the roofline fallback for matmuls without a kernel table, such as
# MX dtypes) is the same stack's roofline ``matmul``.
_NXD_ROOF = replace(FITTED.train, matmul=0.4950, attention=0.1303, comm_overlap=0.0)
_NXD_TABLE = replace(
    FITTED_TABLE.train,
    kernel_matmul=0.5118,
    attention=0.1348,
    comm_overlap=0.0,
    matmul=_NXD_ROOF.matmul,
)
NXD_TRAINING = SoftwareStack(
    name="nxd-training",
    title="NxD Training (neuronx-distributed) on Trainium",
    vendor="AWS",
    mode="train",
    roofline=_NXD_ROOF,
    table=_NXD_TABLE,
    source=f"fitted to {_B} B + B2 NxD rows (16 rows, seq/s; mean |log error|)",
)
# NeMo-Megatron on Neuron: the NxD profile with its own matmul efficiency, fitted to the 4 NeMo
# rows of B2 (one parameter for four rows).
NEMO_NEURON = SoftwareStack(
    name="nemo-neuron",
    title="NeMo-Megatron on Neuron (neuronx-nemo-megatron)",
    vendor="AWS",
    mode="train",
    roofline=replace(_NXD_ROOF, matmul=NEMO_ROOF_MATMUL),
    table=replace(_NXD_TABLE, kernel_matmul=NEMO_TABLE_MATMUL, matmul=NEMO_ROOF_MATMUL),
    source=f"fitted to {_B} B2 NeMo-Megatron rows (GPT-3 23B/46B/175B, Llama-2-13B; matmul only)",
)
# Transformers-NeuronX, one stack per attention layout (calibrate.InferRow.layout): the BSH
# layout of the Llama-3 samples and the library's default HSB layout of the older samples,
# fitted jointly to C: every parameter shared but the HBM bytes per attention score.
# Fitted by `trnsim validate --fit` (calsets.fit_stacks; mean |log error| over the 72 numbers
# of C): kernel_matmul (table) or matmul (roofline), hbm, kv_hbm, op_overhead_s, score_bytes
# (BSH), prefill_overhead_s, and the HSB layout's score_bytes; attention and comm_overlap keep
# the values of the earlier joint fit (compute.FITTED, table_model.FITTED_TABLE). A table
# profile's ``matmul`` (the roofline fallback for matmuls without a kernel table) is the same
# stack's roofline ``matmul``.
_TNX_ROOF = replace(
    FITTED.serve,
    matmul=0.2599,
    hbm=0.9214,
    kv_hbm=0.6131,
    op_overhead_s=5.166e-6,
    score_bytes=40.76,
    prefill_overhead_s=6.527e-3,
)
_TNX_TABLE = replace(
    FITTED_TABLE.serve,
    matmul=_TNX_ROOF.matmul,
    kernel_matmul=0.3155,
    hbm=0.8245,
    kv_hbm=0.63,
    op_overhead_s=3.8e-6,
    score_bytes=35.84,
    prefill_overhead_s=7.006e-3,
)
TNX_HSB_SCORE_BYTES = (287.6, 252.5)  # (roofline, table) profile: HBM bytes per score, HSB
# Hugging Face Trainer on torch-neuronx (PyTorch/XLA, plain data parallelism): the encoder rows
# of trainium.md B (set BE: BERT-Large phase-1 pre-training, ViT-Base fine-tuning). Fitted: the
# table kernel's matmul fraction and the HBM efficiency (2 parameters, 4 rows); the others are
# NxD Training's.
HF_NEURONX = SoftwareStack(
    name="hf-neuronx",
    title="Hugging Face Trainer on torch-neuronx (PyTorch/XLA) on Trainium",
    vendor="AWS",
    mode="train",
    roofline=replace(_NXD_ROOF, matmul=0.5367, hbm=0.3421),
    table=replace(_NXD_TABLE, kernel_matmul=0.5473, hbm=0.3421, matmul=0.5367),
    source=f"fitted to {_B} B encoder rows (set BE: BERT-Large, ViT-Base; 4 rows, 2 "
    "parameters: matmul and HBM efficiency)",
)
TRANSFORMERS_NEURONX = SoftwareStack(
    name="transformers-neuronx",
    title="Transformers-NeuronX on Trainium/Inferentia (BSH attention layout)",
    vendor="AWS",
    mode="serve",
    roofline=_TNX_ROOF,
    table=_TNX_TABLE,
    source=f"fitted to {_B} C (Trn1 TTFT and TPOT p50, 36 rows; jointly with the HSB layout)",
)
TRANSFORMERS_NEURONX_HSB = SoftwareStack(
    name="transformers-neuronx-hsb",
    title="Transformers-NeuronX on Trainium/Inferentia (HSB attention layout, the default)",
    vendor="AWS",
    mode="serve",
    roofline=replace(_TNX_ROOF, score_bytes=TNX_HSB_SCORE_BYTES[0]),
    table=replace(_TNX_TABLE, score_bytes=TNX_HSB_SCORE_BYTES[1]),
    source=f"fitted to {_B} C jointly with transformers-neuronx: its own HBM bytes per "
    "attention score (the HSB-layout rows: Llama-2, Mistral, CodeLlama samples)",
)
NXD_INFERENCE = SoftwareStack(
    name="nxd-inference",
    title="NxD Inference / vLLM-Neuron on Trainium",
    vendor="AWS",
    mode="serve",
    # Flash-style attention (no score traffic to HBM); the Transformers-NeuronX profile with
    # matmul, attention and HBM efficiency and the draft step overhead fitted to the 3
    # published numbers of H and the 2 EAGLE-3 TPOTs of S (so H is reproduced by
    # construction: other Trn2 serving measurements, set X, are the real check).
    roofline=replace(
        FITTED.serve,
        score_bytes=0.0,
        matmul=0.2737,
        attention=0.07125,
        hbm=0.4459,
        draft_step_overhead_s=2.613e-3,
    ),
    table=replace(
        FITTED_TABLE.serve,
        score_bytes=0.0,
        kernel_matmul=0.3257,
        attention=0.08246,
        hbm=0.4090,
        matmul=0.2737,
        draft_step_overhead_s=2.58e-3,
    ),
    source=f"fitted to {_P} H (trn2.48xlarge, NxD Inference behind vLLM) and the EAGLE-3 "
    "runs of its tutorials (set S)",
    sequence_parallel_prefill=True,
    # Dropless MoE prefill as a blockwise matmul of 512-token blocks (the Trn2 GPT-OSS
    # configuration of aws-neuron-sdk libraries/nxd-inference/developer_guides/
    # moe-arch-deep-dive.rst, BlockwiseMatmulConfig block_size=512).
    moe_prefill_block=512,
)
MEGATRON_CORE = SoftwareStack(
    name="megatron-core",
    title="Megatron-Core / NeMo on NVIDIA GPUs",
    vendor="NVIDIA",
    mode="train",
    # Stated, not fitted (peers.md G, same H100 node): FlashAttention-2 forward 328 TFLOP/s of
    # the 989 TFLOP/s bf16 peak = 0.33; HBM STREAM triad 2.97 of 3.35 TB/s = 0.887. Fitted to F:
    # matmul and comm_overlap (Megatron-Core overlaps TP/DP communication with compute).
    roofline=Efficiency(attention=0.33, hbm=0.887, matmul=0.6008, comm_overlap=0.9897),
    source=f"fitted to {_P} F (Megatron-Core weak scaling on H100, 9 rows)",
)
VLLM_GPU = SoftwareStack(
    name="vllm-gpu",
    title="vLLM on NVIDIA GPUs",
    vendor="NVIDIA",
    mode="serve",
    roofline=UNFITTED,
    source="not fitted: no vLLM GPU serving rows in the calibration data (Efficiency defaults)",
    sequence_parallel_prefill=False,
)
# TensorRT-LLM (PyTorch backend, v1.0) on NVIDIA GPUs: fitted to the 5 trtllm-bench maximum-
# throughput rows of shared/calibration/serving.md K2 (Llama-3.1-8B and Llama-3.3-70B, ISL/OSL
# 1000/1000, FP8 on H100/H200, NVFP4 on B200; batch as trtllm-bench sizes it,
# ``infer.max_batch``). Flash attention (no score traffic), in-flight batching, CUDA graphs.
TRT_LLM = SoftwareStack(
    name="trt-llm",
    title="TensorRT-LLM on NVIDIA GPUs",
    vendor="NVIDIA",
    mode="serve",
    # attention and the overheads are the Efficiency defaults (not determined by K2)
    roofline=Efficiency(matmul=0.6536, hbm=0.6958, kv_hbm=0.7438, comm_overlap=0.0),
    source="fitted to shared/calibration/serving.md K2 (trtllm-bench maximum throughput, "
    "5 rows: matmul, HBM and KV-cache efficiency; one matmul efficiency for FP8 and NVFP4)",
)
MAXTEXT = SoftwareStack(
    name="maxtext",
    title="MaxText (JAX/XLA) on TPU",
    vendor="Google",
    mode="train",
    # matmul and comm_overlap fitted to I; the others are the Efficiency defaults (attention is
    # a few percent of the FLOPs at MaxText's 2,048-token sequences, so I cannot fix it).
    roofline=Efficiency(matmul=0.8485, comm_overlap=0.0),
    source=f"fitted to {_P} I (MaxText synthetic models on TPU v5p and v5e, 14 rows)",
)
MAXTEXT_SERVE = SoftwareStack(
    name="maxtext-serve",
    title="MaxText / JetStream serving on TPU",
    vendor="Google",
    mode="serve",
    roofline=UNFITTED,
    source="not fitted: no TPU serving rows in the calibration data (Efficiency defaults)",
)

OPTIMUM_HABANA = SoftwareStack(
    name="optimum-habana",
    title="Optimum Habana (Hugging Face on SynapseAI) on Gaudi",
    vendor="Intel",
    mode="train",
    roofline=UNFITTED,
    source="not fitted: no Gaudi training rows in the calibration data (Efficiency defaults)",
)
OPTIMUM_HABANA_SERVE = SoftwareStack(
    name="optimum-habana-serve",
    title="vLLM / Optimum Habana serving on Gaudi",
    vendor="Intel",
    mode="serve",
    roofline=UNFITTED,
    source="not fitted: no Gaudi serving rows in the calibration data (Efficiency defaults)",
)

STACKS: dict[str, SoftwareStack] = {
    s.name: s
    for s in (
        NXD_TRAINING,
        NEMO_NEURON,
        HF_NEURONX,
        TRANSFORMERS_NEURONX,
        TRANSFORMERS_NEURONX_HSB,
        NXD_INFERENCE,
        MEGATRON_CORE,
        VLLM_GPU,
        TRT_LLM,
        MAXTEXT,
        MAXTEXT_SERVE,
        OPTIMUM_HABANA,
        OPTIMUM_HABANA_SERVE,
    )
}


def default_stack(chip: ChipSpec, mode: Mode) -> SoftwareStack:
    """The stack a system runs unless ``--stack`` says otherwise: by vendor and chip.

    Trainium trains with NxD Training; Trn1 serves with Transformers-NeuronX (the stack of the
    Trn1 tables), Trn2, Trn3 and Inferentia2 with NxD Inference (AWS's current serving stack);
    NVIDIA GPUs train with Megatron-Core and serve with vLLM; TPUs run MaxText; Gaudi runs
    Optimum Habana."""
    if chip.vendor == "AWS":
        if mode == "train":
            return STACKS["nxd-training"]
        return STACKS["transformers-neuronx" if chip.name == "trn1" else "nxd-inference"]
    if chip.vendor == "NVIDIA":
        return STACKS["megatron-core" if mode == "train" else "vllm-gpu"]
    if chip.vendor == "Google":
        return STACKS["maxtext" if mode == "train" else "maxtext-serve"]
    if chip.vendor == "Intel":
        return STACKS["optimum-habana" if mode == "train" else "optimum-habana-serve"]
    raise ConfigError(f"no software stack for {chip.name} (vendor {chip.vendor})")


def resolve_stack(name: str | SoftwareStack | None, chip: ChipSpec, mode: Mode) -> SoftwareStack:
    """The named stack (or the default), checked against the chip's vendor and the mode."""
    if name is None:
        return default_stack(chip, mode)
    stack = name if isinstance(name, SoftwareStack) else STACKS.get(name)
    if stack is None:
        raise UnknownNameError(f"no software stack {name!r}; valid: {', '.join(STACKS)}")
    if stack.vendor != chip.vendor:
        raise ConfigError(
            f"stack {stack.name} runs on {stack.vendor} chips, not on {chip.name} "
            f"({chip.vendor}): a profile is never reused on another vendor"
        )
    if stack.mode != mode:
        raise ConfigError(f"stack {stack.name} is a {stack.mode} stack, not a {mode} stack")
    return stack


def stack_names(mode: Mode | None = None) -> list[str]:
    return [n for n, s in STACKS.items() if mode is None or s.mode == mode]
