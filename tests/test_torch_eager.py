"""The eager front end: matmuls as the Tensor engine, errors, fallbacks, records."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import trnsim.torch as tt  # noqa: E402
from trnsim.torch.gemm import gemm  # noqa: E402
from trnsim.torch.numerics import numerics, op_seed  # noqa: E402


@pytest.mark.parametrize("policy", ["bf16", "fp8", "mxfp8", "mxfp4"])
@pytest.mark.parametrize("rounding", ["rne", "stochastic"])
def test_eager_mm_is_the_gemm_of_the_kernels(policy, rounding):
    """torch.mm under trn3 = trnsim.torch.gemm with the op's seed (which
    tests/test_torch_gemm.py proves equal to the NKI kernels on the emulator)."""
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(150, 260, generator=g), torch.randn(260, 70, generator=g)
    with tt.trn3(policy, rounding=rounding, seed=11):
        out = a @ b
    A, B = a.numpy(), b.numpy()
    pol = numerics(policy, rounding=rounding, seed=11)
    seed = op_seed(11, "aten::mm", A, B) if rounding == "stochastic" else 0
    assert np.array_equal(out.numpy(), gemm(A, B, pol, "float32", seed=seed))
    assert not torch.equal(out, a @ b)  # rounding happened (could fail: numerics ignored)


def test_bf16_tensors_keep_bf16_results_rounded_from_fp32_psum():
    g = torch.Generator().manual_seed(1)
    a = torch.randn(64, 300, generator=g).bfloat16()
    b = torch.randn(300, 32, generator=g).bfloat16()
    with tt.trn3():
        out = a @ b
    assert out.dtype == torch.bfloat16
    ref = (a.float() @ b.float()).bfloat16()
    assert (out.float() - ref.float()).abs().max() <= ref.float().abs().max() * 2**-7


def test_linear_records_modules_phases_and_flops():
    lin = torch.nn.Sequential(torch.nn.Linear(32, 16), torch.nn.ReLU())
    x = torch.randn(8, 32, requires_grad=True)
    with tt.trn3("bf16", timing=True) as run:
        lin(x).sum().backward()
    mm = [r for r in run.records if r.kind == "matmul"]
    assert [r.phase for r in mm] == ["forward", "backward", "backward"]
    assert mm[0].module == "Sequential.0" and mm[0].flops == 2 * 8 * 32 * 16
    prof = run.profile()
    assert prof.total_s > 0 and all(r.seconds > 0 for r in prof.timed)
    assert {m.module for m in prof.modules()} >= {"Sequential.0", "Sequential.1"}


def test_float64_is_refused_naming_module_and_op():
    lin = torch.nn.Linear(4, 4).double()
    with pytest.raises(tt.TorchOpError) as e, tt.trn3():
        lin(torch.randn(2, 4, dtype=torch.float64))
    msg = str(e.value)
    assert msg.startswith("Linear: aten::addmm:") and "float64" in msg


def test_unmapped_ops_are_listed_as_fallbacks():
    x = torch.randn(16, 16)
    with tt.trn3(timing=True) as run:
        torch.linalg.qr(x)
        torch.fft.fft(x)
    fallbacks = run.fallbacks
    assert any("linalg_qr" in k for k in fallbacks), fallbacks
    assert any("fft" in k for k in fallbacks), fallbacks
    assert "fallbacks" in run.profile().to_json()


def test_sdpa_runs_as_math_with_the_sessions_numerics():
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(2, 4, 16, 8, generator=g) for _ in range(3))
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    with tt.trn3("fp32", timing=True) as run:
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert torch.allclose(out, ref, atol=1e-5)
    mm = [r for r in run.records if r.kind == "matmul"]
    assert len(mm) == 2 and all(r.kernel.startswith("flash attention") for r in mm)


@pytest.mark.parametrize("dims", [1, 2])
def test_convolution_forward_and_backward_run_as_gemms(dims):
    conv = (torch.nn.Conv1d if dims == 1 else torch.nn.Conv2d)(3, 5, 3, padding=1, stride=2)
    x = torch.randn(2, 3, *([9] * dims), requires_grad=True)
    ref = conv(x)
    ref.square().sum().backward()
    grads = [t.grad.clone() for t in (x, conv.weight, conv.bias)]
    for t in (x, conv.weight, conv.bias):
        t.grad = None
    with tt.trn3("fp32", timing=True) as run:
        y = conv(x)
        y.square().sum().backward()
    assert torch.allclose(y, ref, atol=1e-5)
    for t, g in zip((x, conv.weight, conv.bias), grads, strict=True):
        assert torch.allclose(t.grad, g, atol=1e-4)
    ops = {r.op for r in run.records if r.kind == "matmul"}
    assert ops == {"aten::convolution", "aten::convolution_backward"}
    assert run.fallbacks == {}
    with tt.trn3("mxfp4"):
        assert not torch.allclose(conv(x), ref, atol=1e-3)  # the numerics apply


def test_eager_profile_with_adaptive_fusion_is_faster_and_keeps_every_op():
    mlp = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64))
    x = torch.randn(32, 64)
    with tt.trn3("bf16", timing=True) as run:
        (mlp(x) * 2 + 1).relu().sum().backward()
    plain = run.profile().total_s
    fused = run.profile(fuse=True)
    assert 0 < fused.total_s < plain
    assert len(fused.records) == len(run.records)
    assert any(r.kernel.startswith("fused group") for r in fused.records)


def test_attention_forward_is_timed_by_the_attention_nki_kernel():
    q, k, v = (torch.randn(1, 2, 128, 64) for _ in range(3))
    with tt.trn3("bf16", timing=True) as run:
        torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    prof = run.profile()
    bmm = [r for r in prof.records if r.op == "aten::bmm"]
    assert all(r.source == "attention NKI kernel on the timing model" for r in bmm)
    assert bmm[0].instructions and prof.total_s > 0
