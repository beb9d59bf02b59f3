"""Conformance cases: nki-library's collectives (``experimental/collectives``) over several ranks.

Each case runs the kernel as ``Case.ranks`` ranks (``trnsim.nki.simulate.run_ranks``: every
rank a launch of its own, LNC=1, with its own core, HBM and input; ``nki.collectives`` exchange
between them). References are written here from the docstrings:

- ``allgather_sb2sb`` / ``allgather_sb2sb_tiled``: every rank gets ``[data_0 | data_1 | ...]``
  (the ranks' inputs concatenated along the last dim, the docstring's example);
- ``fine_grained_allgather``: the ranks' row shards gathered in rank order ("performs
  all-gather on lhs across ranks along the row dimension"), laid out as the returned
  ``[RANK_N, LNC_N, CHANNEL_N, local_M, K]`` (SBUF path) or ``[RANK_N, CHANNEL_N, LNC_N,
  local_M, K]`` (HBM path) tensor; with LNC=1 one channel, so both are the stacked shards.

All-gathers move values unchanged: exact (``rtol = atol = 0``).
"""

from __future__ import annotations

import numpy as np

from trnsim.conformance.case import Call, Case
from trnsim.conformance.refs import bf16, randn

REPO = "nki-library"
CC = "src/nkilib_src/nkilib/experimental/collectives/"


def _sb2sb_inputs(ranks: int, h: int, w: int, dtype=np.float32):
    def make(rng):
        from nki.collectives import ReplicaGroup

        group = ReplicaGroup([list(range(ranks))])
        return [(randn(rng, (h, w), dtype), group, ranks) for _ in range(ranks)]

    return make


def _sb2sb_ref(per_rank):
    gathered = np.concatenate([args[0] for args in per_rank], axis=1)
    return [gathered] * len(per_rank)


def _fg_inputs(ranks: int, m: int, k: int, dtype, force_hbm_cc: bool):
    def make(rng):
        return [
            Call((randn(rng, (m, k), dtype), ranks, 1), {"force_hbm_cc": force_hbm_cc})
            for _ in range(ranks)
        ]

    return make


def _fg_ref(per_rank):
    """The shards stacked in rank order: ``[RANK_N, 1, 1, m, K]`` (LNC=1, one channel)."""
    shards = np.stack([args[0] for args in per_rank])
    r, m, k = shards.shape
    return [shards.reshape(r, 1, 1, m, k)] * r


CASES: list[Case] = [
    Case(
        "library/allgather_sb2sb_4ranks",
        REPO,
        CC + "sb2sb_allgather.py",
        "allgather_sb2sb",
        _sb2sb_inputs(4, 128, 64),
        _sb2sb_ref,
        ranks=4,
        rtol=0.0,
        atol=0.0,
        notes="fp32 [128, 64] per rank, 4 ranks (the docstring's tp_degree=4 example, smaller)",
    ),
    Case(
        "library/allgather_sb2sb_tiled_4ranks",
        REPO,
        CC + "sb2sb_allgather.py",
        "allgather_sb2sb_tiled",
        _sb2sb_inputs(4, 384, 32, bf16),
        _sb2sb_ref,
        ranks=4,
        rtol=0.0,
        atol=0.0,
        notes="bf16 [384, 32] per rank, 4 ranks: three 128-row tiles, each all-gathered "
        "SBUF to SBUF (LNC=1: one program takes every tile)",
    ),
    Case(
        "library/fine_grained_allgather_sbuf",
        REPO,
        CC + "fg_allgather.py",
        "fine_grained_allgather",
        _fg_inputs(4, 64, 256, bf16, False),
        _fg_ref,
        ranks=4,
        rtol=0.0,
        atol=0.0,
        notes="bf16 [64, 256] shard per rank, tp_degree 4, one replica group: the SBUF path "
        "(dma_transpose in, ring permutes of SBUF buffers, PE transposes out)",
    ),
    Case(
        "library/fine_grained_allgather_hbm",
        REPO,
        CC + "fg_allgather.py",
        "fine_grained_allgather",
        _fg_inputs(4, 64, 256, bf16, True),
        _fg_ref,
        ranks=4,
        rtol=0.0,
        atol=0.0,
        notes="as fine_grained_allgather_sbuf with force_hbm_cc: ring permutes of shared-HBM "
        "buffers, tiles written to the result at a register (rank) offset",
    ),
]
