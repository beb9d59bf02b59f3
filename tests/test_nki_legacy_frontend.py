"""The legacy ``neuronxcc.nki`` front end: constructs from the SDK 2.26 docs, written here."""

from __future__ import annotations

import importlib.util
import os

import ml_dtypes
import numpy as np
import pytest

import trnsim.nki as tnki
from trnsim.errors import KernelError

tnki.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.compiler as ncc  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402
import neuronxcc.nki.typing as nt  # noqa: E402

RNG = np.random.default_rng(0)


def _f32(*shape: int) -> np.ndarray:
    return RNG.uniform(-1, 1, shape).astype(np.float32)


# ---- install ----------------------------------------------------------------------------------


def test_install_resolves_every_legacy_module() -> None:
    from neuronxcc import nki as top
    from neuronxcc.nki.isa import constants

    assert top is nki
    assert constants.engine.vector == 5
    assert nisa.dge_mode.none == 0 and nisa.dge_mode.unknown == 3  # legacy numbering


API_NAMES = {
    "nki": "FrameworkKernel tensor baremetal benchmark jit profile simulate_kernel",
    "language": (
        "bfloat16 bfp16 bool_ float16 float32 float8_e4m3 float8_e5m2 fp32 hbm int16 int32 int8 "
        "mgrid nc par_dim private_hbm psum sbuf shared_hbm spmd_dim tfloat32 tile_size uint16 "
        "uint32 uint8 abs add affine_range all all_reduce arange arctan atomic_rmw bitwise_and "
        "bitwise_or bitwise_xor broadcast_to ceil copy cos device_print divide dropout ds "
        "empty_like equal erf erf_dx exp expand_dims finfo floor fmod full gather_flattened gelu "
        "gelu_apprx_sigmoid gelu_apprx_tanh gelu_dx gemm_grid gemm_stationary_grid greater "
        "greater_equal invert left_shift less less_equal load load_transpose2d log logical_and "
        "logical_not logical_or logical_xor loop_reduce matmul max maximum mean min minimum mish "
        "mod multiply ndarray negative not_equal num_programs ones power prod program_id "
        "program_ndim rand random_seed reciprocal relu right_shift rms_norm rsqrt "
        "sequential_range shared_constant shared_identity_matrix sigmoid sign silu silu_dx sin "
        "softmax softplus sqrt square static_cast static_range store subtract sum tan tanh "
        "transpose trunc var where zeros zeros_like"
    ),
    "isa": (
        "dge_mode dma_engine engine fp32 gpsimd_engine nc_version oob_mode reduce_cmd "
        "scalar_engine tensor_engine unknown_engine vector_engine activation activation_reduce "
        "affine_select bn_aggr bn_stats builtin_custom_op dma_copy dma_transpose dropout "
        "get_nc_version iota local_gather max8 memset nc_find_index8 nc_match_replace8 nc_matmul "
        "nc_stream_shuffle nc_transpose range_select reciprocal scalar_tensor_tensor "
        "select_reduce sequence_bounds tensor_copy tensor_copy_dynamic_dst "
        "tensor_copy_dynamic_src tensor_copy_predicated tensor_partition_reduce tensor_reduce "
        "tensor_scalar tensor_scalar_reduce tensor_tensor tensor_tensor_scan"
    ),
    "compiler": (
        "psum sbuf allocation_scope enable_stack_allocator force_auto_alloc multi_buffer "
        "no_reorder skip_middle_end_transformations"
    ),
}
"""Every name of the SDK 2.26 API reference (api/nki/**/__init__.py), listed here."""


@pytest.mark.parametrize("module", sorted(API_NAMES))
def test_every_api_reference_name_exists(module: str) -> None:
    mod = {"nki": nki, "language": nl, "isa": nisa, "compiler": ncc}[module]
    missing = [n for n in API_NAMES[module].split() if not hasattr(mod, n)]
    assert missing == []
    for space in (ncc.sbuf, ncc.psum):
        assert callable(space.mod_alloc) and callable(space.alloc) and callable(space.auto_alloc)


def test_unimplemented_name_raises_not_implemented_naming_it() -> None:
    @nki.jit
    def k(a):
        return nl.softmax(nl.load(a), axis=1)

    with pytest.raises(KernelError, match=r"not-implemented.*softmax"):
        k(_f32(128, 8))


# ---- programming model --------------------------------------------------------------------------


def test_index_expressions_mgrid_and_affine_offsets() -> None:
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
        g = nl.mgrid[0:128, 0:64]
        t = nl.load(a[g.p, 64 + g.x])  # the right half of each row
        nl.store(out[g.p, g.x], value=t)
        return out

    a = _f32(128, 128)
    np.testing.assert_array_equal(k(a), a[:, 64:])


def test_strided_index_expression_selects_every_other_column() -> None:
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 32), dtype=a.dtype, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(32)[None, :]
        nl.store(out[i_p, i_f], value=nl.load(a[i_p, 2 * i_f + 1]))
        return out

    a = _f32(128, 64)
    np.testing.assert_array_equal(k(a), a[:, 1::2])


def test_mask_restricts_load_compute_and_store_to_a_box() -> None:
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        i_f = nl.arange(a.shape[1])[None, :]
        for p in nl.affine_range(2):
            i_p = p * 128 + nl.arange(128)[:, None]
            t = nl.load(a[i_p, i_f], mask=(i_p < a.shape[0]))
            e = nl.exp(t, mask=(i_p < a.shape[0]))
            nl.store(out[i_p, i_f], value=e, mask=(i_p < a.shape[0]))
        return out

    a = _f32(200, 16)
    np.testing.assert_allclose(k(a), np.exp(a), rtol=1e-6)


def test_index_outside_tensor_without_mask_is_an_error_with_the_kernel_line() -> None:
    @nki.jit
    def k(a):
        i_p = 100 + nl.arange(128)[:, None]
        return nl.load(a[i_p, nl.arange(8)[None, :]])

    with pytest.raises(KernelError, match=r"out-of-bounds.*100\.\.227.*test_nki_legacy"):
        k(_f32(128, 8))


def test_non_box_mask_is_refused() -> None:
    @nki.jit
    def k(a):
        i_p, i_f = nl.mgrid[0:128, 0:128]
        t = nl.load(a)
        return nl.exp(t, mask=(i_p >= i_f))

    with pytest.raises(KernelError, match="non-rectangular"):
        k(_f32(128, 128))


def test_par_dim_block_tensor_and_returned_psum_accumulation() -> None:
    @nki.jit
    def k(lhs_t, rhs):
        kt = lhs_t.shape[0] // 128
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        a = nl.ndarray((kt, nl.par_dim(128), 128), dtype=lhs_t.dtype, buffer=nl.sbuf)
        b = nl.ndarray((kt, nl.par_dim(128), 512), dtype=rhs.dtype, buffer=nl.sbuf)
        for i in nl.affine_range(kt):
            a[i] = nl.load(lhs_t[i * 128 : (i + 1) * 128, :])
            b[i] = nl.load(rhs[i * 128 : (i + 1) * 128, :])
        acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
        for i in nl.affine_range(kt):
            acc += nisa.nc_matmul(a[i], b[i])
        nl.store(out, value=nl.copy(acc))
        return out

    lhs_t, rhs = _f32(384, 128), _f32(384, 512)
    np.testing.assert_allclose(k(lhs_t, rhs), lhs_t.T @ rhs, rtol=1e-4, atol=1e-4)


def test_accumulate_into_psum_issues_one_matmul_per_call_no_copy() -> None:
    @nki.jit
    def k(x, y):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
        xs, ys = nl.load(x), nl.load(y)
        for _ in nl.affine_range(3):
            acc[...] += nl.matmul(xs, ys, transpose_x=True)
        nl.store(out, value=nl.copy(acc))
        return out

    x, y = _f32(128, 128), _f32(128, 512)
    res = tnki.run(k, x, y)
    ops = [i.opcode.value for i in res.instructions]
    assert ops.count("nc_matmul") == 3 and ops.count("tensor_copy") == 1
    np.testing.assert_allclose(res.outputs, 3 * (x.T @ y), rtol=1e-4, atol=1e-4)


def test_legacy_type_promotion_table() -> None:
    from trnsim.nki.legacy.differences import promote

    f16, bf16 = np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)
    assert promote(f16, bf16) == np.float32  # the docs' "new widened type"
    assert promote(np.dtype(np.int8), np.dtype(np.uint8)) == np.int16
    assert promote(np.dtype(np.int32), np.dtype(np.uint32)) == np.float32
    assert promote(np.dtype(ml_dtypes.float8_e4m3), bf16) == bf16
    assert promote(np.dtype(np.int32), f16) == f16

    @nki.jit
    def k(a, b):
        out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        c = nl.add(nl.load(a), nl.load(b))
        assert c.dtype == np.float32
        nl.store(out, value=c)
        return out

    a = _f32(128, 8).astype(np.float16)
    b = _f32(128, 8).astype(ml_dtypes.bfloat16)
    np.testing.assert_allclose(k(a, b), a.astype(np.float32) + b.astype(np.float32), rtol=1e-6)


def test_spmd_grid_program_ids_and_two_core_spmd_dim() -> None:
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        i, j = nl.program_id(0), nl.program_id(1)
        assert nl.num_programs() == 8 and nl.program_ndim() == 2
        t = nl.load(a[i, j])
        nl.store(out[i, j], value=nl.add(t, float(i * 10 + j)))
        return out

    a = _f32(4, 2, 1, 8)
    expect = a + (np.arange(4)[:, None] * 10 + np.arange(2)[None, :])[:, :, None, None]
    np.testing.assert_allclose(k[4, 2](a), expect, rtol=1e-6)
    res = tnki.run(k[nl.spmd_dim(nl.nc(2), 2), 2], a, target="gen3")
    np.testing.assert_allclose(res.outputs, expect, rtol=1e-6)
    assert len(res.cores) == 2 and all(c.record for c in res.cores)


def test_mod_alloc_places_blocks_modulo_and_detects_reuse() -> None:
    @nki.jit
    def ok(a):
        out = nl.ndarray((4, 128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(
            (4, nl.par_dim(128), 64),
            dtype=a.dtype,
            buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)),
        )
        for i in nl.sequential_range(4):
            t[i] = nl.load(a[i])
            nl.store(out[i], value=t[i])
        return out

    a = _f32(4, 128, 64)
    np.testing.assert_array_equal(ok(a), a)

    @nki.jit
    def reused(a):
        t = nl.ndarray(
            (4, nl.par_dim(128), 64),
            dtype=a.dtype,
            buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)),
        )
        for i in nl.sequential_range(4):
            t[i] = nl.load(a[i])
        return nl.exp(t[0])  # block 0's slot now holds block 2

    with pytest.raises(KernelError, match=r"tile-reused.*block \[0\].*block \[2\]"):
        reused(a)


def test_iota_and_affine_select_from_index_expressions() -> None:
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:128, 0:128]
        io = nisa.iota(i_p * 2 + i_f, dtype=nl.float32)
        sel = nisa.affine_select(i_p - i_f >= 0, io, -1.0)
        nl.store(out, value=sel)
        return out

    p, f = np.mgrid[0:128, 0:128]
    np.testing.assert_array_equal(k(_f32(1, 1)), np.where(p >= f, 2 * p + f, -1.0))


def test_tile_size_reads_the_target() -> None:
    @nki.jit
    def k(a):
        assert nl.tile_size.pmax == 128 and nl.tile_size.gemm_moving_fmax == 512
        return a

    k(_f32(1, 1))


# ---- benchmark / profile ----------------------------------------------------------------------


def _matmul_kernel():
    @nki.jit
    def mm(lhs_t, rhs):
        out = nl.ndarray((lhs_t.shape[1], rhs.shape[1]), dtype=lhs_t.dtype, buffer=nl.shared_hbm)
        for m in nl.affine_range(lhs_t.shape[1] // 128):
            acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
            for kk in nl.affine_range(lhs_t.shape[0] // 128):
                a = nl.load(lhs_t[kk * 128 : (kk + 1) * 128, m * 128 : (m + 1) * 128])
                b = nl.load(rhs[kk * 128 : (kk + 1) * 128, 0:512])
                acc += nl.matmul(a, b, transpose_x=True)
            nl.store(out[m * 128 : (m + 1) * 128, 0:512], value=nl.copy(acc, dtype=out.dtype))
        return out

    return mm


def test_benchmark_with_placeholders_reports_the_model_latency_for_every_percentile() -> None:
    bench = nki.benchmark(warmup=5, iters=10)(_matmul_kernel())
    bench(nt.tensor[[512, 256], nl.bfloat16], nt.tensor[[512, 512], nl.bfloat16])
    lat = bench.benchmark_result.nc_latency
    p50, p99 = lat.get_latency_percentile(50), lat.get_latency_percentile(99)
    assert p50 == p99 > 0
    prof = tnki.benchmark.profile_kernel(
        _matmul_kernel(),
        np.zeros((512, 256), ml_dtypes.bfloat16),
        np.zeros((512, 512), ml_dtypes.bfloat16),
    )
    assert p50 == pytest.approx(prof.total_s * 1e6)
    with pytest.raises(KernelError, match="percentile"):
        lat.get_latency_percentile(42)


def test_benchmark_target_follows_platform_target(monkeypatch: pytest.MonkeyPatch) -> None:
    args = (nt.tensor[[512, 256], nl.bfloat16], nt.tensor[[512, 512], nl.bfloat16])
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn1")
    b1 = nki.benchmark(_matmul_kernel())
    b1(*args)
    b3 = nki.benchmark(_matmul_kernel(), platform_target="trn3")
    b3(*args)
    assert b1.benchmark_result.nc_latency.target == "gen2"
    assert b3.benchmark_result.nc_latency.target == "gen4"
    assert b1.benchmark_result.nc_latency.seconds != b3.benchmark_result.nc_latency.seconds


def test_profile_writes_trace_and_timeline(tmp_path) -> None:
    prof = nki.profile(working_directory=str(tmp_path), save_trace_name="t.json")(_matmul_kernel())
    prof(nt.tensor[[256, 128], nl.bfloat16], nt.tensor[[256, 512], nl.bfloat16])
    assert (tmp_path / "t.json").stat().st_size > 0
    assert (tmp_path / "timeline.png").stat().st_size > 0
    assert sorted(os.listdir(tmp_path)) == ["file.neff", "t.json", "timeline.png"]


# ---- the legacy conformance cases (a small runner until the harness lands) ---------------------

ROOTS = {"sdk226": "/work/checkouts/sdk226", "nki-samples": "/work/checkouts/nki-samples"}
KNOWN_FAILING = {
    "legacy/sdk226/sd_attention": "the example imports scipy at module level (not installed)",
    "legacy/sdk226/layout-loop": "imports torch_neuronx at module level",
}


def _cases():
    from trnsim.conformance.cases_legacy import CASES

    return [c for c in CASES if os.path.isdir(ROOTS[c.repo])]


_MODULES: dict[str, object] = {}


def _kernel(case):
    import sys

    path = os.path.join(ROOTS[case.repo], case.path)
    if path not in _MODULES:
        sys.path.insert(0, os.path.dirname(path))
        spec = importlib.util.spec_from_file_location(f"legacy_case_{len(_MODULES)}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        _MODULES[path] = mod
    return getattr(_MODULES[path], case.kernel)


@pytest.mark.slow
@pytest.mark.parametrize("case", _cases(), ids=lambda c: c.name)
def test_legacy_conformance_case(case) -> None:
    if case.name in KNOWN_FAILING:
        pytest.xfail(KNOWN_FAILING[case.name])
    k = _kernel(case)
    inputs = case.inputs(np.random.default_rng(0))
    out = tnki.run(k[case.grid] if case.grid else k, *inputs, target=case.target).outputs
    ref = case.reference(*inputs, **case.kwargs)
    outs = out if isinstance(out, tuple | list) else (out,)
    refs = ref if isinstance(ref, tuple | list) else (ref,)
    for o, r in zip(outs, refs, strict=True):
        o64, r64 = np.asarray(o, np.float64), np.asarray(r, np.float64)
        assert o64.shape == r64.shape
        assert np.all(np.isfinite(o64))
        np.testing.assert_allclose(o64, r64, rtol=case.rtol, atol=case.atol)
