"""NCCL's collectives in closed form (the ``nccl`` stack of :mod:`trnsim.fabric.stacks`).

A collective runs on a list of *stages* (one per fabric level the group spans, NVLink first) with a
*plan* of (sub-op, stage, bytes per rank) from :func:`trnsim.fabric.collectives.hierarchical_plan`
(one stage: the op itself). NCCL runs one protocol per call; each stage takes its fastest algorithm
under that protocol, and the call takes the fastest protocol:

    T = min over protocols p [ L_p + sum over stages min over algorithms a of t(a, p, stage) ]

with, for a stage of fan-out n, hop latency h, per-direction bandwidth B (``LevelView``):

=========  ===========================  =========================================================
ring       all-reduce                   2(n-1) h + 2 (n-1)/n M / (B e_ring e_p)
           all-gather / reduce-scatter  (n-1) h + (n-1)/n M / (B e_ring e_p)
           broadcast                    (n-1) h + M / (B e_ring e_p)       (pipelined chain)
nvls       all-reduce on NVSwitch,      2 h + M / (B e_nvls)   (in-switch reduction: each GPU
           Simple only                  sends and receives its buffer once)
tree       all-reduce on a scale-out    2 ceil(log2 n) h + 2 M / (B e_ring e_p)  (double binary
           network                      tree: fewer steps, the ring's bytes)
p2p        all-to-all, permute          h + (n-1)/n M / (B e_ring e_p)   (all peers at once)
=========  ===========================  =========================================================

``e_p`` is the protocol's efficiency and ``L_p`` its fixed latency; ``e_ring`` and ``e_nvls`` the
algorithms' (``NcclParams``). Hierarchical stages run one after another (NCCL pipelines them; the
sum is an upper bound for large messages on several levels). A group on several levels may
also run one flat ring over every rank (:func:`flat_ring`, NCCL's multi-node ring: rails carry
the inter-node share in parallel); the fastest of the two is taken.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from trnsim.fabric.stacks import NcclParams, Protocol
from trnsim.fabric.topology import LevelView

NCCL_ALGOS = ("ring", "tree", "nvls")

#: (phase, level, algo, n, count, bytes per rank, latency s, bandwidth s)
StepTuple = tuple[str, str, str, int, int, float, float, float]


def _f(n: int) -> float:
    return (n - 1) / n


def candidates(
    op: str, lv: LevelView, m: float, proto: Protocol, params: NcclParams
) -> list[StepTuple]:
    """Every algorithm NCCL could run for sub-op ``op`` of ``m`` bytes on stage ``lv``."""
    n, h = lv.n, lv.latency_s
    ring_bw = lv.ring_bw * params.ring_efficiency * proto.efficiency
    out: list[StepTuple] = []
    if op in ("all-to-all", "permute"):
        data = _f(n) * m if op == "all-to-all" else m
        bw = ring_bw if op == "all-to-all" else lv.link_bw * params.ring_efficiency
        bw *= 1.0 if op == "all-to-all" else proto.efficiency
        return [(op, lv.name, "p2p", n, 1, data, h, data / bw)]
    count, data = {
        "all-reduce": (2 * (n - 1), 2 * _f(n) * m),
        "all-gather": (n - 1, _f(n) * m),
        "reduce-scatter": (n - 1, _f(n) * m),
        "broadcast": (n - 1, m),
    }[op]
    out.append((op, lv.name, "ring", n, count, data, count * h, data / ring_bw))
    if op == "all-reduce" and lv.kind == "nvswitch" and proto.name == "Simple":
        nvls_bw = lv.bw * params.nvls_efficiency
        out.append((op, lv.name, "nvls", n, 2, m, 2 * h, m / nvls_bw))
    if op == "all-reduce" and lv.kind == "fat-tree" and n > 2:
        depth = 2 * math.ceil(math.log2(n))
        out.append((op, lv.name, "tree", n, depth, 2 * m, depth * h, 2 * m / ring_bw))
    return out


def flat_ring(
    op: str, levels: Sequence[LevelView], ranks: int, m: float, proto: Protocol, params: NcclParams
) -> StepTuple | None:
    """NCCL's flat ring over every rank of a multi-level group (ring channels, one per rail).

    Every step waits for the slowest hop; the ring's bytes go mostly over the innermost level,
    and a ``1 / inner`` share over each outer level (with one channel per GPU of a domain, each
    GPU is the domain boundary, hence uses its NIC, for ``1 / inner`` of the channels).
    """
    if op not in ("all-reduce", "all-gather", "reduce-scatter", "broadcast"):
        return None
    n = ranks
    count, data = {
        "all-reduce": (2 * (n - 1), 2 * _f(n) * m),
        "all-gather": (n - 1, _f(n) * m),
        "reduce-scatter": (n - 1, _f(n) * m),
        "broadcast": (n - 1, m),
    }[op]
    eff = params.ring_efficiency * proto.efficiency
    per_byte = max((1.0 if lv.inner == 1 else 1.0 / lv.inner) / (lv.ring_bw * eff) for lv in levels)
    slow = max(levels, key=lambda lv: lv.latency_s)
    return (op, slow.name, "ring", n, count, data, count * slow.latency_s, data * per_byte)


def run(
    plan: Sequence[tuple[str, int, float]],
    stages: Sequence[LevelView],
    params: NcclParams,
    algo: str | None = None,
    flat: tuple[Sequence[LevelView], int, str, float] | None = None,
) -> tuple[Protocol, list[StepTuple]]:
    """The fastest protocol and, per plan entry, the fastest algorithm (``algo`` forces one where
    it applies; stages where it does not apply fall back to the fastest)."""
    options: list[tuple[float, bool, Protocol, list[StepTuple]]] = []
    for proto in params.protocols:
        total, steps, honoured = proto.latency_s, [], False
        for sub_op, i, size in plan:
            cands = candidates(sub_op, stages[i], size, proto, params)
            forced = [c for c in cands if c[2] == algo]
            honoured |= bool(forced)
            pick = min(forced or cands, key=lambda c: c[6] + c[7])
            steps.append(pick)
            total += pick[6] + pick[7]
        options.append((total, honoured, proto, steps))
        if flat is not None and algo in (None, "ring"):
            ring = flat_ring(flat[2], flat[0], flat[1], flat[3], proto, params)
            if ring is not None:
                options.append((proto.latency_s + ring[6] + ring[7], True, proto, [ring]))
    if algo is not None and any(o[1] for o in options):  # a forced algorithm picks its protocols
        options = [o for o in options if o[1]]
    _, _, proto, steps = min(options, key=lambda o: o[0])
    return proto, steps
