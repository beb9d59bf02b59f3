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
TRANSFORMERS_NEURONX = SoftwareStack(
    name="transformers-neuronx",
    title="Transformers-NeuronX on Trainium/Inferentia",
    vendor="AWS",
    mode="serve",
    roofline=FITTED.serve,
    table=FITTED_TABLE.serve,
    source=f"fitted to {_B} C (Trn1 TTFT and TPOT p50, 36 rows)",
)
NXD_INFERENCE = SoftwareStack(
    name="nxd-inference",
    title="NxD Inference / vLLM-Neuron on Trainium",
    vendor="AWS",
    mode="serve",
    # Flash-style attention (no score traffic to HBM); the Transformers-NeuronX profile with
    # matmul, attention and HBM efficiency fitted to the 3 published numbers of H (so H is
    # reproduced by construction: other Trn2 serving measurements are the real check).
    roofline=replace(FITTED.serve, score_bytes=0.0, matmul=0.2698, attention=0.07449, hbm=0.4459),
    table=replace(
        FITTED_TABLE.serve,
        score_bytes=0.0,
        kernel_matmul=0.3079,
        attention=0.1049,
        hbm=0.4090,
        matmul=0.2698,
    ),
    source=f"fitted to {_P} H (trn2.48xlarge, NxD Inference behind vLLM)",
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
        TRANSFORMERS_NEURONX,
        NXD_INFERENCE,
        MEGATRON_CORE,
        VLLM_GPU,
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
