"""Entry point of the ``trnsim`` command.

Each verb lives in its own module under ``trnsim.cli`` and exposes two functions:
``add_arguments(parser)`` and ``run(args) -> int``. ``VERBS`` is the explicit registry:
verb name -> (module, one-line help). Flags beat files beat defaults.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from trnsim import __version__
from trnsim.errors import TrnsimError

# verb -> (module under trnsim.cli, help). Add a verb by adding a line here.
VERBS: dict[str, tuple[str, str]] = {
    "specs": ("specs", "show a hardware preset (chip, core, system, peer) or list them all"),
    "compare": ("compare", "compare hardware presets side by side, with ratios to the first"),
    "demo": ("demo", "a tour of the whole system on built-in defaults (under a minute)"),
    "collective": ("collective", "time a collective on a system (closed form or flow simulation)"),
    "train": ("train", "estimate LLM training: step time, tokens/s, MFU, memory, cost"),
    "infer": ("infer", "estimate LLM serving: TTFT, TPOT, throughput, KV cache, cost"),
    "plan": ("plan", "search parallel plans for the best one that fits"),
    "compare-workload": ("compare_workload", "one workload on several systems, with a chart"),
    "validate": ("validate", "perf model vs published Trn1 measurements (per-row, MAPE)"),
    "run": ("run", "run an NKI kernel file on the emulated NeuronCore"),
    "profile": ("profile", "time an NKI kernel file: latency, engines, MFU, critical path, trace"),
    "conformance": ("conformance", "run AWS's public NKI kernels from a checkout vs references"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trnsim",
        description="trnsim: a software Trainium3 (emulator, timing, fabric, performance model).",
    )
    parser.add_argument("--version", action="version", version=f"trnsim {__version__}")
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    for verb, (module_name, help_text) in VERBS.items():
        module = importlib.import_module(f"trnsim.cli.{module_name}")
        verb_parser = sub.add_parser(verb, help=help_text, description=help_text)
        module.add_arguments(verb_parser)
        verb_parser.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.verb is None:
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except TrnsimError as exc:
        print(f"trnsim {args.verb}: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
