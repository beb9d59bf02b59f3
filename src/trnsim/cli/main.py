"""Entry point of the ``trnsim`` command.

Each verb lives in its own module under ``trnsim.cli`` and exposes two functions:
``add_arguments(parser)`` and ``run(args) -> int``. ``VERBS`` is the explicit registry:
verb name -> (module, one-line help). Flags beat files beat defaults.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import os
import re
import signal
import sys
import threading
import warnings
from typing import NoReturn

from trnsim import __version__, inputs
from trnsim.errors import KernelError, TrnsimError

# verb -> (module under trnsim.cli, help). Add a verb by adding a line here.
VERBS: dict[str, tuple[str, str]] = {
    "specs": ("specs", "show a hardware preset (chip, core, system, peer) or list them all"),
    "compare": ("compare", "compare hardware presets side by side, with ratios to the first"),
    "demo": ("demo", "a tour of the whole system on built-in defaults (under a minute)"),
    "collective": ("collective", "time a collective on a system (closed form or flow simulation)"),
    "train": ("train", "estimate LLM training: step time, tokens/s, MFU, memory, cost"),
    "infer": ("infer", "estimate LLM serving: TTFT, TPOT, throughput, KV cache, cost"),
    "serve": ("serve", "simulate serving under load: latency percentiles, throughput, SLO rate"),
    "plan": ("plan", "search parallel plans for the best one that fits"),
    "compare-workload": ("compare_workload", "one workload on several systems, with a chart"),
    "microbench": (
        "microbench",
        "single-chip GEMM, HBM STREAM and attention rates (core timing model on Trainium)",
    ),
    "validate": (
        "validate",
        "perf model vs every calibration set (Trainium, H100, NCCL, TPU): per-row, MAPE",
    ),
    "run": ("run", "run an NKI kernel file on the emulated NeuronCore"),
    "profile": ("profile", "time an NKI kernel file: latency, engines, MFU, critical path, trace"),
    "conformance": ("conformance", "run AWS's public NKI kernels from a checkout vs references"),
    "dra": ("dra", "Kubernetes DRA of Trainium devices: allocate claims, simulate a fleet"),
}


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error (``trnsim VERB: error: ...; see trnsim VERB --help``)
    instead of the usage block, exit status 2. Sub-parsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {clip(message)} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
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


class Terminated(BaseException):
    """SIGTERM, raised in the main thread so ``finally`` blocks remove temporary files."""


EXIT_OK, EXIT_CHECK_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED, EXIT_TERMINATED, EXIT_BROKEN_PIPE = 130, 143, 141  # 128 + signal number
EXIT_INTERNAL = 3


def exit_status(exc: TrnsimError) -> int:
    """1 when a check failed (an illegal kernel, a kernel that raised or ran out of bounds);
    2 for every other trnsim error: bad usage or input (a flag, a name, a path, a file)."""
    return EXIT_CHECK_FAILED if isinstance(exc, KernelError) else EXIT_USAGE


def _on_sigterm(signum: int, frame: object) -> None:
    raise Terminated


def main(argv: list[str] | None = None) -> int:
    """Run one verb; every outcome is an exit status (README, "Exit status"):
    0 success, 1 a check failed, 2 bad usage or input, 3 an internal error (a bug; the
    traceback with ``TRNSIM_TRACEBACK=1``), 130 interrupted (Ctrl-C), 143 terminated (SIGTERM),
    141 stdout closed early (e.g. piped into ``head``). Errors are one line on stderr."""
    in_main = threading.current_thread() is threading.main_thread()
    old_term = signal.signal(signal.SIGTERM, _on_sigterm) if in_main else None
    try:  # Ctrl-C or SIGTERM while the verbs' modules load (a second or two): no traceback
        parser = build_parser()
    except KeyboardInterrupt:
        _say("trnsim: interrupted")
        return EXIT_INTERRUPTED
    except Terminated:
        _say("trnsim: terminated (SIGTERM)")
        return EXIT_TERMINATED
    finally:
        if old_term is not None:
            signal.signal(signal.SIGTERM, old_term)
    args = parser.parse_args(argv)  # bad usage: argparse prints one line, exits 2
    if args.verb is None:
        parser.print_help()
        return EXIT_USAGE
    old_term = signal.signal(signal.SIGTERM, _on_sigterm) if in_main else None
    prefix = f"trnsim {args.verb}:"
    try:
        with inputs.flag_names(), warnings.catch_warnings():
            warnings.simplefilter("always", inputs.InputWarning)
            warnings.showwarning = _warning_printer(prefix)
            return int(args._run(args) or 0)
    except TrnsimError as exc:
        _say(f"{prefix} error: {clip(str(exc))}")
        return exit_status(exc)
    except KeyboardInterrupt:
        _stop_kernel_threads(KeyboardInterrupt)
        _say(f"{prefix} interrupted")
        return EXIT_INTERRUPTED
    except Terminated:
        _stop_kernel_threads(Terminated)
        _say(f"{prefix} terminated (SIGTERM)")
        return EXIT_TERMINATED
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_BROKEN_PIPE
    except OSError as exc:
        if exc.errno in USER_PATH:
            name = clip(str(exc.filename)) if exc.filename is not None else "a path"
            _say(f"{prefix} error: {name}: {exc.strerror} (errno {exc.errno})")
            return EXIT_USAGE
        if exc.errno not in OUT_OF_SPACE:
            return _internal(prefix, exc)
        _quiet_stdout()  # the final flush would fail again
        _say(f"{prefix} error: cannot write the output: {exc.strerror} (errno {exc.errno})")
        return EXIT_USAGE
    except SystemExit as exc:  # rich's Console meets a closed pipe with SystemExit(1)
        if exc.code == 1 and _stdout_is_devnull():
            return EXIT_BROKEN_PIPE
        raise
    except Exception as exc:
        return _internal(prefix, exc)
    finally:
        if old_term is not None:
            signal.signal(signal.SIGTERM, old_term)


def _warning_printer(prefix: str):
    """``warnings.showwarning`` for a verb's run: an ``InputWarning`` is one line
    ``trnsim VERB: warning: ...`` on stderr, each text once; other warnings as Python shows
    them."""
    seen: set[str] = set()
    default = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if not issubclass(category, inputs.InputWarning):
            return default(message, category, filename, lineno, file, line)
        text = str(message)
        if text not in seen:
            seen.add(text)
            _say(f"{prefix} warning: {text}")
        return None

    return show


# A full disk or a failing device under stdout or an output file: the user's environment, not
# a bug (exit 2, one line), unlike any other OSError that escapes the checks before work.
OUT_OF_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EIO)
# A path the user gave that no file system takes (a name longer than 255 bytes): whichever
# check met it first (``Path.is_file`` raises it), it is bad input (exit 2), not a bug.
USER_PATH = (errno.ENAMETOOLONG,)


def _internal(prefix: str, exc: Exception) -> int:
    if os.environ.get("TRNSIM_TRACEBACK") == "1":
        raise exc
    text = (str(exc).strip().splitlines() or [""])[0]
    _say(
        f"{prefix} internal error: {type(exc).__name__}: {text} (a bug in trnsim; "
        "TRNSIM_TRACEBACK=1 shows the traceback)"
    )
    return EXIT_INTERNAL


def _stop_kernel_threads(exc_type: type[BaseException]) -> None:
    """The programs of an interrupted LNC=2 kernel run stop too (else the exit waits)."""
    if "trnsim.nki.kernelfile" in sys.modules:
        from trnsim.nki.kernelfile import stop_kernel_threads

        stop_kernel_threads(exc_type)


LONG_WORD = 200  # characters: a longer word of an error line is shown by its ends


def clip(text: str) -> str:
    """``text`` with each word of more than ``LONG_WORD`` characters (a 5,000-character name
    given as a flag value) shortened to its ends and its length, so an error stays one line a
    person can read."""

    def short(m: re.Match[str]) -> str:
        word = m.group(0)
        return f"{word[:60]}...{word[-20:]} ({len(word):,} characters)"

    return re.sub(rf"\S{{{LONG_WORD + 1},}}", short, text)


def _say(line: str) -> None:
    with contextlib.suppress(OSError):  # stderr closed too: nothing more to say
        print(line, file=sys.stderr)


def _stdout_is_devnull() -> bool:
    try:
        return os.path.samestat(os.fstat(sys.stdout.fileno()), os.stat(os.devnull))
    except (OSError, ValueError):
        return False


def _quiet_stdout() -> None:
    """stdout's reader is gone: point stdout at /dev/null so the interpreter's final flush
    does not fail again (the recipe of the Python docs, 'Note on SIGPIPE')."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())
