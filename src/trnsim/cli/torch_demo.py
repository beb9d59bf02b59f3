"""``trnsim torch-demo``: the numerics study (``trnsim.torch.study``) with a progress bar.

A small GPT defined in trnsim, trained on generated text, once per numerics: FP32, and BF16,
MXFP8, MXFP4 each with round-to-nearest-even and stochastic rounding, every matmul computed as
the Trainium3 Tensor engine does. Prints the final losses and the per-layer SQNR against FP32,
and writes the loss curves as a PNG (``--png``, default ``trnsim-torch-demo.png``; ``--no-png``
writes nothing). ``--json``: the runs with their loss curves, in SI units. Needs the ``torch``
extra (``pip install "trnsim[torch]"``).
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console
from rich.table import Table

from trnsim.cli.argtypes import nonneg_int, positive_float, positive_int, rule_type
from trnsim.errors import UsageError
from trnsim.report.output import output_path, print_json
from trnsim.report.progress import progress
from trnsim.report.tables import fit

DEFAULT_PNG = "trnsim-torch-demo.png"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--steps",
        type=rule_type("study-steps", positive_int),
        default=200,
        help="training steps per run (default 200)",
    )
    parser.add_argument(
        "--batch", type=rule_type("gpt-batch", positive_int), default=8, help="sequences per step"
    )
    parser.add_argument(
        "--seq-len",
        type=rule_type("gpt-seq-len", positive_int),
        default=32,
        help="characters per sequence",
    )
    parser.add_argument(
        "--d-model", type=rule_type("gpt-width", positive_int), default=64, help="model width"
    )
    parser.add_argument(
        "--layers", type=rule_type("gpt-layers", positive_int), default=2, help="transformer blocks"
    )
    parser.add_argument(
        "--heads", type=rule_type("gpt-heads", positive_int), default=4, help="attention heads"
    )
    parser.add_argument(
        "--lr", type=rule_type("study-lr", positive_float), default=3e-3, help="AdamW learning rate"
    )
    parser.add_argument(
        "--seed",
        type=rule_type("study-seed", nonneg_int),
        default=0,
        help="seed of data and weights",
    )
    parser.add_argument(
        "--formats",
        default="fp32,bf16,mxfp8,mxfp4",
        help="comma-separated numerics (fp32, bf16, fp16, fp8, fp8_e5m2, mxfp8, mxfp4)",
    )
    parser.add_argument("--png", metavar="PATH", help=f"loss-curve PNG (default {DEFAULT_PNG})")
    parser.add_argument("--no-png", action="store_true", help="write no file")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def run(args: argparse.Namespace) -> int:
    if args.no_png and args.png:
        raise UsageError("--png and --no-png go against each other; give one")
    png = None if args.no_png else output_path(args.png or DEFAULT_PNG, "--png")
    from trnsim.torch import _door

    # the ops of a small model are tiny: one PyTorch thread (no wake-ups of a second one on a
    # shared machine; the same reasoning as trnsim.core.blas)
    _door.torch().set_num_threads(1)
    from trnsim.torch.models import GPTConfig
    from trnsim.torch.study import StudyConfig, run_study

    formats = tuple(f.strip().lower() for f in args.formats.split(",") if f.strip())
    cfg = StudyConfig(
        steps=args.steps,
        batch=args.batch,
        model=GPTConfig(
            d_model=args.d_model, n_layers=args.layers, n_heads=args.heads, seq_len=args.seq_len
        ),
        lr=args.lr,
        seed=args.seed,
        formats=formats,
    )
    total = args.steps * len(cfg.runs())
    with progress("training", total=total) as bar:

        def step(label: str, done: int) -> None:
            bar.update(description=f"training {label}")
            bar.advance()

        result = run_study(cfg, progress=step)
    written = None
    if png is not None:
        from trnsim.report.plots import loss_curves

        c = cfg.model
        title = f"small GPT ({c.n_layers} layers, d={c.d_model}), {cfg.steps} steps: Trn3 numerics"
        written = loss_curves({r.name: r.losses for r in result.runs}, png, title=title)
    if args.json:
        data = result.to_json()
        data["png"] = str(written) if written else None
        print_json(data)
        return 0
    _print(result, written)
    return 0


def _print(result: Any, png: Any) -> None:
    console = Console()
    c = result.config
    console.print(
        f"small GPT: {c.model.n_layers} layers, d_model {c.model.d_model}, {c.model.n_heads} "
        f"heads, {c.model.seq_len}-character context, batch {c.batch}, {c.steps} AdamW steps "
        f"on generated text ({result.wall_s:.0f} s)"
    )
    t = Table(title="final loss (held-out batches) and per-layer SQNR against FP32")
    t.add_column("numerics")
    t.add_column("final loss", justify="right")
    t.add_column("vs FP32", justify="right")
    t.add_column("SQNR min", justify="right")
    t.add_column("SQNR mean", justify="right")
    base = next((r.final_loss for r in result.runs if r.numerics == "fp32"), None)
    for r in result.runs:
        finite = [v for v in r.sqnr_db.values() if v != float("inf")]
        t.add_row(
            r.name,
            f"{r.final_loss:.4f}",
            f"{r.final_loss - base:+.4f}" if base is not None else "-",
            f"{min(finite):.1f} dB" if finite else "exact",
            f"{sum(finite) / len(finite):.1f} dB" if finite else "exact",
        )
    console.print(fit(t))
    lt = Table(title="SQNR against FP32 by layer (dB)")
    lt.add_column("layer")
    shown = [r for r in result.runs if r.numerics != "fp32"]
    for r in shown:
        lt.add_column(r.name, justify="right")
    for layer in result.layers:
        lt.add_row(layer, *(f"{r.sqnr_db[layer]:.1f}" for r in shown))
    console.print(fit(lt))
    if png is not None:
        console.print(f"loss curves: {png}")
