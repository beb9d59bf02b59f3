"""The emulator's fast paths agree with the plain ones they shortcut.

- The fast-path accelerator (``CoreOptions(fast_paths=True)``, ``trnsim.core.accel.decode``)
  gives the plain interpreter's bits and record on matmul kernels.
- Rule verdicts cached per signature (``rules.Checker``) equal the plain ``rules.check``.
- The slicing fast path (``a:b`` keys) builds the same view as the general slice path.
- Views are re-checked for bounds unless known in bounds; a hand-built bad view still fails.
- A record-only timing run (``record_run``) records the same stream as ``run(functional=False)``.
- The memoised attribute freezing keeps values of different types apart (True vs 1).
- The scheduler's region index drops no dependency (checked against all earlier instructions).
"""

import itertools

import ml_dtypes
import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim.core import rules
from trnsim.core.isa import DEFAULT_ENGINE, Op
from trnsim.core.live import live
from trnsim.core.machine import NeuronCore
from trnsim.core.memory import View
from trnsim.core.options import CoreOptions
from trnsim.core.timing import region_of, regions_overlap, schedule
from trnsim.errors import KernelError
from trnsim.nki.simulate import record_run
from trnsim.nki.tensor import NkiTensor

BF16 = ml_dtypes.bfloat16


def _verdict(fn):
    try:
        fn()
    except KernelError as e:
        return (e.rule, e.message)
    return None


def _matmul_cases(nc: NeuronCore):
    """Legal and illegal nc_matmul calls that share shapes but differ in offsets, partitions,
    dtypes and attributes, in an order that repeats signatures."""
    st = NkiTensor.wrap(nc.allocate((128, 4, 128), BF16, "sbuf"))
    mv = NkiTensor.wrap(nc.allocate((128, 4, 512), BF16, "sbuf"))
    f32 = NkiTensor.wrap(nc.allocate((128, 512), np.float32, "sbuf"))
    ps = NkiTensor.wrap(nc.allocate((128, 512), np.float32, "psum"))
    ps_bf = NkiTensor.wrap(nc.allocate((128, 512), BF16, "psum"))
    cases = []
    for i, p0, dst, moving_kind, acc in itertools.product(
        range(4), (0, 32, 16), (ps, ps_bf, f32), ("aligned", "full", "fp32"), (None, True)
    ):
        rows = slice(p0, p0 + 32) if p0 else slice(None)
        moving = {"aligned": mv[rows, i, :], "full": mv[:, i, :], "fp32": f32}[moving_kind]
        attrs = {"accumulate": acc, "tile_position": (), "tile_size": (), "perf_mode": "none"}
        src = {"stationary": st[rows, i, :], "moving": moving}
        cases.append((Op.NC_MATMUL, {"dst": dst}, src, attrs))
    return cases


@pytest.mark.parametrize("target", ["gen2", "gen4"])
def test_cached_rule_verdicts_equal_plain_check(target):
    nc = NeuronCore(target, functional=False)
    cases = _matmul_cases(nc) * 2  # the second pass hits the cache for every legal signature
    seen_errors = set()
    for op, dst, src, attrs in cases:
        call = live(op, DEFAULT_ENGINE[op], dst, src, attrs, nc.spec)
        plain = _verdict(lambda call=call: rules.check(call))
        fast = _verdict(lambda op=op, d=dst, s=src, a=attrs: nc.execute(op, d, s, a))
        assert fast == plain
        if plain:
            seen_errors.add(plain[0])
    assert {"dtype", "shape", "start-partition"} <= seen_errors  # the grid has illegal calls
    assert nc.checker.passed  # and legal ones, remembered


def test_rule_registered_later_is_not_masked_by_cached_verdicts():
    nc = NeuronCore("gen4", functional=False)
    a = nc.allocate((128, 64), np.float32, "sbuf")
    b = nc.allocate((128, 64), np.float32, "sbuf")
    nc.execute(Op.TENSOR_COPY, {"dst": a}, {"src": b})
    extra = rules.Rule("no-copies", frozenset({Op.TENSOR_COPY}), lambda c: "copies forbidden")
    rules.RULES.append(extra)
    rules.refresh()
    try:
        with pytest.raises(KernelError, match="no-copies"):
            nc.execute(Op.TENSOR_COPY, {"dst": a}, {"src": b})
    finally:
        rules.RULES.remove(extra)
        rules.refresh()


def test_fast_slices_equal_general_slices():
    nc = NeuronCore("gen4", functional=False)
    for memory, shape in (("hbm", (64, 48, 40)), ("sbuf", (128, 6, 40))):
        t = NkiTensor.wrap(nc.allocate(shape, BF16, memory))
        rng = np.random.default_rng(0)
        for _ in range(50):
            key = []
            for n in shape:
                a, b = sorted(int(x) for x in rng.integers(0, n + 1, 2))
                drop = rng.integers(0, 4)  # also the open forms a:, :b and :
                key.append(slice(None if drop in (1, 3) else a, None if drop in (2, 3) else b))
            fast = t[tuple(key)]
            general = t[tuple(slice(k.start, k.stop, 1) for k in key)]  # step 1: general path
            for attr in ("shape", "strides", "offset", "p0", "fmt", "dtype", "inbounds"):
                assert getattr(fast, attr) == getattr(general, attr), attr
            assert fast.operand("x") == general.operand("x")
        with pytest.raises(KernelError, match="out-of-bounds"):
            t[0 : shape[0] + 1]


def test_hand_built_out_of_bounds_view_is_still_checked():
    nc = NeuronCore("gen4", functional=False)
    a = nc.allocate((128, 64), np.float32, "sbuf")
    bad = View(a.storage, (128, 65), (1, 1), 0, 0)
    assert not bad.inbounds
    with pytest.raises(KernelError, match="out-of-bounds"):
        nc.execute(Op.TENSOR_COPY, {"dst": bad}, {"src": a})


def _kernel(a, b):
    out = nl.ndarray((128, 256), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in range(2):
        x = nl.load(a[:, i * 256 : (i + 1) * 256])
        y = nl.load(b[:, i * 256 : (i + 1) * 256])
        z = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=z, data1=x, data2=y, op=nl.add)
        nisa.tensor_copy(dst=x, src=z)
        nl.store(out, x)
    return out


def test_record_run_records_what_a_timing_only_run_records():
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((128, 512)).astype(BF16) for _ in range(2))
    full = nki.run(_kernel, a, b, functional=False)
    rec = record_run(_kernel, a, b)
    assert rec.outputs is None
    assert rec.instructions == full.instructions
    assert [(i.file, i.line) for i in rec.instructions] == [
        (i.file, i.line) for i in full.instructions
    ]
    assert rec.instructions[0].file.endswith("test_core_fast_paths.py")


def test_frozen_attributes_keep_types_apart():
    nc = NeuronCore("gen4", functional=False)
    a = nc.allocate((128, 64), np.float32, "sbuf")
    for value in (True, 1, 1.0, True):
        nc.execute(Op.MEMSET, {"dst": a}, {}, {"value": value})
    got = [type(i.attr("value")) for i in nc.record]
    assert got == [bool, int, float, bool]


def test_schedule_drops_no_dependency():
    """Every instruction starts after every earlier one it conflicts with (RAW, WAR, WAW on
    overlapping regions), checked pairwise against the full history."""
    rng = np.random.default_rng(2)
    a, b = (rng.standard_normal((128, 512)).astype(BF16) for _ in range(2))
    instrs = nki.run(_kernel, a, b, functional=False).instructions
    prof = schedule(instrs, "gen4")
    start, end = prof.schedule.start, prof.schedule.end
    regions = [([region_of(o) for o in i.src], [region_of(o) for o in i.dst]) for i in instrs]
    checked = 0
    for j, (reads_j, writes_j) in enumerate(regions):
        for i in range(j):
            reads_i, writes_i = regions[i]
            conflict = any(regions_overlap(w, r) for w in writes_i for r in reads_j) or any(
                regions_overlap(x, w) for x in reads_i + writes_i for w in writes_j
            )
            if conflict:
                checked += 1
                assert start[j] >= end[i], (i, j, instrs[i], instrs[j])
    assert checked > len(instrs)  # the kernel has real dependencies


def _rewrite_kernel(lhsT, rhs):
    """One stationary and one moving tile rewritten between matmuls (by DMA and by an engine
    copy), accumulation groups opened, extended and overwritten: stale decoded tiles or a
    stale 'group open' memo would show in the result."""
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, 2 * N), dtype=nl.float32, buffer=nl.shared_hbm)
    st = nl.ndarray((128, M), dtype=lhsT.dtype, buffer=nl.sbuf)
    mv = nl.ndarray((128, N), dtype=rhs.dtype, buffer=nl.sbuf)
    ps = nl.ndarray((M, 2 * N), dtype=nl.float32, buffer=nl.psum)
    res = nl.ndarray((M, 2 * N), dtype=nl.float32, buffer=nl.sbuf)
    for k in range(K // 128):
        nisa.dma_copy(dst=st, src=lhsT[k * 128 : (k + 1) * 128, :])
        nisa.dma_copy(dst=mv, src=rhs[k * 128 : (k + 1) * 128, :])
        if k == 3:  # an engine write closes the group: the next auto matmul overwrites
            nisa.memset(dst=ps[:, 0:N], value=1.0)
        nisa.nc_matmul(dst=ps[:, 0:N], stationary=st, moving=mv)  # accumulate=None
        if k == 1:
            nisa.tensor_copy(dst=mv, src=st[:, 0:N])  # an engine write of the moving tile
        nisa.nc_matmul(dst=ps[:, N : 2 * N], stationary=st, moving=mv, accumulate=k > 0)
        if k == 2:
            nisa.nc_matmul(dst=ps[:, 0:N], stationary=st, moving=mv, accumulate=False)
    nisa.tensor_copy(dst=res, src=ps)
    nisa.dma_copy(dst=out, src=res)
    return out


@pytest.mark.parametrize("which", ["rewrite", "blocked", "tiled"])
def test_matmul_fast_path_is_bit_equal_to_the_spec_path(monkeypatch, which):
    import importlib.util
    import pathlib

    rng = np.random.default_rng(3)
    if which == "rewrite":
        kernel = _rewrite_kernel
        args = (
            rng.standard_normal((512, 128)).astype(BF16),
            rng.standard_normal((512, 128)).astype(BF16),
        )
    else:
        path = pathlib.Path(__file__).resolve().parents[1] / "examples/kernels/matmul.py"
        spec = importlib.util.spec_from_file_location("mm_fast", path)
        mod = importlib.util.module_from_spec(spec)
        nki.install()
        spec.loader.exec_module(mod)
        kernel = mod.matmul_blocked if which == "blocked" else mod.matmul_tiled
        args = mod.make_inputs(rng, K=512, M=512, N=1024)
    fast = nki.run(kernel, *args, options=CoreOptions(fast_paths=True))
    plain = nki.run(kernel, *args)  # the default: the plain interpreter
    assert not plain.cores[0].fast_paths and fast.cores[0].fast_paths
    assert fast.outputs.dtype == plain.outputs.dtype
    assert np.array_equal(fast.outputs.view(np.uint8), plain.outputs.view(np.uint8))
    assert fast.instructions == plain.instructions
    if which == "rewrite":  # and right: an independent fp32 golden of the kernel above
        st = [t.astype(np.float32) for t in np.split(args[0], 4)]
        mv = [t.astype(np.float32) for t in np.split(args[1], 4)]
        left = st[3].T @ mv[3]
        right = st[0].T @ mv[0] + st[1].T @ st[1] + st[2].T @ mv[2] + st[3].T @ mv[3]
        golden = np.concatenate([left, right], axis=1)
        np.testing.assert_allclose(fast.outputs, golden, rtol=1e-5, atol=1e-4)
