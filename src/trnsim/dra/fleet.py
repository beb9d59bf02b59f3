"""A fleet of Neuron instances and UltraServers as Kubernetes nodes.

A fleet file (YAML or JSON) names counts of standalone instances and of UltraServers, the
driver versions and how the EC2 network topology groups the nodes::

    name: demo
    neuronDriverVersion: "2.25.4.0"    # the docs' example version
    draDriverVersion: "1.0.0"
    network: {nodesPerLayer3: 16, layer3PerLayer2: 4, layer2PerLayer1: 16}
    instances:
      - {type: trn2.48xlarge, count: 4}
      - {type: trn1.32xlarge, count: 2, neuronDriverVersion: "2.24.1.0"}
    ultraservers:
      - {type: trn2-ultraserver, count: 2}     # 4 x trn2u.48xlarge each
      - {type: trn3-gen2-ultraserver, count: 1}
    failedDevices:                        # tainted NoExecute (a failed device)
      - {node: 0, device: 3}

or the shorthand ``trn2.48xlarge=4,trn2-ultraserver=2``. Node and UltraServer counts, devices
per node and nodes per UltraServer come from :mod:`trnsim.hw.instances` (and so from the
catalog). Everything generated (node names, capacity block ids, network node ids, group
hashes) is deterministic.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trnsim import inputs
from trnsim.errors import UsageError
from trnsim.hw.catalog import SYSTEMS
from trnsim.hw.instances import INSTANCE_TYPES, ULTRASERVER_NODE_TYPE, InstanceType

DEFAULT_NEURON_DRIVER = "2.25.4.0"  # dra.rst's example neuronDriverVersion
DEFAULT_DRA_DRIVER = "1.0.0"  # not published; any semantic version
DEFAULT_REGION = "us-west-2"
MAX_NODES = 200_000


class FleetError(UsageError):
    """A fleet description breaks a rule: names the field and the value."""


@dataclass(frozen=True, slots=True)
class Network:
    """How the EC2 instance topology groups nodes: nodes under one layer-3 network node, layer-3
    nodes under one layer-2, layer-2 under one layer-1 (layer 1 is farthest from the instance,
    EC2 'Instance topology'). An UltraServer's nodes share one layer-3 node."""

    nodes_per_layer3: int = 16
    layer3_per_layer2: int = 4
    layer2_per_layer1: int = 16


@dataclass(frozen=True, slots=True)
class Node:
    """One Kubernetes node: an EC2 instance (standalone or an UltraServer node)."""

    index: int
    name: str
    itype: InstanceType
    neuron_driver: str
    dra_driver: str
    layers: tuple[str, str, str]
    ultraserver: int | None = None  # index into Fleet.ultraservers
    node_in_ultraserver: int = 0

    @property
    def devices(self) -> int:
        return self.itype.devices


@dataclass(frozen=True, slots=True)
class UltraServer:
    index: int
    system: str  # catalog name (trn2-ultraserver, ...)
    capacity_block_id: str
    server_id: str  # the neuron.amazonaws.com/ultraserver-server-id-4 label value
    nodes: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Fleet:
    name: str
    nodes: tuple[Node, ...]
    ultraservers: tuple[UltraServer, ...]
    failed: tuple[tuple[int, int], ...] = ()  # (node index, device index)
    region: str = DEFAULT_REGION
    network: Network = field(default_factory=Network)

    @property
    def devices(self) -> int:
        return sum(n.devices for n in self.nodes)

    def node(self, key: int | str) -> Node:
        if isinstance(key, int):
            if not 0 <= key < len(self.nodes):
                raise FleetError(f"node index {key} out of range (fleet has {len(self.nodes)})")
            return self.nodes[key]
        for n in self.nodes:
            if n.name == key:
                return n
        raise FleetError(f"no node named {key!r} in fleet {self.name!r}")

    def summary(self) -> str:
        counts: dict[str, int] = {}
        for n in self.nodes:
            if n.ultraserver is None:
                counts[n.itype.name] = counts.get(n.itype.name, 0) + 1
        parts = [f"{c} x {t}" for t, c in counts.items()]
        us: dict[str, int] = {}
        for u in self.ultraservers:
            us[u.system] = us.get(u.system, 0) + 1
        parts += [f"{c} x {t}" for t, c in us.items()]
        return f"{', '.join(parts) or 'empty'}: {len(self.nodes)} nodes, {self.devices} devices"


def _hex(*parts: Any, n: int = 16) -> str:
    return hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:n]


def _alnum(*parts: Any, n: int = 16) -> str:
    """A lowercase alphanumeric id like the UltraServer labels' ('u5wy80u0o2saugxy')."""
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    v = int(_hex(*parts, n=32), 16)
    out = []
    for _ in range(n):
        v, r = divmod(v, 36)
        out.append(digits[r])
    return "".join(out)


def node_name(index: int, region: str) -> str:
    """``ip-10-A-B-C.REGION.compute.internal`` (EKS node names), unique per index."""
    a, rest = divmod(index + 1, 65536)
    b, c = divmod(rest, 256)
    return f"ip-10-{a}-{b}-{c}.{region}.compute.internal"


def _positive(value: Any, what: str, lo: int = 1, hi: int = MAX_NODES) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise FleetError(f"{what} must be an integer in [{lo}, {hi}], got {value!r}")
    return value


def _version_str(value: Any, what: str) -> str:
    if not isinstance(value, str | int | float) or not str(value).strip():
        raise FleetError(f"{what} must be a version string, got {value!r}")
    return str(value)


def resolve_group_type(name: str) -> tuple[str, str]:
    """``("instance", ec2 type)`` or ``("ultraserver", catalog system name)`` for a name."""
    if not isinstance(name, str):
        raise FleetError(f"type must be a string, got {name!r}")
    if name in SYSTEMS:
        sys_name = SYSTEMS.get(name).name
        if sys_name in ULTRASERVER_NODE_TYPE:
            return "ultraserver", sys_name
    if name in INSTANCE_TYPES:
        it = INSTANCE_TYPES.get(name)
        if it.ultraserver:
            raise FleetError(
                f"{it.name} is a node of {it.ultraserver}; count UltraServers "
                f"({it.ultraserver}=N), not their nodes"
            )
        return "instance", it.name
    valid = [n for n, it in INSTANCE_TYPES if not it.ultraserver] + list(ULTRASERVER_NODE_TYPE)
    raise FleetError(f"unknown instance or UltraServer type {name!r}; valid: {', '.join(valid)}")


def build(spec: dict[str, Any], where: str = "fleet") -> Fleet:
    """A fleet from its description (a dict, as a fleet file loads)."""
    if not isinstance(spec, dict):
        raise FleetError(f"{where}: a fleet must be a mapping, got {type(spec).__name__}")
    known = (
        "name",
        "region",
        "neuronDriverVersion",
        "draDriverVersion",
        "network",
        "instances",
        "ultraservers",
        "failedDevices",
    )
    for k in spec:
        if k not in known:
            raise FleetError(f"{where}: unknown field {k!r} (known: {', '.join(known)})")
    region = str(spec.get("region", DEFAULT_REGION))
    nd = _version_str(spec.get("neuronDriverVersion", DEFAULT_NEURON_DRIVER), "neuronDriverVersion")
    dd = _version_str(spec.get("draDriverVersion", DEFAULT_DRA_DRIVER), "draDriverVersion")
    from trnsim.dra.k8s import SEMVER

    if not SEMVER.match(dd):
        raise FleetError(f"{where}: draDriverVersion {dd!r} must be a semantic version (x.y.z)")
    net_raw = spec.get("network") or {}
    if not isinstance(net_raw, dict):
        raise FleetError(f"{where}: network must be a mapping, got {net_raw!r}")
    net_keys = {"nodesPerLayer3", "layer3PerLayer2", "layer2PerLayer1"}
    for k in net_raw:
        if k not in net_keys:
            raise FleetError(f"{where}: network: unknown field {k!r} (known: {sorted(net_keys)})")
    net = Network(
        _positive(net_raw.get("nodesPerLayer3", 16), "network.nodesPerLayer3", 1, 10_000),
        _positive(net_raw.get("layer3PerLayer2", 4), "network.layer3PerLayer2", 1, 10_000),
        _positive(net_raw.get("layer2PerLayer1", 16), "network.layer2PerLayer1", 1, 10_000),
    )
    nodes: list[Node] = []
    ultraservers: list[UltraServer] = []
    # layer-3 slot counter: UltraServers take a layer-3 node of their own (their nodes share it)
    l3 = {"slot": 0, "used": 0}

    def layer_ids() -> tuple[str, str, str]:
        i3 = l3["slot"]
        i2 = i3 // net.layer3_per_layer2
        i1 = i2 // net.layer2_per_layer1
        return (f"nn-{_hex('l1', i1, n=17)}", f"nn-{_hex('l2', i2, n=17)}", f"nn-{_hex(i3, n=17)}")

    def next_slot(need: int) -> None:
        if l3["used"] and l3["used"] + need > net.nodes_per_layer3:
            l3["slot"] += 1
            l3["used"] = 0

    def group_list(key: str) -> list[dict[str, Any]]:
        raw = spec.get(key) or []
        if not isinstance(raw, list):
            raise FleetError(f"{where}: {key} must be a list, got {raw!r}")
        for i, g in enumerate(raw):
            if not isinstance(g, dict):
                raise FleetError(f"{where}: {key}[{i}] must be a mapping, got {g!r}")
            for k in g:
                if k not in ("type", "count", "neuronDriverVersion"):
                    raise FleetError(
                        f"{where}: {key}[{i}]: unknown field {k!r} "
                        "(known: type, count, neuronDriverVersion)"
                    )
        return raw

    for i, g in enumerate(group_list("instances")):
        kind, tname = resolve_group_type(g.get("type"))
        if kind != "instance":
            raise FleetError(
                f"{where}: instances[{i}]: {tname} is an UltraServer; list it under ultraservers"
            )
        count = _positive(g.get("count", 1), f"{where}: instances[{i}].count")
        drv = _version_str(g.get("neuronDriverVersion", nd), "neuronDriverVersion")
        it = INSTANCE_TYPES.get(tname)
        for _ in range(count):
            next_slot(1)
            idx = len(nodes)
            nodes.append(Node(idx, node_name(idx, region), it, drv, dd, layer_ids()))
            l3["used"] += 1
            if len(nodes) > MAX_NODES:
                raise FleetError(f"{where}: more than {MAX_NODES} nodes")
    for i, g in enumerate(group_list("ultraservers")):
        kind, sname = resolve_group_type(g.get("type"))
        if kind != "ultraserver":
            raise FleetError(
                f"{where}: ultraservers[{i}]: {sname} is not an UltraServer; list "
                "it under instances"
            )
        count = _positive(g.get("count", 1), f"{where}: ultraservers[{i}].count")
        drv = _version_str(g.get("neuronDriverVersion", nd), "neuronDriverVersion")
        it = INSTANCE_TYPES.get(ULTRASERVER_NODE_TYPE[sname])
        per = it.nodes_per_ultraserver
        for _ in range(count):
            l3["slot"] += 1 if l3["used"] else 0
            l3["used"] = 0
            u = len(ultraservers)
            members = []
            for k in range(per):
                idx = len(nodes)
                nodes.append(Node(idx, node_name(idx, region), it, drv, dd, layer_ids(), u, k))
                members.append(idx)
            if len(nodes) > MAX_NODES:
                raise FleetError(f"{where}: more than {MAX_NODES} nodes")
            l3["used"] = per
            ultraservers.append(
                UltraServer(
                    u,
                    sname,
                    capacity_block_id=f"cr-{_hex('cb', u, n=17)}",
                    server_id=_alnum("us4", u),
                    nodes=tuple(members),
                )
            )
    if not nodes:
        raise FleetError(f"{where}: the fleet has no nodes (give instances or ultraservers)")
    failed = []
    raw_failed = spec.get("failedDevices") or []
    if not isinstance(raw_failed, list):
        raise FleetError(f"{where}: failedDevices must be a list, got {raw_failed!r}")
    fleet = Fleet(str(spec.get("name", where)), tuple(nodes), tuple(ultraservers), (), region, net)
    for i, f in enumerate(raw_failed):
        if not isinstance(f, dict) or set(f) - {"node", "device"} or "node" not in f:
            raise FleetError(f"{where}: failedDevices[{i}] must be {{node: N|NAME, device: D}}")
        node = fleet.node(f["node"])
        dev = f.get("device", 0)
        if isinstance(dev, bool) or not isinstance(dev, int) or not 0 <= dev < node.devices:
            raise FleetError(
                f"{where}: failedDevices[{i}].device must be in [0, {node.devices}) on "
                f"{node.itype.name}, got {dev!r}"
            )
        failed.append((node.index, dev))
    return Fleet(fleet.name, fleet.nodes, fleet.ultraservers, tuple(failed), region, net)


def parse_shorthand(text: str) -> dict[str, Any]:
    """``trn2.48xlarge=4,trn2-ultraserver=2`` -> a fleet description."""
    spec: dict[str, Any] = {"name": text, "instances": [], "ultraservers": []}
    for part in text.split(","):
        name, sep, count = part.strip().partition("=")
        if not sep:
            count = "1"
        try:
            n = int(count)
        except ValueError:
            raise FleetError(
                f"fleet {text!r}: count {count!r} of {name!r} is not an integer"
            ) from None
        kind, resolved = resolve_group_type(name.strip())
        spec["instances" if kind == "instance" else "ultraservers"].append(
            {"type": resolved, "count": n}
        )
    return spec


def load(path_or_spec: str) -> Fleet:
    """A fleet from a file (``.json``, or YAML with the ``dra`` extra) or the shorthand."""
    p = Path(path_or_spec)
    if p.is_file():
        try:
            text = inputs.read_text(p, "fleet file")  # a regular file, within limits
        except OSError as exc:
            raise FleetError(f"cannot read fleet file {str(p)!r}: {exc.strerror}") from None
        if p.suffix == ".json":
            try:
                data = json.loads(text)
            except json.JSONDecodeError as exc:
                raise FleetError(
                    f"{p}: not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
                ) from None
        else:
            from trnsim.dra.manifests import load_yaml_documents

            docs = load_yaml_documents(text, str(p))
            if len(docs) != 1:
                raise FleetError(f"{p}: a fleet file holds one YAML document, got {len(docs)}")
            data = docs[0]
        return build(data, str(p))
    if (
        "=" in path_or_spec
        or path_or_spec.replace(",", "").strip() in SYSTEMS
        or (path_or_spec in INSTANCE_TYPES)
    ):
        return build(parse_shorthand(path_or_spec), path_or_spec)
    raise FleetError(
        f"fleet {path_or_spec!r} is neither a file nor a shorthand like "
        "'trn2.48xlarge=4,trn2-ultraserver=2'"
    )
