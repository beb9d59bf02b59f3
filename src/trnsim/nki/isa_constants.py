"""``nki.isa.constants``: the enums of ``nki.isa`` under the module name nki-library imports
them from (``from nki.isa.constants import dge_mode, oob_mode``)."""

from trnsim.nki.isa import (  # noqa: F401
    dge_mode,
    dma_engine,
    engine,
    matmul_perf_mode,
    nc_version,
    oob_mode,
    reduce_cmd,
)
