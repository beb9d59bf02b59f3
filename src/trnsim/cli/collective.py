"""``trnsim collective``: time a collective on a system (closed form or flow simulation).

    trnsim collective --op all-reduce --system trn3-gen2 --ranks 144 --size 1GiB [--algo ring]
    trnsim collective --op all-to-all --system trn2-ultraserver --sweep --plot a2a.png
    trnsim collective --op all-reduce --size 64MiB --evaluator flow --json
    trnsim collective --system p5.48xlarge --op all-reduce --size 256MiB   # NCCL (ring/tree/NVLS)

Each system's collectives run on its vendor's stack (``--stack`` overrides): ``neuron`` (Neuron
runtime), ``nccl`` (GPUs) or ``tpu-ici`` (TPUs); the output names the stack and its algorithms.

Bandwidths follow nccl-tests: algbw = size / time, busbw = algbw x (2(n-1)/n for all-reduce,
(n-1)/n for all-gather / reduce-scatter / all-to-all, 1 for broadcast and permute). Tables show
decimal GB/s; ``--json`` prints SI units (seconds, bytes, bytes/s).
"""

from __future__ import annotations

import argparse
import dataclasses
import re

from rich.console import Console
from rich.table import Table

from trnsim import inputs
from trnsim.cli.argtypes import positive_int
from trnsim.errors import ConfigError, UsageError
from trnsim.fabric import OPS, CollectiveResult, collective_time
from trnsim.fabric.collectives import (
    ALGOS,
    NCCL_ALGOS,
    canonical_op,
    flow_overheads,
    resolve_system,
)
from trnsim.fabric.stacks import STACKS, canonical_stack, stack_for
from trnsim.report.output import output_path, print_json
from trnsim.report.progress import progress
from trnsim.report.tables import fit

UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
    "k": 2**10,
    "m": 2**20,
    "g": 2**30,
}
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([a-z]*)\s*$", re.IGNORECASE)
#: Largest accepted per-rank size: 1 TiB (far above any chip's HBM; a bound on nonsense).
MAX_SIZE = 2**40
#: Ops whose buffer is split into one chunk per rank: the size must give each chunk a byte.
SPLIT_OPS = ("all-gather", "reduce-scatter", "all-to-all")
SIZE_RULE = "a whole number of bytes from 1 B to 1 TiB"


def parse_size(text: str) -> float:
    """'1GiB' -> 2**30, '64KiB' -> 65536, '1e6' -> 1e6, '2 GB' -> 2e9 (bytes)."""
    match = _SIZE.match(str(text))
    unit = match.group(2).lower() if match else None
    if not match or unit not in UNITS:
        valid = "KiB, MiB, GiB, TiB (powers of 2), KB, MB, GB, TB (powers of 10), or plain bytes"
        raise ConfigError(f"cannot read size {text!r}; write a number with a unit: {valid}")
    return float(match.group(1)) * UNITS[unit]


def size_arg(text: str) -> float:
    """argparse type for sizes: :func:`parse_size`, then the rule :data:`SIZE_RULE`."""
    if str(text).strip().startswith("-"):
        raise argparse.ArgumentTypeError(f"size {text!r} is negative; it must be {SIZE_RULE}")
    try:
        value = parse_size(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not 1 <= value <= MAX_SIZE or value != int(value):
        raise argparse.ArgumentTypeError(f"size {text!r} ({value:g} B) must be {SIZE_RULE}")
    return value


def ranks_arg(text: str) -> int:
    """argparse type for ``--ranks``: a whole number >= 2 (a collective joins two or more)."""
    value = positive_int(text)
    if value < 2:
        raise argparse.ArgumentTypeError(f"{text!r}: a collective needs at least 2 ranks")
    why = inputs.problem("ranks", value)
    if why is not None:
        raise argparse.ArgumentTypeError(f"{text!r}: {why}")
    return value


def human_bytes(n: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n:g} B"


DEFAULT_SIZE, SWEEP_MIN, SWEEP_MAX, SWEEP_FACTOR = 2**30, 2**10, 2**30, 4
SWEEP_ONLY = ("min_size", "max_size", "factor", "plot")  # flags that mean nothing without --sweep


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # "-5MiB" is a value (to be refused by its type), not an unknown flag
    parser._negative_number_matcher = re.compile(r"^-\d|^-\.\d")
    ops = ", ".join(OPS)
    parser.add_argument("--op", default="all-reduce", help=f"collective ({ops}; aliases ok)")
    parser.add_argument("--system", default="trn3-gen2", help="system preset (trnsim specs)")
    parser.add_argument(
        "--ranks", type=ranks_arg, help="chips taking part, >= 2 (default: the system's)"
    )
    parser.add_argument(
        "--size", type=size_arg, help=f"nccl-tests size per rank, {SIZE_RULE} (default 1GiB)"
    )
    parser.add_argument(
        "--algo",
        help=f"force an algorithm (Neuron / TPU: {', '.join(ALGOS)}, mesh, kangaring; NCCL: "
        f"{', '.join(NCCL_ALGOS)}) or 'best'",
    )
    parser.add_argument(
        "--stack",
        choices=tuple(STACKS),
        help="collective library (default: the system's vendor's: neuron, nccl or tpu-ici)",
    )
    parser.add_argument("--placement", default="packed", choices=("packed", "spread"))
    parser.add_argument("--evaluator", default="closed", choices=("closed", "flow"))
    parser.add_argument("--sweep", action="store_true", help="1 KiB .. 1 GiB table and plot")
    parser.add_argument("--min-size", type=size_arg, help="sweep start (default 1KiB)")
    parser.add_argument("--max-size", type=size_arg, help="sweep end (default 1GiB)")
    parser.add_argument(
        "--factor", type=positive_int, choices=(2, 4), help="sweep step factor (default 4)"
    )
    parser.add_argument(
        "--plot",
        help="PNG path for --sweep (default collective_sweep.png, none with --json; '' to skip)",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output, SI units")


def evaluate(args: argparse.Namespace, size: float, ranks: int) -> CollectiveResult:
    if args.evaluator == "flow":
        from trnsim.fabric.flowsim import simulate

        ov = flow_overheads(args.system, args.stack)
        res = simulate(args.op, size, ranks, args.system, args.algo, args.placement, overheads=ov)
        stack = canonical_stack(args.stack, resolve_system(args.system)).name
        return dataclasses.replace(res, stack=f"{stack}-flow" if stack != "neuron" else stack)
    return collective_time(
        args.op, size, ranks, args.system, args.algo, args.placement, stack=args.stack
    )


def _stack_line(r: CollectiveResult) -> str:
    if r.stack.endswith("-flow"):
        return (
            f"stack {r.stack}: the flow simulator runs the Neuron-family algorithms with the "
            f"{r.stack[:-5]} stack's constants (trnsim.fabric.collectives.flow_overheads)"
        )
    if r.stack not in STACKS:
        return f"stack {r.stack}: the Neuron-family algorithms with caller-given constants"
    stk = STACKS[r.stack]
    proto = f", protocol {r.protocol}" if r.protocol else ""
    return f"stack {stk.name} ({stk.library}{proto}): {stk.algorithms}; constants: {stk.constants}"


def check_size(op: str, size: float, ranks: int, flag: str = "--size") -> None:
    """Ops that split the buffer into one chunk per rank need at least one byte per chunk."""
    if op in SPLIT_OPS and size < ranks:
        raise UsageError(
            f"{flag} {size:g} B is too small for {op} on {ranks} ranks: the buffer splits into "
            f"one chunk per rank, so it must be at least {ranks} B"
        )


def _scale_out_note(spec, ranks: int) -> str | None:
    """Ranks beyond the system's chips join copies of it (said, not silent) over the innermost
    fabric level whose domain holds them all: the scale-out network for a node or a rack, but
    the rack's NVLink domain for a GB200 compute tray (4 GPUs of a 72-GPU NVLink domain);
    without such a level the closed form refuses with the rule."""
    if ranks <= spec.chips:
        return None
    joining = next((lvl for lvl in spec.levels if lvl.span >= ranks), None)
    if joining is None:
        return None
    copies = -(-ranks // spec.chips)
    what = "scale-out level" if joining.kind == "fat-tree" else f"{joining.kind} level"
    return (
        f"note: {ranks} ranks exceed the {spec.chips} chips of {spec.name}: the group spans "
        f"{copies} of them joined over its {what} {joining.name!r} ({joining.span} chips)"
    )


def run(args: argparse.Namespace) -> int:
    console = Console()
    err = Console(stderr=True)
    spec = resolve_system(args.system)
    op = canonical_op(args.op).name
    ranks = args.ranks if args.ranks is not None else spec.chips
    if ranks < 2:
        raise UsageError(f"--ranks: system {spec.name!r} has {ranks} chip; a collective needs 2")
    note = _scale_out_note(spec, ranks)
    own = stack_for(spec).name
    if args.stack is not None and args.stack != own:
        what_if = (
            f"--stack {args.stack} on {spec.name}, whose vendor's stack is {own}: a what-if "
            f"({args.stack}'s algorithms and constants on this hardware, never measured there)"
        )
        note = f"{note}\n{what_if}" if note else what_if
    sweep_only = [f"--{f.replace('_', '-')}" for f in SWEEP_ONLY if getattr(args, f) is not None]
    if not args.sweep and sweep_only:
        verb = "applies" if len(sweep_only) == 1 else "apply"
        raise UsageError(f"{', '.join(sweep_only)} only {verb} with --sweep")
    if args.sweep and args.size is not None:
        raise UsageError("--size does not apply with --sweep (use --min-size and --max-size)")
    if not args.sweep:
        size = args.size if args.size is not None else DEFAULT_SIZE
        check_size(op, size, ranks)
        res = evaluate(args, size, ranks)
        if note:
            err.print(note)
        if args.json:
            print_json(res.to_dict())
        else:
            _print_one(console, res)
        return 0
    lo = args.min_size if args.min_size is not None else SWEEP_MIN
    hi = args.max_size if args.max_size is not None else SWEEP_MAX
    factor = args.factor or SWEEP_FACTOR
    if lo > hi:
        raise UsageError(f"--min-size ({lo:g} B) must not exceed --max-size ({hi:g} B)")
    check_size(op, lo, ranks, "--min-size")
    plot = args.plot if args.plot is not None else (None if args.json else "collective_sweep.png")
    if plot:
        output_path(plot, "--plot")
    sizes = []
    s = lo
    while s <= hi * (1 + 1e-12):
        sizes.append(s)
        s *= factor
    results = []
    with progress(f"sweeping {len(sizes)} sizes", total=len(sizes)) as bar:
        for size in sizes:
            results.append(evaluate(args, size, ranks))
            bar.advance()
    if note:
        err.print(note)
    if args.json:
        print_json([r.to_dict() for r in results])
    else:
        _print_sweep(console, results)
    if plot:
        write_plot(results, plot)
        if not args.json:
            console.print(f"plot written to {plot}")
    return 0


def _print_one(console: Console, r: CollectiveResult) -> None:
    t = Table(title=f"{r.op} of {human_bytes(r.nbytes)} on {r.ranks} ranks of {r.system}")
    t.add_column("level")
    t.add_column("latency (us)", justify="right")
    t.add_column("bandwidth (us)", justify="right")
    for level, part in r.breakdown.items():
        t.add_row(level, f"{part['latency_s'] * 1e6:.2f}", f"{part['bandwidth_s'] * 1e6:.2f}")
    console.print(fit(t))
    console.print(
        f"time {r.time_s * 1e6:.2f} us   algbw {r.algbw / 1e9:.2f} GB/s   "
        f"busbw {r.busbw / 1e9:.2f} GB/s   algorithm {r.algo}   ({r.evaluator} form, "
        f"{r.placement} placement)"
    )
    console.print(_stack_line(r))


def _print_sweep(console: Console, results: list[CollectiveResult]) -> None:
    r0 = results[0]
    t = Table(title=f"{r0.op} on {r0.ranks} ranks of {r0.system} ({r0.evaluator})")
    for col in ("size (B)", "time (us)", "algbw (GB/s)", "busbw (GB/s)", "algorithm"):
        t.add_column(col, justify="right")
    for r in results:
        t.add_row(
            f"{r.nbytes:,.0f}",
            f"{r.time_s * 1e6:,.1f}",
            f"{r.algbw / 1e9:.2f}",
            f"{r.busbw / 1e9:.2f}",
            r.algo + (f"/{r.protocol}" if r.protocol else ""),
        )
    console.print(fit(t))
    console.print(_stack_line(r0))


def write_plot(results: list[CollectiveResult], path: str) -> None:
    """busbw and time against size (log axes), written whole (``atomic_write``)."""
    from trnsim.report.plots import sweep_chart

    sweep_chart(results, path)
