"""trnsim.core: the emulated NeuronCore (memories, closed ISA, semantics, rules, record).

- ``spec``: the instruction specification, one entry per instruction (operands, attributes,
  rules, generation, program order, semantics, cost rule); everything below derives from it.
- ``isa``: ``Op`` (one member per spec entry) and property sets derived from the spec.
- ``instruction``: ``Instruction`` / ``Operand``, the recorded stream the timing model reads.
- ``memory``: byte-addressed SBUF/PSUM/HBM, the allocator, strided ``View``s.
- ``semantics``: one plain NumPy function per instruction (the specification).
- ``rules``: legality checks as a table; failures name the rule and the kernel line.
- ``machine``: ``NeuronCore``, the plain interpreter: checks, records and executes.
- ``options``: ``CoreOptions`` (accelerators, instruction budget); ``accel``: the opt-in
  accelerators (decode caches, deferred threads), each bit-equal to the plain path.
"""

from trnsim.core.instruction import Instruction, Operand
from trnsim.core.isa import Engine, Op
from trnsim.core.location import KernelWarning
from trnsim.core.machine import NeuronCore
from trnsim.core.memory import Hbm, View

__all__ = ["Engine", "Hbm", "Instruction", "KernelWarning", "NeuronCore", "Op", "Operand", "View"]
