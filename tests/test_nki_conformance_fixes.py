"""Defects found by running AWS's nki-library unmodified (issue 13, round 2): each test is the
documented behaviour the library relies on."""

import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim.errors import TrnsimError


def test_nc_version_members_order_by_generation():
    assert nisa.nc_version.gen4 >= nisa.nc_version.gen3 > nisa.nc_version.gen2
    assert not nisa.nc_version.gen2 >= nisa.nc_version.gen3
    assert sorted([nisa.nc_version.gen4, nisa.nc_version.gen2]) == [
        nisa.nc_version.gen2,
        nisa.nc_version.gen4,
    ]
    with pytest.raises(TypeError):
        _ = nisa.nc_version.gen3 < 3


def test_dynamic_range_takes_register_bounds_and_refuses_a_register_step():
    def k(x):
        t = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(t, x)
        reg = nisa.register_alloc()
        nisa.register_load(reg, t)
        out = nl.ndarray((1, 4), nl.int32, buffer=nl.sbuf)
        nisa.memset(out, 0)
        for i in nl.dynamic_range(1, reg):
            nisa.memset(out[0:1, i : i + 1], 7)
        o = nl.ndarray((1, 4), nl.int32, buffer=nl.shared_hbm)
        nisa.dma_copy(o, out)
        return o

    assert nki.run(k, np.array([[3]], np.int32)).outputs.tolist() == [[0, 7, 7, 0]]

    def bad(x):
        t = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(t, x)
        reg = nisa.register_alloc()
        nisa.register_load(reg, t)
        for _ in nl.dynamic_range(0, 4, reg):
            pass
        return x

    with pytest.raises(TrnsimError, match="dynamic-range"):
        nki.run(bad, np.array([[2]], np.int32))


def test_a_jit_kernel_called_from_a_kernel_is_inlined_into_the_same_launch():
    @nki.jit
    def inner(t):
        o = nl.ndarray(t.shape, t.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(o, t, nl.multiply, 3.0)
        return o

    @nki.jit
    def outer(x):
        t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(t, x)
        y = inner(t)  # an SBUF tensor of this launch: only valid if inlined
        o = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(o, y)
        return o

    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    run = nki.run(outer, x)
    np.testing.assert_array_equal(run.outputs, 3 * x)
    assert len(run.cores) == 1
    assert sum(1 for i in run.instructions if i.opcode.value == "tensor_scalar") == 1


def test_auto_accumulate_starts_afresh_in_a_psum_tensor_placed_over_another():
    """nc_matmul(accumulate=None) is inferred per tensor: the first matmul into a new PSUM
    tensor overwrites, even where an earlier tensor at the same address left an open group
    (attention_cte allocates one PSUM tile per query group, all at bank 0)."""

    def k(a, b):
        sa = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        sb = nl.ndarray(b.shape, nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(sa, a)
        nisa.dma_copy(sb, b)
        p0 = nl.ndarray((4, 8), nl.float32, buffer=nl.psum, address=(0, 0))
        p1 = nl.ndarray((4, 8), nl.float32, buffer=nl.psum, address=(0, 0))
        outs = []
        for p, twice in ((p0, True), (p1, False)):
            nisa.nc_matmul(p, sa, sb)
            if twice:  # a second write to the same tensor accumulates
                nisa.nc_matmul(p, sa, sb)
            s = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(s, p)
            o = nl.ndarray((4, 8), nl.float32, buffer=nl.shared_hbm)
            nisa.dma_copy(o, s)
            outs.append(o)
        return outs

    rng = np.random.default_rng(1)
    a = rng.standard_normal((16, 4)).astype(np.float32)
    b = rng.standard_normal((16, 8)).astype(np.float32)
    first, second = nki.run(k, a, b).outputs
    ref = a.T.astype(np.float64) @ b
    np.testing.assert_allclose(first, 2 * ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(second, ref, rtol=1e-5, atol=1e-5)


def test_activation_derivatives_match_a_finite_difference_of_their_functions():
    from trnsim.core.semantics import ACTIVATIONS

    x = np.linspace(-4, 4, 128 * 8).reshape(128, 8).astype(np.float32)
    pairs = [
        (nl.gelu_dx, "gelu"),
        (nl.gelu_apprx_sigmoid_dx, "gelu_apprx_sigmoid"),
        (nl.silu_dx, "silu"),
        (nl.erf_dx, "erf"),
    ]

    def k(x):
        t = nl.load(x)
        outs = []
        for f, _ in pairs:
            o = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
            nl.store(o, f(t))
            outs.append(o)
        return outs

    got = nki.run(k, x).outputs
    h = 1e-3
    for out, (_, base) in zip(got, pairs, strict=True):
        f = ACTIVATIONS[base]
        up, down = (f((x + s).astype(np.float64)) for s in (h, -h))
        np.testing.assert_allclose(out, (up - down) / (2 * h), rtol=1e-3, atol=1e-4, err_msg=base)


def test_enum_arguments_accept_their_integer_values_and_refuse_others():
    def k(x, mode):
        t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(t, x, dge_mode=mode)
        o = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(o, t, oob_mode=0)
        return o

    x = np.arange(4, dtype=np.float32).reshape(2, 2)
    by_value = nki.run(k, x, 3)
    by_member = nki.run(k, x, nisa.dge_mode.none)
    np.testing.assert_array_equal(by_value.outputs, x)
    assert [i.attrs for i in by_value.instructions] == [i.attrs for i in by_member.instructions]
    with pytest.raises(TrnsimError, match="dge_mode 7 not in"):
        nki.run(k, x, 7)
