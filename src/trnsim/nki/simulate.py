"""Running kernels: ``jit``, ``simulate``, ``kernel[lnc](...)`` and ``run`` (with the record).

``nki.simulate(kernel)(*arrays)`` wraps each NumPy argument as a ``shared_hbm`` tensor, runs
the kernel eagerly on emulated NeuronCore(s), copies the returned tensors out as NumPy arrays
and writes back inputs the kernel modified. LNC=2 runs two programs (threads) on two cores
sharing HBM. ``run(...)`` does the same and returns a ``RunResult`` with the instruction
record of every core (what the timing model reads).

Target: ``target=`` > ``NEURON_PLATFORM_TARGET_OVERRIDE`` (trn1|gen2, trn2|gen3, trn3|gen4) >
gen4. Rounding: ``rounding=`` > ``NEURON_RT_STOCHASTIC_ROUNDING_EN=1`` > RNE.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import gc
import operator
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trnsim.core.argrules import broken
from trnsim.core.blas import single_threaded_blas
from trnsim.core.instruction import Instruction
from trnsim.core.machine import NeuronCore
from trnsim.core.memory import HBM, Hbm, View
from trnsim.core.options import CoreOptions
from trnsim.core.races import RaceCheck
from trnsim.errors import UsageError
from trnsim.hw import chip
from trnsim.nki.context import Launch, Program, Relaunch, World, current_or_none, enter
from trnsim.nki.outputs import Unwritten, check_in_hbm, checked_allowance, kernel_rule, unwritten
from trnsim.nki.tensor import NkiTensor
from trnsim.numerics import get_format

TARGETS = {
    "trn1": "gen2",
    "inf2": "gen2",
    "gen2": "gen2",
    "trn2": "gen3",
    "gen3": "gen3",
    "trn3": "gen4",
    "gen4": "gen4",
}
_CHIPS = {"gen2": "trn1", "gen3": "trn2", "gen4": "trn3"}


MAX_SEED = 2**63 - 1
"""The largest ``seed``: each core draws from ``seed + core`` (``seed + rank * lnc + core`` in
``run_ranks``) as an unsigned 64-bit number."""


def _lnc_value(lnc: Any) -> int | None:
    """``lnc`` as 1 or 2 (an int or a NumPy integer), else None (2.5, "2", True are refused)."""
    if isinstance(lnc, bool):
        return None
    try:
        value = operator.index(lnc)
    except TypeError:
        return None
    return value if value in (1, 2) else None


def check_arguments(where: str, kernel: Any, **given: Any) -> None:
    """The launch arguments of ``run`` / ``simulate`` / ``record_run`` / ``run_ranks``, checked
    at the boundary: a ``UsageError`` naming the function, the argument and its value, before
    anything runs (not a TypeError from deep inside a core)."""

    def bad(name: str, rule: str) -> UsageError:
        return UsageError(f"trnsim.nki.{where}: {name}={given[name]!r:.60} {rule}")

    if not callable(kernel):
        raise UsageError(
            f"trnsim.nki.{where}: kernel={kernel!r:.60} is not a kernel "
            "(an @nki.jit function, or a plain function)"
        )
    if "target" in given and given["target"] is not None and not isinstance(given["target"], str):
        raise bad("target", f"must be one of {', '.join(sorted(TARGETS))} or a core preset name")
    if given.get("lnc") is not None and _lnc_value(given["lnc"]) is None:
        raise bad("lnc", "must be 1 or 2 (or None: the kernel's own)")
    # rounding: the core refuses an unknown mode before anything runs (rule ``rounding``)
    if "seed" in given:
        seed = given["seed"]
        ok = isinstance(seed, int | np.integer) and not isinstance(seed, bool)
        if not ok or not 0 <= int(seed) <= MAX_SEED:
            raise bad("seed", "must be a whole number in 0..2**63-1")
    if "functional" in given and not isinstance(given["functional"], bool | np.bool_):
        raise bad("functional", "must be True or False")
    if given.get("options") is not None and not isinstance(given["options"], CoreOptions):
        raise bad("options", "must be a trnsim.core.options.CoreOptions (or None)")
    m = given.get("max_instructions")
    if m is not None and (isinstance(m, bool) or not isinstance(m, int | np.integer) or m < 1):
        raise bad("max_instructions", "must be a whole number >= 1 (or None: no bound)")


def resolve_target(target: str | None) -> str:
    t = target or os.environ.get("NEURON_PLATFORM_TARGET_OVERRIDE") or "gen4"
    if not isinstance(t, str):
        raise UsageError(
            f"target {t!r:.40} must be one of {', '.join(sorted(TARGETS))} or a core preset name"
        )
    key = t.lower()
    if key in TARGETS:
        return TARGETS[key]
    return t  # a core preset name ("neuroncore-v4", "v4"); hw.core() validates it


@dataclass
class RunResult:
    """Outputs of one kernel launch and the instruction record of each core."""

    outputs: Any
    cores: list[NeuronCore]
    printed: list[str] = field(default_factory=list)
    unwritten: list[Unwritten] = field(default_factory=list)
    """Returned outputs with elements no instruction wrote (functional runs; allowed only with
    ``allow_unwritten``, else the run raises ``output-unwritten``)."""

    @property
    def instructions(self) -> list[Instruction]:
        """All recorded instructions (core 0 first, then core 1 for LNC=2)."""
        return [i for c in self.cores for i in c.record]


class Kernel:
    """An ``@nki.jit`` kernel. ``kernel(*args)`` and ``kernel[lnc](*args)`` run it."""

    def __init__(self, fn: Callable[..., Any], lnc: int = 1, **options: Any) -> None:
        self.fn = fn
        self.lnc = lnc
        self.options = options
        self.__name__ = getattr(fn, "__name__", "kernel")
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def __getitem__(self, lnc: Any) -> Kernel:
        if isinstance(lnc, tuple):
            if len(lnc) != 1:
                raise broken("launch-grid", f"launch grid {lnc}: only kernel[lnc] with lnc 1 or 2")
            lnc = lnc[0]
        if _lnc_value(lnc) is None:
            raise broken("launch-lnc", f"LNC must be 1 or 2, got {lnc!r:.40}")
        return Kernel(self.fn, _lnc_value(lnc), **self.options)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if current_or_none() is not None:
            # Called from inside a running kernel: NKI traces the callee into the caller
            # (one kernel, one launch), so its instructions run on the caller's cores, inline.
            return self.fn(*args, **kwargs)
        target = self.options.get("platform_target")
        return run(self, *args, target=target, **kwargs).outputs


def jit(fn: Callable[..., Any] | None = None, **kwargs: Any) -> Any:
    """``@nki.jit`` / ``@nki.jit(...)``. ``platform_target`` is accepted and mapped to a target
    (NKI 0.3+ rejects it; the MX samples still pass it); ``mode`` is ignored."""
    if fn is None:
        return lambda f: Kernel(f, **kwargs)
    return Kernel(fn, **kwargs)


def simulate(
    kernel: Any,
    *,
    target: str | None = None,
    rounding: str | None = None,
    seed: int = 0,
    options: CoreOptions | None = None,
    allow_unwritten: bool | str = False,
) -> Callable[..., Any]:
    """``nki.simulate(kernel)(*arrays)`` -> the kernel's outputs as NumPy arrays.

    The last run's ``RunResult`` (with the instruction record) is kept on the returned
    callable as ``.last_run``. ``allow_unwritten``: see ``run``.
    """
    check_arguments(
        "simulate", kernel, target=target, rounding=rounding, seed=seed, options=options
    )
    allowed = checked_allowance(allow_unwritten, "simulate: allow_unwritten")

    def call(*args: Any, **kwargs: Any) -> Any:
        res = run(
            kernel,
            *args,
            target=target,
            rounding=rounding,
            seed=seed,
            options=options,
            allow_unwritten=allowed,
            **kwargs,
        )
        call.last_run = res  # type: ignore[attr-defined]
        return res.outputs

    call.last_run = None  # type: ignore[attr-defined]
    return call


def run(
    kernel: Any,
    *args: Any,
    target: str | None = None,
    lnc: int | None = None,
    rounding: str | None = None,
    seed: int = 0,
    functional: bool = True,
    options: CoreOptions | None = None,
    max_instructions: int | None = None,
    allow_unwritten: bool | str = False,
    **kwargs: Any,
) -> RunResult:
    """Run ``kernel`` on emulated NeuronCore(s) and return outputs plus the records.

    ``functional=False`` is a timing-only run: rules are checked and the stream is recorded,
    but no data moves (outputs hold the uninitialised sentinel). ``options``: how the cores
    run (``trnsim.core.options.CoreOptions``); ``None``: the plain interpreter, or the
    deferred path if the environment sets ``TRNSIM_DEFERRED=1`` (``CoreOptions.from_env``).
    ``max_instructions``: shorthand for ``CoreOptions.max_instructions`` (a core issuing more
    stops the kernel with a ``KernelError`` at its line).

    The kernel returns its outputs as HBM tensors (``output-not-hbm`` otherwise), and a
    functional run checks that every element of them was written (``trnsim.nki.outputs``):
    an element never written is a ``KernelError`` (``output-unwritten``) unless
    ``allow_unwritten`` gives the reason (a string, or True); the run's ``unwritten`` lists
    them either way. Arguments are checked here, before anything runs (``UsageError``).
    """
    check_arguments(
        "run",
        kernel,
        target=target,
        lnc=lnc,
        rounding=rounding,
        seed=seed,
        functional=functional,
        options=options,
        max_instructions=max_instructions,
    )
    return _launch(
        kernel,
        args,
        kwargs,
        target,
        lnc,
        rounding,
        seed,
        functional,
        True,
        options,
        max_instructions,
        allow_unwritten=checked_allowance(allow_unwritten, "run: allow_unwritten"),
    )


def record_run(
    kernel: Any,
    *args: Any,
    target: str | None = None,
    lnc: int | None = None,
    rounding: str | None = None,
    seed: int = 0,
    options: CoreOptions | None = None,
    max_instructions: int | None = None,
    **kwargs: Any,
) -> RunResult:
    """A timing-only run kept for its instruction record alone (``outputs`` is None).

    Same rules, same record as ``run(..., functional=False)``, minus the data handling no one
    can observe: the arguments are not copied into HBM, HBM is not sentinel-filled and the
    outputs are not copied out (for the tutorial's large matmuls that handling of a few
    hundred MB costs more than recording 10^5 instructions).
    """
    check_arguments(
        "record_run",
        kernel,
        target=target,
        lnc=lnc,
        rounding=rounding,
        seed=seed,
        options=options,
        max_instructions=max_instructions,
    )
    return _launch(
        kernel,
        args,
        kwargs,
        target,
        lnc,
        rounding,
        seed,
        False,
        False,
        options,
        max_instructions,
    )


def _launch(
    kernel: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    target: str | None,
    lnc: int | None,
    rounding: str | None,
    seed: int,
    functional: bool,
    keep_data: bool,
    options: CoreOptions | None = None,
    max_instructions: int | None = None,
    world: World | None = None,
    rank: int = 0,
    allow_unwritten: bool | str = False,
) -> RunResult:
    """Run the launch; a program's ``Relaunch`` request runs it again from the start (the
    previous attempt's cores and data are dropped first), with the carried state and the
    attempt's own ``functional`` / ``keep_data`` (default: as asked)."""
    carry: Any = None
    how = (functional, keep_data)
    for _ in range(MAX_ATTEMPTS):
        res = _attempt(
            kernel, args, kwargs, target, lnc, rounding, seed, how[0], how[1], options,
            max_instructions, world, rank, carry, allow_unwritten,
        )  # fmt: skip
        if not isinstance(res, Relaunch):
            return res
        if carry is not None and res.carry is carry:  # (a front end's bug)
            raise RuntimeError("a launch asked to run again with the same state")
        carry = res.carry
        how = (
            functional if res.functional is None else res.functional,
            keep_data if res.keep_data is None else res.keep_data,
        )
    raise RuntimeError(f"a launch asked to run again more than {MAX_ATTEMPTS - 1} times")


MAX_ATTEMPTS = 4
"""Attempts of one launch (the legacy front end makes at most three: a first run stopped by a
lack of memory, a planning run, the run with the plan)."""


def _attempt(
    kernel: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    target: str | None,
    lnc: int | None,
    rounding: str | None,
    seed: int,
    functional: bool,
    keep_data: bool,
    options: CoreOptions | None,
    max_instructions: int | None,
    world: World | None,
    rank: int,
    carry: Any,
    allow_unwritten: bool | str,
) -> RunResult | Relaunch:
    """One attempt of ``_launch``: its result, or the relaunch a program asked for."""
    if options is None:
        options = CoreOptions.from_env()
    if max_instructions is not None:
        options = dataclasses.replace(options, max_instructions=max_instructions)
    if isinstance(kernel, Kernel):
        fn, n = kernel.fn, lnc or kernel.lnc
        target = target or kernel.options.get("platform_target")
    else:
        fn, n = kernel, lnc or 1
    tgt = resolve_target(target)
    if rounding is None:
        rounding = (
            "stochastic" if os.environ.get("NEURON_RT_STOCHASTIC_ROUNDING_EN") == "1" else "rne"
        )
    hbm = Hbm(_hbm_bytes(tgt), f"{tgt} HBM")
    hbm.fill_sentinel = keep_data
    cores = [
        NeuronCore(
            tgt,
            index=i,
            hbm=hbm,
            rounding=rounding,
            seed=seed + i,
            functional=functional,
            options=options,
        )
        for i in range(n)
    ]
    race = RaceCheck() if n > 1 and functional else None
    hbm.race = race  # write-write races between the cores (trnsim.core.races)
    barrier = threading.Barrier(n, action=race.advance if race else None)
    launch = Launch(n, cores, barrier, world=world, rank=rank, carry=carry)
    boot = Program(launch, 0, cores[0])
    enter(boot)
    try:
        inputs = [_to_device(cores[0], a, keep_data) for a in args]
        kw = {k: _to_device(cores[0], v, keep_data) for k, v in kwargs.items()}
    finally:
        enter(None)
    host_written = {id(t.storage.alloc) for t in _views((inputs, kw))}
    results: list[Any] = [None] * n
    errors: list[BaseException | None] = [None] * n

    def program(i: int) -> None:
        enter(Program(launch, i, cores[i]))
        cores[i].start_async()  # with options.deferred: data work off this thread (core.accel)
        try:
            results[i] = fn(*inputs, **kw)
            cores[i].finish()  # the deferred data work, and its errors, before returning
        except BaseException as exc:  # re-raised in the caller's thread
            errors[i] = exc
            try:  # a deferred failure comes first in program order
                cores[i].finish()
            except BaseException as deferred:
                errors[i] = deferred
            launch.barrier.abort()
            if world is not None:  # the other ranks wait for this one in a collective
                world.barrier.abort()
        finally:
            enter(None)

    _ACTIVE.append(launch)
    try:
        with single_threaded_blas(), _fewer_gc_passes():  # see trnsim.core.blas, _fewer_gc_passes
            if n == 1:
                program(0)
            else:
                _in_threads(program, n)
    finally:
        _ACTIVE.remove(launch)
    again = next((e for e in errors if isinstance(e, Relaunch)), None) or launch.relaunch
    if again is not None and world is None:
        again.__traceback__ = None  # (it would keep this attempt's frames and data alive)
        return again
    _raise_first(errors)
    if race is not None:
        race.check("at the end of the launch")
    views = check_in_hbm(results[0], kernel)
    if not functional:  # nothing wrote data: the inputs are unchanged, the outputs sentinel
        return _observed(
            RunResult(_to_numpy(results[0]) if keep_data else None, cores, launch.printed)
        )
    never = unwritten(views, cores, host_written)
    if never and not allow_unwritten:
        raise kernel_rule(
            "output-unwritten",
            "; ".join(u.describe() for u in never)
            + " (write every element, or pass allow_unwritten='why' to trnsim.nki.run / "
            "simulate, UNWRITTEN = 'why' in a kernel file, if the kernel leaves them on purpose)",
            kernel,
        )
    for a, t in zip(args, inputs, strict=True):
        _write_back(a, t)
    return _observed(RunResult(_to_numpy(results[0]), cores, launch.printed, never))


def run_ranks(
    kernel: Any,
    per_rank: list[tuple[tuple[Any, ...], dict[str, Any]]],
    *,
    target: str | None = None,
    lnc: int | None = None,
    rounding: str | None = None,
    seed: int = 0,
    functional: bool = True,
    options: CoreOptions | None = None,
    backend: Any = None,
    allow_unwritten: bool | str = False,
) -> list[RunResult]:
    """Run ``kernel`` as ``len(per_rank)`` ranks: rank ``r`` is a launch of its own (its own
    NeuronCore(s) and HBM, one thread) called with ``per_rank[r]`` (positional, keyword
    arguments); ``nki.collectives`` calls exchange between the ranks (``rank_id()`` is ``r``).
    ``backend``: where the ranks run instead of this process's threads, e.g.
    ``trnsim.nki.ray_ranks.RayRanks()`` (each rank in a Ray actor; the same results, bit for
    bit); None: here.
    With LNC=2 launches (``lnc=2`` or ``kernel[2]``) core ``c`` of each rank takes part in
    the collectives with core ``c`` of the others (``trnsim.nki.collectives._exchange``).
    Returns each rank's ``RunResult``, in rank order. Core ``i`` of rank ``r`` draws its
    stochastic-rounding stream from seed ``seed + r * lnc + i``.

    The first failing rank's error is raised (a rank that only saw another rank abort the
    collective it waited in is not the cause)."""
    check_arguments(
        "run_ranks",
        kernel,
        target=target,
        lnc=lnc,
        rounding=rounding,
        seed=seed,
        functional=functional,
        options=options,
    )
    allowed = checked_allowance(allow_unwritten, "run_ranks: allow_unwritten")
    n = len(per_rank)
    if n < 1:
        raise broken("launch-ranks", "run_ranks needs at least one rank")
    width = lnc or (kernel.lnc if isinstance(kernel, Kernel) else 1)
    if backend is not None:
        launch = dict(
            target=target,
            lnc=lnc,
            rounding=rounding,
            seed=seed,
            functional=functional,
            options=options,
            allow_unwritten=allowed,
        )
        return backend.run_ranks(kernel, per_rank, width, launch)
    world = World(n, threading.Barrier(n * width))
    results: list[RunResult | None] = [None] * n
    errors: list[BaseException | None] = [None] * n

    def one(r: int) -> None:
        args, kwargs = per_rank[r]
        try:
            results[r] = _launch(
                kernel,
                tuple(args),
                dict(kwargs),
                target,
                lnc,
                rounding,
                seed + r * width,
                functional,
                True,
                options,
                None,
                world,
                r,
                allowed,
            )
        except BaseException as exc:
            errors[r] = exc
            world.barrier.abort()

    _in_threads(one, n)
    _raise_first(errors)
    return [r for r in results if r is not None]


def _in_threads(target: Callable[[int], None], n: int) -> None:
    """``target(i)`` for ``i`` in ``range(n)``, each on a thread of its own; wait for all."""
    threads = [threading.Thread(target=target, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _raise_first(errors: list[BaseException | None]) -> None:
    """Raise the first error that is a cause: an aborted barrier only says that another
    program (or rank) failed first."""
    for exc in errors:
        if exc is not None and not isinstance(exc, threading.BrokenBarrierError):
            raise exc
    for exc in errors:
        if exc is not None:
            raise exc


_ACTIVE: list[Launch] = []
"""The launches running now (what ``instructions_so_far`` counts)."""


def instructions_so_far() -> int:
    """Instructions recorded so far by the launches running now (a progress figure: read from
    another thread without a lock, so it may be a few instructions behind)."""
    return sum(len(c.record) for launch in list(_ACTIVE) for c in launch.cores)


def _views(x: Any) -> list[View]:
    """The views in an argument structure (tuples, lists, dict values)."""
    if isinstance(x, View):
        return [x]
    if isinstance(x, tuple | list):
        return [v for y in x for v in _views(y)]
    if isinstance(x, dict):
        return [v for y in x.values() for v in _views(y)]
    return []


_OBSERVERS: contextvars.ContextVar[list[RunResult] | None] = contextvars.ContextVar(
    "trnsim_run_observers", default=None
)


def _observed(res: RunResult) -> RunResult:
    seen = _OBSERVERS.get()
    if seen is not None:
        seen.append(res)
    return res


@contextlib.contextmanager
def observe_runs() -> Iterator[list[RunResult]]:
    """Collect every launch that finishes in this context, in order of completion: a kernel
    *caller* (a Python function that launches ``kernel[grid](...)`` itself, as nki-samples'
    ``nki_tensor_add_nc2`` does) records nothing in its own run, its launches do. Launches
    made from an LNC>1 program's threads are not seen (they run in another context)."""
    runs: list[RunResult] = []
    token = _OBSERVERS.set(runs)
    try:
        yield runs
    finally:
        _OBSERVERS.reset(token)


GC_GEN0_THRESHOLD = 100_000
"""Allocations between two young-generation passes of the cyclic GC during a kernel run
(CPython's default is 700). A run allocates a few small objects per instruction and keeps most
of them (the record), so at the default the collector re-walks the growing record over and
over: about 12% of a timing-only recording of 10^5 instructions (benchmarks/bench_timing.py).
Cycles are still collected, only less often; tensors are freed by reference counting, so SBUF
and PSUM liveness does not depend on it."""

_gc_lock = threading.Lock()
_gc_depth = 0
_gc_saved: tuple[int, ...] = ()


@contextlib.contextmanager
def _fewer_gc_passes() -> Iterator[None]:
    """Raise the GC's young-generation threshold for the duration of a run (re-entrant)."""
    global _gc_depth, _gc_saved
    with _gc_lock:
        if _gc_depth == 0:
            _gc_saved = gc.get_threshold()
            gc.set_threshold(max(GC_GEN0_THRESHOLD, _gc_saved[0]), *_gc_saved[1:])
        _gc_depth += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_depth -= 1
            if _gc_depth == 0:
                gc.set_threshold(*_gc_saved)


def _hbm_bytes(target: str) -> int:
    name = _CHIPS.get(target)
    try:
        return int(chip(name).hbm_bytes) if name else 2**40
    except Exception:
        return 2**40


def _to_tensor(nc: NeuronCore, a: np.ndarray, copy: bool = True) -> NkiTensor:
    try:
        fmt = get_format(a.dtype)
    except Exception:
        raise broken(
            "argument-dtype", f"kernel argument of dtype {a.dtype} is not an NKI dtype"
        ) from None
    v = nc.allocate(a.shape, fmt, HBM, name="arg", fill=False, view_type=NkiTensor)
    if copy:
        v.array()[...] = a
    return v  # type: ignore[return-value]


def _to_device(nc: NeuronCore, a: Any, copy: bool) -> Any:
    """A kernel argument on the device: a NumPy array becomes an HBM tensor, and so does each
    array in a list or tuple argument (nki-library's ``transformer_tkg`` takes per-layer
    ``List[nl.ndarray]`` weights and caches: sdk ``nki/library/api/transformer-tkg.rst``)."""
    if isinstance(a, np.ndarray):
        return _to_tensor(nc, a, copy)
    if isinstance(a, list | tuple) and any(isinstance(x, np.ndarray | list | tuple) for x in a):
        items = [_to_device(nc, x, copy) for x in a]
        return type(a)(*items) if hasattr(a, "_fields") else type(a)(items)
    return a


def _write_back(a: Any, t: Any) -> None:
    """Copy what the kernel left in each argument's HBM tensor back into the caller's array
    (an output buffer passed in, a KV cache updated in place), lists and tuples included."""
    if isinstance(a, np.ndarray):
        if a.flags.writeable:
            a[...] = t.array().reshape(a.shape)
    elif isinstance(a, list | tuple) and isinstance(t, list | tuple):
        for x, y in zip(a, t, strict=True):
            _write_back(x, y)


def _to_numpy(x: Any) -> Any:
    if isinstance(x, View):
        return np.array(x.array())
    if isinstance(x, tuple | list):
        return type(x)(_to_numpy(y) for y in x)
    if isinstance(x, dict):
        return {k: _to_numpy(v) for k, v in x.items()}
    return x
