"""The Neuron DRA driver as trnsim models it: the ResourceSlices it publishes for each node, the
node labels UltraServer nodes carry, its DeviceClass, and the checks of its opaque
configuration (NeuronConfig, UltraServerConfig) against the hardware.

Attributes are exactly those of the 'Neuron DRA Driver Attributes Reference' in
aws-neuron-sdk ``deploy/eks/dra.rst`` (commit 81ce03a), populated where it says:

- common, every device: ``deviceId`` (int), ``instanceType``, ``neuronDriverVersion``
  (string), ``draDriverVersion`` (version), ``resourceType`` (``neuron_device`` /
  ``neuron_node``), ``networkNodeLayer1``-``3`` (string);
- non-UltraServer trn instances with more than one device: ``topology_x`` (row),
  ``topology_y`` (column), ``topology4_id`` (the row), and with 8 or more devices
  ``topology8_id`` (the pair of rows), on the instance's 4x4 torus;
- UltraServer instances: ``capacityBlockId``;
- EFA-enabled instances: ``resource.aws.com/devicegroup1_id`` (the device's EFA PCI BDF) and
  ``devicegroup4_id`` / ``devicegroup8_id`` / ``devicegroup16_id`` (a hash shared by the
  devices of one connected group: a row, two rows, the whole 4x4 -- the docs' diagram).

Choices the docs leave open, stated: an UltraServer node publishes one ``neuron_node`` device
(named ``neuronnode``, without ``deviceId``) beside its ``neuron_device`` devices; so that a
node and its devices are never allocated twice, each device consumes a counter of the node's
shared counter set and the node device consumes all of them (Kubernetes' partitionable
devices). The BDFs and hashes are synthetic but deterministic. On Trn3 nodes (switched, no
torus) groups of 4/8/16 are consecutive device ids -- an extrapolation of Trn2's rows -- and a
group is published only where the node has that many devices (a Gen2 server has 4). A failed
device is tainted ``neuron.aws.com/device-failed=true:NoExecute``, and so is its node device.
"""

from __future__ import annotations

import functools
from typing import Any

from trnsim.dra.fleet import Fleet, Node, _alnum, _hex
from trnsim.dra.k8s import (
    Attribute,
    ClaimSpec,
    Device,
    DeviceClass,
    ManifestError,
    OpaqueConfig,
    ResourceSlice,
    Taint,
    attr_int,
    attr_str,
    attr_version,
)
from trnsim.hw.instances import ULTRASERVER_MODES, InstanceType

DRIVER = "neuron.aws.com"
GROUP_DOMAIN = "resource.aws.com"
GROUP_SIZES = (1, 4, 8, 16)
NODE_DEVICE = "neuronnode"
COUNTER_SET = "neuron-devices"
FAILED_TAINT = Taint(key=f"{DRIVER}/device-failed", value="true", effect="NoExecute")

# deploy/files/manifests/deviceclass.yaml (v1beta1 there; the same selector in v1)
DEVICE_CLASS = DeviceClass(
    name=DRIVER,
    selectors=('device.driver == "neuron.aws.com"',),
    source="aws-neuron-sdk deploy/files/manifests/deviceclass.yaml",
)

CONFIG_API = "neuron.aws.com/v1"
CONFIG_KINDS = {"NeuronConfig": ("logicalNeuronCore",), "UltraServerConfig": ("ultraserverMode",)}

# Node labels of UltraServer nodes (deploy/eks/ultraserver.rst).
LABEL_MODE = "neuron.amazonaws.com/ultraserver-mode"
LABEL_SERVER = "neuron.amazonaws.com/ultraserver-server-id-{n}"
LABEL_NODE = "neuron.amazonaws.com/ultraserver-node-id-{n}"


def device_name(i: int) -> str:
    return f"neurondevice{i}"


def _bdf(i: int) -> str:
    return f"0000:{0x10 + i:02x}:00.0"


def group_index(it: InstanceType, device: int, size: int) -> int:
    """Which group of ``size`` connected devices ``device`` belongs to: rows of the 4x4 torus
    (size 4), pairs of rows (8), the whole instance (16); consecutive ids on switched nodes."""
    if it.grid is not None and size > 1:
        cols = it.grid[1]
        rows_per_group = max(1, size // cols)
        return (device // cols) // rows_per_group
    return device // size


@functools.cache
def _node_attributes(node: Node, fleet_us: tuple[str, ...]) -> tuple[tuple[str, Attribute], ...]:
    it = node.itype
    common = [
        ("instanceType", attr_str(it.name)),
        ("neuronDriverVersion", attr_str(node.neuron_driver)),
        ("draDriverVersion", attr_version(node.dra_driver)),
    ]
    common += [(f"networkNodeLayer{k + 1}", attr_str(v)) for k, v in enumerate(node.layers)]
    if node.ultraserver is not None:
        common.append(("capacityBlockId", attr_str(fleet_us[node.ultraserver])))
    return tuple(common)


def device_attributes(fleet: Fleet, node: Node, i: int) -> tuple[tuple[str, Attribute], ...]:
    """The attributes of ``neurondevice{i}`` on ``node``, as the driver publishes them."""
    it = node.itype
    cbs = tuple(u.capacity_block_id for u in fleet.ultraservers)
    attrs: list[tuple[str, Attribute]] = [("deviceId", attr_int(i))]
    attrs += _node_attributes(node, cbs)
    attrs.append(("resourceType", attr_str("neuron_device")))
    if node.ultraserver is None and it.grid is not None and it.devices > 1:
        cols = it.grid[1]
        row, col = divmod(i, cols)
        attrs += [
            ("topology_x", attr_int(row)),
            ("topology_y", attr_int(col)),
            ("topology4_id", attr_int(row)),
        ]
        if it.devices >= 8:
            attrs.append(("topology8_id", attr_int(row // 2)))
    if it.efa:
        attrs.append((f"{GROUP_DOMAIN}/devicegroup1_id", attr_str(_bdf(i))))
        for size in GROUP_SIZES[1:]:
            if it.devices >= size:
                g = group_index(it, i, size)
                attrs.append(
                    (f"{GROUP_DOMAIN}/devicegroup{size}_id", attr_str(_hex(node.name, size, g)))
                )
    return tuple(attrs)


def node_device_attributes(fleet: Fleet, node: Node) -> tuple[tuple[str, Attribute], ...]:
    cbs = tuple(u.capacity_block_id for u in fleet.ultraservers)
    return (*_node_attributes(node, cbs), ("resourceType", attr_str("neuron_node")))


def node_slice(fleet: Fleet, node: Node, allocated_taints: bool = True) -> ResourceSlice:
    """The ResourceSlice the driver publishes for ``node`` (its pool is the node's name)."""
    it = node.itype
    failed = {d for n, d in fleet.failed if n == node.index} if allocated_taints else set()
    us_node = node.ultraserver is not None
    devices = []
    for i in range(it.devices):
        consumes = ((COUNTER_SET, ((device_name(i), 1),)),) if us_node else ()
        taints = (FAILED_TAINT,) if i in failed else ()
        devices.append(Device(device_name(i), device_attributes(fleet, node, i), consumes, taints))
    counters: tuple = ()
    if us_node:
        all_counters = tuple((device_name(i), 1) for i in range(it.devices))
        counters = ((COUNTER_SET, all_counters),)
        taints = (FAILED_TAINT,) if failed else ()
        devices.append(
            Device(
                NODE_DEVICE,
                node_device_attributes(fleet, node),
                ((COUNTER_SET, all_counters),),
                taints,
            )
        )
    return ResourceSlice(
        name=f"{node.name}-{DRIVER}-{_alnum('slice', node.name, n=5)}",
        driver=DRIVER,
        pool=node.name,
        node_name=node.name,
        devices=tuple(devices),
        shared_counters=counters,
    )


def slices(fleet: Fleet) -> list[ResourceSlice]:
    return [node_slice(fleet, n) for n in fleet.nodes]


def node_labels(fleet: Fleet, node: Node) -> dict[str, str]:
    """Labels of the Kubernetes node: instance type, EC2 network layers, and on UltraServer
    nodes the mode and the 2- and 4-node server/node ids (ultraserver.rst's example)."""
    labels = {
        "kubernetes.io/hostname": node.name,
        "node.kubernetes.io/instance-type": node.itype.name,
    }
    for k, v in enumerate(node.layers):
        labels[f"topology.k8s.aws/network-node-layer-{k + 1}"] = v
    if node.ultraserver is not None:
        us = fleet.ultraservers[node.ultraserver]
        modes = node.itype.ultraserver_modes
        labels[LABEL_MODE] = "_".join(map(str, modes))
        for n in modes:
            if n == 1:
                continue
            grp = node.node_in_ultraserver // n
            whole = n == node.itype.nodes_per_ultraserver
            sid = us.server_id if whole else _alnum(f"us{n}", us.index, grp)
            labels[LABEL_SERVER.format(n=n)] = sid
            labels[LABEL_NODE.format(n=n)] = str(node.node_in_ultraserver % n)
    return labels


# ---------------------------------------------------------------------------------------------
# Opaque configuration
# ---------------------------------------------------------------------------------------------


def check_config_static(spec: ClaimSpec, where: str) -> None:
    """The driver's own configs are well-formed (kind, apiVersion, parameters, value ranges
    any Neuron hardware accepts); other drivers' configs are not ours to read."""
    for i, cfg in enumerate(spec.config):
        if cfg.driver != DRIVER:
            continue
        p = cfg.params
        path = f"{where}: config[{i}].opaque.parameters"
        kind = p.get("kind")
        if p.get("apiVersion") != CONFIG_API:
            raise ManifestError(
                f"{path}.apiVersion must be {CONFIG_API}, got {p.get('apiVersion')!r}"
            )
        if kind not in CONFIG_KINDS:
            raise ManifestError(
                f"{path}.kind must be one of {', '.join(CONFIG_KINDS)}, got {kind!r}"
            )
        fields = CONFIG_KINDS[kind]
        extra = [k for k in p if k not in ("apiVersion", "kind", *fields)]
        if extra:
            raise ManifestError(
                f"{path}: unknown {kind} parameter {extra[0]!r} (known: {', '.join(fields)})"
            )
        value = p.get(fields[0])
        if isinstance(value, bool) or not isinstance(value, int):
            raise ManifestError(f"{path}.{fields[0]} must be an integer, got {value!r}")
        valid = (1, 2) if kind == "NeuronConfig" else ULTRASERVER_MODES
        if value not in valid:
            raise ManifestError(
                f"{path}.{fields[0]}={value} is not supported on any Neuron hardware "
                f"(valid: {', '.join(map(str, valid))})"
            )


def check_config_hardware(configs: tuple[OpaqueConfig, ...], node: Node) -> str | None:
    """Why the driver would refuse these configs on ``node`` when preparing the devices
    (NodePrepareResources), or None: LNC per chip family, ultraserverMode per UltraServer."""
    it = node.itype
    for cfg in configs:
        if cfg.driver != DRIVER:
            continue
        p = cfg.params
        if p.get("kind") == "NeuronConfig":
            lnc = p.get("logicalNeuronCore")
            if lnc not in it.lnc_values:
                valid = ", ".join(map(str, it.lnc_values)) or "none (LNC applies to Trn2, Trn3)"
                return (
                    f"logicalNeuronCore={lnc} is not valid on {it.name} "
                    f"({it.family}; valid: {valid})"
                )
        elif p.get("kind") == "UltraServerConfig":
            mode = p.get("ultraserverMode")
            if node.ultraserver is None:
                return f"ultraserverMode={mode} needs an UltraServer node; {it.name} is standalone"
            if mode not in it.ultraserver_modes:
                valid = ", ".join(map(str, it.ultraserver_modes))
                return f"ultraserverMode={mode} is not offered by {it.ultraserver} (valid: {valid})"
    return None


def slice_documents(fleet: Fleet) -> list[dict[str, Any]]:
    return [s.to_dict() for s in slices(fleet)]
