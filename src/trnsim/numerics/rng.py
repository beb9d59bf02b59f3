"""Counter-based random bits for stochastic rounding.

``StochasticRng(seed)`` hands out random bits as a pure function of ``(seed, counter)``: the
n-th element ever drawn from a generator gets ``splitmix64(mix(seed) + n * GAMMA)``. Nothing
depends on how the caller chunks its arrays: casting an array in one call or in consecutive
pieces with the same generator gives the same bits (tests check this). SplitMix64 (Steele,
Lea, Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014) is the finaliser
used by Java's SplittableRandom; its output stream passes BigCrush.

The hardware draws its stochastic-rounding bits from its own per-lane PRNG (XORWOW on the
NeuronCore-v4 Vector engine, NKI ``rand2`` docstring); those bit streams are not public, so
trnsim does not try to reproduce them bit for bit, only their statistics.
"""

from __future__ import annotations

import numpy as np

from trnsim.errors import NumericsError

GAMMA = np.uint64(0x9E3779B97F4A7C15)  # 2^64 / golden ratio, the SplitMix64 increment
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_MASK64 = (1 << 64) - 1


def splitmix64(z: np.ndarray) -> np.ndarray:
    """The SplitMix64 output function on a uint64 array (wrapping arithmetic)."""
    z = z.astype(np.uint64, copy=True)
    z ^= z >> np.uint64(30)
    z *= _M1
    z ^= z >> np.uint64(27)
    z *= _M2
    z ^= z >> np.uint64(31)
    return z


class StochasticRng:
    """Counter-based generator of uniform random bits; deterministic for a given seed.

    ``offset`` is the counter of the next element; each ``draw`` advances it by the number of
    values drawn, so consecutive casts get fresh, reproducible bits.
    """

    __slots__ = ("_key", "offset", "seed")

    def __init__(self, seed: int, offset: int = 0) -> None:
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
            raise NumericsError(f"StochasticRng seed must be an int, got {seed!r}")
        if offset < 0:
            raise NumericsError(f"StochasticRng offset must be >= 0, got {offset}")
        self.seed = int(seed)
        self.offset = int(offset)
        key = splitmix64(np.array([self.seed & _MASK64], dtype=np.uint64))[0]
        self._key = np.uint64(key)

    def draw(self, n: int, nbits: int) -> np.ndarray:
        """Return ``n`` uniform integers in ``[0, 2**nbits)`` as uint64 and advance the counter.

        The top ``nbits`` of each 64-bit output are used (the best-mixed bits).
        """
        if not 0 <= nbits <= 64:
            raise NumericsError(f"StochasticRng.draw: nbits must be in 0..64, got {nbits}")
        counters = np.arange(self.offset, self.offset + n, dtype=np.uint64)
        self.offset += n
        if nbits == 0:
            return np.zeros(n, dtype=np.uint64)
        out = splitmix64(counters * GAMMA + self._key)
        return out >> np.uint64(64 - nbits)

    def __repr__(self) -> str:
        return f"StochasticRng(seed={self.seed}, offset={self.offset})"


def as_rng(rng: StochasticRng | int | None) -> StochasticRng:
    """Accept a StochasticRng or an int seed; stochastic rounding without one is an error."""
    if isinstance(rng, StochasticRng):
        return rng
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        return StochasticRng(int(rng))
    raise NumericsError(
        "stochastic rounding needs rng= (an int seed or a StochasticRng), got "
        f"{rng!r}; trnsim never draws unseeded random bits"
    )
