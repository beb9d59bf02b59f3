"""Legacy index expressions: ``nl.arange``, ``nl.mgrid``, affine combinations, masks.

A legacy kernel indexes a tensor with affine expressions of *iterators*: ``nl.arange(n)`` is one
iterator of ``n`` values, ``[:, None]`` / ``[None, :]`` place it on an axis of the tile, and
``k * 128 + i_p`` is an affine combination (integer coefficients and offset). Indexing a tensor
with such expressions (``a[i_p, i_f]``) selects a tile whose shape is the NumPy broadcast of the
expressions' shapes; since every expression is affine, the tile is a strided view of the tensor
(stride of a tile axis = sum over tensor dims of dim stride x coefficient), so it lowers onto the
core's ``View`` with no data movement. A comparison of expressions (``i_p < n``) is a *mask*:
it is evaluated over the tile's index space and must select a box (one range per axis), which
the instruction is then restricted to. Sources: SDK 2.26 ``general/nki/programming_model.rst``
("Tensor indexing", "Masking"), ``api/nki.api.shared.rst``, ``nl.arange`` / ``nl.mgrid``
docstrings.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterator
from typing import Any

import numpy as np

from trnsim.core.location import fail, warn


class Iter:
    """One iterator: the integers ``0 .. size-1`` (an ``arange``'s start and step live in the
    expression's coefficient and offset)."""

    __slots__ = ("size",)

    def __init__(self, size: int) -> None:
        self.size = int(size)


def _is_int(x: Any) -> bool:
    return isinstance(x, int | np.integer) and not isinstance(x, bool)


class Expr:
    """``const + sum(coef * iterator)``, each iterator placed on one axis of an ``ndim``-d
    index space (NumPy broadcasting: a missing axis has size 1)."""

    __slots__ = ("_key", "axis", "const", "ndim", "terms")

    def __init__(
        self, terms: dict[Iter, int], const: int, axis: dict[Iter, int], ndim: int
    ) -> None:
        self.terms, self.const, self.axis, self.ndim = terms, int(const), axis, ndim
        self._key: tuple[Any, ...] | None = None

    def structure(self) -> tuple[Any, ...]:
        """What indexing with this expression depends on (``expr_index``'s cache key)."""
        if self._key is None:
            terms = tuple(
                sorted((a, it.size, self.terms.get(it, 0)) for it, a in self.axis.items())
            )
            self._key = ("e", terms, self.const, self.ndim)
        return self._key

    # ---- shape --------------------------------------------------------------------------

    @property
    def shape(self) -> tuple[int, ...]:
        s = [1] * self.ndim
        for it, a in self.axis.items():
            s[a] = it.size
        return tuple(s)

    def _placed(self, ndim: int) -> dict[Iter, int]:
        return {it: a + ndim - self.ndim for it, a in self.axis.items()}

    # ---- NumPy-style axis placement: e[:, None], e[None, :] ------------------------------

    def __getitem__(self, key: Any) -> Expr:
        if not isinstance(key, tuple):
            key = (key,)
        new_axis: dict[Iter, int] = {}
        src = 0
        out = 0
        for k in key:
            if k is None:
                out += 1
            elif isinstance(k, slice) and k == slice(None):
                for it, a in self.axis.items():
                    if a == src:
                        new_axis[it] = out
                src += 1
                out += 1
            else:
                raise fail("index-expr", f"index expressions take [:, None]-style keys, got {k!r}")
        if src != self.ndim:
            raise fail(
                "index-expr", f"{key!r} places {src} axes of a {self.ndim}-d index expression"
            )
        return Expr(dict(self.terms), self.const, new_axis, out)

    # ---- affine arithmetic ----------------------------------------------------------------

    def _combine(self, other: Any, sign: int) -> Expr:
        if _is_int(other):
            return Expr(
                dict(self.terms), self.const + sign * int(other), dict(self.axis), self.ndim
            )
        if not isinstance(other, Expr):
            return NotImplemented  # type: ignore[return-value]
        ndim = max(self.ndim, other.ndim)
        axis = self._placed(ndim)
        for it, a in other._placed(ndim).items():
            if axis.setdefault(it, a) != a:
                raise fail(
                    "index-expr",
                    "an iterator appears on two different axes of one index expression",
                )
        terms = dict(self.terms)
        for it, c in other.terms.items():
            terms[it] = terms.get(it, 0) + sign * c
        return Expr(terms, self.const + sign * other.const, axis, ndim)

    def __add__(self, other: Any) -> Expr:
        return self._combine(other, 1)

    __radd__ = __add__

    def __sub__(self, other: Any) -> Expr:
        return self._combine(other, -1)

    def __rsub__(self, other: Any) -> Expr:
        return (-self)._combine(other, 1)

    def __neg__(self) -> Expr:
        return self * -1

    def __mul__(self, other: Any) -> Expr:
        if not _is_int(other):
            raise fail(
                "index-expr",
                f"index expressions are affine: multiply by an integer, not {other!r}",
            )
        k = int(other)
        terms = {it: c * k for it, c in self.terms.items()}
        return Expr(terms, self.const * k, dict(self.axis), self.ndim)

    __rmul__ = __mul__

    # ---- integer division and remainder: exact only where the result stays affine ----------

    def _divmod(self, other: Any) -> tuple[Expr, Expr]:
        """``(self // d, self % d)`` for a positive integer ``d``, where both are affine over
        the same index space: every coefficient a multiple of ``d`` (the quotient divides
        them, the remainder is the constant's), or the expression's whole range inside one
        block ``[q*d, q*d + d)`` (the quotient is ``q``, the remainder ``self - q*d``). The
        compiler folds such index arithmetic into the access pattern (the SDK's own
        programming model keeps indices affine: ``programming_model.rst``, "Index"); any
        other case is refused, naming the values, never approximated."""
        if not _is_int(other) or int(other) <= 0:
            raise fail(
                "index-expr",
                f"an index expression divides by a positive integer, not {other!r}",
            )
        d = int(other)
        if all(c % d == 0 for c in self.terms.values()):
            q_terms = {it: c // d for it, c in self.terms.items()}
            r_terms = dict.fromkeys(self.terms, 0)
            q = Expr(q_terms, self.const // d, dict(self.axis), self.ndim)
            return q, Expr(r_terms, self.const % d, dict(self.axis), self.ndim)
        lo, hi = self.bounds()
        if lo // d == hi // d:
            k = lo // d
            q = Expr(dict.fromkeys(self.terms, 0), k, dict(self.axis), self.ndim)
            return q, self - k * d
        raise fail(
            "not-implemented",
            f"integer division of an index expression by {d} is not affine: its values "
            f"{lo}..{hi} span several blocks of {d} and its coefficients "
            f"{sorted(set(self.terms.values()))} are not multiples of {d}",
        )

    def __floordiv__(self, other: Any) -> Expr:
        return self._divmod(other)[0]

    def __mod__(self, other: Any) -> Expr:
        return self._divmod(other)[1]

    # ---- comparisons make masks -----------------------------------------------------------

    def _cmp(self, other: Any, op: str) -> Mask:
        if not (_is_int(other) or isinstance(other, Expr)):
            raise fail("mask", f"a mask compares index expressions with integers, got {other!r}")
        return Mask("cmp", op, self, other)

    def __lt__(self, o: Any) -> Mask:  # type: ignore[override]
        return self._cmp(o, "<")

    def __le__(self, o: Any) -> Mask:  # type: ignore[override]
        return self._cmp(o, "<=")

    def __gt__(self, o: Any) -> Mask:  # type: ignore[override]
        return self._cmp(o, ">")

    def __ge__(self, o: Any) -> Mask:  # type: ignore[override]
        return self._cmp(o, ">=")

    def __eq__(self, o: Any) -> Mask:  # type: ignore[override]
        return self._cmp(o, "==")

    def __ne__(self, o: Any) -> Mask:  # type: ignore[override]
        return self._cmp(o, "!=")

    __hash__ = object.__hash__

    # ---- values ---------------------------------------------------------------------------

    def values(self, ndim: int | None = None) -> np.ndarray:
        """The expression over its index space (or a wider ``ndim``), as an int64 array."""
        n = self.ndim if ndim is None else ndim
        out = np.full((1,) * n, self.const, dtype=np.int64)
        for it, a in self._placed(n).items():
            shape = [1] * n
            shape[a] = it.size
            out = out + self.terms.get(it, 0) * np.arange(it.size).reshape(shape)
        return out

    def bounds(self) -> tuple[int, int]:
        """(min, max) of the expression over its index space."""
        lo = hi = self.const
        per_axis: dict[int, tuple[int, int]] = {}
        for it, a in self.axis.items():
            c = self.terms.get(it, 0)
            per_axis[a] = (per_axis.get(a, (0, 0))[0] + c, it.size)
        for c, size in per_axis.values():
            span = c * (size - 1)
            lo, hi = (lo + span, hi) if span < 0 else (lo, hi + span)
        return lo, hi

    def __repr__(self) -> str:
        parts = [f"{c}*i{id(it) % 1000}" for it, c in self.terms.items()]
        return f"Expr({' + '.join(parts)} + {self.const}, shape={list(self.shape)})"


_CMP = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}


class Mask:
    """A predicate over a tile's index space: comparisons of index expressions joined by
    ``&`` / ``|`` / ``~``."""

    __slots__ = ("a", "b", "kind", "op")

    def __init__(self, kind: str, op: str, a: Any, b: Any = None) -> None:
        self.kind, self.op, self.a, self.b = kind, op, a, b

    def __and__(self, o: Any) -> Mask:
        return Mask("and", "&", self, _as_mask(o))

    def __or__(self, o: Any) -> Mask:
        return Mask("or", "|", self, _as_mask(o))

    __rand__ = __and__
    __ror__ = __or__

    def __invert__(self) -> Mask:
        return Mask("not", "~", self)

    def __bool__(self) -> bool:
        # Python's ``m1 and m2`` asks for m1's truth value and yields m2: the SDK's own
        # nc_match_replace8 example writes masks that way, so it must run; the dropped
        # condition is reported, never silent.
        warn(
            "mask-bool",
            "a mask used as a Python truth value ('and' / 'or' / 'if') is always true: "
            "'m1 and m2' is m2 alone; combine masks with & and |",
        )
        return True

    @property
    def ndim(self) -> int:
        if self.kind == "const":
            return 0
        if self.kind == "cmp":
            b = self.b.ndim if isinstance(self.b, Expr) else 0
            return max(self.a.ndim, b)
        if self.kind == "not":
            return self.a.ndim
        return max(self.a.ndim, self.b.ndim)

    def evaluate(self, ndim: int) -> np.ndarray:
        if self.kind == "const":
            return np.full((1,) * ndim, bool(self.a))
        if self.kind == "cmp":
            b = self.b.values(ndim) if isinstance(self.b, Expr) else int(self.b)
            return _CMP[self.op](self.a.values(ndim), b)
        if self.kind == "not":
            return ~self.a.evaluate(ndim)
        f = np.logical_and if self.kind == "and" else np.logical_or
        return f(self.a.evaluate(ndim), self.b.evaluate(ndim))

    def expr_for_select(self) -> tuple[Expr, str]:
        """``a cmp b`` as ``(a - b) cmp 0`` (for ``nisa.affine_select``)."""
        if self.kind != "cmp":
            raise fail(
                "affine-select", "affine_select takes one affine comparison, not a combination"
            )
        e = self.a - self.b if isinstance(self.b, Expr) else self.a - int(self.b)
        return e, self.op


def _as_mask(m: Any) -> Mask:
    """A mask operand: a ``Mask``, or a Python / NumPy bool (a comparison of loop indices
    only, ``j + 1 < n``: loop variables are integers here, so it is already evaluated)."""
    if isinstance(m, Mask):
        return m
    if isinstance(m, bool | np.bool_):
        return Mask("const", "", bool(m))
    raise fail("mask", f"a mask combines comparisons of index expressions, got {m!r}")


MAX_BOXES = 64
"""trnsim's limit on the boxes one masked instruction splits into (``boxes``): beyond it the
mask is refused (``not-implemented``) rather than issuing a long run of tiny instructions."""


def _check_mask(mask: Mask, shape: tuple[int, ...]) -> np.ndarray:
    """The mask evaluated over ``shape`` (broadcast), checked to fit the tile. A bool is a
    predicate on the loop iteration (``mask=j + 1 < n`` with loop indices only: the 2.26
    masking guide's "compile-time constant predicate"): True keeps every element, False
    none (the instruction is skipped for that iteration)."""
    if isinstance(mask, bool | np.bool_):
        mask = _as_mask(mask)
    if not isinstance(mask, Mask):
        raise fail("mask", f"mask= takes a comparison of index expressions, got {mask!r}")
    nd = len(shape)
    if mask.ndim > nd:
        raise fail(
            "mask", f"a {mask.ndim}-d mask on a {nd}-d tile {list(shape)} (mask outside the tile)"
        )
    val = mask.evaluate(nd)
    for a, (m, s) in enumerate(zip(val.shape, shape, strict=True)):
        if m not in (1, s):
            raise fail(
                "mask",
                f"mask axis {a} has {m} values but the tile {list(shape)} has {s} (mask "
                "outside the tile)",
            )
    return np.broadcast_to(val, shape)


def box(mask: Mask | None, shape: tuple[int, ...]) -> tuple[slice, ...] | None:
    """The box (one slice per axis of ``shape``) a mask selects; None: no mask.

    The mask is evaluated over ``shape`` (its expressions broadcast to it); a mask that is not a
    box, or whose expressions do not fit the tile, is an error naming both (calls that can
    issue one instruction per box use ``boxes``)."""
    if mask is None or mask is True:
        return None
    full = _check_mask(mask, shape)
    nd = len(shape)
    if not full.any():
        return tuple(slice(0, 0) for _ in shape)
    sl = []
    for a in range(nd):
        others = tuple(i for i in range(nd) if i != a)
        hit = np.flatnonzero(full.any(axis=others) if others else full)
        sl.append(slice(int(hit[0]), int(hit[-1]) + 1))
    sl_t = tuple(sl)
    if not full[sl_t].all():
        raise fail(
            "not-implemented",
            f"mask selects a non-rectangular region of the {list(shape)} tile; this call "
            "takes masks that select one box (a range per axis)",
        )
    return sl_t


def boxes(mask: Mask | None, shape: tuple[int, ...]) -> list[tuple[slice, ...]] | None:
    """The boxes whose union is what ``mask`` selects over ``shape``, disjoint, in row-major
    order; None: no mask. The masked instruction is issued once per box (each box is an
    ordinary instruction and follows every rule, e.g. its start partition), which is what the
    mask means: elements outside it are neither read nor written. Bands of consecutive indices
    with the same selection along an axis share their boxes; more than ``MAX_BOXES`` boxes is
    ``not-implemented``."""
    if mask is None or mask is True:
        return None
    key = (_mask_structure(mask), tuple(shape))
    out = _BOXES.get(key)
    if out is None:
        out = _split(_check_mask(mask, shape))
        if len(_BOXES) >= INDEX_CACHE_ENTRIES:
            _BOXES.clear()
        _BOXES[key] = out
    if len(out) > MAX_BOXES:
        raise fail(
            "not-implemented",
            f"mask selects {len(out)} boxes of the {list(shape)} tile; trnsim issues a masked "
            f"instruction once per box, up to {MAX_BOXES}",
        )
    return out or [tuple(slice(0, 0) for _ in shape)]


_BOXES: dict[tuple[Any, ...], list[tuple[slice, ...]]] = {}
"""``boxes`` results by the mask's structure (a loop builds the same masks over and over)."""


def _mask_structure(m: Any) -> Any:
    """What a mask's value over a shape depends on (``Expr.structure`` for expressions)."""
    if isinstance(m, Mask):
        return (m.kind, m.op, _mask_structure(m.a), _mask_structure(m.b))
    if isinstance(m, Expr):
        return m.structure()
    plain = isinstance(m, int | bool | np.integer | np.bool_)
    return ("v", type(m).__name__, m if plain else id(m))


def _split(sel: np.ndarray) -> list[tuple[slice, ...]]:
    """Disjoint boxes covering the True cells of ``sel``: runs of equal slices along axis 0,
    each split recursively over the remaining axes."""
    if sel.ndim == 0:
        return [()] if bool(sel) else []
    n = sel.shape[0]
    bounds = [0]
    if n > 1:
        flat = sel.reshape(n, -1)
        bounds += (np.flatnonzero((flat[1:] != flat[:-1]).any(axis=1)) + 1).tolist()
    bounds.append(n)
    out: list[tuple[slice, ...]] = []
    for i, j in itertools.pairwise(bounds):
        out += [(slice(i, j), *rest) for rest in _split(sel[i])]
    return out


# ---- constructors ---------------------------------------------------------------------------


def arange(*args: int) -> Expr:
    """``nl.arange([start,] stop[, step])``: a 1-D index expression of a fresh iterator."""
    if not 1 <= len(args) <= 3 or not all(_is_int(a) for a in args):
        raise fail("arange", f"nl.arange takes 1 to 3 integers, got {args!r}")
    start, stop, step = (0, args[0], 1) if len(args) == 1 else (*args, 1)[:3]
    if step == 0:
        raise fail("arange", "nl.arange step must not be 0")
    n = len(range(start, stop, step))
    if n <= 0:
        raise fail("arange", f"nl.arange{args} is empty")
    it = Iter(n)
    return Expr({it: int(step)}, int(start), {it: 0}, 1)


class Grid(tuple):
    """``nl.mgrid[...]``'s result: a tuple of expressions, also ``.p`` / ``.x`` / ``.y`` ..."""

    def _axis(self, i: int, name: str) -> Expr:
        if i >= len(self):
            raise AttributeError(f"a {len(self)}-d mgrid has no .{name}")
        return self[i]

    p = property(lambda self: self._axis(0, "p"))
    x = property(lambda self: self._axis(1, "x"))
    y = property(lambda self: self._axis(2, "y"))
    z = property(lambda self: self._axis(3, "z"))
    w = property(lambda self: self._axis(4, "w"))


class _MGrid:
    """``nl.mgrid[0:128, 0:512]``: one iterator per axis, each placed on its own axis."""

    def __getitem__(self, key: Any) -> Grid:
        if not isinstance(key, tuple):
            key = (key,)
        nd = len(key)
        out = []
        for a, k in enumerate(key):
            if not isinstance(k, slice) or k.stop is None:
                raise fail("mgrid", f"nl.mgrid takes start:stop[:step] slices, got {k!r}")
            e = arange(k.start or 0, k.stop, k.step or 1)
            out.append(Expr(e.terms, e.const, {next(iter(e.axis)): a}, nd))
        return Grid(out)


mgrid = _MGrid()


def ds(start: Any, size: int) -> slice | Expr:
    """``nl.ds(start, size)``: the slice ``start:start+size`` (``start`` may be an index
    expression: then it is an expression)."""
    if isinstance(start, Expr):
        return start + arange(int(size))
    return slice(int(start), int(start) + int(size))


class Dynamic:
    """``t[..., off_tile + e, ...]``: an index on one axis that adds the value of a one-element
    SBUF tile (read when the instruction runs) to the affine expression ``e`` (or 0 for a bare
    tile). Only ``nisa.tensor_copy_dynamic_src`` / ``_dst`` take a tensor indexed so (SDK 2.26
    docstrings; ``nki.errors`` err_copy_dynamic_indirect_indices_not_natively_supported); it
    lowers onto ``.ap(scalar_offset=...)`` (``trnsim.core.indirect`` choice 7)."""

    __slots__ = ("expr", "scalar")

    def __init__(self, scalar: Any, expr: Any = 0) -> None:
        self.scalar, self.expr = scalar, expr

    def __add__(self, other: Any) -> Dynamic:
        if isinstance(other, Expr) or _is_int(other):
            return Dynamic(self.scalar, self.expr + other)
        return NotImplemented

    __radd__ = __add__


def is_expr_key(key: Any) -> bool:
    if isinstance(key, tuple):
        return any(isinstance(k, Expr) for k in key)
    return isinstance(key, Expr)


_INDEX_CACHE: dict[tuple[Any, ...], Any] = {}
INDEX_CACHE_ENTRIES = 4096
"""Index results remembered by structure (a kernel's loop indexes with the same expressions
shifted by its loop counters; each distinct structure is computed once)."""


def _structure(k: Any) -> Any:
    """What an index entry's result depends on: an expression's terms by (axis, size, coef)
    (an iterator is its size: two iterators of one size on one axis index alike), its offset
    and dims; ints and slices as themselves."""
    if isinstance(k, Expr):
        return k.structure()
    if isinstance(k, slice):
        return ("s", k.start, k.stop, k.step)
    return ("i", int(k)) if _is_int(k) else ("?", id(k))


def expr_index(
    shape: tuple[int, ...], strides: tuple[int, ...], on_chip: bool, key: tuple[Any, ...]
) -> tuple[tuple[int, ...], tuple[int, ...], int, int, OutsideTile | None]:
    """``_expr_index`` (below), remembered by the key's structure."""
    ck = (shape, strides, on_chip, tuple(_structure(k) for k in key))
    hit = _INDEX_CACHE.get(ck)
    if hit is not None and hit[4] is None:
        return hit
    res = _expr_index(shape, strides, on_chip, key)
    if res[4] is None:  # an OutsideTile keeps the expressions themselves: not cached
        if len(_INDEX_CACHE) >= INDEX_CACHE_ENTRIES:
            _INDEX_CACHE.clear()
        _INDEX_CACHE[ck] = res
    return res


def _expr_index(
    shape: tuple[int, ...], strides: tuple[int, ...], on_chip: bool, key: tuple[Any, ...]
) -> tuple[tuple[int, ...], tuple[int, ...], int, int, OutsideTile | None]:
    """Index a tensor (``shape`` / ``strides``; dim 0 the partition dim when ``on_chip``) with
    a key of index expressions, ints and full slices. Returns the tile's ``(shape, strides,
    element offset, partition offset, OutsideTile or None)``; every other rule broken is an
    error naming the values."""
    if len(key) != len(shape):
        raise fail("index", f"{len(key)} indices for a {len(shape)}-d tensor {list(shape)}")
    exprs: list[Expr] = []
    for d, k in enumerate(key):
        if isinstance(k, Expr):
            exprs.append(k)
        elif _is_int(k):
            exprs.append(Expr({}, int(k), {}, 0))
        elif isinstance(k, slice):
            start, stop, step = k.indices(shape[d])
            if (k.stop is not None and k.stop > shape[d]) or step <= 0:
                raise fail(
                    "out-of-bounds",
                    f"slice {k.start}:{k.stop} of dim {d} (size {shape[d]}) of {list(shape)}",
                )
            exprs.append(None)  # type: ignore[arg-type]  # placed below
        else:
            raise fail("index", f"unsupported index {k!r} (index expressions, ints, slices)")
    nd = max(e.ndim for e in exprs if e is not None)
    slice_dims = [d for d, e in enumerate(exprs) if e is None]
    if slice_dims:
        # a slice beside index expressions: a fresh iterator on a new trailing axis
        nd_total = nd + len(slice_dims)
        placed = []
        extra = nd
        for d, e in enumerate(exprs):
            if e is None:
                start, stop, step = key[d].indices(shape[d])
                it = Iter(len(range(start, stop, step)))
                placed.append(Expr({it: step}, start, {it: extra}, nd_total))
                extra += 1
            else:
                placed.append(Expr(e.terms, e.const, e._placed(nd), nd_total))
        exprs, nd = placed, nd_total
    out_shape = [1] * nd
    axis_of: dict[Iter, int] = {}
    for e in exprs:
        for it, a in e._placed(nd).items():
            if axis_of.setdefault(it, a) != a:
                raise fail("index-expr", "an iterator appears on two different axes of one index")
            if out_shape[a] not in (1, it.size):
                raise fail(
                    "index-expr",
                    f"index expressions of sizes {out_shape[a]} and {it.size} on axis {a} do "
                    "not broadcast",
                )
            out_shape[a] = it.size
    out_strides = [0] * nd
    offset = p0 = 0
    outside = []
    for d, (e, n, s) in enumerate(zip(exprs, shape, strides, strict=True)):
        lo, hi = e.bounds()
        if lo < 0 or hi >= n:
            outside.append(d)
        partition = on_chip and d == 0
        for it, c in e.terms.items():
            a = e._placed(nd)[it]
            if on_chip and (a == 0) != partition and c != 0 and it.size > 1:
                what = "partition" if partition else "free"
                raise fail(
                    "partition-index",
                    f"the {what} dim {d} of an on-chip tensor {list(shape)} is indexed by an "
                    f"iterator on tile axis {a}: the partition dim must be indexed by the "
                    "tile's first (partition) axis and the free dims by the others",
                )
            out_strides[a] += c * s
        if partition:
            p0 += e.const * s
        else:
            offset += e.const * s
    problem = OutsideTile(tuple(exprs), tuple(shape), nd) if outside else None
    return tuple(out_shape), tuple(out_strides), offset, p0, problem


class OutsideTile:
    """An index that reaches outside its tensor: legal only under a mask that keeps every
    accessed element inside (checked when the mask is known)."""

    def __init__(self, exprs: tuple[Expr, ...], shape: tuple[int, ...], nd: int) -> None:
        self.exprs, self.shape, self.nd = exprs, shape, nd

    def check(self, box: tuple[slice, ...] | None) -> None:
        for d, (e, n) in enumerate(zip(self.exprs, self.shape, strict=True)):
            vals = e.values(self.nd)
            if box is not None:
                key = tuple(
                    b if m > 1 else slice(None) for b, m in zip(box, vals.shape, strict=False)
                )
                vals = vals[key]
            if vals.size == 0:
                continue
            lo, hi = int(vals.min()), int(vals.max())
            if lo < 0 or hi >= n:
                under = "under its mask" if box is not None else "and no mask= keeps it inside"
                raise fail(
                    "out-of-bounds",
                    f"index expression of dim {d} takes values {lo}..{hi} outside 0..{n - 1} "
                    f"of tensor {list(self.shape)} {under}",
                )


def iter_exprs(e: Grid | Expr) -> Iterator[Expr]:
    yield from (e if isinstance(e, tuple) else (e,))
