"""Entry point of the ``trnsim`` command.

Each verb lives in its own module under ``trnsim.cli`` and exposes two functions:
``add_arguments(parser)`` and ``run(args) -> int``. ``VERBS`` is the explicit registry:
verb name -> (module, one-line help). Flags beat files beat defaults.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import faulthandler
import importlib
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

from trnsim import __version__, inputs
from trnsim.errors import Deadline, Interrupted, KernelError, Stop, Terminated, TrnsimError

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
    "calibrate": ("calibrate", "kernel timing model vs public measurements: every row, MAPE"),
    "torch-profile": (
        "torch_profile",
        "a PyTorch training step on Trn3: per-module time, FLOPs, MFU, layered trace",
    ),
    "torch-demo": ("torch_demo", "train a small GPT in FP32/BF16/MXFP8/MXFP4 Trn3 numerics"),
    "dra": ("dra", "Kubernetes DRA of Trainium devices: allocate claims, simulate a fleet"),
    "sweep": ("sweep", "run a verb over a grid of points (pool or Ray), to one table, Pareto"),
    "tune": ("tune", "autotune an NKI kernel's parameters: each candidate checked and timed"),
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


EXIT_OK, EXIT_CHECK_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED, EXIT_TERMINATED, EXIT_BROKEN_PIPE = 130, 143, 141  # 128 + signal number
EXIT_INTERNAL = 3


def exit_status(exc: TrnsimError) -> int:
    """1 when a check failed (an illegal kernel, a kernel that raised or ran out of bounds);
    2 for every other trnsim error: bad usage or input (a flag, a name, a path, a file)."""
    return EXIT_CHECK_FAILED if isinstance(exc, KernelError) else EXIT_USAGE


HARD_MARGIN_S = 2.0
"""Seconds after the time limit and the watchdog's grace (``trnsim.nki.watchdog.GRACE_S``) at
which ``hard_deadline`` ends a process whose Python cannot run any more."""

_REPORT_STUCK = r"""
dump=$(cat)
[ -n "$dump" ] || exit 0
line=$(printf '%s\n' "$dump" | grep -F "File \"$2\", line" | head -n 1 |
       sed 's/.*, line \([0-9]*\).*/\1/')
where="$3"
[ -n "$line" ] && where="$3:$line"
limit="ran longer than the time limit of $4 s (--timeout)"
why="stuck in a call that never returned to Python, so trnsim ended the process"
printf 'trnsim %s: error: timeout: kernel file %s (%s); %s\n' "$1" "$limit" "$where" "$why" >&2
"""
"""``sh -c`` script of the reporter: read the interpreter's stack dump (``faulthandler``) from
stdin; empty (the run ended normally): say nothing; else one line naming the kernel file's
innermost line (the dump lists the innermost frame first)."""


@contextlib.contextmanager
def hard_deadline(verb: str, path: str, seconds: float | None) -> Iterator[None]:
    """The last resort of a kernel-file run's time limit, for code that never returns to the
    interpreter (``sum(range(10**12))``, ``10**10**10``): such a call holds the interpreter
    lock, so no Python (signal handler, thread) runs until it returns. ``faulthandler``'s
    watchdog thread is C and needs no lock: armed at the limit plus the grace plus
    ``HARD_MARGIN_S``, it writes the stack into a pipe and ends the process with status 1; a
    ``sh`` reporter started here (a few milliseconds) turns the stack into the one-line error.
    When the run ends before, the pipe closes empty and the reporter exits silently. POSIX, main
    thread, CLI only (it ends the process)."""
    sh = shutil.which("sh")
    if not seconds or sh is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    from trnsim.nki.watchdog import GRACE_S

    read, write = os.pipe()
    try:
        reporter = subprocess.Popen(
            [sh, "-c", _REPORT_STUCK, "sh", verb, os.path.abspath(path), os.path.basename(path),
             f"{seconds:g}"],
            stdin=read,
            stdout=subprocess.DEVNULL,
            start_new_session=True,  # Ctrl-C at a terminal is the run's, not the reporter's
        )  # fmt: skip
    except OSError:
        os.close(read)
        os.close(write)
        yield
        return
    os.close(read)
    faulthandler.dump_traceback_later(seconds + GRACE_S + HARD_MARGIN_S, exit=True, file=write)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
        os.close(write)
        with contextlib.suppress(subprocess.TimeoutExpired):
            reporter.wait(timeout=5)


def stop_status(exc: BaseException) -> int:
    """The exit status of a stop: 1 past the time limit, 130 Ctrl-C, 143 SIGTERM."""
    if isinstance(exc, Deadline):
        return EXIT_CHECK_FAILED
    return EXIT_TERMINATED if isinstance(exc, Terminated) else EXIT_INTERRUPTED


def _on_sigterm(signum: int, frame: object) -> None:
    raise Terminated("terminated (SIGTERM)")


def _on_sigint(signum: int, frame: object) -> None:
    raise Interrupted("interrupted")


def hard_stop(verb: str) -> Callable[[BaseException], NoReturn]:
    """What a verb does when a kernel file's code keeps catching a stop (a time limit, Ctrl-C,
    SIGTERM; ``trnsim.nki.watchdog``): print the one line it would have printed, and end the
    process with the stop's status (no ``finally`` runs: no output file is being written then,
    only the user's code runs)."""

    def stop(exc: BaseException) -> NoReturn:
        prefix = f"trnsim {verb}:"
        caught = "; the kernel file's code kept catching the stop, so trnsim ended the process"
        if isinstance(exc, TrnsimError):
            _say(f"{prefix} error: {exc}{caught}")
            code = exit_status(exc)
        else:
            _say(f"{prefix} {exc}{caught}")
            code = stop_status(exc)
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        os._exit(code)

    return stop


def main(argv: list[str] | None = None) -> int:
    """Run one verb; every outcome is an exit status (README, "Exit status"):
    0 success, 1 a check failed, 2 bad usage or input, 3 an internal error (a bug; the
    traceback with ``TRNSIM_TRACEBACK=1``), 130 interrupted (Ctrl-C), 143 terminated (SIGTERM),
    141 stdout closed early (e.g. piped into ``head``). Errors are one line on stderr."""
    in_main = threading.current_thread() is threading.main_thread()
    saved = _catch_signals() if in_main else {}
    try:  # Ctrl-C or SIGTERM while the verbs' modules load (a second or two): no traceback
        parser = build_parser()
    except KeyboardInterrupt:
        _say("trnsim: interrupted")
        return EXIT_INTERRUPTED
    except Terminated:
        _say("trnsim: terminated (SIGTERM)")
        return EXIT_TERMINATED
    finally:
        _restore(saved)
    args = parser.parse_args(argv)  # bad usage: argparse prints one line, exits 2
    if args.verb is None:
        parser.print_help()
        return EXIT_USAGE
    saved = _catch_signals() if in_main else {}
    prefix = f"trnsim {args.verb}:"
    try:
        with inputs.flag_names(), warnings.catch_warnings():
            warnings.simplefilter("always", inputs.InputWarning)
            warnings.showwarning = _warning_printer(prefix)
            return int(args._run(args) or 0)
    except TrnsimError as exc:
        _say(f"{prefix} error: {clip(str(exc))}")
        return exit_status(exc)
    except Stop as exc:  # a time limit, Ctrl-C or SIGTERM, with where the user's code was
        _stop_kernel_threads(type(exc))
        _say(f"{prefix} {exc}")
        return stop_status(exc)
    except KeyboardInterrupt:
        _stop_kernel_threads(KeyboardInterrupt)
        _say(f"{prefix} interrupted")
        return EXIT_INTERRUPTED
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
    except BaseException as exc:  # GeneratorExit and the like, escaped from trnsim itself
        return _internal(prefix, exc)
    finally:
        _restore(saved)


def _catch_signals() -> dict[int, Any]:
    """SIGTERM and SIGINT raise ``Terminated`` / ``Interrupted`` in the main thread (so files
    being written are removed, and a kernel file's ``except Exception`` cannot swallow them);
    returns the handlers to restore. An ignored SIGINT (a background job) stays ignored."""
    saved = {
        signal.SIGTERM: signal.signal(signal.SIGTERM, _on_sigterm),
        # a kernel-file run's watch thread signals the main thread with SIGALRM
        # (trnsim.nki.watchdog): one that comes late is answered by a no-op, never by SIGALRM's
        # default action, which ends the process
        signal.SIGALRM: signal.signal(signal.SIGALRM, _late_alarm),
    }
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        saved[signal.SIGINT] = signal.signal(signal.SIGINT, _on_sigint)
    return saved


def _late_alarm(signum: int, frame: object) -> None:
    pass


def _restore(saved: dict[int, Any]) -> None:
    for signum, handler in saved.items():
        signal.signal(signum, handler)


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


def _internal(prefix: str, exc: BaseException) -> int:
    if os.environ.get("TRNSIM_TRACEBACK") == "1":
        raise exc
    try:
        text = (str(exc).strip().splitlines() or [""])[0]
    except Exception:
        text = "(its message cannot be printed)"
    _say(
        f"{prefix} internal error: {type(exc).__name__}: {text} (a bug in trnsim; "
        "TRNSIM_TRACEBACK=1 shows the traceback)"
    )
    return EXIT_INTERNAL


def _stop_kernel_threads(exc_type: type[BaseException]) -> None:
    """The programs of an interrupted LNC=2 kernel run stop too (else the exit waits)."""
    if "trnsim.nki.watchdog" in sys.modules:
        from trnsim.nki.watchdog import stop_kernel_threads

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
