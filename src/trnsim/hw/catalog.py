"""The hardware catalog: every named preset, with the source of every figure.

Units are SI (Hz, bytes, bytes/s, FLOP/s, s, W). Decimal prefixes: 1 GB = 1e9 bytes,
1 GiB = 2**30 bytes; each figure is entered in the unit its source uses.

Where sources disagree the chosen value is in the figure and the alternative is in ``notes``.
Aggregates (UltraServer PFLOP/s, HBM TB and TB/s) are properties of ``SystemSpec``, derived from
the chip figures below; the tests check they reproduce the seeds' tables.
"""

from __future__ import annotations

import dataclasses

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


def _dma(engine_bw: float, theoretical: float, guide: str) -> DmaSpec:
    return DmaSpec(
        engines=16,
        queues_per_engine=16,
        engine_bw=engine_bw,
        fixed_latency_s=1.3 * US,
        min_efficient_bytes_per_partition=2 * KiB,
        saturating_bytes_per_partition=4 * KiB,
        sources={
            "engines": S.NEURON_DMA_OVERVIEW,
            "queues_per_engine": S.NEURON_DMA_OVERVIEW,
            "engine_bw": S.NEURON_DMA_GUIDE + " (effective B/ns per engine)",
            "fixed_latency_s": S.NEURON_DMA_GUIDE + " (~1,300 ns semaphore-to-start)",
            "min_efficient_bytes_per_partition": S.NEURON_DMA_GUIDE,
            "saturating_bytes_per_partition": S.NEURON_DMA_GUIDE,
        },
        notes={
            "engine_bw": f"effective figure; {S.NEURON_DMA_OVERVIEW} gives a theoretical "
            f"{theoretical / GB:.1f} GB/s per engine ({guide})",
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
        vector=_engine("vector", 1.12 * GHZ, 128, 128, None, S.NEURON_V2_GUIDE),
        scalar=_engine("scalar", 1.4 * GHZ, 128, 128, None, S.NEURON_V2_GUIDE),
        gpsimd=_engine("gpsimd", 1.4 * GHZ, 128, 128, None, S.NEURON_V2_GUIDE),
        dma=_dma(17 * GB, 27.2 * GB, "v2 arch guide: 27 GiB/s"),
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
        dma=_dma(23 * GB, 27.2 * GB, "theoretical"),
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
            sources={
                "bw_per_chip": S.NEURON_TRN1_PAGE,
                "links_per_chip": S.NEURON_TRN1_PAGE,
                "latency_s": S.NEURON_INTRANODE_CC + " ('about 1-2 us' per ring hop, Trn2)",
            },
            notes={"latency_s": "Trn2 figure used for Trn1 (no Trn1 figure published)"},
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
            sources={
                "bw_per_chip": S.NEURON_TRN2_PAGE + "; " + S.SEED_TOMS,
                "links_per_chip": S.NEURON_TRN2_PAGE,
                "latency_s": S.NEURON_INTRANODE_CC + " ('about 1-2 us' per ring hop)",
            },
            notes={"bw_per_chip": "seed 003 says ~1 TB/s"},
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
        sources={"bw_per_chip": src, "links_per_chip": src, "latency_s": S.ASSUMED},
        notes={
            "bw_per_chip": "bidirectional total, as NVIDIA quotes it",
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


B200 = CHIPS.register(
    "b200",
    _blackwell(
        "b200",
        {
            "fp4": 10 * PFLOPS,
            "fp8": 5 * PFLOPS,
            "int8": 5 * PFLOPS,
            "bf16": 2.5 * PFLOPS,
            "fp16": 2.5 * PFLOPS,
            "tf32": 1.15 * PFLOPS,
            "fp32": 0.08 * PFLOPS,
        },
        192 * GB,
        1200,
    ),
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
            sources={
                "bw_per_chip": S.SEED_SPECS + " (~1.2 TB/s ICI)",
                "links_per_chip": S.ASSUMED + " (3D torus: 6 neighbours)",
                "latency_s": S.ASSUMED,
            },
            notes={"bw_per_chip": "bidirectional, as Google quotes it"},
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
        notes={"chips": "seed 004's table lists 48 packages; the Neuron docs and 83.2 PF say 64"},
    ),
    aliases=("trn2-us", "trn2u"),
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
                bw_per_chip=900 * GB,
                links_per_chip=18,
                latency_s=1 * US,
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
                bw_per_chip=600 * GB,
                links_per_chip=6,
                latency_s=1 * US,
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
