"""The seeds' system-level claims, made testable with the fabric model.

1. "Built for MoE all-to-all": time an MoE-sized dispatch exchange on the Trn3 Gen2 UltraServer
   against the Trn2 torus systems (trn2.48xlarge, 16 chips; Trn2 UltraServer, 64 chips), at the
   same per-chip buffer and at equal rank counts.
2. "Doubling Trn2's inter-chip bandwidth": the headline per-chip link figures from ``hw``, the
   per-level figures the fabric is built from, and what a collective achieves on each.

The MoE exchange size is a workload figure, not hardware: a DeepSeek-V3-like dispatch (hidden
7168, 8 routed experts per token, FP8 activations, 1 byte each) of ``tokens`` tokens per chip:
each chip sends ``tokens x top_k x hidden x bytes`` in total, spread over the ranks.
"""

from __future__ import annotations

from dataclasses import dataclass

from trnsim.fabric.collectives import collective_time
from trnsim.hw import system

# DeepSeek-V3 (arXiv 2412.19437): hidden size 7168, 8 of 256 routed experts per token.
MOE_HIDDEN = 7168
MOE_TOP_K = 8
MOE_BYTES = 1  # FP8 dispatch


def moe_dispatch_bytes(tokens_per_chip: int, hidden: int = MOE_HIDDEN, top_k: int = MOE_TOP_K,
                       nbytes: int = MOE_BYTES) -> float:  # fmt: skip
    """Per-rank all-to-all buffer of one MoE dispatch (bytes)."""
    return float(tokens_per_chip * top_k * hidden * nbytes)


@dataclass(frozen=True, slots=True)
class Row:
    label: str
    system: str
    ranks: int
    nbytes: float
    time_s: float
    busbw: float
    algo: str


def moe_all_to_all(tokens_per_chip: int = 4096) -> list[Row]:
    """Dispatch all-to-all of ``tokens_per_chip`` tokens on Gen2 vs the Trn2 tori."""
    m = moe_dispatch_bytes(tokens_per_chip)
    cases = [
        ("Trn3 Gen2 UltraServer", "trn3-gen2-ultraserver", 144),
        ("Trn2 UltraServer (4x4x4 torus)", "trn2-ultraserver", 64),
        ("Trn3 Gen2, 64 ranks", "trn3-gen2-ultraserver", 64),
        ("trn2.48xlarge (4x4 torus)", "trn2.48xlarge", 16),
        ("Trn3 Gen2, 16 ranks", "trn3-gen2-ultraserver", 16),
    ]
    out = []
    for label, name, ranks in cases:
        r = collective_time("all-to-all", m, ranks, name)
        out.append(Row(label, name, ranks, m, r.time_s, r.busbw, r.algo))
    return out


@dataclass(frozen=True, slots=True)
class BandwidthClaim:
    headline_trn3: float
    headline_trn2: float
    levels_trn3: dict[str, float]
    levels_trn2: dict[str, float]
    allreduce_busbw: dict[str, float]
    alltoall_busbw: dict[str, float]

    @property
    def headline_ratio(self) -> float:
        return self.headline_trn3 / self.headline_trn2

    @property
    def level_sum_ratio(self) -> float:
        """Derived: sum of per-level per-chip bandwidths, Gen2 / Trn2 UltraServer (EFA excluded)."""
        return sum(self.levels_trn3.values()) / sum(self.levels_trn2.values())


def interchip_bandwidth(nbytes: float = 2**30) -> BandwidthClaim:
    """Gen2 vs Trn2 UltraServer: headline link figures, per-level figures, achieved busbw."""
    gen2, trn2 = system("trn3-gen2-ultraserver"), system("trn2-ultraserver")
    scale_up = lambda s: {lv.name: lv.bw_per_chip for lv in s.levels if lv.kind != "fat-tree"}  # noqa: E731
    ar, a2a = {}, {}
    for s in (gen2, trn2):
        ar[s.name] = collective_time("all-reduce", nbytes, s.chips, s, algo="best").busbw
        a2a[s.name] = collective_time("all-to-all", nbytes, s.chips, s).busbw
    return BandwidthClaim(
        headline_trn3=gen2.chip.link.bw_per_chip,
        headline_trn2=trn2.chip.link.bw_per_chip,
        levels_trn3=scale_up(gen2),
        levels_trn2=scale_up(trn2),
        allreduce_busbw=ar,
        alltoall_busbw=a2a,
    )
