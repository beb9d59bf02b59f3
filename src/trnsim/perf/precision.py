"""Precisions as data: bytes per element of weights, activations and KV cache, and the
Tensor-engine dtype the matmuls run in.

MX formats carry one 8-bit E8M0 scale per block of 32 elements (OCP MX v1.0, section 5), so an
MXFP8 weight is 1 + 1/32 bytes and an MXFP4 weight 0.5 + 1/32 bytes. NVIDIA's NVFP4 carries one
FP8 E4M3 scale per block of 16 E2M1 elements and one fp32 scale per tensor (NVIDIA,
"Pretraining Large Language Models with NVFP4", arXiv 2509.25149, section 2;
``trnsim.numerics.nvfp4``): 0.5 + 1/16 bytes per weight; its matmuls run on the FP4 tensor
cores (the chip's ``fp4`` peak). ``int8`` is weight-only
quantisation as in the Transformers-NeuronX rows of the calibration data: weights are stored
in int8 and dequantised to bf16 before the matmul, so the matmuls run at the bf16 rate and only
weight traffic shrinks.

Training state (``master_bytes``, ``grad_bytes``, ``optimizer_bytes``, per parameter): mixed
precision keeps bf16 weights and gradients, an fp32 master copy and Adam's two fp32 moments:
2 + 2 + 4 + 8 = 16 bytes per parameter (Rajbhandari et al., ZeRO, 2020, section 3.1).

Low-precision training (Transformer Engine's recipes, which NeMo and Megatron-Core run):

- ``quantize_bytes``: HBM bytes moved per element when a matmul input (activation or
  gradient) is quantized by its own kernel before the matmul. FP8 with per-tensor current
  scaling: an amax pass (read 2 B), then the cast (read 2 B) writing the row-wise and the
  column-wise (transposed, for the backward's other operand) FP8 copies (2 x 1 B) = 6 B.
  MXFP8 (one E8M0 scale per 32 elements along the contraction, so the backward needs a copy
  scaled along the other dimension): read 2 B, write 2 x (1 + 1/32) B = 4.0625 B. Weight-only
  and 16-bit precisions quantize nothing (0).
- ``saved_gemm_bytes``: bytes per element of a matmul input saved for the backward: the
  quantized copy (1 B FP8, 1 + 1/32 B MXFP8), which the backward's weight-gradient matmul
  reads; 0 means ``act_bytes``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from trnsim.errors import UnknownNameError
from trnsim.hw import ChipSpec
from trnsim.hw.registry import Registry

MX_SCALE_BYTES = 1 / 32  # one E8M0 byte per 32-element block
NVFP4_SCALE_BYTES = 1 / 16  # one E4M3 byte per 16-element block (plus one fp32 per tensor)


@dataclass(frozen=True, slots=True)
class Precision:
    """How a model is stored and computed.

    ``weight_bytes``/``act_bytes``/``kv_bytes``: bytes per element in HBM.
    ``compute``: the Tensor-engine dtype (a key of ``ChipSpec.peak_flops``).
    ``grad_bytes``, ``master_bytes``, ``optimizer_bytes``: training state per parameter.
    ``note``: how weights and activations are stored (training state is ``training_state``).
    """

    name: str
    weight_bytes: float
    act_bytes: float
    kv_bytes: float
    compute: str
    grad_bytes: float = 2.0
    master_bytes: float = 4.0
    optimizer_bytes: float = 8.0
    note: str = ""
    quantize_bytes: float = 0.0
    saved_gemm_bytes: float = 0.0

    @property
    def saved_gemm_elem_bytes(self) -> float:
        """Bytes per saved matmul-input element (``saved_gemm_bytes``, else ``act_bytes``)."""
        return self.saved_gemm_bytes or self.act_bytes

    def training_state(self) -> str:
        """The training state per parameter, for people (an estimate's assumptions)."""
        master = f", fp32 master {self.master_bytes:g} B" if self.master_bytes else ""
        return (
            f"training state per parameter: weights {self.weight_bytes:g} B, gradients "
            f"{self.grad_bytes:g} B{master}, Adam moments {self.optimizer_bytes:g} B"
        )


PRECISIONS: Registry[Precision] = Registry("precision")
for _p in (
    Precision("bf16", 2, 2, 2, "bf16", note="bf16 weights and activations"),
    Precision("fp16", 2, 2, 2, "fp16", note="fp16 weights and activations"),
    Precision("fp32", 4, 4, 4, "fp32", grad_bytes=4, master_bytes=0, note="fp32 throughout"),
    Precision(
        "fp8",
        1,
        2,
        2,
        "fp8",
        note="fp8 weights and matmul inputs (per-tensor current scaling); bf16 activations",
        quantize_bytes=6.0,
        saved_gemm_bytes=1.0,
    ),
    Precision(
        "mxfp8",
        1 + MX_SCALE_BYTES,
        2,
        2,
        "mxfp8",
        note="OCP MXFP8 (E4M3, 32-blocks)",
        quantize_bytes=2 + 2 * (1 + MX_SCALE_BYTES),
        saved_gemm_bytes=1 + MX_SCALE_BYTES,
    ),
    Precision(
        "mxfp4",
        0.5 + MX_SCALE_BYTES,
        2,
        2,
        "mxfp4",
        note="OCP MXFP4 (E2M1, 32-blocks)",
        quantize_bytes=2 + 2 * (0.5 + MX_SCALE_BYTES),
        saved_gemm_bytes=0.5 + MX_SCALE_BYTES,
    ),
    Precision("int8", 1, 2, 2, "bf16", note="int8 weight-only; dequantised to bf16 for matmul"),
    Precision(
        "nvfp4",
        0.5 + NVFP4_SCALE_BYTES,
        2,
        2,
        "fp4",
        note="NVIDIA NVFP4 (E2M1, 16-blocks with E4M3 scales, W4A4 on FP4 tensor cores)",
    ),
    Precision(
        "fp32-autocast",
        4,
        4,
        4,
        "bf16",
        grad_bytes=4,
        master_bytes=0,
        note="fp32 weights and activations, matmuls auto-cast to bf16 (neuronx-cc's default "
        "--auto-cast matmult)",
    ),
):
    PRECISIONS.register(_p.name, _p)

# If a chip does not publish a peak for the compute dtype, the next dtype in this chain is used
# (and the estimate says so): a chip without MX support runs MXFP4 as FP4 or FP8, and so on.
FALLBACK: dict[str, tuple[str, ...]] = {
    "mxfp4": ("fp4", "mxfp8", "fp8", "bf16"),
    "mxfp8": ("fp8", "bf16"),
    "fp4": ("mxfp4", "fp8", "bf16"),
    "fp8": ("mxfp8", "bf16"),
    "fp16": ("bf16",),
    "tf32": ("bf16",),
}


def precision(name: str | Precision) -> Precision:
    """A precision by name (bf16, fp16, fp32, fp8, mxfp8, mxfp4, nvfp4, int8, fp32-autocast)."""
    return name if isinstance(name, Precision) else PRECISIONS.get(name)


#: KV-cache element sizes a serving engine can store (``--kv-cache-dtype``).
KV_CACHE_BYTES: dict[str, float] = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0}


def with_kv_cache(prec: Precision, dtype: str | None) -> Precision:
    """``prec`` with its KV cache stored in ``dtype`` (None or ``auto``: unchanged), as vLLM's
    and TensorRT-LLM's FP8 KV cache stores it beside weights of another precision."""
    if dtype in (None, "auto"):
        return prec
    if dtype not in KV_CACHE_BYTES:
        raise UnknownNameError(
            f"no KV-cache dtype {dtype!r}; valid: auto, {', '.join(KV_CACHE_BYTES)}"
        )
    kv = KV_CACHE_BYTES[dtype]
    if kv == prec.kv_bytes:
        return prec
    note = f"{prec.note}; KV cache {dtype}" if prec.note else f"KV cache {dtype}"
    return replace(prec, name=f"{prec.name}+kv-{dtype}", kv_bytes=kv, note=note)


def compute_dtype(chip: ChipSpec, dtype: str) -> tuple[str, str]:
    """The dtype whose published peak is used for ``dtype`` on ``chip``, and a note if it differs.

    Raises if no dtype of the fallback chain has a published peak.
    """
    if dtype in chip.peak_flops:
        return dtype, ""
    for alt in FALLBACK.get(dtype, ()):
        if alt in chip.peak_flops:
            return alt, f"{chip.name} publishes no {dtype} peak; its {alt} peak is used"
    raise UnknownNameError(
        f"{chip.name} has no published peak for {dtype} (or fallbacks "
        f"{', '.join(FALLBACK.get(dtype, ())) or 'none'}); valid: {', '.join(chip.peak_flops)}"
    )
