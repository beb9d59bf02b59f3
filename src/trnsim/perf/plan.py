"""Parallel plans: a declarative mapping of a model onto ranks, validated with clear errors.

Ranks and chips. A *rank* is one worker of the parallel program. On Trn2/Trn3 (logical
NeuronCores of several physical cores) and on GPUs/TPUs one rank is one chip. The Trn1
calibration tables count NeuronCores: a trn1.32xlarge runs 32 ranks on 16 chips, so
``ranks_per_chip=2`` there. A rank gets ``1 / ranks_per_chip`` of its chip's FLOP/s, HBM
capacity and HBM bandwidth; a collective over ``g`` ranks is a collective over
``ceil(g / ranks_per_chip)`` chips (the reduction between ranks of one chip is taken as free).

Rank order (innermost first, as Megatron-LM orders it): TP, CP, DP, PP. TP groups are
consecutive ranks (packed inside a server); CP groups stride over TP; DP groups stride over
TP x CP; pipeline stages are the outermost blocks.

Expert layers have their own grid over the same TP x CP x DP ranks of a stage (Megatron-Core's
"MoE parallel folding", Liu et al. 2025, arXiv:2504.14960; ``expert_tensor_parallel_size``):
expert-TP (``etp``, each expert's matmuls split over ``etp`` ranks; default ``tp``, the dense
layers' split) innermost, then EP (``ep``, the experts split over ``ep`` groups of ``etp``
ranks), then expert-DP (the rest, ``tp x cp x dp / (etp x ep)`` replicas). An EP group is ``ep``
ranks at stride ``etp``; ``etp x ep`` must divide ``tp x cp x dp``. With ``etp = tp`` this is
the classic layout (EP over the DP x CP ranks, stride TP, ``ep`` dividing ``dp x cp``); with
``etp = 1`` EP may exceed DP (EP 32 over TP 2 x DP 16, as NeMo runs Qwen3-235B on H100).

Pipeline layers: ``stage_layers`` splits the layers over ``pp x chunks`` virtual stages
(interleaved schedule), as evenly as possible with the remainder on the middle stages (the
first holds the embedding, the last the LM head and loss, as Megatron-Core's
``account_for_embedding/loss_in_pipeline_split`` and NeMo's layouts do), or with
``first_stage_layers`` / ``last_stage_layers`` given (Megatron-Core's
``decoder_first/last_pipeline_num_layers``). Virtual stages may hold no layer (pp x chunks may
exceed the layers; NeMo runs Qwen3-30B with PP 2 x VP 24 = 48 stages of 48 layers and layouts
with embedding-only stages); every physical stage holds at least one layer.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from trnsim import inputs
from trnsim.errors import ConfigError
from trnsim.workloads import ModelArgs

Recompute = Literal["none", "selective", "full"]
Schedule = Literal["1f1b", "interleaved"]
MoeDispatcher = Literal["alltoall", "flex"]
MOE_DISPATCHERS: tuple[str, ...] = ("alltoall", "flex")


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
        etp: expert tensor parallel degree (each expert's matmuls split over ``etp`` ranks);
            None: ``tp`` (see the module docstring for the expert grid).
        moe_capacity: routed-expert capacity factor; 0 (default) is dropless (every token
            reaches its experts; the per-expert token counts are only known at run time). A
            factor c > 0 pads every expert's buffer to c x the mean tokens per expert and drops
            the overflow: static shapes, c x the expert FLOPs and bytes.
        moe_dispatcher: how tokens reach their experts: ``alltoall`` sends one copy of a token
            per routed expert (Megatron-Core's all-to-all token dispatcher); ``flex`` one copy
            per destination rank (DeepEP / HybridEP, Megatron-Core's flex dispatcher).
        moe_a2a_overlap: overlap the expert-parallel all-to-all of one micro-batch with the
            compute of another (Megatron-Core ``overlap_moe_expert_parallel_comm``); otherwise
            the dispatch and combine are on the critical path.
        offload_layers: activations of that many layers per pipeline stage kept in host memory
            between the forward and the backward (Megatron-Core ``cpu_offloading_num_layers``,
            MaxText ``remat_policy=*_offloaded``).
        recompute_layers: with ``recompute="full"``, the layers per stage that are recomputed
            (Megatron-Core ``recompute_method="block"``, ``recompute_num_layers``); the other
            layers keep all their activations. 0: every layer.
        first_stage_layers, last_stage_layers: layers of the first / last pipeline stage,
            split over its virtual stages (None: balanced; see the module docstring).
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
    etp: int | None = None
    moe_capacity: float = 0.0
    moe_dispatcher: MoeDispatcher = "alltoall"
    moe_a2a_overlap: bool = False
    offload_layers: int = 0
    recompute_layers: int = 0
    first_stage_layers: int | None = None
    last_stage_layers: int | None = None

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
        if self.etp is not None and self.etp < 1:
            raise ConfigError(f"plan: etp must be >= 1, got {self.etp}")
        if not (self.moe_capacity == 0 or 1.0 <= self.moe_capacity < float("inf")):
            raise ConfigError(
                f"plan: moe_capacity must be 0 (dropless) or a factor >= 1, got {self.moe_capacity}"
            )
        if self.moe_dispatcher not in MOE_DISPATCHERS:
            raise ConfigError(
                f"plan: moe_dispatcher must be alltoall or flex, got {self.moe_dispatcher!r}"
            )
        for name in ("offload_layers", "recompute_layers"):
            if getattr(self, name) < 0:
                raise ConfigError(f"plan: {name} must be >= 0, got {getattr(self, name)}")
        if self.recompute_layers and self.recompute != "full":
            raise ConfigError(
                f"plan: recompute_layers({self.recompute_layers}) needs recompute='full', "
                f"got {self.recompute!r}"
            )
        for name in ("first_stage_layers", "last_stage_layers"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise ConfigError(f"plan: {name} must be >= 1, got {v}")
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
        ranks = self.tp * self.cp * self.dp
        if self.etp is None and (self.dp * self.cp) % self.ep:
            raise ConfigError(
                f"plan: ep({self.ep}) must divide dp({self.dp}) * cp({self.cp}) = "
                f"{self.dp * self.cp} (experts are split over the data/context-parallel ranks; "
                "set etp to fold expert parallelism over the tensor-parallel ranks too)"
            )
        if ranks % (self.ep * self.expert_tp):
            raise ConfigError(
                f"plan: etp({self.expert_tp}) * ep({self.ep}) = {self.ep * self.expert_tp} must "
                f"divide tp({self.tp}) * cp({self.cp}) * dp({self.dp}) = {ranks} (the expert "
                "grid folds over the ranks of one pipeline stage)"
            )

    @property
    def expert_tp(self) -> int:
        """Derived: the expert tensor-parallel degree (``etp``, or ``tp`` when not given)."""
        return self.tp if self.etp is None else self.etp

    @property
    def expert_dp(self) -> int:
        """Derived: expert data-parallel replicas, tp x cp x dp / (etp x ep)."""
        return self.tp * self.cp * self.dp // (self.expert_tp * self.ep)

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
        if self.etp is not None and self.etp != self.tp:
            parts.append(f"etp{self.etp}")
        if self.cp > 1:
            parts.append(f"cp{self.cp}")
        parts.append(f"mb{self.micro_batch}")
        if self.zero:
            parts.append("fsdp" if self.zero == 3 else f"zero{self.zero}")
        if self.recompute != "none":
            parts.append(f"rc-{self.recompute}")
        if self.schedule == "interleaved":
            parts.append(f"il{self.chunks}")
        if self.recompute_layers:
            parts.append(f"rc{self.recompute_layers}")
        if self.offload_layers:
            parts.append(f"off{self.offload_layers}")
        if self.moe_capacity:
            parts.append(f"cap{self.moe_capacity:g}")
        if self.moe_dispatcher != "alltoall":
            parts.append(self.moe_dispatcher)
        if self.moe_a2a_overlap:
            parts.append("a2a-ovl")
        return " ".join(parts)

    def summary(self, mode: str = "train") -> str:
        """The plan for people ("TP2 PP9 DP8, micro-batch 1, ZeRO-1, selective recompute");
        ``mode="serve"``: the degrees only (micro-batches, ZeRO and recomputation are
        training's). ``describe()`` is the compact token form of JSON and labels."""
        degrees = f"TP{self.tp} PP{self.pp} DP{self.dp}"
        degrees += f" EP{self.ep}" if self.ep > 1 else ""
        degrees += f" ETP{self.etp}" if self.etp is not None and self.etp != self.tp else ""
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
        if self.recompute_layers:
            parts.append(f"{self.recompute_layers} layers recomputed per stage")
        if self.offload_layers:
            parts.append(f"{self.offload_layers} layers offloaded per stage")
        if self.moe_capacity:
            parts.append(f"expert capacity {self.moe_capacity:g}")
        if self.moe_dispatcher != "alltoall":
            parts.append(f"{self.moe_dispatcher} dispatcher")
        if self.moe_a2a_overlap:
            parts.append("all-to-all overlapped")
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
        if m.n_layers < self.pp:
            raise ConfigError(
                f"plan: pp({self.pp}) > n_layers({m.n_layers}) of {m.name} (every pipeline "
                "stage holds at least one layer)"
            )
        self.stage_layers(m)  # checks first/last stage layers
        if self.offload_layers > max(self.stage_layers(m)):
            raise ConfigError(
                f"plan: offload_layers({self.offload_layers}) > the {max(self.stage_layers(m))} "
                f"layers of a pipeline stage of {m.name}"
            )
        if self.recompute_layers > max(self.stage_layers(m)):
            raise ConfigError(
                f"plan: recompute_layers({self.recompute_layers}) > the "
                f"{max(self.stage_layers(m))} layers of a pipeline stage of {m.name}"
            )
        if self.ep > 1 and not m.is_moe:
            raise ConfigError(f"plan: ep({self.ep}) > 1 but {m.name} has no experts")
        if m.is_moe and m.n_experts % self.ep:
            raise ConfigError(
                f"plan: n_experts({m.n_experts}) of {m.name} is not divisible by ep({self.ep})"
            )
        if not m.is_moe and (self.etp is not None and self.etp != self.tp):
            raise ConfigError(f"plan: etp({self.etp}) is set but {m.name} has no experts")

    def stage_layers(self, m: ModelArgs) -> tuple[int, ...]:
        """Layers of each physical pipeline stage (the sum of its ``chunks`` virtual stages);
        see the module docstring. Raises if the given first/last stage layers do not fit."""
        return _stage_layers(
            m.n_layers, self.pp, self.chunks, self.first_stage_layers, self.last_stage_layers
        )

    def distinct_stages(self, m: ModelArgs) -> tuple[int, ...]:
        """Indices of the stages that can differ in memory or time: the first, the last, and
        the first stage of every layer count (stages with as many layers and no embedding or
        head are alike, and an earlier one keeps more micro-batches in flight)."""
        layers = self.stage_layers(m)
        seen: dict[int, int] = {}
        for i, n in enumerate(layers):
            seen.setdefault(n, i)
        return tuple(sorted({0, self.pp - 1, *seen.values()}))

    def chunk_layers(self, m: ModelArgs) -> tuple[int, ...]:
        """Layers of each virtual stage in pipeline order (``pp x chunks`` entries; virtual
        stage j runs on physical stage j mod pp)."""
        return _chunk_layers(
            m.n_layers, self.pp, self.chunks, self.first_stage_layers, self.last_stage_layers
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
        """EP groups are ``ep`` ranks at stride ``etp`` (expert TP innermost)."""
        return self.expert_tp

    @property
    def pp_stride(self) -> int:
        return self.tp * self.cp * self.dp


def _split(n: int, parts: int) -> list[int]:
    """``n`` split into ``parts`` near-equal whole parts, the larger ones in the middle (the
    ends carry the embedding and the LM head): the ``n mod parts`` extra layers go to the
    middle block of stages (on a tie, the block leans to the first stages)."""
    if parts <= 0:
        return []
    base, extra = divmod(n, parts)
    lo = (parts - extra) // 2
    return [base + (lo <= i < lo + extra) for i in range(parts)]


@lru_cache(maxsize=4096)
def _chunk_layers(
    n_layers: int, pp: int, chunks: int, first: int | None, last: int | None
) -> tuple[int, ...]:
    stages = pp * chunks
    if first is None and last is None:
        return tuple(_split(n_layers, stages))
    if pp == 1:
        raise ConfigError(
            f"plan: first_stage_layers({first}) / last_stage_layers({last}) need pp > 1"
        )
    # Megatron-Core's decoder_first/last_pipeline_num_layers: the first / last physical stage
    # holds that many layers (split over its virtual stages), the others share the rest.
    f = first if first is not None else 0
    la = last if last is not None else 0
    inner = pp - (first is not None) - (last is not None)
    rest = n_layers - f - la
    if rest < 0 or (inner == 0 and rest) or (inner > 0 and rest < inner):
        raise ConfigError(
            f"plan: first_stage_layers({first}) + last_stage_layers({last}) do not fit the "
            f"{n_layers} layers over pp({pp}) stages (each holds at least one layer)"
        )
    mid = _split(rest, inner)
    physical = ([f] if first is not None else []) + mid + ([la] if last is not None else [])
    out = [0] * stages
    for i, n in enumerate(physical):
        for j, c in enumerate(_split(n, chunks)):
            out[j * pp + i] = c
    return tuple(out)


@lru_cache(maxsize=4096)
def _stage_layers(
    n_layers: int, pp: int, chunks: int, first: int | None, last: int | None
) -> tuple[int, ...]:
    ch = _chunk_layers(n_layers, pp, chunks, first, last)
    per = [sum(ch[i::pp]) for i in range(pp)]
    if min(per) < 1:
        raise ConfigError(
            f"plan: a pipeline stage of pp({pp}) x chunks({chunks}) holds no layer of the "
            f"{n_layers} (layers per stage: {per})"
        )
    return tuple(per)
