"""Models from a Hugging Face ``config.json`` (standard library only, no network), and
Megatron-style synthetic GPT models from their dimensions.

``from_hf_config(path)`` reads the public ``transformers`` config fields of the Llama, Mistral,
Qwen2, Qwen3, Qwen3-MoE, Mixtral, DeepSeek-V3 and GPT-OSS families (``model_type`` says which;
a multimodal config's ``text_config`` is read when present). The field names per family are
data (``FAMILIES``); an unknown ``model_type`` or a missing field is a ``ConfigError`` naming
the file and the field.

``synthetic_gpt(hidden, layers, heads, ffn, vocab)`` is a Megatron-LM ``GPTModel`` as the
Megatron-Core scaling tables describe it (calibration set F): GELU FFN (default 4 x hidden),
LayerNorm, linear biases, learned absolute positions, an output layer untied from the
embedding (``--untie-embeddings-and-output-weights`` in Megatron-LM's GPT recipes; the table's
sizes 1.7B ... 462B count both matrices).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trnsim import inputs
from trnsim.errors import ConfigError
from trnsim.workloads.transformer import MLAArgs, ModelArgs, model


@dataclass(frozen=True, slots=True)
class Family:
    """How one ``model_type`` names its fields (None: the family has no such field)."""

    experts: str | None = None  # routed experts per MoE layer
    top_k: str | None = None
    expert_ff: str | None = None  # hidden size of one expert (None: intermediate_size)
    shared_experts: str | None = None
    dense_layers: str | None = None  # leading dense layers
    mla: bool = False
    bias: bool = False  # attention (and FFN) linear biases
    window_every: int = 0  # every k-th layer is sliding-window when a window is set (0: none)
    window_flag: str | None = None  # a boolean field that must be true for the window to apply


FAMILIES: dict[str, Family] = {
    "llama": Family(),
    "mistral": Family(window_every=1),
    # Qwen2's q/k/v biases are not counted (< 0.01 % of the parameters); its window applies
    # only with use_sliding_window.
    "qwen2": Family(window_every=1, window_flag="use_sliding_window"),
    "qwen3": Family(window_every=1, window_flag="use_sliding_window"),
    "qwen3_moe": Family(
        experts="num_experts", top_k="num_experts_per_tok", expert_ff="moe_intermediate_size"
    ),
    "qwen2_moe": Family(
        experts="num_experts",
        top_k="num_experts_per_tok",
        expert_ff="moe_intermediate_size",
    ),
    "mixtral": Family(experts="num_local_experts", top_k="num_experts_per_tok", window_every=1),
    "deepseek_v3": Family(
        experts="n_routed_experts",
        top_k="num_experts_per_tok",
        expert_ff="moe_intermediate_size",
        shared_experts="n_shared_experts",
        dense_layers="first_k_dense_replace",
        mla=True,
    ),
    "gpt_oss": Family(
        experts="num_local_experts", top_k="num_experts_per_tok", bias=True, window_every=2
    ),
}
FAMILIES["deepseek_v2"] = FAMILIES["deepseek_v3"]


def looks_like_path(spec: str) -> bool:
    """True when ``spec`` names a file rather than a preset (ends in .json or exists)."""
    if spec.endswith(".json") or os.sep in spec:
        return True
    try:
        return Path(spec).is_file()
    except OSError:  # a name no file system takes (ENAMETOOLONG): not a file, so a preset name
        return False


# Limits of a config.json, read before anything else (a Hugging Face config is a few KB, nested
# three or four levels: text_config, rope_scaling, quantization_config): a file of at most
# MAX_CONFIG_BYTES, nested at most MAX_CONFIG_DEPTH levels, integers of at most MAX_INT_DIGITS
# digits. Beyond them the file is refused with one line, before it can exhaust memory, the
# interpreter's recursion limit or its integer-conversion limit.
MAX_CONFIG_BYTES = 4 * 2**20
MAX_CONFIG_DEPTH = 32
MAX_INT_DIGITS = 30
MAX_NAME_CHARS = 200


def read_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The JSON object of a ``config.json``, read within the limits above (``ConfigError``
    naming the file and the limit otherwise). Only a regular file is read: ``/dev/zero`` or a
    FIFO would never end."""
    p = Path(path)
    where = f"model config {str(p)!r}"
    try:
        text = inputs.read_text(p, "model config", MAX_CONFIG_BYTES)
    except FileNotFoundError:
        raise ConfigError(f"{where}: no such file") from None

    def parse_int(literal: str) -> int:
        digits = len(literal.lstrip("-"))
        if digits > MAX_INT_DIGITS:
            raise ConfigError(
                f"{where}: an integer of {digits:,} digits (at most {MAX_INT_DIGITS})"
            )
        return int(literal)

    try:
        cfg = json.loads(text, parse_int=parse_int)
    except ConfigError:
        raise
    except RecursionError:
        raise ConfigError(f"{where}: nested deeper than {MAX_CONFIG_DEPTH} levels") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{where}: not JSON ({exc})") from None
    except ValueError as exc:  # a number json cannot convert
        raise ConfigError(f"{where}: not JSON ({exc})") from None
    if not isinstance(cfg, dict):
        raise ConfigError(f"{where}: expected a JSON object, got a {type(cfg).__name__}")
    if _depth(cfg) > MAX_CONFIG_DEPTH:
        raise ConfigError(f"{where}: nested deeper than {MAX_CONFIG_DEPTH} levels")
    return cfg


def _depth(value: Any) -> int:
    """Nesting depth of parsed JSON (a scalar 0, ``{}`` 1), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict | list):
            deepest = max(deepest, d)
            if d <= MAX_CONFIG_DEPTH:
                stack.extend((c, d + 1) for c in (v.values() if isinstance(v, dict) else v))
    return deepest


def from_hf_config(path: str | os.PathLike[str], name: str | None = None) -> ModelArgs:
    """A ``ModelArgs`` from a Hugging Face ``config.json`` file (``read_config``'s limits)."""
    p = Path(path)
    cfg = read_config(p)
    given = cfg.get("_name_or_path")
    if not isinstance(given, str) or not 0 < len(given) <= MAX_NAME_CHARS:
        given = None
    label = name or given or (p.parent.name if p.stem == "config" else p.stem)
    return from_hf_dict(cfg, str(label).rsplit("/", 1)[-1].lower(), source=f"config {p}")


def from_hf_dict(cfg: dict[str, Any], name: str, source: str = "") -> ModelArgs:
    """A ``ModelArgs`` from the fields of a parsed Hugging Face config."""
    if isinstance(cfg.get("text_config"), dict):
        cfg = {**cfg, **cfg["text_config"]}
    where = source or name
    mtype = cfg.get("model_type")
    if not isinstance(mtype, str):
        raise ConfigError(
            f"{where}: field 'model_type' must be a string, got a {type(mtype).__name__} "
            f"(supported: {', '.join(sorted(FAMILIES))})"
        )
    if mtype not in FAMILIES:
        shown = mtype if len(mtype) <= 40 else mtype[:37] + "..."
        raise ConfigError(
            f"{where}: model_type {shown!r} is not supported (supported: "
            f"{', '.join(sorted(FAMILIES))})"
        )
    fam = FAMILIES[mtype]

    def flag(key: str) -> bool:
        """A boolean field: true, false or absent (a string "false" would read as true)."""
        value = cfg.get(key)
        if value is None or isinstance(value, bool):
            return bool(value)
        raise ConfigError(f"{where}: field {key!r} must be true or false, got {value!r:.40}")

    def whole(key: str, value: Any) -> int:
        """A dimension: a whole, finite number in [0, MAX_DIM] (NaN, 1.5, 1e300 rejected)."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{where}: field {key!r} must be a number, got {value!r:.40}")
        if not math.isfinite(value) or value != int(value) or not 0 <= value <= MAX_DIM:
            raise ConfigError(
                f"{where}: field {key!r} must be a whole number in 0..{MAX_DIM}, got {value!r}"
            )
        return int(value)

    def need(key: str) -> Any:
        if cfg.get(key) is None:
            raise ConfigError(f"{where}: field {key!r} is missing (model_type {mtype})")
        return whole(key, cfg[key])

    def opt(key: str, default: int = 0) -> int:
        value = cfg.get(key)
        return default if value is None else whole(key, value)

    d = need("hidden_size")
    heads = need("num_attention_heads")
    kv = opt("num_key_value_heads") or heads
    head_dim = opt("head_dim")
    kw: dict[str, Any] = {}
    if fam.experts:
        kw.update(
            n_experts=need(fam.experts),
            top_k=need(fam.top_k) if fam.top_k else 0,
            d_ff_expert=need(fam.expert_ff or "intermediate_size"),
        )
        if mtype == "gpt_oss" and cfg.get("num_experts_per_tok") is None:
            kw["top_k"] = need("experts_per_token")
        if fam.shared_experts:
            kw["n_shared_experts"] = opt(fam.shared_experts)
        if fam.dense_layers:
            kw["n_dense_layers"] = opt(fam.dense_layers)
    if mtype.startswith("deepseek"):
        kw["n_mtp_modules"] = opt("num_nextn_predict_layers")
    if fam.mla:
        kw["mla"] = MLAArgs(
            q_lora_rank=need("q_lora_rank"),
            kv_lora_rank=need("kv_lora_rank"),
            qk_nope_head_dim=need("qk_nope_head_dim"),
            qk_rope_head_dim=need("qk_rope_head_dim"),
            v_head_dim=need("v_head_dim"),
        )
        head_dim = head_dim or need("v_head_dim")
    if fam.experts and not 1 <= kw["top_k"] <= kw["n_experts"] and fam.top_k:
        raise ConfigError(
            f"{where}: experts per token ({kw['top_k']}) must be in 1..{kw['n_experts']} "
            "(the number of experts)"
        )
    window = cfg.get("sliding_window")
    if fam.window_flag and not flag(fam.window_flag):
        window = None
    if window and fam.window_every:
        kw.update(
            sliding_window=whole("sliding_window", window), local_layers_every=fam.window_every
        )
    return ModelArgs(
        name=name,
        d_model=d,
        n_layers=need("num_hidden_layers"),
        n_heads=heads,
        n_kv_heads=int(kv),
        head_dim=int(head_dim),
        d_ff=need("intermediate_size"),
        vocab=need("vocab_size"),
        tied_embeddings=flag("tie_word_embeddings"),
        bias=fam.bias or (flag("attention_bias") and mtype != "llama"),
        max_seq_len=opt("max_position_embeddings") or 4096,
        source=source or f"Hugging Face config of {name}",
        **kw,
    )


# The largest dimension a config may give (2**40, trnsim.inputs.MAX_DIM).
MAX_DIM = inputs.MAX_DIM

# The vocabulary of the Megatron-Core scaling table (calibration set F): 131,072.
MEGATRON_VOCAB = 131072


def synthetic_gpt(
    hidden: int,
    layers: int,
    heads: int,
    ffn: int | None = None,
    vocab: int = MEGATRON_VOCAB,
    seq_len: int = 4096,
    kv_heads: int | None = None,
) -> ModelArgs:
    """A Megatron-LM GPT model of the given dimensions (module docstring)."""
    m = ModelArgs(
        name=f"gpt-h{hidden}-l{layers}",
        d_model=hidden,
        n_layers=layers,
        n_heads=heads,
        n_kv_heads=kv_heads or heads,
        d_ff=ffn or 4 * hidden,
        vocab=vocab,
        ffn="gelu",
        norm="layernorm",
        tied_embeddings=False,
        learned_pos=seq_len,
        bias=True,
        max_seq_len=seq_len,
        source="synthetic Megatron-LM GPT (GELU FFN, LayerNorm, biases, learned positions, "
        "untied output layer)",
    )
    b = m.n_params / 1e9
    label = f"{b:.1f}B" if b < 10 else f"{b:.0f}B"
    return dataclasses.replace(m, name=f"gpt-{label}-h{hidden}-l{layers}")


def resolve_model(spec: str | ModelArgs) -> ModelArgs:
    """A ``ModelArgs`` as is, a Hugging Face ``config.json`` by path, or a preset by name."""
    if isinstance(spec, ModelArgs):
        return spec
    if looks_like_path(spec):
        return from_hf_config(spec)
    return model(spec)
