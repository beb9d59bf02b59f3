"""The collective model's software constants: the overheads fitted by
:mod:`trnsim.fabric.calibration` and the runtime's algorithm switch points.

They live apart from the fit so that the collective model (:mod:`trnsim.fabric.collectives`)
can read them without importing the fit, which runs that model (no import cycle). The
measurements, the method and every row's error: :mod:`trnsim.fabric.calibration`.
"""

from __future__ import annotations

from dataclasses import dataclass

from trnsim.errors import ConfigError

# --- Section E: Neuron runtime algorithm switch points (intra-node), bytes ----------------------
MESH_MAX_BYTES = 1e6  # "Mesh < 1 MB"
RDH_MAX_BYTES = 56e6  # "RDH 1-56 MB; KangaRing > 56 MB"
E_SOURCE = "calibration/trainium.md section E (neuron-runtime intranode-collective-comm.rst)"


@dataclass(frozen=True, slots=True)
class Overheads:
    """Software constants of the collective model (calibration constants, not hardware figures).

    ``software_s``: fixed time per collective. ``link_efficiency``: fraction of every link's
    nominal bandwidth a collective achieves (0 < eta <= 1).
    """

    software_s: float = 0.0
    link_efficiency: float = 1.0

    def __post_init__(self) -> None:
        if self.software_s < 0:
            raise ConfigError(f"software overhead must be >= 0 s, got {self.software_s}")
        if not 0 < self.link_efficiency <= 1:
            raise ConfigError(f"link efficiency must be in (0, 1], got {self.link_efficiency}")


#: The raw model: no software overhead, nominal link bandwidth (used by the fit itself).
IDEAL = Overheads()

#: Fitted by :func:`trnsim.fabric.calibration.fit` to its section D rows; its ``report()`` gives
#: every row's error.
FITTED = Overheads(software_s=5.248e-05, link_efficiency=0.6274)
