"""GPU, TPU and Neuron system presets: published totals reproduced from per-chip figures,
aliases as users say them, link directions in the type, and every preset through the CLI."""

import dataclasses
import json

import pytest

from trnsim import hw
from trnsim.cli.main import main
from trnsim.errors import ConfigError, DuplicateNameError

P, T, G = 1e15, 1e12, 1e9


def close(a: float, b: float, rel: float = 2e-3) -> bool:
    return a == pytest.approx(b, rel=rel)


def test_aws_gpu_instances_match_the_instance_pages():
    p5 = hw.system("p5.48xlarge")
    assert p5.chips == 8 and p5.chip.name == "h100-sxm"
    assert close(p5.hbm_bytes, 640 * G)
    assert close(p5.scale_out_level.bw_per_chip * 8 * 8, 3200 * G)  # 3,200 Gbps per instance
    assert close(hw.system("p5e").hbm_bytes, 1128 * G)
    assert hw.system("p5en.48xlarge").chip.name == "h200"
    p6 = hw.system("p6-b200.48xlarge")
    assert close(p6.hbm_bytes, 1440 * G) and close(p6.hbm_bw, 64 * T)


def test_dgx_b200_totals_match_the_datasheet():
    dgx = hw.system("dgx-b200")
    assert close(2 * dgx.peak_flops("fp8"), 72 * P)  # 72 PF FP8 with sparsity
    assert close(dgx.peak_flops("fp4"), 72 * P)  # 144 PF with sparsity = 72 dense
    assert close(dgx.link_bw, 14.4 * T)  # 14.4 TB/s aggregate NVLink (bidirectional)


def test_gb200_nvl72_totals_match_the_rack_page():
    rack = hw.system("gb200-nvl72")
    assert rack.chips == 72 and rack.chip.name == "gb200"
    assert close(2 * rack.peak_flops("fp4"), 1440 * P)
    assert close(2 * rack.peak_flops("fp8"), 720 * P)
    assert close(2 * rack.peak_flops("bf16"), 360 * P)
    assert close(rack.hbm_bytes, 13.4 * T, rel=1e-3)
    assert close(rack.hbm_bw, 576 * T)
    assert close(rack.link_bw, 130 * T, rel=5e-3)
    tray = hw.system("gb200-tray")
    assert tray.chips == 4 and tray.scale_up_chips == 4 and tray.levels == rack.levels


def test_tpu_pods_match_the_cloud_tpu_pages():
    v5e, v6e = hw.system("v5e"), hw.system("trillium")
    assert v5e.chips == v6e.chips == 256
    assert close(v5e.peak_flops("bf16"), 50.63 * P, rel=5e-3)
    assert close(v6e.peak_flops("bf16"), 234.9 * P, rel=1e-3)
    # "all-reduce bandwidth per pod": chips x ICI per direction (half the bidirectional figure)
    for pod, published in ((v5e, 51.2 * T), (v6e, 102.4 * T)):
        assert close(pod.chips * pod.chip.link.bw_per_direction, published)
    v5p = hw.system("v5p")
    assert v5p.chips == 8960 and v5p.scale_up_chips == 6144


def test_tpu_slices_are_tori_of_the_published_shapes():
    s = hw.system("v5p-128")  # v5p names count TensorCores: 64 chips
    assert s.chips == 64 and s.levels[0].dims == (4, 4, 4)
    assert hw.system("tpu-v5p-4096").levels[0].dims == (8, 16, 16)
    assert hw.system("v5litepod-16").levels[0].dims == (4, 4)
    assert [lvl.kind for lvl in s.levels] == ["torus", "fat-tree"]
    multi = s.with_chips(128)  # 2 x v5p-128 over the DCN
    assert multi.chips == 128 and multi.scale_out_level.name == "dcn"


def test_neuron_instances():
    trn1, trn1n = hw.system("trn1.32xlarge"), hw.system("trn1n")
    assert close(trn1n.levels[-1].bw_per_chip, 2 * trn1.levels[-1].bw_per_chip, rel=1e-12)
    assert trn1n.levels[0] == trn1.levels[0]
    inf2 = hw.system("inf2")
    assert inf2.chips == 12 and inf2.chip.cores == 2
    assert close(inf2.peak_flops("bf16"), 2280 * T, rel=1e-9)  # inf2-arch.rst: 2,280
    assert close(inf2.hbm_bytes, 384 * 2**30, rel=1e-9)
    us = hw.system("trn2-ultra")
    assert us.name == "trn2-ultraserver" and us.chips == 64


@pytest.mark.parametrize(
    "alias, name",
    [
        ("p5", "p5.48xlarge"),
        ("h100", "dgx-h100"),
        ("hgx-h100", "dgx-h100"),
        ("dgx-h200", "dgx-h200"),
        ("b200", "dgx-b200"),
        ("b300", "dgx-b300"),
        ("gb200", "gb200-nvl72"),
        ("nvl72", "gb300-nvl72"),  # unchanged: the existing alias stays GB300's
        ("v5p", "tpu-v5p-pod"),
        ("v6e", "tpu-v6e-256"),
        ("trillium", "tpu-v6e-256"),
        ("inf2", "inf2.48xlarge"),
        ("h100-cluster", "h100-ib-cluster"),
    ],
)
def test_system_aliases_as_users_say_them(alias, name):
    assert hw.system(alias).name == name


def test_chip_aliases():
    assert hw.chip("trillium").name == "tpu-v6e"
    assert hw.chip("v5p").name == "tpu-v5p"
    assert hw.chip("gb200").name == "gb200"


def test_registering_an_existing_alias_is_refused():
    with pytest.raises(DuplicateNameError, match="'p5'"):
        hw.SYSTEMS.register("another-p5", hw.system("p5"), aliases=("p5",))


def test_link_direction_is_in_the_type():
    h100 = hw.system("p5").levels[0]
    assert h100.direction == "bidirectional" and close(h100.bw_per_direction, 450 * G, 1e-12)
    trn2 = hw.system("trn2.48xlarge").levels[0]
    assert trn2.direction == "per-direction" and trn2.bw_per_direction == trn2.bw_per_chip
    assert hw.chip("h100").link.direction == "bidirectional"
    with pytest.raises(ConfigError, match="direction must be one of"):
        dataclasses.replace(h100, direction="both")


def test_torus_dims_must_make_the_span():
    lvl = hw.system("v5p-128").levels[0]
    with pytest.raises(ConfigError, match="not the span 64"):
        dataclasses.replace(lvl, dims=(4, 4, 2))


def test_scale_up_domains():
    spans = {n: hw.system(n).scale_up_chips for n in ("p5", "gb200-nvl72", "v5p-128")}
    assert spans == {"p5": 8, "gb200-nvl72": 72, "v5p-128": 64}
    assert hw.system("h100-ib-cluster").scale_up_chips == 8
    assert hw.system("trn2-ultraserver").scale_up_chips == 64


SYSTEM_NAMES = [name for name, _ in hw.SYSTEMS]
CHIP_NAMES = [name for name, _ in hw.CHIPS]


@pytest.mark.parametrize("name", SYSTEM_NAMES + CHIP_NAMES)
def test_specs_works_for_every_preset(name, capsys):
    assert main(["specs", name, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["name"] == name
    for key, value in data["values"].items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            assert data["sources"].get(key), f"{name}: {key} has no source"


def test_compare_new_presets(capsys):
    assert main(["compare", "p5", "dgx-b200", "gb200", "v5p", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kind"] == "system"
    row = next(r for r in data["rows"] if r["key"] == "hbm_bw")
    assert row["ratios"][1] == pytest.approx(64 / (8 * 3.35), rel=1e-6)
    assert main(["compare", "h100", "trillium", "inferentia2"]) == 0
