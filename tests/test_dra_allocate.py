"""Allocation of ResourceClaims as Kubernetes' structured allocator does it, on fleets whose
ResourceSlices trnsim generates: AWS's own templates (aws-neuron-sdk deploy/files/specs,
unmodified, skipped without the checkout), the docs' worked example, constraints, configs,
taints, counters and the errors."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("celpy")
pytest.importorskip("yaml")

from trnsim.dra import driver, manifests, schedule
from trnsim.dra import fleet as F
from trnsim.dra.allocator import AllocationError
from trnsim.dra.k8s import ManifestError

SDK = Path("/work/checkouts/sdk")
SPECS = SDK / "deploy/files/specs"
needs_sdk = pytest.mark.skipif(not SPECS.is_dir(), reason="aws-neuron-sdk checkout not present")

# template -> (a fleet that satisfies it, a fleet that cannot, words the reason must contain)
TEMPLATES = {
    "1x4-connected-devices.yaml": ("trn2.48xlarge=1", "trn1.32xlarge=2", "no device matches"),
    "all-devices.yaml": ("trn2.48xlarge=1", "trn2-ultraserver=1", "no device matches"),
    "lnc-setting-trn2.yaml": ("trn2.48xlarge=1", "trn1.32xlarge=1", "no device matches"),
    "specific-driver-version.yaml": ("trn2.48xlarge=2", "trn2.48xlarge=1", "in use"),
    "2-node-inference-us.yaml": ("trn2-ultraserver=1", "trn2.48xlarge=4", "no node carries"),
    "4-node-inference-us.yaml": ("trn2-ultraserver=2", "trn2-ultraserver=1", "can hold its 4"),
    "us-and-lnc-config.yaml": ("trn2-ultraserver=1", "trn2.48xlarge=2", "no node carries"),
}


def run(text: str, fleet: str) -> schedule.Outcome:
    return schedule.allocate(manifests.load_text(text, "test.yaml"), F.load(fleet))


@needs_sdk
@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_aws_template_allocates_on_a_matching_fleet(name: str) -> None:
    good, _, _ = TEMPLATES[name]
    out = schedule.allocate(manifests.load(SPECS / name), F.load(good))
    assert out.ok, [p.reason for p in out.pods]
    assert out.pods and all(p.allocations for p in out.pods)


@needs_sdk
@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_aws_template_is_refused_with_the_reason(name: str) -> None:
    _, bad, words = TEMPLATES[name]
    out = schedule.allocate(manifests.load(SPECS / name), F.load(bad))
    assert not out.ok
    reasons = [p.reason for p in out.pods if not p.ok]
    assert reasons and any(words in r for r in reasons), reasons


@needs_sdk
def test_every_aws_template_is_covered() -> None:
    assert sorted(p.name for p in SPECS.glob("*.yaml")) == sorted(TEMPLATES)


@needs_sdk
def test_docs_worked_example_1x4_connected() -> None:
    """dra.rst 'Example 1': four connected devices of one trn2.48xlarge, request 'neurons',
    driver neuron.aws.com, pool = the node (the status shows neurondevice0..3)."""
    fl = F.load("trn2.48xlarge=1")
    out = schedule.allocate(manifests.load(SPECS / "1x4-connected-devices.yaml"), fl)
    (pod,) = out.pods
    (alloc,) = pod.allocations
    results = alloc.status()["allocation"]["devices"]["results"]
    assert {r["device"] for r in results} == {f"neurondevice{i}" for i in range(4)}
    assert {(r["driver"], r["pool"], r["request"]) for r in results} == {
        ("neuron.aws.com", fl.nodes[0].name, "neurons")
    }
    # the four share one devicegroup4_id: one row of the 4x4 torus (the docs' diagram)
    groups = {
        dict(driver.device_attributes(fl, fl.nodes[0], i))["resource.aws.com/devicegroup4_id"].value
        for i in range(4)
    }
    assert len(groups) == 1


CONNECTED = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: c}
spec:
  spec:
    devices:
      requests:
      - name: r
        exactly: {deviceClassName: neuron.aws.com, count: COUNT}
      constraints:
      - {requests: [r], matchAttribute: resource.aws.com/devicegroupG_id}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: d}
spec:
  replicas: REPLICAS
  template:
    spec:
      resourceClaims: [{name: n, resourceClaimTemplateName: c}]
"""


def connected(count: int, group: int, replicas: int) -> str:
    return (
        CONNECTED.replace("COUNT", str(count))
        .replace("G_id", f"{group}_id")
        .replace("REPLICAS", str(replicas))
    )


def test_match_attribute_keeps_each_claim_in_one_group() -> None:
    out = run(connected(3, 4, 4), "trn2.48xlarge=1")
    assert out.ok
    rows = [{int(r.device[12:]) // 4 for r in p.allocations[0].results} for p in out.pods]
    assert all(len(r) == 1 for r in rows)
    assert sorted(next(iter(r)) for r in rows) == [0, 1, 2, 3]


def test_match_attribute_refuses_a_claim_larger_than_its_group() -> None:
    out = run(connected(5, 4, 1), "trn2.48xlarge=1")
    assert not out.ok
    assert "devicegroup4_id" in out.pods[0].reason


def test_group_of_8_is_two_rows() -> None:
    out = run(connected(8, 8, 2), "trn2.48xlarge=1")
    assert out.ok
    got = [sorted(int(r.device[12:]) for r in p.allocations[0].results) for p in out.pods]
    assert got == [list(range(8)), list(range(8, 16))]


def test_failed_device_is_tainted_and_avoided() -> None:
    fl = F.build(
        {"instances": [{"type": "trn2.48xlarge"}], "failedDevices": [{"node": 0, "device": 1}]}
    )
    sched = schedule.Scheduler(fl)
    out = sched.run(manifests.load_text(connected(4, 4, 1), "t.yaml"))
    devs = sorted(int(r.device[12:]) for r in out.pods[0].allocations[0].results)
    assert devs == [4, 5, 6, 7]


def test_toleration_lets_a_claim_use_a_tainted_device() -> None:
    text = connected(4, 4, 1).replace(
        "exactly: {deviceClassName: neuron.aws.com, count: 4}",
        "exactly: {deviceClassName: neuron.aws.com, count: 4, tolerations: "
        "[{key: neuron.aws.com/device-failed, operator: Exists}]}",
    )
    fl = F.build(
        {"instances": [{"type": "trn2.48xlarge"}], "failedDevices": [{"node": 0, "device": 1}]}
    )
    out = schedule.Scheduler(fl).run(manifests.load_text(text, "t.yaml"))
    assert sorted(int(r.device[12:]) for r in out.pods[0].allocations[0].results) == [0, 1, 2, 3]


NODE_AND_DEVICE = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: whole}
spec:
  devices:
    requests:
    - name: n
      exactly:
        deviceClassName: neuron.aws.com
        selectors:
        - cel: {expression: "device.attributes['neuron.aws.com'].resourceType == 'neuron_node'"}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: one}
spec:
  devices:
    requests:
    - name: d
      exactly: {deviceClassName: neuron.aws.com}
"""


def test_node_device_and_its_devices_exclude_each_other() -> None:
    """Shared counters: a node taken whole leaves none of its devices, and the other way."""
    out = run(NODE_AND_DEVICE, "trn2-ultraserver=1")
    assert out.ok
    whole, one = out.pods
    assert whole.node != one.node  # the single device went to another node


def test_all_mode_takes_every_matching_device_of_a_node() -> None:
    text = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: all}
spec:
  devices:
    requests:
    - name: r
      exactly:
        deviceClassName: neuron.aws.com
        allocationMode: All
        selectors: [{cel: {expression: "device.attributes['neuron.aws.com'].topology_x == 2"}}]
"""
    out = run(text, "trn2.48xlarge=1")
    got = sorted(int(r.device[12:]) for r in out.pods[0].allocations[0].results)
    assert got == [8, 9, 10, 11]


LNC = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: lnc}
spec:
  devices:
    requests:
    - {name: r, exactly: {deviceClassName: neuron.aws.com, count: 1}}
    config:
    - requests: [r]
      opaque:
        driver: neuron.aws.com
        parameters: {apiVersion: neuron.aws.com/v1, kind: KIND, FIELD: VALUE}
"""


def config(kind: str, field: str, value: int) -> str:
    return LNC.replace("KIND", kind).replace("FIELD", field).replace("VALUE", str(value))


def test_lnc_is_checked_against_the_chip() -> None:
    assert run(config("NeuronConfig", "logicalNeuronCore", 2), "trn2.48xlarge=1").ok
    out = run(config("NeuronConfig", "logicalNeuronCore", 1), "trn1.32xlarge=1")
    assert not out.ok and "logicalNeuronCore=1 is not valid on trn1.32xlarge" in out.pods[0].reason


def test_lnc_value_no_hardware_accepts_is_a_usage_error() -> None:
    with pytest.raises(ManifestError, match="logicalNeuronCore=4 is not supported"):
        run(config("NeuronConfig", "logicalNeuronCore", 4), "trn2.48xlarge=1")


def test_ultraserver_mode_needs_an_ultraserver_node() -> None:
    out = run(config("UltraServerConfig", "ultraserverMode", 2), "trn2.48xlarge=1")
    assert not out.ok and "needs an UltraServer node" in out.pods[0].reason
    with pytest.raises(ManifestError, match="ultraserverMode=3"):
        run(config("UltraServerConfig", "ultraserverMode", 3), "trn2-ultraserver=1")


def test_unknown_device_class_is_refused() -> None:
    text = connected(4, 4, 1).replace("deviceClassName: neuron.aws.com", "deviceClassName: gpu.x")
    with pytest.raises(AllocationError, match=r"unknown DeviceClass 'gpu\.x'"):
        run(text, "trn2.48xlarge=1")


@pytest.mark.parametrize(
    ("count", "words"),
    [(0, "must be >= 1"), (33, "exceeds the 32 devices"), (20, "largest node has 16")],
)
def test_impossible_counts_are_refused(count: int, words: str) -> None:
    lines = connected(count, 4, 1).splitlines(keepends=True)
    text = "".join(ln for ln in lines if "constraints" not in ln and "matchAttribute" not in ln)
    with pytest.raises(ManifestError, match=words):
        run(text, "trn2.48xlarge=1")


def test_bad_yaml_names_the_line() -> None:
    with pytest.raises(ManifestError, match=r"not valid YAML.*line 4, column 1"):
        manifests.load_text("a: 1\nb:\n  - [x\n", "bad.yaml")


def test_lowercase_all_is_refused_as_the_api_server_does() -> None:
    text = connected(4, 4, 1).replace("count: 4}", "allocationMode: all}")
    with pytest.raises(ManifestError, match="case-sensitive"):
        run(text, "trn2.48xlarge=1")


def test_constraint_naming_a_missing_request_is_refused() -> None:
    text = connected(4, 4, 1).replace("{requests: [r],", "{requests: [zz],")
    with pytest.raises(ManifestError, match="names request 'zz'"):
        run(text, "trn2.48xlarge=1")
