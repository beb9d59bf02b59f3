"""trnsim.fabric: topologies built from ``hw``, collective algorithms in closed form, a flow-level
simulator and functional (NumPy) collectives.

Entry point for other layers: :func:`collective_time` (closed form, microseconds per call).
"""

from trnsim.fabric.calibration import FITTED, IDEAL, Overheads
from trnsim.fabric.collectives import (
    ALGOS,
    OPS,
    CollectiveResult,
    Step,
    canonical_algo,
    canonical_op,
    collective_time,
)
from trnsim.fabric.topology import PLACEMENTS, FatTree, Group, LevelView, group

__all__ = [
    "ALGOS",
    "FITTED",
    "IDEAL",
    "OPS",
    "PLACEMENTS",
    "CollectiveResult",
    "FatTree",
    "Group",
    "LevelView",
    "Overheads",
    "Step",
    "canonical_algo",
    "canonical_op",
    "collective_time",
    "group",
]
