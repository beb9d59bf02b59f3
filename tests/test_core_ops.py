"""Op-level tests: each instruction through nki.isa against an independent NumPy golden."""

import ml_dtypes
import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim.core import Op

BF16 = ml_dtypes.bfloat16
RNG = np.random.default_rng(0)


def sim(kernel, *args, target="gen4"):
    return nki.run(kernel, *args, target=target)


def load(x):
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(t, x)
    return t


def store(t, dtype=None):
    out = nl.ndarray(t.shape, dtype or t.dtype, buffer=nl.shared_hbm)
    if t.memory == "psum":
        s = nl.ndarray(t.shape, dtype or t.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(s, t)
        t = s
    nisa.dma_copy(out, t)
    return out


def test_nc_matmul_accumulate_modes_and_record():
    a = RNG.standard_normal((128, 64)).astype(BF16)
    b = RNG.standard_normal((128, 256)).astype(BF16)

    def k(a, b):
        sa, sb = load(a), load(b)
        p = nl.ndarray((64, 256), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(p, sa, sb)  # auto: overwrite
        nisa.nc_matmul(p, sa, sb)  # auto: accumulate
        q = nl.ndarray((64, 256), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(q, sa, sb, accumulate=False)
        return store(p), store(q)

    res = sim(k, a, b)
    ref = a.astype(np.float32).T @ b.astype(np.float32)
    np.testing.assert_allclose(res.outputs[0], 2 * ref, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(res.outputs[1], ref, rtol=1e-5, atol=1e-4)
    mm = [i for i in res.instructions if i.opcode == Op.NC_MATMUL]
    assert len(mm) == 3 and mm[0].engine.value == "tensor"
    st = mm[0].operand("stationary")
    assert (st.memory, st.dtype, st.partitions, st.free_size) == ("sbuf", "bfloat16", 128, 64)
    assert mm[0].file.endswith("test_core_ops.py") and mm[0].line > 0


def test_nc_matmul_bf16_psum_dst_on_v4():
    a = RNG.standard_normal((128, 32)).astype(np.float32)

    def k(a):
        s = load(a)
        p = nl.ndarray((32, 32), BF16, buffer=nl.psum)
        nisa.nc_matmul(p, s, s)
        return store(p)

    out = sim(k, a).outputs
    assert out.dtype == BF16
    np.testing.assert_array_equal(out, (a.T @ a).astype(BF16))


def test_fp8_double_row_matmul():
    a = RNG.standard_normal((128, 2, 16)).astype(ml_dtypes.float8_e4m3)
    b = RNG.standard_normal((128, 2, 64)).astype(ml_dtypes.float8_e5m2)

    def k(a, b):
        p = nl.ndarray((16, 64), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(p, load(a), load(b), perf_mode=nisa.matmul_perf_mode.double_row)
        return store(p)

    ref = a.astype(np.float64).reshape(256, 16).T @ b.astype(np.float64).reshape(256, 64)
    np.testing.assert_allclose(sim(k, a, b).outputs, ref, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("engine", [nisa.engine.tensor, nisa.engine.vector])
def test_nc_transpose(engine):
    x = RNG.standard_normal((32, 24)).astype(np.float32)

    def k(x):
        d = nl.ndarray((24, 32), nl.float32, buffer=nl.psum)
        nisa.nc_transpose(d, load(x), engine=engine)
        return store(d)

    np.testing.assert_array_equal(sim(k, x).outputs, x.T)


def test_activation_scale_bias_reduce():
    x = RNG.standard_normal((64, 100)).astype(np.float32)
    bias = RNG.standard_normal((64, 1)).astype(np.float32)

    def k(x, bias):
        d = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        r = nl.ndarray((64, 1), nl.float32, buffer=nl.sbuf)
        nisa.activation(
            d, nl.tanh, load(x), bias=load(bias), scale=0.5, reduce_res=r, reduce_op=nl.add
        )
        return store(d), store(r)

    d, r = sim(k, x, bias).outputs
    ref = np.tanh(x * 0.5 + bias)
    np.testing.assert_allclose(d, ref, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(r[:, 0], ref.sum(axis=1), rtol=1e-5, atol=1e-5)


def test_tensor_tensor_tensor_scalar_reduce_copy_cast():
    x = RNG.standard_normal((128, 3, 20)).astype(np.float32)
    y = RNG.standard_normal((128, 3, 20)).astype(np.float32)
    v = RNG.standard_normal((128, 1)).astype(np.float32)

    def k(x, y, v):
        sx, sy, sv = load(x), load(y), load(v)
        tt = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(tt, sx, sy, nl.maximum)
        ts = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(ts, sx, nl.subtract, sv, op1=nl.multiply, operand1=3.0)
        rd = nl.ndarray((128, 3), nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(rd, nl.add, sx, axis=2, negate=True)
        cp = nl.ndarray(x.shape, BF16, buffer=nl.sbuf)
        nisa.tensor_copy(cp, sx)
        return store(tt), store(ts), store(rd), store(cp)

    tt, ts, rd, cp = sim(k, x, y, v).outputs
    np.testing.assert_array_equal(tt, np.maximum(x, y))
    np.testing.assert_allclose(ts, (x - v[:, :, None]) * 3, rtol=1e-6)
    np.testing.assert_allclose(rd, -x.sum(axis=2), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(cp, x.astype(BF16))


def test_memset_iota_reciprocal_exponential():
    x = RNG.uniform(0.5, 2.0, (32, 16)).astype(np.float32)

    def k(x):
        sx = load(x)
        m = nl.ndarray((32, 4), nl.int32, buffer=nl.sbuf)
        nisa.memset(m, 7)
        io = nl.ndarray((32, 2, 5), nl.int32, buffer=nl.sbuf)
        nisa.iota(io, [[10, 2], [1, 5]], offset=3, channel_multiplier=100)
        rc = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(rc, sx)
        ex = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        s = nl.ndarray((32, 1), nl.float32, buffer=nl.sbuf)
        nisa.exponential(ex, sx, max_value=1.0, reduce_res=s)
        return store(m), store(io), store(rc), store(ex), store(s)

    m, io, rc, ex, s = sim(k, x).outputs
    assert (m == 7).all()
    p, i, j = np.meshgrid(np.arange(32), np.arange(2), np.arange(5), indexing="ij")
    np.testing.assert_array_equal(io, 3 + 100 * p + 10 * i + j)
    np.testing.assert_allclose(rc, 1 / x, rtol=1e-7)
    np.testing.assert_allclose(ex, np.exp(x - 1), rtol=1e-6)
    np.testing.assert_allclose(s[:, 0], np.exp(x - 1).sum(axis=1), rtol=1e-5)


def test_exponential_is_v4_only():
    from trnsim.errors import KernelError

    def k():
        t = nl.ndarray((8, 8), nl.float32, buffer=nl.sbuf)
        nisa.memset(t, 0.0)
        nisa.exponential(t, t)

    with pytest.raises(KernelError, match="generation"):
        sim(k, target="gen3")


def test_bn_stats_bn_aggr():
    x = RNG.standard_normal((16, 2, 300)).astype(np.float32)

    def k(x):
        sx = load(x)
        st = nl.ndarray((16, 2, 6), nl.float32, buffer=nl.sbuf)
        for c in range(2):
            nisa.bn_stats(st[:, c, :], sx[:, c, :])
        mv = nl.ndarray((16, 2), nl.float32, buffer=nl.sbuf)
        nisa.bn_aggr(mv, st)
        return store(mv)

    mv = sim(k, x).outputs
    flat = x.reshape(16, -1).astype(np.float64)
    np.testing.assert_allclose(mv[:, 0], flat.mean(axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(mv[:, 1], flat.var(axis=1), rtol=1e-5)


def test_dma_copy_converts_and_views():
    x = RNG.standard_normal((4, 128, 8)).astype(np.float32)

    def k(x):
        t = nl.ndarray((128, 4, 8), BF16, buffer=nl.sbuf)
        nisa.dma_copy(t, x.permute(1, 0, 2))
        return store(t)

    np.testing.assert_array_equal(sim(k, x).outputs, x.transpose(1, 0, 2).astype(BF16))


def test_dma_transpose_and_dma_compute():
    x = RNG.standard_normal((16, 64)).astype(np.float32)
    y = RNG.standard_normal((16, 64)).astype(np.float32)

    def k(x, y):
        t = nl.ndarray((64, 16), nl.float32, buffer=nl.sbuf)
        nisa.dma_transpose(t, x)
        s = nl.ndarray((16, 64), nl.float32, buffer=nl.sbuf)
        nisa.dma_compute(s, [x, y], reduce_op=nl.add)
        return store(t), store(s)

    t, s = sim(k, x, y).outputs
    np.testing.assert_array_equal(t, x.T)
    np.testing.assert_array_equal(s, x + y)


def test_max8_find_index8():
    x = RNG.permutation(128 * 40).reshape(128, 40).astype(np.float32)

    def k(x):
        sx = load(x)
        m = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
        nisa.max8(m, sx)
        idx = nl.ndarray((128, 8), nl.uint32, buffer=nl.sbuf)
        nisa.nc_find_index8(idx, sx, m)
        return store(m), store(idx)

    m, idx = sim(k, x).outputs
    np.testing.assert_array_equal(m, -np.sort(-x, axis=1)[:, :8])
    np.testing.assert_array_equal(idx, np.argsort(-x, axis=1)[:, :8])


def test_quantize_mx_scale_layout_and_values():
    from trnsim.numerics import mx

    src = (RNG.standard_normal((64, 32)) * 10).astype(BF16)

    def k(src):
        q = nl.ndarray((64, 8), nl.float8_e5m2_x4, buffer=nl.sbuf)
        s = nl.ndarray((64, 8), nl.uint8, buffer=nl.sbuf)
        nisa.memset(s, 0)
        nisa.quantize_mx(q, load(src), s)
        return store(q), store(s)

    _q, s = sim(k, src).outputs
    # group g (8 partitions x 4 elements) -> scale partition (g // 4) * 32 + g % 4
    blocks = src.astype(np.float32).reshape(8, 8, 8, 4).transpose(0, 2, 1, 3).reshape(8, 8, 32)
    ref = mx.quantize(blocks, "float8_e5m2", axis=-1, block=32, scale_rule="nki")
    rows = [0, 1, 2, 3, 32, 33, 34, 35]
    np.testing.assert_array_equal(s[rows], np.asarray(ref.scales).view(np.uint8).reshape(8, 8))
    assert (np.delete(s, rows, axis=0) == 0).all()


def test_lnc2_two_programs_share_hbm():
    x = RNG.standard_normal((256, 16)).astype(np.float32)

    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        pid = nl.program_id(0)
        assert nl.num_programs() == 2
        t = nl.ndarray((128, 16), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(t, x[pid * 128 : (pid + 1) * 128, :])
        nisa.tensor_scalar(t, t, nl.multiply, float(pid + 1))
        nisa.core_barrier()
        nisa.dma_copy(out[pid * 128 : (pid + 1) * 128, :], t)
        return out

    res = nki.run(k[2], x)
    np.testing.assert_allclose(res.outputs[:128], x[:128])
    np.testing.assert_allclose(res.outputs[128:], 2 * x[128:])
    assert {i.core for i in res.instructions} == {0, 1}


def test_stochastic_rounding_is_unbiased_and_seeded():
    x = np.full((128, 512), 1.0 + 2**-10, dtype=np.float32)  # between two bf16 values

    def k(x):
        t = nl.ndarray(x.shape, BF16, buffer=nl.sbuf)
        nisa.tensor_copy(t, load(x))
        return store(t)

    rne = sim(k, x).outputs.astype(np.float32)
    assert (rne == 1.0).all()
    a = nki.run(k, x, rounding="stochastic", seed=3).outputs.astype(np.float32)
    b = nki.run(k, x, rounding="stochastic", seed=3).outputs.astype(np.float32)
    np.testing.assert_array_equal(a, b)
    assert abs(a.mean() - (1.0 + 2**-10)) < 2**-12


def test_timing_only_run_records_without_data():
    mod_a = RNG.standard_normal((128, 128)).astype(BF16)

    def k(a):
        p = nl.ndarray((128, 128), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(p, load(a), load(a))
        return store(p)

    res = nki.run(k, mod_a, functional=False)
    assert [i.opcode.value for i in res.instructions] == [
        "dma_copy",
        "dma_copy",
        "nc_matmul",
        "tensor_copy",
        "dma_copy",
    ]
    assert np.isnan(res.outputs).all()


def test_install_makes_nki_imports_resolve():
    nki.install()
    import nki as real_name
    import nki.isa as nisa2
    import nki.language as nl2

    assert real_name is nki and nl2 is nl and nisa2 is nisa
