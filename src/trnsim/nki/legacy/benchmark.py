"""``nki.benchmark`` and ``nki.profile`` (legacy): time a kernel on the target NeuronCore.

On hardware, ``nki.benchmark`` runs the compiled kernel ``warmup + iters`` times and reports
latency percentiles. trnsim runs it once, timing-only (``trnsim.nki.benchmark.profile_kernel``:
rules checked, instruction stream recorded, no data), and times the stream with its timing model
(``trnsim.core.timing``). ``benchmark_result.nc_latency.get_latency_percentile(p)`` is that
**model estimate** in microseconds, the same for every percentile (a deterministic model has no
run-to-run spread); ``warmup`` / ``iters`` are checked and recorded, not looped.

Target: ``platform_target=`` > ``NEURON_PLATFORM_TARGET_OVERRIDE`` > the default (trnsim's
``resolve_target``). Artifacts: ``save_trace_name`` gets the Perfetto trace (JSON) of the run;
``save_neff_name`` gets trnsim's instruction-count summary with the neuron-profile figures
(``Profile.neuron_profile``: HBM bytes read and written, spill bytes, engine active time, hardware
FLOPs, DMA active time; JSON; there is no NEFF on trnsim);
``nki.profile`` writes both, plus the timeline PNG, into ``working_directory``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trnsim.core.location import fail
from trnsim.core.profile import Profile
from trnsim.nki.legacy.kernel import LegacyKernel
from trnsim.nki.simulate import resolve_target

PERCENTILES = (0, 1, 10, 25, 50, 90, 99, 100)
"""The percentiles ``get_latency_percentile`` accepts (the SDK docstring's list)."""


@dataclass(frozen=True)
class Latency:
    """``benchmark_result.nc_latency``: trnsim's modelled kernel latency."""

    seconds: float
    target: str

    def get_latency_percentile(self, percentile: int) -> float:
        """The modelled latency in microseconds (a model estimate: the same value for every
        percentile)."""
        if percentile not in PERCENTILES:
            raise fail(
                "percentile",
                f"get_latency_percentile({percentile!r}): available {list(PERCENTILES)}",
            )
        return self.seconds * 1e6


@dataclass(frozen=True)
class BenchmarkResult:
    nc_latency: Latency
    profile: Profile
    warmup: int
    iters: int


def _count(name: str, value: Any, default: int) -> int:
    v = default if value is None else value
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise fail("benchmark", f"nki.benchmark {name}={value!r} must be a non-negative integer")
    return v


class BenchmarkKernel(LegacyKernel):
    """A kernel wrapped by ``nki.benchmark`` / ``nki.profile``: calling it times it."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from trnsim.nki.benchmark import profile_kernel

        opts = self.options
        warmup = _count("warmup", opts.get("warmup"), 10)
        iters = _count("iters", opts.get("iters"), 100)
        target = resolve_target(opts.get("platform_target"))
        self._check_artifact_paths()  # before the run, not after it
        prof = profile_kernel(self, *args, target=target)
        self.benchmark_result = BenchmarkResult(Latency(prof.total_s, target), prof, warmup, iters)
        self._write_artifacts(prof)
        return None

    def __getitem__(self, key: Any) -> BenchmarkKernel:
        k = super().__getitem__(key)
        return BenchmarkKernel(k.legacy_fn, k.grid, **self.options)

    def _artifact_paths(self) -> dict[str, str]:
        """{option: path} of the files this call writes."""
        opts = self.options
        directory = opts.get("working_directory")
        profile_mode = opts.get("mode") == "profile"
        base = str(directory) if directory is not None else ""
        trace = opts.get("save_trace_name") or ("profile.ntff" if profile_mode else None)
        neff = opts.get("save_neff_name") or ("file.neff" if profile_mode else None)
        paths = {"save_trace_name": trace, "save_neff_name": neff}
        if profile_mode:
            paths["timeline"] = "timeline.png"
        return {k: os.path.join(base, str(v)) for k, v in paths.items() if v}

    def _check_artifact_paths(self) -> None:
        """Two artifacts may not be one file (one would silently replace the other)."""
        from trnsim.report.output import distinct_outputs

        if self.options.get("mode") == "profile":
            return  # the directory is made by the run; its three names differ
        distinct_outputs({k: Path(v) for k, v in self._artifact_paths().items()}, {})

    def _write_artifacts(self, prof: Profile) -> None:
        opts = self.options
        directory = opts.get("working_directory")
        profile_mode = opts.get("mode") == "profile"
        if profile_mode:
            if directory is None or not os.path.isabs(str(directory)):
                raise fail(
                    "profile",
                    f"nki.profile working_directory must be an absolute path, got {directory!r}",
                )
            os.makedirs(directory, exist_ok=True)
        base = str(directory) if directory is not None else ""
        trace = opts.get("save_trace_name") or ("profile.ntff" if profile_mode else None)
        neff = opts.get("save_neff_name") or ("file.neff" if profile_mode else None)
        if trace:
            from trnsim.report.perfetto import write_trace

            write_trace(prof, os.path.join(base, trace))
        if neff:
            from trnsim.report.output import atomic_write

            summary = {
                "what": "trnsim instruction summary (no NEFF exists on trnsim)",
                "kernel": self.__name__,
                "target": self.benchmark_result.nc_latency.target,
                "latency_s": prof.total_s,
                "instructions": prof.instructions,
                "instruction_counts": dict(prof.instruction_counts),
                "neuron_profile": prof.neuron_profile(),
            }

            def write(tmp: str) -> None:
                with open(tmp, "w") as f:
                    json.dump(summary, f, indent=1)

            atomic_write(os.path.join(base, neff), write)
        if profile_mode:
            from trnsim.report.timeline import write_timeline

            write_timeline(prof, os.path.join(base, "timeline.png"))


def benchmark(kernel: Any = None, **kwargs: Any) -> Any:
    """``nki.benchmark(kernel, warmup=, iters=, ...)`` or ``@nki.benchmark(...)``."""
    if kernel is None:
        return lambda f: BenchmarkKernel(f, mode="benchmark", **kwargs)
    return BenchmarkKernel(kernel, mode="benchmark", **kwargs)


def profile(func: Any = None, **kwargs: Any) -> Any:
    """``@nki.profile(working_directory=..., ...)``: time the kernel and write its Perfetto
    trace, instruction summary and timeline PNG into ``working_directory``."""
    if func is None:
        return lambda f: BenchmarkKernel(f, mode="profile", **kwargs)
    return BenchmarkKernel(func, mode="profile", **kwargs)
