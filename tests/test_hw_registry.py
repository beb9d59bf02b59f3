"""Registries refuse duplicates and list valid names on a miss."""

import pytest

from trnsim import hw
from trnsim.errors import DuplicateNameError, UnknownNameError
from trnsim.hw.registry import Registry


def test_duplicate_name_is_refused():
    reg: Registry[int] = Registry("thing")
    reg.register("a", 1, aliases=("alpha",))
    with pytest.raises(DuplicateNameError, match="'a' is already registered"):
        reg.register("A", 2)
    with pytest.raises(DuplicateNameError, match="'alpha'"):
        reg.register("b", 2, aliases=("alpha",))


def test_bad_name_lists_valid_names_and_suggests():
    with pytest.raises(UnknownNameError) as info:
        hw.system("trn3-gen3-ultraserver")
    msg = str(info.value)
    assert "trn3-gen2-ultraserver" in msg and "gb300-nvl72" in msg and "did you mean" in msg


def test_lookup_covers_every_kind_and_aliases():
    assert hw.lookup("gen4").name == "neuroncore-v4"
    assert hw.lookup("trainium3").name == "trn3"
    assert hw.lookup("TRN3_GEN2").name == "trn3-gen2-ultraserver"
    with pytest.raises(UnknownNameError, match=r"cores: .*chips: .*systems: "):
        hw.lookup("nope")


def test_required_presets_exist():
    names = hw.all_names()
    for n in ("neuroncore-v2", "neuroncore-v3", "neuroncore-v4"):
        assert n in names["core"]
    for n in ("trn1", "trn2", "trn3", "trainium4", "h100-sxm", "h200", "b200", "b300", "tpu-v7"):
        assert n in names["chip"]
    for n in (
        "trn1.32xlarge",
        "trn2.48xlarge",
        "trn2-ultraserver",
        "trn3-gen1-ultraserver",
        "trn3-gen2-ultraserver",
        "trn3-ultracluster",
        "gb300-nvl72",
        "tpu-v7-pod",
    ):
        assert n in names["system"]
