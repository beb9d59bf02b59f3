"""torch.compile with trnsim's backend: the eager numerics bit for bit, fused timing."""

import pytest

torch = pytest.importorskip("torch")

import trnsim.torch as tt  # noqa: E402
from trnsim.torch.models import GPT, GPTConfig, batches, corpus, encode  # noqa: E402

CFG = GPTConfig(d_model=32, n_layers=2, n_heads=2, seq_len=16)


def _data():
    return next(batches(encode(corpus(5000)), 4, CFG.seq_len))


@pytest.mark.parametrize(
    ("policy", "rounding", "dtype"),
    [
        ("fp32", "rne", torch.float32),
        ("bf16", "stochastic", torch.float32),
        ("mxfp8", "rne", torch.float32),
        ("mxfp4", "stochastic", torch.float32),
        ("native", "stochastic", torch.bfloat16),
    ],
)
def test_gpt_forward_and_backward_equal_in_eager_and_compiled(policy, rounding, dtype):
    x, y = _data()
    eager, comp = GPT(CFG).to(dtype), GPT(CFG).to(dtype)
    with tt.trn3(policy, rounding=rounding, seed=5):
        le = eager(x, y)
        le.backward()
    compiled = torch.compile(comp, backend=tt.backend(policy, rounding=rounding, seed=5))
    lc = compiled(x, y)
    lc.backward()
    assert torch.equal(le, lc)
    for (name, a), b in zip(eager.named_parameters(), comp.parameters(), strict=True):
        assert torch.equal(a.grad, b.grad), name
    # and trnsim's numerics did something (could fail: the policy ignored)
    if policy != "fp32":
        ref = GPT(CFG).to(dtype)
        assert not torch.equal(ref(x, y), le)


def test_compiled_profile_fuses_elementwise_chains():
    x, y = _data()
    be = tt.backend("bf16", timing=True)
    model = torch.compile(GPT(CFG), backend=be)
    model(x, y).backward()
    prof = be.profile()
    fused = {r.group for r in prof.records if r.group >= 0}
    assert fused and prof.total_s > 0
    assert {r.phase for r in prof.records} == {"forward", "backward"}
    assert any(r.module.startswith("blocks.0") for r in prof.records)
    unfused = tt.backend("bf16", timing=True, fuse=False)
    m2 = torch.compile(GPT(CFG), backend=unfused)
    m2(x, y).backward()
    assert unfused.profile().total_s > prof.total_s  # fusion saves passes over HBM
