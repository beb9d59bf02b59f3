"""The fast-path accelerator's caches (``trnsim.core.accel.decode``: decoded SBUF tiles, open
PSUM accumulation groups) never serve stale or mis-typed data: each case runs with
``CoreOptions(fast_paths=...)`` on and off and must give the same bits.

Cases: the same bytes read through views of another format (bf16 vs fp16; a bf16 PSUM view with
the fp32 view's element offsets), and tensor-indirection scatters, which write storage outside
``NeuronCore.write``.
"""

import ml_dtypes
import numpy as np

from trnsim.core.isa import Engine, Op
from trnsim.core.machine import NeuronCore
from trnsim.core.options import CoreOptions
from trnsim.nki.tensor import NkiTensor

BF16 = ml_dtypes.bfloat16


def _core(fast: bool) -> NeuronCore:
    return NeuronCore("gen4", options=CoreOptions(fast_paths=fast))


def _tile(nc, shape, dtype, mem="sbuf", rng=None):
    t = nc.allocate(shape, dtype, mem, view_type=NkiTensor)
    if rng is not None:
        nc.write(t, rng.standard_normal(shape).astype(np.float32))
    return t


def _matmul(nc, ps, st, mv, acc):
    nc.execute(Op.NC_MATMUL, {"dst": ps}, {"stationary": st, "moving": mv}, {"accumulate": acc})


def _both(case):
    fast, plain = case(True), case(False)
    np.testing.assert_array_equal(fast, plain)
    return fast


def _index(nc, perm):
    """A (128, 4) uint16 index whose every 16-partition group holds ``perm`` in snake order."""
    idx = nc.allocate((128, 4), np.uint16, "sbuf", view_type=NkiTensor)
    cells = np.zeros((128, 4), np.uint16)
    for i, off in enumerate(perm):
        cells[np.arange(128) % 16 == i % 16, i // 16] = off
    nc.write_raw(idx, cells)
    return idx


def test_decoded_tiles_are_not_shared_between_formats_of_the_same_bytes():
    def case(fast):
        nc, rng = _core(fast), np.random.default_rng(0)
        st, mv = _tile(nc, (128, 128), BF16, rng=rng), _tile(nc, (128, 64), BF16, rng=rng)
        ps = _tile(nc, (128, 64), np.float32, "psum")
        _matmul(nc, ps, st, mv, False)
        _matmul(nc, ps, st.view(np.float16), mv.view(np.float16), False)
        return np.array(ps.array())

    _both(case)


def test_open_group_memo_tells_a_bf16_psum_view_from_the_fp32_view():
    def case(fast):
        nc, rng = _core(fast), np.random.default_rng(3)
        st, mv = _tile(nc, (128, 128), BF16, rng=rng), _tile(nc, (128, 512), BF16, rng=rng)
        ps = _tile(nc, (128, 512), np.float32, "psum")
        nc.write(ps, np.full((128, 512), 500.0, np.float32))  # a plain write closes the group
        _matmul(nc, ps.view(BF16)[:, :512], st, mv, False)  # same element offsets, half the bytes
        _matmul(nc, ps, st, mv, None)
        return np.array(ps.array())

    out = _both(case)
    assert (out[:, 256:] < 400).all()  # the cells the bf16 view did not open were overwritten


def test_a_tensor_indirection_scatter_invalidates_decoded_sbuf_tiles():
    def case(fast):
        nc, rng = _core(fast), np.random.default_rng(1)
        st, mv = _tile(nc, (128, 128), BF16, rng=rng), _tile(nc, (128, 64), BF16, rng=rng)
        new = _tile(nc, (128, 64), BF16, rng=rng)
        ps = _tile(nc, (128, 64), np.float32, "psum")
        idx = _index(nc, np.arange(64)[::-1])
        _matmul(nc, ps, st, mv, False)  # decodes mv
        nc.execute(
            Op.TENSOR_COPY, {"dst": mv.indirect(idx, 64)}, {"src": new}, engine=Engine.VECTOR
        )
        _matmul(nc, ps, st, mv, False)
        return np.array(ps.array())

    _both(case)


def test_a_tensor_indirection_scatter_into_psum_closes_the_remembered_group():
    def case(fast):
        nc, rng = _core(fast), np.random.default_rng(2)
        st, mv = _tile(nc, (128, 128), BF16, rng=rng), _tile(nc, (128, 64), BF16, rng=rng)
        src = _tile(nc, (128, 64), np.float32)
        nc.write(src, np.full((128, 64), 1000.0, np.float32))
        ps = _tile(nc, (128, 64), np.float32, "psum")
        _matmul(nc, ps, st, mv, False)  # opens the group everywhere
        nc.execute(
            Op.TENSOR_COPY,
            {"dst": ps.indirect(_index(nc, np.arange(64)), 64)},
            {"src": src},
            engine=Engine.VECTOR,
        )
        _matmul(nc, ps, st, mv, None)  # the copied cells are closed: overwrite, not add
        return np.array(ps.array())

    assert (np.abs(_both(case)) < 500).all()
