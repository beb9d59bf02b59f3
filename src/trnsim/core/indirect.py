"""Runtime-indexed operands, read at run time from index tiles in SBUF:

- **Indirect DMA**: ``.ap(vector_offset=...)`` gather/scatter and ``.ap(scalar_offset=...)``
  dynamic start addresses on ``nisa.dma_copy`` (``IndirectView``, first half of this file);
- **Tensor Indirection (TI)**: ``NkiTensor.indirect(index, num_elem)`` gather/scatter along
  the free dims of SBUF/PSUM for compute-engine instructions on NeuronCore-v4
  (``TensorIndirectView``, second half; rules and choices T1-T9 below).

**Indirect DMA.** Public semantics (aws-neuron-sdk):

- ``nki/api/nki/isa/__init__.py`` ``dma_copy`` docstring, "Indirect addressing": *vector
  indirection* gives one row index per partition from an SBUF tensor of shape ``(P, 1)``
  (``.ap(pattern=[[F, P], [1, F]], vector_offset=idx, indirect_dim=0)``; the indexed tensor
  must be in HBM); *scalar indirection* gives one offset for all partitions (a 1x1 SBUF tensor
  or a register); the two are mutually exclusive; ``vector_offset`` on ``src`` is a gather,
  on ``dst`` a scatter. Out-of-bounds indices raise (``oob_mode.error``, the default) or are
  skipped (``oob_mode.skip``: that transfer is not done).
- ``nki/deep-dives/nki-aps.rst``: ``ap(pattern, offset, scalar_offset, vector_offset,
  indirect_dim, dtype)``; offsets count elements from the start of the tensor.
- ``nki/migration/index.rst`` (nki-notes.md 1.3): with ``scalar_offset=s, indirect_dim=d`` the
  element offset is ``offset + s * prod(shape[d+1:])``; ``vector_offset`` supports only
  ``indirect_dim=0``.
- ``nki/deep-dives/nki-dge.rst``: ``vector_offset`` needs ``dge_mode`` ``unknown`` or
  ``swdge`` (indirect on NeuronCore-v3+); ``hwdge`` has no gather/scatter; ``none`` cannot
  take runtime addresses. (Checked in ``trnsim.core.rules``.)

trnsim's choices for indirect DMA where the public docs are silent (one place; anything outside
them is a KernelError naming the rule):

1. Address of element ``(w, i1, ..., ik)`` of a ``vector_offset`` view of tensor ``t`` (rows
   of ``R = prod(t.shape[1:])`` elements): ``offset + idx[w] * R + sum(i_j * stride_j)``; the
   first pattern pair ``[stride, count]`` walks the indexed rows: its count is the number of
   indices ``P`` and its stride is ignored, the row step being ``R`` of the base tensor
   (``nki/migration/index.rst``: "the stride specified in the leading dimension of the pattern
   in the ``.ap()`` is currently ignored"; nki-library's ``topk_reduce`` relies on it).
   ``scalar_offset`` (dim ``d``, ``R = prod(t.shape[d+1:])``): ``offset + s * R + sum over
   every pattern dim``. ``t`` must be a whole HBM tensor (offset 0, dense row-major): on a
   slice the rows and their bound would be the slice's while addresses count from the
   storage start, so ``.ap`` on a slice is refused; give the slice's start as ``offset=``.
2. Index dtypes: ``uint32`` (the docstring examples) or ``int32`` (a negative value is out of
   bounds). Index tiles live in SBUF; ``vector_offset`` is ``(P, 1)``, ``scalar_offset`` is
   ``(1, 1)``. A Python ``int`` scalar offset is a compile-time constant and folds into
   ``offset`` (no indirection); so does a register (``nisa.register_alloc``): trnsim runs the
   kernel as it is traced, so its value when the instruction issues is known. A folded offset
   is a static view: out of bounds it is the view's bounds error (``oob_mode.skip`` applies
   to index tiles only).
3. Bounds: an index ``v`` is in bounds when ``0 <= v < t.shape[d]`` and every element it
   addresses lies inside ``t``'s storage. ``oob_mode.skip`` skips an out-of-bounds row of a
   vector gather/scatter (the destination row keeps its old value). A scalar-offset transfer
   is checked block by block, a block being one step of the first pattern pair (one
   descriptor): an index outside ``0..t.shape[d]-1`` skips every block, an in-bounds index
   skips only the blocks that leave ``t``'s storage and moves the rest. Source: the
   ``dma_copy`` docstring ("skip the DMA transfer for a given dynamic address or index when
   it is out of bound") and nki-library's ``indexed_flatten`` documented pseudocode, which
   writes the in-bounds blocks of a partly out-of-bounds scalar-offset copy.
4. Tensors indexed by a DMA are HBM tensors (``scalar_offset`` too: the docs show it on HBM;
   the on-chip ``scalar_offset`` of choice 7 is for ``tensor_copy``). Only ``nisa.dma_copy``
   (and ``nl.load`` / ``nl.store``, which issue it) accepts an HBM indirect view, on one side
   of the copy only.
5. Scatter with repeated indices: rows are written in partition order, the last one wins.
6. The recorded instruction reads the index tile (operand ``index``) and, for the indexed
   side, names the **whole** indexed tensor (conservative: the rows are not known before the
   run, and timing-only runs never know them), so the timing model orders the DMA after the
   index writer and after/before every access to that tensor.
7. **SBUF/PSUM dynamic offsets** (``.ap(scalar_offset=t, indirect_dim=d)`` on an on-chip
   tensor, ``d >= 1``): the access starts ``t * prod(shape[d+1:])`` elements further within
   each partition, read from the 1x1 index tile when the instruction runs; only
   ``nisa.tensor_copy`` takes one, on one side (the NKI 0.4 migration guide: legacy
   ``tensor_copy_dynamic_src`` / ``_dst`` become ``tensor_copy`` with ``.ap()`` and
   ``scalar_offset``; the 2.26 docstrings: "the dynamic offset must be a scalar value resided
   in SBUF", the source or destination "located at a dynamic offset within each partition").
   The offset must lie in ``0..shape[d]-1`` with the whole access inside the partition's
   elements (else rule ``dynamic-oob``; the docs name no out-of-bounds mode for it). Cost:
   ``max(MIN_II_DYNAMIC, N)`` (``trnsim.core.costs``).

**Tensor Indirection** (NeuronCore-v4, NKI 0.5.0): a view ``t.indirect(index, num_elem)`` of
an SBUF/PSUM tensor ``t`` of shape ``(P, ...)`` that a compute instruction reads (gather) or
writes (scatter) at free-dim offsets taken from an SBUF index tile at run time.

Public sources: the ``NkiTensor.indirect`` docstring (``nki/api/generated/
nki.language.NkiTensor.rst``; nki-notes 1.3): "offset i comes from ``index[i % G, i // G]``
where G is the group size (16 for vector/scalar/gpsimd engines, 32 for tensor engine)",
``index`` of shape ``(P, K)`` with ``P == self.shape[0]``, ``num_elem`` defaults to
``index.size``, result shape ``(P, num_elem)``; the NKI tensor-indirection tutorial kernel
(``tensor_indirection_kernel``, NKI example 42): "In a group starting at row ``start``, output
column ``i`` uses the offset stored at ``idx_tile[start + (i % 16), i // 16]``", uint16 index,
``num_elem=index_f`` with a ``(data_p, index_f // 16)`` index; nki-notes 1.4 (any of
``nc_matmul``'s dst / stationary / moving may be indirect, not with PE tiling) and 5 (release
0.5.0: SBUF/PSUM gather/scatter along F for all engines, on most compute ISA ops); the
neuronx-cc diagnostics BIR701-BIR722 (public error-code catalogue) for the restrictions below.

trnsim's rules and choices for TI where the docs are silent (anything else is a KernelError
naming the rule):

T1. Element ``(p, i)`` of the view is ``t[p, off(p, i)]`` with
    ``off(p, i) = index[g*G + i % G, i // G]``, ``g = p // G``: the docstring's formula per
    group of G partitions (the tutorial's ``start``), groups counted from the view's first
    partition (the start-partition rule makes that G-aligned on the core too).
T2. An offset counts elements of the flattened free dims of ``t`` (row-major over
    ``t.shape[1:]``, through ``t``'s strides), like ``nc_n_gather``; valid offsets are
    ``0 <= off < prod(t.shape[1:])``. Any other value is a ``ti-oob`` error naming the value,
    its partition and position ``i``, the index cell it came from and the bound (checked when
    the data moves: a timing-only run never reads the offsets).
T3. ``index``: an SBUF tensor (BIR702/703) of dtype uint16 (the tutorial), uint32 or int32
    (trnsim also takes these so iota / integer ALU results can index directly; a negative
    int32 is out of bounds), shape ``(P, ...)`` (free dims flattened to ``K``) with
    ``P == t.shape[0]``, starting at the same partition as ``t`` (BIR704 / BIR707). Only the
    cells the formula reads are used: partitions ``g*G .. g*G + min(G, num_elem) - 1`` of each
    group and columns ``0 .. ceil(num_elem / G) - 1``; every other cell is ignored.
T4. ``num_elem`` defaults to ``index.size`` (the docstring); it must satisfy
    ``num_elem <= G * K`` and, in a last group shorter than G partitions, ``num_elem`` may not
    read past the view's partitions (``ti-index``). With ``P > G`` the default exceeds
    ``G * K``, so such kernels pass ``num_elem`` (as the tutorial does).
T5. ``G`` is that of the engine of the instruction that consumes the view
    (``TI_GROUP``), so offsets are resolved when the instruction executes, not when the view
    is made; the index values are read at that moment (they may come from earlier
    instructions such as ``iota``).
T6. Ops and operand roles that accept a TI view: ``TI_ROLES``; anything else is
    ``ti-operand`` (DMA operands point at ``.ap(vector_offset=...)``). Restrictions: v4 and
    later (BIR701, ``ti-generation``); the Tensor engine gathers fp16/bf16/fp8 only (BIR705,
    ``ti-dtype``); the Scalar engine cannot scatter to PSUM (BIR706, ``ti-psum-scatter``); no
    ``is_transpose`` matmul (BIR715) and no PE tiling ``tile_position``/``tile_size``
    (BIR716/717, nki-notes 1.4) (``ti-tiling``); ``tensor_copy_predicated`` only with a scalar
    ``src`` (BIR711, ``ti-operand``).
T7. Scatter: cells are written in ``(p, i)`` order, so with a repeated offset within a
    partition the **last** ``i`` wins; cells no offset names keep their values. A PSUM dst
    carries its accumulation marks along (gathered before the op, scattered after), so
    ``accumulate`` acts per scattered cell as on a plain view.
T8. Execution (the plain path, the specification): read every index tile, gather each TI
    source -- and the TI dst's current contents -- bit-exactly into scratch tiles of shape
    ``(P, num_elem)``, run the op's ordinary executor on them, scatter the dst scratch back.
T9. Record: a TI operand names the **whole** view ``t`` (conservative region: the offsets are
    unknown before the run and timing-only runs never know them), so the timing model orders
    it after/before every access to ``t``; its index tile is a read operand (role ``index``,
    or ``index_<role>`` when an instruction has several TI operands); attribute
    ``tensor_indirect = ((role, G, num_elem), ...)`` lets ``trnsim.core.costs`` cost the op
    on its ``(P, num_elem)`` access (the op's normal cost).
"""

from __future__ import annotations

from collections.abc import Callable
from math import prod
from typing import TYPE_CHECKING, Any

import numpy as np

from trnsim.core.argrules import broken
from trnsim.core.instruction import Operand
from trnsim.core.isa import DMA_OPS, Engine, Op
from trnsim.core.memory import HBM, PSUM, SBUF, OnChipMemory, Storage, View
from trnsim.core.spec import INDEX_DTYPES, SPECS

if TYPE_CHECKING:
    from trnsim.core.live import Core as NeuronCore
    from trnsim.core.live import LiveInstruction
    from trnsim.hw import CoreSpec

VECTOR, SCALAR = "vector", "scalar"


class IndirectView(View):
    """A DMA operand whose start address is read at run time from an index tile in SBUF.

    ``shape`` / ``strides`` / ``offset`` are the static part of the access (index 0: for a
    vector view the stride of dim 0 is 0, the index supplies the row); ``kind`` is
    ``"vector"`` or ``"scalar"``; ``index`` the index tile; ``row`` elements per index step;
    ``bound`` the number of valid index values (``t.shape[dim]``).
    """

    __slots__ = ("bound", "dim", "index", "kind", "row")

    def __init__(
        self,
        static: View,
        kind: str,
        index: View,
        dim: int,
        row: int,
        bound: int,
    ) -> None:
        super().__init__(
            static.storage, static.shape, static.strides, static.offset, static.p0, static.fmt
        )
        self.kind, self.index, self.dim, self.row, self.bound = kind, index, dim, row, bound

    def is_indirect(self) -> bool:
        return True

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def array(self) -> np.ndarray:
        raise broken(
            "ap-no-address",
            "an indirect view (.ap with vector_offset / scalar_offset) has no static address; "
            "only nisa.dma_copy (or nl.load / nl.store) can read or write it, or nisa.tensor_copy "
            "an SBUF/PSUM scalar_offset view",
        )

    def operand(self, role: str) -> Operand:
        """The whole indexed tensor (conservative region; see module docstring, choice 6)."""
        st = self.storage
        if self.fmt.name == st.fmt.name:
            shape = st.shape
        else:
            shape = (st.alloc.nbytes // self.itemsize,)
        strides = tuple(prod(shape[k + 1 :]) for k in range(len(shape)))
        return View(st, shape, strides, 0, 0, self.fmt).operand(role)

    def run_bytes(self) -> int:
        """Bytes of the longest contiguous run of one indexed row (one DMA descriptor)."""
        dims = list(zip(self.strides, self.shape, strict=True))
        if self.kind == VECTOR:
            dims = dims[1:]
        run = 1
        for stride, size in reversed(dims):
            if size == 1:
                continue
            if stride != run:
                break
            run *= size
        return run * self.itemsize

    def addresses(self, values: np.ndarray) -> np.ndarray:
        """Flat element addresses ``[rows, *pattern]`` for the index ``values`` (one per row;
        a scalar view has one row)."""
        grid = np.full(self.shape, self.offset, dtype=np.int64)
        for k, (stride, size) in enumerate(zip(self.strides, self.shape, strict=True)):
            shp = [1] * len(self.shape)
            shp[k] = size
            grid += (np.arange(size, dtype=np.int64) * stride).reshape(shp)
        v = values.astype(np.int64).reshape(-1)
        if self.kind == VECTOR:
            return grid + (v * self.row).reshape(-1, *([1] * (len(self.shape) - 1)))
        return (grid + v[0] * self.row).reshape(1, *self.shape)

    def __repr__(self) -> str:
        return f"IndirectView({self.kind}, {self.fmt.name}{list(self.shape)} @ {self.memory})"


# View methods an indirect view refuses: its addresses are only known at run time.
_VIEW_METHODS = (
    "__getitem__",
    "reshape",
    "permute",
    "broadcast",
    "broadcast_to",
    "expand_dims",
    "ap",
    "view",
    "reinterpret_cast",
    "indirect",
)


def _refuse_view_methods(cls: type, key: str, advice: str) -> None:
    """Give ``cls`` every method of ``_VIEW_METHODS`` as one raising the ``key`` error
    (``trnsim.core.argrules``)."""

    def refusal(name: str) -> Any:
        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            raise broken(key, f"{name}() is not available on {advice}")

        method.__name__ = name
        return method

    for name in _VIEW_METHODS:
        setattr(cls, name, refusal(name))


_refuse_view_methods(
    IndirectView,
    "ap-view-method",
    "an indirect view; build the whole access in the .ap(...) call (an indirect view cannot be "
    "sliced, reshaped or re-patterned)",
)


def make(
    base: View,
    static: View,
    *,
    scalar_offset: Any = None,
    vector_offset: Any = None,
    indirect_dim: int = 0,
) -> IndirectView:
    """Check the ``.ap(...)`` arguments (module docstring, choices 1-4) and build the view.
    ``base`` is the tensor ``.ap`` was called on, ``static`` the pattern view at index 0."""
    if scalar_offset is not None and vector_offset is not None:
        raise broken("ap-offsets", "ap(): scalar_offset and vector_offset are mutually exclusive")
    kind = VECTOR if vector_offset is not None else SCALAR
    index = vector_offset if kind == VECTOR else scalar_offset
    arg = f"{kind}_offset"
    if not isinstance(index, View) or isinstance(index, IndirectView):
        raise broken(
            "ap-index-tensor",
            f"ap({arg}=...) needs an SBUF index tensor, an int or a register, got "
            f"{type(index).__name__}",
        )
    if index.memory != SBUF:
        raise broken(
            "ap-index-memory",
            f"ap({arg}=...): the index tensor is in {index.memory.upper()}; "
            "indices must be in SBUF",
        )
    if index.fmt.name not in INDEX_DTYPES:
        raise broken(
            "ap-index-dtype",
            f"ap({arg}=...): index dtype {index.fmt.name} not allowed; allowed: "
            f"{', '.join(sorted(INDEX_DTYPES))}",
        )
    if base.memory != HBM:
        if kind == SCALAR:
            return on_chip(base, static, index, indirect_dim)
        raise broken(
            "ap-hbm",
            f"ap(vector_offset=...) on a {base.memory.upper()} tensor: the indexed tensor must "
            "be in HBM (dma_copy docstring); for an SBUF/PSUM gather use .indirect(index)",
        )
    if not _whole_tensor(base):
        raise broken(
            "ap-whole-tensor",
            f"ap({arg}=...) on a slice or view of HBM tensor {list(base.shape)} (element offset "
            f"{base.offset}, strides {list(base.strides)}): indirect rows count from the "
            "tensor's start in units of its row size, so call .ap on the whole tensor and give "
            "a slice's start as offset=",
        )
    ndim = len(base.shape)
    if kind == VECTOR:
        if indirect_dim != 0:
            raise broken(
                "ap-vector-dim", f"vector_offset supports only indirect_dim=0, got {indirect_dim}"
            )
        row = prod(base.shape[1:])
        count = static.shape[0]  # its stride is ignored (choice 1)
        if index.partitions != count or index.free_size != 1:
            raise broken(
                "ap-vector-index-shape",
                f"vector_offset index tensor must be ({count}, 1) (one row index per partition, "
                f"{count} = the first pattern count), got {list(index.shape)}",
            )
        strides = (0, *static.strides[1:])
    else:
        if not 0 <= indirect_dim < ndim:
            raise broken(
                "ap-scalar-dim", f"indirect_dim {indirect_dim} is not a dim of {list(base.shape)}"
            )
        row = prod(base.shape[indirect_dim + 1 :])
        if index.size != 1:
            raise broken(
                "ap-scalar-index-shape",
                f"scalar_offset must be a 1x1 tensor, got {list(index.shape)}",
            )
        strides = static.strides
    fixed = View(static.storage, static.shape, strides, static.offset, 0, static.fmt)
    fixed.check_bounds()
    return IndirectView(fixed, kind, index, indirect_dim, row, base.shape[indirect_dim])


def on_chip(
    base: View, static: View, index: View, dim: int, row: int | None = None
) -> IndirectView:
    """A dynamic start offset within each partition of an SBUF/PSUM tensor (choice 7):
    ``static`` is the access at offset 0, and offset ``s`` moves it ``s * row`` elements
    (``row``: by default ``prod(base.shape[dim+1:])``, the ``.ap`` rule)."""
    ndim = len(base.shape)
    if not 1 <= dim < ndim:
        raise broken(
            "ap-dynamic-dim",
            f"ap(scalar_offset=...) on {base.memory.upper()} tensor {list(base.shape)}: "
            f"indirect_dim {dim} must be a free dim (1..{ndim - 1}); the dynamic offset moves "
            "the access within each partition",
        )
    if index.size != 1:
        raise broken(
            "ap-scalar-index-shape", f"scalar_offset must be a 1x1 tensor, got {list(index.shape)}"
        )
    static.check_bounds()
    step = prod(base.shape[dim + 1 :]) if row is None else row
    return IndirectView(static, SCALAR, index, dim, step, base.shape[dim])


def annotate_dynamic(dst: View, srcs: dict[str, View], attrs: dict[str, Any]) -> None:
    """Front-end hook for ``tensor_copy``: an SBUF/PSUM ``scalar_offset`` view on one side
    (choice 7) adds its index tile as the read operand ``index`` and the attribute
    ``dynamic`` (which side); anything else indirect is left to the checker's rules."""
    sides = [
        (r, v)
        for r, v in (("dst", dst), ("src", srcs.get("src")))
        if type(v) is IndirectView and v.memory != HBM
    ]
    if not sides:
        return
    if len(sides) == 2:
        raise broken(
            "dynamic-both",
            "tensor_copy with a dynamic (scalar_offset) start on both src and dst is not "
            "supported: give the dynamic offset on one side",
        )
    role, v = sides[0]
    srcs["index"] = v.index
    attrs["dynamic"] = role


def resolve_dynamic(nc: NeuronCore, call: LiveInstruction) -> LiveInstruction:
    """``call`` with its SBUF/PSUM ``scalar_offset`` view replaced by the static view at the
    offset the index tile holds now (choice 7); an offset outside ``0..bound-1``, or one whose
    access leaves the partition, is an error naming the value."""
    role = call.args["dynamic"]
    views = call.dst_views if role == "dst" else call.src_views
    v: IndirectView = views[role]  # type: ignore[assignment]
    s = int(np.asarray(nc.read_raw(call.src_views["index"])).astype(np.int64).reshape(-1)[0])
    moved = View(v.storage, v.shape, v.strides, v.offset + s * v.row, v.p0, v.fmt)
    row = v.storage.alloc.nbytes // v.itemsize
    free = zip(v.shape[1:], v.strides[1:], strict=True)
    last = moved.offset + sum((n - 1) * st for n, st in free)
    if not 0 <= s < v.bound or moved.offset < 0 or last >= row:
        name = v.storage.alloc.name or "<unnamed>"
        raise broken(
            "dynamic-oob",
            f"{call.opcode.value} {role}: dynamic offset {s} (the 1x1 scalar_offset index "
            f"tile) is out of bounds: valid offsets are 0..{v.bound - 1} on dim {v.dim} of "
            f"{v.memory.upper()} tensor {name!r} with the access inside its {row} elements "
            "per partition",
        )
    dst, src = dict(call.dst_views), dict(call.src_views)
    (dst if role == "dst" else src)[role] = moved
    del src["index"]
    return call.with_views(dst, src, call.args)


def _whole_tensor(v: View) -> bool:
    """``v`` is its whole allocation, row-major and dense (choice 1: row indices and their bound
    are those of the tensor ``.ap`` is called on, and addresses count from its storage start;
    a slice would put the two origins apart)."""
    expect = 1
    for n, st in zip(reversed(v.shape), reversed(v.strides), strict=True):
        if n != 1 and st != expect:
            return False
        expect *= n
    return v.offset == 0 and v.size * v.itemsize == v.storage.alloc.nbytes


def annotate(dst: View, srcs: dict[str, View], attrs: dict[str, Any]) -> None:
    """Front-end hook for ``dma_copy``: add the index tile as a read operand (``index``) and
    the indirect attributes, if ``dst`` or ``src`` is an indirect view."""
    sides = [(r, v) for r, v in (("dst", dst), ("src", srcs.get("src"))) if type(v) is IndirectView]
    if not sides:
        return
    if len(sides) == 2:
        raise broken(
            "dma-both-indirect", "dma_copy with both src and dst indirect is not supported"
        )
    role, v = sides[0]
    srcs["index"] = v.index
    attrs.update(
        indirect=role,
        indirect_kind=v.kind,
        indirect_dim=v.dim,
        indirect_run_bytes=v.run_bytes(),
    )


def annotate_rmw(
    dst: View, srcs: dict[str, View], attrs: dict[str, Any], unique_indices: bool
) -> bool:
    """Front-end hook for ``dma_compute``: a read-modify-write through a ``vector_offset``
    view (``dma_compute`` docstring, NKI 0.6), or False when no operand is indirect.

    - scatter RMW ``dst(HBM)[indices] = dst(HBM)[indices] + src(SB)``: ``dst`` is the
      indirect view, one source is that same view, the other SBUF data;
    - gather RMW ``dst(SB) = dst(SB) + src(HBM)[indices]``: ``dst`` in SBUF, one source the
      indirect HBM view, the other the same view as ``dst``.

    Exactly two sources, ``vector_offset`` only, ``unique_indices=True`` (the docstring: "non-
    unique indices not yet supported"; a repeat at run time is an error, ``execute_rmw``). Adds
    the index tile (``index``), which side is indirect and which source is the data."""
    sides = [(r, v) for r, v in (("dst", dst), *srcs.items()) if type(v) is IndirectView]
    if not sides:
        return False

    def refuse(why: str) -> Exception:
        return broken("dma-compute-rmw", f"dma_compute read-modify-write: {why}")

    if len(srcs) != 2:
        raise refuse(f"needs exactly 2 sources, got {len(srcs)}")
    if any(v.kind != VECTOR for _, v in sides):
        raise refuse("only vector_offset indirection is a read-modify-write (not scalar_offset)")
    if not unique_indices:
        raise refuse("unique_indices=False (non-unique indices are not supported, as documented)")
    (r0, s0), (r1, s1) = srcs.items()
    if type(dst) is IndirectView:  # scatter
        same = [r for r, v in ((r0, s0), (r1, s1)) if v is dst or _same_indirect(v, dst)]
        if len(same) != 1:
            raise refuse("a scattered dst needs one source that is the same indirect view as dst")
        data = r1 if same[0] == r0 else r0
        if type(srcs[data]) is IndirectView or srcs[data].memory != SBUF:
            raise refuse(f"the data source {data} must be a plain SBUF tensor")
        view, side = dst, "dst"
    else:  # gather
        if dst.memory != SBUF:
            raise refuse(f"a gathered source needs dst in SBUF, got {dst.memory.upper()}")
        if len(sides) != 1:
            raise refuse("one source is the indirect HBM view, the other the same view as dst")
        side, view = sides[0]
        data = r1 if side == r0 else r0
        if not _same_view(srcs[data], dst):
            raise refuse(f"the other source ({data}) must be the same view as dst (dst + gathered)")
    srcs["index"] = view.index
    attrs.update(
        indirect=side,
        rmw_data=data,
        indirect_kind=view.kind,
        indirect_dim=view.dim,
        indirect_run_bytes=view.run_bytes(),
    )
    return True


def _same_indirect(a: View, b: IndirectView) -> bool:
    return (
        type(a) is IndirectView
        and a.storage is b.storage
        and a.index.storage is b.index.storage
        and (a.shape, a.strides, a.offset, a.row, a.bound)
        == (b.shape, b.strides, b.offset, b.row, b.bound)
    )


def _same_view(a: View, b: View) -> bool:
    return a.storage is b.storage and (a.shape, a.strides, a.offset, a.p0) == (
        b.shape,
        b.strides,
        b.offset,
        b.p0,
    )


def indirect_roles(call: LiveInstruction) -> list[str]:
    """Roles of ``call`` whose view is indirect."""
    return [
        r for d in (call.dst_views, call.src_views) for r, v in d.items() if type(v) is IndirectView
    ]


# ---- execution (functional runs) ---------------------------------------------------------------


def _flat(v: View) -> np.ndarray:
    """The indexed tensor's storage as a flat array of ``v``'s element type."""
    alloc = v.storage.alloc
    assert alloc.buffer is not None
    n = alloc.nbytes // v.itemsize
    return alloc.buffer[: n * v.itemsize].view(v.fmt.dtype)


def _store(nc: NeuronCore, v: View, flat: np.ndarray, index: np.ndarray, values: Any) -> None:
    """``flat[index] = values`` into the indexed HBM tensor, through an LNC launch's
    write-write race check (``trnsim.core.races``) when there is one."""
    race = nc.hbm.race
    if race is None:
        flat[index] = values
    else:
        race.store_flat(nc.index, v.storage.alloc, flat, index, values)


def _convert(nc: NeuronCore, raw: np.ndarray, src: View, dst: View) -> np.ndarray:
    """``raw`` values of ``src``'s format as ``dst``'s raw format, as ``dma_copy`` converts:
    bit-exact for equal formats, else via fp32 (integers to integers exactly)."""
    if src.fmt.name == dst.fmt.name:
        return raw
    if src.fmt.kind == "int" and dst.fmt.kind == "int":
        return nc.cast(raw.astype(np.int64), dst.fmt)
    return nc.cast(raw.astype(np.float32), dst.fmt)


def _valid_rows(
    call: LiveInstruction, v: IndirectView, values: np.ndarray, addr: np.ndarray
) -> np.ndarray:
    """Rows whose index is in bounds (choice 3); raises for the first bad one unless
    ``oob_mode`` is ``skip``."""
    limit = v.storage.alloc.nbytes // v.itemsize
    vals = values.astype(np.int64).reshape(-1)[: addr.shape[0]]
    rows = addr.reshape(addr.shape[0], -1)
    ok = (vals >= 0) & (vals < v.bound) & (rows.min(axis=1) >= 0) & (rows.max(axis=1) < limit)
    if ok.all() or call.args.get("oob_mode") == "skip":
        return ok
    r = int(np.flatnonzero(~ok)[0])
    where = (
        f"partition {r} of the ({addr.shape[0]}, 1) vector_offset"
        if v.kind == VECTOR
        else f"the 1x1 scalar_offset (block {r} of {addr.shape[0]})"
    )
    if v.kind != VECTOR:
        r = 0
    name = v.storage.alloc.name or "<unnamed>"
    raise broken(
        "dma-oob",
        f"{call.opcode.value} {v.kind} index {int(vals[r])} at {where} index tile is out of "
        "bounds: valid "
        f"indices are 0..{v.bound - 1} (dim {v.dim} of HBM tensor {name!r} "
        f"{list(v.storage.shape)}) with every element inside its {limit} elements "
        "(oob_mode=error; oob_mode=nisa.oob_mode.skip skips such rows or blocks)",
    )


def execute(nc: NeuronCore, call: LiveInstruction) -> None:
    """The functional semantics of an indirect ``dma_copy`` (gather or scatter)."""
    role = call.args["indirect"]
    v: IndirectView = call.dst_views["dst"] if role == "dst" else call.src_views["src"]  # type: ignore[assignment]
    values = nc.read_raw(call.src_views["index"])
    addr = v.addresses(values)
    if v.kind != VECTOR:  # choice 3: blocks (steps of the first pattern pair) checked one by one
        addr = addr.reshape(v.shape[0], -1)
    ok = _valid_rows(call, v, values, addr)
    flat = _flat(v)
    if role == "src":  # gather: dst <- table rows
        dst = call.dst_views["dst"]
        old = np.array(nc.read_raw(dst)).reshape(addr.shape[0], -1)
        safe = np.where(ok.reshape(-1, *([1] * (addr.ndim - 1))), addr, 0)
        got = _convert(nc, flat[safe].reshape(old.shape), v, dst)
        nc.write_raw(dst, np.where(ok[:, None], got, old).reshape(dst.shape))
        return
    src = call.src_views["src"]  # scatter: table rows <- src
    vals = _convert(nc, np.asarray(nc.read_raw(src)).reshape(-1), src, v)
    a = addr.reshape(-1)
    keep = np.repeat(ok, addr[0].size)
    a, vals = a[keep], vals.reshape(-1)[keep]
    # choice 5: the last write of an address wins (unique over the reversed order)
    _, first_rev = np.unique(a[::-1], return_index=True)
    last = a.size - 1 - first_rev
    _store(nc, v, flat, a[last], vals[last])


def execute_rmw(nc: NeuronCore, call: LiveInstruction) -> None:
    """The functional semantics of a ``dma_compute`` read-modify-write (``annotate_rmw``):
    each in-bounds indexed row is read, added to the data in fp32 (the DMA engines compute in
    fp32) and written back in the destination's format; out-of-bounds rows raise, or are
    skipped under ``oob_mode.skip`` (nothing read or written for them). Indices must be
    unique among the rows that move (``unique_indices=True``)."""
    side = call.args["indirect"]
    v: IndirectView = call.dst_views["dst"] if side == "dst" else call.src_views[side]  # type: ignore[assignment]
    values = nc.read_raw(call.src_views["index"])
    addr = v.addresses(values)
    ok = _valid_rows(call, v, values, addr)
    moved = values.astype(np.int64).reshape(-1)[: addr.shape[0]][ok]
    if np.unique(moved).size != moved.size:
        uniq, counts = np.unique(moved, return_counts=True)
        dup = int(uniq[counts > 1][0])
        raise broken(
            "dma-compute-duplicate",
            f"dma_compute read-modify-write: index {dup} appears {int(counts[counts > 1][0])} "
            "times in the vector_offset tile, but unique_indices=True (the only mode the "
            "docstring supports)",
        )
    flat = _flat(v)
    rows = np.flatnonzero(ok)
    a = addr.reshape(addr.shape[0], -1)[rows]
    data = nc.read(call.src_views[call.args["rmw_data"]]).reshape(addr.shape[0], -1)[rows]
    if side == "dst":  # scatter: table rows <- table rows + data
        _store(nc, v, flat, a, nc.cast(flat[a].astype(np.float32) + data, v.fmt))
        return
    dst = call.dst_views["dst"]  # gather: dst <- dst + table rows
    new = np.array(nc.read(dst)).reshape(addr.shape[0], -1)
    new[rows] = new[rows] + flat[a].astype(np.float32)
    nc.write(dst, new.reshape(dst.shape))


# =================================================================================================
# Tensor Indirection (TI): ``NkiTensor.indirect(index, num_elem)`` on compute-engine operands
# (rules and choices T1-T9: module docstring)
# =================================================================================================

TI_MIN_GENERATION = 4  # NkiTensor.indirect docstring "NeuronCore-v4 (Trn3) and later"; BIR701
TI_GROUP: dict[Engine, int] = {
    Engine.TENSOR: 32,
    Engine.VECTOR: 16,
    Engine.SCALAR: 16,
    Engine.GPSIMD: 16,
}
"""Partitions per TI offset group G, per engine (NkiTensor.indirect docstring)."""
TI_INDEX_DTYPES = frozenset({"uint16", "uint32", "int32"})  # T3
TI_TENSOR_GATHER_DTYPES = frozenset(
    {
        "float16",
        "bfloat16",
        "float8_e4m3",
        "float8_e5m2",
        "float8_e4m3fn",
        "float8_e4m3fn_x4",
        "float8_e5m2_x4",
    }
)
"""What the Tensor engine can gather through TI: "FP16, BF16, and FP8" (BIR705)."""
TI_ROLES: dict[Op, frozenset[str]] = {
    Op(e.name): roles
    for e in SPECS.values()
    if (roles := frozenset(r.name for r in e.operands if r.ti))
}
"""Operand roles that may be TI views, per op (T6; the ``ti`` roles of ``trnsim.core.spec``):
the streamed data and the output. Scalar /
vector operands (bias, scale, operand0/1) and reduction outputs are read per partition, not
along F, and stay plain."""


class TensorIndirectView(View):
    """``t.indirect(index, num_elem)``: shape ``(P, num_elem)``, element ``(p, i)`` at
    ``t[p, off(p, i)]`` with offsets read from ``index`` when an instruction executes (T1-T5).

    ``base`` is ``t``; ``storage`` / ``p0`` / ``fmt`` are ``t``'s, so the partition, memory and
    dtype rules of ``trnsim.core.rules`` apply unchanged. It has no static address:
    ``array()`` refuses, ``operand()`` names the whole of ``t`` (T9).
    """

    __slots__ = ("base", "index", "num_elem")

    def __init__(self, base: View, index: View, num_elem: int) -> None:
        super().__init__(
            base.storage,
            (base.shape[0], num_elem),
            (base.strides[0], 1),
            base.offset,
            base.p0,
            base.fmt,
            base.dtype,
        )
        self.base, self.index, self.num_elem = base, index, num_elem

    def is_indirect(self) -> bool:
        return True

    @property
    def ndim(self) -> int:
        return 2

    @property
    def buffer(self) -> str:
        return self.memory

    def check_bounds(self) -> None:
        self.base.check_bounds()

    def array(self) -> np.ndarray:
        raise broken(
            "ti-no-address",
            "a tensor-indirection view (.indirect) has no static address; only a compute "
            f"instruction that accepts one can read or write it ({', '.join(sorted(TI_ROLES))})",
        )

    def acc_array(self) -> np.ndarray:
        return self.array()

    def operand(self, role: str) -> Operand:
        """The whole indexed view (conservative region, T9)."""
        return self.base.operand(role)

    def __repr__(self) -> str:
        return (
            f"TensorIndirectView({self.fmt.name}{list(self.shape)} of {list(self.base.shape)} "
            f"@ {self.memory})"
        )


_refuse_view_methods(
    TensorIndirectView,
    "ti-view-method",
    "a tensor-indirection view; slice or reshape the tensor before calling .indirect(index)",
)


def tensor_view(base: View, index: Any, num_elem: Any = None) -> TensorIndirectView:
    """Check ``base.indirect(index, num_elem)`` (T2-T4, the parts known before the consuming
    instruction) and build the view."""
    if type(base) in (IndirectView, TensorIndirectView):
        raise broken("ti-nested", ".indirect() of an indirect view; index the plain tensor")
    if not base.on_chip:
        raise broken(
            "ti-on-chip",
            f".indirect() on an {base.memory.upper()} tensor {list(base.shape)}: tensor "
            "indirection gathers/scatters along the free dims of SBUF/PSUM; for HBM rows use "
            "nisa.dma_copy with .ap(vector_offset=idx_tile, indirect_dim=0)",
        )
    if len(base.shape) < 2:
        raise broken("ti-free-dim", f".indirect() needs a free dim; {list(base.shape)} has none")
    if not isinstance(index, View) or type(index) in (IndirectView, TensorIndirectView):
        raise broken(
            "ti-index-tensor",
            f".indirect(index): index must be an SBUF tensor, got {type(index).__name__}",
        )
    if index.memory != SBUF:
        raise broken(
            "ti-index-memory",
            f".indirect(index): the index tensor is in {index.memory.upper()}; it must be in SBUF",
        )
    if index.fmt.name not in TI_INDEX_DTYPES:
        raise broken(
            "ti-index-dtype",
            f".indirect(index): index dtype {index.fmt.name} not allowed; allowed: "
            f"{', '.join(sorted(TI_INDEX_DTYPES))}",
        )
    if len(index.shape) < 2 or index.shape[0] != base.shape[0]:
        raise broken(
            "ti-index-shape",
            f".indirect(index): index shape {list(index.shape)} must be (P, K) with P == "
            f"{base.shape[0]}, the partitions of the indexed tensor {list(base.shape)}",
        )
    if index.partition_start != base.partition_start:
        raise broken(
            "ti-index-start",
            f".indirect(index): the index tile starts at partition {index.partition_start}, the "
            f"indexed tensor at {base.partition_start}; they must start at the same partition",
        )
    n = index.size if num_elem is None else num_elem
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
        raise broken(
            "ti-num-elem", f".indirect(): num_elem must be a positive int, got {num_elem!r}"
        )
    return TensorIndirectView(base, index, int(n))


# ---- at the consuming instruction ---------------------------------------------------------------


def _index_role(role: str, several: bool) -> str:
    return f"index_{role}" if several else "index"


def ti_views(
    dst: dict[str, View], src: dict[str, View]
) -> list[tuple[str, TensorIndirectView, bool]]:
    """``(role, view, is_dst)`` of the TI operands, dst first."""
    return [
        (r, v, d)
        for views, d in ((dst, True), (src, False))
        for r, v in views.items()
        if type(v) is TensorIndirectView
    ]


def prepare(
    op: Op,
    engine: Engine,
    dst: dict[str, View],
    src: dict[str, View],
    attrs: dict[str, Any],
    spec: CoreSpec,
) -> list[tuple[str, TensorIndirectView, bool, int]] | None:
    """The hook ``NeuronCore.execute`` calls before checking an instruction: ``None`` when no
    operand is a TI view; else add the index tiles as read operands and the
    ``tensor_indirect`` attribute (T9), and return ``[(role, view, is_dst, G), ...]`` for
    ``run``. The TI rules (T4-T6) are rules of the checker (``trnsim.core.rules``, the
    ``ti-*`` rules), which runs next."""
    tis = ti_views(dst, src)
    if not tis or engine not in TI_GROUP:
        return None  # (a TI view on a DMA or sync instruction: the ti-operand rule refuses it)
    g = TI_GROUP[engine]
    out = [(role, v, is_dst, g) for role, v, is_dst in tis]
    several = len(out) > 1
    for role, v, _, _ in out:
        src[_index_role(role, several)] = v.index
    attrs["tensor_indirect"] = tuple((role, g, v.num_elem) for role, v, _, g in out)
    return out


def ti_operand_error(op: Op, dst: dict[str, View], src: dict[str, View]) -> str | None:
    """T6: the ops and roles that take a TI view (rule ``ti-operand``)."""
    tis = ti_views(dst, src)
    if not tis:
        return None
    role0 = tis[0][0]
    if op in DMA_OPS:
        return (
            f"{op.value} {role0} is a tensor-indirection view (.indirect); DMA gathers/scatters "
            "through .ap(vector_offset=idx_tile, indirect_dim=0) on an HBM tensor instead"
        )
    roles = TI_ROLES.get(op)
    if roles is None:
        return (
            f"{op.value} does not accept a tensor-indirection view ({role0}); ops that do: "
            f"{', '.join(sorted(o.value for o in TI_ROLES))}"
        )
    if op == Op.TENSOR_COPY_PREDICATED and "src" in src:
        return (
            "tensor_copy_predicated takes a tensor-indirection view only with a scalar src "
            "(a tensor src cannot be combined with .indirect)"
        )
    for role, _, _ in tis:
        if role not in roles:
            return (
                f"{op.value} {role} cannot be a tensor-indirection view; roles that can: "
                f"{', '.join(sorted(roles))}"
            )
    return None


def ti_tiling_error(op: Op, attrs: dict[str, Any]) -> str | None:
    """T6: no ``is_transpose`` matmul and no PE tiling with TI (rule ``ti-tiling``)."""
    if attrs.get("is_transpose"):
        return f"{op.value} is_transpose=True cannot use tensor indirection"
    pos, size = attrs.get("tile_position") or (), attrs.get("tile_size") or ()
    if pos or size:
        return (
            f"{op.value} with PE tiling (tile_position={tuple(pos)}, tile_size="
            f"{tuple(size)}) cannot use tensor indirection; drop the tiling or the .indirect "
            "view"
        )
    return None


def ti_operand_limits(
    op: Op, engine: Engine, role: str, v: TensorIndirectView, is_dst: bool
) -> tuple[str, str] | None:
    """T6 engine limits of one TI operand: ``(rule, message)`` (``ti-dtype``,
    ``ti-psum-scatter``)."""
    if not is_dst and engine == Engine.TENSOR and v.fmt.name not in TI_TENSOR_GATHER_DTYPES:
        return (
            "ti-dtype",
            f"{op.value} {role}: the Tensor engine gathers only fp16/bf16/fp8 through "
            f"tensor indirection, got {v.fmt.name}",
        )
    if is_dst and engine == Engine.SCALAR and v.memory == PSUM:
        return (
            "ti-psum-scatter",
            f"{op.value} {role}: the Scalar engine cannot scatter (tensor indirection) to "
            "PSUM; scatter into SBUF or use the Vector engine",
        )
    return None


def ti_groups_error(op: Op, role: str, engine: Engine, v: TensorIndirectView) -> str | None:
    """T4: ``num_elem`` offsets fit the index tile under the engine's group size (rule
    ``ti-index``)."""
    g = TI_GROUP[engine]
    p, n = v.shape[0], v.num_elem
    k = v.index.free_size
    if n > g * k:
        return (
            f"{op.value} {role}: num_elem {n} needs ceil({n}/{g}) = {-(-n // g)} index columns "
            f"per {g}-partition group on the {engine.value} engine (offset i is index[g*{g} + "
            f"i % {g}, i // {g}]), but the index tile {list(v.index.shape)} has {k}; pass "
            f"num_elem <= {g * k}"
        )
    last = p - (p - 1) // g * g  # partitions of the last group
    if last < min(g, n):
        return (
            f"{op.value} {role}: {p} partitions leave a last {g}-partition group of {last} "
            f"partitions on the {engine.value} engine, but num_elem {n} reads index partitions "
            f"up to {min(g, n) - 1} of each group"
        )
    return None


def _offsets(nc: NeuronCore, op: Op, role: str, v: TensorIndirectView, g: int) -> np.ndarray:
    """``off[p, i]`` (T1), read from the index tile now; bounds-checked (T2)."""
    p, n = v.shape[0], v.num_elem
    idx = np.asarray(nc.read_raw(v.index)).reshape(p, -1).astype(np.int64)
    i = np.arange(n)
    rows = (np.arange(p) // g * g)[:, None] + (i % g)[None, :]
    cols = np.broadcast_to((i // g)[None, :], rows.shape)
    off = idx[rows, cols]
    bound = v.base.free_size
    bad = (off < 0) | (off >= bound)
    if bad.any():
        q, j = (int(x) for x in np.argwhere(bad)[0])
        raise broken(
            "ti-oob",
            f"{op.value} {role}: tensor-indirection offset {int(off[q, j])} at position i={j} "
            f"of partition {q} (index[{int(rows[q, j])}, {int(cols[q, j])}], G={g}) is out of "
            f"bounds: offsets count the {bound} elements of the flattened free dims of "
            f"{list(v.base.shape)}, valid 0..{bound - 1}",
        )
    return off


def _cells(v: TensorIndirectView, off: np.ndarray) -> tuple[np.ndarray, ...]:
    """NumPy fancy index of ``v.base``'s cells ``(p, off[p, i])`` (T2: row-major free dims)."""
    p = np.broadcast_to(np.arange(v.shape[0])[:, None], off.shape)
    return (p, *np.unravel_index(off, v.base.shape[1:]))


def _scratch(nc: NeuronCore, v: TensorIndirectView) -> View:
    """A private ``(P, num_elem)`` tile of ``v``'s memory kind and format (T8)."""
    p, n = v.shape
    row = n * v.itemsize
    mem = OnChipMemory(
        v.memory, p, row, core=nc.index, bank_bytes=row, generation_name=nc.spec.name
    )
    alloc = mem.allocate(p, row, align=v.itemsize, name="ti-scratch")
    return View(Storage(alloc, v.fmt, (p, n)), (p, n), (1, 1), 0, 0, v.fmt)


def run(
    nc: NeuronCore,
    call: LiveInstruction,
    tis: list[tuple[str, TensorIndirectView, bool, int]],
    executor: Callable[[NeuronCore, LiveInstruction], None],
) -> None:
    """The functional semantics of an instruction with TI operands (T7, T8)."""
    offs = [_offsets(nc, call.opcode, role, v, g) for role, v, _, g in tis]
    dst, src = dict(call.dst_views), dict(call.src_views)
    scatters = []
    for (role, v, is_dst, _), off in zip(tis, offs, strict=True):
        cells = _cells(v, off)
        s = _scratch(nc, v)
        s.array()[...] = v.base.array()[cells]
        if v.memory == PSUM:
            s.acc_array()[...] = v.base.acc_array()[cells]
        (dst if is_dst else src)[role] = s
        if is_dst:
            scatters.append((v, off, s))
    executor(nc, call.with_views(dst, src, call.args))
    for v, off, s in scatters:
        keep = _last_writes(off, v.base.free_size)
        cells = tuple(c.reshape(-1)[keep] for c in _cells(v, off))
        v.base.array()[cells] = s.array().reshape(-1)[keep]
        alloc = v.base.storage.alloc
        alloc.version += 1  # the decoded-tile cache keys on it (core.accel.decode)
        if v.memory == PSUM:
            v.base.acc_array()[cells] = s.acc_array().reshape(-1)[keep]
            alloc.marks_version += 1  # and the open-accumulation memo (core.accel.decode)


def _last_writes(off: np.ndarray, bound: int) -> np.ndarray:
    """Flat positions of ``off`` that are the last write of their cell (T7: last ``i`` wins)."""
    keys = (np.arange(off.shape[0])[:, None] * bound + off).reshape(-1)
    _, first_rev = np.unique(keys[::-1], return_index=True)
    return np.sort(keys.size - 1 - first_rev)
