"""Per-precision, per-generation efficiency in each stack profile (issue 22, item 3)."""

import pytest

from trnsim.hw import chip
from trnsim.perf import calsets
from trnsim.perf.compute import RooflineComputeModel
from trnsim.perf.stacks import STACKS, Variant

MEGATRON = STACKS["megatron-core"]
ROOF = RooflineComputeModel()


def test_blackwell_fp8_has_its_own_fitted_efficiency():
    """GB200 FP8 runs used the H100 BF16 fit (dense GB200 rows +27 to +40 %); now each
    generation and precision with rows has its own values, stored with the rows."""
    base = MEGATRON.profile(ROOF)
    gb_fp8 = MEGATRON.profile(ROOF, chip("gb200"), "fp8")
    h_fp8 = MEGATRON.profile(ROOF, chip("h100"), "fp8")
    gb_mx = MEGATRON.profile(ROOF, chip("gb200"), "mxfp8")
    assert len({base.matmul, gb_fp8.matmul, h_fp8.matmul, gb_mx.matmul}) == 4
    assert "J" in MEGATRON.variant("Blackwell", "fp8").source
    assert "GB200" in MEGATRON.describe(chip("gb200"), "fp8")


def test_a_precision_without_rows_says_it_is_borrowed():
    line = MEGATRON.describe(chip("gb200"), "bf16")
    assert "BORROWED" in line and "Hopper bf16" in line
    assert MEGATRON.profile(ROOF, chip("gb200"), "bf16") == MEGATRON.profile(ROOF)
    assert "BORROWED" not in MEGATRON.describe(chip("h100"), "bf16")  # the base itself


def test_family_wide_values_apply_under_a_precision_variant():
    from dataclasses import replace

    sw = replace(
        MEGATRON,
        variants=(
            Variant("Blackwell", "*", (("attention", 0.5),), "all"),
            Variant("Blackwell", "fp8", (("matmul", 0.4),), "fp8"),
        ),
    )
    eff = sw.profile(ROOF, chip("gb200"), "fp8")
    assert (eff.attention, eff.matmul) == (0.5, 0.4)
    assert sw.profile(ROOF, chip("gb200"), "bf16").attention == 0.5
    with pytest.raises(Exception, match="no field"):
        Variant("Blackwell", "fp8", (("matmull", 0.4),), "typo")


def test_dense_gb200_rows_of_set_j_within_ten_percent():
    res = calsets.validate(sets=["J"])
    dense = [r for r in res if r.label.startswith("GB200 llama")]
    assert len(dense) == 4
    assert all(abs(r.error) < 0.10 for r in dense), [(r.label, r.error) for r in dense]


def test_fp8_pays_its_quantization_kernels():
    """FP8 current scaling quantizes every matmul input in its own HBM-bound kernel: a
    ``quantize`` share of the forward that BF16 does not have."""
    from trnsim.perf import ParallelPlan, estimate_training, precision
    from trnsim.perf.compute import pass_time
    from trnsim.workloads import forward_graph, model

    g = forward_graph(model("llama-3.1-8b"), 1, 4096, phase="train")
    eff = MEGATRON.profile(ROOF)
    h100 = chip("h100")
    fp8 = pass_time(g, 1, 1, False, 1, h100, precision("fp8"), eff, ROOF)
    bf16 = pass_time(g, 1, 1, False, 1, h100, precision("bf16"), eff, ROOF)
    assert fp8.kind("quantize") > 0 and bf16.kind("quantize") == 0
    est = estimate_training(
        "llama-3.1-8b",
        "dgx-h100",
        ParallelPlan(dp=8),
        global_batch=64,
        seq_len=4096,
        precision_name="fp8",
    )
    assert "Hopper fp8" in " ".join(est.assumptions)
