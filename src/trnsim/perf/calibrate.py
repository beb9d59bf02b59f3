"""Calibration of the performance model against published Trn1 measurements.

The rows of ``shared/calibration/trainium.md`` sections B and B2 (Trn1 training throughput,
decoder LLMs) and C (Trn1 inference TTFT and TPOT p50) are data here, each with its source and
the configuration it was measured in. ``fit()`` finds ONE global ``Efficiency`` per software
stack (``train`` for the B/B2 rows, ``serve`` for the C rows) minimising the mean absolute
log error; there are no per-row factors. ``report()`` gives every row's error and the mean
absolute percentage error (MAPE) per table.

What a row fixes (configuration, not fitting): model, chips, TP/PP/DP, batch, sequence,
weight precision, recomputation where the launch script states it (NeMo GPT-3: 23B and 175B
``selective``, 46B ``full``; NxD Llama rows: ``selective`` assumed), ZeRO-1 for NxD (as the
table says) and none for NeMo-Megatron. The calibration tables count NeuronCores as ranks:
``ranks_per_chip = 2`` on Trn1. Llama-2-13B and CodeLlama-13B have 40 heads on TP 32:
Transformers-NeuronX pads heads to a multiple of TP (``pad_heads``).

The C rows carry the attention layout of the sample that produced them (a configuration, not
a fit): the Llama-3 rows come from ``meta-llama-3-{8b,70b}-sampling.ipynb``, whose
``NeuronConfig`` sets ``attention_layout='BSH'`` (with ``fuse_qkv``); the Llama-2, Mistral and
CodeLlama samples give no ``NeuronConfig`` and run the library's default HSB layout
(aws-neuron/aws-neuron-samples torch-neuronx/transformers-neuronx/inference/). Each layout is
its own stack (``transformers-neuronx``, ``transformers-neuronx-hsb``); the Transformers-NeuronX
developer guide says BSH "often achieves better performance since it can enable better
overlapping of compute with collectives and can reduce transposes".

Left out: the TTFT/TPOT p99 and throughput columns of C (p50 is fitted; throughput is
reported). The BERT-Large and ViT rows of section B are encoder training rows of another stack
(HF Trainer on torch-neuronx): ``trnsim.perf.calsets`` set BE.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from trnsim.hw import system
from trnsim.perf.compute import ComputeModel, Efficiency, Profiles
from trnsim.perf.fitting import nelder_mead
from trnsim.perf.infer import estimate_inference
from trnsim.perf.plan import ParallelPlan
from trnsim.perf.table_model import compute_model, profiles_for
from trnsim.perf.train import estimate_training

CAL_SOURCE = "shared/calibration/trainium.md"
SYSTEM = "trn1.32xlarge"
CORES_PER_NODE = 32  # trn1.32xlarge: 16 chips x 2 NeuronCore-v2 (ranks at LNC=1)
RANKS_PER_CHIP = 2  # the tables count NeuronCores as ranks


def model_for(name: str = "auto") -> ComputeModel:
    """The compute model the rows are predicted with: ``auto`` (the table model on Trn1),
    ``table`` or ``roofline``."""
    return compute_model(name, system(SYSTEM).chip, RANKS_PER_CHIP)


@dataclass(frozen=True, slots=True)
class TrainRow:
    """One measured training throughput (sequences/s)."""

    section: str
    model: str
    nodes: int
    tp: int
    pp: int
    global_batch: int
    seq_len: int
    measured_seq_per_s: float
    sdk: str
    framework: str
    recompute: str = "selective"
    zero: int = 1
    note: str = ""

    @property
    def dp(self) -> int:
        """Derived as the table states: DP = nodes x 32 / (TP x PP)."""
        return self.nodes * CORES_PER_NODE // (self.tp * self.pp)

    @property
    def label(self) -> str:
        return f"{self.model} {self.nodes}n TP{self.tp} PP{self.pp} s{self.seq_len} ({self.sdk})"


@dataclass(frozen=True, slots=True)
class InferRow:
    """One measured inference latency row (TP 32 on one trn1.32xlarge)."""

    model: str
    weights: str
    batch: int
    seq: int
    input_tokens: int
    output_tokens: int
    tokens_per_s: float
    ttft_ms: float
    tpot_ms: float
    sdk: str

    @property
    def layout(self) -> str:
        """The sample's attention layout: BSH for the Llama-3 samples, else the default HSB."""
        return "BSH" if self.model.startswith("llama-3") else "HSB"

    @property
    def stack(self) -> str:
        return "transformers-neuronx" if self.layout == "BSH" else "transformers-neuronx-hsb"

    @property
    def label(self) -> str:
        return (
            f"{self.model} {self.weights} b{self.batch} in{self.input_tokens} "
            f"out{self.output_tokens}"
        )


def _nxd(model, nodes, tp, pp, seq, sps, sdk, section="B2"):
    return TrainRow(section, model, nodes, tp, pp, 1024, seq, sps, sdk, "NxD")


def _nemo(model, tp, pp, seq, sps, sdk, recompute, nodes=32, note=""):
    return TrainRow(
        "B2",
        model,
        nodes,
        tp,
        pp,
        1024,
        seq,
        sps,
        sdk,
        "NeMo-Megatron",
        recompute=recompute,
        zero=0,
        note=note,
    )


TRAIN_ROWS: tuple[TrainRow, ...] = (
    _nxd("llama-3.1-8b", 32, 32, 1, 8192, 47.95, "2.24.0", "B"),
    _nxd("llama-3.1-70b", 32, 32, 8, 8192, 7.94, "2.24.0", "B"),
    _nxd("llama-2-7b", 16, 8, 1, 4096, 95.14, "2.21.0"),
    _nxd("llama-2-13b", 32, 8, 8, 4096, 80.33, "2.21.0"),
    _nxd("llama-2-70b", 32, 32, 8, 4096, 14.44, "2.21.0"),
    _nxd("llama-3.1-8b", 32, 32, 1, 8192, 53.51, "2.21.0"),
    _nxd("llama-3.1-70b", 32, 32, 8, 8192, 7.97, "2.21.0"),
    _nxd("llama-2-7b", 16, 8, 1, 4096, 101.3, "2.20.0"),
    _nxd("llama-2-13b", 32, 8, 8, 4096, 84.0, "2.20.0"),
    _nxd("llama-2-70b", 32, 32, 8, 4096, 14.2, "2.20.0"),
    _nxd("llama-3.1-8b", 32, 32, 1, 8192, 49.47, "2.20.0"),
    _nxd("llama-3.1-70b", 32, 32, 8, 8192, 7.59, "2.20.0"),
    _nemo("gpt3-23b", 8, 4, 2048, 107.18, "2.18.0", "selective"),
    _nemo("gpt3-46b", 8, 8, 2048, 48.24, "2.18.0", "full"),
    _nemo("gpt3-175b", 32, 8, 2048, 14.60, "2.18.0", "selective"),
    _nxd("llama-2-7b", 16, 8, 1, 4096, 92.93, "2.18.0"),
    _nxd("llama-2-13b", 32, 8, 4, 4096, 87.44, "2.18.0"),
    _nxd("llama-2-70b", 32, 32, 4, 4096, 17.86, "2.18.0"),
    _nxd("llama-2-70b", 32, 32, 4, 4096, 15.34, "2.16.0"),
    _nemo(
        "llama-2-13b",
        8,
        4,
        4096,
        64.0,
        "2.16.0",
        "selective",
        nodes=16,
        note="table says DP4, but 16 nodes x 32 / (TP8 x PP4) = DP16; DP16 used",
    ),
)

_C = [
    ("llama-3-8b", "int8", 1, 8192, 128, 8064, 157.25, 17.09, 7.03, "2.18.1"),
    ("llama-3-8b", "int8", 1, 8192, 4096, 4096, 140.50, 153.02, 7.04, "2.18.1"),
    ("llama-3-8b", "int8", 1, 4096, 128, 3968, 178.19, 14.75, 5.86, "2.18.1"),
    ("llama-3-8b", "int8", 8, 8192, 128, 8064, 933.50, 55.16, 9.95, "2.18.1"),
    ("llama-3-8b", "int8", 8, 8192, 4096, 4096, 770.16, 1265.95, 10.04, "2.18.1"),
    ("llama-3-8b", "int8", 8, 4096, 128, 3968, 1142.70, 49.05, 7.65, "2.18.1"),
    ("llama-3-70b", "bf16", 1, 4096, 2048, 2048, 37.70, 547.00, 26.20, "2.18.1"),
    ("llama-3-70b", "bf16", 1, 1152, 128, 1024, 40.64, 53.20, 24.48, "2.18.1"),
    ("llama-3-70b", "bf16", 1, 256, 128, 128, 40.81, 52.53, 26.48, "2.18.1"),
    ("llama-3-70b", "bf16", 4, 4096, 2048, 2048, 120.36, 1661.12, 32.33, "2.18.1"),
    ("llama-3-70b", "bf16", 4, 1152, 128, 1024, 140.51, 129.86, 28.38, "2.18.1"),
    ("llama-3-70b", "bf16", 4, 256, 128, 128, 138.01, 130.37, 28.08, "2.18.1"),
    ("llama-2-7b", "bf16", 1, 8192, 128, 8064, 161.71, 13.32, 6.70, "2.18.0"),
    ("llama-2-7b", "bf16", 8, 8192, 128, 8064, 917.25, 66.40, 10.10, "2.18.0"),
    ("llama-2-13b", "bf16", 1, 8192, 4096, 4096, 60.43, 864.14, 9.84, "2.18.0"),
    ("llama-2-13b", "bf16", 1, 16384, 8192, 8192, 31.40, 2367.93, 13.41, "2.18.0"),
    ("llama-2-13b", "bf16", 8, 8192, 4096, 4096, 371.70, 6668.70, 19.86, "2.18.0"),
    ("llama-2-13b", "bf16", 4, 16384, 8192, 8192, 184.28, 4628.45, 21.09, "2.18.0"),
    ("llama-2-70b", "bf16", 1, 256, 128, 128, 39.29, 53.91, 25.18, "2.18.0"),
    ("llama-2-70b", "bf16", 1, 512, 256, 256, 39.18, 81.88, 25.27, "2.18.0"),
    ("llama-2-70b", "bf16", 1, 1152, 128, 1024, 39.16, 57.75, 25.45, "2.18.0"),
    ("llama-2-70b", "bf16", 1, 2048, 1024, 1024, 38.10, 232.48, 26.04, "2.18.0"),
    ("llama-2-70b", "bf16", 1, 3072, 1024, 2048, 37.71, 236.78, 26.62, "2.18.0"),
    ("llama-2-70b", "bf16", 1, 4096, 2048, 2048, 36.78, 690.96, 26.85, "2.18.0"),
    ("llama-2-70b", "bf16", 4, 256, 128, 128, 141.45, 156.85, 26.72, "2.18.0"),
    ("llama-2-70b", "bf16", 4, 512, 256, 256, 143.43, 270.16, 26.91, "2.18.0"),
    ("llama-2-70b", "bf16", 4, 1152, 128, 1024, 145.13, 156.69, 27.21, "2.18.0"),
    ("llama-2-70b", "bf16", 4, 2048, 1024, 1024, 133.25, 1478.64, 28.55, "2.18.0"),
    ("llama-2-70b", "bf16", 4, 3072, 1024, 2048, 129.28, 1478.85, 31.67, "2.18.0"),
    ("llama-2-70b", "bf16", 4, 4096, 2048, 2048, 120.63, 2722.03, 31.79, "2.18.0"),
    ("mistral-7b", "bf16", 1, 16384, 8192, 8192, 49.56, 1322.87, 9.89, "2.18.0"),
    ("mistral-7b", "bf16", 8, 16384, 8192, 8192, 484.58, 8614.85, 15.44, "2.18.0"),
    ("codellama-13b", "bf16", 1, 8192, 4096, 4096, 60.22, 868.64, 9.86, "2.18.0"),
    ("codellama-13b", "bf16", 1, 16384, 8192, 8192, 31.38, 2372.93, 13.40, "2.18.0"),
    ("codellama-13b", "bf16", 8, 8192, 4096, 4096, 370.98, 6625.16, 19.92, "2.18.0"),
    ("codellama-13b", "bf16", 4, 16384, 8192, 8192, 184.18, 4626.17, 21.10, "2.18.0"),
]
INFER_ROWS: tuple[InferRow, ...] = tuple(InferRow(*r) for r in _C)
INFER_TP = 32


# --- predictions --------------------------------------------------------------------------------


def predict_train(row: TrainRow, eff: Efficiency, model: ComputeModel | None = None) -> float:
    """Predicted sequences/s of a training row (``model``: ``model_for()`` if None)."""
    return train_estimate(row, eff, model).seq_per_s


def train_estimate(row: TrainRow, eff: Efficiency | None = None, model: ComputeModel | None = None):
    """The training estimate of a row (``eff`` None: its stack's stored profile)."""
    plan = ParallelPlan(
        tp=row.tp,
        pp=row.pp,
        dp=row.dp,
        zero=row.zero,
        recompute=row.recompute,
        ranks_per_chip=RANKS_PER_CHIP,
    )
    est = estimate_training(
        row.model,
        SYSTEM,
        plan,
        global_batch=row.global_batch,
        seq_len=row.seq_len,
        eff=eff,
        compute_model=model or model_for(),
        stack="nemo-neuron" if row.framework.startswith("NeMo") else "nxd-training",
    )
    return est


def predict_infer(
    row: InferRow, eff: Efficiency, model: ComputeModel | None = None
) -> tuple[float, float, float]:
    """Predicted (TTFT s, TPOT s, output tokens/s) of an inference row."""
    plan = ParallelPlan(
        tp=INFER_TP, ranks_per_chip=RANKS_PER_CHIP, pad_heads=True, zero=0, recompute="none"
    )
    est = estimate_inference(
        row.model,
        SYSTEM,
        plan,
        batch=row.batch,
        input_tokens=row.input_tokens,
        output_tokens=row.output_tokens,
        precision_name=row.weights,
        max_seq_len=row.seq,
        eff=eff,
        compute_model=model or model_for(),
    )
    return est.ttft_s, est.tpot_s, est.throughput_tokens_per_s


# --- fitting ------------------------------------------------------------------------------------

# Parameters each stack fits (others keep their defaults) and their bounds. The table model
# fits ``kernel_matmul`` (relative to the kernel tables) instead of ``matmul`` and
# ``half_rows`` (the tables hold the shape dependence).
TRAIN_FIT = {
    "matmul": (0.05, 1.0),
    "attention": (0.02, 1.0),
    "hbm": (0.05, 1.0),
    "tp_overlap": (0.0, 0.99),
}
SERVE_FIT = {
    "matmul": (0.01, 1.0),
    "attention": (0.05, 1.0),
    "hbm": (0.05, 1.0),
    "kv_hbm": (0.005, 1.0),
    "score_bytes": (0.0, 64.0),
    "half_rows": (1.0, 4096.0),
    "op_overhead_s": (0.0, 1e-3),
    "comm_overlap": (0.0, 0.99),
}


def _to_eff(base: Efficiency, names: Sequence[str], bounds: dict, x: np.ndarray) -> Efficiency:
    vals = {}
    for n, xi in zip(names, x, strict=True):
        lo, hi = bounds[n]
        vals[n] = lo + (hi - lo) / (1 + math.exp(-xi))  # logistic map keeps the bounds
    return replace(base, **vals)


def _from_eff(eff: Efficiency, names: Sequence[str], bounds: dict) -> np.ndarray:
    out = []
    for n in names:
        lo, hi = bounds[n]
        f = min(max((getattr(eff, n) - lo) / (hi - lo), 1e-4), 1 - 1e-4)
        out.append(math.log(f / (1 - f)))
    return np.array(out)


def fit_bounds(key: str, model: ComputeModel) -> dict[str, tuple[float, float]]:
    """The fitted parameters and bounds of stack ``key`` (train/serve) for ``model``."""
    bounds = dict(TRAIN_FIT if key == "train" else SERVE_FIT)
    if model.name == "table":
        lo_hi = bounds.pop("matmul")
        bounds.pop("half_rows", None)
        bounds = {"kernel_matmul": lo_hi, **bounds}
    return bounds


def _train_loss(eff: Efficiency, model: ComputeModel) -> float:
    return float(
        np.mean(
            [abs(math.log(predict_train(r, eff, model) / r.measured_seq_per_s)) for r in TRAIN_ROWS]
        )
    )


def _serve_loss(eff: Efficiency, model: ComputeModel) -> float:
    errs = []
    for r in INFER_ROWS:
        ttft, tpot, _ = predict_infer(r, eff, model)
        errs.append(abs(math.log(ttft / (r.ttft_ms * 1e-3))))
        errs.append(abs(math.log(tpot / (r.tpot_ms * 1e-3))))
    return float(np.mean(errs))


def fit(start: Profiles | None = None, iters: int = 300, model: str = "auto") -> Profiles:
    """Fit one training and one serving ``Efficiency`` (global; no per-row factors) for the
    compute model ``model`` (``model_for``), starting from its stored profiles."""
    cm = model_for(model)
    start = start or profiles_for(cm)
    out = {}
    for key, loss in (("train", _train_loss), ("serve", _serve_loss)):
        bounds = fit_bounds(key, cm)
        base: Efficiency = getattr(start, key)
        names = list(bounds)
        x = nelder_mead(
            lambda x, b=base, n=names, bd=bounds, lf=loss: lf(_to_eff(b, n, bd, x), cm),
            _from_eff(base, names, bounds),
            iters=iters,
        )
        out[key] = _to_eff(base, names, bounds, x)
    return Profiles(
        train=out["train"],
        serve=out["serve"],
        source=f"fitted to {CAL_SOURCE} B, B2 (train) and C (serve) with the {cm.name} model",
    )


# --- report -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RowError:
    table: str
    label: str
    metric: str
    measured: float
    predicted: float

    @property
    def error(self) -> float:
        """Signed relative error (predicted / measured - 1)."""
        return self.predicted / self.measured - 1


@dataclass(frozen=True, slots=True)
class Report:
    profiles: Profiles
    rows: tuple[RowError, ...]
    model: str = "table"

    def mape(self, table: str, metric: str | None = None) -> float:
        errs = [
            abs(r.error)
            for r in self.rows
            if r.table == table and (metric is None or r.metric == metric)
        ]
        return float(np.mean(errs)) if errs else float("nan")


def report(profiles: Profiles | None = None, model: str = "auto") -> Report:
    """Per-row errors of the training (B, B2) and inference (C) rows with ``profiles`` (the
    compute model's fitted ones if None)."""
    cm = model_for(model)
    profiles = profiles or profiles_for(cm)
    rows: list[RowError] = []
    for r in TRAIN_ROWS:
        rows.append(
            RowError(
                r.section,
                r.label,
                "seq/s",
                r.measured_seq_per_s,
                predict_train(r, profiles.train, cm),
            )
        )
    for r in INFER_ROWS:
        ttft, tpot, thr = predict_infer(r, profiles.serve, cm)
        rows.append(RowError("C", r.label, "TTFT ms", r.ttft_ms, ttft * 1e3))
        rows.append(RowError("C", r.label, "TPOT ms", r.tpot_ms, tpot * 1e3))
        rows.append(RowError("C-thr", r.label, "out tok/s", r.tokens_per_s, thr))
    return Report(profiles, tuple(rows), cm.name)
