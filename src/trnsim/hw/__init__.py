"""trnsim.hw: the hardware catalog. Every chip, core, link and system figure lives here once,
with its source. Nothing in this layer imports from the rest of trnsim (except ``errors``)."""

from trnsim.hw.catalog import CHIPS, CORES, SYSTEMS, all_names, chip, core, lookup, system
from trnsim.hw.specs import (
    ChipSpec,
    CoreSpec,
    DmaSpec,
    EngineSpec,
    FabricLevel,
    LinkSpec,
    SystemSpec,
    TensorEngineSpec,
)
from trnsim.hw.table import Table

__all__ = [
    "CHIPS",
    "CORES",
    "SYSTEMS",
    "ChipSpec",
    "CoreSpec",
    "DmaSpec",
    "EngineSpec",
    "FabricLevel",
    "LinkSpec",
    "SystemSpec",
    "Table",
    "TensorEngineSpec",
    "all_names",
    "chip",
    "core",
    "lookup",
    "system",
]
