"""The ResourceSlices trnsim's Neuron DRA driver publishes: each attribute of dra.rst's
reference, with its type, where the docs say it is populated, and nowhere else."""

from __future__ import annotations

import pytest

from trnsim.dra import driver
from trnsim.dra import fleet as F

COMMON = {
    "deviceId": "int",
    "instanceType": "string",
    "neuronDriverVersion": "string",
    "draDriverVersion": "version",
    "resourceType": "string",
    "networkNodeLayer1": "string",
    "networkNodeLayer2": "string",
    "networkNodeLayer3": "string",
}
GRID = {"topology_x": "int", "topology_y": "int", "topology4_id": "int", "topology8_id": "int"}
EFA = {f"resource.aws.com/devicegroup{n}_id": "string" for n in (1, 4, 8, 16)}


def attrs(fleet: str, node: int = 0, device: int = 0) -> dict[str, tuple[str, object]]:
    fl = F.load(fleet)
    return {k: (v.kind, v.value) for k, v in driver.device_attributes(fl, fl.nodes[node], device)}


def kinds(a: dict) -> dict[str, str]:
    return {k: v[0] for k, v in a.items()}


def test_trn2_instance_has_common_grid_and_efa_attributes() -> None:
    assert kinds(attrs("trn2.48xlarge=1")) == {**COMMON, **GRID, **EFA}


def test_ultraserver_node_has_capacity_block_and_no_grid() -> None:
    got = kinds(attrs("trn2-ultraserver=1"))
    assert got == {**COMMON, "capacityBlockId": "string", **EFA}


def test_single_device_instance_without_efa_has_only_common() -> None:
    assert kinds(attrs("trn1.2xlarge=1")) == COMMON


def test_trn3_gen2_server_publishes_only_the_groups_it_holds() -> None:
    got = kinds(attrs("trn3-gen2-ultraserver=1"))
    assert "resource.aws.com/devicegroup4_id" in got
    assert "resource.aws.com/devicegroup8_id" not in got
    assert "resource.aws.com/devicegroup16_id" not in got


@pytest.mark.parametrize("device", range(16))
def test_grid_position_row_and_column(device: int) -> None:
    a = attrs("trn2.48xlarge=1", device=device)
    row, col = divmod(device, 4)
    assert a["topology_x"] == ("int", row)
    assert a["topology_y"] == ("int", col)
    assert a["topology4_id"] == ("int", row)
    assert a["topology8_id"] == ("int", row // 2)
    assert a["deviceId"] == ("int", device)


@pytest.mark.parametrize("size", [4, 8, 16])
def test_devicegroups_follow_the_docs_diagram(size: int) -> None:
    """Groups of 4 are rows, of 8 two rows, of 16 the instance; ids differ between groups
    and between instances."""
    fl = F.load("trn2.48xlarge=2")
    key = f"resource.aws.com/devicegroup{size}_id"
    ids = [
        [dict(driver.device_attributes(fl, n, d))[key].value for d in range(16)] for n in fl.nodes
    ]
    for node_ids in ids:
        groups = [set(node_ids[i : i + size]) for i in range(0, 16, size)]
        assert all(len(g) == 1 for g in groups)
        assert len(set.union(*groups)) == 16 // size
    assert not set(ids[0]) & set(ids[1])


def test_devicegroup1_is_a_pci_bdf_per_device() -> None:
    values = [
        attrs("trn2.48xlarge=1", device=d)["resource.aws.com/devicegroup1_id"][1] for d in range(16)
    ]
    assert len(set(values)) == 16
    assert all(len(v.split(":")) == 3 and v.endswith(".0") for v in values)


def test_resource_type_and_node_device() -> None:
    fl = F.load("trn2-ultraserver=1")
    s = driver.node_slice(fl, fl.nodes[0])
    types = [dict(d.attributes)["resourceType"].value for d in s.devices]
    assert types.count("neuron_node") == 1 and types.count("neuron_device") == 16
    node_dev = s.devices[-1]
    assert "deviceId" not in dict(node_dev.attributes)
    assert dict(node_dev.attributes)["capacityBlockId"].value.startswith("cr-")


def test_capacity_block_is_shared_by_an_ultraservers_nodes() -> None:
    fl = F.load("trn2-ultraserver=2")
    blocks = [dict(driver.device_attributes(fl, n, 0))["capacityBlockId"].value for n in fl.nodes]
    assert len(set(blocks[:4])) == 1 and len(set(blocks[4:])) == 1 and blocks[0] != blocks[4]


def test_network_layers_group_nodes() -> None:
    fl = F.build(
        {"instances": [{"type": "trn2.48xlarge", "count": 3}], "network": {"nodesPerLayer3": 2}}
    )
    l3 = [n.layers[2] for n in fl.nodes]
    assert l3[0] == l3[1] != l3[2]
    assert len({n.layers[0] for n in fl.nodes}) == 1


def test_ultraserver_node_labels_pairs_and_quads() -> None:
    fl = F.load("trn2-ultraserver=1")
    labels = [driver.node_labels(fl, n) for n in fl.nodes]
    assert {lab[driver.LABEL_MODE] for lab in labels} == {"1_2_4"}
    pairs = [lab["neuron.amazonaws.com/ultraserver-server-id-2"] for lab in labels]
    assert pairs[0] == pairs[1] != pairs[2] == pairs[3]
    assert len({lab["neuron.amazonaws.com/ultraserver-server-id-4"] for lab in labels}) == 1
    assert [lab["neuron.amazonaws.com/ultraserver-node-id-4"] for lab in labels] == list("0123")


def test_slice_document_is_resource_k8s_io_v1() -> None:
    fl = F.load("trn2.48xlarge=1")
    doc = driver.node_slice(fl, fl.nodes[0]).to_dict()
    assert doc["apiVersion"] == "resource.k8s.io/v1" and doc["kind"] == "ResourceSlice"
    assert doc["spec"]["pool"]["name"] == doc["spec"]["nodeName"] == fl.nodes[0].name
    assert doc["spec"]["devices"][0]["attributes"]["deviceId"] == {"int": 0}


def test_fleet_errors_name_the_field() -> None:
    with pytest.raises(F.FleetError, match="unknown instance or UltraServer type 'trn9'"):
        F.load("trn9=1")
    with pytest.raises(F.FleetError, match="count UltraServers"):
        F.load("trn2u.48xlarge=1")
    with pytest.raises(F.FleetError, match="count must be an integer"):
        F.build({"instances": [{"type": "trn2.48xlarge", "count": 0}]})
