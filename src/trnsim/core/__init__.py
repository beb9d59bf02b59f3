"""trnsim.core: the emulated NeuronCore (memories, closed ISA, semantics, rules, record).

- ``isa``: the one enum of instructions (``Op``) and engines, with property sets.
- ``instruction``: ``Instruction`` / ``Operand``, the recorded stream the timing model reads.
- ``memory``: byte-addressed SBUF/PSUM/HBM, the allocator, strided ``View``s.
- ``semantics``: one plain NumPy function per instruction (the specification).
- ``rules``: legality checks as a table; failures name the rule and the kernel line.
- ``machine``: ``NeuronCore``, which checks, records and executes.
"""

from trnsim.core.instruction import Instruction, Operand
from trnsim.core.isa import Engine, Op
from trnsim.core.location import KernelWarning
from trnsim.core.machine import NeuronCore
from trnsim.core.memory import Hbm, View

__all__ = ["Engine", "Hbm", "Instruction", "KernelWarning", "NeuronCore", "Op", "Operand", "View"]
