"""Named rules checked before an instruction exists: arguments, views, launches, run-time data.

The checker (``trnsim.core.rules.RULES``) checks an instruction once its operands and
attributes are known. Some rules are broken earlier or later than that: when the front end
binds an NKI call's arguments (``trnsim.nki.isa``), when an ``.ap(...)`` / ``.indirect(...)``
view is built (``trnsim.core.indirect``), when a core is set up (``trnsim.core.machine``), or
only by the data an instruction reads at run time (an out-of-bounds index). Each such check is
one entry of ``ARG_RULES`` below: a key naming the check site, the rule name its error starts
with (several sites may share a name, e.g. ``indirect``), where it is checked and what it
refuses. The site raises ``broken(key, message)``; an unregistered key is a programming error.
``tests/test_core_rules.py`` has a failing kernel per key (``test_every_arg_rule_has_a_case``);
the error records the key in ``KernelError.key`` so the test knows which site fired.

A leaf module (it imports only ``trnsim.core.location`` and NumPy), so the front end, the views
and the machine can all use it without an import cycle.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass

import numpy as np

from trnsim.core.location import fail
from trnsim.errors import DuplicateNameError, KernelError

ARGUMENT, VIEW, LAUNCH, OPTION, DATA, SAFETY, ALLOCATION = (
    "argument",
    "view",
    "launch",
    "option",
    "data",
    "safety",
    "allocation",
)
"""When a rule is checked: binding an NKI call's arguments, building a view, an LNC launch's
shape, setting up a core, the data read at run time, a safety net behind another rule, or
allocating a tensor."""


@dataclass(frozen=True, slots=True)
class ArgRule:
    key: str
    name: str
    when: str
    refuses: str


ARG_RULES: dict[str, ArgRule] = {}


def _add(key: str, name: str, when: str, refuses: str) -> None:
    if key in ARG_RULES:
        raise DuplicateNameError(f"argument rule {key!r} registered twice")
    ARG_RULES[key] = ArgRule(key, name, when, refuses)


def broken(key: str, message: str) -> KernelError:
    """The (not raised) KernelError of rule ``key`` at the kernel's line."""
    err = fail(ARG_RULES[key].name, message)
    err.key = key  # type: ignore[attr-defined]
    return err


# ---- the front end (trnsim.nki.isa) --------------------------------------------------------------

_add("engine-arg", "engine", ARGUMENT, "an engine= that is not an nki.isa.engine member")
_add("depends-on", "depends-on", ARGUMENT, "a depends_on producer not an earlier instruction")
_add("operator", "operator", ARGUMENT, "an operator that is not an nki.language operator")
_add("operand-tensor", "operand", ARGUMENT, "a non-tensor where an operand role needs a tensor")
_add("arguments", "arguments", ARGUMENT, "arguments that do not bind to the NKI signature")
_add("range-select-reduce-op", "reduce-op", ARGUMENT, "range_select reduce_op other than max")
_add("select-reduce-op", "reduce-op", ARGUMENT, "select_reduce reduce_op other than max")
_add(
    "select-reduce-cmd",
    "reduce-cmd",
    ARGUMENT,
    "select_reduce reduce_cmd outside idle/reset_reduce/reduce",
)
_add("dma-compute-scales", "not-implemented", ARGUMENT, "dma_compute scales= (not modelled)")
_add(
    "dma-compute-rmw", "dma-compute-rmw", ARGUMENT, "a dma_compute RMW form the docs do not define"
)
_add(
    "dma-compute-static", "not-implemented", ARGUMENT, "RMW-only arguments on a static dma_compute"
)
_add("dma-compute-duplicate", "dma-compute-rmw", DATA, "a repeated index with unique_indices=True")
_add("front-end-missing", "not-implemented", ARGUMENT, "an nki.isa function trnsim lacks")
_add("launch-grid", "lnc", LAUNCH, "a launch grid of more than one dim (kernel[a, b])")
_add("launch-lnc", "lnc", LAUNCH, "kernel[lnc] with lnc other than 1 or 2")
_add("argument-dtype", "dtype", LAUNCH, "a kernel argument array of a dtype NKI lacks")
_add("output-not-hbm", "output-not-hbm", LAUNCH, "a kernel returning an SBUF or PSUM tensor")
_add(
    "output-unwritten",
    "output-unwritten",
    LAUNCH,
    "a returned output with elements no instruction wrote (unless allow_unwritten says why)",
)
_add("shape-dim", "shape", ALLOCATION, "a tensor dimension that is not a whole number >= 0")
_add("outside-kernel", "outside-kernel", ARGUMENT, "nki.language / nki.isa outside a kernel")
_add("tensor-copy-dtype", "dtype", ARGUMENT, "a tensor_copy dtype= that is not a dtype")
_add("register-operand", "operand", ARGUMENT, "a register argument that is not a register")
_add("register-uninitialized", "register-uninitialized", DATA, "a register read before a value")
_add("register-32bit", "register-value", DATA, "a register value outside 32 bits")
_add("register-store-range", "register-value", DATA, "register_store into a too narrow int dst")
_add("register-load-timing-only", "not-implemented", OPTION, "register_load in a timing-only run")
_add("core-barrier-lnc", "lnc", LAUNCH, "core_barrier outside an LNC=2 launch")
_add(
    "lnc-race",
    "lnc-race",
    DATA,
    "two cores of an LNC launch writing different values to one HBM byte between barriers",
)
_add("sendrecv-lnc", "lnc", LAUNCH, "sendrecv outside an LNC=2 launch")
_add("sendrecv-rank", "sendrecv", LAUNCH, "a send_to_rank / recv_from_rank not in the launch")
_add("sendrecv-pair", "sendrecv", LAUNCH, "a receive from a core that sent to another core")

# ---- .ap(...) views: DMA indirection (trnsim.core.indirect, choices 1-4) -------------------------

_add("ap-offsets", "indirect", VIEW, "both scalar_offset and vector_offset")
_add("ap-index-tensor", "indirect", VIEW, "an index that is not a plain tensor")
_add("ap-index-memory", "indirect", VIEW, "an index tensor outside SBUF")
_add("ap-index-dtype", "index-dtype", VIEW, "an index dtype outside INDEX_DTYPES")
_add("ap-hbm", "indirect", VIEW, "an indexed tensor outside HBM")
_add("ap-whole-tensor", "indirect", VIEW, "an indexed slice or view instead of a whole tensor")
_add("ap-vector-dim", "indirect", VIEW, "vector_offset with indirect_dim other than 0")
_add("ap-vector-index-shape", "indirect", VIEW, "a vector_offset index not (count, 1)")
_add("ap-scalar-dim", "indirect", VIEW, "an indirect_dim that is not a dim of the tensor")
_add("ap-scalar-index-shape", "indirect", VIEW, "a scalar_offset index that is not 1x1")
_add("ap-view-method", "indirect-view", VIEW, "slicing or re-patterning an indirect view")
_add("ap-no-address", "indirect-operand", SAFETY, "reading an indirect view's data directly")
_add("dma-both-indirect", "indirect", ARGUMENT, "a dma_copy with both sides indirect")
_add("dma-oob", "oob", DATA, "an index row outside the indexed tensor (oob_mode=error)")
_add("ap-dynamic-dim", "indirect", VIEW, "an on-chip scalar_offset on the partition dim")
_add("dynamic-both", "indirect", ARGUMENT, "a tensor_copy with a dynamic offset on both sides")
_add("dynamic-oob", "oob", DATA, "a dynamic on-chip offset outside its dim or partition")

# ---- .indirect(...) views: tensor indirection (trnsim.core.indirect, T2-T4) ----------------------

_add("ti-nested", "ti-view", VIEW, ".indirect() of an indirect view")
_add("ti-on-chip", "ti-view", VIEW, ".indirect() of an HBM tensor")
_add("ti-free-dim", "ti-view", VIEW, ".indirect() of a tensor without a free dim")
_add("ti-view-method", "ti-view", VIEW, "slicing or re-patterning a tensor-indirection view")
_add("ti-index-tensor", "ti-index", VIEW, "an index that is not a plain tensor")
_add("ti-index-memory", "ti-index", VIEW, "an index tensor outside SBUF")
_add("ti-index-dtype", "ti-index", VIEW, "an index dtype outside TI_INDEX_DTYPES")
_add("ti-index-shape", "ti-index", VIEW, "an index not (P, K) with the tensor's P")
_add("ti-index-start", "ti-index", VIEW, "an index tile at another start partition")
_add("ti-num-elem", "ti-index", VIEW, "a num_elem that is not a positive int")
_add("ti-no-address", "ti-operand", SAFETY, "reading a tensor-indirection view's data directly")
_add("ti-oob", "ti-oob", DATA, "an offset outside the indexed free dims")

# ---- the core (trnsim.core.machine) --------------------------------------------------------------

_add("rounding", "rounding", OPTION, "a rounding mode outside numerics.ROUNDINGS")
_add("executor-missing", "not-implemented", SAFETY, "an op without an executor (spec: run=...)")
_add("instruction-budget", "instruction-budget", OPTION, "more than max_instructions")
_add(
    "select-reduce-continue",
    "reduce-cmd",
    DATA,
    "reduce_cmd=reduce with no reset_reduce of as many partitions before it",
)

# ---- memory: allocations and views (trnsim.core.memory) ------------------------------------------

_add("partition-dim-alloc", "partition-dim", ALLOCATION, "an on-chip tensor of too many partitions")
_add("sbuf-capacity", "sbuf-capacity", ALLOCATION, "an SBUF tensor larger than a partition")
_add("psum-capacity", "psum-capacity", ALLOCATION, "a PSUM tensor larger than a partition")
_add("psum-bank-alignment", "psum-alignment", ALLOCATION, "a PSUM address off a bank boundary")
_add("sbuf-alignment", "sbuf-alignment", ALLOCATION, "an SBUF address off the dtype alignment")
_add("psum-alignment", "psum-alignment", SAFETY, "a PSUM address off an alignment above a bank")
_add("partition-dim-address", "partition-dim", ALLOCATION, "an address past the last partition")
_add("sbuf-capacity-address", "sbuf-capacity", ALLOCATION, "an SBUF address past the partition")
_add("psum-capacity-address", "psum-capacity", ALLOCATION, "a PSUM address past the partition")
_add("sbuf-capacity-full", "sbuf-capacity", ALLOCATION, "an SBUF tensor no placement can hold")
_add("psum-capacity-full", "psum-capacity", ALLOCATION, "a PSUM tensor no placement can hold")
_add("hbm-capacity", "hbm-capacity", ALLOCATION, "an HBM tensor beyond the device's HBM")
_add("overlap", "overlap", DATA, "a tensor used after another reused its addresses")
_add("view-partitions-oob", "out-of-bounds", VIEW, "a view's partitions outside its tensor")
_add("view-oob", "out-of-bounds", VIEW, "a view's elements outside its allocation")

# ---- tensor views (trnsim.nki.tensor) ------------------------------------------------------------

_add("index-count", "index", VIEW, "more indices than dims")
_add("index-step", "index", VIEW, "a slice step <= 0")
_add("slice-oob", "out-of-bounds", VIEW, "a slice past the end of a dim")
_add("index-oob", "out-of-bounds", VIEW, "an int index outside its dim")
_add("index-type", "index", VIEW, "an index that is not an int or a slice")
_add("reshape-size", "shape", VIEW, "a reshape to another number of elements")
_add("reshape-partition", "shape", VIEW, "a reshape of an on-chip tensor's partition dim")
_add("reshape-contiguous", "shape", VIEW, "a reshape no strides can express")
_add("permute", "shape", VIEW, "a permutation that is not one or moves the partition dim")
_add("broadcast", "shape", VIEW, "a broadcast of a dim other than a size-1 free dim")
_add("ap-const-dim", "indirect", VIEW, "a constant scalar_offset's indirect_dim outside the dims")
_add("ap-dtype", "ap-dtype", VIEW, "an .ap(dtype=) the storage is not a whole number of")
_add("ap-partition-pair", "ap-partition", VIEW, "an on-chip .ap without a partition pair")
_add("ap-partition-step", "ap-partition", VIEW, "an on-chip .ap partition step not one row")
_add("ap-negative-offset", "out-of-bounds", VIEW, "an on-chip .ap before the tensor's start")
_add("view-dtype", "dtype", VIEW, "a .view(dtype) the last dim's bytes do not divide into")
_add("view-dtype-offset", "dtype", VIEW, "a .view(dtype) at an offset not of the new size")

# ---- nki.language (trnsim.nki.language) ----------------------------------------------------------

_add("buffer", "buffer", ARGUMENT, "a buffer= that is not nl.sbuf / nl.psum / nl.shared_hbm")
_add("nl-operand", "operand", ARGUMENT, "an nl elementwise function of no tensor")
_add("nl-matmul-transpose", "not-implemented", ARGUMENT, "nl.matmul(transpose_x=False)")
_add("nl-missing", "not-implemented", ARGUMENT, "an nki.language function trnsim lacks")
_add("nl-invert-dtype", "dtype", ARGUMENT, "nl.invert of a non-integer tensor")
_add("nl-reduce-axis", "not-implemented", ARGUMENT, "an nl reduction not along all free dims")
_add("load-transpose2d", "load-transpose2d", ARGUMENT, "nl.load_transpose2d of a non-2-D HBM")
_add("dynamic-range-bound", "dynamic-range", ARGUMENT, "device loop bound not int/register")
_add("dynamic-range-step", "dynamic-range", ARGUMENT, "device loop step not a positive int")
_add("loop-register", "loop-register", ARGUMENT, "nl.while_loop condition not a register")
_add("scalar-reduce-op", "reduce-cmd", DATA, "activation reduce_cmd reducing without reduce_op")
_add(
    "scalar-reduce-continue",
    "reduce-cmd",
    DATA,
    "activation reduce_cmd=reduce without reduce_regs over the same partitions",
)

# ---- semantics behind the checker (trnsim.core.semantics) ----------------------------------------

_add("reduce-init-value", "reduce-init", SAFETY, "load_reduce with no initial value")
_add("reduce-continue", "reduce-cmd", DATA, "reduce_cmd=reduce with no accumulator of its rows")
_add(
    "match-replace8-unmatched",
    "not-implemented",
    DATA,
    "nc_match_replace8 with dst_idx and a value without an unmatched occurrence",
)
_add("n-gather-index", "n-gather-index", DATA, "an nc_n_gather index outside the partition")

# ---- nki.collectives (trnsim.nki.collectives) ----------------------------------------------------

_add("replica-group-disjoint", "replica-group", ARGUMENT, "a rank in two sub-groups")
_add("replica-group-type", "replica-group", ARGUMENT, "a replica_group not a ReplicaGroup")
_add("replica-group-cover", "replica-group", LAUNCH, "groups not covering the launch's ranks")
_add("collective-pairs", "collective", ARGUMENT, "not one dst per src")
_add("collective-op", "collective", ARGUMENT, "a ring reduction op not add/minimum/maximum")
_add("collective-v-bounds", "collective", DATA, "a _v chunk outside its source or its dst slot")
_add("collective-v-limits", "collective", LAUNCH, "all_gather_v outside LNC=2 / 4-rank groups")
_add("collective-operand", "operand", ARGUMENT, "a collective src/dst that is not a tensor")
_add("collective-coalesced-hbm", "collective", ARGUMENT, "a coalesced collective off HBM")
_add("collective-join", "collective", LAUNCH, "a rank of the group not joining a collective")
_add("collective-permute-ranks", "collective", LAUNCH, "permute pairs not distinct launch ranks")
_add("collective-permute-one", "collective", ARGUMENT, "collective_permute of several tensors")


def shape_dim(d: object) -> int:
    """One tensor dimension as an int: a whole number >= 0 (an int, a NumPy integer, or a float
    with no fraction such as ``64.0``). ``64.5``, NaN, a string, ``None`` or a bool is refused
    (rule ``shape-dim``), never truncated."""
    if type(d) is int and d >= 0:
        return d
    if not isinstance(d, bool):
        try:
            value = operator.index(d)  # type: ignore[arg-type]
        except TypeError:
            value = None
            if isinstance(d, float | np.floating) and math.isfinite(d) and d == int(d):
                value = int(d)
        if value is not None and value >= 0:
            return value
    raise broken(
        "shape-dim",
        f"tensor dimension {d!r:.40} is not a whole number >= 0 (a float such as 64.5 is "
        "refused, not truncated)",
    )


def shape_dims(shape: object) -> tuple[int, ...]:
    """A tensor shape (a tuple or list of dims, or one dim) as a tuple of ints (``shape_dim``)."""
    dims = shape if isinstance(shape, tuple | list) else (shape,)
    return tuple([d if type(d) is int and d >= 0 else shape_dim(d) for d in dims])
