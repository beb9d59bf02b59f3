"""The rules every numeric input obeys, CLI and Python API alike: one table, one checker.

Each ``Rule`` names one input (its Python parameter and its CLI flag), says what it counts,
whether it must be a whole number, the range it must lie in, and, for values that are legal
but far beyond anything published, the threshold above which it is accepted with a one-line
warning. Every bound says where it comes from (``why``). ``check(rule, value)`` refuses a
value outside the rule with a ``UsageError`` (exit status 2 on the CLI) naming the input, the
value and the rule, and warns (``InputWarning``) above the threshold.

The relations between inputs (a prompt within the model's context, a draft model smaller than
its target, tokens per step) are the ``check_*`` functions below the table, each also naming
its rule.

Who calls it: the CLI's argparse types (``trnsim.cli.argtypes.rule_type``, before any work),
and the public functions at their door (``trnsim.perf.estimate_training``,
``estimate_inference``, the planner's ``search_training`` / ``search_inference``,
``trnsim.perf.compare.compare``, ``ParallelPlan``, ``CostInputs``,
``trnsim.fabric.collective_time``), so a bad value gets the same message from both, never a
traceback from deep inside. Messages name the Python parameter (``global_batch=1e+20``), or
the CLI flag (``--global-batch 1e+20``) inside ``flag_names()``, which the CLI enters.

A leaf module: it imports nothing of trnsim but ``trnsim.errors``, so every layer may use it.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import numbers
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

from trnsim.errors import DuplicateNameError, InputError


class InputWarning(UserWarning):
    """A legal input far beyond anything published (the estimate runs; the CLI prints one
    line ``trnsim VERB: warning: ...`` on stderr)."""


@dataclass(frozen=True, slots=True)
class Rule:
    """One input's rule.

    Attributes:
        name: the rule's name (in every message).
        param: the Python parameter it checks.
        flag: the CLI flag that sets it ("" when no flag does).
        what: what the value counts, with its unit ("sequences per step").
        integral: the value must be a whole number.
        low, high: the inclusive range (``low_open`` / ``high_open`` exclude an end).
        warn_above: above this (legal) value, a one-line warning (None: never).
        why: where the bound comes from.
        warn_why: what the warning says about values above ``warn_above``.
    """

    name: str
    param: str
    flag: str
    what: str
    integral: bool
    low: float
    high: float
    why: str
    low_open: bool = False
    high_open: bool = False
    warn_above: float | None = None
    warn_why: str = ""

    def label(self) -> str:
        """How the input is named in a message (the flag inside ``flag_names()``)."""
        return self.flag if _FLAGS.get() and self.flag else self.param

    def range_text(self, high: float | None = None) -> str:
        """ "a whole number >= 1 and <= 16,777,216" (``high``: a lower bound of this call)."""
        top = self.high if high is None else high
        lo = f"> {_num(self.low)}" if self.low_open else f">= {_num(self.low)}"
        hi = f"< {_num(top)}" if self.high_open else f"<= {_num(top)}"
        kind = "a whole number" if self.integral else "a finite number"
        return f"{kind} {lo}" if math.isinf(top) else f"{kind} {lo} and {hi}"


_FLAGS: contextvars.ContextVar[bool] = contextvars.ContextVar("trnsim_flag_names", default=False)


@contextlib.contextmanager
def flag_names() -> Iterator[None]:
    """Inside this block messages name CLI flags (``--global-batch``), not parameters."""
    token = _FLAGS.set(True)
    try:
        yield
    finally:
        _FLAGS.reset(token)


def _num(x: float) -> str:
    """A bound as people read it: 16,777,216 / 1e+18 / 0.5."""
    if float(x).is_integer() and abs(x) < 1e15:
        return f"{int(x):,}"
    return f"{x:g}"


def shown(value: object) -> str:
    """A value as a message shows it: short, whatever it is (a 5000-digit integer included)."""
    if isinstance(value, bool):
        return repr(value)
    if isinstance(value, numbers.Integral):
        n = abs(int(value))
        if n < 10**24:
            return f"{int(value)}"
        digits = int(n.bit_length() * math.log10(2)) + 1  # str() refuses > 4,300 digits
        return f"an integer of about {digits:,} digits"
    if isinstance(value, numbers.Real):
        return f"{float(value):g}"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# --- the table ---------------------------------------------------------------------------------

# Largest counts of chips and ranks: 16x the largest system in the catalog (UltraCluster 3.0, up
# to a million Trainium3 chips: seeds/003). A system's own span is checked where the system is
# known (the CLI's --chips, ``collective_time``).
MAX_RANKS = 2**24
# Longest sequence: 16,777,216 tokens, above the longest context any published model serves
# (Llama 4 Scout: 10M tokens, Meta, "The Llama 4 herd", 2025-04-05).
MAX_TOKENS = 2**24
# Tokens per training step (global batch x sequence): refused above 2**32; warned above 2**28,
# 4x the largest published batch (DeepSeek-V3: 15,360 sequences of 4,096 tokens = 63M tokens,
# arXiv:2412.19437 section 4.2).
MAX_STEP_TOKENS = 2**32
WARN_STEP_TOKENS = 2**28

# The largest model dimension (hidden size, layers, heads, FFN, vocabulary, experts) a model
# may give: 2**40. Every public model is below 2**20 in each; the bound keeps products of
# dimensions (parameters, FLOPs) far inside a float.
MAX_DIM = 2**40

_TOKENS_WHY = "longer than any published model's context (Llama 4 Scout: 10M tokens)"
_RANKS_WHY = "16x the largest system (UltraCluster 3.0: up to a million chips)"

RULES: dict[str, Rule] = {}


def _add(*rules: Rule) -> None:
    for r in rules:
        if r.name in RULES:
            raise DuplicateNameError(f"input rule {r.name!r} is defined twice")
        RULES[r.name] = r


_add(
    Rule("chips", "chips", "--chips", "chips", True, 1, MAX_RANKS, _RANKS_WHY),
    Rule("ranks", "ranks", "--ranks", "ranks of a collective", True, 1, MAX_RANKS, _RANKS_WHY),
    *(
        Rule(d, d, f"--{d}", f"{d} degree (ranks)", True, 1, MAX_RANKS, _RANKS_WHY)
        for d in ("tp", "pp", "dp", "ep", "cp")
    ),
    Rule(
        "micro-batch",
        "micro_batch",
        "--micro-batch",
        "sequences per micro-batch",
        True,
        1,
        MAX_RANKS,
        "a micro-batch is part of the global batch",
    ),
    Rule(
        "interleave",
        "chunks",
        "--interleave",
        "virtual pipeline stages per rank",
        True,
        1,
        2**16,
        "more than any model's layers",
    ),
    Rule(
        "ranks-per-chip",
        "ranks_per_chip",
        "--ranks-per-chip",
        "ranks per chip",
        True,
        1,
        2**8,
        "more than any chip's cores (the chip's own count is checked with the system)",
    ),
    Rule(
        "global-batch",
        "global_batch",
        "--global-batch",
        "sequences per step",
        True,
        1,
        MAX_RANKS,
        "with the sequence length, at most 2**32 tokens per step (rule step-tokens)",
    ),
    Rule(
        "seq-len", "seq_len", "--seq-len", "tokens per sequence", True, 1, MAX_TOKENS, _TOKENS_WHY
    ),
    Rule(
        "input-tokens",
        "input_tokens",
        "--input-tokens",
        "prompt tokens",
        True,
        1,
        MAX_TOKENS,
        _TOKENS_WHY,
    ),
    Rule(
        "output-tokens",
        "output_tokens",
        "--output-tokens",
        "generated tokens",
        True,
        1,
        MAX_TOKENS,
        _TOKENS_WHY,
    ),
    Rule(
        "max-seq-len",
        "max_seq_len",
        "--max-seq-len",
        "KV cache tokens per sequence",
        True,
        1,
        MAX_TOKENS,
        _TOKENS_WHY,
    ),
    Rule(
        "batch",
        "batch",
        "--batch",
        "sequences per replica",
        True,
        1,
        2**20,
        "a million concurrent sequences per replica; memory refuses far fewer",
    ),
    Rule(
        "tokens",
        "tokens_to_train",
        "--tokens",
        "tokens to train",
        True,
        1,
        1e18,
        "64,000x the largest published run (Llama 3: 15.6T tokens, arXiv:2407.21783)",
        warn_above=1e15,
        warn_why="more than 64x the largest published training run (Llama 3 405B: 15.6T "
        "tokens, arXiv:2407.21783)",
    ),
    Rule(
        "price",
        "price",
        "--price",
        "USD per chip-hour",
        False,
        0,
        1e6,
        "a million USD per chip-hour",
        low_open=True,
        warn_above=100,
        warn_why="over 35x the highest default price (b300: 2.80 USD per chip-hour, "
        "trnsim.perf.cost)",
    ),
    Rule(
        "power",
        "power_w",
        "",
        "watts per chip",
        False,
        0,
        1e6,
        "a megawatt per chip",
        low_open=True,
    ),
    Rule(
        "moe-imbalance",
        "moe_imbalance",
        "--moe-imbalance",
        "busiest expert-parallel rank's tokens over the mean",
        False,
        1,
        math.inf,
        "at most the model's experts (all tokens on one rank), checked with the model",
    ),
    Rule(
        "prefix-hit",
        "prefix_hit",
        "--prefix-hit",
        "fraction of each prompt already cached",
        False,
        0,
        1,
        "at least one prompt token is prefilled",
        high_open=True,
    ),
    Rule(
        "spec-tokens",
        "tokens",
        "--spec-tokens",
        "tokens the draft proposes per step",
        True,
        1,
        2**16,
        "at most the tokens to generate (checked with --output-tokens)",
        warn_above=16,
        warn_why="past 16 proposed tokens a step gains almost nothing (acceptance^k: "
        "0.9^16 = 0.19)",
    ),
    Rule(
        "spec-acceptance",
        "acceptance",
        "--spec-acceptance",
        "probability a proposed token is accepted",
        False,
        0,
        1,
        "a probability",
    ),
    *(
        Rule(f"model-{p}", p, f"--{p}", what, True, 1, MAX_DIM, "2**40: far above any model")
        for p, what in (
            ("hidden", "hidden size"),
            ("layers", "transformer layers"),
            ("heads", "attention heads"),
            ("ffn", "FFN hidden size"),
            ("vocab", "vocabulary size"),
        )
    ),
    # trnsim serve: the engine's limits and the simulated workload
    Rule(
        "requests",
        "requests",
        "--requests",
        "requests simulated",
        True,
        1,
        10**7,
        "ten million requests: hours of simulation",
        warn_above=10**6,
        warn_why="more than a million simulated requests take tens of minutes",
    ),
    Rule(
        "concurrency",
        "concurrency",
        "--concurrency",
        "concurrent users",
        True,
        1,
        2**20,
        _RANKS_WHY,
    ),
    Rule(
        "rate",
        "rate",
        "--rate",
        "requests per second",
        False,
        0,
        1e6,
        "a million requests a second",
        low_open=True,
    ),
    Rule(
        "max-num-seqs",
        "max_num_seqs",
        "--max-num-seqs",
        "running requests",
        True,
        1,
        2**20,
        "a million requests in one batch",
    ),
    Rule(
        "batched-tokens",
        "max_num_batched_tokens",
        "--max-num-batched-tokens",
        "tokens per step",
        True,
        1,
        MAX_TOKENS,
        _TOKENS_WHY,
    ),
    Rule(
        "max-model-len",
        "max_model_len",
        "--max-model-len",
        "tokens per request",
        True,
        1,
        MAX_TOKENS,
        _TOKENS_WHY,
    ),
    Rule(
        "block-size",
        "block_size",
        "--block-size",
        "tokens per KV block",
        True,
        1,
        2**16,
        "a block is a page of the KV cache",
    ),
    Rule(
        "kv-blocks",
        "num_gpu_blocks",
        "--num-gpu-blocks",
        "KV cache blocks",
        True,
        1,
        2**24,
        "16,777,216 blocks: more KV cache than any chip's HBM holds",
    ),
    Rule(
        "chunk-tokens",
        "prefill_chunk_size",
        "--prefill-chunk-size",
        "prefill tokens per chunk",
        True,
        1,
        MAX_TOKENS,
        _TOKENS_WHY,
    ),
    Rule(
        "prefill-cap",
        "long_prefill_token_threshold",
        "--long-prefill-token-threshold",
        "one request's tokens per step (0: no cap)",
        True,
        0,
        MAX_TOKENS,
        _TOKENS_WHY,
    ),
    Rule(
        "shared-prefix",
        "shared_prefix",
        "--shared-prefix",
        "shared prompt tokens",
        True,
        0,
        MAX_TOKENS,
        _TOKENS_WHY,
    ),
    Rule(
        "prefix-groups",
        "prefix_groups",
        "--prefix-groups",
        "shared prefixes",
        True,
        1,
        2**20,
        "a million distinct prefixes",
    ),
    Rule(
        "length-spread",
        "spread",
        "--input-spread",
        "tokens of spread",
        False,
        0,
        MAX_TOKENS,
        _TOKENS_WHY,
    ),
    Rule(
        "replicas",
        "replicas",
        "--replicas",
        "data-parallel replicas",
        True,
        1,
        MAX_RANKS,
        _RANKS_WHY,
    ),
    Rule(
        "speedup",
        "speedup",
        "--trace-speedup",
        "times faster",
        False,
        0,
        1e6,
        "a million times",
        low_open=True,
    ),
    Rule(
        "burstiness",
        "burstiness",
        "--burstiness",
        "gamma shape",
        False,
        0,
        1e6,
        "a gamma shape of a million",
        low_open=True,
    ),
    Rule(
        "slo-e2e", "e2e", "--slo-e2e", "end-to-end seconds", False, 0, 86400, "a day", low_open=True
    ),
    Rule(
        "trace-events",
        "perfetto_max",
        "--perfetto-max",
        "requests and steps traced",
        True,
        1,
        10**7,
        "ten million events",
    ),
    # trnsim.torch: the small GPT that runs with data on this machine's CPU (torch-profile's
    # eager and compiled modes, torch-demo); its sizes together are bounded by rule gpt-size
    Rule(
        "gpt-width",
        "d_model",
        "--d-model",
        "model width",
        True,
        1,
        16_384,
        "Llama 3 405B's width (16,384)",
    ),
    Rule(
        "gpt-layers",
        "n_layers",
        "--layers",
        "transformer blocks",
        True,
        1,
        1_024,
        "8x Llama 3 405B's 126 layers",
    ),
    Rule("gpt-heads", "n_heads", "--heads", "attention heads", True, 1, 1_024, "1,024 heads"),
    Rule(
        "gpt-seq-len",
        "seq_len",
        "--seq-len",
        "tokens per sequence",
        True,
        1,
        MAX_TOKENS,
        _TOKENS_WHY,
    ),
    Rule(
        "gpt-batch",
        "batch",
        "--batch",
        "sequences per step",
        True,
        1,
        2**16,
        "65,536 sequences of a model that runs on the CPU",
    ),
    Rule(
        "study-steps",
        "steps",
        "--steps",
        "training steps per run",
        True,
        1,
        10**6,
        "a million steps per run (the study trains up to seven runs)",
        warn_above=10_000,
        warn_why="more than 10,000 steps per run take hours on two cores",
    ),
    Rule(
        "study-lr",
        "lr",
        "--lr",
        "AdamW learning rate",
        False,
        0,
        1.0,
        "AdamW moves each weight by up to the learning rate a step; published rates are below "
        "1e-2 (GPT-3: 6e-4, arXiv:2005.14165 table 2.1)",
        low_open=True,
    ),
    Rule(
        "study-seed",
        "seed",
        "--seed",
        "seed of data and weights",
        True,
        0,
        2**32 - 1,
        "a 32-bit seed: the study derives each step's rounding seed from it, within the 64 "
        "bits torch.manual_seed takes",
    ),
    Rule("top", "top", "--top", "plans shown", True, 1, 10_000, "ten thousand plans"),
    Rule(
        "collective-bytes",
        "nbytes",
        "--size",
        "bytes per rank",
        False,
        0,
        2**60,
        "an exabyte per rank",
    ),
    Rule(
        "slo-ttft",
        "ttft_s",
        "--slo-ttft",
        "seconds to the first token",
        False,
        0,
        3600,
        "an hour",
        low_open=True,
    ),
    Rule(
        "slo-tpot",
        "tpot_s",
        "--slo-tpot",
        "seconds per output token",
        False,
        0,
        60,
        "a minute per token",
        low_open=True,
    ),
)


# --- the checker -------------------------------------------------------------------------------


def _as_number(rule: Rule, value: object) -> float | int | str:
    """The value as an int or a finite float, or the reason it is not one."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return f"{rule.what} must be a number, not {type(value).__name__} (rule {rule.name})"
    if isinstance(value, numbers.Integral):
        return int(value)
    x = float(value)
    if not math.isfinite(x):
        return f"{rule.what} must be finite (rule {rule.name})"
    return x


def problem(name: str, value: object, high: float | None = None) -> str | None:
    """Why ``value`` breaks rule ``name`` ("sequences per step must be ... (rule ...)"), or
    None when it keeps it. ``high`` lowers the upper bound for this call."""
    rule = RULES[name]
    kind = type(value)
    x = value if kind is int or kind is float else _as_number(rule, value)  # the common case
    if isinstance(x, str):
        return x
    if kind is float and not math.isfinite(x):  # type: ignore[arg-type]
        return f"{rule.what} must be finite (rule {rule.name})"
    if rule.integral and x != int(x):
        return f"{rule.what} must be a whole number (rule {rule.name})"
    top = rule.high if high is None else min(rule.high, high)
    below = x <= rule.low if rule.low_open else x < rule.low
    above = x >= top if rule.high_open else x > top
    if below or above:
        why = f"bound: {rule.why}; " if above and high is None else ""
        return f"{rule.what} must be {rule.range_text(top)} ({why}rule {rule.name})"
    return None


def check(name: str, value: object, *, high: float | None = None, warn: bool = True):
    """``value`` checked against rule ``name`` (see the module docstring); returns it as an
    ``int`` (whole-number rules) or a ``float``. ``high`` lowers the upper bound for this call
    (a bound known only here, such as a system's chips); ``warn=False`` skips the warning
    (argparse types: the library call that follows warns)."""
    rule = RULES[name]
    why = problem(name, value, high)
    if why is not None:
        raise InputError(f"{rule.label()} {shown(value)}: {why}")
    x = float(value)  # type: ignore[arg-type]
    if warn and rule.warn_above is not None and x > rule.warn_above:
        warnings.warn(
            f"{rule.label()} {shown(value)}: {rule.warn_why}",
            InputWarning,
            stacklevel=2,
        )
    return int(value) if rule.integral else x  # type: ignore[call-overload]


def check_optional(name: str, value: object, **kw):
    """``check`` unless ``value`` is None (an input left to its default)."""
    return None if value is None else check(name, value, **kw)


# --- relations between inputs ------------------------------------------------------------------


def check_step_tokens(global_batch: int, seq_len: int) -> None:
    """Rule step-tokens: global batch x sequence length at most 2**32 tokens per step; above
    2**28 (4x the largest published batch) a warning."""
    tokens = global_batch * seq_len
    gb, sl = RULES["global-batch"].label(), RULES["seq-len"].label()
    if tokens > MAX_STEP_TOKENS:
        raise InputError(
            f"{gb} {global_batch:,} x {sl} {seq_len:,} = {tokens:,} tokens per step: at most "
            f"{MAX_STEP_TOKENS:,} (rule step-tokens)"
        )
    if tokens > WARN_STEP_TOKENS:
        warnings.warn(
            f"{gb} {global_batch:,} x {sl} {seq_len:,} = {tokens:,} tokens per step: more than "
            "4x the largest published batch (DeepSeek-V3: 63M tokens per step, "
            "arXiv:2412.19437)",
            InputWarning,
            stacklevel=2,
        )


def check_train_context(seq_len: int, model: str, context: int, learned_positions: int) -> None:
    """Rule train-context: a model with learned positions cannot take a longer sequence than
    it has positions; a longer sequence than the model's trained context is a context-extension
    run (legal, warned)."""
    sl = RULES["seq-len"].label()
    if learned_positions and seq_len > learned_positions:
        raise InputError(
            f"{sl} {seq_len:,}: {model} has learned positions for {learned_positions:,} tokens "
            "(rule train-context)"
        )
    if seq_len > context:
        warnings.warn(
            f"{sl} {seq_len:,}: longer than {model}'s context ({context:,} tokens); estimated "
            "as a context-extension run",
            InputWarning,
            stacklevel=2,
        )


def check_serve_context(
    input_tokens: int,
    output_tokens: int,
    max_seq_len: int | None,
    model: str,
    context: int,
    learned_positions: int = 0,
) -> None:
    """Rule context-length: a prompt and its generation fit the model's context, as a server
    refuses a longer request (vLLM: the prompt and max_tokens within ``max_model_len``, which
    defaults to the model's ``max_position_embeddings``). A KV cache length given explicitly
    (``max_seq_len``: vLLM's ``max_model_len``, Transformers-NeuronX's ``n_positions``) must
    hold the request and may exceed the model's context, with a warning (as vLLM allows with
    ``VLLM_ALLOW_LONG_MAX_MODEL_LEN``), but never its learned positions."""
    it, ot = RULES["input-tokens"].label(), RULES["output-tokens"].label()
    ms = RULES["max-seq-len"].label()
    need = input_tokens + output_tokens
    if max_seq_len is None:
        if need > context:
            raise InputError(
                f"{it} {input_tokens:,} + {ot} {output_tokens:,} = {need:,} tokens: more than "
                f"{model}'s context of {context:,} tokens (rule context-length; {ms} allocates "
                "a longer one)"
            )
        return
    if max_seq_len < need:
        raise InputError(
            f"{ms} {max_seq_len:,} is shorter than {it} {input_tokens:,} + {ot} "
            f"{output_tokens:,} = {need:,} (rule context-length)"
        )
    if learned_positions and max_seq_len > learned_positions:
        raise InputError(
            f"{ms} {max_seq_len:,}: {model} has learned positions for {learned_positions:,} "
            "tokens (rule context-length)"
        )
    if max_seq_len > context:
        warnings.warn(
            f"{ms} {max_seq_len:,}: longer than {model}'s context ({context:,} tokens); "
            "estimated, but a model's outputs past its context are not what it was trained for",
            InputWarning,
            stacklevel=2,
        )


def check_draft(
    draft: str,
    draft_params: float,
    draft_vocab: int,
    target: str,
    target_params: float,
    target_vocab: int,
    spec_tokens: int,
    output_tokens: int,
) -> None:
    """Rule draft-model: speculative decoding needs a draft smaller than its target (else
    each step costs more than the target alone) over the same vocabulary (the target verifies
    the draft's tokens: Leviathan et al. 2023, section 2.3), proposing at most the tokens left
    to generate."""
    flag = "--draft-model" if _FLAGS.get() else "speculative.draft"
    if spec_tokens > output_tokens:
        st, ot = RULES["spec-tokens"].label(), RULES["output-tokens"].label()
        raise InputError(
            f"{st} {spec_tokens}: more than {ot} {output_tokens} to generate (rule draft-model)"
        )
    if draft_params >= target_params:
        raise InputError(
            f"{flag} {draft}: {draft_params / 1e9:,.1f}B parameters, not smaller than the "
            f"target {target} ({target_params / 1e9:,.1f}B); a draft must be smaller "
            "(rule draft-model)"
        )
    if draft_vocab != target_vocab:
        raise InputError(
            f"{flag} {draft}: vocabulary of {draft_vocab:,} tokens, the target {target} has "
            f"{target_vocab:,}; the target verifies the draft's tokens, so they must share one "
            "(rule draft-model)"
        )


def check_finite(what: str, **values: float | None) -> None:
    """Rule finite-result: every figure of an estimate is a finite number (a bug, or inputs
    whose product overflows, otherwise); names the figure."""
    for key, v in values.items():
        if v is not None and not math.isfinite(v):
            raise InputError(
                f"{what}: {key} is {v} (the inputs' product overflows a float; rule finite-result)"
            )


# The small GPT of trnsim.torch runs with real tensors on the CPU: its weights (12 x layers x
# width^2, as GPT-2's blocks) and one step's activations (batch x sequence x width x layers,
# each element kept a few times for the backward pass) must fit in memory.
MAX_GPT_PARAMS = 2**28  # 268M parameters: 1 GiB of FP32 weights, 4 GiB with AdamW's state
MAX_GPT_ACTIVATIONS = 2**26  # 67M elements per layer stack: ~4 GiB with what backward keeps


def check_gpt_size(d_model: int, n_layers: int, seq_len: int, batch: int | None = None) -> None:
    """Rule gpt-size: the small GPT's weights at most ``MAX_GPT_PARAMS``, and (with ``batch``)
    one step's activations at most ``MAX_GPT_ACTIVATIONS`` elements."""
    params = 12 * n_layers * d_model * d_model + seq_len * d_model
    if params > MAX_GPT_PARAMS:
        raise InputError(
            f"{RULES['gpt-layers'].label()} {n_layers:,}, {RULES['gpt-width'].label()} "
            f"{d_model:,}, {RULES['gpt-seq-len'].label()} {seq_len:,}: about {params:,} "
            f"parameters, more than the {MAX_GPT_PARAMS:,} a model run with data on the CPU "
            "may have (rule gpt-size)"
        )
    if batch is None:
        return
    acts = batch * seq_len * d_model * n_layers
    if acts > MAX_GPT_ACTIVATIONS:
        raise InputError(
            f"{RULES['gpt-batch'].label()} {batch:,} x {RULES['gpt-seq-len'].label()} "
            f"{seq_len:,} x {RULES['gpt-width'].label()} {d_model:,} x "
            f"{RULES['gpt-layers'].label()} {n_layers:,} = {acts:,} activations per step, more "
            f"than the {MAX_GPT_ACTIVATIONS:,} a model run with data on the CPU may keep "
            "(rule gpt-size)"
        )


# --- the doors of the public functions ---------------------------------------------------------
# Each takes the model (a ``trnsim.workloads.ModelArgs``: read for its name, context, learned
# positions, parameters and vocabulary) and the numeric inputs, and applies the rules above.


def check_training(
    model, *, global_batch: object, seq_len: object, tokens_to_train: object = None
) -> None:
    """The inputs of one training estimate (``estimate_training``, ``search_training``)."""
    gb = check("global-batch", global_batch)
    sl = check("seq-len", seq_len)
    check_optional("tokens", tokens_to_train)
    check_step_tokens(gb, sl)
    check_train_context(sl, model.name, model.max_seq_len, model.learned_pos)


def check_inference(
    model,
    *,
    batch: object,
    input_tokens: object,
    output_tokens: object,
    max_seq_len: object = None,
    prefix_hit: object = 0.0,
) -> None:
    """The inputs of one serving estimate (``estimate_inference``, ``search_inference``;
    ``batch`` None: the planner's own list of batches). An encoder (``causal`` false) has no
    decoding to bound: ``estimate_inference`` refuses it with its own reason."""
    check_optional("batch", batch)
    it = check("input-tokens", input_tokens)
    ot = check("output-tokens", output_tokens)
    ms = check_optional("max-seq-len", max_seq_len)
    check("prefix-hit", prefix_hit)
    if getattr(model, "causal", True):
        check_serve_context(it, ot, ms, model.name, model.max_seq_len, model.learned_pos)


def check_speculative(spec, draft, target, output_tokens: int) -> None:
    """A ``Speculative`` (its draft resolved to ``draft``) against the target model."""
    k = check("spec-tokens", spec.tokens)
    check_optional("spec-acceptance", spec.acceptance)  # None: the method's published rate
    check_draft(
        draft.name,
        draft.n_params,
        draft.vocab,
        target.name,
        target.n_params,
        target.vocab,
        k,
        output_tokens,
    )


# --- files the user names ------------------------------------------------------------------------

#: The largest text file trnsim reads on a user's word (a manifest, a trace, a fleet): 64 MiB.
MAX_TEXT_BYTES = 64 * 2**20


def read_text(path, what: str = "file", limit: int = MAX_TEXT_BYTES) -> str:
    """The UTF-8 text of the regular file ``path``, read within ``limit`` bytes (rule
    input-file). A device, a FIFO or a directory is refused before it is opened (``/dev/zero``
    would be read until memory runs out, a FIFO until a writer comes); so is a larger file.
    Errors are ``InputError`` naming ``what`` and the path (``FileNotFoundError`` is raised as
    is, for callers that name a missing file their own way)."""
    import os
    from pathlib import Path

    p = Path(path)
    where = f"{what} {shown(str(p))}"
    try:
        if not p.exists():
            raise FileNotFoundError(2, "No such file or directory", str(p))
        if not p.is_file():
            raise InputError(f"{where}: not a regular file (rule input-file)")
        with open(p, "rb") as f:
            data = f.read(limit + 1)
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise InputError(
            f"{where}: cannot read ({exc.strerror or exc}) (rule input-file)"
        ) from None
    if len(data) > limit:
        raise InputError(
            f"{where}: larger than {limit // 2**20:,} MiB (rule input-file; "
            f"{os.path.basename(str(p))[:40]} is not the {what} trnsim reads)"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start}) (rule input-file)"
        ) from None
