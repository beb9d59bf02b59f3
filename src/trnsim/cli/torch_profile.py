"""``trnsim torch-profile``: a PyTorch training step on Trainium3, layer by layer.

``--mode eager`` (default) and ``compiled`` run one forward and backward pass of the small GPT
of ``trnsim.torch.models`` under ``trnsim.torch.trn3`` or ``torch.compile`` with trnsim's
backend, with ``--numerics``; ``--mode shapes`` times one training step of ``--model`` (a preset
such as ``llama-3-8b``, a Hugging Face ``config.json``, or ``gpt``) under FakeTensorMode with
``--tp``/``--dp``/``--zero`` on ``--system`` (``trnsim.torch.profile_step``). Prints the
per-module table (time, FLOPs, HBM bytes, MFU), the ops with no Trainium mapping, and writes a
Perfetto trace with module, ATen-op, kernel and engine-instruction tracks (``--trace``, default
``trnsim-torch.trace.json``; ``--no-files`` writes nothing). ``--json``: strict JSON, SI units.
Needs the ``torch`` extra.
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console
from rich.table import Table

from trnsim import inputs
from trnsim.cli.argtypes import nonneg_int, positive_int, rule_type
from trnsim.errors import UsageError
from trnsim.report.output import output_path, print_json
from trnsim.report.progress import progress
from trnsim.report.tables import fit
from trnsim.report.units import pretty

DEFAULT_TRACE = "trnsim-torch.trace.json"


def fmt_seconds(s: float) -> str:
    return pretty(s, "s", 3)


def fmt_bytes(b: float) -> str:
    return pretty(b, "B", 3)


def fmt_count(n: float) -> str:
    return pretty(n, "", 3) if n < 1e3 else pretty(n, "FLOP", 3)


MODES = ("eager", "compiled", "shapes")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mode", choices=MODES, default="eager", help="how the step runs")
    parser.add_argument(
        "--model",
        default="gpt",
        help="gpt (the small GPT), a preset (llama-3-8b, ...) or a config.json (shapes mode)",
    )
    parser.add_argument("--numerics", default="bf16", help="eager/compiled numerics policy")
    parser.add_argument("--rounding", choices=("rne", "stochastic"), default="rne")
    parser.add_argument(
        "--batch", type=rule_type("gpt-batch", positive_int), default=8, help="sequences (gpt)"
    )
    parser.add_argument(
        "--seq-len",
        type=rule_type("seq-len", positive_int),
        default=None,
        help="tokens per sequence",
    )
    parser.add_argument(
        "--d-model", type=rule_type("gpt-width", positive_int), default=64, help="gpt width"
    )
    parser.add_argument(
        "--layers", type=rule_type("gpt-layers", positive_int), default=2, help="gpt blocks"
    )
    parser.add_argument("--system", default="trn3-gen2-ultraserver", help="system (shapes mode)")
    parser.add_argument(
        "--tp", type=rule_type("tp", positive_int), default=1, help="tensor parallel degree"
    )
    parser.add_argument(
        "--dp", type=rule_type("dp", positive_int), default=1, help="data parallel degree"
    )
    parser.add_argument("--zero", type=int, choices=(0, 1, 2, 3), default=1, help="3: FSDP2")
    parser.add_argument(
        "--micro-batch", type=rule_type("micro-batch", positive_int), default=1, help="shapes mode"
    )
    parser.add_argument(
        "--global-batch",
        type=rule_type("global-batch", positive_int),
        default=None,
        help="shapes mode",
    )
    parser.add_argument("--no-sp", action="store_true", help="no sequence parallelism (tp > 1)")
    parser.add_argument("--depth", type=nonneg_int, default=4, help="module name depth (0: all)")
    parser.add_argument("--trace", metavar="PATH", help=f"Perfetto trace (default {DEFAULT_TRACE})")
    parser.add_argument("--no-files", action="store_true", help="write no file")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def run(args: argparse.Namespace) -> int:
    if args.no_files and args.trace:
        raise UsageError("--trace and --no-files go against each other; give one")
    if args.mode != "shapes" and args.model != "gpt":
        raise UsageError(
            f"--mode {args.mode} runs the small GPT with data; time --model {args.model} "
            "with --mode shapes"
        )
    if args.mode != "shapes" and (args.tp > 1 or args.dp > 1):
        raise UsageError("--tp and --dp apply to --mode shapes (a fake process group)")
    want_trace = not args.no_files and not (args.json and not args.trace)
    trace = output_path(args.trace or DEFAULT_TRACE, "--trace") if want_trace else None
    from trnsim.torch import _door

    # the ops of a small model are tiny: one PyTorch thread (no wake-ups of a second one on a
    # shared machine; the same reasoning as trnsim.core.blas)
    _door.torch().set_num_threads(1)
    with progress(f"profiling ({args.mode})"):
        prof, step = _profile(args)
    depth = args.depth or None
    written = None
    if trace is not None:
        from trnsim.report.perfetto import write_layered_trace

        written = write_layered_trace(prof, trace)
    if args.json:
        data = prof.to_json(depth)
        if step is not None:
            data["step"] = step.as_dict()
        data["trace"] = str(written) if written else None
        print_json(data)
        return 0
    _print(prof, step, depth, written)
    return 0


def _gpt(args: argparse.Namespace) -> Any:
    from trnsim.torch.models import GPT, GPTConfig

    heads = 4 if args.d_model % 4 == 0 else 1
    cfg = GPTConfig(
        d_model=args.d_model, n_layers=args.layers, n_heads=heads, seq_len=args.seq_len or 32
    )
    # the sequences of one step are real tensors: --batch (eager, compiled) or one
    # --micro-batch (shapes mode's small GPT)
    batch = args.micro_batch if args.mode == "shapes" else args.batch
    inputs.check_gpt_size(cfg.d_model, cfg.n_layers, cfg.seq_len, batch)
    return GPT(cfg), cfg


def _profile(args: argparse.Namespace) -> tuple[Any, Any]:
    import trnsim.torch as tt
    from trnsim.torch import _door
    from trnsim.torch.models import batches, corpus, encode

    torch = _door.torch()
    if args.mode == "shapes":
        from trnsim.perf import ParallelPlan

        plan = ParallelPlan(
            tp=args.tp,
            dp=args.dp,
            zero=args.zero,
            micro_batch=args.micro_batch,
            sequence_parallel=not args.no_sp,
        )
        if args.model == "gpt":
            model, cfg = _gpt(args)
            idx = torch.randint(0, cfg.vocab, (args.micro_batch, cfg.seq_len))
            step = tt.profile_step(
                model,
                (idx, idx),
                system=args.system,
                parallel=plan,
                seq_len=cfg.seq_len,
                global_batch=args.global_batch,
            )
        else:
            step = tt.profile_step(
                args.model,
                system=args.system,
                parallel=plan,
                seq_len=args.seq_len or 4096,
                global_batch=args.global_batch,
            )
        return step.profile, step
    model, cfg = _gpt(args)
    x, y = next(batches(encode(corpus(20_000)), args.batch, cfg.seq_len))
    if args.mode == "eager":
        with tt.trn3(args.numerics, rounding=args.rounding, timing=True) as run:
            model(x, y).backward()
        return run.profile(), None
    be = tt.backend(args.numerics, rounding=args.rounding, timing=True)
    torch.compile(model, backend=be)(x, y).backward()
    return be.profile(), None


def _print(prof: Any, step: Any, depth: int | None, trace: Any) -> None:
    console = Console()
    if step is not None:
        console.print(
            f"{step.model} on {step.chips} chips of {step.system}: step "
            f"{fmt_seconds(step.step_time_s)}, {step.tokens_per_s:,.0f} tokens/s, MFU "
            f"{step.mfu:.1%} ({step.micro_batches} micro-batches; captured in "
            f"{step.wall_s:.1f} s)"
        )
        parts = ", ".join(f"{k} {fmt_seconds(v)}" for k, v in step.breakdown.items() if v)
        console.print(f"  breakdown: {parts}")
    total = prof.total_s
    console.print(
        f"{prof.device}: {fmt_seconds(total)} for {len(prof.records):,} ATen ops, "
        f"{fmt_count(prof.flops)}, MFU "
        f"{prof.flops / (total * prof.peak_flops) if total else 0:.1%}"
    )
    t = Table(title="per module")
    for col in ("module", "ops", "time", "share", "FLOPs", "HBM bytes", "MFU"):
        t.add_column(col, justify="left" if col == "module" else "right")
    for m in prof.modules(depth):
        t.add_row(
            m.module,
            f"{m.ops:,}",
            fmt_seconds(m.seconds),
            f"{m.seconds / total:.1%}" if total else "-",
            fmt_count(m.flops),
            fmt_bytes(m.bytes),
            f"{m.mfu:.1%}",
        )
    console.print(fit(t))
    fb = prof.fallbacks
    if fb:
        console.print(f"ops with no Trainium mapping (run in PyTorch, untimed): {len(fb)}")
        for k, n in sorted(fb.items()):
            console.print(f"  {k} x{n}")
    else:
        console.print("every op mapped to Trainium (no fallbacks)")
    for a in prof.assumptions:
        console.print(f"  assumes {a}")
    if trace is not None:
        console.print(f"trace: {trace} (open in ui.perfetto.dev)")
