"""Legacy kernels that break a rule: one KernelError naming the rule, the values and the
kernel's own file:line (SDK 2.26 programming guide: tiles, par_dim, masks, indexing)."""

from __future__ import annotations

import numpy as np
import pytest

import trnsim.nki as tnki
from trnsim.errors import KernelError

tnki.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

HERE = "test_nki_legacy_errors.py"


def _f32(*shape: int) -> np.ndarray:
    return np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32)


def _raises(kernel, *args, rule: str, text: str = "") -> KernelError:
    with pytest.raises(KernelError) as info:
        kernel(*args)
    err = info.value
    assert err.rule == rule
    assert text in err.message
    assert err.kernel_file is not None and err.kernel_file.endswith(HERE)
    return err


def test_par_dim_larger_than_the_partitions() -> None:
    @nki.jit
    def k(a):
        nl.ndarray((2, nl.par_dim(256), 64), dtype=nl.float32, buffer=nl.sbuf)[0] = 0.0

    _raises(k, _f32(1, 1), rule="partition-dim", text="256 partitions")


def test_two_par_dims() -> None:
    @nki.jit
    def k(a):
        nl.ndarray((nl.par_dim(128), nl.par_dim(2), 64), dtype=nl.float32, buffer=nl.sbuf)

    _raises(k, _f32(1, 1), rule="par-dim", text="2 par_dim")


def test_block_tensor_used_whole_as_a_tile() -> None:
    @nki.jit
    def k(a):
        t = nl.ndarray((2, nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf)
        return nl.exp(t)

    _raises(k, _f32(1, 1), rule="block-dim", text="block dimensions")


def test_partition_dim_indexed_by_a_free_axis_iterator() -> None:
    @nki.jit
    def k(a):
        t = nl.load(a)
        i_p, i_f = nl.mgrid[0:128, 0:128]
        return nl.exp(t[i_f, i_p])  # a transpose by indexing: not an on-chip access pattern

    _raises(k, _f32(128, 128), rule="partition-index", text="partition dim")


def test_index_expression_outside_the_tile() -> None:
    @nki.jit
    def k(a):
        t = nl.load(a)
        i_p, i_f = nl.mgrid[0:128, 0:64]
        return nl.exp(t[i_p, i_f + 32])

    _raises(k, _f32(128, 64), rule="out-of-bounds", text="32..95 outside 0..63")


def test_mask_with_more_dims_than_the_tile() -> None:
    @nki.jit
    def k(a):
        i = nl.arange(4)[:, None, None]
        return nl.exp(nl.load(a), mask=(i < 2))

    _raises(k, _f32(128, 8), rule="mask", text="mask outside the tile")


def test_mask_used_as_a_python_bool_warns_that_and_drops_a_condition() -> None:
    from trnsim.core.location import KernelWarning

    @nki.jit
    def k(a):
        i_p, i_f = nl.mgrid[0:128, 0:8]
        t = nl.load(a)
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.exp(t, mask=(i_p < 4 and i_f < 2)))  # as in the SDK example
        return out

    with pytest.warns(KernelWarning, match="mask-bool.*'m1 and m2' is m2 alone"):
        k(_f32(128, 8))


def test_a_tile_that_truly_does_not_fit_names_the_tiles_and_the_line() -> None:
    # the three 96 KiB tiles of one instruction cannot share 256 KiB of SBUF (NeuronCore-v4):
    # none can be spilled, the instruction needs them all at once
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        x = nl.load(a)
        y = nl.load(a)
        nl.store(out, value=nl.add(x, y))
        return out

    err = _raises(k, _f32(128, 24576), rule="sbuf-capacity", text="does not fit")
    assert f"made at {HERE}" in err.message and "96 KiB/partition" in err.message


def test_spmd_grid_dimension_must_be_positive() -> None:
    @nki.jit
    def k(a):
        return a

    with pytest.raises(KernelError, match="spmd-grid"):
        k[0, 2]


def test_benchmark_percentile_outside_the_documented_list() -> None:
    import neuronxcc.nki.typing as nt

    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(a))
        return out

    b = nki.benchmark(k)
    b(nt.tensor[[128, 64], nl.float32])
    with pytest.raises(KernelError, match="percentile"):
        b.benchmark_result.nc_latency.get_latency_percentile(42)
