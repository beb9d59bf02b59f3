"""``NkiTensor``: the NKI tensor view (storage plus a strided access pattern).

A thin front-end class over the core's ``View``: NumPy-style slicing, ``reshape``,
``permute``, ``broadcast``, ``ap(pattern, offset)``, ``view(dtype)``. On SBUF/PSUM, dim 0 is
the partition dim (its stride counts partitions, it cannot be dropped, reshaped or permuted).
Sources: SDK ``nki/get-started/nki-language-guide.rst``, migration guide (NkiTensor views).
"""

from __future__ import annotations

from math import prod
from typing import Any

import numpy as np

from trnsim.core import indirect
from trnsim.core.argrules import broken, shape_dim
from trnsim.core.indirect import IndirectView, TensorIndirectView
from trnsim.core.memory import View
from trnsim.nki.buffers import OF_MEMORY, Buffer
from trnsim.numerics import get_format


class NkiTensor(View):
    """A tensor in HBM, SBUF or PSUM as an NKI kernel sees it."""

    __slots__ = ()

    @classmethod
    def wrap(cls, v: View) -> NkiTensor:
        return cls.trusted(
            v.storage, v.shape, v.strides, v.offset, v.p0, v.fmt, v.dtype, v.inbounds
        )

    def _derive(self, shape, strides, offset, p0=None, fmt=None, dtype=None) -> NkiTensor:
        t = NkiTensor(
            self.storage,
            tuple(shape),
            tuple(strides),
            offset,
            self.p0 if p0 is None else p0,
            fmt or self.fmt,
            dtype if dtype is not None else (self.dtype if fmt is None else None),
        )
        t.check_bounds()
        return t

    # ---- NumPy-like facts -----------------------------------------------------------------

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def buffer(self) -> Buffer:
        """``nl.sbuf`` / ``nl.psum`` / ``nl.shared_hbm``: compares equal to the ``nl`` object."""
        return OF_MEMORY[self.memory]

    @property
    def itemsize_bytes(self) -> int:
        return self.itemsize

    def __len__(self) -> int:
        return self.shape[0]

    # ---- slicing --------------------------------------------------------------------------

    def __getitem__(self, key: Any) -> NkiTensor:
        if type(key) is tuple and len(key) == len(self.shape):
            t = self._plain_slices(key)
            if t is not None:
                return t
        if not isinstance(key, tuple):
            key = (key,)
        if any(k is Ellipsis for k in key):
            i = next(j for j, k in enumerate(key) if k is Ellipsis)
            fill = (slice(None),) * (self.ndim - len(key) + 1)
            key = key[:i] + fill + key[i + 1 :]
        if len(key) > self.ndim:
            raise broken(
                "index-count", f"{len(key)} indices for a {self.ndim}-d tensor {list(self.shape)}"
            )
        key = key + (slice(None),) * (self.ndim - len(key))
        shape, strides = [], []
        offset, p0 = self.offset, self.p0
        on_chip = self.on_chip
        for dim, (k, n, s) in enumerate(zip(key, self.shape, self.strides, strict=True)):
            partition_dim = dim == 0 and on_chip
            if type(k) is slice:
                start, stop, step = k.start, k.stop, k.step
                if start is None:
                    start = 0
                if stop is None:
                    stop = n
                if (
                    step is None
                    and type(start) is int
                    and type(stop) is int
                    and 0 <= start <= stop <= n
                ):  # the common a:b, : and a: (same result as the general path below)
                    step, count = 1, stop - start
                else:
                    start, stop, step = k.indices(n)
                    if step <= 0:
                        raise broken("index-step", f"slice step {step} must be positive")
                    count = max(0, -(-(stop - start) // step))
                    if k.stop is not None and (k.stop > n or (k.start or 0) < -n):
                        raise broken(
                            "slice-oob",
                            f"slice {k.start}:{k.stop} of dim {dim} (size {n}) of "
                            f"{list(self.shape)}",
                        )
                if partition_dim:
                    p0 += start * s
                else:
                    offset += start * s
                shape.append(count)
                strides.append(s * step)
            elif isinstance(k, (int, np.integer)):  # a tuple: faster than a union
                i = int(k)
                if not -n <= i < n:
                    raise broken("index-oob", f"index {i} of dim {dim} (size {n})")
                i %= n
                if partition_dim:
                    p0 += i * s
                    shape.append(1)  # the partition dim is kept (size 1)
                    strides.append(s)
                else:
                    offset += i * s
            else:
                raise broken("index-type", f"unsupported index {k!r} (use ints and slices)")
        # Every index above lies inside its dim, so a slice of an in-bounds view is in bounds.
        t = NkiTensor.trusted(
            self.storage,
            tuple(shape),
            tuple(strides),
            offset,
            p0,
            self.fmt,
            self.dtype,
            self.inbounds,
        )
        if not t.inbounds:
            t.check_bounds()
        return t

    def _plain_slices(self, key: tuple) -> NkiTensor | None:
        """The common key, one ``a:b`` / ``a:`` / ``:`` slice per dim with int bounds inside
        the dim: the same view as the general path in ``__getitem__`` builds, or None for any
        other key (which takes the general path)."""
        shape = []
        offset, p0 = self.offset, self.p0
        first = self.on_chip
        for k, n, s in zip(key, self.shape, self.strides, strict=False):  # lengths checked
            if type(k) is not slice or k.step is not None:
                return None
            start, stop = k.start, k.stop
            if start is None:
                start = 0
            elif type(start) is not int:
                return None
            if stop is None:
                stop = n
            elif type(stop) is not int:
                return None
            if not 0 <= start <= stop <= n:
                return None
            if first:
                p0 += start * s
                first = False
            else:
                offset += start * s
            shape.append(stop - start)
        return (
            NkiTensor.trusted(  # type: ignore[no-any-return]
                self.storage,
                tuple(shape),
                self.strides,
                offset,
                p0,
                self.fmt,
                self.dtype,
                self.inbounds,
            )
            if self.inbounds
            else None
        )

    def __setitem__(self, key: Any, value: Any) -> None:
        from trnsim.nki import isa

        isa.tensor_copy(self[key], value) if isinstance(value, View) else isa.memset(
            self[key], value
        )

    # ---- view methods ---------------------------------------------------------------------

    def reshape(self, *shape: Any) -> NkiTensor:
        if len(shape) == 1 and isinstance(shape[0], tuple | list):
            shape = tuple(shape[0])
        shape = tuple(-1 if type(s) is int and s == -1 else shape_dim(s) for s in shape)
        if -1 in shape:
            known = prod(s for s in shape if s != -1)
            shape = tuple(self.size // known if s == -1 else s for s in shape)
        if prod(shape) != self.size:
            raise broken("reshape-size", f"cannot reshape {list(self.shape)} to {list(shape)}")
        lead = 1 if self.on_chip else 0
        if self.on_chip and shape[0] != self.shape[0]:
            raise broken(
                "reshape-partition",
                f"reshape of an on-chip tensor must keep the partition dim {self.shape[0]}, "
                f"got {list(shape)}",
            )
        dummy = np.lib.stride_tricks.as_strided(
            np.zeros(1, np.int8), self.shape[lead:], self.strides[lead:]
        )
        try:
            r = np.reshape(dummy, shape[lead:], copy=False)
        except ValueError:
            raise broken(
                "reshape-contiguous",
                f"reshape of non-contiguous view {list(self.shape)} to {list(shape)}",
            ) from None
        return self._derive(
            shape, (*self.strides[:lead], *r.strides) if lead else r.strides, self.offset
        )

    def permute(self, *axes: Any) -> NkiTensor:
        if len(axes) == 1 and isinstance(axes[0], tuple | list):
            axes = tuple(axes[0])
        if sorted(axes) != list(range(self.ndim)) or (self.on_chip and axes[0] != 0):
            raise broken("permute", f"bad permutation {axes} of {list(self.shape)}")
        return self._derive(
            [self.shape[a] for a in axes], [self.strides[a] for a in axes], self.offset
        )

    def broadcast(self, dim: int, size: int) -> NkiTensor:
        if self.shape[dim] != 1 or (self.on_chip and dim == 0):
            raise broken(
                "broadcast", f"broadcast needs a size-1 free dim; dim {dim} of {self.shape}"
            )
        shape, strides = list(self.shape), list(self.strides)
        shape[dim], strides[dim] = size, 0
        return self._derive(shape, strides, self.offset)

    def broadcast_to(self, shape: tuple[int, ...]) -> NkiTensor:
        t = self
        for d, (have, want) in enumerate(zip(self.shape, shape, strict=True)):
            if have != want:
                t = t.broadcast(d, want)
        return t

    def expand_dims(self, dim: int) -> NkiTensor:
        shape, strides = list(self.shape), list(self.strides)
        shape.insert(dim, 1)
        strides.insert(dim, 0)
        return self._derive(shape, strides, self.offset)

    def ap(
        self,
        pattern: list[list[int]] | tuple,
        offset: int | None = None,
        scalar_offset: Any = None,
        vector_offset: Any = None,
        indirect_dim: int = 0,
        dtype: Any = None,
    ) -> NkiTensor | IndirectView:
        """An explicit access pattern ``[[stride, count], ...]`` over this tensor's storage,
        starting at the view's own storage offset plus ``offset`` elements (``None``: 0).
        Strides and offsets count elements of the tensor flattened to 1-D (of ``dtype`` when
        it reinterprets the storage). On SBUF/PSUM the first pair is the partition dim: its
        step must be the element count of one partition of the tensor (partitions are read
        contiguously). Sources: SDK ``NkiTensor.ap`` docstring, ``nki/deep-dives/nki-aps.rst``
        (``t`` of shape (16, 16) in SBUF: ``t.ap([[16, 16], [1, 8]], offset=8)`` is
        ``t[0:16, 8:16]``).

        ``vector_offset`` (an SBUF ``(P, 1)`` uint32/int32 tile: one row index per partition,
        ``indirect_dim=0``) or ``scalar_offset`` (a 1x1 SBUF tile, or a Python int folded into
        ``offset``) make an indirect view for ``nisa.dma_copy``: a gather when it is the
        ``src``, a scatter when it is the ``dst`` (``dma_copy`` docstring, "Indirect
        addressing"). The exact address rules and trnsim's choices where the docs are silent
        are in ``trnsim.core.indirect``.
        """
        fmt = get_format(dtype) if dtype is not None else self.fmt
        strides = [int(s) for s, _ in pattern]
        shape = [int(n) for _, n in pattern]
        offset = 0 if offset is None else int(offset)
        if (
            vector_offset is None
            and scalar_offset is not None
            and not isinstance(scalar_offset, View)
            and hasattr(scalar_offset, "__index__")
        ):
            # a compile-time constant offset, or a register (nisa.register_alloc: its value
            # when this instruction issues, the kernel running as traced): no index tile to
            # read, the offset folds in (migration guide rule; trnsim.core.indirect choice 2)
            dim = int(indirect_dim)
            if not 0 <= dim < self.ndim:
                raise broken(
                    "ap-const-dim", f"indirect_dim {dim} is not a dim of {list(self.shape)}"
                )
            offset = offset + scalar_offset.__index__() * prod(self.shape[dim + 1 :])
            scalar_offset = None
        old, new = self.fmt.dtype.itemsize, fmt.dtype.itemsize
        alloc = self.storage.alloc
        row_bytes = alloc.nbytes if self.on_chip else 0
        base_bytes = self.p0 * row_bytes + self.offset * old
        if base_bytes % new or row_bytes % new:
            raise broken(
                "ap-dtype",
                f".ap(dtype={fmt.name}) on {self.fmt.name} tensor {alloc.name!r}: its storage "
                f"offset ({base_bytes} bytes) or partition size ({row_bytes} bytes) is not a "
                f"whole number of {new}-byte elements",
            )
        flat = base_bytes // new + offset
        p0 = 0
        if self.on_chip:
            row = row_bytes // new
            if not shape:
                raise broken("ap-partition-pair", f".ap on {alloc.name!r} needs the partition pair")
            if shape[0] > 1 and strides[0] != row:
                raise broken(
                    "ap-partition-step",
                    f".ap on {alloc.kind.upper()} tensor {alloc.name!r}: partition step "
                    f"{strides[0]} elements; it must be the {row} elements of one partition "
                    f"(partitions are accessed contiguously)",
                )
            if flat < 0:
                raise broken("ap-negative-offset", f".ap on {alloc.name!r}: offset {flat} < 0")
            p0, flat = divmod(flat, row)
            strides[0] = 1
        if scalar_offset is None and vector_offset is None:
            return self._derive(shape, strides, flat, p0, fmt)
        static = NkiTensor(self.storage, tuple(shape), tuple(strides), flat, p0, fmt)
        return indirect.make(
            self,
            static,
            scalar_offset=scalar_offset,
            vector_offset=vector_offset,
            indirect_dim=int(indirect_dim),
        )

    def view(self, dtype: Any) -> NkiTensor:
        """Reinterpret the bytes as another dtype of the same or a divisible size."""
        fmt = get_format(dtype)
        old, new = self.itemsize, fmt.dtype.itemsize
        if old == new:
            return self._derive(self.shape, self.strides, self.offset, fmt=fmt)
        if self.strides[-1] != 1 or (self.shape[-1] * old) % new:
            raise broken(
                "view-dtype", f"cannot view {self.fmt.name}{list(self.shape)} as {fmt.name}"
            )
        factor_num, factor_den = old, new
        shape = list(self.shape)
        shape[-1] = shape[-1] * factor_num // factor_den
        lead = 1 if self.on_chip else 0
        strides = [
            s if i < lead else s * factor_num // factor_den for i, s in enumerate(self.strides)
        ]
        strides[-1] = 1
        if (self.offset * old) % new:
            raise broken("view-dtype-offset", f"view as {fmt.name}: offset not aligned")
        return self._derive(shape, strides, self.offset * old // new, fmt=fmt)

    reinterpret_cast = view

    def get_pattern(self) -> list[list[int]]:
        """``[[stride, count], ...]`` in elements of the flattened tensor (on SBUF/PSUM the
        partition step is the element count of one partition, as ``.ap`` takes it)."""
        pat = [[s, n] for s, n in zip(self.strides, self.shape, strict=True)]
        if self.on_chip and pat:
            pat[0][0] *= self.row_elems()
        return pat

    def is_contiguous(self) -> bool:
        lead = 1 if self.on_chip else 0
        expect = 1
        for s, n in reversed(list(zip(self.strides[lead:], self.shape[lead:], strict=True))):
            if n != 1 and s != expect:
                return False
            expect *= n
        return True

    def is_indirect(self) -> bool:
        """False: a plain view (``.ap(vector_offset=...)`` and ``.indirect(...)`` return
        indirect views, whose ``is_indirect()`` is True)."""
        return False

    def indirect(self, index: View, num_elem: int | None = None) -> TensorIndirectView:
        """A Tensor Indirection (TI) view for compute instructions (NeuronCore-v4): shape
        ``(P, num_elem)``, element ``(p, i)`` is ``self[p, off]`` with the free-dim offset
        ``off = index[g*G + i % G, i // G]`` read when the consuming instruction runs (G = 16
        on Vector/Scalar/GpSimd, 32 on Tensor; ``g`` the G-partition group of ``p``). As an
        input it gathers, as a ``dst`` it scatters. ``index``: SBUF ``(P, K)`` uint16/uint32/
        int32 at the same partitions as ``self``; ``num_elem`` defaults to ``index.size``.
        Source: SDK ``NkiTensor.indirect`` docstring; the exact rules and trnsim's choices
        where the docs are silent are in ``trnsim.core.indirect``.
        """
        return indirect.tensor_view(self, index, num_elem)

    def __repr__(self) -> str:
        return f"NkiTensor({self.fmt.name}{list(self.shape)} @ {self.memory})"
