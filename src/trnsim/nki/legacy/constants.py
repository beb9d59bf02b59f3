"""``neuronxcc.nki.isa.constants``: the legacy ISA enums (``differences`` has their numbering)."""

from trnsim.nki.legacy.isa import dge_mode, engine, nc_version, oob_mode, reduce_cmd

__all__ = ["dge_mode", "engine", "nc_version", "oob_mode", "reduce_cmd"]
