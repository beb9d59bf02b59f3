"""Functional collectives: correctness against NumPy and bit-exact reduction orders."""

from __future__ import annotations

import numpy as np
import pytest

from trnsim.errors import ConfigError, UnknownNameError
from trnsim.fabric import functional as F

RANKS = [1, 2, 3, 4, 5, 8, 12]


def _data(n: int, shape=(7, 9), dtype=np.float32, seed=0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed + n)
    # wide dynamic range so that the reduction order changes the float32 bits
    return [(rng.standard_normal(shape) * 10.0 ** rng.integers(-4, 5, shape)).astype(dtype)
            for _ in range(n)]  # fmt: skip


def _reference(algo: str, xs: list[np.ndarray], op: str) -> np.ndarray:
    """Rebuild the result chunk by chunk from the documented order with a plain left fold."""
    n = len(xs)
    parts = [np.array_split(x.reshape(-1), n) for x in xs]
    out = []
    for c in range(n):
        out.append(F.fold(F.reduction_order(algo, n, c), [p[c] for p in parts], op))
    return np.concatenate(out).reshape(xs[0].shape)


@pytest.mark.parametrize("algo", F.ALGOS)
@pytest.mark.parametrize("n", RANKS)
@pytest.mark.parametrize("op", ["sum", "max"])
def test_all_reduce_is_bit_exact_in_its_stated_order(algo, n, op):
    xs = _data(n)
    got = F.all_reduce(xs, op, algo)
    ref = _reference(algo, xs, op)
    for g in got:
        assert g.dtype == np.float32 and g.shape == xs[0].shape
        assert np.array_equal(g.view(np.uint32), ref.view(np.uint32))


@pytest.mark.parametrize("algo", F.ALGOS)
@pytest.mark.parametrize("n", RANKS)
def test_all_reduce_matches_numpy(algo, n):
    xs = _data(n, dtype=np.float64)
    got = F.all_reduce(xs, "sum", algo)[0]
    np.testing.assert_allclose(got, np.sum(xs, axis=0), rtol=1e-9, atol=1e-9)
    ints = [x.astype(np.int64) for x in _data(n)]
    assert np.array_equal(F.all_reduce(ints, "sum", algo)[0], np.sum(ints, axis=0))
    assert np.array_equal(F.all_reduce(ints, "max", algo)[-1], np.max(ints, axis=0))


def test_orders_really_differ_in_float32():
    """Sanity of the test above: the stated orders give different bits on this data."""
    xs = _data(8)
    results = {a: F.all_reduce(xs, "sum", a)[0].tobytes() for a in F.ALGOS}
    assert len(set(results.values())) > 1


@pytest.mark.parametrize("n", RANKS)
def test_reduce_scatter_gives_each_rank_its_chunk(n):
    xs = [x.astype(np.int64) for x in _data(n)]
    total = np.array_split(np.sum(xs, axis=0).reshape(-1), n)
    for algo in F.ALGOS:
        got = F.reduce_scatter(xs, "sum", algo)
        assert all(np.array_equal(g, t) for g, t in zip(got, total, strict=True))


@pytest.mark.parametrize("n", RANKS)
def test_all_gather_all_to_all_broadcast_permute(n):
    xs = [np.arange(6 * n, dtype=np.int32).reshape(n, 6) + 1000 * r for r in range(n)]
    for g in F.all_gather(xs):
        assert np.array_equal(g, np.concatenate([x.ravel() for x in xs]))
    a2a = F.all_to_all(xs)
    for d in range(n):
        assert np.array_equal(a2a[d], np.concatenate([xs[s][d] for s in range(n)]))
    assert all(np.array_equal(b, xs[n - 1]) for b in F.broadcast(xs, root=n - 1))
    shifted = F.permute(xs, shift=1)
    assert all(np.array_equal(shifted[(r + 1) % n], xs[r]) for r in range(n))


def test_all_to_all_twice_is_identity():
    xs = [np.arange(24, dtype=np.int32) + 100 * r for r in range(4)]
    back = F.all_to_all(F.all_to_all(xs))
    assert all(np.array_equal(a, b) for a, b in zip(back, xs, strict=True))


def test_all_to_all_v_with_uneven_sizes():
    n = 4
    send = [[np.full(s + 2 * d, 10 * s + d) for d in range(n)] for s in range(n)]
    recv = F.all_to_all_v(send)
    for d in range(n):
        for s in range(n):
            assert np.array_equal(recv[d][s], send[s][d])
    with pytest.raises(ConfigError, match="needs 4 send buffers"):
        F.all_to_all_v([row[:3] for row in send])


def test_errors_name_the_rule():
    with pytest.raises(ConfigError, match="same shape"):
        F.all_reduce([np.zeros(3), np.zeros(4)])
    with pytest.raises(UnknownNameError, match="valid: sum, max"):
        F.all_reduce([np.zeros(3)], op="mean")
    with pytest.raises(UnknownNameError, match="valid: direct, ring, rdh"):
        F.all_reduce([np.zeros(3)], algo="tree")
    with pytest.raises(ConfigError, match="root"):
        F.broadcast([np.zeros(3)], root=2)
