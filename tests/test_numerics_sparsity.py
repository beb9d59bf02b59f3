"""M:N structured sparsity: prune / check / compress / expand for all seven patterns."""

import numpy as np
import pytest

from trnsim.errors import UnknownNameError
from trnsim.numerics.sparsity import (
    PATTERNS,
    SparsityError,
    check,
    compress,
    expand,
    parse_pattern,
    prune,
)


def test_the_seven_trainium_patterns():
    assert set(PATTERNS.values()) == {(4, 16), (4, 12), (4, 8), (2, 8), (2, 4), (1, 4), (1, 2)}
    assert parse_pattern("2:4") == parse_pattern((2, 4)) == (2, 4)
    with pytest.raises(UnknownNameError, match="valid: 4:16, 4:12"):
        parse_pattern("3:4")


def slow_prune(row: np.ndarray, n: int, m: int) -> np.ndarray:
    out = np.zeros_like(row)
    for g in range(0, len(row), m):
        grp = list(enumerate(row[g : g + m].tolist()))
        keep = sorted(grp, key=lambda t: (-abs(t[1]), t[0]))[:n]
        for i, v in keep:
            out[g + i] = v
    return out


@pytest.mark.parametrize("name", list(PATTERNS))
def test_prune_keeps_the_largest_magnitudes(name):
    n, m = PATTERNS[name]
    rng = np.random.default_rng(m * 10 + n)
    x = rng.integers(-5, 6, (3, 4 * 48)).astype(np.float32)  # small ints: many ties
    pruned = prune(x, name)
    for r in range(3):
        assert np.array_equal(pruned[r], slow_prune(x[r], n, m))
    check(pruned, name)
    assert pruned.dtype == x.dtype


@pytest.mark.parametrize("name", list(PATTERNS))
def test_compress_expand_round_trip(name):
    n, m = PATTERNS[name]
    x = prune(np.random.default_rng(1).standard_normal((5, 2 * 48)), name)
    x[0, :m] = 0  # an empty group gets padded with zeros
    values, idx = compress(x, name)
    assert values.shape == (5, 2 * 48 * n // m) and idx.dtype == np.uint8
    assert (idx < m).all()
    g = idx.reshape(5, -1, n).astype(int)
    assert (np.diff(g, axis=-1) > 0).all()  # strictly increasing inside each group
    assert np.array_equal(expand(values, idx, name), x)


def test_axis_zero():
    x = np.random.default_rng(2).standard_normal((8, 3))
    p = prune(x, "2:4", axis=0)
    assert np.array_equal(p, prune(x.T, "2:4").T)
    v, i = compress(p, "2:4", axis=0)
    assert v.shape == (4, 3)
    assert np.array_equal(expand(v, i, "2:4", axis=0), p)


def test_check_names_pattern_and_first_offending_group():
    x = np.zeros(16)
    x[12:15] = 1.0  # group 3 has 3 non-zeros
    x[4:7] = 1.0  # group 1 too: it is the first
    with pytest.raises(SparsityError) as info:
        check(x, "2:4")
    assert str(info.value) == (
        "sparsity 2:4 violated along axis -1: group 1 (elements 4..7) has 3 non-zeros, "
        "at most 2 allowed"
    )
    y = np.zeros((2, 8))
    y[1, :3] = 1
    with pytest.raises(SparsityError, match=r"group 0 \(elements 0..3\) at index \(1,\)"):
        check(y, (1, 4))


def test_compress_refuses_a_dense_array_and_expand_bad_indices():
    with pytest.raises(SparsityError, match="sparsity 1:2"):
        compress(np.ones(4), "1:2")
    with pytest.raises(SparsityError, match="repeats an index"):
        expand(np.ones(2), np.array([1, 1], np.uint8), "2:4")
    with pytest.raises(SparsityError, match=r"indices must be in 0\.\.3"):
        expand(np.ones(2), np.array([0, 4], np.uint8), "2:4")


def test_length_must_be_a_multiple_of_m():
    with pytest.raises(Exception, match="not a multiple of the group size 16"):
        prune(np.ones(24), "4:16")


def test_nan_is_kept():
    x = np.array([np.nan, 5.0, 1.0, 0.0])
    assert np.isnan(prune(x, "1:4")[0])
