"""NKI kernels (new and legacy API) as PyTorch ops; a custom op with register_autograd; a
public nki-library kernel called from PyTorch against its reference."""

import os
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import trnsim.nki  # noqa: E402
import trnsim.torch as tt  # noqa: E402

trnsim.nki.install()
import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402
from neuronxcc import nki as legacy_nki  # noqa: E402
from neuronxcc.nki import language as lnl  # noqa: E402

LIBRARY = Path(os.environ.get("TRNSIM_NKI_LIBRARY", "/work/checkouts/nki-library"))


@nki.jit
def square(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    s = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=s, data1=t, data2=t, op=nl.multiply)
    nisa.dma_copy(dst=out, src=s)
    return out


@nki.jit
def square_backward(grad, x):
    """d(x^2)/dx * grad = 2 x grad."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    g = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=g, src=grad)
    nisa.dma_copy(dst=t, src=x)
    p = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.scalar_tensor_tensor(dst=p, data=t, op0=nl.multiply, operand0=2.0, op1=nl.multiply,
                              operand1=g)  # fmt: skip
    nisa.dma_copy(dst=out, src=p)
    return out


@legacy_nki.jit
def legacy_add(a, b):
    out = lnl.ndarray(a.shape, dtype=a.dtype, buffer=lnl.shared_hbm)
    ta, tb = lnl.load(a), lnl.load(b)
    lnl.store(out, value=lnl.add(ta, tb))
    return out


def test_new_api_kernel_takes_and_returns_torch_tensors_bit_exactly():
    x = torch.randn(128, 64)
    out = tt.nki_op(square)(x)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32
    assert torch.equal(out, x * x)  # one fp32 multiply, exact as in PyTorch
    xb = x.bfloat16()
    assert torch.equal(tt.nki_op(square)(xb), xb * xb)


def test_legacy_kernel_as_an_op():
    a, b = torch.randn(64, 32), torch.randn(64, 32)
    assert torch.equal(tt.nki_op(legacy_add)(a, b), a + b)


def test_custom_op_with_register_autograd_and_compile():
    op = tt.custom_op("trnsim_test::square", square, backward=square_backward,
                      fake=lambda x: torch.empty_like(x))  # fmt: skip
    x = torch.randn(128, 16, requires_grad=True)
    y = op(x)
    y.sum().backward()
    assert torch.equal(y, x.detach() ** 2)
    assert torch.allclose(x.grad, 2 * x.detach())
    # one opaque op under torch.compile (fake registered), the kernel's bits
    f = torch.compile(lambda t: op(t) + 1, backend=tt.backend())
    assert torch.equal(f(x.detach()), x.detach() ** 2 + 1)


def test_kernel_op_is_timed_by_its_instructions_in_a_profile():
    x = torch.randn(128, 512)
    with tt.trn3(timing=True) as run:
        tt.nki_op(square)(x)
    (rec,) = [r for r in run.records if r.kind == "kernel"]
    assert rec.seconds > 0 and rec.instructions and rec.op == "nki::square"
    assert run.profile().total_s == pytest.approx(rec.seconds)


def test_kernel_error_names_module_kernel_and_line():
    @nki.jit
    def too_tall(x):
        t = nl.ndarray((256, 4), dtype=x.dtype, buffer=nl.sbuf)  # 256 > 128 partitions
        nisa.dma_copy(dst=t, src=x)
        return x

    with pytest.raises(tt.TorchOpError) as e:
        tt.nki_op(too_tall)(torch.randn(256, 4))
    msg = str(e.value)
    assert "NKI kernel too_tall" in msg and "test_torch_kernels.py:" in msg


@pytest.mark.skipif(not LIBRARY.is_dir(), reason="no nki-library checkout")
def test_nki_library_kernel_called_from_pytorch_matches_its_reference():
    """nki-library's cumsum, imported unmodified from the checkout as `trnsim conformance`
    imports it, called with torch tensors, against the case's NumPy reference."""
    from trnsim.conformance.runner import all_cases, checkout_imports, load_kernel

    case = next(c for c in all_cases() if c.name == "library/cumsum_2d")
    with checkout_imports(LIBRARY, case.repo):
        kernel = load_kernel(case, LIBRARY)
        (x,) = case.inputs(np.random.default_rng(0))
        out = tt.nki_op(kernel, target=case.target)(torch.from_numpy(x))
    ref = case.reference(x)
    assert isinstance(out, torch.Tensor)
    np.testing.assert_allclose(out.numpy(), ref, rtol=case.rtol, atol=case.atol)
