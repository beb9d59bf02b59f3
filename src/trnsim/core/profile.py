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
    """Timing of one kernel on one NeuronCore generation (a model: see ``assumptions``)."""

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
    hbm_bw: float
    mbu: float
    instruction_counts: tuple[tuple[str, int], ...]
    critical_path: tuple[Contributor, ...]
    assumptions: tuple[str, ...]
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
            # the HBM bandwidth the active cores' DMA can draw (MBU's denominator), not the
            # chip's HBM bandwidth: named for what it is (issue 21)
            "dma_hbm_bw": self.hbm_bw,
            "mbu": self.mbu,
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
            "  memory   "
            + ", ".join(f"{m} {fmt_bytes(b)}" for m, b in self.bytes_by_memory)
            + f"; MBU {self.mbu:.1%} of the {fmt_rate(self.hbm_bw, 'B/s')} of HBM the "
            "cores' DMA can draw",
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
