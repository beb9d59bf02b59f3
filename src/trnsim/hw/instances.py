"""EC2 Neuron instance types as a Kubernetes node sees them: devices, their grid, EFA, the
UltraServer an instance belongs to and the node groupings (``ultraserverMode``) it supports,
and the Logical NeuronCore (LNC) values its chips accept.

This is what the Neuron DRA driver publishes in ResourceSlices (``trnsim.dra`` reads it); the
figures come from the systems in :mod:`trnsim.hw.catalog` (chips per instance, per UltraServer,
the 4x4 torus) and never repeat them. The EC2 type names of Trn3 UltraServer nodes are not
published: the UltraServer operator page calls them ``Trn3pds`` without a size, so the names
here are extrapolations (marked ``extrapolated``), as are the Trn3 devicegroup layouts.
"""

from __future__ import annotations

from dataclasses import dataclass

from trnsim.hw import sources as S
from trnsim.hw.catalog import CHIPS, SYSTEMS
from trnsim.hw.registry import Registry
from trnsim.hw.specs import ChipSpec, SystemSpec

# Logical NeuronCore sizes per chip family: 'LNC can only be set to 1 or 2 ... LNC applies only
# to Trn2 and Trn3 instances' (logical-neuroncore-config.rst). Trn1 accepts no LNC setting.
LNC_VALUES: dict[str, tuple[int, ...]] = {"trn1": (), "trn2": (1, 2), "trn3": (1, 2)}
LNC_SOURCE = S.NEURON_LNC + " ('LNC can only be set to 1 or 2', Trn2 and Trn3 only)"

# UltraServer node groupings ('ultraserverMode', NEURON_ULTRASERVER_NODE_CONFIG): 1, 2 or 4
# nodes (ultraserver.rst; the init script refuses anything else; the operator's topologySize).
ULTRASERVER_MODES: tuple[int, ...] = (1, 2, 4)
ULTRASERVER_MODES_SOURCE = (
    S.NEURON_US_K8S + " ('Possible values are 4, 2, and 1'); " + S.NEURON_US_OPERATOR
)


@dataclass(frozen=True, slots=True)
class InstanceType:
    """One EC2 instance type as a Kubernetes node: the DRA driver's ``instanceType``.

    ``system`` is the catalog system the fabric model times a job on when it stays inside one
    instance; ``ultraserver`` the catalog UltraServer the instance is a node of (None for a
    standalone instance). ``grid`` is the 2D torus of the devices (rows, columns) that
    ``topology_x`` / ``topology_y`` index, None where the devices are switched or single.
    """

    name: str
    chip: ChipSpec
    devices: int
    efa: bool
    grid: tuple[int, int] | None = None
    system: str | None = None
    ultraserver: str | None = None
    extrapolated: bool = False
    sources: tuple[tuple[str, str], ...] = ()
    notes: tuple[tuple[str, str], ...] = ()

    @property
    def family(self) -> str:
        """The chip family (``trn1``, ``trn2``, ``trn3``): what LNC values depend on."""
        return self.chip.name.split("-")[0]

    @property
    def lnc_values(self) -> tuple[int, ...]:
        """The ``logicalNeuronCore`` values the chips accept (empty: LNC not configurable)."""
        return LNC_VALUES.get(self.family, ())

    @property
    def ultraserver_spec(self) -> SystemSpec | None:
        return SYSTEMS.get(self.ultraserver) if self.ultraserver else None

    @property
    def nodes_per_ultraserver(self) -> int:
        """Derived: UltraServer chips / chips per instance (1 for a standalone instance)."""
        us = self.ultraserver_spec
        return us.chips // self.devices if us else 1

    @property
    def ultraserver_modes(self) -> tuple[int, ...]:
        """The node groupings an UltraServer of this type offers (() for standalone)."""
        n = self.nodes_per_ultraserver
        return tuple(m for m in ULTRASERVER_MODES if m <= n) if self.ultraserver else ()


INSTANCE_TYPES: Registry[InstanceType] = Registry("instance type")


def _from_system(system_name: str) -> SystemSpec:
    return SYSTEMS.get(system_name)


def _register(item: InstanceType, aliases: tuple[str, ...] = ()) -> InstanceType:
    if item.grid is not None and item.grid[0] * item.grid[1] != item.devices:
        raise ValueError(f"{item.name}: grid {item.grid} does not hold {item.devices} devices")
    return INSTANCE_TYPES.register(item.name, item, aliases)


def _torus_dims(system: SystemSpec) -> tuple[int, int]:
    dims = system.levels[0].dims
    if dims is None or len(dims) != 2:
        raise ValueError(f"{system.name}: first level is not a 2D torus")
    return (int(dims[0]), int(dims[1]))


_TRN1 = _from_system("trn1.32xlarge")
_TRN2 = _from_system("trn2.48xlarge")
_TRN2U = _from_system("trn2-ultraserver")
_GEN1 = _from_system("trn3-gen1-ultraserver")
_GEN2 = _from_system("trn3-gen2-ultraserver")

_register(
    InstanceType(
        name="trn1.2xlarge",
        chip=CHIPS.get("trn1"),
        devices=1,
        efa=False,
        sources=(("devices", S.AWS_TRN1_2XL), ("efa", S.AWS_TRN1_2XL)),
    )
)
_register(
    InstanceType(
        name="trn1.32xlarge",
        chip=_TRN1.chip,
        devices=_TRN1.chips,
        efa=True,
        grid=_torus_dims(_TRN1),
        system=_TRN1.name,
        sources=(("devices", S.NEURON_TRN1_ARCH), ("grid", S.NEURON_TRN1_ARCH)),
    )
)
_register(
    InstanceType(
        name="trn1n.32xlarge",
        chip=_TRN1.chip,
        devices=_TRN1.chips,
        efa=True,
        grid=_torus_dims(_TRN1),
        system="trn1n.32xlarge",
        sources=(("devices", S.NEURON_TRN1_ARCH), ("efa", S.AWS_TRN1_PAGE)),
    )
)
_register(
    InstanceType(
        name="trn2.48xlarge",
        chip=_TRN2.chip,
        devices=_TRN2.chips,
        efa=True,
        grid=_torus_dims(_TRN2),
        system=_TRN2.name,
        sources=(("devices", S.NEURON_TRN2_ARCH), ("grid", S.NEURON_DRA + " (4x4 diagram)")),
    )
)
_register(
    InstanceType(
        name="trn2u.48xlarge",
        chip=_TRN2U.chip,
        devices=_TRN2U.chips_per_server or 16,
        efa=True,
        grid=_torus_dims(_TRN2U),
        system=_TRN2.name,
        ultraserver=_TRN2U.name,
        sources=(
            ("name", S.NEURON_DRA + " ('A trn2u.48xlarge Trn2 UltraServer has 4 Trn2 nodes')"),
            ("devices", S.NEURON_TRN2_ARCH),
        ),
    )
)
_register(
    InstanceType(
        name="trn3pds.48xlarge",
        chip=_GEN1.chip,
        devices=_GEN1.chips_per_server or 16,
        efa=True,
        system=None,
        ultraserver=_GEN1.name,
        extrapolated=True,
        sources=(("devices", S.NEURON_TRN3_ARCH + " (Gen1: four servers x 16 devices)"),),
        notes=(
            (
                "name",
                "extrapolated: the operator page names 'Trn3pds' UltraServer instances without "
                "a size; .48xlarge by analogy with trn2u.48xlarge (16 chips per node)",
            ),
        ),
    )
)
_register(
    InstanceType(
        name="trn3pds.12xlarge",
        chip=_GEN2.chip,
        devices=_GEN2.chips_per_server or 4,
        efa=True,
        system=None,
        ultraserver=_GEN2.name,
        extrapolated=True,
        sources=(("devices", S.NEURON_TRN3_ARCH + " (Gen2: 36 servers x 4 devices)"),),
        notes=(
            (
                "name",
                "extrapolated: no published EC2 type for a Gen2 server; .12xlarge scales "
                "trn2.48xlarge's 16 chips to 4",
            ),
        ),
    )
)


def instance_type(name: str) -> InstanceType:
    """Look up an instance type by its EC2 name (error lists the valid names)."""
    return INSTANCE_TYPES.get(name)


# The UltraServers a fleet can hold, by the names a fleet file uses, and the node type of each.
ULTRASERVER_NODE_TYPE: dict[str, str] = {
    _TRN2U.name: "trn2u.48xlarge",
    _GEN1.name: "trn3pds.48xlarge",
    _GEN2.name: "trn3pds.12xlarge",
}
