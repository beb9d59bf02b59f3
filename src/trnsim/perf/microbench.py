"""Single-chip microbenchmarks: GEMM TFLOP/s by shape and precision, HBM STREAM bandwidth and
attention TFLOP/s, to set beside cuBLAS, nccl-tests-style and NKI benchmark figures.

Two sources, one per kind of target:

- **Trainium chips and NeuronCores** (targets with a ``CoreSpec``): real NKI kernels run by
  trnsim in timing-only mode and timed by the core timing model (``trnsim.core.timing``), the
  model that times user kernels and builds the performance model's matmul tables:

  - GEMM ``C[M, N] = A[M, K] @ B[K, N]``: the compute-table kernel
    (``trnsim/perf/kernels/matmul_table.py``, the NKI matmul tutorial's blocking), bf16, or fp8
    in the double-row mode on NeuronCore-v3+; on a chip of c cores each core computes N / c
    columns at once, sharing the chip's HBM bandwidth;
  - STREAM triad ``a = b + s c`` (``kernels/stream.py``), fp32, 3 x 4 bytes per element,
    every core streaming its share;
  - attention forward (``kernels/attention_fwd.py``), bf16, flash-style (scores on chip), one
    head per core at a time, heads spread over the cores.

  Each figure is the kernel's modelled latency (``Profile.total_s``: DMA included).

- **Other chips** (GPUs, TPUs, Gaudi): GEMMs from the chip family's GEMM efficiency surface
  (``trnsim.perf.gemm``: fitted to published GEMM points, DeepGEMM's and peers.md G's cuBLASLt
  on Hopper; Blackwell borrows Hopper's), ``t = 2MKN / (P e(M, N, K)) + t0`` (at least the HBM
  time); chips without a surface (TPUs, Gaudi) use their default training stack's profile,
  ``t = max(2MKN / (P e_mm M / (M + r_half)), bytes / (B e_hbm)) + t_op``. STREAM is
  ``B e_hbm`` and attention ``P e_attn`` of that stack's profile. Where the surface or the
  profile was fitted to or stated from the same measurements (the Hopper surface includes
  peers.md G's cuBLASLt points; Megatron-Core's ``hbm`` and ``attention`` are stated from
  peers.md G), the row says so: those rows are not a check.

``PUBLISHED`` holds the single-chip measurements of the calibration data; ``run`` reports each
row's error against them. Units: seconds, FLOP/s, bytes/s.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from trnsim.errors import ConfigError, UnknownNameError
from trnsim.hw import ChipSpec, CoreSpec
from trnsim.hw import chip as lookup_chip
from trnsim.hw import core as lookup_core
from trnsim.perf.gemm import surface_for
from trnsim.perf.precision import compute_dtype
from trnsim.perf.stacks import default_stack

BENCHES = ("gemm", "stream", "attention")
GEMM_DTYPES = ("bf16", "fp8")
DEFAULT_TARGETS = ("trn1", "trn2", "trn3", "h100-sxm")
DEFAULT_SIZES = (1024, 2048, 4096, 8192)
MAX_SIZE = 16384
TILE = 128
STREAM_ROWS, STREAM_COLS = 8192, 2048  # per core: 3 x 64 MiB of fp32 through the triad
KEY_BLOCK = 512  # the attention kernel's key block (one fp32 PSUM bank)

_KERNELS = Path(__file__).with_name("kernels")


@dataclass(frozen=True, slots=True)
class Attention:
    """An attention forward problem: ``batch x heads`` heads of ``seq`` tokens, ``head_dim``."""

    batch: int = 2
    heads: int = 16
    seq: int = 8192
    head_dim: int = 128
    causal: bool = False

    def __post_init__(self) -> None:
        for f in ("batch", "heads", "seq", "head_dim"):
            if getattr(self, f) < 1:
                raise ConfigError(f"attention: {f} must be >= 1, got {getattr(self, f)}")
        if self.head_dim > TILE:
            raise ConfigError(f"attention: head_dim must be <= {TILE}, got {self.head_dim}")
        step = KEY_BLOCK if self.seq > KEY_BLOCK else TILE
        if self.seq % step:
            raise ConfigError(
                f"attention: seq ({self.seq}) must be a multiple of {step} (the kernel's "
                f"{'key block' if step == KEY_BLOCK else 'tile'})"
            )

    @property
    def flops(self) -> float:
        """4 x seq^2 x head_dim per head (scores and P.V, 2 FLOPs per MAC); causal: half, as
        FlashAttention's benchmarks count it."""
        f = 4.0 * self.batch * self.heads * self.seq**2 * self.head_dim
        return f / 2 if self.causal else f

    @property
    def label(self) -> str:
        mask = "causal" if self.causal else "full"
        return f"b{self.batch} h{self.heads} s{self.seq} d{self.head_dim} {mask}"


@dataclass(frozen=True, slots=True)
class Published:
    """A measured single-chip figure and its source; ``toolchain``: the Neuron toolchain it
    was measured with (``trnsim.core.calibration.TOOLCHAINS``), which the timing model then
    uses for that row."""

    value: float
    source: str
    toolchain: str = "current"


_G = "shared/calibration/peers.md G (Azure AI-benchmarking-guide, ND H100 v5)"
_A = "shared/calibration/trainium.md A (NKI matmul tutorial, fully optimized, 6.97 ms)"
#: (target, bench, dtype, shape label) -> measurement
PUBLISHED: dict[tuple[str, str, str, str], Published] = {
    ("h100-sxm", "gemm", "fp8", "8192x8192x8192"): Published(1290e12, _G + ", cuBLASLt FP8"),
    ("h100-sxm", "gemm", "fp8", "4096x4096x4096"): Published(1217e12, _G + ", cuBLASLt FP8"),
    ("h100-sxm", "gemm", "fp8", "2048x2048x2048"): Published(1011e12, _G + ", cuBLASLt FP8"),
    ("h100-sxm", "gemm", "fp8", "1024x1024x1024"): Published(274e12, _G + ", cuBLASLt FP8"),
    ("h100-sxm", "stream", "fp32", "triad"): Published(2.97e12, _G + ", STREAM triad"),
    ("h100-sxm", "attention", "bf16", Attention().label): Published(
        328e12, _G + ", FlashAttention-2 forward (mask not stated: compared as full)"
    ),
    ("neuroncore-v2", "gemm", "bf16", "4096x8192x8192"): Published(
        2 * 4096 * 8192 * 8192 / 6.97e-3, _A, toolchain="neuron-2.20"
    ),
}


@dataclass(frozen=True, slots=True)
class MicroResult:
    """One microbenchmark figure."""

    target: str
    bench: str
    dtype: str
    shape: str
    work: float  # FLOPs (gemm, attention) or bytes (stream)
    seconds: float
    unit: str  # "FLOP/s" or "B/s"
    peak: float  # the target's published peak in the unit
    model: str
    published: Published | None = None

    @property
    def rate(self) -> float:
        return self.work / self.seconds

    @property
    def fraction_of_peak(self) -> float:
        return self.rate / self.peak

    @property
    def error(self) -> float | None:
        """Signed relative error against the published figure (None without one)."""
        return None if self.published is None else self.rate / self.published.value - 1

    def as_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "bench": self.bench,
            "dtype": self.dtype,
            "shape": self.shape,
            "work": self.work,
            "seconds": self.seconds,
            "rate": self.rate,
            "unit": self.unit,
            "peak": self.peak,
            "fraction_of_peak": self.fraction_of_peak,
            "model": self.model,
            "published": None if self.published is None else self.published.value,
            "published_source": None if self.published is None else self.published.source,
            "error": self.error,
        }


@dataclass(frozen=True, slots=True)
class Target:
    """A chip (``cores`` NeuronCores or a peer) or one NeuronCore."""

    name: str
    chip: ChipSpec | None
    core: CoreSpec | None
    cores: int

    @property
    def timed(self) -> bool:
        """True if the core timing model times it (a NeuronCore in hw)."""
        return self.core is not None


def resolve_target(name: str) -> Target:
    """A chip preset (any vendor) or a NeuronCore preset; the error lists both kinds."""
    try:
        c = lookup_chip(name)
        return Target(c.name, c, c.core, c.cores if c.core is not None else 1)
    except UnknownNameError:
        pass
    try:
        k = lookup_core(name)
    except UnknownNameError:
        from trnsim.hw.catalog import CHIPS, CORES

        raise UnknownNameError(
            f"no chip or NeuronCore {name!r}; chips: {', '.join(n for n, _ in CHIPS)}; cores: "
            f"{', '.join(n for n, _ in CORES)}"
        ) from None
    from trnsim.core.calibration import chip_of

    return Target(k.name, chip_of(k), k, 1)


def _gen(core: CoreSpec) -> str:
    return f"gen{core.generation}"


@lru_cache(maxsize=8)
def _module(file: str) -> Any:
    from trnsim.nki.kernelfile import load_module

    return load_module(str(_KERNELS / file))


def _time(
    kernel: Callable[..., Any],
    arrays: tuple,
    t: Target,
    record_on: str,
    pub: Published | None = None,
    **kw: Any,
) -> float:
    """Modelled latency of one core's stream, all of the target's cores active on its HBM
    (with the DMA efficiency of the toolchain ``pub`` was measured with, if any)."""
    from trnsim.core.calibration import TOOLCHAINS
    from trnsim.core.timing import schedule
    from trnsim.nki.benchmark import record

    stream = record(kernel, *arrays, target=record_on, **kw)
    eff = TOOLCHAINS[pub.toolchain].dma_efficiency if pub is not None else None
    return schedule(stream, t.core, chip=t.chip, active_cores=t.cores, dma_efficiency=eff).total_s


def _single_core(t: Target) -> bool:
    return t.core is not None and t.chip is not None and t.name == t.core.name


def _peak(t: Target, dtype: str) -> float:
    """The target's published peak for ``dtype`` (one core: its own, or the chip's share)."""
    assert t.chip is not None
    chip_peak = t.chip.peak(compute_dtype(t.chip, dtype)[0])
    if _single_core(t):
        assert t.core is not None
        own = t.core.tensor.published_peak_flops.get(dtype)
        return own if own else chip_peak / t.chip.cores
    return chip_peak


def _hbm(t: Target) -> float:
    """HBM bandwidth of the target (one core: the chip's share per core)."""
    assert t.chip is not None
    return t.chip.hbm_bw / (t.chip.cores if _single_core(t) else 1)


def _profile(t: Target):
    assert t.chip is not None
    stack = default_stack(t.chip, "train")
    return stack, stack.roofline


# --- the three benchmarks ------------------------------------------------------------------------


def gemm(t: Target, m: int, k: int, n: int, dtype: str = "bf16") -> MicroResult:
    """``C[m, n] = A[m, k] @ B[k, n]`` in ``dtype`` on target ``t`` (module docstring)."""
    if dtype not in GEMM_DTYPES:
        raise ConfigError(f"gemm: dtype must be one of {', '.join(GEMM_DTYPES)}, got {dtype!r}")
    for name, v in (("m", m), ("k", k), ("n", n)):
        if v < TILE or v % TILE or v > MAX_SIZE:
            raise ConfigError(
                f"gemm: {name} ({v}) must be a multiple of {TILE} from {TILE} to {MAX_SIZE}"
            )
    flops = 2.0 * m * k * n
    shape = f"{m}x{k}x{n}"
    pub = PUBLISHED.get((t.name, "gemm", dtype, shape))
    if t.timed:
        assert t.core is not None
        if n % (t.cores * TILE):
            raise ConfigError(
                f"gemm: n ({n}) must split into {t.cores} cores x whole {TILE}-column tiles"
            )
        mod = _module("matmul_table.py")
        double_row = dtype == "fp8" and t.core.generation >= 3
        a_t, b = mod.make_inputs(P=m, K=k, Q=n // t.cores, dtype=dtype, empty=True)
        secs = _time(mod.blocked_matmul, (a_t, b), t, _gen(t.core), pub, double_row=double_row)
        mode = " (fp8 in the double-row mode)" if double_row else ""
        model = (
            f"core timing model ({t.core.name}): the compute-table NKI matmul kernel, N split "
            f"over {t.cores} core(s){mode}"
        )
        return MicroResult(t.name, "gemm", dtype, shape, flops, secs, "FLOP/s", _peak(t, dtype),
                           model, pub)  # fmt: skip
    stack, eff = _profile(t)
    assert t.chip is not None
    peak = _peak(t, dtype)
    byts = (m * k + k * n) * (1 if dtype == "fp8" else 2) + m * n * 2
    surf = surface_for(t.chip.family)
    if surf is not None:  # the chip family's GEMM surface, fitted to published GEMM points
        t_c = flops / (peak * surf.efficiency(m, n, k)) + surf.t0
        secs = max(t_c, byts / (t.chip.hbm_bw * eff.hbm) + surf.t0)
        borrowed = "" if dtype == surf.dtype else f"; its {surf.dtype} efficiency borrowed"
        fitted = " (fitted to these measurements among others)" if pub else ""
        model = f"GEMM surface of {surf.family}{fitted}: {surf.source}{borrowed}"
    else:
        e = eff.matmul * m / (m + eff.half_rows)
        secs = max(flops / (peak * e), byts / (t.chip.hbm_bw * eff.hbm)) + eff.op_overhead_s
        model = (
            f"{stack.name} profile: peak x matmul {eff.matmul:g} x M/(M + {eff.half_rows:g}), "
            f"HBM x {eff.hbm:g}, + {eff.op_overhead_s * 1e6:g} us per op"
        )
    return MicroResult(t.name, "gemm", dtype, shape, flops, secs, "FLOP/s", peak, model, pub)


def stream(t: Target) -> MicroResult:
    """The STREAM triad on every core of ``t`` (peers: HBM bandwidth x the profile's ``hbm``)."""
    pub = PUBLISHED.get((t.name, "stream", "fp32", "triad"))
    if t.timed:
        assert t.core is not None
        mod = _module("stream.py")
        b, c = mod.make_inputs(rows=STREAM_ROWS, cols=STREAM_COLS, empty=True)
        secs = _time(mod.stream_triad, (b, c), t, _gen(t.core))
        byts = 3.0 * STREAM_ROWS * STREAM_COLS * 4 * t.cores
        model = (
            f"core timing model ({t.core.name}): the STREAM triad NKI kernel on {t.cores} "
            f"core(s), {3 * STREAM_ROWS * STREAM_COLS * 4 / 2**20:.0f} MiB each (DMA efficiency "
            "calibrated on a compute-bound kernel: streaming is under-predicted)"
        )
        return MicroResult(t.name, "stream", "fp32", "triad", byts, secs, "B/s", _hbm(t), model,
                           pub)  # fmt: skip
    stack, eff = _profile(t)
    bw = _hbm(t)
    byts = 3.0 * 2**30
    stated = " (stated from this measurement)" if pub and stack.name == "megatron-core" else ""
    model = f"{stack.name} profile: HBM bandwidth x hbm {eff.hbm:g}{stated}"
    return MicroResult(t.name, "stream", "fp32", "triad", byts, byts / (bw * eff.hbm), "B/s", bw,
                       model, pub)  # fmt: skip


def attention(t: Target, a: Attention = Attention()) -> MicroResult:
    """Attention forward ``a`` in bf16 on ``t`` (module docstring)."""
    pub = PUBLISHED.get((t.name, "attention", "bf16", a.label))
    peak = _peak(t, "bf16")
    if t.timed:
        assert t.core is not None
        mod = _module("attention_fwd.py")
        q, k, v = mod.make_inputs(S=a.seq, d=a.head_dim, empty=True)
        kernel = mod.attention_fwd if a.causal else mod.attention_full
        one = _time(kernel, (q, k, v), t, _gen(t.core), bf16_psum=t.core.supports_bf16_psum)
        waves = math.ceil(a.batch * a.heads / t.cores)
        model = (
            f"core timing model ({t.core.name}): the flash-attention NKI kernel, one head per "
            f"core, {waves} round(s) of {t.cores} core(s)"
        )
        return MicroResult(t.name, "attention", "bf16", a.label, a.flops, waves * one,
                           "FLOP/s", peak, model, pub)  # fmt: skip
    stack, eff = _profile(t)
    stated = " (stated from this measurement)" if pub and stack.name == "megatron-core" else ""
    model = f"{stack.name} profile: peak x attention {eff.attention:g}{stated}"
    secs = a.flops / (peak * eff.attention)
    return MicroResult(t.name, "attention", "bf16", a.label, a.flops, secs, "FLOP/s", peak, model,
                       pub)  # fmt: skip


def run(
    targets: Iterable[str] = DEFAULT_TARGETS,
    benches: Iterable[str] = BENCHES,
    sizes: Iterable[int] = DEFAULT_SIZES,
    dtypes: Iterable[str] = GEMM_DTYPES,
    attn: Attention = Attention(),
    advance: Callable[[], None] | None = None,
) -> list[MicroResult]:
    """Every benchmark on every target: GEMMs of each square size and dtype, STREAM, attention
    (``advance`` is called after each figure, for a progress bar)."""
    ts = [resolve_target(n) for n in targets]
    bs = list(benches)
    bad = [b for b in bs if b not in BENCHES]
    if bad:
        raise ConfigError(f"microbench: unknown benchmark {bad[0]!r}; valid: {', '.join(BENCHES)}")
    out: list[MicroResult] = []
    dts = list(dtypes)
    for t in ts:
        for b in bs:
            if b == "gemm":
                for dt in dts:
                    for s in sizes:
                        out.append(gemm(t, s, s, s, dt))
                        if advance:
                            advance()
                for shape in extra_gemms(t.name, dts):
                    out.append(gemm(t, *shape[1:], dtype=shape[0]))
                    if advance:
                        advance()
            elif b == "stream":
                out.append(stream(t))
            else:
                out.append(attention(t, attn))
            if advance and b != "gemm":
                advance()
    return out


def extra_gemms(target: str, dtypes: Iterable[str]) -> list[tuple[str, int, int, int]]:
    """The non-square published GEMMs of ``target`` (dtype, m, k, n), run beside the squares."""
    dts = set(dtypes)
    out = []
    for (name, bench, dtype, shape), _ in PUBLISHED.items():
        m, k, n = (int(x) for x in shape.split("x")) if bench == "gemm" else (0, 0, 0)
        if name == target and bench == "gemm" and dtype in dts and not m == k == n:
            out.append((dtype, m, k, n))
    return out


def count(targets: Iterable[str], benches: Iterable[str], sizes: Iterable[int],
          dtypes: Iterable[str]) -> int:  # fmt: skip
    """How many figures ``run`` computes (for a progress bar)."""
    bs = list(benches)
    dts = list(dtypes)
    total = 0
    for name in targets:
        total += sum(b != "gemm" for b in bs)
        if "gemm" in bs:
            t = resolve_target(name)
            total += len(list(sizes)) * len(dts) + len(extra_gemms(t.name, dts))
    return total
