"""Indirect (runtime-indexed) DMA addressing: ``.ap(vector_offset=...)`` gather/scatter and
``.ap(scalar_offset=...)`` dynamic start addresses, read at run time from SBUF.

Public semantics this follows (aws-neuron-sdk):

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

**trnsim's choices where the public docs are silent** (one place; anything outside them is a
KernelError naming the rule):

1. Address of element ``(w, i1, ..., ik)`` of a ``vector_offset`` view of tensor ``t`` (rows
   of ``R = prod(t.shape[1:])`` elements): ``offset + idx[w] * R + sum(i_j * stride_j)``; the
   first pattern pair ``[stride, count]`` walks the indexed rows, so its stride must equal
   ``R`` and its count the number of indices ``P``.
   ``scalar_offset`` (dim ``d``, ``R = prod(t.shape[d+1:])``): ``offset + s * R + sum over
   every pattern dim``.
2. Index dtypes: ``uint32`` (the docstring examples) or ``int32`` (a negative value is out of
   bounds). Index tiles live in SBUF; ``vector_offset`` is ``(P, 1)``, ``scalar_offset`` is
   ``(1, 1)``. A Python ``int`` scalar offset is a compile-time constant and folds into
   ``offset`` (no indirection). Registers (``nisa.register_alloc``) are not modelled.
3. Bounds: an index ``v`` is in bounds when ``0 <= v < t.shape[d]`` and every element it
   addresses lies inside ``t``'s storage. ``oob_mode.skip`` skips an out-of-bounds row of a
   vector gather/scatter (the destination row keeps its old value) or the whole transfer for
   an out-of-bounds scalar offset.
4. Indexed tensors are HBM tensors (``scalar_offset`` too: the docs show it on HBM; trnsim
   does not model dynamic SBUF addresses). Only ``nisa.dma_copy`` (and ``nl.load`` /
   ``nl.store``, which issue it) accepts an indirect view, on one side of the copy only.
5. Scatter with repeated indices: rows are written in partition order, the last one wins.
6. The recorded instruction reads the index tile (operand ``index``) and, for the indexed
   side, names the **whole** indexed tensor (conservative: the rows are not known before the
   run, and timing-only runs never know them), so the timing model orders the DMA after the
   index writer and after/before every access to that tensor.
"""

from __future__ import annotations

from math import prod
from typing import TYPE_CHECKING, Any

import numpy as np

from trnsim.core.instruction import Operand
from trnsim.core.location import fail
from trnsim.core.memory import HBM, SBUF, View

if TYPE_CHECKING:
    from trnsim.core.machine import NeuronCore
    from trnsim.core.rules import Call

INDEX_DTYPES = frozenset({"uint32", "int32"})
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
        super().__init__(static.storage, static.shape, static.strides, static.offset, 0, static.fmt)
        self.kind, self.index, self.dim, self.row, self.bound = kind, index, dim, row, bound

    def is_indirect(self) -> bool:
        return True

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def array(self) -> np.ndarray:
        raise fail(
            "indirect-operand",
            "an indirect view (.ap with vector_offset / scalar_offset) has no static address; "
            "only nisa.dma_copy (or nl.load / nl.store) can read or write it",
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


def _refuse(name: str) -> Any:
    def method(self: IndirectView, *args: Any, **kwargs: Any) -> Any:
        raise fail(
            "indirect-view",
            f"{name}() is not available on an indirect view; build the whole access in the "
            ".ap(...) call (an indirect view cannot be sliced, reshaped or re-patterned)",
        )

    method.__name__ = name
    return method


for _name in (
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
):
    setattr(IndirectView, _name, _refuse(_name))


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
        raise fail("indirect", "ap(): scalar_offset and vector_offset are mutually exclusive")
    kind = VECTOR if vector_offset is not None else SCALAR
    index = vector_offset if kind == VECTOR else scalar_offset
    arg = f"{kind}_offset"
    if not isinstance(index, View) or isinstance(index, IndirectView):
        raise fail(
            "indirect",
            f"ap({arg}=...) needs an SBUF index tensor, got {type(index).__name__} "
            "(trnsim does not model nisa.register_alloc registers)",
        )
    if index.memory != SBUF:
        raise fail(
            "indirect",
            f"ap({arg}=...): the index tensor is in {index.memory.upper()}; "
            "indices must be in SBUF",
        )
    if index.fmt.name not in INDEX_DTYPES:
        raise fail(
            "index-dtype",
            f"ap({arg}=...): index dtype {index.fmt.name} not allowed; allowed: "
            f"{', '.join(sorted(INDEX_DTYPES))}",
        )
    if base.memory != HBM:
        raise fail(
            "indirect",
            f"ap({arg}=...) on a {base.memory.upper()} tensor: the indexed tensor must be in "
            "HBM (dma_copy docstring; trnsim models dynamic addresses on HBM only)",
        )
    ndim = len(base.shape)
    if kind == VECTOR:
        if indirect_dim != 0:
            raise fail(
                "indirect", f"vector_offset supports only indirect_dim=0, got {indirect_dim}"
            )
        row = prod(base.shape[1:])
        stride0, count = static.strides[0], static.shape[0]
        if stride0 != row:
            raise fail(
                "indirect",
                f"vector_offset access pattern: the first pair [stride, count] walks the indexed "
                f"rows, so its stride must be the row size {row} of {list(base.shape)}, got "
                f"{stride0}",
            )
        if index.partitions != count or index.free_size != 1:
            raise fail(
                "indirect",
                f"vector_offset index tensor must be ({count}, 1) (one row index per partition, "
                f"{count} = the first pattern count), got {list(index.shape)}",
            )
        strides = (0, *static.strides[1:])
    else:
        if not 0 <= indirect_dim < ndim:
            raise fail(
                "indirect", f"indirect_dim {indirect_dim} is not a dim of {list(base.shape)}"
            )
        row = prod(base.shape[indirect_dim + 1 :])
        if index.size != 1:
            raise fail("indirect", f"scalar_offset must be a 1x1 tensor, got {list(index.shape)}")
        strides = static.strides
    fixed = View(static.storage, static.shape, strides, static.offset, 0, static.fmt)
    fixed.check_bounds()
    return IndirectView(fixed, kind, index, indirect_dim, row, base.shape[indirect_dim])


def annotate(dst: View, srcs: dict[str, View], attrs: dict[str, Any]) -> None:
    """Front-end hook for ``dma_copy``: add the index tile as a read operand (``index``) and
    the indirect attributes, if ``dst`` or ``src`` is an indirect view."""
    sides = [(r, v) for r, v in (("dst", dst), ("src", srcs.get("src"))) if type(v) is IndirectView]
    if not sides:
        return
    if len(sides) == 2:
        raise fail("indirect", "dma_copy with both src and dst indirect is not supported")
    role, v = sides[0]
    srcs["index"] = v.index
    attrs.update(
        indirect=role,
        indirect_kind=v.kind,
        indirect_dim=v.dim,
        indirect_run_bytes=v.run_bytes(),
    )


def indirect_roles(call: Call) -> list[str]:
    """Roles of ``call`` whose view is indirect."""
    return [r for d in (call.dst, call.src) for r, v in d.items() if type(v) is IndirectView]


# ---- execution (functional runs) ---------------------------------------------------------------


def _flat(v: View) -> np.ndarray:
    """The indexed tensor's storage as a flat array of ``v``'s element type."""
    alloc = v.storage.alloc
    assert alloc.buffer is not None
    n = alloc.nbytes // v.itemsize
    return alloc.buffer[: n * v.itemsize].view(v.fmt.dtype)


def _convert(nc: NeuronCore, raw: np.ndarray, src: View, dst: View) -> np.ndarray:
    """``raw`` values of ``src``'s format as ``dst``'s raw format, as ``dma_copy`` converts:
    bit-exact for equal formats, else via fp32 (integers to integers exactly)."""
    if src.fmt.name == dst.fmt.name:
        return raw
    if src.fmt.kind == "int" and dst.fmt.kind == "int":
        return nc.cast(raw.astype(np.int64), dst.fmt)
    return nc.cast(raw.astype(np.float32), dst.fmt)


def _valid_rows(call: Call, v: IndirectView, values: np.ndarray, addr: np.ndarray) -> np.ndarray:
    """Rows whose index is in bounds (choice 3); raises for the first bad one unless
    ``oob_mode`` is ``skip``."""
    limit = v.storage.alloc.nbytes // v.itemsize
    vals = values.astype(np.int64).reshape(-1)[: addr.shape[0]]
    rows = addr.reshape(addr.shape[0], -1)
    ok = (vals >= 0) & (vals < v.bound) & (rows.min(axis=1) >= 0) & (rows.max(axis=1) < limit)
    if ok.all() or call.attrs.get("oob_mode") == "skip":
        return ok
    r = int(np.flatnonzero(~ok)[0])
    where = (
        f"partition {r} of the ({addr.shape[0]}, 1) vector_offset"
        if v.kind == VECTOR
        else ("the 1x1 scalar_offset")
    )
    name = v.storage.alloc.name or "<unnamed>"
    raise fail(
        "oob",
        f"dma_copy {v.kind} index {int(vals[r])} at {where} index tile is out of bounds: valid "
        f"indices are 0..{v.bound - 1} (dim {v.dim} of HBM tensor {name!r} "
        f"{list(v.storage.shape)}) with every element inside its {limit} elements "
        "(oob_mode=error; oob_mode=nisa.oob_mode.skip skips such rows)",
    )


def execute(nc: NeuronCore, call: Call) -> None:
    """The functional semantics of an indirect ``dma_copy`` (gather or scatter)."""
    role = call.attrs["indirect"]
    v: IndirectView = call.dst["dst"] if role == "dst" else call.src["src"]  # type: ignore[assignment]
    values = nc.read_raw(call.src["index"])
    addr = v.addresses(values)
    ok = _valid_rows(call, v, values, addr)
    flat = _flat(v)
    if role == "src":  # gather: dst <- table rows
        dst = call.dst["dst"]
        old = np.array(nc.read_raw(dst)).reshape(addr.shape[0], -1)
        safe = np.where(ok.reshape(-1, *([1] * (addr.ndim - 1))), addr, 0)
        got = _convert(nc, flat[safe].reshape(old.shape), v, dst)
        nc.write_raw(dst, np.where(ok[:, None], got, old).reshape(dst.shape))
        return
    src = call.src["src"]  # scatter: table rows <- src
    vals = _convert(nc, np.asarray(nc.read_raw(src)).reshape(-1), src, v)
    a = addr.reshape(-1)
    keep = np.repeat(ok, addr[0].size)
    a, vals = a[keep], vals.reshape(-1)[keep]
    # choice 5: the last write of an address wins (unique over the reversed order)
    _, first_rev = np.unique(a[::-1], return_index=True)
    last = a.size - 1 - first_rev
    flat[a[last]] = vals[last]
