"""Functional collectives on real NumPy data for N ranks: the slow, obvious path is the spec.

Each algorithm moves chunks between per-rank buffers step by step, exactly as the algorithm of
the same name in :mod:`trnsim.fabric.collectives` is timed, so the *reduction order* (which
matters bit for bit in floating point) is the algorithm's own, fixed and documented:

- ``direct`` (mesh): the owner of chunk c reduces all ranks' chunk c in rank order,
  ``((x0 + x1) + x2) + ...``; every chunk has the same order (the reference order).
- ``ring``: chunk c starts at rank c and travels c -> c+1 -> ... (mod n), each rank adding its own
  data on the right: ``((x_c + x_{c+1}) + x_{c+2}) + ...``.
- ``rdh`` (recursive halving, distance doubling): ranks >= 2^k first fold into rank - 2^k
  (``x_i + x_{i+2^k}``), then step j combines partial sums 2^j apart, lower rank on the left:
  a pairwise tree over rank indices.

:func:`reduction_order` states each order as data; the tests rebuild results from it with a
plain left fold and compare bit for bit. Reductions: ``sum``, ``max``, ``min``, ``prod``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from trnsim.errors import ConfigError, UnknownNameError

REDUCE: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "sum": np.add,
    "max": np.maximum,
    "min": np.minimum,
    "prod": np.multiply,
}
ALGOS = ("direct", "ring", "rdh")


def _check(inputs: Sequence[np.ndarray], same_shape: bool = True) -> list[np.ndarray]:
    if len(inputs) < 1:
        raise ConfigError("a collective needs at least one rank; got 0 input arrays")
    arrays = [np.asarray(x) for x in inputs]
    if same_shape:
        shapes = {(a.shape, a.dtype) for a in arrays}
        if len(shapes) != 1:
            raise ConfigError(
                "every rank's buffer must have the same shape and dtype; got "
                f"{sorted(map(str, shapes))}"
            )
    return arrays


def _reducer(op: str) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    if op not in REDUCE:
        raise UnknownNameError(f"unknown reduction {op!r}; valid: {', '.join(REDUCE)}")
    return REDUCE[op]


def _algo(algo: str) -> str:
    if algo not in ALGOS:
        raise UnknownNameError(f"unknown functional algorithm {algo!r}; valid: {', '.join(ALGOS)}")
    return algo


def reduction_order(algo: str, n: int, chunk: int) -> list:
    """How chunk ``chunk`` of the result is reduced over ``n`` ranks: a nested list (a tree) of
    rank indices; a list ``[a, b, c]`` means ``(a op b) op c`` and nested lists are sub-trees."""
    _algo(algo)
    if algo == "direct":
        return list(range(n))
    if algo == "ring":
        return [(chunk + i) % n for i in range(n)]
    p2 = 1 << (n.bit_length() - 1)
    nodes: list = [[i, i + p2] if i + p2 < n else i for i in range(p2)]
    while len(nodes) > 1:
        nodes = [[nodes[i], nodes[i + 1]] for i in range(0, len(nodes), 2)]
    return nodes[0] if isinstance(nodes[0], list) else [nodes[0]]


def fold(tree: list | int, values: Sequence[np.ndarray], op: str) -> np.ndarray:
    """Reduce ``values`` following ``tree`` (see :func:`reduction_order`), left to right."""
    f = _reducer(op)
    if isinstance(tree, int):
        return values[tree]
    acc = fold(tree[0], values, op)
    for sub in tree[1:]:
        acc = f(acc, fold(sub, values, op))
    return acc


def _chunks(x: np.ndarray, n: int) -> list[np.ndarray]:
    return [c.copy() for c in np.array_split(x.reshape(-1), n)]


def reduce_scatter(inputs: Sequence[np.ndarray], op: str = "sum", algo: str = "ring") -> list:
    """Rank r receives chunk r (of ``np.array_split(x.ravel(), n)``) of the reduction."""
    arrays, f, n = _check(inputs), _reducer(op), len(inputs)
    parts = [_chunks(a, n) for a in arrays]  # parts[rank][chunk]
    if _algo(algo) == "direct":
        out = []
        for c in range(n):
            acc = parts[0][c]
            for r in range(1, n):
                acc = f(acc, parts[r][c])
            out.append(acc)
        return out
    if algo == "ring":
        # step s: rank r sends its running chunk (r - s) to r + 1, which adds its own on the right
        running = [parts[r][r] for r in range(n)]  # rank r starts chunk r
        holder_chunk = list(range(n))
        for _ in range(n - 1):
            sent = [(running[r], holder_chunk[r]) for r in range(n)]
            for r in range(n):
                buf, c = sent[(r - 1) % n]
                running[r] = f(buf, parts[r][c])
                holder_chunk[r] = c
        # after n - 1 steps rank r holds chunk r + 1; rotate to the owner
        out: dict[int, np.ndarray] = {holder_chunk[r]: running[r] for r in range(n)}
        return [out[c] for c in range(n)]
    # rdh
    p2 = 1 << (n.bit_length() - 1)
    bufs = [arrays[r].reshape(-1).copy() for r in range(n)]
    for i in range(n - p2):  # fold the extra ranks
        bufs[i] = f(bufs[i], bufs[i + p2])
    step = 1
    while step < p2:  # distance doubling; every rank keeps the whole vector (clear, not fast)
        new = list(bufs)
        for r in range(p2):
            partner = r ^ step
            lo, hi = min(r, partner), max(r, partner)
            new[r] = f(bufs[lo], bufs[hi])
        bufs, step = new, step * 2
    return [_chunks(bufs[r % p2], n)[r] for r in range(n)]


def all_gather(inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Every rank receives the concatenation of all ranks' (flattened) buffers in rank order."""
    arrays = _check(inputs, same_shape=False)
    flat = np.concatenate([a.reshape(-1) for a in arrays])
    return [flat.copy() for _ in arrays]


def all_reduce(inputs: Sequence[np.ndarray], op: str = "sum", algo: str = "ring") -> list:
    """Reduce-scatter then all-gather; every rank gets the same bits, shaped like its input."""
    arrays = _check(inputs)
    shards = reduce_scatter(arrays, op, algo)
    flat = all_gather(shards)
    return [f.reshape(arrays[0].shape) for f in flat]


def all_to_all(inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Rank r's buffer is split into n chunks; rank d receives chunk d of every rank, in order."""
    arrays, n = _check(inputs), len(inputs)
    parts = [_chunks(a, n) for a in arrays]
    return [np.concatenate([parts[s][d] for s in range(n)]) for d in range(n)]


def all_to_all_v(send: Sequence[Sequence[np.ndarray]]) -> list[list[np.ndarray]]:
    """Uneven all-to-all: ``send[s][d]`` goes from s to d; returns ``recv[d][s]``."""
    n = len(send)
    bad = [s for s, row in enumerate(send) if len(row) != n]
    if bad:
        raise ConfigError(f"all-to-all-v needs {n} send buffers per rank; ranks {bad} differ")
    return [[np.asarray(send[s][d]).copy() for s in range(n)] for d in range(n)]


def broadcast(inputs: Sequence[np.ndarray], root: int = 0) -> list[np.ndarray]:
    """Every rank receives the root's buffer."""
    arrays = _check(inputs)
    if not 0 <= root < len(arrays):
        raise ConfigError(f"broadcast root must be in [0, {len(arrays)}), got {root}")
    return [arrays[root].copy() for _ in arrays]


def permute(inputs: Sequence[np.ndarray], shift: int = 1) -> list[np.ndarray]:
    """Send-recv: rank r sends its buffer to rank (r + shift) mod n."""
    arrays, n = _check(inputs, same_shape=False), len(inputs)
    return [arrays[(d - shift) % n].copy() for d in range(n)]
