"""nisa.rng / nisa.dropout / nisa.set_rng_seed and nl.rand / nl.dropout / nl.random_seed, the
instructions added through the specification registry (issue 12)."""

import sys

import ml_dtypes
import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim.core import costs
from trnsim.core.isa import Op
from trnsim.core.options import CoreOptions
from trnsim.errors import KernelError

BF16 = ml_dtypes.bfloat16
HERE = "test_nki_random.py"
M32 = 0xFFFFFFFF


def _xorwow_reference(words: np.ndarray, n: int) -> np.ndarray:
    """Marsaglia's xorwow (x, y, z, w, v, d; output v + d), written here in Python ints: ``n``
    draws of one lane whose 4 generators' states are ``words [24]``, element i from
    generator i % 4."""
    gens = [list(map(int, words[6 * g : 6 * g + 6])) for g in range(4)]
    out = []
    for i in range(n):
        s = gens[i % 4]
        t = s[0] ^ (s[0] >> 2)
        s[0], s[1], s[2], s[3] = s[1], s[2], s[3], s[4]
        s[4] = (s[4] ^ ((s[4] << 4) & M32)) ^ (t ^ ((t << 1) & M32))
        s[5] = (s[5] + 362437) & M32
        out.append((s[4] + s[5]) & M32)
    return np.array(out, dtype=np.uint64)


def _state_and_bits(dtype, n=10):
    def k():
        st = nl.ndarray((4, 24), nl.uint32, buffer=nl.sbuf)
        nisa.rand_get_state(st)
        bits = nl.ndarray((4, n), dtype, buffer=nl.sbuf)
        nisa.rng(bits)
        o1 = nl.ndarray((4, 24), nl.uint32, buffer=nl.shared_hbm)
        o2 = nl.ndarray((4, n), dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(o1, st)
        nisa.dma_copy(o2, bits)
        return o1, o2

    return nki.run(k).outputs


def test_rng_gives_xorwow_bits_truncated_to_the_dtype():
    state, bits = _state_and_bits(nl.uint32)
    for p in range(4):
        assert np.array_equal(bits[p].astype(np.uint64), _xorwow_reference(state[p], 10))
    _, low = _state_and_bits(nl.uint8)
    assert np.array_equal(low[0].astype(np.uint64), _xorwow_reference(state[0], 10) & 0xFF)


def _seeded_rng(seed_value: int):
    def k():
        seed = nl.full((1, 1), seed_value, dtype=nl.int32, buffer=nl.sbuf)
        nisa.set_rng_seed(seed)
        bits = nl.ndarray((128, 16), nl.uint32, buffer=nl.sbuf)
        nisa.rng(bits)
        out = nl.ndarray((128, 16), nl.uint32, buffer=nl.shared_hbm)
        nisa.dma_copy(out, bits)
        return out

    return k


def test_set_rng_seed_repeats_the_sequence_on_any_core_and_seed():
    a = nki.run(_seeded_rng(42), seed=1).outputs
    b = nki.run(_seeded_rng(42), seed=2).outputs  # another power-on state
    c = nki.run(_seeded_rng(43), seed=1).outputs
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def _dropout_kernel(data, prob, out_dtype=None):
    def k(x, *pt):
        t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(t, x)
        r = nl.ndarray(x.shape, out_dtype or x.dtype, buffer=nl.sbuf)
        p = prob
        if pt:
            p = nl.ndarray(pt[0].shape, nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(p, pt[0])
        where["line"] = sys._getframe().f_lineno + 1
        nisa.dropout(r, t, p)
        o = nl.ndarray(x.shape, out_dtype or x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(o, r)
        return o

    return k


where: dict[str, int] = {}


@pytest.mark.parametrize("dtype", [np.float32, BF16, np.int32])
def test_dropout_probability_zero_keeps_every_bit_and_one_drops_all(dtype):
    x = (np.arange(128 * 64).reshape(128, 64) % 97 + 1).astype(dtype)
    kept = nki.run(_dropout_kernel(x, 0.0), x).outputs
    assert kept.tobytes() == x.tobytes()
    gone = nki.run(_dropout_kernel(x, 1.0), x).outputs
    assert (gone.astype(np.float64) == 0).all()


def test_dropout_drops_where_the_uniform_draw_is_below_the_probability():
    """The same PRNG stream as rand2: after the same seed, dropout(p) zeroes exactly the
    elements whose nl.rand value is below p."""

    def k(x):
        seed = nl.full((1, 1), 7, dtype=nl.uint32, buffer=nl.sbuf)
        nl.random_seed(seed)
        u = nl.rand((128, 512), nl.float32)
        nl.random_seed(seed)
        t = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(t, x)
        d = nl.dropout(t, 0.3)
        o1 = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
        o2 = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(o1, u)
        nisa.dma_copy(o2, d)
        return o1, o2

    x = np.ones((128, 512), np.float32)
    u, d = nki.run(k, x).outputs
    assert ((u >= 0) & (u < 1)).all()
    assert np.array_equal(d == 0, u < 0.3)
    assert 0.28 < (d == 0).mean() < 0.32


def test_dropout_per_partition_probability_tile():
    x = np.ones((128, 256), np.float32)
    prob = np.where(np.arange(128) % 2 == 0, 0.0, 1.0).astype(np.float32).reshape(128, 1)
    out = nki.run(_dropout_kernel(x, None), x, prob).outputs
    assert (out[0::2] == 1).all() and (out[1::2] == 0).all()


def test_dropout_dst_dtype_must_equal_data_dtype():
    x = np.ones((128, 64), np.float32)
    with pytest.raises(KernelError) as info:
        nki.run(_dropout_kernel(x, 0.5, out_dtype=nl.bfloat16), x)
    err = info.value
    assert err.rule == "dtype" and "bfloat16" in str(err) and "float32" in str(err)
    assert f"{HERE}:{where['line']}" in str(err)


def test_rng_refuses_float_dst_and_the_gpsimd_prng():
    def float_dst():
        nisa.rng(nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf))

    def gpsimd():
        nisa.rng(nl.ndarray((128, 8), nl.uint32, buffer=nl.sbuf), engine=nisa.gpsimd_engine)

    with pytest.raises(KernelError, match="rng dst dtype float32 not allowed") as info:
        nki.run(float_dst)
    assert info.value.rule == "dtype"
    with pytest.raises(KernelError, match="Vector engine's PRNG only") as info:
        nki.run(gpsimd)
    assert info.value.rule == "not-implemented"


def test_set_rng_seed_needs_one_value():
    def k():
        nisa.set_rng_seed(nl.zeros((1, 2), nl.uint32, buffer=nl.sbuf))

    with pytest.raises(KernelError, match=r"src_seeds must have shape \[1, 1\], got \[1, 2\]"):
        nki.run(k)


def test_nl_rand_is_the_same_on_gen3_and_gen4_and_repeats_with_the_seed():
    def k():
        seed = nl.full((1, 1), 42, dtype=nl.int32, buffer=nl.sbuf)
        nl.random_seed(seed)
        a = nl.rand((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.random_seed(seed)
        b = nl.rand((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        return a, b

    a4, b4 = nki.run(k, target="gen4").outputs
    a3, b3 = nki.run(k, target="gen3").outputs
    assert np.array_equal(a4, b4) and np.array_equal(a3, a4) and np.array_equal(b3, b4)
    assert len(np.unique(a4)) > 60000


def test_nl_dropout_casts_to_dtype():
    def k(x):
        t = nl.load(x)
        d = nl.dropout(t, 0.0, dtype=nl.bfloat16)
        o = nl.ndarray((128, 64), nl.bfloat16, buffer=nl.shared_hbm)
        nl.store(o, d)
        return o

    x = np.full((128, 64), 1.5, np.float32)
    out = nki.run(k, x).outputs
    assert out.dtype == BF16 and (out.astype(np.float32) == 1.5).all()


def test_random_instructions_keep_program_order_on_the_deferred_path():
    """Random state is engine state: the deferred path runs these in program order, so its
    bits equal the plain path's (rand draws between pending matmuls)."""

    def k(a):
        st = nl.ndarray((128, 128), nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(st, a)
        outs = []
        for _ in range(3):
            ps = nl.ndarray((128, 128), nl.float32, buffer=nl.psum)
            nisa.nc_matmul(ps, st, st)
            r = nl.ndarray((128, 128), nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(r, ps)
            d = nl.ndarray((128, 128), nl.float32, buffer=nl.sbuf)
            nisa.dropout(d, r, 0.5)
            o = nl.ndarray((128, 128), nl.float32, buffer=nl.shared_hbm)
            nisa.dma_copy(o, d)
            outs.append(o)
        return tuple(outs)

    a = np.random.default_rng(0).standard_normal((128, 128)).astype(BF16)
    plain = nki.run(k, a).outputs
    fast = nki.run(k, a, options=CoreOptions(deferred=True, fast_paths=True)).outputs
    for x, y in zip(plain, fast, strict=True):
        assert x.tobytes() == y.tobytes()


def test_costed_by_the_named_rules():
    def k():
        t = nl.ndarray((128, 512), nl.uint32, buffer=nl.sbuf)
        nisa.rng(t)
        nisa.dropout(t, t, 0.5)
        nisa.set_rng_seed(nl.zeros((1, 1), nl.uint32, buffer=nl.sbuf))

    rec = nki.run(k, functional=False).instructions
    names = {i.opcode: costs.rule_for(i).name for i in rec if i.opcode in (Op.RNG, Op.DROPOUT)}
    assert names == {Op.RNG: "stream", Op.DROPOUT: "stream"}
    seed = next(i for i in rec if i.opcode is Op.SET_RNG_SEED)
    assert costs.rule_for(seed).name == "rng_state"
