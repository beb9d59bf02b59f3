"""Conformance cases: nki-library's collectives (``experimental/collectives``) over several ranks.

Each case runs the kernel as ``Case.ranks`` ranks (``trnsim.nki.simulate.run_ranks``: every
rank a launch of its own, with its own core(s), HBM and input; ``nki.collectives`` exchange
between them; with ``grid=(2,)`` each rank is a kernel[2] launch whose core ``c`` exchanges
with core ``c`` of the other ranks, as the library's own tests run these kernels with LNC=2).
References are written here from the docstrings:

- ``allgather_sb2sb`` / ``allgather_sb2sb_tiled``: every rank gets ``[data_0 | data_1 | ...]``
  (the ranks' inputs concatenated along the last dim, the docstring's example);
- ``fine_grained_allgather``: the ranks' row shards gathered in rank order ("performs
  all-gather on lhs across ranks along the row dimension"), laid out as the returned
  ``[RANK_N, LNC_N, CHANNEL_N, local_M, K]`` (SBUF path) or ``[RANK_N, CHANNEL_N, LNC_N,
  local_M, K]`` (HBM path) tensor; with LNC=1 one channel, so both are the stacked shards.

- ``allgather_compute_matmul``: rank ``r`` gets ``lhs_global @ rhs_r`` (the gathered rows
  times its own column shard of ``rhs``), laid out as ``fine_grained_allgather``'s result.

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


def _fg_ref(lnc: int = 1, channels: int = 1):
    """The shards stacked in rank order as ``[RANK_N, a, b, m // (lnc * channels), K]``
    (``a x b`` is ``LNC_N x CHANNEL_N`` or ``CHANNEL_N x LNC_N``: the kernel views each rank's
    shard ``[m, K]`` as ``[a, b, m / (a b), K]`` to fill the result, so either way it is the
    shard's rows in order; with LNC=1 one channel)."""

    def ref(per_rank):
        shards = np.stack([args[0] for args in per_rank])
        r, m, k = shards.shape
        split = (lnc, channels) if lnc <= channels else (channels, lnc)
        return [shards.reshape(r, *split, m // (lnc * channels), k)] * r

    return ref


def _fgcc_inputs(ranks: int, m: int, k: int, n: int, dtype, force_hbm_cc: bool):
    def make(rng):
        return [
            Call(
                (randn(rng, (m, k), dtype), randn(rng, (k, n), dtype), ranks, 1),
                {"force_hbm_cc": force_hbm_cc},
            )
            for _ in range(ranks)
        ]

    return make


def _fgcc_ref(lnc: int = 1, channels: int = 1):
    """``lhs_global @ rhs_r`` in float64, rounded once to the inputs' dtype, as
    ``[RANK_N, a, b, m / (a b), N_r]`` (``_fg_ref``'s layout: the row blocks in order)."""

    def ref(per_rank):
        lhs = np.concatenate([args[0] for args in per_rank]).astype(np.float64)
        r = len(per_rank)
        m = per_rank[0][0].shape[0]
        out = []
        for args in per_rank:
            y = (lhs @ args[1].astype(np.float64)).astype(np.float32).astype(args[1].dtype)
            out.append(y.reshape(r, lnc, channels, m // (lnc * channels), y.shape[1]))
        return out

    return ref


BF16_ULP = 2.0**-7
"""One bf16 ulp relative to the binade's lower end. The kernel accumulates the K products in
fp32 (PSUM) and rounds once to bf16; the reference rounds the exact float64 result once. Both
round a value that differs by far less than a bf16 ulp (fp32 accumulation of K = 256 terms),
so they differ by at most one bf16 ulp where the two land on either side of a rounding
boundary: ``rtol`` one ulp; ``atol`` covers results cancelled to near zero, where one ulp of
fp32 accumulation error (about 2^-24 x sum |products| < 2^-12 here) is the bound."""


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
        _fg_ref(),
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
        _fg_ref(),
        ranks=4,
        rtol=0.0,
        atol=0.0,
        notes="as fine_grained_allgather_sbuf with force_hbm_cc: ring permutes of shared-HBM "
        "buffers, tiles written to the result at a register (rank) offset",
    ),
    Case(
        "library/allgather_compute_matmul_sbuf",
        REPO,
        CC + "fgcc.py",
        "allgather_compute_matmul",
        _fgcc_inputs(4, 64, 256, 256, bf16, False),
        _fgcc_ref(),
        ranks=4,
        rtol=BF16_ULP,
        atol=2.0**-12,
        notes="bf16 lhs [64, 256] and rhs [256, 256] per rank, tp_degree 4: the SBUF path "
        "(each ring step's gathered rows multiplied as they arrive); tolerance: BF16_ULP",
    ),
    Case(
        "library/allgather_compute_matmul_hbm",
        REPO,
        CC + "fgcc.py",
        "allgather_compute_matmul",
        _fgcc_inputs(4, 64, 256, 256, bf16, True),
        _fgcc_ref(),
        ranks=4,
        rtol=BF16_ULP,
        atol=2.0**-12,
        notes="as allgather_compute_matmul_sbuf with force_hbm_cc (ring of shared-HBM buffers)",
    ),
    Case(
        "library/fine_grained_allgather_lnc2",
        REPO,
        CC + "fg_allgather.py",
        "fine_grained_allgather",
        _fg_inputs(4, 128, 256, bf16, False),
        _fg_ref(2, 2),
        ranks=4,
        grid=(2,),
        rtol=0.0,
        atol=0.0,
        notes="bf16 [128, 256] shard per rank, tp_degree 4, kernel[2] ranks (as the library's "
        "tests run it): 2 channels per core, SBUF path; core c of each rank rings with core c "
        "of the others (trnsim's reading, nki.collectives._exchange)",
    ),
    Case(
        "library/fine_grained_allgather_lnc2_hbm",
        REPO,
        CC + "fg_allgather.py",
        "fine_grained_allgather",
        _fg_inputs(4, 128, 256, bf16, True),
        _fg_ref(2, 2),
        ranks=4,
        grid=(2,),
        rtol=0.0,
        atol=0.0,
        notes="as fine_grained_allgather_lnc2 with force_hbm_cc: both cores of a rank ring the "
        "rank's shared-HBM buffers",
    ),
    Case(
        "library/allgather_compute_matmul_lnc2",
        REPO,
        CC + "fgcc.py",
        "allgather_compute_matmul",
        _fgcc_inputs(4, 128, 256, 256, bf16, False),
        _fgcc_ref(2, 2),
        ranks=4,
        grid=(2,),
        rtol=BF16_ULP,
        atol=2.0**-12,
        notes="bf16 lhs [128, 256], rhs [256, 256] per rank, tp_degree 4, kernel[2] ranks "
        "(2 channels per core, SBUF path); tolerance: BF16_ULP",
    ),
    Case(
        "library/allgather_sb2sb_tiled_lnc2",
        REPO,
        CC + "sb2sb_allgather.py",
        "allgather_sb2sb_tiled",
        _sb2sb_inputs(4, 256, 32),
        _sb2sb_ref,
        ranks=4,
        grid=(2,),
        rtol=0.0,
        atol=0.0,
        notes="fp32 [256, 32] per rank, 4 ranks of kernel[2]: each core all-gathers its own "
        "128-row tile with the same core of the other ranks (the docstring's LNC sharding)",
    ),
]
