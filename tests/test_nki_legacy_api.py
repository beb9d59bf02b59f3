"""Legacy ``neuronxcc.nki``: install() and every name of the SDK 2.26 API reference."""

from __future__ import annotations

import numpy as np
import pytest

import trnsim.nki as tnki
from trnsim.errors import KernelError

tnki.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.compiler as ncc  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

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
        return nl.rms_norm(nl.load(a), axis=1)

    with pytest.raises(KernelError, match=r"not-implemented.*rms_norm"):
        k(_f32(128, 8))
