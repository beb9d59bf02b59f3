"""How each ATen op maps onto Trainium3: the op table (rules as data; no PyTorch import).

Every op the front end sees is classified once by ``classify(name, tags, is_view)``:

- ``matmul``: the Tensor engine (``MATMUL_OPS``): computed by ``trnsim.torch.gemm`` with the
  session's numerics, timed by the matmul kernel on the timing model (``trnsim.torch.costs``);
- ``vector``: the Vector / Scalar / GpSimd engines: elementwise ops (ATen's ``pointwise``
  tag), reductions (``reduction`` tag) and the ops of ``VECTOR_OPS`` (norms, softmax, losses,
  copies, fills); computed by PyTorch at their dtype (fp32 inside, as the engines compute; with
  stochastic rounding their bf16/fp16 results are rounded stochastically), timed by the
  performance model's HBM roofline (``trnsim.perf``);
- ``gather``: embedding lookups and indexing (DMA gathers; ``GATHER_OPS``);
- ``collective``: c10d collectives (``COLLECTIVE_OPS``), timed by ``trnsim.fabric``;
- ``kernel``: a custom op that runs an NKI kernel (``KERNEL_OPS``), timed by the kernel's
  own instructions on the timing model;
- ``free``: views, metadata and allocation (``FREE_OPS``, ATen view ops): no engine work;
- ``fallback``: everything else. It runs in PyTorch, untimed, and is listed by name and
  module in every profile (``Profile.fallbacks``), never silently dropped.

``KERNELS`` names the NKI kernel trnsim runs for an op or a higher-level function where one
exists (``trnsim.torch.costs`` times it on the timing model).
"""

from __future__ import annotations

from collections.abc import Iterable

MATMUL_OPS = frozenset(
    {
        "aten::mm",
        "aten::bmm",
        "aten::addmm",
        "aten::baddbmm",
        "aten::convolution",
        "aten::convolution_backward",
    }
)

COLLECTIVE_OPS: dict[str, str] = {
    # functional collectives (DTensor, tensor parallelism)
    "_c10d_functional::all_reduce": "all-reduce",
    "_c10d_functional::all_reduce_": "all-reduce",
    "_c10d_functional::all_gather_into_tensor": "all-gather",
    "_c10d_functional::reduce_scatter_tensor": "reduce-scatter",
    "_c10d_functional::all_to_all_single": "all-to-all",
    "_c10d_functional::broadcast": "broadcast",
    # c10d process-group collectives (FSDP2, torch.distributed calls)
    "c10d::allreduce_": "all-reduce",
    "c10d::_allgather_base_": "all-gather",
    "c10d::allgather_": "all-gather",
    "c10d::_reduce_scatter_base_": "reduce-scatter",
    "c10d::reduce_scatter_": "reduce-scatter",
    "c10d::alltoall_base_": "all-to-all",
    "c10d::broadcast_": "broadcast",
    "c10d::send": "permute",
    "c10d::recv_": "permute",
}

GATHER_OPS = frozenset(
    {
        "aten::embedding",
        "aten::embedding_dense_backward",
        "aten::index",
        "aten::index_select",
        "aten::gather",
        "aten::scatter",
        "aten::scatter_add",
        "aten::index_put",
        "aten::index_put_",
        "aten::_index_put_impl_",
        "aten::index_add",
    }
)

VECTOR_OPS = frozenset(
    {
        "aten::_softmax",
        "aten::_softmax_backward_data",
        "aten::_log_softmax",
        "aten::_log_softmax_backward_data",
        "aten::native_layer_norm",
        "aten::native_layer_norm_backward",
        "aten::_fused_rms_norm",
        "aten::_fused_rms_norm_backward",
        "aten::nll_loss_forward",
        "aten::nll_loss_backward",
        "aten::_to_copy",
        "aten::copy_",
        "aten::clone",
        "aten::fill_",
        "aten::zero_",
        "aten::ones_like",
        "aten::zeros_like",
        "aten::full_like",
        "aten::cumsum",
        "aten::topk",
        "aten::sort",
        "aten::argmax",
        "aten::max",
        "aten::min",
        "aten::tril",
        "aten::triu",
        "aten::masked_fill",
        "aten::where",
        "aten::native_dropout",
        "aten::native_dropout_backward",
        "aten::cat",
        "aten::__or__",
        "aten::__and__",
        "aten::__xor__",
        "aten::__lshift__",
        "aten::__rshift__",
        "aten::slice_backward",
        "aten::select_backward",
        "aten::slice_scatter",
        "aten::select_scatter",
        "aten::stack",
        "aten::split_with_sizes_copy",
        "aten::_foreach_add",
        "aten::_foreach_mul",
        "aten::_scaled_dot_product_flash_attention_for_cpu",
        "aten::_scaled_dot_product_flash_attention_for_cpu_backward",
        "fsdp::all_gather_copy_in",
        "fsdp::split_with_sizes_copy",
        "fsdp::chunk_cat",
    }
)

FREE_OPS = frozenset(
    {
        "aten::detach",
        "aten::empty",
        "aten::empty_like",
        "aten::empty_strided",
        "aten::new_empty",
        "aten::new_empty_strided",
        "aten::lift_fresh",
        "aten::_local_scalar_dense",
        "aten::is_same_size",
        "aten::_unsafe_view",
        "aten::set_",
        "aten::resize_",
        "aten::scalar_tensor",
        "aten::arange",
        "aten::randn",
        "aten::rand",
        "aten::randint",
        "aten::normal_",
        "aten::uniform_",
        "aten::random_",
        "aten::bernoulli_",
        "aten::zeros",
        "aten::ones",
        "aten::full",
        "aten::lift_fresh_copy",
        "aten::_assert_tensor_metadata",
        "aten::sym_size",
        "aten::sym_numel",
        "aten::sym_stride",
        "prim::device",
        "profiler::_record_function_enter_new",
        "profiler::_record_function_exit",
        "_c10d_functional::wait_tensor",
        "aten::record_stream",
    }
)
"""No engine work: metadata, allocation, host-side random initialisation, waits."""

KERNELS: dict[str, str] = {
    "aten::mm": "trnsim.perf kernels/matmul_table.py (blocked_matmul)",
    "aten::bmm": "trnsim.perf kernels/matmul_table.py (blocked_matmul), per batch",
    "aten::addmm": "trnsim.perf kernels/matmul_table.py (blocked_matmul)",
    "aten::baddbmm": "trnsim.perf kernels/matmul_table.py (blocked_matmul), per batch",
    "scaled_dot_product_attention": "flash attention (attention cost of trnsim.perf)",
    "rms_norm": "RMSNorm (one fused Vector/Scalar pass)",
    "layer_norm": "LayerNorm (one fused Vector/Scalar pass)",
    "cross_entropy": "softmax cross-entropy (one fused pass)",
}

KINDS = ("matmul", "vector", "gather", "collective", "kernel", "free", "fallback")

KERNEL_OPS: dict[str, object] = {}
"""Custom ops that run an NKI kernel (``trnsim.torch.kernels.custom_op`` registers them):
schema name -> the ``nki_op`` wrapper, whose last run the capture records and times."""


def classify(name: str, tags: Iterable[str] = (), is_view: bool = False) -> str:
    """The kind of an op by its schema name (``aten::add``) and tags (module docstring)."""
    if name in MATMUL_OPS:
        return "matmul"
    if name in KERNEL_OPS:
        return "kernel"
    if name in COLLECTIVE_OPS:
        return "collective"
    if name in GATHER_OPS:
        return "gather"
    if is_view or name in FREE_OPS:
        return "free"
    tags = set(tags)
    if name in VECTOR_OPS or "pointwise" in tags or "reduction" in tags:
        return "vector"
    if name.endswith("_") and name[:-1] in VECTOR_OPS:
        return "vector"
    return "fallback"
