"""The numerics study: does a small GPT train in Trn3's BF16, MXFP8 and MXFP4?

One small GPT (``trnsim.torch.models.GPT``, the same initial weights every run) is trained on a
generated corpus (``models.corpus``: nothing downloaded) for ``steps`` steps of AdamW, once per
numerics: FP32 (the Tensor engine's fp32 matmul), and BF16, MXFP8, MXFP4 each with
round-to-nearest-even and with stochastic rounding (``trnsim.torch.trn3``: every matmul of the
forward and backward pass computed as the Tensor engine does, operands in that format,
accumulation in fp32 PSUM). The optimizer (fp32 master weights) runs outside the mode.

Reported per run: the training-loss curve, the final loss (mean over held-out batches of a
corpus drawn with another seed, evaluated in the run's own numerics with RNE) and, per linear
layer, the SQNR against FP32: the layer's output on a held-out batch with the FP32-trained
weights computed in the run's numerics, against the same output in FP32 numerics (errors
accumulate through the network, as they do in training), ``10 log10(sum ref^2 / sum (ref -
x)^2)`` dB.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trnsim import inputs
from trnsim.errors import ConfigError
from trnsim.torch import _door
from trnsim.torch.mode import trn3
from trnsim.torch.models import GPT, GPTConfig, batches, corpus, encode
from trnsim.torch.numerics import NUMERICS

torch = _door.torch()

FORMATS = ("fp32", "bf16", "mxfp8", "mxfp4")


@dataclass(frozen=True, slots=True)
class StudyConfig:
    """Sizes of the study; the defaults take a few minutes on two cores."""

    steps: int = 300
    batch: int = 8
    model: GPTConfig = field(default_factory=lambda: GPTConfig(d_model=64, n_layers=2))
    lr: float = 3e-3
    seed: int = 0
    formats: tuple[str, ...] = FORMATS
    eval_batches: int = 4

    def __post_init__(self) -> None:
        object.__setattr__(self, "steps", inputs.check("study-steps", self.steps))
        object.__setattr__(self, "batch", inputs.check("gpt-batch", self.batch))
        object.__setattr__(self, "seed", inputs.check("study-seed", self.seed))
        if self.eval_batches < 1:
            raise ConfigError(f"study eval_batches must be >= 1, got {self.eval_batches}")
        m = self.model
        inputs.check_gpt_size(m.d_model, m.n_layers, m.seq_len, self.batch)
        object.__setattr__(self, "lr", inputs.check("study-lr", self.lr))
        bad = [f for f in self.formats if f not in NUMERICS or f == "native"]
        if bad or not self.formats:
            raise ConfigError(
                f"study formats {bad or '(none)'}: valid "
                f"{', '.join(n for n in NUMERICS if n != 'native')}"
            )

    def runs(self) -> list[tuple[str, str]]:
        """(numerics, rounding) of every run: FP32 once, the others RNE and SR."""
        out = []
        for f in self.formats:
            out.append((f, "rne"))
            if f != "fp32":
                out.append((f, "stochastic"))
        return out


@dataclass(slots=True)
class Run:
    numerics: str
    rounding: str
    losses: list[float]
    final_loss: float
    sqnr_db: dict[str, float]
    seconds: float

    @property
    def name(self) -> str:
        return self.numerics.upper() + (" SR" if self.rounding == "stochastic" else "")


@dataclass(slots=True)
class StudyResult:
    config: StudyConfig
    runs: list[Run]
    layers: list[str]
    wall_s: float

    def to_json(self) -> dict[str, Any]:
        c = self.config
        return {
            "config": {
                "steps": c.steps,
                "batch": c.batch,
                "seq_len": c.model.seq_len,
                "d_model": c.model.d_model,
                "n_layers": c.model.n_layers,
                "n_heads": c.model.n_heads,
                "vocab": c.model.vocab,
                "lr": c.lr,
                "seed": c.seed,
            },
            "runs": [
                {
                    "name": r.name,
                    "numerics": r.numerics,
                    "rounding": r.rounding,
                    "final_loss": r.final_loss,
                    "losses": r.losses,
                    "sqnr_db": {k: _finite(v) for k, v in r.sqnr_db.items()},
                    "seconds": r.seconds,
                }
                for r in self.runs
            ],
            "wall_s": self.wall_s,
        }


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None  # SQNR of FP32 against itself: infinite


Progress = Callable[[str, int], None]


def run_study(cfg: StudyConfig | None = None, progress: Progress | None = None) -> StudyResult:
    """Train every run of ``cfg`` (module docstring); ``progress(label, steps_done)`` is called
    after every step."""
    cfg = cfg or StudyConfig()
    t0 = time.perf_counter()
    train = encode(corpus(max(20_000, cfg.batch * cfg.model.seq_len * 8), seed=cfg.seed))
    held = encode(corpus(20_000, seed=cfg.seed + 1))
    evals = list(
        _take(batches(held, cfg.batch, cfg.model.seq_len, seed=cfg.seed + 1), cfg.eval_batches)
    )
    runs: list[Run] = []
    models: dict[tuple[str, str], Any] = {}
    for num, rnd in cfg.runs():
        t1 = time.perf_counter()
        model = GPT(cfg.model, seed=cfg.seed)
        opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
        stream = batches(train, cfg.batch, cfg.model.seq_len, seed=cfg.seed)
        losses = []
        label = num.upper() + (" SR" if rnd == "stochastic" else "")
        for step in range(cfg.steps):
            x, y = next(stream)
            with trn3(num, rounding=rnd, seed=cfg.seed * 1_000_003 + step):
                loss = model(x, y)
                loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            losses.append(float(loss.detach()))
            if not math.isfinite(losses[-1]):
                raise ConfigError(f"{label}: the loss is {losses[-1]} at step {step}")
            if progress is not None:
                progress(label, step + 1)
        with torch.no_grad(), trn3(num):
            final = sum(float(model(x, y)) for x, y in evals) / len(evals)
        models[(num, rnd)] = model
        runs.append(Run(num, rnd, losses, final, {}, time.perf_counter() - t1))
    reference = models.get(("fp32", "rne")) or GPT(cfg.model, seed=cfg.seed)
    layers = [n for n, m in reference.named_modules() if isinstance(m, torch.nn.Linear)]
    ref_out = _layer_outputs(reference, evals[0][0], "fp32", "rne", cfg.seed)
    for r in runs:
        got = _layer_outputs(reference, evals[0][0], r.numerics, r.rounding, cfg.seed)
        r.sqnr_db = {n: sqnr_db(ref_out[n], got[n]) for n in layers}
    return StudyResult(cfg, runs, layers, time.perf_counter() - t0)


def _take(it: Any, n: int) -> Any:
    for _ in range(n):
        yield next(it)


def _layer_outputs(model: Any, x: Any, num: str, rnd: str, seed: int) -> dict[str, Any]:
    outs: dict[str, Any] = {}
    hooks = [
        m.register_forward_hook(lambda mod, i, o, n=n: outs.__setitem__(n, o.detach().clone()))
        for n, m in model.named_modules()
        if isinstance(m, torch.nn.Linear)
    ]
    try:
        with torch.no_grad(), trn3(num, rounding=rnd, seed=seed):
            model(x)
    finally:
        for h in hooks:
            h.remove()
    return outs


def sqnr_db(ref: Any, x: Any) -> float:
    """``10 log10(sum ref^2 / sum (ref - x)^2)`` in dB (infinite when equal)."""
    r = ref.double()
    noise = float(((r - x.double()) ** 2).sum())
    signal = float((r**2).sum())
    if noise == 0:
        return math.inf
    return 10 * math.log10(signal / noise) if signal > 0 else -math.inf
