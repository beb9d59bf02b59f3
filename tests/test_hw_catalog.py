"""The hardware catalog reproduces the seeds' published tables from per-chip figures."""

import dataclasses

import pytest

from trnsim import hw
from trnsim.errors import ConfigError
from trnsim.hw.describe import rows

P, T = 1e15, 1e12


def close(a: float, b: float, rel: float = 2e-3) -> bool:
    return a == pytest.approx(b, rel=rel)


def test_trn3_gen2_ultraserver_matches_seed_table():
    # seed 004: 362.5 PF MXFP8 dense, 96.624 BF16, 26.352 FP32, 705.6 TB/s; seed 000: 20.7 TB.
    s = hw.system("trn3-gen2-ultraserver")
    assert s.chips == 144 and s.servers == 36 and s.chips_per_server == 4
    assert close(s.peak_flops("mxfp8"), 362.5 * P)
    assert close(s.peak_flops("bf16"), 96.624 * P, rel=1e-6)
    assert close(s.peak_flops("fp32"), 26.352 * P, rel=1e-6)
    assert close(s.hbm_bytes, 20.7e12)
    assert close(s.hbm_bw, 705.6e12, rel=1e-9)
    assert close(s.link_bw, 288e12, rel=1e-9)  # seed 003: 288 TB/s aggregate NeuronLink


def test_trn3_gen1_ultraserver_matches_seed_table():
    s = hw.system("trn3-gen1")
    assert s.chips == 64
    assert close(s.peak_flops("fp8"), 161.1 * P)
    assert close(s.hbm_bw, 313.6e12, rel=1e-9)


def test_gb300_nvl72_fp8_matches_seed_table():
    s = hw.system("gb300-nvl72")
    assert close(s.peak_flops("fp8"), 360 * P, rel=1e-9)
    assert close(s.hbm_bw, 576e12, rel=1e-9)


def test_trn2_ultraserver_and_the_4_4x_compute_claim():
    trn2, gen2 = hw.system("trn2-ultraserver"), hw.system("trn3-gen2")
    assert close(trn2.peak_flops("fp8"), 83.2 * P)
    assert gen2.peak_flops("mxfp8") / trn2.peak_flops("fp8") == pytest.approx(4.4, abs=0.05)


def test_per_core_tensor_engine_peaks_follow_from_array_and_clock():
    t = hw.core("neuroncore-v4").tensor
    assert close(t.peak_flops("mxfp8"), 315 * T)
    assert close(t.peak_flops("bf16"), 79 * T, rel=1e-2)
    assert close(t.peak_flops("fp32"), 20 * T, rel=2e-2)
    for dtype, published in t.published_peak_flops.items():
        assert close(t.peak_flops(dtype), published, rel=2e-2), dtype
    v2 = hw.core("v2").tensor
    assert close(v2.peak_flops("bf16"), 92 * T, rel=1e-2)


def test_chip_peaks_are_published_and_differ_from_tensor_engine_sum_as_documented():
    trn3 = hw.chip("trn3")
    assert trn3.peak("mxfp8") == 2.517 * P
    assert trn3.peak("bf16") == 671 * T and trn3.peak("fp32") == 183 * T
    assert close(trn3.tensor_engine_peak("mxfp8"), trn3.peak("mxfp8"))
    gap = trn3.peak("bf16") / trn3.tensor_engine_peak("bf16")
    assert 1.05 < gap < 1.08
    assert "Unexplained" in trn3.notes["peak_flops"]


def test_core_memories():
    sizes = {"v2": 192, "v3": 224, "v4": 256}
    for name, kib in sizes.items():
        c = hw.core(name)
        assert c.partitions == 128
        assert c.sbuf_bytes_per_partition == kib * 1024
        assert c.psum_bytes == 2 * 2**20 and c.psum_banks == 8
        assert c.psum_bank_bytes == 2048
    assert hw.core("v4").tensor.moving_fmax["bf16"] == 8192
    assert hw.core("v3").tensor.moving_fmax["fp32"] == 512
    assert hw.core("v4").supports_mx and not hw.core("v3").supports_mx


def test_trainium4_is_projected_from_roadmap_factors():
    t4, t3 = hw.chip("trainium4"), hw.chip("trn3")
    assert t4.projected and not t3.projected
    assert t4.peak("fp4") == pytest.approx(6 * t3.peak("mxfp4"))
    assert t4.peak("fp8") == pytest.approx(3 * t3.peak("fp8"))
    assert t4.hbm_bw == pytest.approx(4 * t3.hbm_bw)
    assert "PROJECTED" in t4.notes["projected"]


def test_disagreeing_sources_record_the_alternative():
    trn3 = hw.chip("trn3")
    assert "4.7" in trn3.notes["hbm_bw"]
    assert "2.56" in trn3.link.notes["bw_per_chip"]
    assert "16" in trn3.notes["cc_cores"] and "20" in trn3.notes["cc_cores"]


def test_ultracluster_is_whole_ultraservers_up_to_a_million_chips():
    c = hw.system("ultracluster-3")
    gen2 = hw.system("trn3-gen2")
    assert c.chips <= 1_000_000 < c.chips + gen2.chips
    assert c.chips % gen2.chips == 0
    assert c.levels[-1].kind == "fat-tree" and c.levels[-1].span >= 1_000_000


def test_every_figure_of_every_preset_has_a_source():
    for registry in hw.catalog.REGISTRIES.values():
        for _, preset in registry:
            for row in rows(preset):
                if isinstance(row.value, int | float) and not isinstance(row.value, bool):
                    assert row.source, f"{preset.name}: {row.key} has no source"


def test_a_figure_without_source_is_refused():
    link = hw.chip("trn3").link
    with pytest.raises(ConfigError, match="missing for bw_per_chip"):
        dataclasses.replace(link, sources={"links_per_chip": "x", "latency_s": "y"})


def test_system_levels_must_go_inner_to_outer():
    s = hw.system("trn3-gen2")
    with pytest.raises(ConfigError, match="inner to outer"):
        dataclasses.replace(s, levels=tuple(reversed(s.levels)))


def test_specs_are_hashable_cache_keys():
    assert hash(hw.chip("trn3")) == hash(hw.chip("trainium3"))
    assert {hw.system("trn3-gen2"): 1}[hw.system("trn3-gen2-ultraserver")] == 1


def test_an_engine_latency_of_its_own_is_shown_with_its_source():
    by_name = {r.key: r for r in rows(hw.core("gen2"))}
    vec = by_name["vector.static_latency_cycles"]
    assert vec.value == 100 and "trainium_inferentia2_arch" in vec.source
    assert "scalar.static_latency_cycles" not in by_name  # the core's figure holds
    assert "vector.static_latency_cycles" not in {r.key for r in rows(hw.core("gen3"))}
