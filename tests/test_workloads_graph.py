"""Op graphs: FLOP identities (2N forward, 6N training), attention pairs, MoE touch counts."""

import dataclasses

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
    want = 2 * g.tokens * m.n_matmul_params_active
    if not m.head_per_token:  # a classifier's head runs on one token per sequence
        want -= 2 * (g.tokens - g.batch) * m.d_model * m.vocab
    assert g.flops_of("matmul", "expert") == pytest.approx(want)


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


def test_encoder_attends_to_every_pair_and_has_no_decode():
    m = model("bert-large")
    s = 128
    g = forward_graph(m, 1, s, phase="train")
    # MHA: 4 d FLOPs per pair per layer, all s x s pairs (no causal mask)
    assert g.flops_of("attention") == pytest.approx(m.n_layers * 4 * m.d_model * s * s)
    with pytest.raises(ConfigError, match="encoder"):
        forward_graph(m, 1, 1, 129, phase="decode")


def test_vit_patch_embedding_is_a_matmul_and_head_sees_the_class_token():
    m = model("vit-base-16")
    g = forward_graph(m, 4, 197, phase="train")
    ops = {op.name: op for op in g.pre + g.post}
    assert ops["patch_embedding"].flops == 2 * 4 * 197 * 768 * 768
    assert ops["lm_head"].flops == 2 * 4 * 768 * 1000  # one class token per image


def test_mtp_runs_in_training_only():
    m = model("deepseek-v3")
    train = forward_graph(m, 1, 64, phase="train")
    prefill = forward_graph(m, 1, 64, phase="prefill")
    assert [gr.name for gr in train.groups][-1] == "mtp"
    assert "mtp" not in [gr.name for gr in prefill.groups]
    # the MTP module's FLOPs: 2 x tokens x its matmul parameters (block, projection, head)
    extra = train.flops_of("matmul", "expert") - forward_graph(
        dataclasses.replace(m, n_mtp_modules=0), 1, 64, phase="train"
    ).flops_of("matmul", "expert")
    assert extra == pytest.approx(2 * 64 * m.mtp_matmul_params)
