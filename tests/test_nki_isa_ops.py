"""Op-level tests of the remaining instructions against independent NumPy goldens:
activate2, tensor_copy_predicated, tensor_tensor_scan, scalar_tensor_tensor,
tensor_partition_reduce, range_select, local_gather, affine_select, select_reduce,
rand2 / rand_set_state / rand_get_state, sendrecv."""

import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim.errors import KernelError

RNG = np.random.default_rng(11)


def load(x):
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(t, x)
    return t


def store(t):
    out = nl.ndarray(t.shape, t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(out, t)
    return out


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def test_activate2_two_alu_stages_then_activation_and_reduce():
    x, v = f32(64, 50), f32(64, 1)

    def k(x, v):
        d = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        r = nl.ndarray((64, 1), nl.float32, buffer=nl.sbuf)
        nisa.activate2(d, nl.exp, load(x), imm0=load(v), imm1=2.0, op0=nl.subtract,
                       op1=nl.multiply, reduce_op=nl.add, reduce_res=r)  # fmt: skip
        return store(d), store(r)

    d, r = nki.run(k, x, v).outputs
    ref = np.exp((x.astype(np.float64) - v) * 2.0)
    np.testing.assert_allclose(d, ref, rtol=2e-6)
    np.testing.assert_allclose(r[:, 0], ref.sum(axis=1), rtol=1e-5)


def test_tensor_copy_predicated_both_polarities():
    dst0, src = f32(32, 40), f32(32, 40)
    pred = (RNG.random((32, 40)) < 0.3).astype(np.uint8)

    def k(d, s, p, rev):
        t = load(d)
        nisa.tensor_copy_predicated(t, load(s), load(p), reverse_pred=rev)
        return store(t)

    for rev in (False, True):
        out = nki.run(k, dst0, src, pred, rev).outputs
        keep = pred.astype(bool) ^ rev
        np.testing.assert_array_equal(out, np.where(keep, src, dst0))


def test_tensor_tensor_scan_follows_the_docstring_recurrence():
    a, b = f32(16, 30), f32(16, 30)
    init = f32(16, 1)

    def k(a, b, init, rev0):
        d = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor_scan(d, load(a), load(b), load(init), nl.subtract, nl.add,
                                reverse0=rev0)  # fmt: skip
        return store(d)

    for rev0 in (False, True):
        out = nki.run(k, a, b, init, rev0).outputs
        acc, ref = init[:, 0].astype(np.float64), np.empty((16, 30))
        for i in range(30):  # result[i] = (data0[i] - prev) + data1[i]; reversed: prev - data0
            acc = ((acc - a[:, i]) if rev0 else (a[:, i] - acc)) + b[:, i]
            ref[:, i] = acc
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_scalar_tensor_tensor_with_vector_operand_and_reverse():
    x, s, y = f32(48, 20), f32(48, 1), f32(48, 20)

    def k(x, s, y):
        d = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(d, load(x), nl.multiply, load(s), nl.subtract, load(y),
                                  reverse1=True)  # fmt: skip
        return store(d)

    np.testing.assert_allclose(nki.run(k, x, s, y).outputs, y - x * s, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("op,ref", [(nl.add, np.sum), (nl.maximum, np.max)])
def test_tensor_partition_reduce(op, ref):
    x = f32(128, 24)

    def k(x):
        d = nl.ndarray((1, 24), nl.float32, buffer=nl.sbuf)
        nisa.tensor_partition_reduce(d, op, load(x))
        return store(d)

    np.testing.assert_allclose(nki.run(k, x).outputs[0], ref(x, axis=0), rtol=1e-5, atol=1e-5)


def test_range_select_and_its_fill_rule():
    x = f32(32, 64)
    lo = RNG.integers(0, 40, (32, 1)).astype(np.float32)
    hi = lo + RNG.integers(1, 20, (32, 1)).astype(np.float32)

    def k(x, lo, hi):
        d = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        r = nl.ndarray((32, 1), nl.float32, buffer=nl.sbuf)
        nisa.range_select(d, load(x), nl.greater_equal, nl.less, load(lo), load(hi),
                          reduce_res=r, range_start=3)  # fmt: skip
        return store(d), store(r)

    d, r = nki.run(k, x, lo, hi).outputs
    idx = 3 + np.arange(64)[None, :]
    ref = np.where((idx >= lo) & (idx < hi), x, np.finfo(np.float32).min)
    np.testing.assert_array_equal(d, ref)
    np.testing.assert_array_equal(r[:, 0], ref.max(axis=1))

    def bad(x, lo, hi):
        d = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.range_select(d, load(x), nl.less, nl.less, load(lo), load(hi), on_false_value=0.0)

    with pytest.raises(KernelError, match=r"range-select-fill: .*got 0\.0 \(test_nki_isa_ops"):
        nki.run(bad, x, lo, hi)


def test_local_gather_the_documented_example():
    """The SDK's own example (``nki/test/test_nki_isa_local_gather.py``): src (128, 512, 4),
    16x4 indices replicated to the 8 GpSimd cores, 4 elements per index; each partition
    gathers from its own data, indices flattened partition-dim first."""
    src = (RNG.random((128, 512, 4)) * 100).astype(np.float32)
    per_core = RNG.integers(0, 512, (16, 4)).astype(np.uint16)
    index = np.tile(per_core, (8, 1))

    def k(src, idx):
        d = nl.ndarray((128, 4, 16, 4), nl.float32, buffer=nl.sbuf)
        nisa.local_gather(d, load(src), load(idx), num_elem_per_idx=4)
        return store(d)

    out = nki.run(k, src, index * 4).outputs
    ref = np.empty((128, 64, 4), np.float32)
    for c in range(8):
        rows = slice(16 * c, 16 * (c + 1))
        ref[rows] = np.take(src[rows], index[rows].flatten(order="F"), axis=1)
    np.testing.assert_array_equal(out, ref.reshape(128, 4, 16, 4))


def test_local_gather_semantics_honours_num_valid_indices():
    from trnsim.core.semantics import local_gather

    src = np.arange(32 * 8, dtype=np.float32).reshape(32, 8)
    index = np.tile(np.arange(16 * 2).reshape(16, 2) % 8, (2, 1)).astype(np.uint16)
    out = local_gather(src, index, 16, 1, num_valid=5)
    for c in range(2):
        rows = slice(16 * c, 16 * (c + 1))
        ids = index[rows].flatten(order="F")[:5]
        np.testing.assert_array_equal(out[rows], src[rows][:, ids])
    with pytest.raises(ValueError, match="num_valid_indices 33"):
        local_gather(src, index, 16, 1, num_valid=33)


def test_affine_select_lower_triangle():
    x = f32(64, 64)

    def k(x):
        d = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.affine_select(d, [[-1, 64]], load(x), -9.0, cmp_op=nl.greater_equal,
                           offset=2, channel_multiplier=1)  # fmt: skip
        return store(d)

    p, f = np.indices((64, 64))
    np.testing.assert_array_equal(nki.run(k, x).outputs, np.where(2 + p - f >= 0, x, -9.0))


def test_select_reduce_scalar_and_vector_fill_with_accumulation():
    a, b = f32(32, 40), f32(32, 40)
    pa = (RNG.random((32, 40)) < 0.5).astype(np.uint8)
    pb = (RNG.random((32, 40)) < 0.5).astype(np.uint8)
    fill = f32(32, 1)

    def k(a, b, pa, pb, fill):
        d1 = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        d2 = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        r = nl.ndarray((32, 1), nl.float32, buffer=nl.sbuf)
        nisa.select_reduce(d1, load(pa), load(a), -5.0, reduce_res=r,
                           reduce_cmd=nisa.reduce_cmd.reset_reduce)  # fmt: skip
        nisa.select_reduce(d2, load(pb), load(b), load(fill), reduce_res=r,
                           reduce_cmd=nisa.reduce_cmd.reduce, reverse_pred=True)  # fmt: skip
        return store(d1), store(d2), store(r)

    d1, d2, r = nki.run(k, a, b, pa, pb, fill).outputs
    ref1 = np.where(pa != 0, a, -5.0)
    ref2 = np.where(pb == 0, b, fill)
    np.testing.assert_array_equal(d1, ref1)
    np.testing.assert_array_equal(d2, ref2)
    np.testing.assert_array_equal(r[:, 0], np.maximum(ref1.max(axis=1), ref2.max(axis=1)))


def test_select_reduce_accumulate_without_reset_is_an_error():
    def k(a, p):
        d = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        r = nl.ndarray((8, 1), nl.float32, buffer=nl.sbuf)
        nisa.select_reduce(
            d, load(p), load(a), 0.0, reduce_res=r, reduce_cmd=nisa.reduce_cmd.reduce
        )

    with pytest.raises(KernelError, match=r"reduce-cmd: .*no reset_reduce of 8 partitions"):
        nki.run(k, f32(8, 4), np.ones((8, 4), np.uint8))


def _xorwow_reference(state, n):
    """Marsaglia's XORWOW in plain Python ints, one generator at a time (independent)."""
    st = [int(v) for v in state]
    out = []
    for _ in range(n):
        x, y, z, w, v, d = st
        t = (x ^ (x >> 2)) & 0xFFFFFFFF
        v2 = (v ^ (v << 4) ^ t ^ (t << 1)) & 0xFFFFFFFF
        d = (d + 362437) & 0xFFFFFFFF
        st = [y, z, w, v, v2, d]
        out.append((v2 + d) & 0xFFFFFFFF)
    return out, st


def test_rand2_xorwow_from_a_set_state_and_get_state():
    seeds = RNG.integers(1, 2**32, (16, 24), dtype=np.uint64).astype(np.uint32)

    def k(seeds):
        nisa.rand_set_state(load(seeds))
        d = nl.ndarray((16, 10), nl.float32, buffer=nl.sbuf)
        nisa.rand2(d, -2.0, 3.0)
        st = nl.ndarray((16, 24), nl.uint32, buffer=nl.sbuf)
        nisa.rand_get_state(st)
        return store(d), store(st)

    vals, state = nki.run(k, seeds).outputs
    for p in (0, 7, 15):
        ref = np.empty(12)
        for g in range(4):  # element i from generator i % 4
            bits, end = _xorwow_reference(seeds[p, 6 * g : 6 * g + 6], 3)
            ref[g::4] = [(b >> 8) * 2.0**-24 for b in bits]
            np.testing.assert_array_equal(state[p, 6 * g : 6 * g + 6], end)
        np.testing.assert_allclose(vals[p], (-2.0 + 5.0 * ref[:10]).astype(np.float32))
    assert (vals >= -2.0).all() and (vals <= 3.0).all()


def test_rand2_is_deterministic_per_seed_and_uniform():
    def k():
        d = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
        nisa.rand2(d, 0.0, 1.0)
        return store(d)

    a = nki.run(k, seed=3).outputs
    np.testing.assert_array_equal(a, nki.run(k, seed=3).outputs)
    assert not np.array_equal(a, nki.run(k, seed=4).outputs)
    assert abs(a.mean() - 0.5) < 0.01 and abs(a.var() - 1 / 12) < 0.005
    assert len(np.unique(a)) > 0.99 * a.size


def test_rand2_rules():
    def bad_range():
        d = nl.ndarray((4, 4), nl.float32, buffer=nl.sbuf)
        nisa.rand2(d, 1.0, 1.0)

    with pytest.raises(KernelError, match=r"rand2-range: .*min 1.0, max 1.0 \(test_nki_isa_ops"):
        nki.run(bad_range)

    def bad_state():
        s = nl.ndarray((4, 6), nl.uint32, buffer=nl.sbuf)
        nisa.rand_get_state(s)

    with pytest.raises(KernelError, match=r"shape: .*24 uint32 per partition.*\[4, 6\]"):
        nki.run(bad_state)

    def on_v3():
        d = nl.ndarray((4, 4), nl.float32, buffer=nl.sbuf)
        nisa.rand2(d, 0.0, 1.0)

    with pytest.raises(KernelError, match=r"generation: rand2 needs NeuronCore-v4"):
        nki.run(on_v3, target="gen3")


def test_sendrecv_swaps_tiles_between_the_two_cores():
    x = f32(2, 64, 32)

    @nki.jit
    def k(x):
        me = nl.program_id(0)
        out = nl.ndarray((2, 64, 32), nl.float32, buffer=nl.shared_hbm)
        mine = load(x[me])
        got = nl.ndarray((64, 32), nl.float32, buffer=nl.sbuf)
        nisa.sendrecv(src=mine, dst=got, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=0)
        nisa.dma_copy(out[me], got)
        return out

    res = nki.run(k[2], x)
    np.testing.assert_array_equal(res.outputs[0], x[1])
    np.testing.assert_array_equal(res.outputs[1], x[0])
    ops = [i.opcode.value for c in res.cores for i in c.record]
    assert ops.count("sendrecv") == 2


def test_sendrecv_rules():
    def lnc1():
        t = nl.ndarray((4, 4), nl.float32, buffer=nl.sbuf)
        nisa.sendrecv(src=t, dst=t, send_to_rank=0, recv_from_rank=0, pipe_id=0)

    with pytest.raises(KernelError, match=r"lnc: sendrecv needs an LNC=2 launch"):
        nki.run(lnc1)

    @nki.jit
    def mismatch(x):
        a = load(x)
        b = nl.ndarray((4, 4), nl.bfloat16, buffer=nl.sbuf)
        nisa.sendrecv(src=a, dst=b, send_to_rank=1, recv_from_rank=1, pipe_id=0)

    with pytest.raises(KernelError, match=r"sendrecv: sendrecv src dtype float32 != dst dtype"):
        nki.run(mismatch[2], f32(4, 4))
