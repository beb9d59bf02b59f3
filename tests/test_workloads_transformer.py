"""Model presets: parameter counts against published sizes, validation errors."""

import pytest

from trnsim.errors import ConfigError, DuplicateNameError, UnknownNameError
from trnsim.workloads import MODELS, ModelArgs, model
from trnsim.workloads.transformer import _register

# Published totals (and active parameters for MoE), in billions.
PUBLISHED = {
    "llama-2-7b": 6.74,
    "llama-2-13b": 13.0,
    "llama-2-70b": 69.0,
    "llama-3-8b": 8.03,
    "llama-3-70b": 70.6,
    "llama-3.1-405b": 405.9,
    "mistral-7b": 7.24,
    "codellama-13b": 13.0,
    "qwen3-32b": 32.8,
    "gpt3-175b": 175.0,
    "mixtral-8x7b": 46.7,
    "gpt-oss-120b": 116.8,
    "gpt-oss-20b": 20.9,
    "deepseek-v3": 671.0,
    "llama-3.3-70b": 70.6,
    "qwen3-30b-a3b": 30.5,
    "qwen3-235b-a22b": 235.0,
    "mixtral-8x22b": 141.0,
    "bert-large": 0.336,  # HF bert-large-uncased: 336 M with the 1 M pooler we leave out
    "bert-base": 0.110,
    "vit-base-16": 0.0866,  # HF google/vit-base-patch16-224: 86.6 M
}
# Active parameters as their publishers count them (excluding embeddings for GPT-OSS).
ACTIVE = {
    "mixtral-8x7b": 12.9,
    "deepseek-v3": 37.0,
    "qwen3-30b-a3b": 3.3,
    "qwen3-235b-a22b": 22.0,
    "mixtral-8x22b": 39.0,
}
ACTIVE_MATMUL = {"gpt-oss-120b": 5.13, "gpt-oss-20b": 3.61}


@pytest.mark.parametrize("name,billions", PUBLISHED.items())
def test_parameter_count_matches_published(name, billions):
    assert model(name).n_params / 1e9 == pytest.approx(billions, rel=0.02)


@pytest.mark.parametrize("name,billions", ACTIVE.items())
def test_active_parameters_match_published(name, billions):
    assert model(name).n_active_params / 1e9 == pytest.approx(billions, rel=0.03)


@pytest.mark.parametrize("name,billions", ACTIVE_MATMUL.items())
def test_gpt_oss_active_excluding_embeddings(name, billions):
    assert model(name).n_matmul_params_active / 1e9 == pytest.approx(billions, rel=0.01)


def test_dense_models_are_fully_active():
    for _, m in MODELS:
        if not m.is_moe:
            assert m.n_active_params == m.n_params


def test_every_preset_names_a_source():
    assert all(m.source for _, m in MODELS)


def test_unknown_model_lists_valid_names():
    with pytest.raises(UnknownNameError, match=r"llama-3\.1-70b"):
        model("llama-9")


def test_registry_refuses_duplicates():
    with pytest.raises(DuplicateNameError):
        _register(model("llama-2-7b"))


def test_head_divisibility_is_checked():
    with pytest.raises(ConfigError, match=r"n_heads \(32\) must be a multiple of n_kv_heads \(5\)"):
        ModelArgs(name="x", d_model=4096, n_layers=2, n_heads=32, n_kv_heads=5, d_ff=1, vocab=8)


def test_top_k_is_checked():
    with pytest.raises(ConfigError, match=r"top_k \(9\)"):
        ModelArgs(
            name="x",
            d_model=64,
            n_layers=2,
            n_heads=4,
            n_kv_heads=4,
            d_ff=64,
            vocab=8,
            n_experts=8,
            top_k=9,
            d_ff_expert=32,
        )


def test_kv_cache_gqa_and_mla():
    m = model("llama-3-8b")  # 32 layers x K,V x 8 heads x 128
    assert m.kv_cache_elems_per_token == 32 * 2 * 8 * 128
    ds = model("deepseek-v3")  # 61 layers x (512 latent + 64 rope)
    assert ds.kv_cache_elems_per_token == 61 * 576


def test_sliding_window_caps_kv_cache():
    m = model("gpt-oss-120b")  # 18 local layers capped at 128 tokens
    per_layer = 2 * m.kv_dim
    assert m.kv_cache_elems(10_000) == per_layer * (18 * 128 + 18 * 10_000)


def test_deepseek_v3_mtp_module_makes_the_685b_checkpoint():
    # HF deepseek-ai/DeepSeek-V3: 685 B = 671 B main model + 14 B MTP module, whose checkpoint
    # layer also stores its own copy of the embedding and output head.
    m = model("deepseek-v3")
    assert m.n_mtp_modules == 1
    total = m.n_params + m.n_mtp_params + m.embedding_params + m.vocab * m.d_model
    assert total / 1e9 == pytest.approx(685, rel=0.01)
    assert m.n_params / 1e9 == pytest.approx(671, rel=0.01)


def test_encoder_fields_are_checked():
    with pytest.raises(ConfigError, match="encoder"):
        ModelArgs("x", 64, 2, 4, 4, 128, 100, causal=False, n_experts=4, top_k=1, d_ff_expert=8)
    with pytest.raises(ConfigError, match="patch_dim"):
        ModelArgs("x", 64, 2, 4, 4, 128, 100, patch_dim=-1)
