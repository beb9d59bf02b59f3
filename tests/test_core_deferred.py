"""The deferred accelerator (``trnsim.core.accel.deferred``, ``CoreOptions(deferred=True)``,
which ``TRNSIM_DEFERRED=1`` selects for ``nki.run``) against the plain, synchronous path.

Each promise of the module docstring has a check here: same outputs bit for bit and the same
record (so the same allocations and liveness) on every example kernel; reads that see the
writes before them (an fp32 operand overwritten after its matmul, host reads, a scattered
index); the same errors, warnings and locations, the earlier failure first; no threads with
stochastic rounding; recycled memory still shows the sentinel.
"""

import importlib.util
import pathlib
import threading
import warnings

import ml_dtypes
import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim.errors import KernelError

BF16 = ml_dtypes.bfloat16
ROOT = pathlib.Path(__file__).resolve().parents[1] / "examples" / "kernels"


def _load(name: str):
    nki.install()
    spec = importlib.util.spec_from_file_location(f"deferred_{name}", ROOT / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _env(deferred: bool) -> str:
    """``TRNSIM_DEFERRED`` for a run on the deferred (True) or the plain (False) path."""
    return "1" if deferred else "0"


def _both(monkeypatch, kernel, *args, **kwargs):
    """(plain run, deferred run) of ``kernel`` on copies of ``args``."""
    runs = []
    for deferred in (False, True):
        monkeypatch.setenv("TRNSIM_DEFERRED", _env(deferred))
        copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        runs.append(nki.run(kernel, *copies, **kwargs))
    return runs


def _same_outputs(a, b):
    if isinstance(a, tuple | list):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _same_outputs(x, y)
        return
    x, y = np.asarray(a), np.asarray(b)
    assert x.dtype == y.dtype and x.shape == y.shape
    assert x.tobytes() == y.tobytes()


EXAMPLES = [
    ("matmul", "matmul_tiled", "make_inputs", {"K": 256, "M": 256, "N": 1024}),
    ("matmul", "matmul_blocked", "make_inputs", {"K": 512, "M": 512, "N": 1024}),
    ("fp8_matmul", "fp8_matmul_double_row", "make_inputs", {}),
    ("mx_matmul", "mxfp8_matmul", "make_inputs", {}),
    ("mxfp4_matmul", "mxfp4_mxfp8_matmul", "make_inputs", {}),
    ("norms", "rmsnorm", "make_inputs_rmsnorm", {}),
    ("norms", "layernorm", "make_inputs_layernorm", {}),
    ("softmax", "softmax", "make_inputs", {}),
    ("flash_attention", "flash_attention_fwd", "make_inputs", {"S": 384}),
    ("embedding_gather", "embedding_update", "make_inputs_embedding_update", {}),
    ("column_gather", "topk_column_matmul", "make_inputs_topk_column_matmul", {}),
]


@pytest.mark.parametrize(("module", "kernel", "maker", "kw"), EXAMPLES)
def test_examples_same_bits_and_same_record(monkeypatch, module, kernel, maker, kw):
    mod = _load(module)
    args = getattr(mod, maker)(np.random.default_rng(3), **kw)
    args = args if isinstance(args, tuple) else (args,)
    plain, deferred = _both(monkeypatch, getattr(mod, kernel), *args)
    _same_outputs(plain.outputs, deferred.outputs)
    # the same instructions on the same addresses: allocation and liveness unchanged
    assert plain.instructions == deferred.instructions


def test_fp32_operand_overwritten_after_its_matmul(monkeypatch):
    """An fp32 tile is read by the product, not copied: a later write must wait for it."""

    def k(a, b):
        out = nl.ndarray((128, 256), nl.float32, buffer=nl.shared_hbm)
        st = nl.ndarray((128, 128), nl.float32, buffer=nl.sbuf)
        mv = nl.ndarray((128, 256), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=st, src=a)
        nisa.dma_copy(dst=mv, src=b)
        ps = nl.ndarray((128, 256), nl.float32, buffer=nl.psum)
        for _ in range(4):
            nisa.nc_matmul(dst=ps, stationary=st, moving=mv)
        nisa.memset(dst=st, value=0.0)  # overwrites an operand of four pending products
        nisa.memset(dst=mv, value=0.0)
        res = nl.ndarray((128, 256), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=ps)
        nisa.dma_copy(dst=out, src=res)
        return out

    rng = np.random.default_rng(0)
    a = rng.standard_normal((128, 128)).astype(np.float32)
    b = rng.standard_normal((128, 256)).astype(np.float32)
    plain, deferred = _both(monkeypatch, k, a, b)
    _same_outputs(plain.outputs, deferred.outputs)
    np.testing.assert_allclose(deferred.outputs, 4 * (a.T @ b), rtol=1e-5, atol=1e-4)


def test_device_print_sees_the_writes_before_it(monkeypatch, capsys):
    def k(a, b):
        st = nl.ndarray((128, 128), BF16, buffer=nl.sbuf)
        mv = nl.ndarray((128, 4), BF16, buffer=nl.sbuf)
        nisa.dma_copy(dst=st, src=a)
        nisa.dma_copy(dst=mv, src=b)
        ps = nl.ndarray((128, 4), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=ps, stationary=st, moving=mv)
        nl.device_print("ps=", ps)

    rng = np.random.default_rng(1)
    a = rng.standard_normal((128, 128)).astype(BF16)
    b = rng.standard_normal((128, 4)).astype(BF16)
    plain, deferred = _both(monkeypatch, k, a, b)
    assert plain.printed == deferred.printed
    assert "nan" not in deferred.printed[0].lower()


def _reduce_never_started() -> None:
    """select_reduce continuing a max accumulation that no reset_reduce started: an error
    only the executor finds (it depends on the Vector engine's state)."""
    t = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=1.0)
    p = nl.ndarray((128, 64), nl.uint8, buffer=nl.sbuf)
    nisa.memset(dst=p, value=1)
    r = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
    nisa.select_reduce(t, p, t, 0.0, reduce_res=r, reduce_cmd=nisa.reduce_cmd.reduce)


def _state_error_then(bad_second: bool):
    def k():
        _reduce_never_started()  # an executor check (engine state)
        if bad_second:
            nl.ndarray((129, 4), nl.float32, buffer=nl.sbuf)  # a front-end error, later

    return k


def _error(monkeypatch, kernel, deferred: bool) -> KernelError:
    monkeypatch.setenv("TRNSIM_DEFERRED", _env(deferred))
    with pytest.raises(KernelError) as info:
        nki.run(kernel)
    return info.value


@pytest.mark.parametrize("bad_second", [False, True])
def test_deferred_error_same_rule_line_and_precedence(monkeypatch, bad_second):
    kernel = _state_error_then(bad_second)
    plain = _error(monkeypatch, kernel, False)
    deferred = _error(monkeypatch, kernel, True)
    assert plain.rule == "reduce-cmd"  # the earlier failure wins in both paths
    assert (deferred.rule, deferred.message, deferred.kernel_file, deferred.kernel_line) == (
        plain.rule,
        plain.message,
        plain.kernel_file,
        plain.kernel_line,
    )
    assert deferred.kernel_file == __file__


def test_commit_warning_has_the_kernel_line(monkeypatch):
    def k(a):
        st = nl.ndarray((128, 128), BF16, buffer=nl.sbuf)
        nisa.dma_copy(dst=st, src=a)
        ps = nl.ndarray((128, 128), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=ps, stationary=st, moving=st, accumulate=True)

    a = np.ones((128, 128), BF16)
    seen = []
    for deferred in (False, True):
        monkeypatch.setenv("TRNSIM_DEFERRED", _env(deferred))
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            nki.run(k, a)
        seen.append([(str(w.message), w.filename, w.lineno) for w in got])
    assert seen[0] == seen[1]
    assert any("psum-uninitialized-accumulate" in m for m, _, _ in seen[1])


def test_no_threads_with_stochastic_rounding(monkeypatch):
    names = []

    def k(a):
        names.extend(t.name for t in threading.enumerate())
        t = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)

    monkeypatch.setenv("TRNSIM_DEFERRED", _env(True))
    nki.run(k, np.ones((128, 8), np.float32), rounding="stochastic")
    assert not any(n.startswith("trnsim-") for n in names)
    nki.run(k, np.ones((128, 8), np.float32))
    assert any(n.startswith("trnsim-stream") for n in names)


def test_recycled_memory_still_shows_the_sentinel(monkeypatch):
    """A run writes all of SBUF; the next run's cores reuse that memory, and an allocation
    read before any write still reads the uninitialised sentinel."""

    def fill(a):
        t = nl.ndarray((128, 2048), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)

    def read_uninitialised():
        out = nl.ndarray((128, 2048), nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((128, 2048), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=out, src=t)
        return out

    monkeypatch.setenv("TRNSIM_DEFERRED", _env(True))
    for _ in range(3):
        nki.run(fill, np.ones((128, 2048), np.float32))
        assert np.isnan(nki.run(read_uninitialised).outputs).all()


def test_attribute_changed_after_the_call_does_not_reach_the_queue(monkeypatch):
    """Review finding: an array passed as a value and changed by the host afterwards."""

    def k(a):
        out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        for _ in range(20):  # keep the stream behind the kernel's thread
            nisa.dma_copy(dst=t, src=a)
        v = np.array(1.0, np.float32)
        nisa.memset(dst=t, value=v)
        v[...] = 2.0
        nisa.dma_copy(dst=out, src=t)
        return out

    plain, deferred = _both(monkeypatch, k, np.zeros((128, 64), np.float32))
    _same_outputs(plain.outputs, deferred.outputs)
    assert (deferred.outputs == 1.0).all()


def _overflow_then(kind: str):
    """A kernel whose fp32 matmul overflows in BLAS, before (``warn``) a KernelWarning or
    after (``fail``) a failing instruction."""

    def k(a, big):
        st = nl.ndarray((128, 128), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=st, src=a)
        ps = nl.ndarray((128, 128), nl.float32, buffer=nl.psum)
        if kind == "fail":
            nisa.nc_matmul(dst=ps, stationary=st, moving=st)  # pending, reads st
            _reduce_never_started()  # an in-order instruction that fails (engine state)
        bg = nl.ndarray((128, 128), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=bg, src=big)
        ps2 = nl.ndarray((128, 128), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=ps2, stationary=bg, moving=bg)  # overflows in BLAS
        if kind == "warn":
            nisa.nc_matmul(dst=ps, stationary=st, moving=st, accumulate=True)  # KernelWarning

    return k


@pytest.mark.parametrize("kind", ["warn", "fail"])
@pytest.mark.parametrize("action", ["always", "error"])
def test_warnings_in_program_order_and_none_after_a_failure(monkeypatch, kind, action):
    """Review findings: product warnings came after later KernelWarnings, and a failure was
    followed by later products' warnings (which a -W error filter turned into the error)."""
    a = np.ones((128, 128), np.float32)
    big = np.full((128, 128), 3e38, np.float32)
    seen = []
    for deferred in (False, True):
        monkeypatch.setenv("TRNSIM_DEFERRED", _env(deferred))
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter(action)
            try:
                nki.run(_overflow_then(kind), a.copy(), big.copy())
                outcome = None
            except Exception as exc:
                outcome = (type(exc).__name__, str(exc))
        seen.append((outcome, [(w.category, str(w.message), w.lineno) for w in got]))
    assert seen[0] == seen[1]
    if kind == "fail":
        assert seen[1][0][0] == "KernelError"
