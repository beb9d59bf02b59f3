"""Legacy index expressions under ``//`` and ``%``: exact where the result stays affine (every
coefficient a multiple of the divisor, or the whole range inside one block), refused otherwise
(Autocomp's conv1d candidates store through ``k0 = i_flat // K1``, ``k1 = i_flat % K1``)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import trnsim.nki as tnki
from trnsim.errors import KernelError

tnki.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402


@pytest.mark.parametrize(
    ("coef", "const", "size", "d"),
    [
        (4, 2, 16, 2),  # coefficients multiples of d
        (6, -5, 9, 3),  # negative constant: floor semantics
        (1, 0, 64, 64),  # one block from 0
        (1, 192, 64, 64),  # one block from 3*64
        (1, 130, 60, 64),  # inside block 2, not at its start
        (-1, 63, 64, 64),  # a negative coefficient inside one block
    ],
)
def test_divmod_of_an_index_matches_numpy(coef: int, const: int, size: int, d: int) -> None:
    e = nl.arange(size)[None, :] * coef + const
    q, r = e // d, e % d
    v = e.values()
    assert q.shape == r.shape == e.shape
    np.testing.assert_array_equal(q.values(), v // d)
    np.testing.assert_array_equal(r.values(), v % d)


def test_divmod_of_a_two_axis_index_matches_numpy() -> None:
    i_p, i_f = nl.mgrid[0:8, 0:4]
    for a, b, c, d in itertools.product((3, 6), (3, 9), (0, 1, 4), (3,)):
        e = i_p * a + i_f * b + c
        np.testing.assert_array_equal((e // d).values(), e.values() // d)
        np.testing.assert_array_equal((e % d).values(), e.values() % d)


def test_a_division_that_is_not_affine_is_refused_naming_the_values() -> None:
    e = nl.arange(8)[None, :]
    with pytest.raises(KernelError) as info:
        e // 4
    assert info.value.rule == "not-implemented"
    assert "0..7" in info.value.message and "blocks of 4" in info.value.message
    with pytest.raises(KernelError) as info:
        e % 0
    assert info.value.rule == "index-expr"


@nki.jit
def _flat_store(img):
    """A [C, K0*K1] tile loaded and stored through a flattened index split into (k0, k1) with
    K0 == 1 (our own kernel, the shape of the conv1d candidates' store)."""
    c, _, k0n, k1n = img.shape
    out = nl.ndarray((c, 1, k0n, k1n), dtype=img.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(c)[:, None]
    i_flat = nl.arange(k0n * k1n)[None, :]
    k0, k1 = i_flat // k1n, i_flat % k1n
    t = nl.load(img[i_p, 0, k0, k1])
    nl.store(out[i_p, 0, k0, k1], value=nl.multiply(t, 2.0))
    return out


def test_a_kernel_storing_through_divmod_indices_matches_numpy() -> None:
    img = np.random.default_rng(0).uniform(-1, 1, (128, 1, 1, 96)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(_flat_store(img)), img * 2.0)
