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

**Per generation and precision.** A stack's efficiency differs by chip generation and number
format (a Blackwell FP8 GEMM is not a Hopper BF16 GEMM at twice the peak). A profile carries
``variants``: values for one chip family (``ChipSpec.family``) and precision, each fitted to
that stack's rows on that family in that precision and stored with them. ``profile(cm, chip,
precision)`` applies the matching variant; where none exists the base profile is used and
``describe`` says the efficiency is borrowed, and from where.

**Overlap.** Training stacks state which communication they run concurrently with compute,
per kind (``overlap``: tp, ep, cp, pp, dp), with the source; the numbers are the profile's
``*_overlap`` fields, and ``trnsim.perf.train`` caps what they hide by the compute available.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Literal

from trnsim.errors import ConfigError, UnknownNameError
from trnsim.hw import ChipSpec
from trnsim.perf.compute import FITTED, ComputeModel, Efficiency
from trnsim.perf.memory import DEFAULT_MEMORY, MemoryParams
from trnsim.perf.table_model import FITTED_TABLE

Mode = Literal["train", "serve"]


@dataclass(frozen=True, slots=True)
class Variant:
    """A stack profile's values for one chip family and precision (``values``: Efficiency
    field -> value) and the rows they were fitted to (``source``)."""

    family: str
    precision: str
    values: tuple[tuple[str, float], ...]
    source: str

    def __post_init__(self) -> None:
        names = {f.name for f in fields(Efficiency)}
        bad = [k for k, _ in self.values if k not in names]
        if bad:
            raise ConfigError(f"stack variant {self.family}/{self.precision}: no field {bad[0]!r}")

    def apply(self, eff: Efficiency) -> Efficiency:
        return replace(eff, **dict(self.values))


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
        variants: per chip family and precision values (module docstring).
        base: the (family, precision) the base profile was fitted on ("" if none).
        overlap: (train) per communication kind, what the stack overlaps and the source.
        memory: the memory model's inputs for this stack (``trnsim.perf.memory``); the
            training estimate and the planner both read it.
        prefill_attention: (serve) when the prefill runs a flash-attention kernel: ``""``
            always (the profile's ``score_bytes``); ``"nxdi"`` as NxD Inference chooses it
            (``prefill_flash``), the other prefills running the compiler's attention, which
            moves ``native_score_bytes`` (roofline, table) of HBM per attention score.
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
    variants: tuple[Variant, ...] = ()
    base: tuple[str, str] = ("", "")
    overlap: tuple[tuple[str, str], ...] = ()
    memory: MemoryParams = DEFAULT_MEMORY
    prefill_attention: str = ""
    native_score_bytes: tuple[float, float] = (0.0, 0.0)

    def variant(self, family: str, prec: str) -> Variant | None:
        """The values for a chip family and precision name: the family's ``"*"`` variant (every
        precision) with the precision's own variant over it; None when neither exists."""
        anyp = [v for v in self.variants if v.family == family and v.precision == "*"]
        own = [v for v in self.variants if v.family == family and v.precision == prec]
        if not anyp and not own:
            return None
        if anyp and own:
            vals = dict(anyp[0].values) | dict(own[0].values)
            return Variant(family, prec, tuple(vals.items()), own[0].source)
        return (own or anyp)[0]

    def profile(
        self, cm: ComputeModel, chip: ChipSpec | None = None, prec: str | None = None
    ) -> Efficiency:
        """The profile for compute model ``cm`` (``table`` or the roofline), with the variant
        of ``chip``'s family and precision ``prec`` applied when the stack has one."""
        if getattr(cm, "name", "") == "table" and self.table is not None:
            eff = self.table
        else:
            eff = self.roofline
        v = self.variant(chip.family, prec) if chip is not None and prec is not None else None
        return v.apply(eff) if v is not None else eff

    def prefill_flash(self, q_len: int, lnc: int) -> bool:
        """Whether a prefill of ``q_len`` (padded) tokens runs a flash-attention kernel at
        logical NeuronCore size ``lnc`` (``prefill_attention``). NxD Inference
        (aws-neuron/neuronx-distributed-inference ``modules/attention/attention_base.py``
        ``get_flash_attention_strategy``, as its docstring states it): at LNC 1 the kernel runs
        for context lengths of at least 4,096 only; at LNC 2 for lengths of at least 1,024
        divisible by 512, and below 1,024 for lengths divisible by 256; otherwise "use no
        kernel, because the unsharded kernel has worse performance than no kernel"."""
        if self.prefill_attention != "nxdi":
            return True
        if lnc <= 1:
            return q_len >= 4096
        if q_len >= 1024:
            return q_len % 512 == 0
        return q_len % 256 == 0

    def describe(self, chip: ChipSpec | None = None, prec: str | None = None) -> str:
        line = f"stack: {self.title} ({self.name}); profile {self.source}"
        if chip is None or prec is None or not self.variants:
            return line
        v = self.variant(chip.family, prec)
        if v is not None and v.precision == prec:
            return f"{line}; {chip.family} {prec}: {v.source}"
        fam, bp = self.base
        if (chip.family, prec) == (fam, bp):
            return line
        part = f"; {chip.family} (every precision): {v.source}" if v is not None else ""
        return (
            f"{line}{part}; {chip.family} {prec}: no rows of this stack, matmul efficiency "
            f"BORROWED from its {fam} {bp} profile"
        )


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
_NXD_ROOF = replace(FITTED.train, matmul=0.4950, attention=0.1303, tp_overlap=0.0)
_NXD_TABLE = replace(
    FITTED_TABLE.train,
    kernel_matmul=0.5118,
    attention=0.1348,
    tp_overlap=0.0,
    matmul=_NXD_ROOF.matmul,
)
_NXD_OVERLAP = (
    ("tp", "fitted to B + B2: 0 (TP collectives on the critical path)"),
    ("dp", "1.0: the ZeRO-1 gradient reduce-scatter under the last micro-batch's backward"),
)
NXD_TRAINING = SoftwareStack(
    name="nxd-training",
    title="NxD Training (neuronx-distributed) on Trainium",
    vendor="AWS",
    mode="train",
    roofline=_NXD_ROOF,
    table=_NXD_TABLE,
    source=f"fitted to {_B} B + B2 NxD rows (16 rows, seq/s; mean |log error|)",
    base=("Trainium", "bf16"),
    overlap=_NXD_OVERLAP,
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
    base=("Trainium", "bf16"),
    overlap=_NXD_OVERLAP,
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
    "runs of its tutorials (set S); H's TP64 prefill over 16 chips holds about 390 ms that "
    "neither its kernels nor the priced collectives explain, and the fitted matmul and "
    "attention efficiencies absorb it, so a prefill on one chip is priced at about 3x its "
    "NxD Inference kernels (benchmarks/study_nxdi_kernels.py)",
    sequence_parallel_prefill=True,
    # Prefill attention as NxD Inference picks it (SoftwareStack.prefill_flash): without the
    # kernel (NeuronCore-v2 chips below 4,096 tokens, odd lengths on Trn2) the compiler's
    # attention writes and reads the score matrix; its HBM bytes per score are BORROWED from
    # Transformers-NeuronX's BSH-layout fit on Trn1 (set C: the same compiler-generated
    # attention on the same NeuronCore-v2), not fitted to NxD Inference rows.
    prefill_attention="nxdi",
    native_score_bytes=(_TNX_ROOF.score_bytes, _TNX_TABLE.score_bytes),
    # Dropless MoE prefill as a blockwise matmul of 512-token blocks (the Trn2 GPT-OSS
    # configuration of aws-neuron-sdk libraries/nxd-inference/developer_guides/
    # moe-arch-deep-dive.rst, BlockwiseMatmulConfig block_size=512).
    moe_prefill_block=512,
)
# Megatron-Bridge performance guide (NVIDIA-NeMo/Megatron-Bridge docs/performance-guide.md @
# 00b7660be025, "Communication Overlaps and Tuning"): what NeMo / Megatron-Core overlaps.
_MB_GUIDE = "Megatron-Bridge docs/performance-guide.md @ 00b7660be025"
MEGATRON_OVERLAP = (
    (
        "tp",
        "0.75: Transformer Engine userbuffers pipeline the TP all-gather / reduce-scatter with "
        "the dependent GEMMs in 4 splits, one chunk of 4 left exposed (" + _MB_GUIDE + ", TP "
        "communication overlap: num_splits = 4); hidden under the layer's matmuls",
    ),
    (
        "cp",
        "1.0: p2p ring exchange of K/V chunks is hard-coded to overlap the attention compute of "
        "the sequence chunks and 'can be fully overlapped' (" + _MB_GUIDE + ", CP); hidden "
        "under the layer's attention",
    ),
    (
        "ep",
        "1.0 with overlap_moe_expert_parallel_comm (1F1B overlap of one micro-batch's dispatch "
        "and combine with another's compute), else none: 'To hide the A2A/AG communication "
        "introduced by EP, pipeline split overlap or 1F1B overlap ... could be possible' ("
        + _MB_GUIDE
        + ", EP)",
    ),
    (
        "pp",
        "1.0: 'PP send/recv in steady 1F1B states are set to be overlapped with computes by "
        "default' (" + _MB_GUIDE + ", PP)",
    ),
    (
        "dp",
        "1.0: the distributed optimizer overlaps parameter all-gathers with the first "
        "micro-batch's forward and gradient reduce-scatters with the last micro-batch's "
        "backward; Megatron FSDP each layer's all-gather and reduce-scatter with its forward "
        "and backward (" + _MB_GUIDE + ", DP)",
    ),
)
_J = f"{_P} J (NeMo 25.11 on DGX-GB200 and DGX-H100)"
MEGATRON_CORE = SoftwareStack(
    name="megatron-core",
    title="Megatron-Core / NeMo on NVIDIA GPUs",
    vendor="NVIDIA",
    mode="train",
    # Stated, not fitted (peers.md G, same H100 node): FlashAttention-2 forward 328 TFLOP/s of
    # the 989 TFLOP/s bf16 peak = 0.33; HBM STREAM triad 2.97 of 3.35 TB/s = 0.887. Overlap
    # fractions stated from the Megatron-Bridge guide (MEGATRON_OVERLAP). Fitted jointly to F
    # and J by `trnsim validate --fit --sets F,J` (calsets.FIT_PARAMS["megatron-core"], 24
    # rows; JC's 17 GB300/B200 rows held out): the base
    # (Hopper BF16) matmul; the MoE operators' grouped-GEMM factor, per-expert kernel overhead
    # and the all-to-all dispatcher's host-bound time per MoE layer forward (moe_sync_s; J's
    # alltoall rows: GB200 GPT-OSS and every H100 MoE row); per generation and precision the
    # variants below. RESULTS.md lists every row's error.
    roofline=Efficiency(
        attention=0.33,
        hbm=0.887,
        matmul=0.7312,
        tp_overlap=0.75,
        cp_overlap=1.0,
        ep_overlap=1.0,
        pp_overlap=1.0,
        dp_overlap=1.0,
        grouped=0.7098,
        moe_sync_s=4.531e-3,
        expert_overhead_s=3.347e-5,
    ),
    source=f"fitted to {_P} F (Megatron-Core weak scaling on H100, 9 rows; Hopper bf16) and J",
    base=("Hopper", "bf16"),
    overlap=MEGATRON_OVERLAP,
    variants=(
        Variant(
            "Hopper",
            "fp8",
            (("matmul", 0.5906),),
            f"matmul fitted to {_J}, H100 FP8-CS rows (Llama3 8B/70B, Llama3.1 405B, "
            "Qwen3 30B-A3B/235B-A22B)",
        ),
        Variant(
            "Blackwell",
            "fp8",
            (("matmul", 0.4799),),
            f"matmul fitted to {_J}, GB200 FP8-CS rows (Llama3 8B/70B, Llama3.1 405B)",
        ),
        Variant(
            "Blackwell",
            "mxfp8",
            (("matmul", 0.4179),),
            f"matmul fitted to {_J}, GB200 MXFP8 rows (Llama3 8B, DeepSeek-V3, Qwen3 30B-A3B)",
        ),
    ),
    # NeMo's performance recipes fuse the loss into Transformer Engine's cross entropy
    # (Megatron-Bridge scripts/performance/utils/overrides.py @ 00b7660b:
    # cross_entropy_fusion_impl = "te"), computed in place on the bf16 logits: 2 bytes each.
    memory=MemoryParams(logit_bytes=2.0),
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
    roofline=Efficiency(matmul=0.8549, hbm=0.65, kv_hbm=0.7042, comm_overlap=0.0),
    source="fitted to shared/calibration/serving.md K2 (trtllm-bench maximum throughput, "
    "5 rows: matmul, HBM and KV-cache efficiency of the base; Blackwell NVFP4's KV-cache "
    "efficiency, the variant below)",
    base=("Hopper", "fp8"),
    variants=(
        # One base profile for Hopper FP8 and Blackwell NVFP4 put the B200 K2 row at +25 %
        # and every Hopper row low (-1.5 to -11.6 %): the fit traded one against the others.
        # Fitted to ONE row (K2 B200 Llama-3.3-70B NVFP4 1000/1000, decode-heavy: its steps
        # read about 3x as much KV cache as weights). KV, not the FP4 GEMM: a Blackwell NVFP4
        # matmul fitted instead (0.50) puts the MLPerf B200 Offline run (set L, K1, a check)
        # at -23 % and its Server run short of the offered rate; this value puts Offline at
        # -6 % and the Server run within 11 % (RESULTS.md, issue 23 session 6).
        Variant(
            "Blackwell",
            "nvfp4",
            (("kv_hbm", 0.4091),),
            "kv_hbm fitted to serving.md K2's B200 NVFP4 row alone (checked by set L K1 B200)",
        ),
    ),
)
MAXTEXT = SoftwareStack(
    name="maxtext",
    title="MaxText (JAX/XLA) on TPU",
    vendor="Google",
    mode="train",
    # matmul and tp_overlap fitted to I; the others are the Efficiency defaults (attention is
    # a few percent of the FLOPs at MaxText's 2,048-token sequences, so I cannot fix it).
    roofline=Efficiency(matmul=0.8485, tp_overlap=0.0, dp_overlap=1.0),
    source=f"fitted to {_P} I (MaxText synthetic models on TPU v5p and v5e, 14 rows)",
    base=("TPU", "bf16"),
    overlap=(
        ("tp", "fitted to I: 0 (the tensor-parallel collectives are not hidden)"),
        (
            "dp",
            "1.0: FSDP all-gathers and reduce-scatters run as asynchronous collective fusions "
            "overlapped with compute (MaxText/configs/v5p/*.sh LIBTPU_INIT_ARGS: "
            "xla_tpu_enable_async_collective_fusion, xla_tpu_overlap_compute_collective_tc)",
        ),
    ),
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
