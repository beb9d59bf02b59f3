"""``trnsim profile kernel.py``: time an NKI kernel file on a NeuronCore generation.

The file follows the kernel-file convention of ``trnsim run`` (``trnsim.nki.kernelfile``):
``@nki.jit`` kernels, ``KERNEL = "name"`` for the default, ``make_inputs(rng)`` (or
``make_inputs_<kernel>(rng)`` / ``INPUTS``) for the arguments. ``--arg KEY=VALUE`` passes
keyword arguments to ``make_inputs`` (e.g. ``--arg M=4096 --arg empty=1``). The kernel runs in
timing-only mode (no data) unless ``--functional``. Prints the profile summary (``--json`` for
the machine form) and writes a Perfetto trace JSON and a PNG timeline (``--no-files`` skips).
"""

from __future__ import annotations

import argparse
import inspect
import json
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from trnsim.core.profile import Profile
from trnsim.core.timing import schedule
from trnsim.errors import ConfigError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="kernel file (the 'trnsim run' convention)")
    parser.add_argument(
        "--target",
        choices=["gen2", "gen3", "gen4", "trn1", "trn2", "trn3"],
        default="gen4",
        help="NeuronCore generation (default gen4)",
    )
    parser.add_argument("--kernel", metavar="NAME", help="which @nki.jit kernel of the file")
    parser.add_argument("--seed", type=int, default=0, help="seed passed to make_inputs(rng)")
    parser.add_argument(
        "--arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="keyword argument for make_inputs (int/float/bool)",
    )
    parser.add_argument(
        "--functional", action="store_true", help="also compute the data (default: timing-only)"
    )
    parser.add_argument(
        "--active-cores",
        type=int,
        default=None,
        help="cores of the chip sharing HBM bandwidth (default: the kernel's)",
    )
    parser.add_argument("--trace", metavar="PATH", help="Perfetto trace JSON path")
    parser.add_argument("--png", metavar="PATH", help="PNG timeline path")
    parser.add_argument("--no-files", action="store_true", help="write no trace or PNG")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def _value(text: str) -> Any:
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    return text


def _kwargs(pairs: list[str]) -> dict[str, Any]:
    out = {}
    for pair in pairs:
        if "=" not in pair:
            raise ConfigError(f"--arg {pair!r}: expected KEY=VALUE")
        k, v = pair.split("=", 1)
        out[k.strip()] = _value(v.strip())
    return out


def inputs_for(mod: Any, kernel: str, seed: int, kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """The kernel's arguments under the kernel-file convention (make_inputs / INPUTS)."""
    fn = getattr(mod, f"make_inputs_{kernel}", None) or getattr(mod, "make_inputs", None)
    if fn is not None:
        params = inspect.signature(fn).parameters
        unknown = set(kwargs) - set(params)
        if unknown:
            raise ConfigError(
                f"make_inputs has no parameter {', '.join(sorted(unknown))}; "
                f"parameters: {', '.join(params)}"
            )
        args = fn(np.random.default_rng(seed), **kwargs)
    elif hasattr(mod, "INPUTS"):
        args = mod.INPUTS
    else:
        raise ConfigError(f"no inputs for kernel {kernel!r}: define make_inputs(rng) or INPUTS")
    return tuple(args) if isinstance(args, tuple | list) else (args,)


def profile_file(
    path: str,
    kernel: str | None = None,
    target: str = "gen4",
    seed: int = 0,
    kwargs: dict[str, Any] | None = None,
    functional: bool = False,
    active_cores: int | None = None,
) -> tuple[str, Profile]:
    """Load a kernel file, run its kernel (timing-only unless ``functional``), time it."""
    from trnsim.nki.kernelfile import load_module, pick_kernel
    from trnsim.nki.simulate import record_run, resolve_target
    from trnsim.nki.simulate import run as run_kernel

    mod = load_module(path)
    name, k = pick_kernel(mod, kernel)
    args = inputs_for(mod, name, seed, kwargs or {})
    tgt = resolve_target(target)
    # timing-only: the record alone (no copy of the inputs into HBM, no sentinel-filled
    # outputs: for the full-size tutorial matmul that is 250 MB no one reads)
    res = run_kernel(k, *args, target=tgt) if functional else record_run(k, *args, target=tgt)
    return name, schedule(res.instructions, tgt, active_cores=active_cores)


def run(args: argparse.Namespace) -> int:
    name, prof = profile_file(
        args.file,
        args.kernel,
        args.target,
        args.seed,
        _kwargs(args.arg),
        args.functional,
        args.active_cores,
    )
    files: dict[str, str] = {}
    if not args.no_files:
        from trnsim.report.perfetto import write_trace
        from trnsim.report.timeline import write_timeline

        stem = f"{Path(args.file).stem}.{name}.{args.target}"
        files["trace"] = str(write_trace(prof, args.trace or f"{stem}.trace.json"))
        files["png"] = str(write_timeline(prof, args.png or f"{stem}.timeline.png"))
    if args.json:
        print(json.dumps({"kernel": name, **prof.to_json(), "files": files}, indent=2))
    else:
        show(Console(), name, prof)
        for kind, p in files.items():
            Console().print(f"{kind}: {p}")
    return 0


def show(console: Console, kernel: str, p: Profile) -> None:
    """The human summary: totals, engines, critical path."""
    console.print(
        f"[bold]{kernel}[/bold] on {p.target}: [bold]{p.total_s * 1e3:.4g} ms[/bold], "
        f"{p.instructions:,} instructions; {p.flops_per_s / 1e12:.3g} TFLOP/s = MFU "
        f"{p.mfu:.1%} of {p.peak_flops / 1e12:.3g} ({p.peak_dtype}); MBU {p.mbu:.1%} of "
        f"{p.hbm_bw / 1e9:.0f} GB/s"
    )
    t = Table(title="engines", title_justify="left")
    for col in ("engine", "busy", "utilisation", "instructions"):
        t.add_column(col, justify="left" if col == "engine" else "right")
    for e in p.engines:
        t.add_row(
            e.name, f"{e.busy_s * 1e6:,.1f} us", f"{e.utilisation:.1%}", f"{e.instructions:,}"
        )
    console.print(t)
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
    console.print(c)
    console.print("[dim]model assumptions: " + "; ".join(p.assumptions) + "[/dim]")
