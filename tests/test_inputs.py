"""The rules every numeric input obeys (``trnsim.inputs``), at the doors of the public API.

Each call here returned an estimate for nonsense, or raised from deep inside, before the rules:
a negative global batch gave a negative step time, ``tokens_to_train=inf`` an infinite time,
``batch=1.5`` an estimate, ``input_tokens=nan`` a bare ``ValueError``, a 200k-token prompt on
a 131k-context model an estimate, ``ParallelPlan(tp=nan)`` a plan.
"""

from __future__ import annotations

import math
import warnings

import pytest

from trnsim import inputs
from trnsim.errors import ConfigError, DuplicateNameError, InputError, UsageError
from trnsim.fabric import collective_time
from trnsim.perf import (
    CostInputs,
    ParallelPlan,
    Speculative,
    estimate_inference,
    estimate_training,
    plan_for_chips,
)
from trnsim.perf.compare import compare
from trnsim.perf.planner import _divisors, _ep_options, search_inference, search_training

TRAIN_PLAN = plan_for_chips(64, tp=4)
SERVE_PLAN = ParallelPlan(tp=4)


# ---- the table ----------------------------------------------------------------------------------


def test_every_rule_names_its_bound_and_a_sane_range():
    for name, rule in inputs.RULES.items():
        assert rule.name == name and rule.why and rule.what and rule.param
        assert rule.low < rule.high
        if rule.warn_above is not None:
            assert rule.low < rule.warn_above < rule.high and rule.warn_why


def test_a_rule_cannot_be_defined_twice():
    with pytest.raises(DuplicateNameError):
        inputs._add(inputs.RULES["chips"])


@pytest.mark.parametrize(
    "value,why",
    [
        (float("nan"), "finite"),
        (float("inf"), "finite"),
        (True, "must be a number, not bool"),
        ("64", "must be a number, not str"),
        (None, "must be a number, not NoneType"),
        (1.5, "whole number"),
        (0, ">= 1"),
        (-16, ">= 1"),
        (2**24 + 1, "<= 16,777,216"),
        (10**5000, "about 5,001 digits"),
    ],
    ids=["nan", "inf", "bool", "str", "none", "fraction", "zero", "negative", "huge", "digits"],
)
def test_check_refuses_what_no_count_can_be(value, why):
    with pytest.raises(InputError, match="rule global-batch") as exc:
        inputs.check("global-batch", value)
    assert why in str(exc.value)


def test_check_returns_the_value_in_its_kind():
    assert inputs.check("global-batch", 64.0) == 64 and isinstance(
        inputs.check("global-batch", 64.0), int
    )
    assert inputs.check("price", 2) == 2.0 and isinstance(inputs.check("price", 2), float)


def test_input_error_is_a_usage_error_and_a_config_error():
    assert issubclass(InputError, UsageError) and issubclass(InputError, ConfigError)


def test_messages_name_the_parameter_or_the_flag():
    with pytest.raises(InputError, match=r"^global_batch 0:"):
        inputs.check("global-batch", 0)
    with inputs.flag_names(), pytest.raises(InputError, match=r"^--global-batch 0:"):
        inputs.check("global-batch", 0)


def test_absurd_but_legal_values_warn():
    with pytest.warns(inputs.InputWarning, match="64x the largest published training run"):
        assert inputs.check("tokens", 1e16) == 10**16
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        inputs.check("tokens", 1e12)  # a published run's size: no warning


# ---- estimate_training ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kw,rule",
    [
        (dict(global_batch=-16), "rule global-batch"),  # was: a negative step time
        (dict(global_batch=float("nan")), "rule global-batch"),
        (dict(seq_len=4096.5), "rule seq-len"),
        (dict(tokens_to_train=-1), "rule tokens"),  # was: a negative time to train
        (dict(tokens_to_train=float("inf")), "rule tokens"),  # was: an infinite one
        (dict(tokens_to_train=0.5), "rule tokens"),
        (dict(global_batch=2**24, seq_len=2**16), "rule step-tokens"),
    ],
)
def test_estimate_training_refuses_nonsense(kw, rule):
    args = {"global_batch": 64, "seq_len": 4096, **kw}
    with pytest.raises(InputError, match=rule):
        estimate_training("llama-3.1-8b", "trn3-gen1", TRAIN_PLAN, **args)


def test_learned_positions_bound_the_training_sequence():
    plan = plan_for_chips(144, tp=8, pp=2)
    with pytest.raises(InputError, match="gpt3-175b has learned positions for 2,048"):
        estimate_training("gpt3-175b", "trn3-gen2", plan, global_batch=9, seq_len=4096)


def test_a_sequence_beyond_a_rope_models_context_warns():
    with pytest.warns(inputs.InputWarning, match="context-extension"):
        inputs.check_train_context(262144, "llama-3.1-8b", 131072, 0)


def test_every_estimate_figure_is_finite():
    """The largest tokens and price the rules take: finite time, cost and energy (1e300 of
    each overflowed to inf and the CLI's JSON writer stopped with an internal error)."""
    with pytest.warns(inputs.InputWarning):
        est = estimate_training(
            "llama-3.1-8b",
            "trn3-gen1",
            TRAIN_PLAN,
            global_batch=64,
            seq_len=4096,
            tokens_to_train=1e18,
            cost_inputs=CostInputs(prices={"trn3": 1e6}),
        )
    assert math.isfinite(est.cost.usd) and math.isfinite(est.time_to_train_s)
    with pytest.raises(InputError, match="rule finite-result"):
        inputs.check_finite("x", cost_usd=float("inf"))


# ---- estimate_inference -----------------------------------------------------------------------

SERVE = dict(batch=1, input_tokens=1024, output_tokens=256)


@pytest.mark.parametrize(
    "kw,rule",
    [
        (dict(batch=1.5), "rule batch"),  # was: an estimate
        (dict(batch=0), "rule batch"),
        (dict(input_tokens=float("nan")), "rule input-tokens"),  # was: a bare ValueError
        (dict(output_tokens=-3), "rule output-tokens"),
        (dict(prefix_hit=1.0), "rule prefix-hit"),
        (dict(input_tokens=200_000), "rule context-length"),  # 131,072-token context
        (dict(max_seq_len=1000), "rule context-length"),  # shorter than the request
    ],
)
def test_estimate_inference_refuses_nonsense(kw, rule):
    with pytest.raises(InputError, match=rule):
        estimate_inference("llama-3.1-8b", "trn3-gen1", SERVE_PLAN, **{**SERVE, **kw})


def test_a_kv_cache_beyond_the_context_is_allowed_with_a_warning():
    """As vLLM's VLLM_ALLOW_LONG_MAX_MODEL_LEN: the Trn1 serving rows (set C) run Llama-2
    at 8,192 tokens, past its 4,096-token context."""
    with pytest.warns(inputs.InputWarning, match="longer than llama-2-7b's context"):
        est = estimate_inference(
            "llama-2-7b",
            "trn1.32xlarge",
            ParallelPlan(tp=32, ranks_per_chip=2, dp=1),
            batch=1,
            input_tokens=128,
            output_tokens=8064,
            max_seq_len=8192,
        )
    assert est.tpot_s > 0


@pytest.mark.parametrize(
    "draft,target,why",
    [
        ("llama-3.1-405b", "llama-3.1-8b", "not smaller than the target"),
        ("llama-2-7b", "llama-3.1-70b", "vocabulary of 32,000 tokens"),
    ],
)
def test_a_draft_model_must_be_smaller_and_share_the_vocabulary(draft, target, why):
    with pytest.raises(InputError, match=why):
        estimate_inference(
            target,
            "trn3-gen2",
            ParallelPlan(tp=8, dp=1),
            speculative=Speculative(draft),
            **SERVE,
        )


def test_speculation_inputs_follow_their_rules():
    with pytest.raises(InputError, match="rule spec-tokens"):
        Speculative("llama-3.1-8b", tokens=1.5)
    with pytest.raises(InputError, match="rule spec-acceptance"):
        Speculative("llama-3.1-8b", acceptance=float("nan"))


# ---- plans, prices, collectives, the planner ---------------------------------------------------


@pytest.mark.parametrize(
    "kw", [dict(tp=float("nan")), dict(tp=1.5), dict(dp=0), dict(moe_imbalance=float("inf"))]
)
def test_a_plan_refuses_degrees_no_plan_has(kw):
    with pytest.raises(InputError):
        ParallelPlan(**kw)


@pytest.mark.parametrize("price", [float("inf"), 0, -1, float("nan"), 1e300])
def test_prices_follow_their_rule(price):
    with pytest.raises(InputError, match="rule price"):
        CostInputs(prices={"trn3": price})


@pytest.mark.parametrize("nbytes", [1e300, True, "5"])
def test_collective_sizes_follow_their_rule(nbytes):
    with pytest.raises(InputError, match="rule collective-bytes"):
        collective_time("all-reduce", nbytes, 8, "trn3-gen2")


def test_planner_doors():
    with pytest.raises(InputError, match="rule batch"):
        search_inference(
            "llama-3.1-8b", "trn3-gen1", 8, input_tokens=8, output_tokens=8, batches=(0,)
        )
    with pytest.raises(InputError, match="rule top"):
        search_training("llama-3.1-8b", "trn3-gen1", 8, global_batch=8, seq_len=8, top=0)
    with pytest.raises(InputError, match="rule chips"):
        compare("llama-3.1-8b", "train", ("trn3-gen2",), chips=0)


def test_expert_parallel_degrees_are_bounded_by_the_ranks():
    """The planner walked every divisor of the expert count (2**40 steps for a config with
    2**40 experts); now the divisors of gcd(experts, ranks)."""
    assert _ep_options(2**40, 144) == [1, 2, 4, 8, 16]
    assert _ep_options(256, 64) == [1, 2, 4, 8, 16, 32, 64]
    assert _ep_options(8, 6) == [1, 2]
    for n in (1, 12, 97, 144, 1024, 999_999):
        for cap in (1, 5, 16, 128, 10**6):
            assert _divisors(n, cap) == [d for d in range(1, min(n, cap) + 1) if n % d == 0]
