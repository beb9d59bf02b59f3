"""Every class of illegal kernel raises a KernelError naming the rule, values and file:line."""

import sys

import ml_dtypes
import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim.core import KernelWarning
from trnsim.errors import KernelError

BF16 = ml_dtypes.bfloat16
HERE = "test_core_errors.py"


def line_of_next_call() -> int:
    return sys._getframe(1).f_lineno + 1


def run(kernel, *args, target="gen4"):
    return nki.run(kernel, *args, target=target).outputs


def expect(rule: str, fn, *args, target="gen4", values=()):
    with pytest.raises(KernelError) as info:
        run(fn, *args, target=target)
    err = info.value
    assert err.rule == rule, str(err)
    assert HERE in str(err) and err.kernel_file.endswith(HERE)
    for v in values:
        assert str(v) in str(err), (v, str(err))
    return err


def test_partition_dim_over_128_names_line():
    lines = {}

    def k():
        lines["l"] = line_of_next_call()
        nl.ndarray((256, 4), nl.float32, buffer=nl.sbuf)

    err = expect("partition-dim", k, values=(256, 128))
    assert err.kernel_line == lines["l"]
    assert f"{HERE}:{lines['l']}" in str(err)


def test_sbuf_over_capacity_gen2_vs_gen4():
    def k():
        nl.ndarray((128, 200 * 1024), nl.uint8, buffer=nl.sbuf)  # 200 KiB/partition

    expect("sbuf-capacity", k, target="gen2", values=("200 KiB", "192 KiB", "neuroncore-v2"))
    run(k, target="gen4")  # 256 KiB fits


def test_sbuf_exhausted_by_live_allocations():
    """Liveness is program order: a full SBUF lends the least recently used tensor's space to
    a new one; using the old one again afterwards is the error, naming both tensors."""

    def k():
        keep = [
            nl.ndarray((128, 100 * 1024), nl.uint8, buffer=nl.sbuf, name=f"keep{i}")
            for i in range(2)
        ]
        for t in keep:
            nisa.memset(t, 1)
        third = nl.ndarray((128, 100 * 1024), nl.uint8, buffer=nl.sbuf, name="third")
        nisa.memset(third, 2)
        nisa.memset(keep[0], 3)  # keep0 lent its space to third: their lives interleave
        kept.extend(keep)

    kept: list = []
    expect("overlap", k, values=("'keep0'", "'third'", "used again"))

    def fine():
        keep = [nl.ndarray((128, 100 * 1024), nl.uint8, buffer=nl.sbuf) for _ in range(2)]
        for t in keep:
            nisa.memset(t, 1)
        third = nl.ndarray((128, 100 * 1024), nl.uint8, buffer=nl.sbuf)
        nisa.memset(third, 2)  # keep[0] is never used again: legal
        kept.extend(keep)  # alive to the end of the kernel (a kernel returns HBM tensors only)

    run(fine)


def test_freed_tiles_are_reused():
    def k():
        for _ in range(10):
            nl.ndarray((128, 100 * 1024), nl.uint8, buffer=nl.sbuf)  # freed each iteration

    run(k)


def test_psum_over_capacity():
    def k():
        nl.ndarray((128, 5000), nl.float32, buffer=nl.psum)

    expect("psum-capacity", k, values=("16 KiB",))


def test_psum_misaligned_address():
    def k():
        nl.ndarray((128, 16), nl.float32, buffer=nl.psum, address=(0, 1024))

    expect("psum-alignment", k, values=(1024, 2048))


def test_psum_allocations_start_on_bank_boundaries():
    def k():
        a = nl.ndarray((128, 4), nl.float32, buffer=nl.psum)
        b = nl.ndarray((128, 4), nl.float32, buffer=nl.psum)
        kept.extend((a, b))  # alive after the run (a kernel returns HBM tensors only)

    kept: list = []
    res = nki.run(k)
    offs = sorted(a.byte_offset for a in res.cores[0].psum.live)
    assert offs == [] or offs[0] % 2048 == 0


def test_overlapping_explicit_addresses():
    """Liveness is program order: placing ``b`` over ``a``'s addresses ends ``a``'s life, and
    using ``a`` afterwards is the overlap, named with both tensors' uses."""

    def k():
        a = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf, address=(0, 0), name="a")
        nisa.memset(a, 1.0)
        b = nl.ndarray((64, 64), nl.float32, buffer=nl.sbuf, address=(0, 128), name="b")
        nisa.memset(b, 2.0)
        nisa.memset(a, 3.0)

    err = expect("overlap", k, values=("'a'", "'b'", "last used at", "first used at"))
    assert str(err).count(HERE) >= 3  # a's last use, b's placement and first use, this line


def test_operand_in_wrong_memory():
    def k():
        a = nl.ndarray((128, 128), BF16, buffer=nl.sbuf)
        b = nl.ndarray((128, 128), BF16, buffer=nl.sbuf)
        d = nl.ndarray((128, 128), nl.float32, buffer=nl.sbuf)
        nisa.memset(a, 0.0)
        nisa.memset(b, 0.0)
        nisa.nc_matmul(d, a, b)

    expect("memory", k, values=("dst", "SBUF"))


def test_dtype_not_allowed_for_generation():
    def k():
        a = nl.ndarray((128, 128), BF16, buffer=nl.sbuf)
        d = nl.ndarray((128, 128), BF16, buffer=nl.psum)
        nisa.memset(a, 0.0)
        nisa.nc_matmul(d, a, a)

    expect("dtype", k, target="gen3", values=("bfloat16", "neuroncore-v3"))
    run(k, target="gen4")  # bf16 PSUM dst is legal on v4


def test_shape_mismatch():
    def k():
        a = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        b = nl.ndarray((128, 32), nl.float32, buffer=nl.sbuf)
        nisa.memset(a, 1.0)
        nisa.memset(b, 1.0)
        nisa.tensor_tensor(a, a, b, nl.add)

    expect("shape", k, values=("[128, 32]", "[128, 64]"))


def test_out_of_bounds_slice():
    def k(x):
        t = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(t, x[:, 0:64])
        return t[:, 60:70]

    expect("out-of-bounds", k, np.zeros((128, 64), np.float32))


def test_moving_fmax_by_generation():
    def k():
        a = nl.ndarray((128, 128), BF16, buffer=nl.sbuf)
        b = nl.ndarray((128, 1024), BF16, buffer=nl.sbuf)
        d = nl.ndarray((128, 1024), nl.float32, buffer=nl.psum)
        nisa.memset(a, 0.0)
        nisa.memset(b, 0.0)
        nisa.nc_matmul(d, a, b)

    expect("moving-fmax", k, target="gen3", values=(1024, 512))
    run(k, target="gen4")


def test_mx_instruction_on_v3():
    def k():
        s = nl.ndarray((128, 64), BF16, buffer=nl.sbuf)
        q = nl.ndarray((128, 16), nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        sc = nl.ndarray((128, 16), nl.uint8, buffer=nl.sbuf)
        nisa.quantize_mx(q, s, sc)

    expect("generation", k, target="gen3", values=("quantize_mx", "NeuronCore-v4"))


def test_illegal_start_partition():
    def k():
        t = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
        nisa.memset(t[8:48], 0.0)

    expect("start-partition", k, values=(8, 40))


def test_accumulate_into_uninitialised_psum_warns():
    def k():
        a = nl.ndarray((128, 128), BF16, buffer=nl.sbuf)
        d = nl.ndarray((128, 128), nl.float32, buffer=nl.psum)
        nisa.memset(a, 1.0)
        nisa.nc_matmul(d, a, a, accumulate=True)

    with pytest.warns(KernelWarning, match="psum-uninitialized-accumulate"):
        run(k)


def test_uninitialised_read_is_nan():
    def k():
        t = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
        out = nl.ndarray((128, 8), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(out, t)
        return out

    assert np.isnan(run(k)).all()


def test_unimplemented_instruction_says_so():
    def k():
        nisa.tensor_copy_dynamic_src()

    expect("not-implemented", k, values=("tensor_copy_dynamic_src",))
