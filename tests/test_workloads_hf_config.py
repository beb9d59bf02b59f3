"""Models from Hugging Face config.json files (public field names) and synthetic GPT models."""

import json
from pathlib import Path

import pytest

from trnsim.errors import ConfigError
from trnsim.workloads import model, resolve_model
from trnsim.workloads.hf_config import from_hf_config, synthetic_gpt

HF = Path(__file__).parent / "data" / "hf"

# Each config in tests/data/hf against the preset written from the same public config.
SAME_AS_PRESET = {
    "llama-3.1-8b.json": "llama-3.1-8b",
    "qwen3-30b-a3b.json": "qwen3-30b-a3b",
    "mixtral-8x7b.json": "mixtral-8x7b",
    "deepseek-v3.json": "deepseek-v3",
    "gpt-oss-120b.json": "gpt-oss-120b",
}


@pytest.mark.parametrize("file,preset", SAME_AS_PRESET.items())
def test_config_gives_the_preset_shape(file, preset):
    m, p = from_hf_config(HF / file), model(preset)
    assert m.n_params == p.n_params and m.n_active_params == p.n_active_params
    assert m.kv_cache_elems_per_token == p.kv_cache_elems_per_token
    assert (m.sliding_window, m.local_layers_every) == (p.sliding_window, p.local_layers_every)


def test_published_sizes_of_other_families():
    assert from_hf_config(HF / "qwen2-7b.json").n_params / 1e9 == pytest.approx(7.6, rel=0.02)
    mistral = from_hf_config(HF / "mistral-7b-v0.1.json")
    assert mistral.n_params / 1e9 == pytest.approx(7.24, rel=0.02)
    assert mistral.sliding_window == 4096  # v0.1 is sliding-window in every layer


def test_resolve_model_reads_a_path():
    assert resolve_model(str(HF / "mixtral-8x7b.json")).n_experts == 8


def test_text_config_is_read(tmp_path):
    cfg = json.loads((HF / "llama-3.1-8b.json").read_text())
    p = tmp_path / "config.json"
    p.write_text(json.dumps({"model_type": "llama", "text_config": cfg}))
    assert from_hf_config(p).n_params == model("llama-3.1-8b").n_params


@pytest.mark.parametrize(
    "content,needle",
    [
        ("{", "not JSON"),
        ('{"model_type": "bert"}', "model_type 'bert'"),
        ('{"model_type": "llama", "hidden_size": 64}', "'num_attention_heads'"),
        ('{"model_type": "llama", "hidden_size": "x"}', "'hidden_size' must be a number"),
    ],
)
def test_bad_configs_name_the_file_and_field(tmp_path, content, needle):
    p = tmp_path / "config.json"
    p.write_text(content)
    with pytest.raises(ConfigError, match=r"config\.json") as exc:
        from_hf_config(p)
    assert needle in str(exc.value)


def test_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        resolve_model(str(tmp_path / "nope.json"))


# Megatron-Core scaling table (calibration set F): hidden, layers, heads -> published size,
# given to two significant digits (1.75 B is "1.7B").
MEGATRON = [(2048, 24, 16, 1.7), (4096, 30, 32, 7.1), (8192, 84, 64, 70), (18432, 112, 144, 462)]


@pytest.mark.parametrize("hidden,layers,heads,billions", MEGATRON)
def test_synthetic_gpt_matches_the_megatron_sizes(hidden, layers, heads, billions):
    m = synthetic_gpt(hidden, layers, heads)
    assert m.n_params / 1e9 == pytest.approx(billions, rel=0.035)
    assert m.d_ff == 4 * hidden and m.ffn == "gelu"
