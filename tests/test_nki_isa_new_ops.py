"""Values of the NKI 0.6 instructions added in issue 13 through the specification, each
against a NumPy reference written here from the instruction's docstring (SDK
``nki/api/nki/isa/__init__.py``)."""

import ml_dtypes
import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl


def _sb(x, dtype=None):
    t = nl.ndarray(x.shape, dtype or x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(t, x)
    return t


def _out(t):
    o = nl.ndarray(t.shape, t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(o, t)
    return o


RNG = np.random.default_rng(13)


def test_tensor_copy_takes_the_tutorials_dtype_argument():
    def k(x):
        ps = nl.ndarray((128, 64), nl.float32, buffer=nl.psum)
        nisa.tensor_copy(ps, _sb(x))
        sb = nl.ndarray((128, 64), nl.bfloat16, buffer=nl.sbuf)
        nisa.tensor_copy(dst=sb, src=ps, dtype=nl.bfloat16)
        return _out(sb)

    x = RNG.standard_normal((128, 64)).astype(np.float32)
    assert np.array_equal(nki.run(k, x).outputs, x.astype(ml_dtypes.bfloat16))


def test_tensor_copy_dtype_rounds_through_it_into_an_fp32_dst():
    """The matmul tutorial's call: fp32 PSUM -> fp32 SBUF with dtype=bfloat16."""

    def k(x):
        ps = nl.ndarray((128, 64), nl.float32, buffer=nl.psum)
        nisa.tensor_copy(ps, _sb(x))
        sb = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=sb, src=ps, dtype=nl.bfloat16)
        return _out(sb)

    x = RNG.standard_normal((128, 64)).astype(np.float32)
    got = nki.run(k, x).outputs
    assert got.dtype == np.float32
    assert np.array_equal(got, x.astype(ml_dtypes.bfloat16).astype(np.float32))
    assert not np.array_equal(got, x)


@pytest.mark.parametrize(
    "op0,operand0,reduce_op", [("multiply", 0.5, "maximum"), ("abs", 0.0, "add")]
)
def test_tensor_scalar_reduce_values_and_reduction(op0, operand0, reduce_op):
    def k(x):
        t = _sb(x)
        d = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        r = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_reduce(
            dst=d,
            data=t,
            op0=getattr(nl, op0),
            operand0=operand0,
            reduce_op=getattr(nl, reduce_op),
            reduce_res=r,
        )
        return _out(d), _out(r)

    x = RNG.standard_normal((64, 40)).astype(np.float32)
    d, r = nki.run(k, x).outputs
    ref = np.abs(x) if op0 == "abs" else x * np.float32(operand0)
    assert np.array_equal(d, ref)
    red = ref.max(axis=1) if reduce_op == "maximum" else ref.sum(axis=1, dtype=np.float32)
    assert np.allclose(r[:, 0], red, rtol=1e-6, atol=0)


def test_tensor_scalar_reduce_accumulates_across_calls_and_negates_only_the_result():
    def k(a, b):
        ta, tb = _sb(a), _sb(b)
        d = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        r = nl.ndarray((a.shape[0], 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_reduce(d, ta, nl.add, 1.0, nl.add)  # into the accumulator only
        nisa.tensor_scalar_reduce(
            d,
            tb,
            nl.add,
            1.0,
            nl.add,
            reduce_res=r,
            reduce_cmd=nisa.reduce_cmd.reduce,
            reduce_res_negate=True,
        )
        r2 = nl.ndarray((a.shape[0], 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_reduce(
            d,
            tb,
            nl.add,
            0.0,
            nl.add,
            reduce_res=r2,
            reduce_cmd=nisa.reduce_cmd.load_reduce,
            reduce_init=7.0,
        )
        return _out(r), _out(r2)

    a = np.arange(32 * 8, dtype=np.float32).reshape(32, 8)
    b = np.ones((32, 8), np.float32)
    r, r2 = nki.run(k, a, b).outputs
    assert np.array_equal(r[:, 0], -((a + 1).sum(1) + (b + 1).sum(1)))
    assert np.array_equal(r2[:, 0], 7 + b.sum(1))


@pytest.mark.parametrize("op1", ["add", "maximum", "multiply"])
def test_tensor_scalar_cumulative_scans_each_partition(op1):
    def k(x):
        d = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_cumulative(d, _sb(x), nl.multiply, getattr(nl, op1), imm0=2.0)
        return _out(d)

    x = RNG.uniform(0.5, 1.5, (16, 12)).astype(np.float32)
    got = nki.run(k, x).outputs
    y = x * np.float32(2)
    ref = np.empty_like(y)
    reg = {"add": 0.0, "maximum": -np.inf, "multiply": 1.0}[op1]
    reg = np.full(16, reg, np.float32)
    for i in range(y.shape[1]):  # the docstring's pseudocode, in float32
        reg = {"add": np.add, "maximum": np.maximum, "multiply": np.multiply}[op1](y[:, i], reg)
        ref[:, i] = reg
    assert np.array_equal(got, ref)


def test_tensor_scalar_cumulative_load_reduce_starts_from_imm1():
    def k(x):
        d = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_cumulative(
            d,
            _sb(x),
            nl.add,
            nl.add,
            imm0=0.0,
            imm1=10.0,
            reduce_cmd=nisa.reduce_cmd.load_reduce,
        )
        return _out(d)

    x = np.ones((4, 5), np.float32)
    assert np.array_equal(nki.run(k, x).outputs, 10 + np.cumsum(x, axis=1))


def test_nc_stream_shuffle_broadcasts_and_keeps_masked_partitions():
    def k(x, y):
        src = _sb(x)
        dst = _sb(y)
        nisa.nc_stream_shuffle(dst=dst[0:32, :], src=src[0:1, :], shuffle_mask=[0] * 32)
        mask = [(i + 1) % 32 for i in range(32)]
        mask[5] = 255
        nisa.nc_stream_shuffle(dst=dst[64:128, :], src=src[0:64, :], shuffle_mask=mask)
        return _out(dst)

    x = RNG.integers(0, 1000, (128, 6)).astype(np.int32)
    y = np.full((128, 6), -1, np.int32)
    got = nki.run(k, x, y).outputs
    ref = y.copy()
    ref[0:32] = x[0]
    for p in range(64):
        if p % 32 != 5:
            ref[64 + p] = x[(p // 32) * 32 + (p % 32 + 1) % 32]
    assert np.array_equal(got, ref)


def test_nonzero_with_count_matches_the_docstring_example():
    def k(x):
        d = nl.ndarray((x.shape[0], x.shape[1] + 1), nl.int32, buffer=nl.sbuf)
        nisa.memset(d, 5)
        nisa.nonzero_with_count(dst=d, src=_sb(x), index_offset=16, padding_val=-1)
        return _out(d)

    x = np.zeros((32, 8), np.float32)
    x[0] = [0, 1, 1, 0, 0, 1, 0, 0]
    x[16] = [3, 0, 0, 0, 0, 0, 0, -2]
    x[1] = 1  # not a GpSimd core's partition: not read
    got = nki.run(k, x).outputs
    assert got[0].tolist() == [17, 18, 21, -1, -1, -1, -1, -1, 3]
    assert got[16].tolist() == [16, 23, -1, -1, -1, -1, -1, -1, 2]
    assert (got[1] == 5).all() and (got[17] == 5).all()


def test_sequence_bounds_matches_the_legacy_example():
    ids = np.array([[0, 1, 1, 2, 2, 2, 0, 3, 3]], np.int32)

    def k(x):
        d = nl.ndarray((1, 2, 9), nl.int32, buffer=nl.sbuf)
        nisa.sequence_bounds(dst=d, segment_ids=_sb(x))
        return _out(d)

    got = nki.run(k, ids).outputs
    assert got[0, 0].tolist() == [9, 1, 1, 3, 3, 3, 9, 7, 7]
    assert got[0, 1].tolist() == [-1, 3, 3, 6, 6, 6, -1, 9, 9]


def _loop_reference(ids: np.ndarray) -> np.ndarray:
    n = ids.size
    lo, hi = np.empty(n), np.empty(n)
    for i in range(n):
        if ids[i] == 0:
            lo[i], hi[i] = n, -1
            continue
        a = i
        while a > 0 and ids[a - 1] == ids[i]:
            a -= 1
        b = i
        while b + 1 < n and ids[b + 1] == ids[i]:
            b += 1
        lo[i], hi[i] = a, b + 1
    return np.stack([lo, hi])


def test_sequence_bounds_random_segments_float32():
    ids = np.sort(RNG.integers(0, 12, 64)).astype(np.float32).reshape(1, 64)

    def k(x):
        d = nl.ndarray((1, 2, 64), nl.float32, buffer=nl.sbuf)
        nisa.sequence_bounds(d, _sb(x))
        return _out(d)

    assert np.array_equal(nki.run(k, ids).outputs[0], _loop_reference(ids[0]))


def test_nc_match_replace8_docstring_example_and_replacement():
    data = np.array([[1, 2, 3, 4, 8, 8, 8, 8, 8, 8, 8]], np.float32)
    vals = np.array([[3, 8, 8, 8, 8, 8, 8, 8]], np.float32)

    def k(x, v):
        d = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        idx = nl.ndarray((1, 8), nl.uint32, buffer=nl.sbuf)
        nisa.nc_match_replace8(dst=d, data=_sb(x), vals=_sb(v), imm=-1.0, dst_idx=idx)
        return _out(d), _out(idx)

    d, idx = nki.run(k, data, vals).outputs
    assert idx[0].tolist() == [2, 10, 9, 8, 7, 6, 5, 4]
    assert d[0].tolist() == [1, 2, -1, 4, -1, -1, -1, -1, -1, -1, -1]


def test_max8_then_match_replace8_sorts_like_numpy():
    x = RNG.permutation(128 * 24).astype(np.float32).reshape(128, 24)

    def k(t):
        s = _sb(t)
        v = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
        idx = nl.ndarray((128, 8), nl.uint32, buffer=nl.sbuf)
        nisa.max8(dst=v, src=s)
        nisa.nc_match_replace8(dst=s, data=s, vals=v, imm=float("-inf"), dst_idx=idx)
        return _out(v), _out(idx), _out(s)

    v, idx, rest = nki.run(k, x).outputs
    order = np.argsort(-x, axis=1)[:, :8]
    assert np.array_equal(idx, order) and np.array_equal(v, np.take_along_axis(x, order, 1))
    assert (np.isneginf(rest).sum(axis=1) == 8).all()


def test_nc_n_gather_per_partition_over_flattened_free_dims():
    data = RNG.integers(-100, 100, (16, 4, 8)).astype(np.int32)
    ind = RNG.integers(0, 32, (16, 10)).astype(np.uint32)

    def k(x, i):
        d = nl.ndarray((16, 10), nl.int32, buffer=nl.sbuf)
        nisa.nc_n_gather(dst=d, data=_sb(x), indices=_sb(i))
        return _out(d)

    got = nki.run(k, data, ind).outputs
    assert np.array_equal(got, np.take_along_axis(data.reshape(16, 32), ind.astype(np.int64), 1))


def test_topk_takes_the_k_largest_of_each_16_partition_snake_ascending():
    bf = ml_dtypes.bfloat16
    n, k = 42, 8
    x = RNG.permutation(32 * 3).astype(np.float32).reshape(32, 3).astype(bf)

    def kern(t):
        v = nl.ndarray((32, k), nl.bfloat16, buffer=nl.sbuf)
        i = nl.ndarray((32, k), nl.uint32, buffer=nl.sbuf)
        nisa.topk(val_dst=v, idx_dst=i, src=_sb(t), n=n)
        return _out(v), _out(i)

    vals, idx = nki.run(kern, x).outputs
    for g in (0, 16):
        snake = [float(x[g + e % 16, e // 16]) for e in range(n)]  # element e of the snake
        best = sorted(range(n), key=lambda e: snake[e])[-k:]  # ascending, the k largest
        for p in range(g, g + 16):
            assert idx[p].tolist() == best
            assert vals[p].astype(np.float32).tolist() == [snake[e] for e in best]


def test_topk_is_costed_by_its_documented_formula():
    from trnsim.core import costs

    def kern():
        v = nl.ndarray((16, 8), nl.bfloat16, buffer=nl.sbuf)
        i = nl.ndarray((16, 8), nl.uint32, buffer=nl.sbuf)
        s = nl.ndarray((16, 4), nl.bfloat16, buffer=nl.sbuf)
        nisa.memset(s, 1.0)
        nisa.topk(v, i, s, 50)

    run = nki.run(kern)
    ins = next(i for i in run.instructions if i.opcode.value == "topk")
    assert costs.rule_for(ins).name == "topk"
    assert costs.instruction_cycles(ins, run.cores[0].spec) == 4 * 50 + 8
