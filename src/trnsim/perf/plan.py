"""Parallel plans: a declarative mapping of a model onto ranks, validated with clear errors.

Ranks and chips. A *rank* is one worker of the parallel program. On Trn2/Trn3 (logical
NeuronCores of several physical cores) and on GPUs/TPUs one rank is one chip. The Trn1
calibration tables count NeuronCores: a trn1.32xlarge runs 32 ranks on 16 chips, so
``ranks_per_chip=2`` there. A rank gets ``1 / ranks_per_chip`` of its chip's FLOP/s, HBM
capacity and HBM bandwidth; a collective over ``g`` ranks is a collective over
``ceil(g / ranks_per_chip)`` chips (the reduction between ranks of one chip is taken as free).

Rank order (innermost first, as Megatron-LM orders it): TP, CP, DP, PP. TP groups are
consecutive ranks (packed inside a server); CP groups stride over TP; DP groups stride over
TP x CP; pipeline stages are the outermost blocks. Expert parallelism (``ep``) regroups the
DP x CP ranks of the MoE layers: ``ep`` must divide ``dp * cp``, and an EP group is ``ep``
consecutive DP x CP ranks (stride TP).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from trnsim import inputs
from trnsim.errors import ConfigError
from trnsim.workloads import ModelArgs

Recompute = Literal["none", "selective", "full"]
Schedule = Literal["1f1b", "interleaved"]


@dataclass(frozen=True, slots=True)
class ParallelPlan:
    """Degrees of parallelism and the memory-saving choices of a run.

    Attributes:
        tp: tensor parallel degree (Megatron column/row-parallel matmuls, heads split).
        pp: pipeline parallel degree (stages of consecutive layers).
        dp: data parallel degree (replicas of each stage; ZeRO shards over it).
        ep: expert parallel degree (routed experts split over ``ep`` of the DP x CP ranks).
        cp: context parallel degree (the sequence split over ``cp`` ranks, ring attention).
        micro_batch: sequences per micro-batch (training) per DP rank.
        sequence_parallel: with TP, norms/residuals are split over the sequence and the TP
            all-reduces become reduce-scatter + all-gather (Korthikanti et al. 2022).
        zero: 0 none; 1 optimizer state sharded over DP; 2 + gradients; 3 + weights (= FSDP).
        recompute: activation recomputation: none, selective (attention core only) or full
            (every layer's forward again in the backward, keeping only layer inputs).
        schedule: pipeline schedule, ``1f1b`` or ``interleaved`` (``chunks`` virtual stages).
        chunks: virtual pipeline stages per rank (interleaved schedule only).
        ranks_per_chip: ranks sharing one chip (2 for Trn1 NeuronCore counts; see module doc).
        pad_heads: allow n_heads not divisible by tp by padding heads to a multiple of tp (the
            padded heads cost compute and memory), as Transformers-NeuronX does.
        moe_imbalance: routed-expert load imbalance, the busiest EP rank's tokens over the
            mean (1: uniform routing); it scales that rank's expert FLOPs and rows.
    """

    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    cp: int = 1
    micro_batch: int = 1
    sequence_parallel: bool = True
    zero: int = 1
    recompute: Recompute = "selective"
    schedule: Schedule = "1f1b"
    chunks: int = 1
    ranks_per_chip: int = 1
    pad_heads: bool = False
    moe_imbalance: float = 1.0

    def __post_init__(self) -> None:
        inputs.check("moe-imbalance", self.moe_imbalance)
        for name, value in (
            ("tp", self.tp),
            ("pp", self.pp),
            ("dp", self.dp),
            ("ep", self.ep),
            ("cp", self.cp),
            ("micro-batch", self.micro_batch),
            ("interleave", self.chunks),
            ("ranks-per-chip", self.ranks_per_chip),
        ):
            if type(value) is not int or not 1 <= value <= inputs.MAX_RANKS:  # the fast path
                inputs.check(name, value)
        if self.zero not in (0, 1, 2, 3):
            raise ConfigError(f"plan: zero must be 0, 1, 2 or 3 (3 = FSDP), got {self.zero}")
        if self.recompute not in ("none", "selective", "full"):
            raise ConfigError(
                f"plan: recompute must be none, selective or full, got {self.recompute!r}"
            )
        if self.schedule not in ("1f1b", "interleaved"):
            raise ConfigError(f"plan: schedule must be 1f1b or interleaved, got {self.schedule!r}")
        if self.schedule == "1f1b" and self.chunks != 1:
            raise ConfigError(f"plan: chunks ({self.chunks}) > 1 needs schedule='interleaved'")
        if (self.dp * self.cp) % self.ep:
            raise ConfigError(
                f"plan: ep({self.ep}) must divide dp({self.dp}) * cp({self.cp}) = "
                f"{self.dp * self.cp} (experts are split over the data/context-parallel ranks)"
            )

    @property
    def ranks(self) -> int:
        """Derived: tp x cp x dp x pp."""
        return self.tp * self.cp * self.dp * self.pp

    @property
    def chips(self) -> int:
        """Derived: ranks / ranks_per_chip (rounded up)."""
        return -(-self.ranks // self.ranks_per_chip)

    def describe(self) -> str:
        parts = [f"tp{self.tp}", f"pp{self.pp}", f"dp{self.dp}"]
        if self.ep > 1:
            parts.append(f"ep{self.ep}")
        if self.cp > 1:
            parts.append(f"cp{self.cp}")
        parts.append(f"mb{self.micro_batch}")
        if self.zero:
            parts.append("fsdp" if self.zero == 3 else f"zero{self.zero}")
        if self.recompute != "none":
            parts.append(f"rc-{self.recompute}")
        if self.schedule == "interleaved":
            parts.append(f"il{self.chunks}")
        return " ".join(parts)

    def summary(self, mode: str = "train") -> str:
        """The plan for people ("TP2 PP9 DP8, micro-batch 1, ZeRO-1, selective recompute");
        ``mode="serve"``: the degrees only (micro-batches, ZeRO and recomputation are
        training's). ``describe()`` is the compact token form of JSON and labels."""
        degrees = f"TP{self.tp} PP{self.pp} DP{self.dp}"
        degrees += f" EP{self.ep}" if self.ep > 1 else ""
        degrees += f" CP{self.cp}" if self.cp > 1 else ""
        parts = [degrees]
        if mode == "serve":
            if self.pad_heads:
                parts.append("heads padded to a multiple of TP")
            return ", ".join(parts)
        parts.append(f"micro-batch {self.micro_batch}")
        parts.append({0: "no ZeRO", 3: "ZeRO-3 (FSDP)"}.get(self.zero, f"ZeRO-{self.zero}"))
        parts.append({"none": "no recompute"}.get(self.recompute, f"{self.recompute} recompute"))
        if self.tp > 1 and not self.sequence_parallel:
            parts.append("no sequence parallelism")
        if self.schedule == "interleaved":
            parts.append(f"interleaved 1F1B, {self.chunks} chunks")
        return ", ".join(parts)

    def replace(self, **changes: object) -> ParallelPlan:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    # --- validation against a model, a chip count and a batch ------------------------------

    def check_chips(self, chips: int) -> None:
        """The degrees must multiply to the ranks of ``chips`` chips."""
        ranks = chips * self.ranks_per_chip
        if self.ranks != ranks:
            per_chip = (
                f" = chips({chips}) x ranks_per_chip({self.ranks_per_chip})"
                if (self.ranks_per_chip > 1)
                else ""
            )
            raise ConfigError(
                f"plan: tp({self.tp}) * cp({self.cp}) * dp({self.dp}) * pp({self.pp}) = "
                f"{self.ranks} != {'ranks' if per_chip else 'chips'}({ranks}){per_chip}"
            )

    def check_model(self, m: ModelArgs) -> None:
        """Divisibility rules of the model's shape."""
        if self.pad_heads:
            pass
        elif m.n_heads % self.tp:
            raise ConfigError(
                f"plan: n_heads({m.n_heads}) of {m.name} is not divisible by tp({self.tp})"
            )
        elif self.tp > m.n_kv_heads and self.tp % m.n_kv_heads:
            raise ConfigError(
                f"plan: tp({self.tp}) > n_kv_heads({m.n_kv_heads}) of {m.name} must be a "
                f"multiple of it (KV heads are replicated tp / n_kv_heads times)"
            )
        elif self.tp <= m.n_kv_heads and m.n_kv_heads % self.tp:
            raise ConfigError(
                f"plan: n_kv_heads({m.n_kv_heads}) of {m.name} is not divisible by tp({self.tp})"
            )
        stages = self.pp * self.chunks
        if m.n_layers < stages:
            raise ConfigError(
                f"plan: pp({self.pp}) x chunks({self.chunks}) = {stages} stages > "
                f"n_layers({m.n_layers}) of {m.name}"
            )
        if self.ep > 1 and not m.is_moe:
            raise ConfigError(f"plan: ep({self.ep}) > 1 but {m.name} has no experts")
        if m.is_moe and m.n_experts % self.ep:
            raise ConfigError(
                f"plan: n_experts({m.n_experts}) of {m.name} is not divisible by ep({self.ep})"
            )

    def check_batch(self, global_batch: int, seq_len: int) -> int:
        """Global batch and sequence rules; returns the micro-batches per step per DP rank."""
        per_step = self.dp * self.micro_batch
        if global_batch % per_step:
            raise ConfigError(
                f"plan: global_batch({global_batch}) is not divisible by dp({self.dp}) * "
                f"micro_batch({self.micro_batch}) = {per_step}"
            )
        if seq_len % self.cp:
            raise ConfigError(f"plan: seq_len({seq_len}) is not divisible by cp({self.cp})")
        if self.sequence_parallel and self.tp > 1 and (seq_len // self.cp) % self.tp:
            raise ConfigError(
                f"plan: with sequence parallelism seq_len/cp ({seq_len // self.cp}) must be "
                f"divisible by tp({self.tp})"
            )
        micro_batches = global_batch // per_step
        if self.schedule == "interleaved" and micro_batches % self.pp:
            raise ConfigError(
                f"plan: the interleaved schedule needs micro-batches per step "
                f"({micro_batches}) divisible by pp({self.pp})"
            )
        return micro_batches

    def validate(
        self, m: ModelArgs, chips: int, global_batch: int | None = None, seq_len: int | None = None
    ) -> None:
        """All checks: chips, model shape, and (if given) batch and sequence."""
        self.check_chips(chips)
        self.check_model(m)
        if global_batch is not None and seq_len is not None:
            self.check_batch(global_batch, seq_len)

    # --- rank geometry -----------------------------------------------------------------------

    @property
    def tp_stride(self) -> int:
        return 1

    @property
    def cp_stride(self) -> int:
        return self.tp

    @property
    def dp_stride(self) -> int:
        return self.tp * self.cp

    @property
    def ep_stride(self) -> int:
        return self.tp

    @property
    def pp_stride(self) -> int:
        return self.tp * self.cp * self.dp
