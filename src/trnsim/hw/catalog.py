"""The hardware catalog: every named preset, with the source of every figure.

Units are SI (Hz, bytes, bytes/s, FLOP/s, s, W). Decimal prefixes: 1 GB = 1e9 bytes,
1 GiB = 2**30 bytes; each figure is entered in the unit its source uses.

Where sources disagree the chosen value is in the figure and the alternative is in ``notes``.
Aggregates (UltraServer PFLOP/s, HBM TB and TB/s) are properties of ``SystemSpec``, derived from
the chip figures below; the tests check they reproduce the seeds' tables.
"""

from __future__ import annotations

import dataclasses
import math

from trnsim.errors import UnknownNameError
from trnsim.hw import sources as S
from trnsim.hw.registry import Registry
from trnsim.hw.specs import (
    ChipSpec,
    CoreSpec,
    DmaSpec,
    EngineSpec,
    FabricLevel,
    LinkSpec,
    SystemSpec,
    TensorEngineSpec,
)

KiB, MiB, GiB = 2**10, 2**20, 2**30
GB, TB = 1e9, 1e12
GHZ = 1e9
TFLOPS, PFLOPS = 1e12, 1e15
US = 1e-6

CORES: Registry[CoreSpec] = Registry("NeuronCore preset")
CHIPS: Registry[ChipSpec] = Registry("chip preset")
SYSTEMS: Registry[SystemSpec] = Registry("system preset")

TRN3_SPARSITY = ("4:16", "4:12", "4:8", "2:8", "2:4", "1:4", "1:2")

# =============================================================================================
# NeuronCores (nki-notes.md section 4.1, from the v2/v3/v4 architecture guides)
# =============================================================================================


def _engine(name: str, clock: float, fast: int, other: int, fp32: float | None, src: str):
    srcs = {"clock_hz": src, "lanes": src, "elems_per_cycle": src}
    if fp32 is not None:
        srcs["fp32_flops"] = src
    return EngineSpec(
        name=name,
        clock_hz=clock,
        lanes=128,
        elems_per_cycle={"fast": fast, "other": other},
        fp32_flops=fp32,
        sources=srcs,
    )


NS = 1e-9


def _dma(
    engine_bw: float,
    theoretical: float,
    guide: str,
    measured: str = "",
    engines_note: str = "",
    element_s: float | None = None,
    element_note: str = "",
) -> DmaSpec:
    descriptor_note = (
        "measured on NeuronCore-v3 only (the packet timings above); the same engine time per "
        "descriptor is assumed on this generation"
    )
    return DmaSpec(
        engines=16,
        queues_per_engine=16,
        engine_bw=engine_bw,
        fixed_latency_s=1.3 * US,
        descriptor_s=5.3 * NS,
        min_efficient_bytes_per_partition=2 * KiB,
        saturating_bytes_per_partition=4 * KiB,
        element_s=5.3 * NS if element_s is None else element_s,
        sources={
            "engines": S.NEURON_DMA_GUIDE
            + " (16 DMA engines per NeuronCore); "
            + S.NEURON_DMA_OVERVIEW,
            "queues_per_engine": S.NEURON_DMA_OVERVIEW,
            "engine_bw": S.NEURON_DMA_GUIDE + " (table 'BW / Engine', B/ns; read as the "
            "streaming rate once a descriptor's fixed cost is paid)",
            "fixed_latency_s": S.NEURON_DMA_GUIDE + " (~1,300 ns semaphore-to-start)",
            "descriptor_s": S.TKF_PROFILES + ": hardware-DGE packets on one engine start 24 ns "
            "apart at 512 B, 80 ns at 2 KiB, 155 ns at 4 KiB, a least-squares line of "
            "5.3 ns + bytes / 27.4 B/ns (derived)",
            "min_efficient_bytes_per_partition": S.NEURON_DMA_GUIDE,
            "saturating_bytes_per_partition": S.NEURON_DMA_GUIDE,
            "element_s": element_note
            or "no public figure: one descriptor per element is assumed (descriptor_s)",
        },
        notes={
            "engine_bw": f"{S.NEURON_DMA_OVERVIEW} gives a theoretical "
            f"{theoretical / GB:.1f} GB/s per engine ({guide})"
            + (f"; {measured}" if measured else ""),
            "descriptor_s": descriptor_note,
            **({"engines": engines_note} if engines_note else {}),
        },
    )


_TENSOR_SRC = {
    "rows": "",
    "cols": "",
    "clock_hz": "",
    "rate": "",
    "published_peak_flops": "",
    "moving_fmax": S.NEURON_ISA_DOCS + " (nc_matmul moving free size)",
    "stationary_fmax": S.NEURON_ISA_DOCS + " (nc_matmul stationary free size <= 128)",
}


def _core_sources(guide: str, sbuf: str, psum: str) -> dict[str, str]:
    """Sources of a CoreSpec's own figures: the generation's guide, unless SBUF/PSUM say else."""
    return {
        "generation": guide,
        "partitions": guide,
        "sbuf_bytes": sbuf,
        "psum_bytes": psum,
        "psum_banks": guide,
        "min_ii_cycles": S.NEURON_ISA_DOCS + " (MIN_II ~ 64 cycles)",
        "static_latency_cycles": S.NEURON_PERF_GUIDE + " (Opt #5a: back-to-back dependent "
        "1-element ScalarE instructions issue every 264 cycles on NeuronCore-v2, of which MIN_II "
        "64 is the engine's own; derived: 200)",
    }


def _tensor_sources(guide: str) -> dict[str, str]:
    return {k: v or guide for k, v in _TENSOR_SRC.items()}


NEURONCORE_V2 = CORES.register(
    "neuroncore-v2",
    CoreSpec(
        name="neuroncore-v2",
        generation=2,
        partitions=128,
        sbuf_bytes=24 * MiB,
        psum_bytes=2 * MiB,
        psum_banks=8,
        min_ii_cycles=64,
        static_latency_cycles=200,
        tensor=TensorEngineSpec(
            name="tensor",
            rows=128,
            cols=128,
            clock_hz=2.8 * GHZ,
            # cFP8 runs at the bf16 rate on v2 (92 TFLOPS BF16/FP16/TF32/cFP8).
            rate={"bf16": 1, "fp16": 1, "tf32": 1, "fp8": 1, "fp32": 0.25},
            published_peak_flops={"bf16": 92 * TFLOPS, "fp8": 92 * TFLOPS, "fp32": 23 * TFLOPS},
            moving_fmax={"fp32": 512, "bf16": 512},
            stationary_fmax=128,
            sources=_tensor_sources(S.NEURON_V2_GUIDE),
        ),
        vector=dataclasses.replace(
            _engine("vector", 1.12 * GHZ, 128, 128, None, S.NEURON_V2_GUIDE),
            static_latency_cycles=100,
            sources={
                "clock_hz": S.NEURON_V2_GUIDE,
                "lanes": S.NEURON_V2_GUIDE,
                "elems_per_cycle": S.NEURON_V2_GUIDE,
                "static_latency_cycles": S.NEURON_V2_GUIDE + " (Vector Engine, Cost Model: "
                "back-to-back instructions each depending on the previous one's output add a "
                "static instruction overhead of 100 engine cycles)",
            },
        ),
        scalar=_engine("scalar", 1.4 * GHZ, 128, 128, None, S.NEURON_V2_GUIDE),
        gpsimd=_engine("gpsimd", 1.4 * GHZ, 128, 128, None, S.NEURON_V2_GUIDE),
        dma=_dma(
            17 * GB,
            27.2 * GB,
            "v2 arch guide: 27 GiB/s",
            element_s=1.0 * NS,
            element_note="FITTED, no public figure (the perf guide, Opt #10: a transposing DMA "
            "has 'much lower DMA bandwidth' than nl.load): the seven trn1 rows "
            "autocomp/sd_attention/0-6, the only calibration rows with a transposing DMA "
            "(nl.load_transpose2d of [128, 64] fp32 to bf16), give MAPE 32.8% at one "
            "descriptor per element (5.3 ns), 12.0% at 2.65 ns, 7.5% at 1.33 ns, 7.2% at "
            "1.0 ns, 8.1% at 0.66 ns: 1.0 ns per element, the least (benchmarks/RESULTS.md, "
            "issue 27 session 7)",
        ),
        sources=_core_sources(
            S.NEURON_V2_GUIDE,
            sbuf=S.NEURON_V2_GUIDE + " (24 MiB = 192 KiB x 128)",
            psum=S.NEURON_V2_GUIDE + " (2 MiB = 8 banks x 2 KiB x 128)",
        ),
        notes={
            "scalar": "neuron-core-v2.rst quotes ScalarE 2.9 / VectorE 2.3 TFLOPS FP32, which do "
            "not fit 128 lanes at these clocks; not used",
        },
    ),
    aliases=("v2", "gen2", "nc-v2"),
)

NEURONCORE_V3 = CORES.register(
    "neuroncore-v3",
    CoreSpec(
        name="neuroncore-v3",
        generation=3,
        partitions=128,
        sbuf_bytes=28 * MiB,
        psum_bytes=2 * MiB,
        psum_banks=8,
        min_ii_cycles=64,
        static_latency_cycles=200,
        tensor=TensorEngineSpec(
            name="tensor",
            rows=128,
            cols=128,
            clock_hz=2.4 * GHZ,
            # FP8 double-row reads 4x128 inputs per cycle: 2x the bf16 rate (158 TFLOPS).
            rate={"bf16": 1, "fp16": 1, "tf32": 1, "fp8": 2, "fp32": 0.25},
            published_peak_flops={
                "fp8": 158 * TFLOPS,
                "bf16": 79 * TFLOPS,
                "fp32": 20 * TFLOPS,
                "sparse": 316 * TFLOPS,
            },
            moving_fmax={"fp32": 512, "bf16": 512},
            stationary_fmax=128,
            sources=_tensor_sources(S.NEURON_V3_GUIDE),
        ),
        vector=_engine("vector", 0.96 * GHZ, 512, 256, 1.0 * TFLOPS, S.NEURON_V3_GUIDE),
        scalar=_engine("scalar", 1.2 * GHZ, 128, 128, 1.2 * TFLOPS, S.NEURON_V3_GUIDE),
        gpsimd=_engine("gpsimd", 1.2 * GHZ, 128, 128, None, S.NEURON_V3_GUIDE),
        dma=_dma(
            23 * GB,
            27.2 * GB,
            "theoretical",
            measured="neuron-profile packet timings on trn2 (descriptor_s) stream at 27.4 B/ns "
            "per engine (26.4 at 4 KiB), 15% above the guide's 23 B/ns; the guide's figure is "
            "kept",
            engines_note="per physical NeuronCore. A kernel launched on an LNC=2 logical core "
            "without an nl.nc grid runs on one physical core and its 16 engines: in all 8 "
            f"profiles of {S.TKF_PROFILES} the NEFF header reads number_of_neuroncores_per_lnc "
            "2, and subgraph sg00's engines 64-79 carry every data packet (sg01's engines "
            "80-95: 9 packets, 131 KB, per run); the SDK 2.26 NKI FAQ ('How do I launch a NKI "
            "kernel onto a logical NeuronCore') spreads a kernel over the physical cores only "
            f"through SPMD grids (nl.nc; {S.NEURON_LNC}). trnsim does the same "
            "(trnsim.nki.legacy.grid): one core's DMA (368 GB/s) for a plain launch, two "
            "for an nl.nc(2) grid",
        ),
        sources=_core_sources(
            S.NEURON_V3_GUIDE,
            sbuf=S.NEURON_V3_GUIDE + " (28 MiB = 224 KiB x 128)",
            psum=S.NEURON_V3_GUIDE,
        ),
    ),
    aliases=("v3", "gen3", "nc-v3"),
)

NEURONCORE_V4 = CORES.register(
    "neuroncore-v4",
    CoreSpec(
        name="neuroncore-v4",
        generation=4,
        partitions=128,
        sbuf_bytes=32 * MiB,
        psum_bytes=2 * MiB,
        psum_banks=8,
        min_ii_cycles=64,
        static_latency_cycles=200,
        tensor=TensorEngineSpec(
            name="tensor",
            rows=128,
            cols=128,
            clock_hz=2.4 * GHZ,
            # The 512x128 MX array reads 8x128 inputs per cycle: 4x the bf16 rate (315 TFLOPS).
            rate={
                "bf16": 1,
                "fp16": 1,
                "tf32": 1,
                "fp8": 2,
                "mxfp8": 4,
                "mxfp4": 4,
                "fp32": 0.25,
            },
            published_peak_flops={
                "mxfp8": 315 * TFLOPS,
                "mxfp4": 315 * TFLOPS,
                "bf16": 79 * TFLOPS,
                "fp32": 20 * TFLOPS,
            },
            moving_fmax={"fp32": 4096, "bf16": 8192},
            stationary_fmax=128,
            sources={
                **_tensor_sources(S.NEURON_V4_GUIDE),
                "rows": S.SEED_SPECS + "; " + S.NEURON_V4_GUIDE,
                "published_peak_flops": S.SEED_SPECS
                + " (315 MXFP8 / 79 BF16 per core); "
                + S.SEED_TOMS
                + " (20 FP32)",
            },
            notes={
                "rows": "the MX array is 512x128 (seed 003); trnsim models it as the 128x128 "
                "array at 4x rate, which gives the same 315 TFLOPS",
                "rate": "fp8 double_row = 2x bf16 on v3/v4 (NKI docs); MX = 4x bf16",
            },
        ),
        vector=_engine("vector", 1.2 * GHZ, 512, 256, 1.2 * TFLOPS, S.NEURON_V4_GUIDE),
        scalar=_engine("scalar", 1.2 * GHZ, 256, 128, 1.2 * TFLOPS, S.NEURON_V4_GUIDE),
        gpsimd=_engine("gpsimd", 1.2 * GHZ, 128, 128, None, S.NEURON_V4_GUIDE),
        dma=_dma(33 * GB, 38.4 * GB, "theoretical"),
        supports_mx=True,
        supports_bf16_psum=True,
        sources=_core_sources(
            S.NEURON_V4_GUIDE,
            sbuf=S.SEED_SPECS + " (32 MiB SRAM per NeuronCore-v4)",
            psum=S.SEED_SPECS + " (2 MiB PSUM per core)",
        ),
    ),
    aliases=("v4", "gen4", "nc-v4"),
)

# =============================================================================================
# Trainium chips
# =============================================================================================

TRN1 = CHIPS.register(
    "trn1",
    ChipSpec(
        name="trn1",
        vendor="AWS",
        family="Trainium",
        core=NEURONCORE_V2,
        cores=2,
        hbm_bytes=32 * GiB,
        hbm_bw=820 * GB,
        hbm_stacks=2,
        peak_flops={
            "bf16": 190 * TFLOPS,
            "fp16": 190 * TFLOPS,
            "tf32": 190 * TFLOPS,
            "fp8": 190 * TFLOPS,
            "fp32": 47.5 * TFLOPS,
            "int8": 380 * TFLOPS,
        },
        link=LinkSpec(
            name="NeuronLink-v2",
            bw_per_chip=384 * GB,
            links_per_chip=4,
            latency_s=1.5 * US,
            direction="per-direction",
            sources={
                "bw_per_chip": S.NEURON_TRN1_PAGE,
                "links_per_chip": S.NEURON_TRN1_PAGE,
                "latency_s": S.NEURON_INTRANODE_CC + " ('about 1-2 us' per ring hop, Trn2)",
            },
            notes={
                "latency_s": "Trn2 figure used for Trn1 (no Trn1 figure published)",
                "direction": "the Neuron pages do not say; read as per direction (4 links of "
                "96 GB/s each way), the reading the fabric calibration (section D) assumes",
            },
        ),
        dtypes=("fp32", "tf32", "bf16", "fp16", "fp8", "int8"),
        process="TSMC 7nm",
        sources={
            "cores": S.NEURON_TRN1_PAGE,
            "hbm_bytes": S.NEURON_TRN1_PAGE,
            "hbm_bw": S.NEURON_TRN1_PAGE,
            "hbm_stacks": S.NEURON_TRN1_PAGE,
            "peak_flops": S.NEURON_TRN1_PAGE + " (190 BF16/FP16/cFP8/TF32, 47.5 FP32, 380 INT8)",
        },
    ),
    aliases=("trainium", "trainium1"),
)

TRN2 = CHIPS.register(
    "trn2",
    ChipSpec(
        name="trn2",
        vendor="AWS",
        family="Trainium",
        core=NEURONCORE_V3,
        cores=8,
        chiplets=2,
        hbm_bytes=96 * GB,
        hbm_bw=2.9 * TB,
        hbm_stacks=4,
        peak_flops={
            "fp8": 1299 * TFLOPS,
            "bf16": 667 * TFLOPS,
            "fp16": 667 * TFLOPS,
            "tf32": 667 * TFLOPS,
            "fp32": 181 * TFLOPS,
        },
        sparse_peak_flops={"fp8": 2563 * TFLOPS},
        link=LinkSpec(
            name="NeuronLink-v3",
            bw_per_chip=1.28 * TB,
            links_per_chip=4,
            latency_s=1.5 * US,
            direction="per-direction",
            sources={
                "bw_per_chip": S.NEURON_TRN2_PAGE + "; " + S.SEED_TOMS,
                "links_per_chip": S.NEURON_TRN2_PAGE,
                "latency_s": S.NEURON_INTRANODE_CC + " ('about 1-2 us' per ring hop)",
            },
            notes={
                "bw_per_chip": "seed 003 says ~1 TB/s",
                "direction": "not stated; read as per direction: 1,024 GB/s intra-instance + "
                "256 GB/s inter-instance, the trn2-arch.rst per-chip figures the fabric uses",
            },
        ),
        dtypes=("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int16", "int32"),
        sparsity_patterns=TRN3_SPARSITY,
        sources={
            "cores": S.NEURON_TRN2_PAGE,
            "chiplets": S.SEED_TOMS,
            "hbm_bytes": S.SEED_SPECS + " (96 GB HBM3); " + S.SEED_TOMS,
            "hbm_bw": S.NEURON_TRN2_PAGE + " (2.9 TB/s); " + S.SEED_SPECS,
            "hbm_stacks": S.NEURON_TRN2_PAGE,
            "peak_flops": S.NEURON_TRN2_PAGE + " (1,299 FP8, 667 BF16, 181 FP32); " + S.SEED_TOMS,
            "sparse_peak_flops": S.NEURON_TRN2_PAGE,
        },
        notes={
            "hbm_bw": "3 TB/s in nki/guides/architecture/trainium2_arch.rst",
            "hbm_bytes": "96 GiB in the Neuron docs; 96 GB (seeds) reproduces the Trn2 "
            "UltraServer's ~6.1 TB",
            "hbm_stacks": "seed 004's table says 8",
        },
    ),
    aliases=("trainium2",),
)

TRN3 = CHIPS.register(
    "trn3",
    ChipSpec(
        name="trn3",
        vendor="AWS",
        family="Trainium",
        core=NEURONCORE_V4,
        cores=8,
        chiplets=2,
        hbm_bytes=144 * GB,
        hbm_bw=4.9 * TB,
        hbm_stacks=4,
        tdp_w=500,
        peak_flops={
            "mxfp8": 2.517 * PFLOPS,
            "mxfp4": 2.517 * PFLOPS,
            "fp8": 2.517 * PFLOPS,
            "bf16": 671 * TFLOPS,
            "fp16": 671 * TFLOPS,
            "tf32": 671 * TFLOPS,
            "fp32": 183 * TFLOPS,
        },
        sparse_peak_flops={"bf16": 2.517 * PFLOPS, "fp16": 2.517 * PFLOPS, "tf32": 2.517 * PFLOPS},
        link=LinkSpec(
            name="NeuronLink-v4",
            bw_per_chip=2 * TB,
            links_per_chip=4,
            latency_s=10 * US,
            direction="bidirectional",
            sources={
                "bw_per_chip": S.SEED_SPECS + " (2 TB/s per device)",
                "links_per_chip": S.SEED_TOMS + " (four NeuronLink-v4 interfaces)",
                "latency_s": S.SEED_AIWIRE + " ('just under 10 microseconds' chip to chip)",
            },
            notes={
                "bw_per_chip": "2.56 TB/s in seed 004 and the trainium3.rst arch page; "
                "2,048 GiB/s in the Trn3 instance table. 2 TB/s x 144 = the 288 TB/s "
                "'aggregate NeuronLink' of seed 003",
                "latency_s": "an end-to-end upper bound, not a per-hop figure",
            },
        ),
        dtypes=(
            "fp32",
            "tf32",
            "bf16",
            "fp16",
            "fp8",
            "mxfp8",
            "mxfp4",
            "int8",
            "int16",
            "int32",
        ),
        sparsity_patterns=TRN3_SPARSITY,
        process="TSMC 3nm (N3P)",
        sources={
            "cores": S.SEED_SPECS + " (8 NeuronCore-v4)",
            "chiplets": S.SEED_TOMS + " (dual-chiplet, four cores each)",
            "hbm_bytes": S.SEED_AIWIRE + " (144 GB HBM3e)",
            "hbm_bw": S.SEED_AIWIRE + " (4.9 TB/s)",
            "hbm_stacks": S.SEED_TOMS + " ('144 GB of HBM3E memory using four stacks')",
            "tdp_w": S.SEED_SPECS + " (~500 W)",
            "peak_flops": S.SEED_TOMS + " (2.517 PF MXFP8/MXFP4, 0.671 BF16/TF32, 0.183 FP32)",
            "sparse_peak_flops": S.SEED_TOMS + " (same 315 TFLOPS/core peak on M:N sparse)",
        },
        notes={
            "hbm_bw": "4.7 TB/s in nki/guides/architecture/trainium3_arch.rst; 4.9 reproduces "
            "the UltraServer's 705.6 TB/s",
            "hbm_bytes": "144 GiB in the Neuron docs; 144 GB reproduces the 20.7 TB of 144 chips",
            "hbm_stacks": "seed 004's table says 8",
            "peak_flops": "published chip peaks vs 8 x the per-core Tensor engine peak "
            "(128x128 x 2 FLOP x 2.4 GHz x rate): MXFP8 2.517 PF vs 2.517 PF (match); BF16 "
            "671 TF vs 629 TF (+6.7%); FP32 183 TF vs 157 TF (+16%). Unexplained by public "
            "documents: no single clock fits all three (BF16 would need 2.56 GHz, which would "
            "make MXFP8 2.68 PF). Counting the Vector, Scalar and GpSimd engines' FP32 "
            "(~8 x 2.7 TF) covers most of the FP32 gap but not the BF16 one. trnsim's timing "
            "model uses the array x clock figures; system tables use the published chip peaks",
            "cc_cores": "collective-communication cores: 20 (NKI guides) vs 16 (about-neuron "
            "pages); trnsim does not yet model CC-cores separately",
        },
    ),
    aliases=("trainium3",),
)


def _projected(base: ChipSpec, name: str, factors: dict[str, float], src: str) -> ChipSpec:
    """A roadmap chip: ``base`` with some figures scaled; everything else assumed unchanged."""
    peaks = dict(base.peak_flops)
    peaks["mxfp4"] = peaks["fp4"] = base.peak("mxfp4") * factors["fp4"]
    peaks["mxfp8"] = base.peak("mxfp8") * factors["fp8"]
    peaks["fp8"] = base.peak("fp8") * factors["fp8"]
    return dataclasses.replace(
        base,
        name=name,
        core=None,
        peak_flops=peaks,
        hbm_bw=base.hbm_bw * factors["hbm_bw"],
        sparse_peak_flops={},
        projected=True,
        sources={
            **dict(base.sources),
            "peak_flops": f"{src}: >= {factors['fp4']}x FP4, {factors['fp8']}x FP8 of {base.name}"
            f"; other dtypes assumed unchanged",
            "hbm_bw": f"{src}: {factors['hbm_bw']}x the memory bandwidth of {base.name}",
        },
        notes={
            "projected": "PROJECTED from the roadmap, not a shipping part. Every figure not "
            f"named in the roadmap (HBM capacity, links, cores, TDP) is {base.name}'s, assumed",
        },
    )


TRAINIUM4 = CHIPS.register(
    "trainium4",
    _projected(TRN3, "trainium4", {"fp4": 6, "fp8": 3, "hbm_bw": 4}, S.SEED_AIWIRE),
    aliases=("trn4",),
)

# =============================================================================================
# Peers (GPUs and TPUs) for comparison
# =============================================================================================


def _nvlink(bw_bidir: float, links: int, src: str) -> LinkSpec:
    return LinkSpec(
        name="NVLink",
        bw_per_chip=bw_bidir,
        links_per_chip=links,
        latency_s=1 * US,
        direction="bidirectional",
        sources={"bw_per_chip": src, "links_per_chip": src, "latency_s": S.ASSUMED},
        notes={
            "latency_s": "assumed ~1 us one NVSwitch hop; no figure in the sources",
        },
    )


_HOPPER_PEAKS = {
    "fp8": 1979 * TFLOPS,
    "int8": 1979 * TFLOPS,
    "bf16": 989 * TFLOPS,
    "fp16": 989 * TFLOPS,
    "tf32": 494.5 * TFLOPS,
    "fp32": 67 * TFLOPS,
}
_HOPPER_NOTES = {"peak_flops": "dense figures: half of the datasheet's 'with sparsity' values"}

H100 = CHIPS.register(
    "h100-sxm",
    ChipSpec(
        name="h100-sxm",
        vendor="NVIDIA",
        family="Hopper",
        cores=132,
        hbm_bytes=80 * GB,
        hbm_bw=3.35 * TB,
        tdp_w=700,
        peak_flops=_HOPPER_PEAKS,
        sparse_peak_flops={k: 2 * v for k, v in _HOPPER_PEAKS.items() if k != "fp32"},
        link=_nvlink(900 * GB, 18, S.NVIDIA_H100_DATASHEET),
        dtypes=("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8"),
        sparsity_patterns=("2:4",),
        process="TSMC 4N",
        sources={
            k: S.NVIDIA_H100_DATASHEET
            for k in ("cores", "hbm_bytes", "hbm_bw", "tdp_w", "peak_flops", "sparse_peak_flops")
        },
        notes=_HOPPER_NOTES,
    ),
    aliases=("h100",),
)

H200 = CHIPS.register(
    "h200",
    dataclasses.replace(
        H100,
        name="h200",
        hbm_bytes=141 * GB,
        hbm_bw=4.8 * TB,
        link=_nvlink(900 * GB, 18, S.NVIDIA_H200_DATASHEET),
        sources={
            k: S.NVIDIA_H200_DATASHEET
            for k in ("cores", "hbm_bytes", "hbm_bw", "tdp_w", "peak_flops", "sparse_peak_flops")
        },
    ),
)


def _dense(sparse: dict[str, float]) -> dict[str, float]:
    """Dense peaks from a datasheet's 'with sparsity' figures (half of them)."""
    return {k: v / 2 for k, v in sparse.items()}


H100_PCIE = CHIPS.register(
    "h100-pcie",
    ChipSpec(
        name="h100-pcie",
        vendor="NVIDIA",
        family="Hopper",
        cores=114,
        hbm_bytes=80 * GB,
        hbm_bw=2 * TB,
        tdp_w=350,
        peak_flops={
            **_dense(
                {
                    "fp8": 3026 * TFLOPS,
                    "int8": 3026 * TFLOPS,
                    "bf16": 1513 * TFLOPS,
                    "fp16": 1513 * TFLOPS,
                    "tf32": 756 * TFLOPS,
                }
            ),
            "fp32": 51 * TFLOPS,
        },
        sparse_peak_flops={
            "fp8": 3026 * TFLOPS,
            "int8": 3026 * TFLOPS,
            "bf16": 1513 * TFLOPS,
            "fp16": 1513 * TFLOPS,
            "tf32": 756 * TFLOPS,
        },
        link=LinkSpec(
            name="NVLink bridge",
            bw_per_chip=600 * GB,
            links_per_chip=12,
            latency_s=1 * US,
            direction="bidirectional",
            sources={
                "bw_per_chip": S.NVIDIA_H100_PCIE_DATASHEET,
                "links_per_chip": f"{S.DERIVED}: 600 GB/s / 50 GB/s per NVLink-4 link",
                "latency_s": S.ASSUMED,
            },
            notes={"bw_per_chip": "a bridge joins 2 GPUs; others talk over PCIe Gen5"},
        ),
        dtypes=("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8"),
        sparsity_patterns=("2:4",),
        process="TSMC 4N",
        sources={
            "cores": S.NVIDIA_HOPPER_WHITEPAPER,
            "hbm_bytes": S.NVIDIA_H100_PCIE_DATASHEET,
            "hbm_bw": S.NVIDIA_H100_PCIE_DATASHEET,
            "tdp_w": S.NVIDIA_H100_PCIE_DATASHEET + " (the upper end of 300-350 W)",
            "peak_flops": S.NVIDIA_H100_PCIE_DATASHEET + " (tensor figures: half the sparse ones)",
            "sparse_peak_flops": S.NVIDIA_H100_PCIE_DATASHEET,
        },
        notes={"hbm_bw": "the Hopper whitepaper gives 2,039 GB/s (HBM2e)"},
    ),
    aliases=("h100-pcie-80gb",),
)

H800 = CHIPS.register(
    "h800",
    dataclasses.replace(
        H100,
        name="h800",
        link=LinkSpec(
            name="NVLink",
            bw_per_chip=400 * GB,
            links_per_chip=8,
            latency_s=1 * US,
            direction="bidirectional",
            sources={
                "bw_per_chip": S.NVIDIA_H800_DATASHEET,
                "links_per_chip": f"{S.DERIVED}: 400 GB/s / 50 GB/s per NVLink-4 link",
                "latency_s": S.ASSUMED,
            },
            notes={"latency_s": "assumed ~1 us one NVSwitch hop; no figure in the sources"},
        ),
        sources={
            "cores": S.NVIDIA_HOPPER_WHITEPAPER + " (the GH100 of H100 SXM5: 132 SMs)",
            **{
                k: S.NVIDIA_H800_DATASHEET
                for k in ("hbm_bytes", "hbm_bw", "tdp_w", "peak_flops", "sparse_peak_flops")
            },
        },
        notes={
            **_HOPPER_NOTES,
            "link": "the export variant of H100 SXM: NVLink cut to 400 GB/s, FP64 to 1 TF",
        },
    ),
    aliases=("h800-sxm",),
)

_H20_PEAKS = {
    "fp8": 296 * TFLOPS,
    "int8": 296 * TFLOPS,
    "bf16": 148 * TFLOPS,
    "fp16": 148 * TFLOPS,
    "tf32": 74 * TFLOPS,
    "fp32": 44 * TFLOPS,
}
H20 = CHIPS.register(
    "h20",
    ChipSpec(
        name="h20",
        vendor="NVIDIA",
        family="Hopper",
        cores=78,
        hbm_bytes=96 * GB,
        hbm_bw=4.0 * TB,
        tdp_w=400,
        peak_flops=_H20_PEAKS,
        link=_nvlink(900 * GB, 18, S.NVIDIA_H20_BRIEF),
        dtypes=("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8"),
        process="TSMC 4N",
        sources={
            "cores": S.TECHPOWERUP_H20,
            **{k: S.NVIDIA_H20_BRIEF for k in ("hbm_bytes", "hbm_bw", "tdp_w", "peak_flops")},
        },
        notes={
            "peak_flops": "dense figures; the export-limited Hopper (about 15 % of H100's BF16)",
        },
    ),
    aliases=("hgx-h20-gpu",),
)

GAUDI2 = CHIPS.register(
    "gaudi2",
    ChipSpec(
        name="gaudi2",
        vendor="Intel",
        family="Gaudi",
        cores=24,
        hbm_bytes=96 * GB,
        hbm_bw=2.45 * TB,
        tdp_w=600,
        peak_flops={"bf16": 432 * TFLOPS, "fp8": 865 * TFLOPS},
        link=LinkSpec(
            name="RoCE v2 (on-chip 100 GbE)",
            bw_per_chip=24 * 100e9 / 8,
            links_per_chip=24,
            latency_s=2 * US,
            direction="per-direction",
            sources={
                "bw_per_chip": f"{S.DERIVED}: 24 x 100 Gb/s ports ({S.HABANA_GAUDI2_WHITEPAPER})",
                "links_per_chip": S.HABANA_GAUDI2_WHITEPAPER,
                "latency_s": S.ASSUMED,
            },
            notes={
                "direction": "Ethernet port rates are per direction",
                "latency_s": "assumed ~2 us per RoCE hop (NIC to NIC); no figure in the sources",
            },
        ),
        dtypes=("fp32", "tf32", "bf16", "fp16", "fp8"),
        process="TSMC 7 nm",
        sources={
            "cores": S.HABANA_GAUDI2_WHITEPAPER + " (24 tensor processor cores; plus 2 MMEs)",
            "hbm_bytes": S.HABANA_GAUDI2_WHITEPAPER,
            "hbm_bw": S.HABANA_GAUDI2_WHITEPAPER,
            "tdp_w": S.HABANA_GAUDI2_WHITEPAPER,
            "peak_flops": S.INTEL_GAUDI3_WHITEPAPER,
        },
        notes={
            "peak_flops": "matrix (MME) peaks; Intel publishes no FP16/TF32/FP32 MME figure, "
            "so those dtypes fall back to BF16's",
        },
    ),
    aliases=("gaudi-2", "hl-225"),
)


def _blackwell(name: str, peaks: dict, hbm: float, tdp: float) -> ChipSpec:
    return ChipSpec(
        name=name,
        vendor="NVIDIA",
        family="Blackwell",
        cores=2,
        chiplets=2,
        hbm_bytes=hbm,
        hbm_bw=8 * TB,
        hbm_stacks=8,
        tdp_w=tdp,
        peak_flops=peaks,
        link=_nvlink(1.8 * TB, 18, S.SEED_TOMS + " (NVLink 5.0, 1.8 TB/s bidirectional)"),
        dtypes=("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp4", "int8"),
        sparsity_patterns=("2:4",),
        process="TSMC 4NP",
        sources={
            "cores": S.SEED_TOMS + " (2 reticle-sized dies)",
            "chiplets": S.SEED_TOMS,
            "hbm_bytes": S.SEED_TOMS,
            "hbm_bw": S.SEED_TOMS,
            "hbm_stacks": S.SEED_TOMS,
            "tdp_w": S.SEED_TOMS,
            "peak_flops": S.SEED_TOMS + " (per package)",
        },
        notes={"cores": "counted as dies (each Blackwell package is two GPU dies)"},
    )


_GB200_PEAKS = {
    "fp4": 10 * PFLOPS,
    "fp8": 5 * PFLOPS,
    "int8": 5 * PFLOPS,
    "bf16": 2.5 * PFLOPS,
    "fp16": 2.5 * PFLOPS,
    "tf32": 1.15 * PFLOPS,
    "fp32": 0.08 * PFLOPS,
}

GB200 = CHIPS.register(
    "gb200",
    dataclasses.replace(
        _blackwell("gb200", _GB200_PEAKS, 186 * GB, 1200),
        sources={
            "cores": S.SEED_TOMS + " (2 reticle-sized dies)",
            "chiplets": S.SEED_TOMS,
            "hbm_bytes": S.NVIDIA_GB200_PAGE + ": 13.4 TB / 72 GPUs = 186 GB",
            "hbm_bw": S.NVIDIA_GB200_PAGE + ": 576 TB/s / 72 GPUs = 8 TB/s",
            "hbm_stacks": S.SEED_TOMS,
            "tdp_w": S.SEED_TOMS + " (the 1.2 kW Blackwell of GB200)",
            "peak_flops": S.SEED_TOMS + " (per package); " + S.NVIDIA_GB200_PAGE + ": rack "
            "figures with sparsity / 72 / 2 (FP4 10, FP8 5, BF16 2.5, TF32 1.25 PF dense)",
        },
        notes={
            "cores": "counted as dies (each Blackwell package is two GPU dies)",
            "hbm_bytes": "192 GB physical (seed 004); the GB200 NVL72 page gives 13.4 TB for "
            "72 GPUs (186 GB each), later 13.5 TB",
            "peak_flops": "TF32 1.15 PF (seed 004) vs 1.25 PF from the NVL72 page's 180 PF "
            "sparse / 72 / 2",
        },
    ),
    aliases=("gb200-gpu", "grace-blackwell"),
)

B200 = CHIPS.register(
    "b200",
    dataclasses.replace(
        _blackwell(
            "b200",
            {
                "fp4": 9 * PFLOPS,
                "fp8": 4.5 * PFLOPS,
                "int8": 4.5 * PFLOPS,
                "bf16": 2.25 * PFLOPS,
                "fp16": 2.25 * PFLOPS,
                "tf32": 1.125 * PFLOPS,
                "fp32": 0.075 * PFLOPS,
            },
            180 * GB,
            1000,
        ),
        sources={
            "cores": S.SEED_TOMS + " (2 reticle-sized dies)",
            "chiplets": S.SEED_TOMS,
            "hbm_bytes": S.NVIDIA_DGX_B200 + ": 1,440 GB / 8 = 180 GB",
            "hbm_bw": S.NVIDIA_DGX_B200 + ": 64 TB/s / 8 = 8 TB/s",
            "hbm_stacks": S.SEED_TOMS,
            "tdp_w": S.NVIDIA_HGX_B200,
            "peak_flops": S.NVIDIA_HGX_B200 + ": 8-GPU figures with sparsity / 8 / 2 "
            "(FP32 600 TF / 8, not sparse)",
            "sparse_peak_flops": S.NVIDIA_HGX_B200 + ": 8-GPU figures / 8",
        },
        sparse_peak_flops={"fp4": 18 * PFLOPS, "fp8": 9 * PFLOPS, "bf16": 4.5 * PFLOPS},
        notes={
            "cores": "counted as dies (each Blackwell package is two GPU dies)",
            "peak_flops": "the B200 of HGX/DGX B200 and p6-b200 runs at 1,000 W; seed 004's "
            "figures (FP8 5, BF16 2.5 PF, 192 GB, 1.2 kW) are the GB200 part, preset 'gb200'",
            "hbm_bytes": "192 GB physical; 180 GB usable per the DGX B200 and p6-b200 pages",
        },
    ),
    aliases=("b200-sxm", "hgx-b200-gpu"),
)

B300 = CHIPS.register(
    "b300",
    _blackwell(
        "b300",
        {
            "fp4": 15 * PFLOPS,
            "fp8": 5 * PFLOPS,
            "int8": 0.33 * PFLOPS,
            "bf16": 2.5 * PFLOPS,
            "fp16": 2.5 * PFLOPS,
            "tf32": 1.25 * PFLOPS,
            "fp32": 0.08 * PFLOPS,
        },
        288 * GB,
        1400,
    ),
    aliases=("gb300", "blackwell-ultra"),
)

TPU_V7 = CHIPS.register(
    "tpu-v7",
    ChipSpec(
        name="tpu-v7",
        vendor="Google",
        family="TPU",
        cores=2,
        hbm_bytes=192 * GB,
        hbm_bw=7.4 * TB,
        peak_flops={"fp8": 4.614 * PFLOPS, "bf16": 2.307 * PFLOPS},
        link=LinkSpec(
            name="ICI",
            bw_per_chip=1.2 * TB,
            links_per_chip=6,
            latency_s=1 * US,
            direction="bidirectional",
            sources={
                "bw_per_chip": S.SEED_SPECS + " (~1.2 TB/s ICI)",
                "links_per_chip": S.ASSUMED + " (3D torus: 6 neighbours)",
                "latency_s": S.ASSUMED,
            },
        ),
        dtypes=("fp32", "bf16", "fp8", "int8"),
        sources={
            "cores": S.GOOGLE_IRONWOOD_BLOG + " (dual-chiplet, two TensorCores)",
            "hbm_bytes": S.SEED_SPECS,
            "hbm_bw": S.SEED_SPECS + " (7.4 TB/s)",
            "peak_flops": S.SEED_SPECS + " (4.6 PF FP8); " + S.GOOGLE_IRONWOOD_BLOG + " (4,614)",
        },
        notes={
            "peak_flops": "bf16 assumed = fp8 / 2 (Google publishes the FP8 figure only)",
        },
    ),
    aliases=("ironwood", "tpu-v7-ironwood"),
)


def _ici(bw_bidir: float, ports: int, src: str, bw_note: str = "") -> LinkSpec:
    return LinkSpec(
        name="ICI",
        bw_per_chip=bw_bidir,
        links_per_chip=ports,
        latency_s=1 * US,
        direction="bidirectional",
        sources={"bw_per_chip": src, "links_per_chip": src, "latency_s": S.ASSUMED},
        notes={
            "latency_s": "assumed ~1 us per ICI hop; Google publishes no figure",
            **({"bw_per_chip": bw_note} if bw_note else {}),
        },
    )


TPU_V5E = CHIPS.register(
    "tpu-v5e",
    ChipSpec(
        name="tpu-v5e",
        vendor="Google",
        family="TPU",
        cores=1,
        hbm_bytes=16 * GB,
        hbm_bw=819 * GB,
        peak_flops={"bf16": 197 * TFLOPS, "int8": 393 * TFLOPS},
        link=_ici(
            400 * GB,
            4,
            S.GOOGLE_TPU_V5E,
            "an earlier revision gives 'ICI bandwidth 1,600 Gbps' = 200 GB/s, the "
            "per-direction half of 400 GB/s bidirectional",
        ),
        dtypes=("fp32", "bf16", "int8"),
        sources={k: S.GOOGLE_TPU_V5E for k in ("cores", "hbm_bytes", "hbm_bw", "peak_flops")},
        notes={
            "hbm_bw": "another revision of the page gives 800 GiB/s (859 GB/s)",
        },
    ),
    aliases=("v5e", "v5litepod", "tpu-v5-lite", "tpu-v5litepod"),
)

TPU_V5P = CHIPS.register(
    "tpu-v5p",
    ChipSpec(
        name="tpu-v5p",
        vendor="Google",
        family="TPU",
        cores=2,
        hbm_bytes=95 * GiB,
        hbm_bw=2765 * GB,
        peak_flops={"bf16": 459 * TFLOPS, "fp8": 459 * TFLOPS, "int8": 918 * TFLOPS},
        link=_ici(
            1200 * GB,
            6,
            S.GOOGLE_TPU_V5P + " (3D torus: 6 neighbours)",
            "an earlier revision gives 'Interchip Interconnect BW 4,800 Gbps' = 600 GB/s, "
            "the per-direction half of 1,200 GB/s bidirectional",
        ),
        dtypes=("fp32", "bf16", "fp8", "int8"),
        sources={k: S.GOOGLE_TPU_V5P for k in ("cores", "hbm_bytes", "hbm_bw", "peak_flops")},
        notes={
            "hbm_bytes": "96 GiB physical; 95 GiB user-allocatable (the page's figure)",
            "hbm_bw": "another revision of the page gives 2,575 GiB/s (= 2,765 GB/s)",
            "peak_flops": "the page lists FP8 at the bf16 rate (459); int8 918 TOPS from the "
            "earlier revision of the page (2 x bf16)",
        },
    ),
    aliases=("v5p",),
)

TPU_V6E = CHIPS.register(
    "tpu-v6e",
    ChipSpec(
        name="tpu-v6e",
        vendor="Google",
        family="TPU",
        cores=1,
        hbm_bytes=32 * GB,
        hbm_bw=1640 * GB,
        peak_flops={"bf16": 918 * TFLOPS, "int8": 1836 * TFLOPS},
        link=_ici(
            800 * GB,
            4,
            S.GOOGLE_TPU_V6E,
            "an earlier revision gives 'ICI bandwidth 3,584 Gbps' (448 GB/s, read as "
            "per direction: 896 GB/s both ways) against today's 800 GB/s bidirectional",
        ),
        dtypes=("fp32", "bf16", "int8"),
        sources={k: S.GOOGLE_TPU_V6E for k in ("cores", "hbm_bytes", "hbm_bw", "peak_flops")},
        notes={
            "hbm_bw": "revisions of the page give 1,640, 1,638 and 1,600 GB/s",
        },
    ),
    aliases=("v6e", "trillium", "tpu-trillium"),
)

INF2 = CHIPS.register(
    "inferentia2",
    ChipSpec(
        name="inferentia2",
        vendor="AWS",
        family="Inferentia",
        core=NEURONCORE_V2,
        cores=2,
        hbm_bytes=32 * GiB,
        hbm_bw=820 * GiB,
        peak_flops={
            "bf16": 190 * TFLOPS,
            "fp16": 190 * TFLOPS,
            "tf32": 190 * TFLOPS,
            "fp8": 190 * TFLOPS,
            "fp32": 47.5 * TFLOPS,
            "int8": 380 * TFLOPS,
        },
        link=LinkSpec(
            name="NeuronLink-v2",
            bw_per_chip=192 * GiB,
            links_per_chip=2,
            latency_s=1.5 * US,
            direction="per-direction",
            sources={
                "bw_per_chip": S.NEURON_INF2_ARCH + " (192 GiB/s/chip, inf2.48xlarge)",
                "links_per_chip": S.NEURON_INF2_ARCH + " (inf2-topology.png: a ring of chips)",
                "latency_s": S.NEURON_INTRANODE_CC + " ('about 1-2 us' per ring hop, Trn2)",
            },
            notes={
                "direction": "not stated; read as per direction, as for Trn1's NeuronLink-v2",
                "links_per_chip": "read from the topology figure as a ring (2 neighbours)",
            },
        ),
        dtypes=("fp32", "tf32", "bf16", "fp16", "fp8", "int8"),
        sources={
            "cores": S.NEURON_INF2_PAGE,
            "hbm_bytes": S.NEURON_INF2_PAGE + " (32 GiB)",
            "hbm_bw": S.NEURON_INF2_PAGE + " (820 GiB/s)",
            "peak_flops": S.NEURON_INF2_PAGE + " (190 FP16/BF16/cFP8/TF32, 47.5 FP32, 380 INT8)",
        },
    ),
    aliases=("inf2-chip", "inferentia-2"),
)


# =============================================================================================
# Systems
# =============================================================================================

EFA_LATENCY_SRC = S.NEURON_COLLECTIVES + " (15 us minimal inter-node point-to-point, trn2, EFA)"


def _efa(bw_per_chip: float, span: int, src: str, note: str = "") -> FabricLevel:
    return FabricLevel(
        name="efa",
        kind="fat-tree",
        span=span,
        bw_per_chip=bw_per_chip,
        latency_s=15 * US,
        direction="per-direction",
        oversubscription=1.0,
        sources={
            "span": S.SEED_NEWS,
            "bw_per_chip": src,
            "latency_s": EFA_LATENCY_SRC,
            "oversubscription": S.SEED_SPECS + " ('petabit-scale non-blocking EFA networking')",
        },
        notes={"bw_per_chip": note} if note else {},
    )


# Trn2 UltraClusters: 1M Trn3 chips is 'a tenfold increase over the previous generation'.
TRN2_CLUSTER_MAX = 100_000
TRN3_CLUSTER_MAX = 1_000_000

_TRN2_EFA = _efa(
    3.2e12 / 8 / 16,
    TRN2_CLUSTER_MAX,
    S.NEURON_COLLECTIVES + " (3.2 Tbps per trn2.48xlarge node, 16 chips)",
)
_TRN3_EFA = _efa(
    3.2e12 / 8 / 16,
    TRN3_CLUSTER_MAX,
    S.ASSUMED,
    "no Trn3 EFA figure in the sources; assumed the Trn2 per-chip 25 GB/s",
)
_TRN_HOP_SRC = S.NEURON_INTRANODE_CC + " ('about 1-2 us' per ring hop)"

SYSTEMS.register(
    "trn1.32xlarge",
    SystemSpec(
        name="trn1.32xlarge",
        kind="instance",
        chip=TRN1,
        chips=16,
        chips_per_server=16,
        host_cpu="Intel Xeon",
        levels=(
            FabricLevel(
                name="neuronlink",
                kind="torus",
                span=16,
                dims=(4, 4),
                bw_per_chip=384 * GB,
                latency_s=1.5 * US,
                direction="per-direction",
                sources={
                    "span": S.NEURON_TRN1_ARCH,
                    "bw_per_chip": S.NEURON_TRN1_PAGE,
                    "latency_s": _TRN_HOP_SRC,
                },
            ),
            _efa(
                800e9 / 8 / 16,
                30_000,
                "AWS EC2 Trn1 instance page (800 Gbps EFAv2 per trn1.32xlarge)",
            ),
        ),
        description="16 Trainium1 chips in a 2D torus (NeuronLink-v2), EFA between instances",
        sources={"chips": S.NEURON_TRN1_ARCH, "chips_per_server": S.NEURON_TRN1_ARCH},
    ),
    aliases=("trn1-32xlarge", "trn1-instance"),
)

_TRN2_TORUS = FabricLevel(
    name="neuronlink",
    kind="torus",
    span=16,
    dims=(4, 4),
    bw_per_chip=1024 * GB,
    latency_s=1.5 * US,
    direction="per-direction",
    sources={
        "span": S.NEURON_TRN2_ARCH,
        "bw_per_chip": S.NEURON_TRN2_ARCH + " (1,024 GB/s per chip intra-instance)",
        "latency_s": _TRN_HOP_SRC,
    },
)

SYSTEMS.register(
    "trn2.48xlarge",
    SystemSpec(
        name="trn2.48xlarge",
        kind="instance",
        chip=TRN2,
        chips=16,
        chips_per_server=16,
        host_cpu="Intel Xeon",
        levels=(_TRN2_TORUS, _TRN2_EFA),
        description="16 Trainium2 chips in a 4x4 2D torus (NeuronLink-v3), EFA between instances",
        sources={"chips": S.NEURON_TRN2_ARCH, "chips_per_server": S.NEURON_TRN2_ARCH},
    ),
    aliases=("trn2-48xlarge", "trn2-instance"),
)

SYSTEMS.register(
    "trn2-ultraserver",
    SystemSpec(
        name="trn2-ultraserver",
        kind="ultraserver",
        chip=TRN2,
        chips=64,
        chips_per_server=16,
        host_cpu="Intel Xeon Sapphire Rapids",
        levels=(
            _TRN2_TORUS,
            FabricLevel(
                name="ultraserver",
                kind="torus",
                span=64,
                dims=(4, 4, 4),
                bw_per_chip=256 * GB,
                latency_s=1.5 * US,
                direction="per-direction",
                sources={
                    "span": S.NEURON_TRN2_ARCH,
                    "bw_per_chip": S.NEURON_TRN2_ARCH + " (rings across instances, 256 GB/s/chip)",
                    "latency_s": _TRN_HOP_SRC,
                },
                notes={"span": "4 trn2.48xlarge instances; seed 003 calls it a 4x4x4 3D torus"},
            ),
            _TRN2_EFA,
        ),
        description="4 trn2.48xlarge (64 Trainium2 chips) in a 4x4x4 torus",
        sources={"chips": S.NEURON_TRN2_ARCH, "chips_per_server": S.NEURON_TRN2_ARCH},
        notes={
            "chips": "seed 004's table lists 48 packages; the Neuron docs and 83.2 PF say 64",
            "levels": "trn2-arch.rst lists EFAv3 3,200 Gbps under the UltraServer column as "
            "under trn2.48xlarge; read as per trn2u.48xlarge instance (16 chips), so 12.8 Tbps "
            "per UltraServer and the same 25 GB/s per chip",
        },
    ),
    aliases=("trn2-us", "trn2u", "trn2-ultra", "trn2-ultraserver-64", "trn2u-ultraserver"),
)


def _neuronswitch_levels(server: int, rack: int, ultraserver: int) -> tuple[FabricLevel, ...]:
    """NeuronSwitch-v1 in three layers over PCIe Gen6 x8 links (trn3-arch.rst): in-server, then
    between servers in a rack, then between the two racks of the UltraServer."""
    src = S.NEURON_TRN3_ARCH
    lat_src = S.ASSUMED + " (1.5 us per switch layer, the Trn2 per-hop figure; seed 000 bounds "
    lat_src += "chip-to-chip latency at 'just under 10 us')"
    table = (
        ("server", server, 256 * GB, 4, "256 GB/s per chip intra-server (4 links)"),
        ("rack", rack, 320 * GB, 5, "320 GB/s per chip inter-server (5 links)"),
        ("ultraserver", ultraserver, 128 * GB, 2, "128 GB/s per chip inter-rack (2 links)"),
    )
    return tuple(
        FabricLevel(
            name=name,
            kind="switch",
            span=span,
            bw_per_chip=bw,
            links_per_chip=links,
            latency_s=1.5 * US,
            direction="per-direction",
            sources={
                "span": S.SEED_TOMS + "; " + src,
                "bw_per_chip": f"{src} ({what})",
                "links_per_chip": src,
                "latency_s": lat_src,
            },
        )
        for name, span, bw, links, what in table
    )


_GEN2_NOTE = (
    "per-level figures sum to 704 GB/s per chip, against the headline NeuronLink-v4 2 TB/s "
    "(seed 003) or 2.56 TB/s (seed 004): the headline is taken to count both directions and "
    "all links; the fabric model uses the per-level figures"
)

TRN3_GEN1 = SYSTEMS.register(
    "trn3-gen1-ultraserver",
    SystemSpec(
        name="trn3-gen1-ultraserver",
        kind="ultraserver",
        chip=TRN3,
        chips=64,
        chips_per_server=16,
        host_cpu="Intel Xeon",
        levels=(*_neuronswitch_levels(16, 32, 64), _TRN3_EFA),
        description="Trn3 Gen1 UltraServer (NL32x2 switched, air-cooled): 4 servers x 16 chips",
        sources={
            "chips": S.SEED_SPECS + " (Gen1: 64 chips)",
            "chips_per_server": "nki-notes.md 4.2 Topology (" + S.NEURON_TRN3_ARCH + ")",
        },
        notes={"levels": "Gen1 per-level bandwidths assumed the same as Gen2's. " + _GEN2_NOTE},
    ),
    aliases=("trn3-gen1",),
)

TRN3_GEN2 = SYSTEMS.register(
    "trn3-gen2-ultraserver",
    SystemSpec(
        name="trn3-gen2-ultraserver",
        kind="ultraserver",
        chip=TRN3,
        chips=144,
        chips_per_server=4,
        host_cpu="AWS Graviton",
        levels=(*_neuronswitch_levels(4, 72, 144), _TRN3_EFA),
        description="Trn3 Gen2 UltraServer (NL72x2 switched, liquid-cooled): 36 servers x 4 "
        "chips, one Graviton per server, NeuronSwitch-v1 all-to-all in three layers",
        sources={
            "chips": S.SEED_TOMS + " (144 chips = 36 servers x 4)",
            "chips_per_server": S.SEED_TOMS,
        },
        notes={"levels": _GEN2_NOTE},
    ),
    aliases=("trn3-gen2", "trn3-ultraserver", "trn3u"),
)

SYSTEMS.register(
    "trn3-ultracluster",
    SystemSpec(
        name="trn3-ultracluster",
        kind="cluster",
        chip=TRN3,
        # Up to 1,000,000 chips, built of whole Gen2 UltraServers: the largest multiple of 144.
        chips=TRN3_CLUSTER_MAX // TRN3_GEN2.chips * TRN3_GEN2.chips,
        chips_per_server=4,
        host_cpu="AWS Graviton",
        levels=TRN3_GEN2.levels,
        description="EC2 UltraCluster 3.0: Gen2 UltraServers joined by an EFA fat-tree, up to "
        "1,000,000 chips",
        sources={
            "chips": S.SEED_NEWS + " ('up to 1 million Trainium3 chips'); " + S.SEED_SPECS,
            "chips_per_server": S.SEED_TOMS,
        },
    ),
    aliases=("ultracluster-3", "ultracluster-3.0", "trn3-cluster"),
)

SYSTEMS.register(
    "gb300-nvl72",
    SystemSpec(
        name="gb300-nvl72",
        kind="rack",
        chip=B300,
        chips=72,
        chips_per_server=4,
        host_cpu="NVIDIA Grace (72-core)",
        levels=(
            FabricLevel(
                name="nvlink",
                kind="nvswitch",
                span=72,
                bw_per_chip=1.8 * TB,
                links_per_chip=18,
                latency_s=1 * US,
                direction="bidirectional",
                sources={
                    "span": S.SEED_TOMS,
                    "bw_per_chip": S.SEED_TOMS + " (NVLink 5 1.8 TB/s bidirectional: 900 GB/s "
                    "each way)",
                    "links_per_chip": S.NVIDIA_GB300_PAGE,
                    "latency_s": S.ASSUMED,
                },
            ),
            FabricLevel(
                name="scale-out",
                kind="fat-tree",
                span=100_000,
                bw_per_chip=800e9 / 8,
                latency_s=5 * US,
                direction="per-direction",
                sources={
                    "span": S.ASSUMED,
                    "bw_per_chip": S.SEED_TOMS + " (800G scale-out per GPU)",
                    "latency_s": S.ASSUMED,
                },
            ),
        ),
        description="NVIDIA GB300 NVL72: 72 Blackwell Ultra GPUs on NVSwitch 5.0, 36 Grace CPUs",
        sources={"chips": S.SEED_TOMS, "chips_per_server": S.NVIDIA_GB300_PAGE},
    ),
    aliases=("gb300", "nvl72"),
)

SYSTEMS.register(
    "tpu-v7-pod",
    SystemSpec(
        name="tpu-v7-pod",
        kind="pod",
        chip=TPU_V7,
        chips=9216,
        chips_per_server=4,
        host_cpu="x86 host",
        levels=(
            FabricLevel(
                name="ici",
                kind="torus",
                span=9216,
                dims=(16, 24, 24),
                bw_per_chip=1.2 * TB,
                links_per_chip=6,
                latency_s=1 * US,
                direction="bidirectional",
                sources={
                    "span": S.SEED_SPECS + " (9,216 chips per Pod)",
                    "bw_per_chip": S.SEED_SPECS + " (~1.2 TB/s ICI bidirectional: 600 GB/s each "
                    "way)",
                    "links_per_chip": S.ASSUMED,
                    "latency_s": S.ASSUMED,
                },
                notes={
                    "dims": "4x4x4 cubes joined by optical circuit switches; modelled as one "
                    "16x24x24 torus (assumed shape)"
                },
            ),
        ),
        description="Google TPU v7 Ironwood pod: 9,216 chips on ICI",
        sources={"chips": S.SEED_SPECS, "chips_per_server": S.GOOGLE_IRONWOOD_BLOG},
    ),
    aliases=("ironwood-pod", "tpu-v7-ironwood-pod"),
)


# ---------------------------------------------------------------------------------------------
# More Neuron instances: trn1n.32xlarge, inf2.48xlarge
# ---------------------------------------------------------------------------------------------

_TRN1 = SYSTEMS.get("trn1.32xlarge")

SYSTEMS.register(
    "trn1n.32xlarge",
    dataclasses.replace(
        _TRN1,
        name="trn1n.32xlarge",
        levels=(
            _TRN1.levels[0],
            _efa(
                1600e9 / 8 / 16,
                30_000,
                S.NEURON_TRN1_ARCH + " (EFA 1,600 Gbps per Trn1n.32xlarge); " + S.AWS_TRN1_PAGE,
            ),
        ),
        description="trn1.32xlarge with twice the EFA bandwidth (1,600 Gbps, network-optimised)",
        notes={
            "levels": "trn1-arch.rst's table has an unlabelled column giving 768 (Trn1n) vs 384 "
            "(Trn1) beside the EFA figures; the NeuronLink level keeps Trainium's 384 GB/s "
            "per chip (trainium.rst)",
        },
    ),
    aliases=("trn1n", "trn1n-32xlarge"),
)

SYSTEMS.register(
    "inf2.48xlarge",
    SystemSpec(
        name="inf2.48xlarge",
        kind="instance",
        chip=INF2,
        chips=12,
        chips_per_server=12,
        host_cpu="AMD EPYC",
        levels=(
            FabricLevel(
                name="neuronlink",
                kind="torus",
                span=12,
                dims=(12,),
                bw_per_chip=192 * GiB,
                latency_s=1.5 * US,
                direction="per-direction",
                links_per_chip=2,
                sources={
                    "span": S.NEURON_INF2_ARCH,
                    "bw_per_chip": S.NEURON_INF2_ARCH + " (192 GiB/s/chip)",
                    "latency_s": _TRN_HOP_SRC,
                    "links_per_chip": S.NEURON_INF2_ARCH + " (inf2-topology.png: a ring)",
                },
                notes={"dims": "a ring of 12 chips as read from inf2-topology.png"},
            ),
        ),
        description="12 Inferentia2 chips (24 NeuronCore-v2) on a NeuronLink-v2 ring; the "
        "instance's 100 Gbps network is not modelled (no EFA collectives across inf2)",
        sources={
            "chips": S.NEURON_INF2_ARCH + "; " + S.AWS_INF2_PAGE,
            "chips_per_server": S.NEURON_INF2_ARCH,
        },
    ),
    aliases=("inf2", "inf2-48xlarge", "inferentia2-instance"),
)

# ---------------------------------------------------------------------------------------------
# NVIDIA 8-GPU nodes (HGX baseboard: 8 GPUs on NVSwitch), AWS P5/P6, GB200 NVL72
# ---------------------------------------------------------------------------------------------

NVLINK_LATENCY_NOTE = "assumed ~1 us one NVSwitch hop; no figure in the sources"
#: A 3-tier fat-tree of radix-k switches joins k^3 / 4 hosts (k = 64 for NVIDIA QM9700 NDR
#: switches and 64-port 400G Ethernet switches): 65,536 GPUs, one NIC each.
FAT_TREE_3TIER_64 = 64**3 // 4
EFA_GPU_CLUSTER_MAX = 20_000  # AWS P5 page: UltraClusters of up to 20,000 H100 GPUs


def _nvswitch(chip: ChipSpec, span: int, src: str) -> FabricLevel:
    return FabricLevel(
        name="nvlink",
        kind="nvswitch",
        span=span,
        bw_per_chip=chip.link.bw_per_chip,
        latency_s=1 * US,
        direction=chip.link.direction,
        links_per_chip=chip.link.links_per_chip,
        sources={
            "span": src,
            "bw_per_chip": chip.link.sources["bw_per_chip"],
            "links_per_chip": chip.link.sources["links_per_chip"],
            "latency_s": S.ASSUMED,
        },
        notes={"latency_s": NVLINK_LATENCY_NOTE},
    )


def _scale_out(
    name: str, gbps_per_gpu: float, span: int, bw_src: str, span_src: str, latency_s: float,
    latency_src: str, rails: int | None = 8, note: str = "",
) -> FabricLevel:  # fmt: skip
    """A GPU scale-out network: one NIC per GPU, non-blocking (rail-optimised when ``rails``)."""
    srcs = {
        "span": span_src,
        "bw_per_chip": bw_src,
        "latency_s": latency_src,
        "oversubscription": bw_src + " (non-blocking fat-tree)",
    }
    if rails:
        srcs["rails"] = bw_src + " (one rail per GPU of a server)"
    return FabricLevel(
        name=name,
        kind="fat-tree",
        span=span,
        bw_per_chip=gbps_per_gpu * 1e9 / 8,
        latency_s=latency_s,
        direction="per-direction",
        oversubscription=1.0,
        rails=rails,
        sources=srcs,
        notes={"bw_per_chip": note} if note else {},
    )


IB_LATENCY_SRC = S.ASSUMED + " (5 us, as for the GB300 scale-out level: NIC + three switch tiers)"
ROCE_LATENCY_SRC = S.ASSUMED + " (7 us: RoCE switches add latency over InfiniBand)"
_FT_SPAN_SRC = f"{S.DERIVED}: 3-tier fat-tree of 64-port switches, 64^3/4 = {FAT_TREE_3TIER_64}"


def _efa_gpu(gbps_node: float, what: str, src: str) -> FabricLevel:
    return _scale_out(
        "efa",
        gbps_node / 8,
        EFA_GPU_CLUSTER_MAX,
        f"{src} ({gbps_node:,.0f} Gbps {what} per instance / 8 GPUs)",
        S.AWS_P5_PAGE,
        15 * US,
        EFA_LATENCY_SRC,
        note="EFA per instance shared by 8 GPUs; AWS documents no rail layout (taken as rails)",
    )


def _ib(gbps: float, src: str, rails: int = 8) -> FabricLevel:
    span = FAT_TREE_3TIER_64
    return _scale_out("infiniband", gbps, span, src, _FT_SPAN_SRC, 5 * US, IB_LATENCY_SRC, rails)


def _roce(gbps: float, src: str, rails: int = 8) -> FabricLevel:
    span = FAT_TREE_3TIER_64
    return _scale_out("roce", gbps, span, src, _FT_SPAN_SRC, 7 * US, ROCE_LATENCY_SRC, rails)


def _node(
    name: str, chip: ChipSpec, scale_out: FabricLevel, src: str, host: str, description: str,
    aliases: tuple[str, ...], notes: dict | None = None,
) -> SystemSpec:  # fmt: skip
    """An 8-GPU NVSwitch node (HGX baseboard) with one scale-out NIC per GPU."""
    return SYSTEMS.register(
        name,
        SystemSpec(
            name=name,
            kind="instance" if "xlarge" in name else "server",
            chip=chip,
            chips=8,
            chips_per_server=8,
            host_cpu=host,
            levels=(_nvswitch(chip, 8, src), scale_out),
            description=description,
            sources={"chips": src, "chips_per_server": src},
            notes=notes or {},
        ),
        aliases=aliases,
    )


P5 = _node(
    "p5.48xlarge", H100, _efa_gpu(3200, "EFAv2", S.AWS_P5_PAGE), S.AWS_P5_PAGE,
    "AMD EPYC (3rd gen)", "8 H100 SXM on NVSwitch (NVLink 4), 3,200 Gbps EFAv2",
    ("p5", "p5-48xlarge", "p5-h100"),
)  # fmt: skip
P5E = _node(
    "p5e.48xlarge", H200, _efa_gpu(3200, "EFA", S.AWS_P5_PAGE), S.AWS_P5_PAGE,
    "AMD EPYC (3rd gen)", "8 H200 on NVSwitch (NVLink 4), 3,200 Gbps EFA",
    ("p5e", "p5e-48xlarge"),
)  # fmt: skip
P5EN = _node(
    "p5en.48xlarge", H200, _efa_gpu(3200, "EFAv3", S.AWS_P5_PAGE), S.AWS_P5_PAGE,
    "Intel Xeon (Sapphire Rapids)", "8 H200 on NVSwitch (NVLink 4), 3,200 Gbps EFAv3, PCIe Gen5",
    ("p5en", "p5en-48xlarge"),
)  # fmt: skip
P6_B200 = _node(
    "p6-b200.48xlarge", B200, _efa_gpu(3200, "EFAv4", S.AWS_P6_PAGE), S.AWS_P6_PAGE,
    "Intel Xeon (5th gen)", "8 B200 on NVSwitch (NVLink 5), 3,200 Gbps EFAv4",
    ("p6", "p6-b200", "p6-b200-48xlarge"),
)  # fmt: skip
DGX_H100 = _node(
    "dgx-h100", H100, _ib(400, S.NVIDIA_DGX_H100), S.NVIDIA_DGX_H100,
    "2 x Intel Xeon Platinum 8480C", "DGX/HGX H100: 8 H100 SXM on 4 NVSwitch, 8 x 400 Gb/s "
    "ConnectX-7 (NDR InfiniBand) compute fabric", ("hgx-h100", "h100", "h100-node", "8xh100"),
)  # fmt: skip
DGX_H200 = _node(
    "dgx-h200", H200, _ib(400, S.NVIDIA_DGX_H200), S.NVIDIA_DGX_H200,
    "2 x Intel Xeon Platinum 8480C", "DGX/HGX H200: 8 H200 on NVSwitch, 8 x 400 Gb/s "
    "ConnectX-7 compute fabric", ("hgx-h200", "h200", "h200-node", "8xh200"),
)  # fmt: skip
DGX_B200 = _node(
    "dgx-b200", B200, _ib(400, S.NVIDIA_DGX_B200), S.NVIDIA_DGX_B200,
    "2 x Intel Xeon Platinum 8570", "DGX/HGX B200: 8 B200 on 2 NVSwitch (NVLink 5, 14.4 TB/s), "
    "8 x 400 Gb/s ConnectX-7 compute fabric", ("hgx-b200", "b200", "b200-node", "8xb200"),
)  # fmt: skip
DGX_B300 = _node(
    "dgx-b300", B300, _ib(800, S.NVIDIA_DGX_B300), S.NVIDIA_DGX_B300,
    "2 x Intel Xeon", "DGX/HGX B300: 8 B300 (Blackwell Ultra) on NVSwitch (NVLink 5), "
    "8 x 800 Gb/s ConnectX-8 compute fabric", ("hgx-b300", "b300", "b300-node", "8xb300"),
    notes={
        "chip": "the b300 preset holds the GB300 NVL72 per-GPU figures (288 GB, FP8 5 PF); "
        "the DGX B300 page gives 2.3 TB (= 8 x 288 GB) and FP8 72 PF with sparsity "
        "(4.5 PF dense per GPU): HGX B300 GPUs run at a lower power than GB300's",
    },
)  # fmt: skip

HGX_H800 = _node(
    "hgx-h800", H800, _ib(400, S.DEEPSEEK_V3_REPORT), S.DEEPSEEK_V3_REPORT,
    "2 x CPU (not stated)", "8 H800 on NVSwitch (NVLink 400 GB/s), InfiniBand 400 Gb/s per "
    "GPU (DeepSeek-V3's nodes)", ("h800-node", "8xh800"),
)  # fmt: skip
HGX_H20 = _node(
    "hgx-h20", H20, _ib(400, S.ASSUMED + " (400 Gb/s per GPU, as HGX H100 nodes)"),
    S.NVIDIA_H20_BRIEF, "2 x CPU (not stated)", "HGX H20: 8 H20 on NVSwitch (NVLink 900 GB/s); "
    "scale-out NIC assumed 400 Gb/s per GPU", ("h20-node", "8xh20"),
)  # fmt: skip

SYSTEMS.register(
    "h100-pcie-server",
    SystemSpec(
        name="h100-pcie-server",
        kind="server",
        chip=H100_PCIE,
        chips=8,
        chips_per_server=8,
        host_cpu="2 x CPU (PCIe Gen5 host)",
        levels=(
            FabricLevel(
                name="nvlink-bridge",
                kind="switch",
                span=2,
                bw_per_chip=600 * GB,
                latency_s=1 * US,
                direction="bidirectional",
                sources={
                    "span": S.NVIDIA_H100_PCIE_DATASHEET + " (a bridge joins a pair of GPUs)",
                    "bw_per_chip": S.NVIDIA_H100_PCIE_DATASHEET,
                    "latency_s": S.ASSUMED,
                },
            ),
            FabricLevel(
                name="pcie",
                kind="switch",
                span=8,
                bw_per_chip=128 * GB,
                latency_s=2 * US,
                direction="bidirectional",
                sources={
                    "span": S.ASSUMED + " (8 GPUs behind the host's PCIe Gen5 switches)",
                    "bw_per_chip": S.NVIDIA_H100_PCIE_DATASHEET + " (PCIe Gen5 128 GB/s)",
                    "latency_s": S.ASSUMED,
                },
                notes={"latency_s": "assumed ~2 us through a PCIe switch; no figure"},
            ),
        ),
        description="8 H100 PCIe in one server: NVLink bridges join pairs (600 GB/s), PCIe "
        "Gen5 joins the pairs (128 GB/s per GPU); no scale-out network modelled",
        sources={
            "chips": S.ASSUMED + " (a typical 8-GPU PCIe server)",
            "chips_per_server": S.ASSUMED,
        },
    ),
    aliases=("8xh100-pcie", "h100-pcie-8"),
)

_GAUDI2_MESH_BW = 21 * 100e9 / 8  # 21 of the 24 ports join the 8 Gaudi2 of a server
SYSTEMS.register(
    "hls-gaudi2",
    SystemSpec(
        name="hls-gaudi2",
        kind="server",
        chip=GAUDI2,
        chips=8,
        chips_per_server=8,
        host_cpu="2 x Intel Xeon",
        levels=(
            FabricLevel(
                name="roce-mesh",
                kind="switch",
                span=8,
                bw_per_chip=_GAUDI2_MESH_BW,
                latency_s=2 * US,
                direction="per-direction",
                links_per_chip=21,
                sources={
                    "span": S.HABANA_GAUDI2_WHITEPAPER,
                    "bw_per_chip": f"{S.DERIVED}: 21 x 100 Gb/s ({S.HABANA_GAUDI2_WHITEPAPER})",
                    "latency_s": S.ASSUMED,
                    "links_per_chip": S.HABANA_GAUDI2_WHITEPAPER,
                },
                notes={
                    "kind": "a full mesh (3 x 100 GbE to each of the 7 peers) modelled as a "
                    "switch: all of it is reached by exchanges with every peer at once, a "
                    "ring over neighbours reaches 3 ports of it",
                },
            ),
            _roce(
                300,
                f"{S.DERIVED}: 3 x 100 Gb/s scale-out ports per Gaudi2 "
                f"({S.HABANA_GAUDI2_WHITEPAPER})",
            ),
        ),
        description="HLS-Gaudi2: 8 Gaudi2 joined all-to-all by 21 of their 100 GbE ports, 3 "
        "ports each to a RoCE scale-out network (2.4 Tb/s per server)",
        sources={
            "chips": S.HABANA_GAUDI2_WHITEPAPER,
            "chips_per_server": S.HABANA_GAUDI2_WHITEPAPER,
        },
    ),
    aliases=("gaudi2-server", "8xgaudi2"),
)

_GB200_NVL = _nvswitch(GB200, 72, S.NVIDIA_GB200_PAGE)
_GB200_IB = _ib(400, S.NVIDIA_GB200_SUPERPOD, rails=4)  # one rail per GPU of a compute tray

GB200_NVL72 = SYSTEMS.register(
    "gb200-nvl72",
    SystemSpec(
        name="gb200-nvl72",
        kind="rack",
        chip=GB200,
        chips=72,
        chips_per_server=4,
        host_cpu="NVIDIA Grace (72-core), one per 2 GPUs",
        levels=(_GB200_NVL, _GB200_IB),
        description="NVIDIA GB200 NVL72: 72 Blackwell GPUs and 36 Grace CPUs on NVLink 5 "
        "switches (130 TB/s), 18 compute trays of 4 GPUs",
        sources={"chips": S.NVIDIA_GB200_PAGE, "chips_per_server": S.NVIDIA_GB200_PAGE},
    ),
    aliases=("gb200", "nvl72-gb200", "gb200-rack"),
)

SYSTEMS.register(
    "gb200-compute-tray",
    dataclasses.replace(
        GB200_NVL72,
        name="gb200-compute-tray",
        kind="server",
        chips=4,
        description="one GB200 NVL72 compute tray: 2 GB200 superchips (4 Blackwell GPUs, "
        "2 Grace), its GPUs joined through the rack's NVLink switch trays",
    ),
    aliases=("gb200-tray", "gb200-nvl4-tray"),
)

# ---------------------------------------------------------------------------------------------
# Scale-out GPU clusters: nodes joined by rail-optimised, non-blocking fat-trees
# ---------------------------------------------------------------------------------------------

GPU_CLUSTER_EXAMPLE = 16_384
_EXAMPLE_SRC = (
    f"{S.ASSUMED}: an example size ({GPU_CLUSTER_EXAMPLE:,} GPUs); any count up to the "
    "fat-tree's span is valid (SystemSpec.with_chips, --chips)"
)


def _cluster(
    name: str, node: SystemSpec, scale_out: FabricLevel, chips: int, chips_src: str,
    description: str, aliases: tuple[str, ...],
) -> SystemSpec:  # fmt: skip
    return SYSTEMS.register(
        name,
        SystemSpec(
            name=name,
            kind="cluster",
            chip=node.chip,
            chips=chips,
            chips_per_server=node.chips_per_server,
            host_cpu=node.host_cpu,
            levels=(*node.scale_up_levels, scale_out),
            description=description,
            sources={"chips": chips_src, "chips_per_server": node.sources["chips_per_server"]},
        ),
        aliases=aliases,
    )


_cluster(
    "h100-ib-cluster", DGX_H100, _ib(400, S.NVIDIA_SUPERPOD_H100 + "; " + S.META_GENAI_INFRA),
    24_576, S.META_GENAI_INFRA, "DGX H100 nodes on a rail-optimised NDR 400 Gb/s InfiniBand "
    "fat-tree (as Meta's 24,576-GPU InfiniBand cluster, DGX SuperPOD)",
    ("h100-cluster", "dgx-h100-superpod", "h100-superpod"),
)  # fmt: skip
_cluster(
    "h100-roce-cluster", DGX_H100, _roce(400, S.META_GENAI_INFRA + "; " + S.LLAMA3_PAPER),
    24_576, S.META_GENAI_INFRA + "; " + S.LLAMA3_PAPER, "8-GPU H100 nodes on a 400 Gbps RoCE "
    "three-layer Clos (Meta's 24,576-GPU RoCE cluster; Llama 3 trained on 16K of it)",
    ("h100-roce", "meta-roce-24k"),
)  # fmt: skip
_cluster(
    "h800-ib-cluster", HGX_H800, _ib(400, S.DEEPSEEK_V3_REPORT), 2048, S.DEEPSEEK_V3_REPORT,
    "HGX H800 nodes on a 400 Gb/s-per-GPU InfiniBand fat-tree (DeepSeek-V3's 2,048-GPU "
    "cluster)", ("h800-cluster", "deepseek-cluster"),
)  # fmt: skip
_cluster(
    "p5-ultracluster", P5, P5.levels[-1], EFA_GPU_CLUSTER_MAX, S.AWS_P5_PAGE,
    "p5.48xlarge instances in an EC2 UltraCluster (EFA, up to 20,000 H100)",
    ("p5-cluster", "h100-efa-cluster"),
)  # fmt: skip
for _node_spec, _gen, _gbps in (
    (DGX_H200, "h200", 400),
    (DGX_B200, "b200", 400),
    (DGX_B300, "b300", 800),
):
    _src = _node_spec.sources["chips"]
    _cluster(
        f"{_gen}-ib-cluster", _node_spec, _ib(_gbps, _src), GPU_CLUSTER_EXAMPLE, _EXAMPLE_SRC,
        f"{_node_spec.name} nodes on a rail-optimised {_gbps} Gb/s-per-GPU InfiniBand fat-tree",
        (f"{_gen}-cluster", f"dgx-{_gen}-superpod"),
    )  # fmt: skip
    _cluster(
        f"{_gen}-roce-cluster", _node_spec, _roce(_gbps, _src), GPU_CLUSTER_EXAMPLE, _EXAMPLE_SRC,
        f"{_node_spec.name} nodes on a rail-optimised {_gbps} Gb/s-per-GPU RoCE fat-tree",
        (f"{_gen}-roce",),
    )  # fmt: skip
_cluster(
    "gb200-nvl72-ib-cluster", GB200_NVL72, _GB200_IB, GPU_CLUSTER_EXAMPLE // 72 * 72,
    _EXAMPLE_SRC + " (rounded down to whole racks)",
    "GB200 NVL72 racks on a rail-optimised 400 Gb/s-per-GPU InfiniBand fat-tree",
    ("gb200-cluster", "gb200-superpod"),
)  # fmt: skip
_cluster(
    "gb200-nvl72-roce-cluster", GB200_NVL72, _roce(400, S.NVIDIA_GB200_SUPERPOD, rails=4),
    GPU_CLUSTER_EXAMPLE // 72 * 72, _EXAMPLE_SRC + " (rounded down to whole racks)",
    "GB200 NVL72 racks on a rail-optimised 400 Gb/s-per-GPU RoCE fat-tree",
    ("gb200-roce",),
)  # fmt: skip

# ---------------------------------------------------------------------------------------------
# Google Cloud TPU v5e, v5p, v6e: slices (one ICI torus) and multislice over the DCN
# ---------------------------------------------------------------------------------------------

#: Slice shapes (chips -> torus dims) from the Cloud TPU pages' configuration tables.
TPU_2D_SHAPES = {4: (2, 2), 8: (2, 4), 16: (4, 4), 32: (4, 8), 64: (8, 8), 128: (8, 16),
                 256: (16, 16)}  # fmt: skip
TPU_V5P_SHAPES = {
    64: (4, 4, 4),
    128: (4, 4, 8),
    256: (4, 8, 8),
    512: (8, 8, 8),
    1024: (8, 8, 16),
    2048: (8, 16, 16),
    4096: (16, 16, 16),
    6144: (16, 16, 24),
}
#: Multislice joins slices over the data-center network; no source bounds the slice count.
TPU_DCN_SPAN = 100_000


def _dcn(gbps_per_chip: float, src: str, note: str) -> FabricLevel:
    return FabricLevel(
        name="dcn",
        kind="fat-tree",
        span=TPU_DCN_SPAN,
        bw_per_chip=gbps_per_chip * 1e9 / 8,
        latency_s=10 * US,
        direction="per-direction",
        sources={
            "span": S.ASSUMED + " (multislice: slices joined over the DCN, count not bounded)",
            "bw_per_chip": src,
            "latency_s": S.ASSUMED + " (10 us host-NIC-to-host-NIC over the DCN)",
        },
        notes={"bw_per_chip": note},
    )


_TPU_GENS = {
    # name: (chip, shapes, cores per chip in the slice name, pod chips, DCN level)
    "v5e": (
        TPU_V5E, TPU_2D_SHAPES, 1, 256,
        _dcn(25, S.GOOGLE_TPU_V5E, "2 x 100 Gbps NIC per host of 8 chips = 25 Gbps per chip; "
             "the page's 6.4 Tbps per 256-chip pod gives the same"),
    ),
    "v5p": (
        TPU_V5P, TPU_V5P_SHAPES, 2, 8960,
        _dcn(50, S.GOOGLE_TPU_V5P, "50 Gbps DCN bandwidth per chip, as the page states"),
    ),
    "v6e": (
        TPU_V6E, TPU_2D_SHAPES, 1, 256,
        _dcn(100, S.GOOGLE_TPU_V6E + " (4 x 200 Gbps NIC per host of 8 chips)",
             "per-host NICs / 8 chips; the page's 25.6 Tbps per 256-chip pod gives the same"),
    ),
}  # fmt: skip


def _ici_level(chip: ChipSpec, dims: tuple[int, ...], src: str) -> FabricLevel:
    return FabricLevel(
        name="ici",
        kind="torus",
        span=math.prod(dims),
        dims=dims,
        bw_per_chip=chip.link.bw_per_chip,
        latency_s=chip.link.latency_s,
        direction=chip.link.direction,
        links_per_chip=chip.link.links_per_chip,
        sources={
            "span": src,
            "bw_per_chip": chip.link.sources["bw_per_chip"],
            "latency_s": chip.link.sources["latency_s"],
            "links_per_chip": chip.link.sources["links_per_chip"],
        },
        notes={
            **{k: v for k, v in chip.link.notes.items() if k == "bw_per_chip"},
            "dims": "modelled with wraparound in every dimension: v5p slices of a cube "
            "(4x4x4) and larger are full 3D tori; v5e/v6e slices wrap only along dimensions "
            "of 16 (smaller slices are meshes, slower than modelled)",
        },
    )


def _tpu_slice(gen: str, chips: int) -> SystemSpec:
    chip_spec, shapes, cores, _, dcn = _TPU_GENS[gen]
    dims = shapes[chips]
    name = f"tpu-{gen}-{chips * cores}"
    src = chip_spec.link.sources["bw_per_chip"].split(" (")[0]
    return SystemSpec(
        name=name,
        kind="pod",
        chip=chip_spec,
        chips=chips,
        chips_per_server=min(chips, 4 if gen == "v5p" else 8),
        host_cpu="x86 TPU host",
        levels=(_ici_level(chip_spec, dims, src), dcn),
        description=f"Cloud TPU {gen} slice {gen}-{chips * cores}: {chips} chips in a "
        f"{'x'.join(map(str, dims))} ICI torus; multislice over the DCN",
        sources={"chips": src + " (slice shapes)", "chips_per_server": src},
        notes={"name": "v5p slice names count TensorCores (2 per chip)"} if cores > 1 else {},
    )


for _gen, (_chip, _shapes, _cores, _pod, _) in _TPU_GENS.items():
    for _chips in _shapes:
        _spec = _tpu_slice(_gen, _chips)
        _aliases = [f"{_gen}-{_chips * _cores}"]
        if _gen == "v5e":
            _aliases.append(f"v5litepod-{_chips}")
        if _gen == "v6e" and _chips == _pod:
            _aliases += ["v6e", "trillium", "tpu-v6e-pod", "trillium-pod", "v6e-pod"]
        if _gen == "v5e" and _chips == _pod:
            _aliases += ["v5e", "tpu-v5e-pod", "v5e-pod"]
        SYSTEMS.register(_spec.name, _spec, aliases=tuple(_aliases))

_V5P_MAX = SYSTEMS.get("tpu-v5p-12288")
SYSTEMS.register(
    "tpu-v5p-pod",
    dataclasses.replace(
        _V5P_MAX,
        name="tpu-v5p-pod",
        chips=8960,
        description="Cloud TPU v5p pod: 8,960 chips; one job's ICI slice is at most 16x16x24 "
        "(6,144 chips), so a whole-pod job is two slices joined over the DCN",
        sources={
            "chips": S.GOOGLE_TPU_V5P + " (8,960 chips per pod)",
            "chips_per_server": S.GOOGLE_TPU_V5P,
        },
    ),
    aliases=("v5p", "v5p-pod"),
)


# =============================================================================================
# Lookups
# =============================================================================================

REGISTRIES: dict[str, Registry] = {"core": CORES, "chip": CHIPS, "system": SYSTEMS}


def core(name: str) -> CoreSpec:
    """A NeuronCore preset by name or alias (``neuroncore-v4``, ``v4``, ``gen4``)."""
    return CORES.get(name)


def chip(name: str) -> ChipSpec:
    """A chip preset by name or alias (``trn3``, ``b300``, ``tpu-v7``)."""
    return CHIPS.get(name)


def system(name: str) -> SystemSpec:
    """A system preset by name or alias (``trn3-gen2-ultraserver``, ``gb300-nvl72``)."""
    return SYSTEMS.get(name)


def lookup(name: str) -> CoreSpec | ChipSpec | SystemSpec:
    """Any preset by name; the error lists every valid name of every kind."""
    for registry in REGISTRIES.values():
        if name in registry:
            return registry.get(name)
    valid = "; ".join(f"{kind}s: {', '.join(r.names())}" for kind, r in REGISTRIES.items())
    raise UnknownNameError(f"unknown hardware preset {name!r}; valid: {valid}")


def all_names() -> dict[str, list[str]]:
    """Every preset name, by kind."""
    return {kind: registry.names() for kind, registry in REGISTRIES.items()}
