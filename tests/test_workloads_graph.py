"""Op graphs: FLOP identities (2N forward, 6N training), attention pairs, MoE touch counts."""

import pytest

from trnsim.errors import ConfigError
from trnsim.workloads import (
    MODELS,
    attention_pairs,
    expected_experts_touched,
    forward_graph,
    model,
    train_flops_per_token,
)


@pytest.mark.parametrize("name", [n for n, _ in MODELS])
def test_forward_matmul_flops_are_2n_per_token(name):
    m = model(name)
    g = forward_graph(m, 2, 256)
    assert g.flops_of("matmul", "expert") == pytest.approx(2 * g.tokens * m.n_matmul_params_active)


def test_training_flops_are_6n_without_attention():
    m = model("llama-2-7b")
    assert train_flops_per_token(m, 4096, include_attention=False) == 6 * m.n_matmul_params_active


def test_attention_flops_mha_are_4_d_per_pair_per_layer():
    m = model("llama-2-7b")  # MHA: 2 * (hd + hd) * heads = 4 d per pair
    s = 1024
    g = forward_graph(m, 1, s)
    assert g.flops_of("attention") == pytest.approx(m.n_layers * 4 * m.d_model * s * (s + 1) / 2)


def test_attention_pairs_causal_and_decode():
    assert attention_pairs(8, 8, None) == 36  # 1 + 2 + ... + 8
    assert attention_pairs(1, 100, None) == 100  # one decode step sees the whole context
    assert attention_pairs(1, 100, 16) == 16


def test_attention_pairs_sliding_window_brute_force():
    for q, ctx, w in [(10, 10, 4), (5, 20, 8), (30, 30, 30), (7, 9, 1)]:
        brute = sum(min(w, ctx - q + i + 1) for i in range(q))
        assert attention_pairs(q, ctx, w) == pytest.approx(brute)


def test_experts_touched_limits():
    assert expected_experts_touched(4, 128, 4) == pytest.approx(4)  # one token, top-4
    assert expected_experts_touched(4 * 100_000, 128, 4) == pytest.approx(128)


def test_decode_reads_kv_cache_and_prefill_does_not():
    m = model("llama-3-8b")
    dec = forward_graph(m, 4, 1, 1000, phase="decode")
    kv = sum(op.kv_elems * n for op, n in dec.all_ops())
    assert kv == 4 * m.kv_cache_elems(1000)
    pre = forward_graph(m, 4, 1000, phase="prefill")
    assert sum(op.kv_elems for op, _ in pre.all_ops()) == 0


def test_moe_decode_reads_fewer_expert_weights_than_prefill():
    m = model("mixtral-8x7b")
    dec = forward_graph(m, 1, 1, 100, phase="decode")
    pre = forward_graph(m, 1, 4096, phase="prefill")
    w = lambda g: sum(op.weight_elems * n for op, n in g.all_ops() if op.kind == "expert")  # noqa: E731
    assert w(dec) == pytest.approx(w(pre) * 2 / 8, rel=0.01)


def test_graph_rejects_bad_shapes():
    with pytest.raises(ConfigError, match=r"context \(4\) must be >= q_len \(8\)"):
        forward_graph(model("llama-2-7b"), 1, 8, 4)
