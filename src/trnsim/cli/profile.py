"""``trnsim profile kernel.py``: time an NKI kernel file on a NeuronCore generation.

The file follows the kernel-file convention of ``trnsim run`` (``trnsim.nki.kernelfile``):
``@nki.jit`` kernels, ``KERNEL = "name"`` for the default, ``make_inputs(rng)`` (or
``make_inputs_<kernel>(rng)`` / ``INPUTS``) for the arguments. ``--arg KEY=VALUE`` passes
keyword arguments to ``make_inputs`` (Python literals, e.g. ``--arg M=4096 --arg empty=true``).
The kernel runs in timing-only mode (no data) unless ``--functional``. Prints the profile
summary (``--json`` for the machine form) and writes a Perfetto trace JSON and a PNG timeline:
into ``--out-dir`` (default: the current directory) or to ``--trace``/``--png``. With
``--json`` nothing is written unless a path (``--trace``, ``--png``, ``--out-dir``) is given;
``--no-files`` writes nothing. Every output path is checked before the kernel runs.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from trnsim.cli.argtypes import nonneg_int, positive_float, positive_int
from trnsim.core.profile import Profile, fmt_bytes
from trnsim.core.timing import schedule
from trnsim.errors import UsageError
from trnsim.nki.kernelfile import (
    DEFAULT_MAX_INSTRUCTIONS,
    DEFAULT_TIMEOUT_S,
    MAX_TIMEOUT_S,
    MIN_TIMEOUT_S,
    budget,
    inputs_for,
    load,
    parse_args,
    pick_kernel,
    run_kernel,
)
from trnsim.report.output import distinct_outputs, output_path, print_json
from trnsim.report.progress import progress
from trnsim.report.tables import fit, prose

TARGETS = ["gen2", "gen3", "gen4", "trn1", "trn2", "trn3"]


def timeout_seconds(text: str) -> float:
    """``--timeout``: seconds in [MIN_TIMEOUT_S, MAX_TIMEOUT_S]."""
    value = positive_float(text)
    if not MIN_TIMEOUT_S <= value <= MAX_TIMEOUT_S:
        raise argparse.ArgumentTypeError(
            f"{text!r} is out of range (must be {MIN_TIMEOUT_S:g}..{MAX_TIMEOUT_S:g} seconds)"
        )
    return value


def add_kernel_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags ``run`` and ``profile`` share: inputs and bounds of a kernel run."""
    parser.add_argument("--kernel", metavar="NAME", help="which @nki.jit kernel of the file")
    parser.add_argument(
        "--seed", type=nonneg_int, default=0, help="seed passed to make_inputs(rng) (>= 0)"
    )
    parser.add_argument(
        "--arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="keyword argument for make_inputs (a Python literal, or true/false)",
    )
    parser.add_argument(
        "--max-instructions",
        type=positive_int,
        default=DEFAULT_MAX_INSTRUCTIONS,
        metavar="N",
        help=f"stop a kernel issuing more than N instructions per core "
        f"(default {DEFAULT_MAX_INSTRUCTIONS:,})",
    )
    parser.add_argument(
        "--timeout",
        type=timeout_seconds,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help=f"stop a kernel running longer than this (default {DEFAULT_TIMEOUT_S:g} s)",
    )


def heartbeat(verb: str, bar: Any) -> Callable[[str], None] | None:
    """Where a long kernel-file run's "still running" lines go (``trnsim.nki.watchdog``): the
    progress bar's text on a terminal; else plain lines on stderr, unless
    ``TRNSIM_PROGRESS=0``."""
    if hasattr(bar, "update") and type(bar).__name__ != "_Quiet":
        return lambda text: bar.update(description=text)
    if os.environ.get("TRNSIM_PROGRESS", "") == "0":
        return None

    def say(text: str) -> None:
        print(f"trnsim {verb}: {text}", file=sys.stderr, flush=True)

    return say


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="kernel file (the 'trnsim run' convention)")
    parser.add_argument(
        "--target", choices=TARGETS, default="gen4", help="NeuronCore generation (default gen4)"
    )
    add_kernel_arguments(parser)
    parser.add_argument(
        "--functional", action="store_true", help="also compute the data (default: timing-only)"
    )
    parser.add_argument(
        "--active-cores",
        type=positive_int,
        default=None,
        help="cores of the chip sharing HBM bandwidth, 1..the chip's cores (default: the kernel's)",
    )
    parser.add_argument("--trace", metavar="PATH", help="Perfetto trace JSON path")
    parser.add_argument("--png", metavar="PATH", help="PNG timeline path")
    parser.add_argument(
        "--out-dir", metavar="DIR", help="directory for the default-named trace and PNG"
    )
    parser.add_argument("--no-files", action="store_true", help="write no trace or PNG")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def check_active_cores(target: str, active_cores: int | None) -> None:
    """``--active-cores`` must be 1..the cores of the target's chip."""
    from trnsim.nki.benchmark import check_active_cores as check

    check(target, active_cores, f"--active-cores {active_cores}")


def profile_file(
    path: str,
    kernel: str | None = None,
    target: str = "gen4",
    seed: int = 0,
    kwargs: dict[str, Any] | None = None,
    functional: bool = False,
    active_cores: int | None = None,
    max_instructions: int | None = DEFAULT_MAX_INSTRUCTIONS,
    timeout: float | None = None,
    before_run: Callable[[str], Any] | None = None,
    on_beat: Callable[[str], None] | None = None,
    on_stuck: Callable[[BaseException], None] | None = None,
) -> tuple[str, Profile]:
    """Load a kernel file, run its kernel (timing-only unless ``functional``), time it.

    ``before_run(kernel_name)`` is called once the kernel is known, before it runs (the CLI
    checks its output paths there). ``timeout`` bounds every stage, scheduling included
    (``trnsim.nki.kernelfile.budget``); ``on_beat`` / ``on_stuck`` as in ``run_file``."""
    from trnsim.nki.simulate import resolve_target

    check_active_cores(target, active_cores)
    tgt = resolve_target(target)
    with budget(path, timeout, on_beat=on_beat, on_stuck=on_stuck) as stage:
        stage.stage = f"loading {Path(path).name}"
        mod = load(path)
        name, k = pick_kernel(mod, kernel)
        if before_run is not None:
            before_run(name)
        stage.stage = f"make_inputs for kernel {name!r}"
        args = inputs_for(mod, name, seed, kwargs or {})
        stage.stage = f"kernel {name!r}"
        with progress(f"running {name} ({'functional' if functional else 'timing-only'})"):
            res = run_kernel(
                mod,
                name,
                k,
                args,
                target=tgt,
                functional=functional,
                max_instructions=max_instructions,
                # timing-only: the record alone (no copy of the inputs into HBM, no
                # sentinel-filled outputs: 250 MB no one reads for the full-size tutorial)
                record_only=not functional,
                # a profile times the kernel; trnsim run checks what it wrote
                allow_unwritten=True,
            )
        stage.stage = f"scheduling {len(res.instructions):,} instructions"
        with progress(f"scheduling {len(res.instructions):,} instructions"):
            return name, schedule(res.instructions, tgt, active_cores=active_cores)


def planned_files(args: argparse.Namespace, kernel: str) -> dict[str, Path]:
    """The files this run writes ({"trace": path, "png": path}), each checked writable."""
    if args.no_files:
        given = [f for f, v in (("--trace", args.trace), ("--png", args.png)) if v is not None]
        if args.out_dir is not None:
            given.append("--out-dir")
        if given:
            raise UsageError(f"--no-files contradicts {', '.join(given)}: give one or the other")
        return {}
    if args.json and not (args.trace or args.png or args.out_dir):
        return {}
    for flag, given in (("--trace", args.trace), ("--png", args.png), ("--out-dir", args.out_dir)):
        if given is not None and not given.strip():
            raise UsageError(f"{flag}: empty path")
    if args.out_dir is not None:
        d = Path(args.out_dir)
        if not d.is_dir():
            raise UsageError(f"--out-dir: {args.out_dir!r} is not an existing directory")
    stem = f"{Path(args.file).stem}.{kernel}.{args.target}"
    base = Path(args.out_dir) if args.out_dir is not None else Path(".")
    out: dict[str, Path] = {}
    flags: dict[str, Path] = {}
    for kind, flag, suffix in (
        ("trace", "--trace", "trace.json"),
        ("png", "--png", "timeline.png"),
    ):
        given = getattr(args, kind)
        if args.json and not given and args.out_dir is None:
            continue  # --json with only the other path given: write just that one
        path = given or base / f"{stem}.{suffix}"
        shown = flag if given else f"--out-dir ({suffix})"
        out[kind] = output_path(path, flag if given else "--out-dir")
        flags[shown] = out[kind]
    distinct_outputs(flags, {"the kernel file": args.file})
    return out


def run(args: argparse.Namespace) -> int:
    kwargs = parse_args(args.arg)
    files: dict[str, Path] = {}

    def check_paths(kernel: str) -> None:
        files.update(planned_files(args, kernel))

    from trnsim.cli.main import hard_deadline, hard_stop

    with hard_deadline("profile", args.file, args.timeout):
        name, prof = profile_file(
            args.file,
            args.kernel,
            args.target,
            args.seed,
            kwargs,
            args.functional,
            args.active_cores,
            args.max_instructions,
            args.timeout,
            before_run=check_paths,
            on_beat=heartbeat("profile", None),  # plain lines (above the stage spinners)
            on_stuck=hard_stop("profile"),
        )
    written: dict[str, str] = {}
    if files:
        from trnsim.report.perfetto import write_trace
        from trnsim.report.timeline import write_timeline

        with progress("writing " + ", ".join(str(p) for p in files.values())):
            if "trace" in files:
                written["trace"] = str(write_trace(prof, files["trace"]))
            if "png" in files:
                written["png"] = str(write_timeline(prof, files["png"]))
    if args.json:
        print_json({"kernel": name, **prof.to_json(), "files": written})
    else:
        show(Console(), name, prof)
        for kind, p in written.items():
            Console().print(f"{kind}: {p}")
    return 0


def show(console: Console, kernel: str, p: Profile) -> None:
    """The human summary: totals, engines, critical path."""
    console.print(f"[bold]{kernel}[/bold] on {p.target}: [bold]{p.total_s * 1e3:.4g} ms[/bold]")
    console.print(
        prose(
            f"launch {p.launch_s * 1e6:.0f} us included, {p.instructions:,} instructions; "
            f"{p.flops_per_s / 1e12:.3g} TFLOP/s = MFU {p.mfu:.1%} of "
            f"{p.peak_flops / 1e12:.3g} TFLOP/s ({p.peak_dtype}); MBU {p.mbu:.1%} of "
            f"{p.dma_bw / 1e9:.0f} GB/s DMA"
        )
    )
    np_ = p.neuron_profile()
    console.print(
        prose(
            f"HBM read {fmt_bytes(p.hbm_read_bytes)}, written {fmt_bytes(p.hbm_write_bytes)}; "
            f"spill save {fmt_bytes(p.spill_save_bytes)}, "
            f"reload {fmt_bytes(p.spill_reload_bytes)}; "
            f"hardware FLOPs {p.hardware_flops:.3e} (transposes {p.transpose_flops:.3e}); "
            f"DMA active {np_['dma_active_time_percent']:.1%}"
        )
    )
    t = Table(title="engines", title_justify="left")
    for col in ("engine", "busy", "utilisation", "instructions"):
        t.add_column(col, justify="left" if col == "engine" else "right")
    for e in p.engines:
        t.add_row(
            e.name, f"{e.busy_s * 1e6:,.1f} us", f"{e.utilisation:.1%}", f"{e.instructions:,}"
        )
    console.print(fit(t))
    c = Table(title="critical path: main contributors", title_justify="left")
    for col in ("share", "time", "opcode", "engine", "count", "source"):
        c.add_column(col, justify="right" if col in ("share", "time", "count") else "left")
    for x in p.critical_path:
        c.add_row(
            f"{x.fraction:.1%}",
            f"{x.seconds * 1e6:,.1f} us",
            x.opcode,
            x.track,
            f"{x.count:,}",
            x.location,
        )
    console.print(fit(c))
    console.print(prose("model assumptions: " + "; ".join(p.assumptions), style="dim"))
