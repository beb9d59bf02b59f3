"""The closed instruction set of the emulated NeuronCore, derived from ``trnsim.core.spec``.

``Op`` has one member per registered instruction (member value: the public NKI name,
``nki.isa.<value>``), in the registry's order (grouped by engine). The property sets below
(engines, PSUM access, generations, engine choices) are views of the registry kept for
readers that want a set; each fact is written once, in the instruction's ``spec`` entry.
"""

from __future__ import annotations

from enum import StrEnum

from trnsim.core.spec import PSUM, SPECS, Engine, Instr

Op = StrEnum("Op", [(name.upper(), name) for name in SPECS], module=__name__)  # type: ignore[misc]
Op.__doc__ = "One member per instruction of ``trnsim.core.spec.SPECS`` (value: the NKI name)."


def spec_of(op: Op) -> Instr:
    """The specification entry of ``op``."""
    return SPECS[op]


def _on(engine: Engine) -> frozenset[Op]:
    return frozenset(Op(e.name) for e in SPECS.values() if e.engine is engine)


TENSOR_OPS = _on(Engine.TENSOR)
SCALAR_OPS = _on(Engine.SCALAR)
VECTOR_OPS = _on(Engine.VECTOR)
GPSIMD_OPS = _on(Engine.GPSIMD)
DMA_OPS = _on(Engine.DMA)
SYNC_OPS = _on(Engine.SYNC)
COMPUTE_OPS = TENSOR_OPS | SCALAR_OPS | VECTOR_OPS | GPSIMD_OPS
TOUCHES_HBM = DMA_OPS
ALL_OPS = frozenset(Op)

DEFAULT_ENGINE: dict[Op, Engine] = {Op(e.name): e.engine for e in SPECS.values()}
ENGINE_CHOICES: dict[Op, frozenset[Engine]] = {
    Op(e.name): e.engines for e in SPECS.values() if e.engines is not None
}
MIN_GENERATION: dict[Op, int] = {
    Op(e.name): e.min_generation for e in SPECS.values() if e.min_generation > 2
}
AUTO_ENGINE = frozenset(Op(e.name) for e in SPECS.values() if e.auto_engine)
"""Ops the compiler places by engine workload when no engine is given (attribute
``AUTO_ENGINE_ATTR`` on the record; ``trnsim.core.costs.auto_engines``)."""
AUTO_ENGINE_ATTR = "auto_engine"
SPILL_ATTR = "spill"
"""The record attribute of a copy a front end issues to spill on-chip data (value ``"save"``),
to refill it (``"reload"``) or to read a clean tile again from its source (``"refetch"``), as
the compiler does when live data overflows SBUF (``trnsim.nki.legacy.allocator``): profiles
count the HBM bytes of save and reload DMAs as neuron-profile's ``spill_save_bytes`` /
``spill_reload_bytes`` (a refetch is an ordinary HBM read)."""
IN_ORDER = frozenset(Op(e.name) for e in SPECS.values() if e.in_order)
"""Ops with core state beyond memory (random state, accumulators): program order matters."""
READS_PSUM = frozenset(Op(e.name) for e in SPECS.values() if e.compute and PSUM in e.reads)
WRITES_PSUM = frozenset(Op(e.name) for e in SPECS.values() if e.compute and PSUM in e.writes)
