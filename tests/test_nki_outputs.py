"""A kernel's outputs (``trnsim.nki.outputs``): returned tensors live in HBM, and every element
of them is written, or the kernel says why not (``allow_unwritten`` / ``UNWRITTEN``)."""

from __future__ import annotations

import numpy as np
import pytest

import trnsim.nki as tn
from trnsim.errors import KernelError, UsageError

tn.install()
import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402


@nki.jit
def half_written(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out[0:64, :], nl.load(x[0:64, :]))
    return out


@nki.jit
def minus_ones(x):
    """Writes -1 (all-ones bytes: the sentinel's bit pattern) to every element."""
    out = nl.ndarray(x.shape, dtype=nl.int32, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(t, -1)
    nl.store(out, t)
    return out


def x32(rows: int = 128, cols: int = 16) -> np.ndarray:
    return np.arange(rows * cols, dtype=np.float32).reshape(rows, cols)


def test_an_output_half_written_is_an_error_naming_how_many_and_where():
    with pytest.raises(KernelError, match="output-unwritten") as info:
        tn.simulate(half_written)(x32())
    msg = str(info.value)
    assert "1,024 of 2,048 elements never written" in msg and "first at [64, 0]" in msg
    assert "allow_unwritten" in msg and "test_nki_outputs.py:" in msg


def test_allow_unwritten_runs_it_and_lists_them():
    res = tn.run(half_written, x32(), allow_unwritten="rows 64.. are padding")
    (u,) = res.unwritten
    assert (u.output, u.count, u.first, u.shape) == (0, 1024, (64, 0), (128, 16))
    assert u.mask[64:].all() and not u.mask[:64].any()
    np.testing.assert_array_equal(res.outputs[:64], x32()[:64])
    out = tn.simulate(half_written, allow_unwritten=True)(x32())
    assert np.isnan(out[64:]).all()


@pytest.mark.parametrize("bad", ["", "   ", 0, 1, [], b"x"])
def test_allow_unwritten_is_a_reason(bad):
    with pytest.raises(UsageError, match="allow_unwritten"):
        tn.run(half_written, x32(), allow_unwritten=bad)


def test_a_written_value_equal_to_the_sentinel_bytes_is_written():
    res = tn.run(minus_ones, np.zeros((128, 8), np.float32))
    assert res.unwritten == [] and (res.outputs == -1).all()


def test_an_input_returned_as_it_came_is_written_by_the_host():
    @nki.jit
    def identity(x):
        return x

    ones = np.full((128, 8), 255, np.uint8)  # the sentinel byte itself
    assert (tn.simulate(identity)(ones) == 255).all()


def test_the_unwritten_check_reads_the_record_not_only_the_bytes():
    # the kernel writes NaN where it writes: a NaN output is not an unwritten one
    @nki.jit
    def nans(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.memset(t, float("nan"))
        nl.store(out, t)
        return out

    assert np.isnan(tn.simulate(nans)(x32())).all()


def test_a_strided_and_a_reversed_store_count_element_by_element():
    @nki.jit
    def odd_columns(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        nl.store(out[:, 1::2], t[:, 1::2])
        return out

    with pytest.raises(KernelError, match=r"1,024 of 2,048 .* first at \[0, 0\]"):
        tn.simulate(odd_columns)(x32())


def test_every_output_of_several_is_checked_and_named():
    @nki.jit
    def two(x):
        a = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm, name="a")
        b = nl.ndarray((4, 4), dtype=x.dtype, buffer=nl.shared_hbm, name="b")
        nl.store(a, nl.load(x))
        return a, b

    with pytest.raises(KernelError, match=r"output 1 \(b, float32\[4, 4\]\): 16 of 16"):
        tn.simulate(two)(x32())


def test_an_lnc2_kernel_whose_programs_write_halves_is_whole():
    @nki.jit
    def halves(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        i = nl.program_id(0)
        nl.store(out[i * 64 : (i + 1) * 64, :], nl.load(x[i * 64 : (i + 1) * 64, :]))
        return out

    np.testing.assert_array_equal(halves[2](x32()), x32())


@pytest.mark.parametrize("buffer", ["sbuf", "psum"])
def test_a_returned_on_chip_tensor_is_refused(buffer):
    @nki.jit
    def tile(x):
        t = nl.ndarray((128, 16), dtype=nl.float32, buffer=getattr(nl, buffer))
        return t

    with pytest.raises(KernelError, match=f"output-not-hbm.*in {buffer.upper()}.*shared_hbm"):
        tn.simulate(tile)(x32())
    with pytest.raises(KernelError, match="output-not-hbm"):  # timing-only too
        tn.run(tile, x32(), functional=False)


def test_a_timing_only_run_does_not_check_the_data():
    res = tn.run(half_written, x32(), functional=False)
    assert res.unwritten == []
