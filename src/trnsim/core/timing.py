"""The timing model: schedule a recorded instruction stream on a NeuronCore's engines.

The model (a list scheduler over the recorded stream, in program order):

- Each compute engine (Tensor, Vector, Scalar, GpSimd) of each core runs its instructions in
  order; the engines and the DMA queues run in parallel. An instruction starts when its engine
  (queue) is free and its inputs are ready, and occupies the engine for its cost
  (``trnsim.core.costs``).
- Dependencies come from the memory regions instructions read and write, as the compiler's
  semaphores would enforce them: read-after-write (a reader waits for the end of every earlier
  writer of an overlapping region), write-after-read and write-after-write (a writer waits for
  every earlier reader and writer). PSUM accumulation groups are covered by the same rules:
  each accumulating matmul writes its PSUM region, so the group is ordered, a reader of the
  group waits for its last matmul, and the next group's first matmul waits for that reader.
- Regions are bounding boxes: (partition range x byte range) in SBUF/PSUM; in HBM a
  (row range x column range) rectangle under the operand's row stride when two operands share
  it, else the 1-D byte interval (conservative: may add a dependency, never drops one).
- DMA: a transfer goes to one of the core's ``queues_per_engine`` queues (round robin, or its
  ``queue`` attribute; each transfer is spread over the 16 engines, so a queue is a queue on
  every engine); within a queue transfers run in order. Each pays the fixed latency, then its
  data phase shares the core's DMA bandwidth and the chip's HBM bandwidth (fluid FIFO pipes;
  see ``costs.dma_cost``).
- ``core_barrier`` / ``sendrecv`` wait for every earlier instruction.

This module only reads ``Instruction`` records; ``benchmark`` (``trnsim.nki.benchmark``) runs
a kernel in timing-only mode to get them. The per-instruction work is O(overlapping regions)
with dictionary lookups, so streams of 10^5-10^6 instructions time in seconds.
"""

from __future__ import annotations

import gc
from collections import Counter, defaultdict
from collections.abc import Sequence
from operator import attrgetter

from trnsim.core import costs
from trnsim.core.costs import DmaModel
from trnsim.core.instruction import Instruction, Operand
from trnsim.core.isa import Engine, Op
from trnsim.core.profile import Contributor, Profile, Schedule, TrackStats
from trnsim.hw import ChipSpec, CoreSpec, core

ONCHIP_BUCKET_BYTES = 2048
"""Index granularity of SBUF/PSUM regions (a PSUM bank per partition; bookkeeping only)."""
HBM_PAGE_BYTES = 1 << 20
"""Index granularity of HBM regions (bookkeeping only; overlaps are tested exactly)."""
HBM_WIDE_PAGES = 4096
"""HBM regions spanning more pages than this are kept in a list tested against every region."""
CRITICAL_PATH_TOP = 6

_COMPUTE = (Engine.TENSOR, Engine.VECTOR, Engine.SCALAR, Engine.GPSIMD)
_SYNC_OPS = frozenset({Op.CORE_BARRIER, Op.SENDRECV})
_K_COMPUTE, _K_DMA, _K_SYNC = 0, 1, 2
_CORE_OF = attrgetter("core")


def _span(o: Operand) -> tuple[int, int]:
    lo = hi = 0
    for stride, size in o.pattern:
        d = stride * (size - 1)
        if d > 0:
            hi += d
        else:
            lo += d
    return lo, hi


def region_of(o: Operand) -> tuple:
    """The bounding region of an operand (see module docstring)."""
    isz = o.itemsize
    lo, hi = _span(o)
    if o.memory != "hbm":
        step, count = o.partition_pattern
        d = step * (count - 1)
        p0 = o.partition + min(0, d)
        return (
            o.memory,
            o.core,
            p0,
            o.partition + max(0, d) + 1,
            o.offset + lo * isz,
            o.offset + (hi + 1) * isz,
        )
    pstride, count = o.partition_pattern
    row = pstride * isz
    d = row * (count - 1)
    a0 = o.offset + lo * isz + min(0, d)
    a1 = o.offset + (hi + 1) * isz + max(0, d)
    c_lo = o.offset + lo * isz
    width = (hi - lo + 1) * isz
    if count > 1 and row > 0 and (c_lo % row) + width <= row:
        r0 = c_lo // row
        return ("hbm", row, r0, r0 + count, c_lo % row, c_lo % row + width, a0, a1)
    return ("hbm", 0, 0, 0, 0, 0, a0, a1)


def regions_overlap(a: tuple, b: tuple) -> bool:
    """Whether two regions (from ``region_of``) may share a byte."""
    if a[0] != b[0]:
        return False
    if a[0] == "hbm":
        if a[6] >= b[7] or b[6] >= a[7]:
            return False
        if a[1] and a[1] == b[1]:
            return a[2] < b[3] and b[2] < a[3] and a[4] < b[5] and b[4] < a[5]
        return True
    return a[1] == b[1] and a[2] < b[3] and b[2] < a[3] and a[4] < b[5] and b[4] < a[5]


class _Regions:
    """Distinct regions, each with the list of regions overlapping it (itself included)."""

    def __init__(self) -> None:
        self.ids: dict[tuple, int] = {}
        self.keys: list[tuple] = []
        self.overlaps: list[list[int]] = []
        self.buckets: dict[tuple, list[int]] = defaultdict(list)
        self.wide: list[int] = []

    def _bucket_keys(self, r: tuple) -> list[tuple] | None:
        if r[0] == "hbm":
            p0, p1 = r[6] // HBM_PAGE_BYTES, (r[7] - 1) // HBM_PAGE_BYTES
            if p1 - p0 > HBM_WIDE_PAGES:
                return None
            return [("hbm", p) for p in range(p0, p1 + 1)]
        b0, b1 = r[4] // ONCHIP_BUCKET_BYTES, (r[5] - 1) // ONCHIP_BUCKET_BYTES
        return [(r[0], r[1], b) for b in range(b0, b1 + 1)]

    def intern(self, r: tuple) -> int:
        rid = self.ids.get(r)
        if rid is not None:
            return rid
        rid = len(self.keys)
        self.ids[r] = rid
        self.keys.append(r)
        keys = self._bucket_keys(r)
        if keys is None:
            cands: list[int] = list(range(rid))
            self.wide.append(rid)
        else:
            cands = list(self.wide)
            for k in keys:
                cands.extend(self.buckets[k])
        mine = [rid]
        regions, overlaps = self.keys, self.overlaps
        kind, a1, a2, a3, a4, a5 = r[:6]
        if kind == "hbm":  # regions_overlap(r, b), inlined (this loop is hot)
            a6, a7 = r[6], r[7]
            for q in dict.fromkeys(cands):  # each candidate once, in order
                b = regions[q]
                if b[0] != "hbm" or a6 >= b[7] or b[6] >= a7:
                    continue
                if a1 and a1 == b[1] and not (a2 < b[3] and b[2] < a3 and a4 < b[5] and b[4] < a5):
                    continue
                mine.append(q)
                overlaps[q].append(rid)
        else:
            for q in dict.fromkeys(cands):
                b = regions[q]
                if (
                    b[0] == kind
                    and a1 == b[1]
                    and a2 < b[3]
                    and b[2] < a3
                    and a4 < b[5]
                    and b[4] < a5
                ):
                    mine.append(q)
                    overlaps[q].append(rid)
        overlaps.append(mine)
        if keys is not None:
            for k in keys:
                self.buckets[k].append(rid)
        return rid


def schedule(
    instrs: Sequence[Instruction],
    target: str | CoreSpec = "gen4",
    *,
    chip: ChipSpec | None = None,
    active_cores: int | None = None,
    dma_efficiency: float | None = None,
) -> Profile:
    """Time a recorded instruction stream on ``target`` and return its ``Profile``.

    ``active_cores``: cores of the chip sharing its HBM bandwidth (default: the cores the
    stream uses). ``dma_efficiency``: override the calibrated DMA efficiency.
    """
    # The stream holds millions of small objects; the cyclic GC would re-walk them all while the
    # scheduler allocates its lists (10x slower). Nothing here makes cycles.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _schedule(instrs, target, chip, active_cores, dma_efficiency)
    finally:
        if enabled:
            gc.enable()


def _schedule(
    instrs: Sequence[Instruction],
    target: str | CoreSpec,
    chip: ChipSpec | None,
    active_cores: int | None,
    dma_efficiency: float | None,
) -> Profile:
    spec = target if isinstance(target, CoreSpec) else core(target)
    instrs = list(instrs)
    used_cores = set(map(_CORE_OF, instrs))
    active = active_cores or max(1, len(used_cores))
    dma = DmaModel.for_core(spec, chip, active, dma_efficiency)
    clocks = {e: costs.engine_clock(spec, e) for e in (*_COMPUTE, Engine.SYNC)}
    n = len(instrs)
    start = [0.0] * n
    end = [0.0] * n
    pred = [-1] * n
    track_of = [0] * n

    regions = _Regions()
    # Per region: the end of its last writer (w_t, w_i), and of its last access, reader or
    # writer (a_t, a_i; a writer ties over a reader). A reader waits for w_t of the regions
    # it overlaps, a writer for a_t (read-after-write; write-after-read and -write).
    w_t: list[float] = []
    w_i: list[int] = []
    a_t: list[float] = []
    a_i: list[int] = []
    # Per distinct operand: (region id, shape-signature id, the regions overlapping it).
    operand_info: dict[Operand, tuple[int, int, list[int]]] = {}
    sig_ids: dict[tuple, int] = {}
    # Per instruction shape (opcode, engine, attributes, core, operand signatures): the entry
    # (kind, seconds, entry id) of a compute instruction, (kind, DmaCost parts, queue, entry
    # id) of a transfer; per entry id its statistics and how many instructions used it.
    cost_cache: dict[tuple, tuple] = {}
    # Attributes -> a small id, looked up by the tuple's id() first: the recorder shares one
    # tuple between equal attribute sets, and ``instrs`` keeps them all alive for this call.
    attr_ids: dict[int, int] = {}
    attr_vals: dict[tuple, int] = {}
    entry_stats: list[tuple] = []
    entry_uses: list[int] = []

    track_ids: dict[tuple, int] = {}
    track_names: list[str] = []
    track_free: list[float] = []
    track_last: list[int] = []
    track_busy: list[float] = []
    track_count: list[int] = []
    barrier = [
        0.0,
        -1,
    ]  # the last barrier's time and index: where a track first used after it starts
    # Per core: [round-robin counter, DMA pipe free at, by, HBM share free at, by, queue ->
    # track id].
    dma_state: dict[int, list] = {}
    n_queues = dma.queues
    mem_index = {"hbm": 0, "sbuf": 1, "psum": 2}
    last_end, last_idx = 0.0, -1
    dma_spans: list[tuple[float, float]] = []
    multi = len(used_cores) > 1

    def track(key: tuple, name: str) -> int:
        tid = track_ids.get(key)
        if tid is None:
            tid = len(track_names)
            track_ids[key] = tid
            track_names.append(name)
            track_free.append(barrier[0])
            track_last.append(barrier[1])
            track_busy.append(0.0)
            track_count.append(0)
        return tid

    def info_of(o: Operand) -> tuple[int, int, list[int]]:
        rid = regions.intern(region_of(o))
        while len(w_t) < len(regions.keys):
            w_t.append(0.0)
            w_i.append(-1)
            a_t.append(0.0)
            a_i.append(-1)
        sig = (o.role, o.memory, o.dtype, o.itemsize, o.partition_pattern, o.pattern)
        sid = sig_ids.setdefault(sig, len(sig_ids))
        info = operand_info[o] = (rid, sid, regions.overlaps[rid])
        return info

    def cost_of(ins: Instruction) -> tuple:
        eid = len(entry_stats)
        b = [0, 0, 0]
        # a tensor-indirection operand moves (P, num_elem) elements, not its whole indexed view
        moved = costs.tensor_indirect_access(ins)
        for o in moved.src + moved.dst:
            b[mem_index[o.memory]] += o.nbytes
        f, rate = 0.0, ""
        if ins.opcode in _SYNC_OPS:
            entry: tuple = (_K_SYNC, 0.0, eid)
            dma_bytes = 0
        elif ins.engine is Engine.DMA:
            d = costs.dma_cost(ins, dma)
            b[0] = d.hbm_bytes  # = the HBM operands' bytes, except for indirect DMAs
            q = ins.attr("queue")
            entry = (_K_DMA, d.latency_s, d.hbm_s, d.occupancy_s, d.data_s, q, eid)
            dma_bytes = d.hbm_bytes
        else:
            sec = costs.instruction_cycles(ins, spec) / clocks[ins.engine]
            f = costs.matmul_flops(ins) if ins.engine is Engine.TENSOR else 0.0
            rate = costs.matmul_rate_class(ins) if f else ""
            c, eng = ins.core, ins.engine.value
            entry = (
                _K_COMPUTE,
                sec,
                eid,
                track((c, ins.engine), f"core{c}.{eng}" if multi else eng),
            )
            dma_bytes = 0
        entry_stats.append((ins.opcode, f, rate, *b, dma_bytes))
        entry_uses.append(0)
        return entry

    def attrs_id(attrs: tuple) -> int:
        aid = attr_ids[id(attrs)] = attr_vals.setdefault(attrs, len(attr_vals))
        return aid

    get_info = operand_info.get
    get_cost = cost_cache.get
    get_attrs = attr_ids.get
    for idx, ins in enumerate(instrs):
        opcode, engine, dst, src, attrs, _, _, c = ins
        # ---- operands -> regions and read-after-write waits; the cost of this shape -------
        aid = get_attrs(id(attrs))
        if aid is None:
            aid = attrs_id(attrs)
        ckey = [opcode, engine, aid, c]
        ready, dep = 0.0, -1
        src_ids = []
        for o in src:
            inf = get_info(o) or info_of(o)
            src_ids.append(inf[0])
            ckey.append(inf[1])
            for q in inf[2]:
                if w_t[q] > ready:
                    ready, dep = w_t[q], w_i[q]
        dst_ids = []
        for o in dst:
            inf = get_info(o) or info_of(o)
            dst_ids.append(inf[0])
            ckey.append(inf[1])
            for q in inf[2]:
                if a_t[q] > ready:
                    ready, dep = a_t[q], a_i[q]
        ckey = tuple(ckey)
        entry = get_cost(ckey)
        if entry is None:
            entry = cost_cache[ckey] = cost_of(ins)
        kind = entry[0]
        # ---- issue ------------------------------------------------------------------------
        if kind == _K_COMPUTE:
            entry_uses[entry[2]] += 1
            tid = entry[3]
            t0 = ready
            if track_free[tid] > t0:
                t0, dep = track_free[tid], track_last[tid]
            t1 = t0 + entry[1]
        elif kind == _K_DMA:
            _, latency_s, hbm_s, occupancy_s, data_s, q, eid = entry
            entry_uses[eid] += 1
            cs = dma_state.get(c)
            if cs is None:
                cs = dma_state[c] = [0, 0.0, -1, 0.0, -1, {}]
            if q is None:
                q = cs[0] % n_queues
                cs[0] += 1
            tid = cs[5].get(q)
            if tid is None:
                tid = cs[5][q] = track((c, "dma", q), f"core{c}.dma.q{q}" if multi else f"dma.q{q}")
            t0 = ready
            if track_free[tid] > t0:
                t0, dep = track_free[tid], track_last[tid]
            t_data = t0 + latency_s
            if cs[1] > t_data:  # the core's DMA bandwidth (a fluid FIFO pipe)
                t_data, dep = cs[1], cs[2]
            if hbm_s > 0.0:  # the core's share of the chip's HBM bandwidth
                if cs[3] > t_data:
                    t_data, dep = cs[3], cs[4]
                cs[3] = t_data + hbm_s
                cs[4] = idx
            cs[1] = t_data + occupancy_s
            cs[2] = idx
            t1 = t_data + data_s
            dma_spans.append((t0, t1))
        else:
            entry_uses[entry[2]] += 1
            tid = track((c, "sync"), f"core{c}.sync" if multi else "sync")
            if last_end > ready:
                ready, dep = last_end, last_idx
            t0 = t1 = ready
            for t in range(len(track_free)):
                if track_free[t] < t1:
                    track_free[t] = t1
            barrier[0], barrier[1] = t1, idx
        start[idx] = t0
        end[idx] = t1
        pred[idx] = dep
        track_of[idx] = tid
        track_free[tid] = t1
        track_last[tid] = idx
        track_busy[tid] += t1 - t0
        track_count[tid] += 1
        if t1 >= last_end:
            last_end, last_idx = t1, idx
        # ---- publish ----------------------------------------------------------------------
        for rid in src_ids:
            if t1 > a_t[rid]:
                a_t[rid] = t1
                a_i[rid] = idx
        for rid in dst_ids:
            w_t[rid] = t1
            w_i[rid] = idx
            if t1 >= a_t[rid]:
                a_t[rid] = t1
                a_i[rid] = idx

    # ---- totals, in entry order (deterministic) ----------------------------------------------
    flops = 0.0
    flops_by_class: Counter[str] = Counter()
    bytes_mem = [0, 0, 0]
    hbm_dma_bytes = 0
    op_counts: Counter[Op] = Counter()
    for (op, f, rate, b0, b1, b2, dma_bytes), uses in zip(entry_stats, entry_uses, strict=True):
        op_counts[op] += uses
        if f and uses:
            flops += f * uses
            flops_by_class[rate] += f * uses
        bytes_mem[0] += b0 * uses
        bytes_mem[1] += b1 * uses
        bytes_mem[2] += b2 * uses
        hbm_dma_bytes += dma_bytes * uses
    mem_bytes: Counter[str] = Counter(
        {m: bytes_mem[i] for m, i in mem_index.items() if bytes_mem[i]}
    )
    sched = Schedule(instrs, start, end, track_of, track_names)
    return _profile(
        spec,
        dma,
        sched,
        pred,
        flops,
        flops_by_class,
        mem_bytes,
        active,
        last_idx,
        hbm_dma_bytes,
        dma_spans,
        used_cores,
        track_busy,
        track_count,
        op_counts,
    )


def _profile(
    spec: CoreSpec,
    dma: DmaModel,
    sched: Schedule,
    pred: list[int],
    flops: float,
    flops_by_class: Counter[str],
    bytes_mem: Counter[str],
    active: int,
    last_idx: int,
    hbm_bytes: int,
    dma_spans: list[tuple[float, float]],
    used_cores: set[int],
    busy: list[float],
    count: list[int],
    op_counts: Counter[Op],
) -> Profile:
    total = max(sched.end, default=0.0)
    names = sched.track_names
    tracks = tuple(
        TrackStats(nm, busy[i], busy[i] / total if total else 0.0, count[i])
        for i, nm in enumerate(names)
    )
    # Per-engine view: compute engines as they are; DMA as the union of its queues' activity.
    eng_busy: dict[str, float] = {}
    eng_count: Counter[str] = Counter()
    for i, nm in enumerate(names):
        base = "dma" if ".dma." in nm or nm.startswith("dma.") else nm.rsplit(".", 1)[-1]
        if base != "dma":
            eng_busy[base] = eng_busy.get(base, 0.0) + busy[i]
        eng_count[base] += count[i]
    if eng_count["dma"]:
        eng_busy["dma"] = _union_length(dma_spans)
    cores = max(1, len(used_cores))
    order = ["tensor", "vector", "scalar", "gpsimd", "dma", "sync"]
    engines = tuple(
        TrackStats(
            e,
            eng_busy.get(e, 0.0),
            eng_busy.get(e, 0.0) / total / cores if total else 0.0,
            eng_count[e],
        )
        for e in order
        if e in eng_count or e in ("tensor", "vector", "scalar", "gpsimd")
    )
    peak_dtype = flops_by_class.most_common(1)[0][0] if flops_by_class else "bf16"
    peak = spec.tensor.peak_flops(peak_dtype) * cores
    achieved = flops / total if total else 0.0
    hbm_bw = min(dma.hbm_share, dma.core_bw / dma.efficiency) * cores
    counts = {op.value: k for op, k in op_counts.items() if k}
    from trnsim.core.calibration import DMA_EFFICIENCY

    assumptions = (
        f"costs: trnsim.core.costs rules for {spec.name} (NKI cost guidance, nki-notes 4.4)",
        f"DMA efficiency {dma.efficiency:.3f} of {spec.dma.engines} x "
        f"{spec.dma.engine_bw / 1e9:.0f} GB/s (calibrated {DMA_EFFICIENCY:.3f} on NeuronCore-v2, "
        "calibration/trainium.md A; applied unchanged to other generations)",
        f"HBM share {dma.hbm_share / 1e9:.0f} GB/s per core ({active} active core(s) on the chip)",
        "dependencies from bounding regions (may serialise more than hardware semaphores)",
    )
    return Profile(
        target=spec.name,
        total_s=total,
        tracks=tracks,
        engines=engines,
        flops=flops,
        flops_per_s=achieved,
        peak_flops=peak,
        peak_dtype=peak_dtype,
        mfu=achieved / peak if peak else 0.0,
        bytes_by_memory=tuple((m, bytes_mem[m]) for m in ("hbm", "sbuf", "psum") if m in bytes_mem),
        hbm_bw=hbm_bw,
        mbu=(hbm_bytes / total) / hbm_bw if total and hbm_bw else 0.0,
        instruction_counts=tuple(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))),
        critical_path=_critical_path(sched, pred, last_idx, total),
        assumptions=assumptions,
        schedule=sched,
    )


def _union_length(intervals) -> float:  # type: ignore[no-untyped-def]
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s  # type: ignore[operator]
            cur_s, cur_e = s, e
        elif e > cur_e:
            cur_e = e
    if cur_e is not None:
        total += cur_e - cur_s  # type: ignore[operator]
    return total


def _critical_path(
    sched: Schedule, pred: list[int], last: int, total: float
) -> tuple[Contributor, ...]:
    """Walk back from the last instruction along the binding constraints; each instruction on
    the path is charged the time it added (its end minus its predecessor's end)."""
    groups: dict[tuple, list[float]] = {}
    end, instrs = sched.end, sched.instructions
    i = last
    while i >= 0:
        p = pred[i]
        added = end[i] - (end[p] if p >= 0 else 0.0)
        opcode, engine, _, _, _, file, line, _ = instrs[i]
        key = (opcode, engine, file, line)
        g = groups.get(key)
        if g is None:
            g = groups[key] = [0.0, 0]
        if added > 0.0:
            g[0] += added
        g[1] += 1
        i = p
    ranked = sorted(groups.items(), key=lambda kv: -kv[1][0])[:CRITICAL_PATH_TOP]
    out = []
    for (op, eng, file, line), (sec, n) in ranked:
        loc = f"{file.replace(chr(92), '/').rsplit('/', 1)[-1]}:{line}"
        out.append(
            Contributor(op.value, eng.value, loc, sec, sec / total if total else 0.0, int(n))
        )
    return tuple(out)
