"""Parallel plans: validation errors name the values."""

import pytest

from trnsim.errors import ConfigError
from trnsim.perf import ParallelPlan, plan_for_chips
from trnsim.workloads import model


def test_degrees_must_multiply_to_chips():
    with pytest.raises(
        ConfigError, match=r"tp\(4\) \* cp\(1\) \* dp\(8\) \* pp\(2\) = 64 != chips\(32\)"
    ):
        ParallelPlan(tp=4, pp=2, dp=8).check_chips(32)


def test_ranks_per_chip_in_message():
    with pytest.raises(ConfigError, match=r"ranks_per_chip\(2\)"):
        ParallelPlan(tp=32, dp=1, ranks_per_chip=2).check_chips(32)


def test_heads_divisibility():
    with pytest.raises(
        ConfigError, match=r"n_heads\(40\) of llama-2-13b is not divisible by tp\(32\)"
    ):
        ParallelPlan(tp=32).check_model(model("llama-2-13b"))
    ParallelPlan(tp=32, pad_heads=True).check_model(model("llama-2-13b"))


def test_layers_vs_stages():
    with pytest.raises(ConfigError, match=r"pp\(64\) > n_layers\(32\)"):
        ParallelPlan(pp=64).check_model(model("llama-2-7b"))


def test_more_virtual_stages_than_layers_is_allowed():
    """PP x VP may exceed the layers (some virtual stages hold none), as NeMo's layouts do;
    every physical stage still holds at least one layer. Refused before this round."""
    plan = ParallelPlan(pp=4, schedule="interleaved", chunks=10)
    plan.check_model(model("llama-2-7b"))  # 40 virtual stages, 32 layers
    assert sum(plan.chunk_layers(model("llama-2-7b"))) == 32
    assert min(plan.chunk_layers(model("llama-2-7b"))) == 0
    assert plan.stage_layers(model("llama-2-7b")) == (8, 8, 8, 8)


def test_uneven_stages_balance_the_middle():
    """61 layers over PP 4 x VP 4: the ends (embedding, head) get the fewer layers."""
    plan = ParallelPlan(pp=4, schedule="interleaved", chunks=4)
    chunks = plan.chunk_layers(model("deepseek-v3"))
    assert sum(chunks) == 61 and chunks[0] == 3 and chunks[-1] == 3 and max(chunks) == 4


def test_first_and_last_stage_layers():
    plan = ParallelPlan(pp=4, first_stage_layers=5, last_stage_layers=6)
    assert plan.stage_layers(model("llama-2-7b")) == (5, 11, 10, 6)
    with pytest.raises(ConfigError, match="do not fit"):
        ParallelPlan(pp=2, first_stage_layers=20, last_stage_layers=20).check_model(
            model("llama-2-7b")
        )


def test_batch_divisibility():
    with pytest.raises(ConfigError, match=r"global_batch\(100\) is not divisible by dp\(8\)"):
        ParallelPlan(dp=8, micro_batch=2).check_batch(100, 4096)


def test_ep_must_divide_dp_and_experts():
    with pytest.raises(ConfigError, match=r"ep\(3\) must divide dp\(4\)"):
        ParallelPlan(dp=4, ep=3)
    with pytest.raises(
        ConfigError, match=r"n_experts\(8\) of mixtral-8x7b is not divisible by ep\(16\)"
    ):
        ParallelPlan(dp=16, ep=16).check_model(model("mixtral-8x7b"))
    with pytest.raises(ConfigError, match="has no experts"):
        ParallelPlan(dp=2, ep=2).check_model(model("llama-2-7b"))


def test_interleaved_needs_chunks_flag():
    with pytest.raises(ConfigError, match="interleaved"):
        ParallelPlan(pp=2, chunks=2)


def test_plan_for_chips_fills_dp():
    p = plan_for_chips(512, tp=32, pp=8, ranks_per_chip=2)
    assert (p.dp, p.chips, p.ranks) == (4, 512, 1024)
