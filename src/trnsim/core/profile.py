"""The result of timing a kernel: a ``Profile`` (totals, per-engine figures, critical path).

Units are SI (seconds, bytes, FLOP/s, bytes/s). ``to_json()`` gives the machine form (the keys
are documented in the README section of issue 5), ``summary()`` a human table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trnsim.core.instruction import Instruction


def _si(value: float, unit: str) -> str:
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def fmt_seconds(s: float) -> str:
    """Seconds with a readable unit (ms, us, ns)."""
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
        if abs(s) >= scale:
            return f"{s / scale:.4g} {unit}"
    return f"{s / 1e-9:.4g} ns"


def fmt_rate(value: float, unit: str) -> str:
    return _si(value, unit)


def fmt_bytes(n: float) -> str:
    return _si(n, "B")


@dataclass(frozen=True, slots=True)
class TrackStats:
    """One engine or DMA queue: busy seconds, utilisation (busy / total), instruction count."""

    name: str
    busy_s: float
    utilisation: float
    instructions: int


@dataclass(frozen=True, slots=True)
class Contributor:
    """A group of critical-path instructions (same opcode, engine and source line)."""

    opcode: str
    track: str
    location: str
    seconds: float
    fraction: float
    count: int


@dataclass(slots=True)
class Schedule:
    """The per-instruction schedule (parallel lists, index = position in the record)."""

    instructions: list[Instruction]
    start: list[float]
    end: list[float]
    track: list[int]
    track_names: list[str]


@dataclass(frozen=True, slots=True)
class Profile:
    """Timing of one kernel on one NeuronCore generation (a model: see ``assumptions``).

    ``total_s``: the modelled latency as ``nki.benchmark`` reports it: the instruction stream's
    span plus ``launch_s`` (the fixed cost of a launch). ``dma_bw``: the DMA bandwidth the
    kernel's cores can stream at (engines x engine bandwidth x efficiency, at most their share
    of HBM), the denominator of ``mbu``. The neuron-profile figures: ``hbm_read_bytes`` /
    ``hbm_write_bytes`` (HBM bytes the DMA engines read and wrote, spills included),
    ``spill_save_bytes`` / ``spill_reload_bytes`` (of which spills and refills),
    ``hardware_flops`` / ``transpose_flops`` (counted as the profiler counts them:
    ``trnsim.core.costs.hardware_flops``), per-engine active time (``engines``); see
    ``neuron_profile()``.
    """

    target: str
    total_s: float
    tracks: tuple[TrackStats, ...]
    engines: tuple[TrackStats, ...]
    flops: float
    flops_per_s: float
    peak_flops: float
    peak_dtype: str
    mfu: float
    bytes_by_memory: tuple[tuple[str, int], ...]
    dma_bw: float
    mbu: float
    instruction_counts: tuple[tuple[str, int], ...]
    critical_path: tuple[Contributor, ...]
    assumptions: tuple[str, ...]
    launch_s: float = 0.0
    hbm_read_bytes: int = 0
    hbm_write_bytes: int = 0
    spill_save_bytes: int = 0
    spill_reload_bytes: int = 0
    hardware_flops: float = 0.0
    transpose_flops: float = 0.0
    schedule: Schedule | None = field(default=None, compare=False, repr=False)

    @property
    def instructions(self) -> int:
        return sum(n for _, n in self.instruction_counts)

    def engine(self, name: str) -> TrackStats:
        for t in self.engines:
            if t.name == name:
                return t
        from trnsim.errors import UnknownNameError

        valid = ", ".join(t.name for t in self.engines)
        raise UnknownNameError(f"no engine {name!r} in this profile; valid: {valid}")

    @property
    def dma_active_s(self) -> float:
        """Seconds during which at least one DMA transfer moved data."""
        for t in self.engines:
            if t.name == "dma":
                return t.busy_s
        return 0.0

    def neuron_profile(self) -> dict[str, float]:
        """The figures under the names of neuron-profile's JSON summary (SDK
        ``tools/neuron-explorer/profile-schema-reference.rst``), so a modelled profile can be
        held against a measured one. As in that JSON, the ``*_percent`` values are fractions
        of ``total_time`` (0.41 means 41%)."""
        out: dict[str, float] = {
            "total_time": self.total_s,
            "hbm_read_bytes": self.hbm_read_bytes,
            "hbm_write_bytes": self.hbm_write_bytes,
            "spill_save_bytes": self.spill_save_bytes,
            "spill_reload_bytes": self.spill_reload_bytes,
            "hardware_flops": self.hardware_flops,
            "transpose_flops": self.transpose_flops,
            "dma_active_time": self.dma_active_s,
            "dma_active_time_percent": self.dma_active_s / self.total_s if self.total_s else 0.0,
        }
        for t in self.engines:
            if t.name in ("tensor", "vector", "scalar", "gpsimd"):
                out[f"{t.name}_engine_active_time"] = t.busy_s
                out[f"{t.name}_engine_active_time_percent"] = t.utilisation
                out[f"{t.name}_engine_instruction_count"] = t.instructions
        return out

    def to_json(self) -> dict[str, Any]:
        """The machine form: plain types, SI units."""
        return {
            "target": self.target,
            "total_s": self.total_s,
            "engines": {
                t.name: {
                    "busy_s": t.busy_s,
                    "utilisation": t.utilisation,
                    "instructions": t.instructions,
                }
                for t in self.engines
            },
            "dma_queues": {
                t.name: {"busy_s": t.busy_s, "instructions": t.instructions}
                for t in self.tracks
                if ".dma." in t.name or t.name.startswith("dma.")
            },
            "flops": self.flops,
            "flops_per_s": self.flops_per_s,
            "peak_flops": self.peak_flops,
            "peak_dtype": self.peak_dtype,
            "mfu": self.mfu,
            "bytes": dict(self.bytes_by_memory),
            "dma_bw": self.dma_bw,
            "mbu": self.mbu,
            "launch_s": self.launch_s,
            "hbm_read_bytes": self.hbm_read_bytes,
            "hbm_write_bytes": self.hbm_write_bytes,
            "spill_save_bytes": self.spill_save_bytes,
            "spill_reload_bytes": self.spill_reload_bytes,
            "hardware_flops": self.hardware_flops,
            "transpose_flops": self.transpose_flops,
            "dma_active_s": self.dma_active_s,
            "neuron_profile": self.neuron_profile(),
            "instruction_counts": dict(self.instruction_counts),
            "critical_path": [
                {
                    "opcode": c.opcode,
                    "track": c.track,
                    "location": c.location,
                    "seconds": c.seconds,
                    "fraction": c.fraction,
                    "count": c.count,
                }
                for c in self.critical_path
            ],
            "assumptions": list(self.assumptions),
        }

    def summary(self) -> str:
        """A human-readable table."""
        lines = [
            f"target {self.target}: {fmt_seconds(self.total_s)} for {self.instructions:,} "
            f"instructions (timing model; see assumptions)",
            f"  compute  {self.flops:.3e} FLOP, {fmt_rate(self.flops_per_s, 'FLOP/s')}, "
            f"MFU {self.mfu:.1%} of {fmt_rate(self.peak_flops, 'FLOP/s')} {self.peak_dtype}",
            f"  HBM      read {fmt_bytes(self.hbm_read_bytes)}, written "
            f"{fmt_bytes(self.hbm_write_bytes)} (spills {fmt_bytes(self.spill_save_bytes)} "
            f"saved, {fmt_bytes(self.spill_reload_bytes)} reloaded); MBU {self.mbu:.1%} of "
            f"{fmt_rate(self.dma_bw, 'B/s')} DMA; DMA active "
            f"{self.dma_active_s / self.total_s if self.total_s else 0.0:.0%}",
            f"  FLOPs    hardware {self.hardware_flops:.3e} (transposes "
            f"{self.transpose_flops:.3e}; as neuron-profile counts them)",
            "  engines  "
            + ", ".join(f"{t.name} {t.utilisation:.0%} ({t.instructions:,})" for t in self.engines),
            "  critical path (top contributors):",
        ]
        for c in self.critical_path:
            lines.append(
                f"    {c.fraction:6.1%}  {fmt_seconds(c.seconds):>10}  {c.opcode:<14} "
                f"{c.track:<10} x{c.count:<6} {c.location}"
            )
        counts = ", ".join(f"{op} {n:,}" for op, n in self.instruction_counts)
        lines.append(f"  counts   {counts}")
        return "\n".join(lines)
