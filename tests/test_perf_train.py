"""Training estimates: identities, monotonicity, communication through fabric."""

import dataclasses

import pytest

from trnsim.perf import FITTED, ParallelPlan, estimate_training, plan_for_chips
from trnsim.perf.compute import RankWork, RooflineComputeModel
from trnsim.workloads import model


def _est(**kw):
    plan = kw.pop("plan", plan_for_chips(144, tp=4, pp=4))
    args = dict(global_batch=1152, seq_len=4096)
    args.update(kw)
    return estimate_training("llama-3.1-70b", "trn3-gen2", plan, **args)


def test_rates_are_consistent():
    e = _est()
    assert e.tokens_per_s == pytest.approx(1152 * 4096 / e.step_time_s)
    assert e.seq_per_s == pytest.approx(1152 / e.step_time_s)


def test_mfu_6n_identity():
    e = _est()
    m = model("llama-3.1-70b")
    peak = 144 * 671e12
    assert e.mfu_6n == pytest.approx(e.tokens_per_s * 6 * m.n_matmul_params_active / peak)
    assert e.mfu > e.mfu_6n  # attention FLOPs count in mfu


def test_higher_matmul_efficiency_is_faster():
    roof = RooflineComputeModel()
    slow = _est(eff=dataclasses.replace(FITTED.train, matmul=0.3), compute_model=roof)
    fast = _est(eff=dataclasses.replace(FITTED.train, matmul=0.6), compute_model=roof)
    assert fast.step_time_s < slow.step_time_s
    # the default (kernel-table) model on Trn3 scales with kernel_matmul instead
    slow = _est(eff=dataclasses.replace(FITTED.train, kernel_matmul=0.3))
    fast = _est(eff=dataclasses.replace(FITTED.train, kernel_matmul=0.6))
    assert fast.step_time_s < slow.step_time_s


def test_more_microbatches_shrink_the_bubble_fraction():
    small = _est(global_batch=144)
    big = _est(global_batch=1152)
    frac = lambda e: e.breakdown["pp_bubble"] / e.step_time_s  # noqa: E731
    assert frac(big) < frac(small)


def test_interleaving_shrinks_the_bubble():
    base = _est()
    il = _est(plan=plan_for_chips(144, tp=4, pp=4, schedule="interleaved", chunks=2))
    assert il.breakdown["pp_bubble"] == pytest.approx(base.breakdown["pp_bubble"] / 2, rel=0.1)


def test_full_recompute_costs_a_forward():
    """Full recomputation runs every layer's forward again (not the embedding or the head)."""
    none = _est(plan=plan_for_chips(144, tp=4, pp=4, recompute="none"))
    full = _est(plan=plan_for_chips(144, tp=4, pp=4, recompute="full"))
    assert full.breakdown["recompute"] < full.breakdown["forward"]
    assert full.breakdown["recompute"] > 0.9 * full.breakdown["forward"]
    assert full.step_time_s > none.step_time_s
    assert full.memory.activations < none.memory.activations


def test_tp_comm_comes_from_fabric_and_grows_with_tp():
    e4 = _est(plan=plan_for_chips(144, tp=4, pp=4))
    e1 = _est(plan=plan_for_chips(144, tp=1, pp=4))
    assert e1.breakdown["tp_comm"] == 0
    assert e4.breakdown["tp_comm"] > 0


def test_moe_expert_parallel_has_all_to_all():
    plan = ParallelPlan(tp=1, pp=1, dp=64, ep=8)
    e = estimate_training("mixtral-8x7b", "trn3-gen1", plan, global_batch=256, seq_len=4096)
    assert e.breakdown["ep_comm"] > 0


def test_time_cost_energy_to_train():
    e = _est(tokens_to_train=1e12)
    assert e.time_to_train_s == pytest.approx(1e12 / e.tokens_per_s)
    assert e.cost.usd == pytest.approx(144 * e.time_to_train_s / 3600 * 0.97)
    assert e.cost.energy_j == pytest.approx(144 * 500 * e.time_to_train_s)


def test_compute_model_protocol_is_pluggable():
    class Constant:
        name = "constant"

        def op_time(self, work: RankWork, chip, prec, eff) -> float:
            return 1e-3

    e = _est(compute_model=Constant())
    r = _est(compute_model=RooflineComputeModel())
    assert e.step_time_s != r.step_time_s
    assert e.breakdown["backward"] == pytest.approx(2 * e.breakdown["forward"])


def test_json_has_documented_keys():
    d = _est().as_dict()
    for k in ("step_time_s", "tokens_per_s", "seq_per_s", "mfu", "memory_per_chip_bytes"):
        assert k in d


def test_tile_padding_of_tp_split_ffn():
    """Per-rank FFN widths that are not a multiple of the 128-wide Tensor engine pay for the
    padded last tile: Llama-3.1-8B (d_ff 14,336) at TP 32 has 448 columns per rank -> 512."""
    from trnsim.hw import system
    from trnsim.perf.compute import rank_work, tile_padding
    from trnsim.perf.precision import precision
    from trnsim.workloads import forward_graph

    assert tile_padding(448, 128) == pytest.approx(512 / 448)
    assert tile_padding(896, 128) == 1.0
    assert tile_padding(448, 0) == 1.0
    m = model("llama-3.1-8b")
    g = forward_graph(m, 1, 8192, phase="train")
    up = next(op for grp in g.groups for op in grp.ops if op.name == "ffn_up")
    assert up.tp_width == m.d_ff
    tile = system("trn1.32xlarge").chip.core.tensor.rows
    prec = precision("bf16")
    for tp, pad in ((32, 512 / 448), (8, 1792 / 1792), (16, 1.0)):
        plan = ParallelPlan(tp=tp)
        padded = rank_work(up, g, plan, prec, tile).flops
        assert padded == pytest.approx(up.flops / tp * pad)
    # attention projections are not padded (heads are whole per rank)
    qkv = next(op for grp in g.groups for op in grp.ops if op.name == "qkv_proj")
    assert rank_work(qkv, g, ParallelPlan(tp=32), prec, tile).flops == pytest.approx(
        rank_work(qkv, g, ParallelPlan(tp=32), prec, 0).flops
    )
