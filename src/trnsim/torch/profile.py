"""The layered profile of a PyTorch run: modules, ATen ops, kernels, engine instructions.

No PyTorch here: ``OpRecord`` is what the capture (``trnsim.torch.mode``) records for each ATen
op, ``trnsim.torch.costs`` fills in its time, and ``Profile`` lays the ops end to end on one
device stream (eager PyTorch issues ops one after another), aggregates them per module and
writes JSON. ``trnsim.report.perfetto.write_layered_trace`` draws it (one track per layer).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class OpRecord:
    """One ATen op as the front end saw it.

    ``module``: the innermost ``nn.Module`` running it (qualified name, ``""`` outside any);
    ``phase``: ``forward`` or ``backward``; ``kind``: ``trnsim.torch.ops.classify``;
    ``flops``: Tensor-engine FLOPs (2 per MAC); ``bytes``: HBM bytes read and written;
    ``elems``: elements processed by the Vector/Scalar engines; ``mmk``: the matmul's
    ``(count, m, k, n)`` (count products, e.g. a batch); ``dtype``: the result dtype;
    ``kernel``: the kernel the op runs as (``ops.KERNELS``, or a fused group's name);
    ``collective``: ``(op, ranks, stride, bytes)`` of a collective; ``seconds``: its time
    (``trnsim.torch.costs``); ``instructions``: the kernel's instruction schedule when it was
    timed by running an NKI kernel (``(engine, opcode, start_s, end_s)``, relative);
    ``inputs``: the records that produced its tensor inputs (through views); ``users``: how
    many later records read one of its outputs (the dataflow ``fuse`` reads).
    """

    module: str
    op: str
    kind: str
    phase: str = "forward"
    flops: float = 0.0
    bytes: float = 0.0
    elems: float = 0.0
    mmk: tuple[int, int, int, int] | None = None
    dtype: str = ""
    kernel: str = ""
    group: int = -1
    collective: tuple[str, int, int, float] | None = None
    seconds: float = 0.0
    source: str = ""
    instructions: tuple[tuple[str, str, float, float], ...] = ()
    inputs: tuple[int, ...] = ()
    users: int = 0


@dataclass(slots=True)
class ModuleRow:
    module: str
    ops: int = 0
    seconds: float = 0.0
    flops: float = 0.0
    bytes: float = 0.0
    mfu: float = 0.0


@dataclass(slots=True)
class Profile:
    """Ops of one run, timed. ``peak_flops``: the device's peak for the compute dtype (MFU's
    denominator); ``device``: what one stream is (e.g. one NeuronCore-v4)."""

    records: list[OpRecord]
    device: str
    peak_flops: float
    numerics: str = ""
    assumptions: list[str] = field(default_factory=list)

    @property
    def timed(self) -> list[OpRecord]:
        return [r for r in self.records if r.kind not in ("free", "fallback")]

    @property
    def total_s(self) -> float:
        return sum(r.seconds for r in self.records)

    @property
    def flops(self) -> float:
        return sum(r.flops for r in self.records)

    @property
    def fallbacks(self) -> dict[str, int]:
        """``"module: op"`` -> count of the ops that have no Trainium mapping."""
        out: dict[str, int] = defaultdict(int)
        for r in self.records:
            if r.kind == "fallback":
                out[f"{r.module or '(top level)'}: {r.op}"] += 1
        return dict(out)

    def starts(self) -> list[float]:
        """Start time of each record on the one device stream."""
        t, out = 0.0, []
        for r in self.records:
            out.append(t)
            t += r.seconds
        return out

    def modules(self, depth: int | None = None) -> list[ModuleRow]:
        """Per module (truncated to ``depth`` name components when given): ops, seconds,
        FLOPs, bytes and MFU (FLOPs / (seconds x peak)), in first-seen order."""
        rows: dict[str, ModuleRow] = {}
        for r in self.records:
            if r.kind in ("free",):
                continue
            name = r.module or "(top level)"
            if depth is not None:
                name = ".".join(name.split(".")[:depth])
            row = rows.setdefault(name, ModuleRow(name))
            row.ops += 1
            row.seconds += r.seconds
            row.flops += r.flops
            row.bytes += r.bytes
        for row in rows.values():
            row.mfu = row.flops / (row.seconds * self.peak_flops) if row.seconds else 0.0
        return list(rows.values())

    def by_kind(self) -> dict[str, float]:
        out: dict[str, float] = defaultdict(float)
        for r in self.records:
            out[r.kind] += r.seconds
        return dict(out)

    def to_json(self, depth: int | None = None) -> dict[str, Any]:
        """Strict JSON, SI units (seconds, FLOP, bytes)."""
        total = self.total_s
        return {
            "device": self.device,
            "numerics": self.numerics,
            "total_s": total,
            "flops": self.flops,
            "peak_flops": self.peak_flops,
            "mfu": self.flops / (total * self.peak_flops) if total else 0.0,
            "ops": len(self.records),
            "by_kind_s": self.by_kind(),
            "modules": [
                {
                    "module": m.module,
                    "ops": m.ops,
                    "seconds": m.seconds,
                    "flops": m.flops,
                    "bytes": m.bytes,
                    "mfu": m.mfu,
                }
                for m in self.modules(depth)
            ],
            "fallbacks": self.fallbacks,
            "assumptions": list(self.assumptions),
        }


def fuse(records: list[OpRecord]) -> int:
    """Group records as the Neuron compiler fuses ops (``trnsim.torch.compile`` docstring):
    a ``vector`` op joins the group of a producer of one of its inputs when that producer is a
    ``vector`` or ``matmul`` op read by no other op (its result never goes to HBM). Records
    already in a kernel (``group >= 0``) stay there. Returns the number of groups made."""
    base = max((r.group for r in records), default=-1) + 1
    made = 0
    for r in records:
        if r.kind != "vector" or r.group >= 0:
            continue
        for i in r.inputs:
            p = records[i]
            if p.kind not in ("vector", "matmul") or p.users != 1 or p.kernel.startswith("flash"):
                continue
            if p.group < 0:
                p.group = base + made
                p.kernel = f"fused group {made}"
                made += 1
            r.group, r.kernel = p.group, p.kernel
            break
    return made
