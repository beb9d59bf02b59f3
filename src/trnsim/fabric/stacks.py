"""Collective software stacks: which library runs a system's collectives, and its constants.

Each system's collectives are timed as its vendor's library runs them; no stack's constants are
reused on another vendor's hardware:

- ``neuron``: the Neuron runtime (Trainium, Inferentia). Mesh / RDH / KangaRing with the runtime's
  switch points (calibration E) and the fitted ``Overheads`` of :mod:`trnsim.fabric.calibration`
  (52.5 us software overhead, 0.63 link efficiency, fitted to calibration D).
- ``nccl``: NVIDIA's NCCL (GPUs). Ring, tree and NVLS (NVSwitch in-switch reduction) with the LL,
  LL128 and Simple protocols; a collective takes the fastest (algorithm, protocol) pair, as NCCL's
  tuner does. Constants: ``NCCL`` below, fitted to calibration G by
  :mod:`trnsim.fabric.nccl_calibration` (the fit is re-run by the tests).
- ``tpu-ici``: TPU collectives on the ICI torus: bidirectional rings along each torus dimension in
  turn (reduce-scatter dimension by dimension, then all-gather back), then the DCN between slices.
  No TPU collective measurement is in the calibration data: no software overhead and full link
  rate, which is what Google's "all-reduce bandwidth per pod" figures state (v5e: 51.2 TB/s =
  256 chips x 200 GB/s per direction; v6e: 102.4 TB/s = 256 x 400 GB/s).

This module is data only (no imports from the rest of ``fabric``), so any fabric module can read it.
"""

from __future__ import annotations

from dataclasses import dataclass

from trnsim.errors import ConfigError, UnknownNameError
from trnsim.hw import SystemSpec


@dataclass(frozen=True, slots=True)
class Protocol:
    """One NCCL protocol as the model sees it.

    ``latency_s``: fixed time per collective call with this protocol (launch, synchronisation and
    the protocol's handshakes; fitted). ``efficiency``: the fraction of the algorithm's bandwidth
    the protocol reaches (fitted; below 1 for LL and LL128, which also run on fewer channels at
    the sizes they win). Simple is the reference (efficiency 1).
    """

    name: str
    latency_s: float
    efficiency: float

    def __post_init__(self) -> None:
        if self.latency_s < 0:
            raise ConfigError(f"protocol {self.name}: latency must be >= 0 s, got {self.latency_s}")
        if not 0 < self.efficiency <= 1:
            raise ConfigError(
                f"protocol {self.name}: efficiency must be in (0, 1], got {self.efficiency}"
            )


@dataclass(frozen=True, slots=True)
class NcclParams:
    """NCCL's constants: the protocols, and each algorithm's bandwidth efficiency.

    ``ring_efficiency``: achieved / line rate of ring collectives with Simple (NVIDIA/nccl-tests
    issue #212, maintainer: on 8x H100, ring and non-NVLS ops reach about 370 GB/s busbw of the
    450 GB/s per-direction NVLink line rate, '~20% protocol overhead': 370 / 450 = 0.82; stated,
    not fitted). ``nvls_efficiency``: NVLS all-reduce algorithm bandwidth (one buffer per direction
    per GPU through the switch) over the per-direction NVLink rate (fitted to calibration G).
    """

    protocols: tuple[Protocol, ...]
    ring_efficiency: float
    nvls_efficiency: float

    def protocol(self, name: str) -> Protocol:
        for p in self.protocols:
            if p.name == name:
                return p
        valid = ", ".join(p.name for p in self.protocols)
        raise UnknownNameError(f"unknown NCCL protocol {name!r}; valid: {valid}")


RING_EFFICIENCY = 370 / 450  # nccl-tests issue #212 (see NcclParams)
RING_EFFICIENCY_SOURCE = (
    "NVIDIA/nccl-tests issue #212 (maintainer: 8x H100 ring ~370 GB/s busbw of 450 GB/s line rate)"
)

#: Fitted by :func:`trnsim.fabric.nccl_calibration.fit` to calibration G (8x H100 SXM, NVLS
#: all-reduce, nccl-tests busbw, 1 KiB - 8 GiB); ``report()`` lists every row's error.
NCCL = NcclParams(
    protocols=(
        Protocol("LL", latency_s=1.130965e-05, efficiency=0.0159),
        Protocol("LL128", latency_s=2.556721e-05, efficiency=0.9788),
        Protocol("Simple", latency_s=7.851299e-05, efficiency=1.0),
    ),
    ring_efficiency=RING_EFFICIENCY,
    nvls_efficiency=0.603,
)


@dataclass(frozen=True, slots=True)
class Stack:
    """A collective library: its name, the algorithms it runs, where its constants come from."""

    name: str
    library: str
    algorithms: str
    constants: str


STACKS: dict[str, Stack] = {
    s.name: s
    for s in (
        Stack(
            "neuron",
            "Neuron runtime collectives (Trainium, Inferentia)",
            "Mesh < 1 MB, RDH 1-56 MB, KangaRing > 56 MB in a domain; hierarchical across levels",
            "software overhead and link efficiency fitted to calibration D (nccom-test, 2 ranks)",
        ),
        Stack(
            "nccl",
            "NVIDIA NCCL (GPUs)",
            "ring, tree, NVLS (NVSwitch) x LL / LL128 / Simple, the fastest pair; hierarchical "
            "(NVLink then the scale-out network) across levels",
            "protocol latencies and efficiencies and the NVLS efficiency fitted to calibration G "
            "(NCCL all-reduce, 8x H100); ring efficiency from nccl-tests issue #212",
        ),
        Stack(
            "tpu-ici",
            "TPU ICI collectives (XLA on the ICI torus)",
            "bidirectional rings along each torus dimension in turn, then the DCN (multislice)",
            "none fitted (no TPU collective rows): zero software overhead, full ICI line rate "
            "(Google's per-pod all-reduce bandwidth figures)",
        ),
        Stack(
            "hccl",
            "Intel Habana HCCL (Gaudi, collectives over the on-chip RoCE ports)",
            "the generic family with the Neuron selection rule (direct below 1 MB, RDH to "
            "56 MB, ring above; hierarchical across levels)",
            "none fitted (no Gaudi collective rows): zero software overhead, full port rate",
        ),
    )
}

VENDOR_STACK = {"AWS": "neuron", "NVIDIA": "nccl", "Google": "tpu-ici", "Intel": "hccl"}


def stack_for(system: SystemSpec) -> Stack:
    """The stack that runs ``system``'s collectives (by its chip's vendor)."""
    name = VENDOR_STACK.get(system.chip.vendor)
    if name is None:
        raise UnknownNameError(
            f"no collective stack for vendor {system.chip.vendor!r} of {system.name!r}; "
            f"known: {', '.join(VENDOR_STACK)}"
        )
    return STACKS[name]


def canonical_stack(name: str | None, system: SystemSpec) -> Stack:
    """``None`` -> the system's default stack; a name -> that stack (error lists the valid ones)."""
    if name is None:
        return stack_for(system)
    key = name.strip().lower()
    if key not in STACKS:
        raise UnknownNameError(f"unknown collective stack {name!r}; valid: {', '.join(STACKS)}")
    return STACKS[key]
