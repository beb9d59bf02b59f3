"""CEL selectors evaluated by cel-python as Kubernetes evaluates them, with positions in every
error, and the memo equal to evaluating every device."""

from __future__ import annotations

import pytest

pytest.importorskip("celpy")

from trnsim.dra import driver
from trnsim.dra import fleet as F
from trnsim.dra.cel import CelDevice, CelError, Selector, selector
from trnsim.dra.k8s import Device

FL = F.load("trn2.48xlarge=1,trn2-ultraserver=1")


def dev(node: int = 0, device: int = 0) -> CelDevice:
    n = FL.nodes[node]
    return CelDevice(Device("d", driver.device_attributes(FL, n, device)), driver.DRIVER)


N = "device.attributes['neuron.aws.com']"


@pytest.mark.parametrize(
    ("expr", "want"),
    [
        (f"{N}.instanceType == 'trn2.48xlarge'", True),
        (f"{N}.deviceId < 4", True),
        (f"{N}.draDriverVersion.isGreaterThan(semver('0.9.0'))", True),
        (f"{N}.draDriverVersion == semver('1.0.0')", True),
        (f"{N}.draDriverVersion.major() == 1", True),
        (f"{N}.instanceType.startsWith('trn2') && {N}.topology_x == 0", True),
        ("device.attributes['resource.aws.com'].devicegroup1_id.startsWith('0000:')", True),
        ('device.driver == "neuron.aws.com"', True),
        (f"has({N}.capacityBlockId)", False),
        ("'other.domain' in device.attributes", False),
        ("device.attributes['other.domain'].size() == 0 || true", True),
    ],
)
def test_values_of_each_type(expr: str, want: bool) -> None:
    assert Selector(expr).matches(dev()) is want


def test_missing_attribute_names_the_key_and_position() -> None:
    with pytest.raises(CelError) as err:
        selector(f"{N}.nope == 'x'").matches(dev())
    assert "no such key: 'nope'" in str(err.value)
    assert (err.value.line, err.value.column) == (1, len(N) + 2)


def test_type_mismatch_reports_types_and_position() -> None:
    expr = f"{N}.instanceType == 'a' ||\n  {N}.deviceId < 'x'"
    with pytest.raises(CelError, match="type mismatch: no operator for int and string") as err:
        Selector(expr).matches(dev())
    assert err.value.line == 2


def test_syntax_error_has_position() -> None:
    with pytest.raises(CelError, match="syntax error: unexpected end of expression") as err:
        selector(f"{N}.instanceType ==")
    assert (err.value.line, err.value.column) == (1, len(N) + 15)  # at the "=="


def test_non_bool_result_is_an_error() -> None:
    with pytest.raises(CelError, match="must evaluate to bool"):
        Selector(f"{N}.deviceId").matches(dev())


def test_memo_equals_evaluating_every_device() -> None:
    exprs = [
        f"{N}.deviceId % 3 == 1",
        f"{N}.topology4_id == 2 || {N}.resourceType == 'neuron_node'",
        f"{N}.instanceType == 'trn2u.48xlarge'",
    ]
    for expr in exprs:
        memo = Selector(expr)
        for n in range(len(FL.nodes)):
            for d in range(16):
                if "topology4_id" in expr and FL.nodes[n].ultraserver is not None:
                    continue
                fresh = Selector(expr)
                assert memo.matches(dev(n, d)) == fresh.matches(dev(n, d))
        assert memo.evaluations < 5 * len(FL.nodes) * 16
    same = Selector(f"{N}.instanceType == 'trn2.48xlarge'")
    for d in range(16):
        same.matches(dev(0, d))
    assert same.evaluations == 1
