"""``trnsim microbench [TARGET ...]``: single-chip GEMM TFLOP/s by shape and precision, HBM
STREAM bandwidth and attention TFLOP/s, timed by the core timing model on Trainium chips and
NeuronCores, from the efficiency profiles elsewhere (``trnsim.perf.microbench``); each figure
beside the published single-chip measurement where the calibration data holds one."""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.table import Table

from trnsim.cli.argtypes import positive_int
from trnsim.cli.train import dump
from trnsim.errors import TrnsimError, UsageError
from trnsim.perf import microbench as mb
from trnsim.report.output import output_path
from trnsim.report.progress import progress
from trnsim.report.tables import fit


def _names(flag: str, valid: tuple[str, ...]):
    def parse(text: str) -> tuple[str, ...]:
        items = tuple(x.strip() for x in str(text).split(",") if x.strip())
        bad = [x for x in items if x not in valid]
        if not items or bad:
            raise argparse.ArgumentTypeError(
                f"{text!r}: valid {flag} are {', '.join(valid)} (comma-separated)"
            )
        return items

    parse.__name__ = flag
    return parse


def _sizes(text: str) -> tuple[int, ...]:
    items = [x.strip() for x in str(text).split(",")]
    if not items or any(not x for x in items):
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of sizes")
    out = tuple(positive_int(x) for x in items)
    bad = [s for s in out if s % mb.TILE or s > mb.MAX_SIZE]
    if bad:
        raise argparse.ArgumentTypeError(
            f"{text!r}: sizes must be multiples of {mb.TILE} up to {mb.MAX_SIZE} (got {bad[0]})"
        )
    return out


def _shape(shape: str) -> str:
    """``8192x8192x8192`` -> ``8192^3``; other shapes as they are."""
    dims = shape.split("x")
    return f"{dims[0]}^3" if len(dims) == 3 and len(set(dims)) == 1 else shape


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "targets",
        nargs="*",
        metavar="TARGET",
        help="chips or NeuronCores (default: trn1 trn2 trn3 h100-sxm); Trainium chips and "
        "NeuronCores are timed by the core timing model",
    )
    parser.add_argument(
        "--bench",
        type=_names("benchmarks", mb.BENCHES),
        default=mb.BENCHES,
        help="benchmarks, comma-separated: gemm, stream, attention (default all)",
    )
    parser.add_argument(
        "--dtype",
        type=_names("dtypes", mb.GEMM_DTYPES),
        default=mb.GEMM_DTYPES,
        help="GEMM precisions, comma-separated: bf16, fp8 (default both)",
    )
    parser.add_argument(
        "--sizes",
        type=_sizes,
        default=mb.DEFAULT_SIZES,
        help="square GEMM sizes M = N = K, comma-separated multiples of 128 "
        "(default 1024,2048,4096,8192)",
    )
    parser.add_argument(
        "--seq", type=positive_int, default=8192, help="attention sequence length (default 8192)"
    )
    parser.add_argument(
        "--heads", type=positive_int, default=16, help="attention heads (default 16)"
    )
    parser.add_argument(
        "--attn-batch", type=positive_int, default=2, help="attention batch (default 2)"
    )
    parser.add_argument(
        "--head-dim", type=positive_int, default=128, help="attention head dim (<= 128)"
    )
    parser.add_argument("--causal", action="store_true", help="causal attention (half the FLOPs)")
    parser.add_argument("--png", help="write a chart of every figure to this PNG file")
    parser.add_argument("--json", action="store_true", help="machine-readable output, SI units")


def run(args: argparse.Namespace) -> int:
    targets = tuple(args.targets) or mb.DEFAULT_TARGETS
    for name in targets:
        try:
            mb.resolve_target(name)
        except TrnsimError as exc:
            raise UsageError(f"TARGET {name}: {exc}") from None
    try:
        attn = mb.Attention(args.attn_batch, args.heads, args.seq, args.head_dim, args.causal)
    except TrnsimError as exc:
        raise UsageError(f"--seq/--heads/--attn-batch/--head-dim: {exc}") from None
    if args.png:
        output_path(args.png, "--png")
    total = mb.count(targets, args.bench, args.sizes, args.dtype)
    show = None if args.json else progress
    if show is None:
        results = mb.run(targets, args.bench, args.sizes, args.dtype, attn)
    else:
        with show("microbenchmarks", total=total) as bar:
            results = mb.run(targets, args.bench, args.sizes, args.dtype, attn, bar.advance)
    if args.png:
        from trnsim.report.plots import microbench_chart

        microbench_chart(results, args.png)
    if args.json:
        dump({"results": [r.as_dict() for r in results], "png": args.png})
        return 0
    console = Console()
    table = Table(
        title="single-chip microbenchmarks",
        title_justify="left",
        caption="rate and published: TFLOP/s (gemm, attention), TB/s (stream)",
        caption_justify="left",
    )
    for c in ("target", "benchmark", "shape", "rate", "peak", "published", "error"):
        table.add_column(c, justify="left" if c in ("target", "benchmark", "shape") else "right")
    for r in results:
        table.add_row(
            r.target,
            f"{r.bench} {r.dtype}",
            _shape(r.shape),
            f"{r.rate / 1e12:,.2f}",
            f"{r.fraction_of_peak:.1%}",
            f"{r.published.value / 1e12:,.2f}" if r.published else "-",
            f"{r.error:+.1%}" if r.error is not None else "-",
        )
    console.print(fit(table))
    models = dict.fromkeys(f"{r.target} {r.bench}: {r.model}" for r in results)
    for line in models:
        console.print(f"[dim]- {line}[/dim]")
    for src in dict.fromkeys(r.published.source for r in results if r.published):
        console.print(f"[dim]- published: {src}[/dim]")
    if args.png:
        console.print(f"chart: {args.png}")
    return 0
