"""The closed instruction set of the emulated NeuronCore: one enum, grouped by engine.

Every instruction the core can execute is one member of ``Op``. Properties of instructions are
set constants (``TENSOR_OPS``, ``READS_PSUM``, ``MIN_GENERATION``...), never ``if`` chains.
The member value is the public NKI name (``nki.isa.<value>``).
Sources: SDK ``nki/api/nki.isa.rst`` (the instruction list) and the per-instruction docstrings
in ``nki/api/nki/isa/__init__.py`` (engines, memories, generations), nki-notes.md sections
1.3-1.5 and 5.
"""

from __future__ import annotations

from enum import StrEnum


class Engine(StrEnum):
    """The engine queue an instruction is issued to."""

    TENSOR = "tensor"
    VECTOR = "vector"
    SCALAR = "scalar"
    GPSIMD = "gpsimd"
    DMA = "dma"
    SYNC = "sync"


class Op(StrEnum):
    # ---- Tensor engine ------------------------------------------------------------------
    NC_MATMUL = "nc_matmul"
    NC_MATMUL_MX = "nc_matmul_mx"
    NC_TRANSPOSE = "nc_transpose"  # Tensor engine (<=128x128) or Vector engine (<=32x32)
    # ---- Scalar engine (activation) -----------------------------------------------------
    ACTIVATION = "activation"
    ACTIVATE2 = "activate2"
    # ---- Vector engine ------------------------------------------------------------------
    EXPONENTIAL = "exponential"
    TENSOR_TENSOR = "tensor_tensor"
    TENSOR_SCALAR = "tensor_scalar"
    TENSOR_REDUCE = "tensor_reduce"
    TENSOR_COPY = "tensor_copy"
    TENSOR_COPY_PREDICATED = "tensor_copy_predicated"
    TENSOR_TENSOR_SCAN = "tensor_tensor_scan"
    SCALAR_TENSOR_TENSOR = "scalar_tensor_tensor"
    MEMSET = "memset"
    BN_STATS = "bn_stats"
    BN_AGGR = "bn_aggr"
    RECIPROCAL = "reciprocal"
    MAX8 = "max8"
    NC_FIND_INDEX8 = "nc_find_index8"
    RANGE_SELECT = "range_select"
    SELECT_REDUCE = "select_reduce"
    QUANTIZE_MX = "quantize_mx"
    RAND2 = "rand2"
    RAND_SET_STATE = "rand_set_state"
    RAND_GET_STATE = "rand_get_state"
    # ---- GpSimd engine ------------------------------------------------------------------
    IOTA = "iota"
    AFFINE_SELECT = "affine_select"
    TENSOR_PARTITION_REDUCE = "tensor_partition_reduce"
    LOCAL_GATHER = "local_gather"
    # ---- DMA queues ---------------------------------------------------------------------
    DMA_COPY = "dma_copy"
    DMA_TRANSPOSE = "dma_transpose"
    DMA_COMPUTE = "dma_compute"
    # ---- Sync / inter-core --------------------------------------------------------------
    CORE_BARRIER = "core_barrier"
    SENDRECV = "sendrecv"


TENSOR_OPS = frozenset({Op.NC_MATMUL, Op.NC_MATMUL_MX, Op.NC_TRANSPOSE})
SCALAR_OPS = frozenset({Op.ACTIVATION, Op.ACTIVATE2})
VECTOR_OPS = frozenset(
    {
        Op.EXPONENTIAL,
        Op.TENSOR_TENSOR,
        Op.TENSOR_SCALAR,
        Op.TENSOR_REDUCE,
        Op.TENSOR_COPY,
        Op.TENSOR_COPY_PREDICATED,
        Op.TENSOR_TENSOR_SCAN,
        Op.SCALAR_TENSOR_TENSOR,
        Op.MEMSET,
        Op.BN_STATS,
        Op.BN_AGGR,
        Op.RECIPROCAL,
        Op.MAX8,
        Op.NC_FIND_INDEX8,
        Op.RANGE_SELECT,
        Op.SELECT_REDUCE,
        Op.QUANTIZE_MX,
        Op.RAND2,
        Op.RAND_SET_STATE,
        Op.RAND_GET_STATE,
    }
)
GPSIMD_OPS = frozenset({Op.IOTA, Op.AFFINE_SELECT, Op.TENSOR_PARTITION_REDUCE, Op.LOCAL_GATHER})
DMA_OPS = frozenset({Op.DMA_COPY, Op.DMA_TRANSPOSE, Op.DMA_COMPUTE})
SYNC_OPS = frozenset({Op.CORE_BARRIER, Op.SENDRECV})

# Default engine of each op (the ``engine=`` argument may move some ops, see ENGINE_CHOICES).
DEFAULT_ENGINE: dict[Op, Engine] = {
    **dict.fromkeys(TENSOR_OPS, Engine.TENSOR),
    **dict.fromkeys(SCALAR_OPS, Engine.SCALAR),
    **dict.fromkeys(VECTOR_OPS, Engine.VECTOR),
    **dict.fromkeys(GPSIMD_OPS, Engine.GPSIMD),
    **dict.fromkeys(DMA_OPS, Engine.DMA),
    **dict.fromkeys(SYNC_OPS, Engine.SYNC),
}

# Ops whose ``engine=`` argument may pick another engine (docstrings of each op).
ENGINE_CHOICES: dict[Op, frozenset[Engine]] = {
    Op.NC_TRANSPOSE: frozenset({Engine.TENSOR, Engine.VECTOR}),
    Op.TENSOR_TENSOR: frozenset({Engine.VECTOR, Engine.GPSIMD}),
    Op.TENSOR_SCALAR: frozenset({Engine.VECTOR, Engine.SCALAR, Engine.GPSIMD}),
    Op.TENSOR_COPY: frozenset({Engine.VECTOR, Engine.SCALAR, Engine.GPSIMD}),
    Op.MEMSET: frozenset({Engine.VECTOR, Engine.GPSIMD}),
}

# Ops that can read PSUM (an operand of any other op found in PSUM is an error).
READS_PSUM = frozenset(
    (VECTOR_OPS | SCALAR_OPS | {Op.NC_TRANSPOSE})
    - {Op.QUANTIZE_MX, Op.MEMSET, Op.RAND2, Op.RAND_SET_STATE}
)
# Ops that can write PSUM.
WRITES_PSUM = frozenset(
    (TENSOR_OPS | VECTOR_OPS | SCALAR_OPS) - {Op.QUANTIZE_MX, Op.BN_STATS, Op.BN_AGGR}
)
# Ops that address HBM (everything else works on SBUF/PSUM only).
TOUCHES_HBM = DMA_OPS
# Ops that run on compute engines and so follow the partition start rules.
COMPUTE_OPS = TENSOR_OPS | SCALAR_OPS | VECTOR_OPS | GPSIMD_OPS

# First NeuronCore generation that has the op (ops absent here exist on every generation).
MIN_GENERATION: dict[Op, int] = {
    Op.NC_MATMUL_MX: 4,
    Op.QUANTIZE_MX: 4,
    Op.EXPONENTIAL: 4,
    Op.ACTIVATE2: 4,
    Op.RAND2: 4,
    Op.RAND_SET_STATE: 4,  # on the Vector engine (v3 has it on GpSimd only, not modelled)
    Op.RAND_GET_STATE: 4,
    Op.CORE_BARRIER: 3,
    Op.SENDRECV: 3,
    Op.RANGE_SELECT: 3,
}

# Ops implemented by the core (all of Op). Kept as a set so a front end can check coverage.
ALL_OPS = frozenset(Op)
