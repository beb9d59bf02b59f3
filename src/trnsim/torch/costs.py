"""Time every recorded op with trnsim's own models (no PyTorch here).

Per record (``trnsim.torch.profile.OpRecord``), on one rank of ``chip`` (``ranks_per_chip``
ranks share a chip; the eager default is one NeuronCore: ``ranks_per_chip = chip.cores``):

- **kernels** (a group of records that one NKI kernel runs: a high-level function such as
  scaled-dot-product attention or RMSNorm, or a fused group of ``trnsim.torch.compile``) are
  timed as one op: a flash-attention forward, with ``kernel_timing``, by running trnsim's
  attention NKI kernel (``trnsim/perf/kernels/attention_fwd.py``) for one head on the timing
  model, times the heads; otherwise attention as the performance model's ``attention`` op (its
  FLOPs, causal pairs only when the mask is causal, and the HBM bytes of Q, K, V and the
  output); every other group as one ``vector`` pass over the bytes entering and leaving it;
- **matmuls** outside kernels: with ``kernel_timing`` (the eager profile's default) the matmul
  kernel of the performance tables (``trnsim/perf/kernels/matmul_table.py``) is run
  timing-only for the exact shape and scheduled by the core timing model (its instructions
  become the profile's instruction layer; cached per shape); otherwise, or where the kernel
  cannot run the shape or dtype (fp32, MX), the performance model's compute model;
- **vector / gather** ops: the performance model (HBM roofline plus its fixed cost per op);
- **collectives**: ``trnsim.perf.comm.group_time`` (``trnsim.fabric`` on the system);
- **free** ops and **fallbacks**: zero (fallbacks are listed, not timed).

The compute model, its fitted efficiency (``SoftwareStack.profile``) and the precision are
those ``trnsim train`` uses (``trnsim.perf``), so a shapes-only step and the training estimate
price the same op alike.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from trnsim.hw import ChipSpec, SystemSpec
from trnsim.hw import chip as lookup_chip
from trnsim.perf import comm
from trnsim.perf.compute import ComputeModel, Efficiency, RankWork
from trnsim.perf.precision import Precision, precision
from trnsim.perf.stacks import resolve_stack
from trnsim.perf.table_model import default_model
from trnsim.torch.numerics import Numerics
from trnsim.torch.profile import OpRecord, Profile
from trnsim.workloads.graph import Op

ATTENTION_KERNEL = "flash attention"


@dataclass(frozen=True, slots=True)
class Pricer:
    """The per-op cost functions of one rank (see the module docstring)."""

    chip: ChipSpec
    ranks_per_chip: int
    prec: Precision
    model: ComputeModel
    eff: Efficiency
    system: SystemSpec | None = None
    kernel_timing: bool = False

    @classmethod
    def make(
        cls,
        chip: ChipSpec | str = "trn3",
        ranks_per_chip: int | None = None,
        prec: str | Precision = "bf16",
        system: SystemSpec | None = None,
        kernel_timing: bool = False,
        stack: str | None = None,
    ) -> Pricer:
        c = lookup_chip(chip) if isinstance(chip, str) else chip
        rpc = ranks_per_chip if ranks_per_chip is not None else max(1, c.cores)
        cm = default_model(c, rpc)
        p = precision(prec)
        eff = resolve_stack(stack, c, "train").profile(cm, c, p.name)
        return cls(c, rpc, p, cm, eff, system, kernel_timing)

    def work(self, op: Op, flops: float, byts: float, rows: float, mmk: Any = None) -> float:
        count, m, k, n = mmk if mmk else (0, 0, 0, 0)
        w = RankWork(
            op, flops, byts, 0.0, max(rows, 1.0), 0.0, float(m), float(k), float(n), float(count)
        )
        return self.model.op_time(w, self.chip, self.prec, self.eff)

    def matmul(self, rec: OpRecord) -> float:
        if self.kernel_timing and rec.mmk:
            dt = {"bf16": "bfloat16", "fp16": "bfloat16", "fp8": "float8_e4m3fn"}.get(
                self.prec.compute, ""
            )
            timed = kernel_time(rec.mmk, dt, self.chip.core.name if self.chip.core else "")
            if timed is not None:
                seconds, instrs = timed
                rec.instructions = instrs
                rec.source = "matmul kernel on the timing model"
                return seconds
        rec.source = f"{self.model.name} compute model"
        rows = rec.mmk[1] if rec.mmk else 1
        return self.work(
            Op(rec.op, "matmul", "none", flops=rec.flops), rec.flops, rec.bytes, rows, rec.mmk
        )

    def vector(self, name: str, byts: float, elems: float, kind: str = "vector") -> float:
        op = Op(name, kind, "none", act_elems=0.0, vector_elems=elems)
        return self.work(op, 0.0, byts, 1.0)

    def attention(self, flops: float, byts: float, pairs_heads: float) -> float:
        op = Op("attention", "attention", "none", flops=flops, vector_elems=pairs_heads)
        return self.model.op_time(
            RankWork(op, flops, byts, 0.0, 1.0, pairs_heads), self.chip, self.prec, self.eff
        )

    def attention_kernel(self, members: list[OpRecord], mm: list[OpRecord]) -> float | None:
        """A flash-attention forward timed by running trnsim's attention NKI kernel
        (``trnsim/perf/kernels/attention_fwd.py``, the kernel of ``trnsim microbench``) for one
        head on the timing model, times the heads; None where it does not apply (not timing
        kernels, a backward, a sequence the kernel does not tile, a head over 128)."""
        first = mm[0]
        if (
            not self.kernel_timing
            or "backward" in first.kernel
            or first.mmk is None
            or self.chip.core is None
        ):
            return None
        count, s_q, d, s_k = first.mmk
        causal = "causal" in first.kernel
        timed = attention_time(s_q, s_k, d, causal, self.chip.core.name)
        if timed is None:
            return None
        seconds, instrs = timed
        first.instructions = instrs
        for m in members:
            m.source = "attention NKI kernel on the timing model"
        return seconds * count

    def collective(self, rec: OpRecord) -> float:
        if self.system is None or rec.collective is None:
            return 0.0
        kind, ranks, stride, size = rec.collective
        return comm.group_time(kind, size, ranks, stride, self.system, self.ranks_per_chip)


_CORE_DTYPES = {"bfloat16": "bf16", "float16": "bf16", "float8_e4m3fn": "fp8", "float8_e5m2": "fp8"}


@lru_cache(maxsize=512)
def kernel_time(
    mmk: tuple[int, int, int, int], dtype: str, core: str
) -> tuple[float, tuple[tuple[str, str, float, float], ...]] | None:
    """(seconds, instruction schedule) of ``count`` products ``[m, k] x [k, n]`` run as the
    table kernel on ``core`` (timing-only), or None where it does not apply (fp32, MX, a
    shape the kernel refuses)."""
    from trnsim.core.timing import schedule
    from trnsim.errors import TrnsimError
    from trnsim.nki.benchmark import record
    from trnsim.perf.tables import KERNEL, kernel_module

    dt = _CORE_DTYPES.get(dtype)
    count, m, k, n = mmk
    if dt is None or not core or min(m, k, n) < 1:
        return None
    try:
        mod = kernel_module()
        a_t, b = mod.make_inputs(P=m, K=k, Q=n, dtype=dt, empty=True)
        stream = record(getattr(mod, KERNEL), a_t, b, target=core)
        prof = schedule(stream, core)
    except (TrnsimError, AssertionError, ValueError, ZeroDivisionError):
        return None
    return prof.total_s * count, _schedule_rows(prof)


@lru_cache(maxsize=128)
def attention_time(
    s_q: int, s_k: int, d: int, causal: bool, core: str
) -> tuple[float, tuple[tuple[str, str, float, float], ...]] | None:
    """(seconds, instruction schedule) of one head of ``trnsim/perf/kernels/attention_fwd.py``
    on ``core`` (timing-only), or None for shapes it does not take (S_q != S_k, S not a
    multiple of 128, or of 512 above 512, head dim over 128)."""
    from pathlib import Path

    from trnsim.core.timing import schedule
    from trnsim.errors import TrnsimError
    from trnsim.nki.benchmark import record
    from trnsim.nki.kernelfile import load_module

    if s_q != s_k or s_q % 128 or (s_q > 512 and s_q % 512) or not 1 <= d <= 128:
        return None
    import trnsim.perf

    path = Path(trnsim.perf.__file__).parent / "kernels" / "attention_fwd.py"
    try:
        mod = load_module(str(path))
        q, k, v = mod.make_inputs(S=s_q, d=d, empty=True)
        kernel = mod.attention_fwd if causal else mod.attention_full
        prof = schedule(record(kernel, q, k, v, target=core), core)
    except (TrnsimError, AssertionError, ValueError, OSError):
        return None
    return prof.total_s, _schedule_rows(prof)


def _schedule_rows(prof: Any) -> tuple[tuple[str, str, float, float], ...]:
    sched = prof.schedule
    if sched is None:
        return ()
    return tuple(
        (sched.track_names[sched.track[i]], ins.opcode.value, sched.start[i], sched.end[i])
        for i, ins in enumerate(sched.instructions[:4000])
    )


def time_records(
    records: list[OpRecord],
    numerics: Numerics | None = None,
    chip: str | ChipSpec = "trn3",
    ranks_per_chip: int | None = None,
    system: SystemSpec | None = None,
    kernel_timing: bool = True,
    prec: str | None = None,
    stack: str | None = None,
    device: str = "",
) -> Profile:
    """Fill in every record's ``seconds`` and return the ``Profile``."""
    p = prec or _precision_of(numerics, records)
    pricer = Pricer.make(chip, ranks_per_chip, p, system, kernel_timing, stack)
    price(records, pricer)
    dt = pricer.prec.compute
    peak = pricer.chip.peak(_peak_dtype(pricer.chip, dt)) / pricer.ranks_per_chip
    name = device or (
        f"one NeuronCore of {pricer.chip.name}"
        if pricer.ranks_per_chip == pricer.chip.cores
        else f"one rank of {pricer.chip.name} ({pricer.ranks_per_chip} per chip)"
    )
    assumptions = [
        f"device: {name}; ops run one after another (one stream)",
        f"compute model: {pricer.model.name}, efficiency "
        + ", ".join(f"{k}={v:g}" for k, v in pricer.eff.as_dict().items()),
        f"precision: {pricer.prec.name} (peak {peak / 1e12:.1f} TFLOP/s per rank, {dt})",
    ]
    if kernel_timing:
        assumptions.append("matmuls: the perf tables' NKI matmul kernel on the timing model")
    return Profile(
        records, name, peak, numerics.describe() if numerics else "", assumptions=assumptions
    )


def _peak_dtype(chip: ChipSpec, dt: str) -> str:
    from trnsim.perf.precision import compute_dtype

    return compute_dtype(chip, dt)[0]


def _precision_of(numerics: Numerics | None, records: list[OpRecord]) -> str:
    if numerics is not None and numerics.operands is not None:
        return {
            "float32": "fp32",
            "bfloat16": "bf16",
            "float16": "fp16",
            "float8_e4m3fn": "fp8",
            "float8_e5m2": "fp8",
            "mxfp8": "mxfp8",
            "mxfp4": "mxfp4",
        }.get(numerics.operands, "bf16")
    for r in records:
        if r.kind == "matmul":
            return {"float32": "fp32", "float16": "fp16"}.get(r.dtype, "bf16")
    return "bf16"


def price(records: list[OpRecord], pricer: Pricer) -> None:
    """Set ``seconds`` of every record: kernels (groups) as one op each, charged to their
    records in proportion to bytes, the rest op by op (module docstring)."""
    groups: dict[int, list[OpRecord]] = defaultdict(list)
    for r in records:
        if r.group >= 0 and r.kind not in ("free", "fallback", "collective"):
            groups[r.group].append(r)
        else:
            r.seconds = _single(r, pricer)
    for members in groups.values():
        total = _group(members, pricer)
        weight = [max(m.bytes, 1.0) + m.flops for m in members]
        s = sum(weight)
        for m, w in zip(members, weight, strict=True):
            m.seconds = total * w / s


def _single(r: OpRecord, pricer: Pricer) -> float:
    if r.kind == "kernel":  # an NKI kernel, timed by its own instructions when it ran
        return r.seconds
    if r.kind == "matmul":
        return pricer.matmul(r)
    if r.kind in ("vector", "gather"):
        r.source = f"{pricer.model.name} compute model ({r.kind})"
        return pricer.vector(r.op, r.bytes, r.elems, r.kind)
    if r.kind == "collective":
        r.source = "trnsim.fabric"
        return pricer.collective(r)
    return 0.0


def _group(members: list[OpRecord], pricer: Pricer) -> float:
    kernel = members[0].kernel
    mm = [m for m in members if m.kind == "matmul"]
    if kernel.startswith(ATTENTION_KERNEL) and mm:
        timed = pricer.attention_kernel(members, mm)
        if timed is not None:
            return timed
        flops = sum(m.flops for m in mm)
        causal = any("causal" in m.kernel for m in members)
        pairs = sum(m.mmk[0] * m.mmk[1] * m.mmk[3] for m in mm[:1] if m.mmk)
        if causal and mm[0].mmk:
            s = mm[0].mmk[3]
            flops *= (s + 1) / (2 * s)
            pairs *= (s + 1) / (2 * s)
        byts = _external_bytes(members)
        for m in members:
            m.source = "attention op of the compute model"
        return pricer.attention(flops, byts, pairs)
    # a fused group: matmuls keep their own time, the rest is one pass over its external bytes
    t = sum(pricer.matmul(m) for m in mm)
    rest = [m for m in members if m.kind != "matmul"]
    if rest:
        for m in rest:
            m.source = "fused vector pass (compute model)"
        elems = max(m.elems for m in rest)
        t += pricer.vector(kernel or "fused", _external_bytes(rest), elems)
    return t


def _external_bytes(members: list[OpRecord]) -> float:
    """HBM bytes of a kernel: what enters the first op and leaves the last (intermediate
    results stay on chip), and at least each member's largest operand once."""
    first, last = members[0], members[-1]
    return max(first.bytes, 0.0) + last.elems * _itemsize(last.dtype)


def _itemsize(dtype: str) -> float:
    return {"float32": 4, "bfloat16": 2, "float16": 2, "int64": 8, "bool": 1}.get(dtype, 4)
