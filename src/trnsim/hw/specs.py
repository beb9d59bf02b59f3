"""Hardware spec types: engines, NeuronCores, chips, links, fabric levels and systems.

Frozen, slotted dataclasses with structural equality (usable as cache keys). Units are SI:
hertz, bytes, bytes/s, FLOP/s, seconds, watts.

The rule every spec enforces on construction: **every figure has a source**. Each spec carries
``sources`` (field name -> where the figure comes from) and ``notes`` (field name -> where
sources disagree, the alternative value and why this one was chosen). A numeric field without
a source is an error. Derived figures are properties, never fields, so they cannot drift from
the figures they come from; their docstrings give the derivation.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Literal

from trnsim.errors import ConfigError, UnknownNameError
from trnsim.hw.table import Table

#: Which way a published link figure counts. ``per-direction``: what one chip can send (and, at
#: the same time, receive); ``bidirectional``: send + receive added, as NVIDIA and Google quote
#: NVLink and ICI. The fabric model always works per direction (:attr:`LinkSpec.bw_per_direction`).
Direction = Literal["per-direction", "bidirectional"]
DIRECTIONS: tuple[str, ...] = ("per-direction", "bidirectional")


def _per_direction(bw: float, direction: str) -> float:
    return bw / 2 if direction == "bidirectional" else bw


def _check_direction(spec: object) -> None:
    direction = spec.direction  # type: ignore[attr-defined]
    if direction not in DIRECTIONS:
        raise ConfigError(
            f"{type(spec).__name__} {getattr(spec, 'name', '?')!r}: direction must be one of "
            f"{', '.join(DIRECTIONS)}, got {direction!r}"
        )


Sources = Table  # field name -> source text (a Table of str values; typed loosely on purpose)


def _check_sources(spec: object) -> None:
    """Refuse a spec whose numeric figures do not all name a source."""
    sources = spec.sources  # type: ignore[attr-defined]
    missing = []
    for f in dataclasses.fields(spec):  # type: ignore[arg-type]
        value = getattr(spec, f.name)
        is_figure = (isinstance(value, int | float) and not isinstance(value, bool)) or (
            isinstance(value, Table) and len(value) > 0
        )
        if f.name in ("sources", "notes") or not is_figure:
            continue
        if f.name not in sources:
            missing.append(f.name)
    if missing:
        raise ConfigError(
            f"{type(spec).__name__} {getattr(spec, 'name', '?')!r}: every hardware figure needs a "
            f"source; missing for {', '.join(missing)}"
        )


def _table(value: object, what: str) -> Table:
    return value if isinstance(value, Table) else Table(value or {}, what=what)  # type: ignore[arg-type]


class _Spec:
    """Mixin: freezes mapping fields into Tables and checks every figure has a source."""

    __slots__ = ()

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if isinstance(value, dict):
                object.__setattr__(self, f.name, Table(value, what=f.name.replace("_", " ")))
        _check_sources(self)


# ---------------------------------------------------------------------------------------------
# NeuronCore parts
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EngineSpec(_Spec):
    """A NeuronCore vector-style engine (Vector, Scalar, GpSimd).

    ``elems_per_cycle``: elements per cycle across all partitions, by dtype class: ``"fast"`` for
    bf16/fp16/fp8 where the engine has a wide path, ``"other"`` for everything else.
    ``static_latency_cycles``: this engine's dependent-instruction latency where a document
    gives one for it (None: the core's ``CoreSpec.static_latency_cycles``).
    """

    name: str
    clock_hz: float
    lanes: int
    elems_per_cycle: Table
    fp32_flops: float | None = None
    static_latency_cycles: int | None = None
    sources: Table = field(default_factory=Table)
    notes: Table = field(default_factory=Table)


@dataclass(frozen=True, slots=True)
class TensorEngineSpec(_Spec):
    """The Tensor engine: a ``rows x cols`` systolic array of processing elements.

    ``rate``: throughput multiplier per input dtype relative to the bf16 rate (fp32 is 1/4;
    FP8 double-row is 2 on v3/v4; MX formats are 4 on v4, the 512x128 MX array).
    ``published_peak_flops``: the per-core peaks AWS publishes, kept beside the derived ones.
    ``moving_fmax``: the largest moving free size of one matmul, by PSUM destination dtype.
    """

    name: str
    rows: int
    cols: int
    clock_hz: float
    rate: Table
    published_peak_flops: Table
    moving_fmax: Table
    stationary_fmax: int
    sources: Table = field(default_factory=Table)
    notes: Table = field(default_factory=Table)

    def peak_flops(self, dtype: str) -> float:
        """Derived: rows x cols multiply-accumulates (2 FLOP each) per cycle x clock x rate."""
        return self.rows * self.cols * 2 * self.clock_hz * self.rate[dtype]


@dataclass(frozen=True, slots=True)
class DmaSpec(_Spec):
    """The DMA engines of one NeuronCore.

    ``engine_bw``: one engine's streaming bandwidth (bytes/s) once a descriptor's fixed cost is
    paid. ``descriptor_s``: that fixed cost, the engine time of one descriptor (one contiguous
    element, in practice one partition's row) on top of its bytes / ``engine_bw``: what makes
    short rows slow. ``fixed_latency_s``: from the semaphore that releases a transfer to its
    first byte moving (a latency; the engine is not busy meanwhile). ``element_s``: the engine
    time of one element of an element-strided (transposing) access, a transfer whose HBM side
    is contiguous for one element only while its on-chip rows are longer (``nl.load_transpose2d``):
    one descriptor holds the whole stride pattern (SDK ``nki-dge.rst``), so each element costs
    this instead of a descriptor.
    """

    engines: int
    queues_per_engine: int
    engine_bw: float
    fixed_latency_s: float
    descriptor_s: float
    min_efficient_bytes_per_partition: int
    saturating_bytes_per_partition: int
    element_s: float
    name: str = "dma"
    sources: Table = field(default_factory=Table)
    notes: Table = field(default_factory=Table)

    @property
    def core_bw(self) -> float:
        """Derived: all engines of a core streaming at once (engines x per-engine bandwidth)."""
        return self.engines * self.engine_bw

    def row_efficiency(self, row_bytes: float) -> float:
        """Derived: the fraction of ``engine_bw`` a stream of ``row_bytes``-byte descriptors
        reaches, ``t_bytes / (t_bytes + descriptor_s)`` with ``t_bytes = row_bytes /
        engine_bw`` (the DMA guide's saturation curve: a small fraction below 256 B per
        partition, about 90% at 2 KiB, about 95% or more from 4 KiB)."""
        t_bytes = row_bytes / self.engine_bw
        return t_bytes / (t_bytes + self.descriptor_s) if row_bytes > 0 else 0.0


@dataclass(frozen=True, slots=True)
class CoreSpec(_Spec):
    """One NeuronCore: on-chip memories, engines and DMA.

    ``min_ii_cycles``: the shortest time an instruction occupies its engine (MIN_II).
    ``static_latency_cycles``: the engine cycles from the end of an instruction's issue to its
    results being readable by a dependent instruction (the "static instruction overhead" of
    the performance guide): back-to-back independent instructions hide it, a dependent one
    waits for it.
    """

    name: str
    generation: int
    partitions: int
    sbuf_bytes: int
    psum_bytes: int
    psum_banks: int
    min_ii_cycles: int
    static_latency_cycles: int
    tensor: TensorEngineSpec
    vector: EngineSpec
    scalar: EngineSpec
    gpsimd: EngineSpec
    dma: DmaSpec
    supports_mx: bool = False
    supports_bf16_psum: bool = False
    sources: Table = field(default_factory=Table)
    notes: Table = field(default_factory=Table)

    @property
    def sbuf_bytes_per_partition(self) -> int:
        """Derived: SBUF bytes / partitions (192 / 224 / 256 KiB on v2 / v3 / v4)."""
        return self.sbuf_bytes // self.partitions

    @property
    def psum_bytes_per_partition(self) -> int:
        """Derived: PSUM bytes / partitions (16 KiB)."""
        return self.psum_bytes // self.partitions

    @property
    def psum_bank_bytes(self) -> int:
        """Derived: bytes of one PSUM bank in one partition (2 KiB = 512 fp32)."""
        return self.psum_bytes_per_partition // self.psum_banks

    def latency_cycles(self, engine: str) -> int:
        """Derived: the dependent-instruction latency of ``engine`` (``"vector"``, ...): its own
        figure where its spec has one, else the core's ``static_latency_cycles``."""
        spec = getattr(self, engine, None)
        own = getattr(spec, "static_latency_cycles", None)
        return self.static_latency_cycles if own is None else own


# ---------------------------------------------------------------------------------------------
# Chips and links
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LinkSpec(_Spec):
    """A chip-to-chip interconnect as one chip sees it.

    ``bw_per_chip`` is the figure as its source publishes it, counted the way ``direction`` says.
    """

    name: str
    bw_per_chip: float
    links_per_chip: int
    latency_s: float
    direction: Direction
    sources: Table = field(default_factory=Table)
    notes: Table = field(default_factory=Table)

    def __post_init__(self) -> None:
        _Spec.__post_init__(self)
        _check_direction(self)

    @property
    def bw_per_link(self) -> float:
        """Derived: per-chip bandwidth / links per chip (in the figure's own direction)."""
        return self.bw_per_chip / self.links_per_chip

    @property
    def bw_per_direction(self) -> float:
        """Derived: what one chip sends per second (half a bidirectional figure)."""
        return _per_direction(self.bw_per_chip, self.direction)


@dataclass(frozen=True, slots=True)
class ChipSpec(_Spec):
    """An accelerator package (a Trainium chip, a GPU, a TPU).

    ``peak_flops`` holds the published dense peaks by dtype (FLOP/s per chip);
    ``sparse_peak_flops`` the published structured-sparsity peaks. ``core`` is the NeuronCore
    preset for Trainium chips (None for peers, whose cores trnsim does not emulate).
    """

    name: str
    vendor: str
    family: str
    cores: int
    hbm_bytes: float
    hbm_bw: float
    peak_flops: Table
    link: LinkSpec
    core: CoreSpec | None = None
    chiplets: int | None = None
    hbm_stacks: int | None = None
    tdp_w: float | None = None
    sparse_peak_flops: Table = field(default_factory=Table)
    dtypes: tuple[str, ...] = ()
    sparsity_patterns: tuple[str, ...] = ()
    process: str = ""
    projected: bool = False
    sources: Table = field(default_factory=Table)
    notes: Table = field(default_factory=Table)

    def peak(self, dtype: str) -> float:
        """The published dense peak for ``dtype`` in FLOP/s (error lists the known dtypes)."""
        return self.peak_flops[dtype]

    def tensor_engine_peak(self, dtype: str) -> float:
        """Derived: cores x the per-core Tensor engine peak (array size x clock x dtype rate)."""
        if self.core is None:
            raise UnknownNameError(f"{self.name} has no NeuronCore model; no Tensor engine peak")
        return self.cores * self.core.tensor.peak_flops(dtype)


# ---------------------------------------------------------------------------------------------
# Systems
# ---------------------------------------------------------------------------------------------

TopologyKind = Literal["single", "torus", "switch", "nvswitch", "fat-tree", "hierarchical"]


@dataclass(frozen=True, slots=True)
class FabricLevel(_Spec):
    """One level of a system's interconnect, as seen by one chip.

    ``span`` is how many chips one domain of this level joins (4 chips in a Trn3 Gen2 server,
    144 in the UltraServer, ...). ``bw_per_chip`` is the bandwidth one chip has into this level
    (bytes/s), as published, counted the way ``direction`` says; the fabric model reads
    :attr:`bw_per_direction`. ``latency_s`` is the one-hop latency. ``oversubscription``
    (fat-trees): 1.0 is non-blocking; None means not stated (taken as 1.0). ``rails`` (fat-trees):
    a rail-optimised network has one rail per GPU of a server (GPU i of every server on rail i's
    leaf switches); None for a network without rails.
    """

    name: str
    kind: TopologyKind
    span: int
    bw_per_chip: float
    latency_s: float
    direction: Direction
    links_per_chip: int | None = None
    dims: tuple[int, ...] = ()
    oversubscription: float | None = None
    rails: int | None = None
    sources: Table = field(default_factory=Table)
    notes: Table = field(default_factory=Table)

    def __post_init__(self) -> None:
        _Spec.__post_init__(self)
        _check_direction(self)
        if self.dims and math.prod(self.dims) != self.span:
            raise ConfigError(
                f"fabric level {self.name!r}: torus dims {self.dims} make "
                f"{math.prod(self.dims)} chips, not the span {self.span}"
            )

    @property
    def bw_per_direction(self) -> float:
        """Derived: what one chip sends into this level per second (half a bidirectional figure)."""
        return _per_direction(self.bw_per_chip, self.direction)


@dataclass(frozen=True, slots=True)
class SystemSpec(_Spec):
    """A set of chips and the fabric that joins them: an instance, an UltraServer, a pod, a cluster.

    ``levels`` go from the innermost (in-server) to the outermost (cluster network). Aggregates
    (peak FLOP/s, HBM bytes and bandwidth) are derived from the chip, never typed in.
    """

    name: str
    kind: Literal["instance", "server", "ultraserver", "rack", "pod", "cluster"]
    chip: ChipSpec
    chips: int
    levels: tuple[FabricLevel, ...]
    chips_per_server: int | None = None
    host_cpu: str = ""
    description: str = ""
    sources: Table = field(default_factory=Table)
    notes: Table = field(default_factory=Table)

    def __post_init__(self) -> None:
        _Spec.__post_init__(self)
        if self.chips < 1:
            raise ConfigError(f"system {self.name!r}: chips must be >= 1, got {self.chips}")
        if self.chips_per_server and self.chips % self.chips_per_server:
            raise ConfigError(
                f"system {self.name!r}: chips ({self.chips}) is not a multiple of "
                f"chips_per_server ({self.chips_per_server})"
            )
        spans = [lvl.span for lvl in self.levels]
        if spans != sorted(spans):
            raise ConfigError(
                f"system {self.name!r}: fabric levels must go from inner to outer "
                f"(non-decreasing span), got spans {spans}"
            )

    @property
    def servers(self) -> int | None:
        """Derived: chips / chips per server."""
        return self.chips // self.chips_per_server if self.chips_per_server else None

    def peak_flops(self, dtype: str) -> float:
        """Derived: chips x the chip's published dense peak for ``dtype``."""
        return self.chips * self.chip.peak(dtype)

    @property
    def hbm_bytes(self) -> float:
        """Derived: chips x HBM bytes per chip."""
        return self.chips * self.chip.hbm_bytes

    @property
    def hbm_bw(self) -> float:
        """Derived: chips x HBM bandwidth per chip."""
        return self.chips * self.chip.hbm_bw

    @property
    def link_bw(self) -> float:
        """Derived: chips x the chip's scale-up link bandwidth ('aggregate NeuronLink')."""
        return self.chips * self.chip.link.bw_per_chip

    @property
    def scale_up_levels(self) -> tuple[FabricLevel, ...]:
        """The levels below the scale-out network: NVLink/NVSwitch, ICI, NeuronLink and switches
        (every level that is not a ``fat-tree``)."""
        return tuple(lvl for lvl in self.levels if lvl.kind != "fat-tree")

    @property
    def scale_up_chips(self) -> int:
        """Derived: chips one scale-up domain joins (the largest span below the scale-out network:
        8 on an HGX node, 72 on an NVL72 rack, the slice on a TPU, 64 on a Trn2 UltraServer);
        1 when the system has no scale-up fabric. Tensor parallelism belongs inside it."""
        spans = [lvl.span for lvl in self.scale_up_levels]
        return min(max(spans), self.chips) if spans else 1

    @property
    def scale_out_level(self) -> FabricLevel | None:
        """The scale-out network (the outermost ``fat-tree`` level: EFA, InfiniBand, RoCE, DCN),
        or None when the system has none."""
        outer = self.levels[-1] if self.levels else None
        return outer if outer is not None and outer.kind == "fat-tree" else None

    def level(self, name: str) -> FabricLevel:
        """The fabric level called ``name`` (error lists the levels)."""
        for lvl in self.levels:
            if lvl.name == name:
                return lvl
        valid = ", ".join(lvl.name for lvl in self.levels)
        raise UnknownNameError(f"system {self.name!r} has no fabric level {name!r}; valid: {valid}")

    def with_chips(self, chips: int) -> SystemSpec:
        """The same system with another chip count (for clusters and partial allocations)."""
        return dataclasses.replace(self, chips=chips)
