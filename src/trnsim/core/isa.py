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
REDUCE_CMD_DEFAULT = {
    Op(e.name): a.default
    for e in SPECS.values()
    if e.in_order
    for a in e.attrs
    if a.name == "reduce_cmd"
}
"""The in-order ops whose state is an engine's reduce registers (``reduce_cmd``), with the
command's default."""


def uses_engine_state(opcode: Op, attrs: tuple, dst_roles: tuple[str, ...]) -> bool:
    """Whether one instruction of an ``IN_ORDER`` op touches its engine's state. For the
    reduce-register ops only when its ``reduce_cmd`` is not ``idle`` or it reads the registers
    out (a ``reduce_res``): the ``activation`` docstring (aws-neuron-sdk
    ``nki/api/nki/isa/__init__.py``): "``nisa.reduce_cmd.idle``: Do not modify
    ``reduce_regs``", and ``reduce_res`` is "another instruction to read out ``reduce_regs``";
    so a plain ``activation`` (an exponential, a copy) has no state and its order against the
    engine's other instructions is only its data's. Random-state ops always have."""
    if opcode not in IN_ORDER:
        return False
    default = REDUCE_CMD_DEFAULT.get(opcode)
    if default is None:
        return True
    cmd = default
    for k, v in attrs:
        if k == "reduce_cmd":
            cmd = v
    return cmd != "idle" or "reduce_res" in dst_roles


READS_PSUM = frozenset(Op(e.name) for e in SPECS.values() if e.compute and PSUM in e.reads)
WRITES_PSUM = frozenset(Op(e.name) for e in SPECS.values() if e.compute and PSUM in e.writes)
