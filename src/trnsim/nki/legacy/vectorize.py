"""Loop vectorization by the legacy compiler: an innermost ``nl.affine_range`` of independent
elementwise/reduce iterations timed as one instruction per body statement.

Documented: ``nl.affine_range`` "allows Neuron compiler to perform additional loop-level
optimizations, such as loop vectorization in current release" (aws-neuron-sdk v2.26.0,
``general/nki/api/nki/language/__init__.py``), and the SDK's matmul tutorial runs its K loop
as ``sequential_range`` "because we do not want the compiler to change this loop by, for
example, vectorizing it" (``nki/guides/tutorials/kernel-optimization.rst``). Not documented:
when the vectorizer applies. The rule here:

- the loop is an ``affine_range`` (never ``sequential_range``, ``static_range`` or a plain
  Python ``range``), innermost (no ``nl`` loop runs inside it), of at least 2 iterations, and
  ran to its end;
- every iteration records the same statements (opcode, engine, kernel line), each one of
  ``VECTORIZABLE`` (elementwise and free-axis reduce instructions of the Vector, Scalar and
  GpSimd engines: no DMA, no matmul or transpose, no iota or memset, nothing with engine
  state), with no explicit dependency (``after``);
- each operand of a statement keeps its memory, partitions, format and access pattern from
  one iteration to the next, and its address moves by a constant step (affine in the loop
  variable), or it is an iteration's own temporary (written then read inside one iteration,
  wherever the allocator put it);
- no iteration reads bytes an earlier iteration wrote (no loop-carried dependence);
- the vectorized instruction's free size (trip x elements per iteration of the statement's
  largest operand) is at most ``MAX_FREE_ELEMENTS``.

``MAX_FREE_ELEMENTS`` is FITTED, not documented: Autocomp's conv1d candidates (trn1.2xlarge,
``examples/trn-advanced/4_conv1d_trace.py``) bracket it. Candidate 6 (a 64-trip inner loop of
[128, 3] multiply + reduce: 192 elements per partition) ran 10.7x faster than candidate 5 (the
same body over 2048 trips: 6144), and candidate 4 (512 trips: 1536) ran at the unvectorized
pace. 512 elements is a figure inside that bracket that a vectorizer would plausibly respect:
one PSUM bank (2 KiB per partition) of fp32, ``nl.tile_size.psum_fmax``.

Numerics are untouched: the iterations ran one by one as before; only the core's record (what
the timing model reads) is folded, so each body statement becomes one instruction whose
access pattern gains the loop as its outermost free axis.
"""

from __future__ import annotations

from typing import Any

from trnsim.core.instruction import Instruction, Operand
from trnsim.core.isa import Op

VECTORIZABLE = frozenset({Op.TENSOR_TENSOR, Op.TENSOR_SCALAR, Op.TENSOR_REDUCE, Op.TENSOR_COPY})
"""The instructions a loop's body may hold and still be vectorized."""

MAX_FREE_ELEMENTS = 512
"""Largest free size (elements per partition) of a vectorized instruction. FITTED to the
Autocomp conv1d rows 4, 5, 6 (see the module docstring): ``nl.tile_size.psum_fmax``."""


def _span(o: Operand) -> tuple[str, int, int, int, int, int]:
    """(memory, core, first partition, last partition, first byte, end byte) covered."""
    lo = hi = 0
    for stride, size in o.pattern:
        reach = stride * (size - 1)
        if reach >= 0:
            hi += reach
        else:
            lo += reach
    step, count = o.partition_pattern
    p_end = o.partition + step * (count - 1)
    return (
        o.memory, o.core, min(o.partition, p_end), max(o.partition, p_end),
        o.offset + lo * o.itemsize, o.offset + (hi + 1) * o.itemsize,
    )  # fmt: skip


def _overlap(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return (
        a[0] == b[0] and a[1] == b[1] and a[2] <= b[3] and b[2] <= a[3]
        and a[4] < b[5] and b[4] < a[5]
    )  # fmt: skip


def _covers(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return (
        a[0] == b[0] and a[1] == b[1] and a[2] <= b[2] and b[3] <= a[3]
        and a[4] <= b[4] and b[5] <= a[5]
    )  # fmt: skip


def fold(record: list[Instruction], bounds: list[int]) -> bool:
    """Fold the loop whose iterations recorded ``record[bounds[i]:bounds[i + 1]]`` into one
    instruction per body statement when the rule (module docstring) holds; True if folded."""
    trip = len(bounds) - 1
    if trip < 2:
        return False
    start, end = bounds[0], bounds[-1]
    body = bounds[1] - start
    if body == 0 or end - start != body * trip:
        return False
    iters = [record[bounds[i] : bounds[i + 1]] for i in range(trip)]
    first = iters[0]
    for ins in first:
        if ins.opcode not in VECTORIZABLE or ins.attr("after"):
            return False
        if trip * max(o.free_size for o in ins.dst + ins.src) > MAX_FREE_ELEMENTS:
            return False
    for it in iters[1:]:
        for a, b in zip(first, it, strict=True):
            if (a.opcode, a.engine, a.line, a.file) != (b.opcode, b.engine, b.line, b.file):
                return False
            if len(a.dst) != len(b.dst) or len(a.src) != len(b.src) or a.attrs != b.attrs:
                return False
            for oa, ob in zip(a.dst + a.src, b.dst + b.src, strict=True):
                keep_a = (oa.role, oa.memory, oa.dtype, oa.core, oa.partition)
                keep_b = (ob.role, ob.memory, ob.dtype, ob.core, ob.partition)
                if keep_a != keep_b or oa.partition_pattern != ob.partition_pattern:
                    return False
                if oa.pattern != ob.pattern:
                    return False
    # loop-carried dependence: a read of bytes an earlier iteration wrote (a read covered by a
    # write earlier in its own iteration is that iteration's temporary)
    spans = [
        [([_span(o) for o in ins.dst], [_span(o) for o in ins.src]) for ins in it] for it in iters
    ]
    temps: set[tuple[int, str]] = set()  # (statement, role) read from its own iteration's write
    hull: dict[tuple[str, int], list[int]] = {}  # the earlier iterations' writes, as one box
    for k in range(trip):
        for s, (_, reads) in enumerate(spans[k]):
            for r_i, r in enumerate(reads):
                own = any(_covers(w, r) for s2 in range(s) for w in spans[k][s2][0])
                if own:
                    temps.add((s, iters[k][s].src[r_i].role))
                    continue
                h = hull.get((r[0], r[1]))
                if h is None or not _overlap((r[0], r[1], *h), r):
                    continue  # outside every earlier write (the exact test only when inside)
                for j in range(k):
                    if any(_overlap(w, r) for ws, _ in spans[j] for w in ws):
                        return False
        for ws, _ in spans[k]:
            for w in ws:
                h = hull.setdefault((w[0], w[1]), list(w[2:]))
                h[0], h[1] = min(h[0], w[2]), max(h[1], w[3])
                h[2], h[3] = min(h[2], w[4]), max(h[3], w[5])
    # the folded statements: the loop becomes the outermost free axis of every operand
    folded = []
    for s, ins in enumerate(first):
        ops = []
        for kind, operands in (("dst", ins.dst), ("src", ins.src)):
            for i, o in enumerate(operands):
                at = [getattr(iters[k][s], kind)[i].offset for k in range(trip)]
                steps = {at[k + 1] - at[k] for k in range(trip - 1)}
                step = steps.pop() if len(steps) == 1 else None
                if step is not None and step % o.itemsize == 0:
                    stride = step // o.itemsize
                elif kind == "src" and (s, o.role) in temps:
                    stride = 0  # an iteration's temporary: the vectorized one is one tile
                elif kind == "dst" and _is_temp_write(s, i, first, temps):
                    stride = 0
                else:
                    return False
                ops.append(o._replace(pattern=((stride, trip), *o.pattern)))
        n_dst = len(ins.dst)
        folded.append(ins._replace(dst=tuple(ops[:n_dst]), src=tuple(ops[n_dst:])))
    record[start:end] = folded
    return True


def _is_temp_write(s: int, i: int, first: list[Instruction], temps: set[tuple[int, str]]) -> bool:
    """Whether dst ``i`` of statement ``s`` is read, as a temporary, by a later statement."""
    w = _span(first[s].dst[i])
    for s2 in range(s + 1, len(first)):
        for o in first[s2].src:
            if (s2, o.role) in temps and _overlap(w, _span(o)):
                return True
    return False
