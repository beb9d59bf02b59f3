"""Structured (M:N) sparsity: keep at most n non-zeros in every group of m consecutive elements.

Trainium's Tensor engine (NeuronCore-v3 and v4) supports seven patterns: 4:16, 4:12, 4:8, 2:8,
2:4, 1:4, 1:2 (aws-neuron-sdk ``about-neuron/arch/neuron-hardware/neuron-core-v3.rst`` and
``neuron-core-v4.rst``). No public NKI API exposes sparse matmul yet (the
``nc_matmul_sparse`` description in ``trainium2_arch.rst`` is commented out), so the
compressed layout here (values plus in-group indices) is trnsim's own: for every group, the
positions of its kept elements in increasing order, padded with the lowest unused positions
(holding zeros) when the group has fewer than n non-zeros.

Groups run along ``axis``, whose length must be a multiple of m.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from trnsim.errors import NumericsError, UnknownNameError

PATTERNS: dict[str, tuple[int, int]] = {
    "4:16": (4, 16),
    "4:12": (4, 12),
    "4:8": (4, 8),
    "2:8": (2, 8),
    "2:4": (2, 4),
    "1:4": (1, 4),
    "1:2": (1, 2),
}


class SparsityError(NumericsError):
    """An array breaks an M:N sparsity pattern; the message names the group."""


def parse_pattern(pattern: str | tuple[int, int]) -> tuple[int, int]:
    """``"2:4"`` or ``(2, 4)`` -> ``(2, 4)``; anything not in PATTERNS raises UnknownNameError."""
    if isinstance(pattern, str):
        key = pattern.strip().replace(" ", "")
    else:
        try:
            n, m = pattern
            key = f"{int(n)}:{int(m)}"
        except (TypeError, ValueError):
            key = repr(pattern)
    if key not in PATTERNS:
        raise UnknownNameError(
            f"unknown sparsity pattern {pattern!r}; valid: {', '.join(PATTERNS)} (keep n of m)"
        )
    return PATTERNS[key]


def _groups(x: np.ndarray, m: int, axis: int, what: str) -> tuple[np.ndarray, int]:
    if x.ndim == 0:
        raise NumericsError(f"{what}: needs an array with at least one axis")
    ax = axis % x.ndim
    if x.shape[ax] % m:
        raise NumericsError(
            f"{what}: axis {axis} has length {x.shape[ax]}, not a multiple of the group size {m}"
        )
    moved = np.moveaxis(x, ax, -1)
    return moved.reshape(*moved.shape[:-1], moved.shape[-1] // m, m), ax


def _ungroup(g: np.ndarray, ax: int) -> np.ndarray:
    return np.moveaxis(g.reshape(*g.shape[:-2], -1), -1, ax)


def prune(x: ArrayLike, pattern: str | tuple[int, int], axis: int = -1) -> np.ndarray:
    """Zero all but the n largest magnitudes of every group of m along ``axis``.

    Ties keep the lower index; NaN counts as the largest magnitude (kept, never hidden).
    Returns an array of the same dtype and shape.
    """
    n, m = parse_pattern(pattern)
    arr = np.asarray(x)
    g, ax = _groups(arr, m, axis, f"prune {n}:{m}")
    mag = np.abs(g.astype(np.float64))
    mag = np.where(np.isnan(mag), np.inf, mag)
    order = np.argsort(-mag, axis=-1, kind="stable")  # largest first, ties by position
    keep = np.zeros(g.shape, dtype=bool)
    np.put_along_axis(keep, order[..., :n], True, axis=-1)
    out = np.where(keep, g, np.zeros((), dtype=g.dtype))
    return _ungroup(out, ax)


def check(x: ArrayLike, pattern: str | tuple[int, int], axis: int = -1) -> None:
    """Raise SparsityError naming the first group (in C order) with more than n non-zeros."""
    n, m = parse_pattern(pattern)
    arr = np.asarray(x)
    g, _ = _groups(arr, m, axis, f"sparsity check {n}:{m}")
    counts = np.count_nonzero(g != 0, axis=-1)
    bad = np.argwhere(counts > n)
    if len(bad):
        first = tuple(int(i) for i in bad[0])
        j = first[-1]
        where = f" at index {first[:-1]} of the other axes" if len(first) > 1 else ""
        raise SparsityError(
            f"sparsity {n}:{m} violated along axis {axis}: group {j} (elements "
            f"{j * m}..{j * m + m - 1}){where} has {int(counts[first])} non-zeros, at most "
            f"{n} allowed"
        )


def compress(
    x: ArrayLike, pattern: str | tuple[int, int], axis: int = -1
) -> tuple[np.ndarray, np.ndarray]:
    """Values and in-group indices (uint8) of a pattern-conforming array.

    Along ``axis`` the length shrinks from L to L * n / m; ``indices[..., i]`` is the position
    (0..m-1) inside its group of ``values[..., i]``. Raises SparsityError if ``x`` breaks the
    pattern (call ``prune`` first).
    """
    n, m = parse_pattern(pattern)
    arr = np.asarray(x)
    check(arr, (n, m), axis)
    g, ax = _groups(arr, m, axis, f"compress {n}:{m}")
    # non-zeros first, then zeros, each in position order; keep n; restore position order
    order = np.argsort(g == 0, axis=-1, kind="stable")[..., :n]
    idx = np.sort(order, axis=-1)
    vals = np.take_along_axis(g, idx, axis=-1)
    return _ungroup(vals, ax), _ungroup(idx.astype(np.uint8), ax)


def expand(
    values: ArrayLike,
    indices: ArrayLike,
    pattern: str | tuple[int, int],
    axis: int = -1,
) -> np.ndarray:
    """Inverse of ``compress``: scatter values back to their positions, zeros elsewhere."""
    n, m = parse_pattern(pattern)
    vals = np.asarray(values)
    idx = np.asarray(indices)
    if vals.shape != idx.shape:
        raise NumericsError(f"expand {n}:{m}: values {vals.shape} and indices {idx.shape} differ")
    gv, ax = _groups(vals, n, axis, f"expand {n}:{m} values")
    gi, _ = _groups(idx.astype(np.int64), n, axis, f"expand {n}:{m} indices")
    if gi.size and (gi.min() < 0 or gi.max() >= m):
        raise SparsityError(
            f"expand {n}:{m}: indices must be in 0..{m - 1}, got {gi.min()}..{gi.max()}"
        )
    s = np.sort(gi, axis=-1)
    dup = np.argwhere((s[..., 1:] == s[..., :-1]).any(axis=-1))
    if len(dup):
        first = tuple(int(i) for i in dup[0])
        raise SparsityError(
            f"expand {n}:{m}: group {first[-1]} repeats an index: {gi[first].tolist()}"
        )
    out = np.zeros((*gv.shape[:-1], m), dtype=vals.dtype)
    np.put_along_axis(out, gi, gv, axis=-1)
    return _ungroup(out, ax)
