"""Issue 22 reach: new presets, encoders and MTP in the performance model, the maximum-
throughput batch, FP8 KV cache, speculative methods, MLPerf time to train."""

import json

import pytest

from trnsim.cli.main import main
from trnsim.errors import ConfigError
from trnsim.fabric import collective_time
from trnsim.hw import chip, system
from trnsim.perf import (
    ParallelPlan,
    Speculative,
    estimate_inference,
    estimate_training,
    max_batch,
    time_to_train,
)
from trnsim.perf.memory import infer_memory
from trnsim.perf.precision import precision, with_kv_cache
from trnsim.workloads import model

T = 1e12


def test_new_chip_presets_match_their_datasheets():
    pcie = chip("h100-pcie")  # datasheet PCIe column: dense = half the sparse figures
    assert pcie.peak("fp8") == 1513 * T and pcie.peak("bf16") == 756.5 * T
    assert pcie.hbm_bw == 2e12 and pcie.hbm_bytes == 80e9 and pcie.cores == 114
    h800 = chip("h800")  # H100 SXM compute, NVLink cut to 400 GB/s
    assert h800.peak("bf16") == chip("h100-sxm").peak("bf16")
    assert h800.link.bw_per_chip == 400e9 and h800.hbm_bw == chip("h100-sxm").hbm_bw
    h20 = chip("h20")
    assert h20.peak("fp8") == 296 * T and h20.hbm_bw == 4e12 and h20.hbm_bytes == 96e9
    g2 = chip("gaudi2")
    assert g2.vendor == "Intel" and g2.peak("bf16") == 432 * T and g2.peak("fp8") == 865 * T
    assert g2.hbm_bw == 2.45e12 and g2.link.bw_per_chip == 24 * 100e9 / 8


def test_new_systems_run_train_and_infer():
    for name in ("hgx-h800", "hgx-h20", "h100-pcie-server", "hls-gaudi2", "h800-ib-cluster"):
        s = system(name)
        est = estimate_inference(
            "llama-3.1-8b", s, ParallelPlan(tp=8, dp=s.chips // 8), batch=4,
            input_tokens=512, output_tokens=64,
        )  # fmt: skip
        assert est.tpot_s > 0 and est.ttft_s > 0
    # Gaudi's collectives run on HCCL (unfitted: no software overhead)
    assert collective_time("all-reduce", 2**24, 8, "hls-gaudi2").stack == "hccl"
    # the H800's NVLink makes its TP all-reduce slower than the H100's
    h800 = collective_time("all-reduce", 2**28, 8, "hgx-h800").time_s
    assert h800 > 1.5 * collective_time("all-reduce", 2**28, 8, "dgx-h100").time_s


def test_encoders_train_and_refuse_decoding():
    plan = ParallelPlan(dp=32, micro_batch=16, zero=0, recompute="none", ranks_per_chip=2)
    bert = estimate_training(
        "bert-large", "trn1.32xlarge", plan, global_batch=16384, seq_len=128, stack="hf-neuronx"
    )
    assert bert.fits and 1000 < bert.seq_per_s < 20000
    with pytest.raises(ConfigError, match="encoder"):
        estimate_inference(
            "bert-large", "trn1.32xlarge", ParallelPlan(tp=2, ranks_per_chip=2), batch=1,
            input_tokens=128, output_tokens=1,
        )  # fmt: skip


def test_mtp_is_trained_and_costs_time():
    import dataclasses

    m = model("deepseek-v3")
    plan = ParallelPlan(tp=1, pp=4, dp=32, ep=32, micro_batch=1, zero=1)
    kw = dict(global_batch=1024, seq_len=4096)
    with_mtp = estimate_training(m, "trn3-gen2", plan, **kw)
    without = estimate_training(dataclasses.replace(m, n_mtp_modules=0), "trn3-gen2", plan, **kw)
    assert with_mtp.step_time_s > without.step_time_s
    # the modules' weights sit with the head on the last stage
    from trnsim.perf.memory import _stage_params

    last = plan.pp - 1
    assert sum(_stage_params(m, plan, last, mtp=True)) > sum(_stage_params(m, plan, last))


def test_mtp_drafts_for_deepseek_v3():
    plan = ParallelPlan(tp=8, dp=16, ep=16)
    kw = dict(batch=8, input_tokens=1024, output_tokens=256)
    base = estimate_inference("deepseek-v3", "trn3-gen2", plan, **kw)
    mtp = estimate_inference(
        "deepseek-v3", "trn3-gen2", plan, speculative=Speculative("mtp", 1), **kw
    )
    assert mtp.tpot_s < base.tpot_s
    assert any("mtp" in a and "DeepSeek-V3" in a for a in mtp.assumptions)
    with pytest.raises(ConfigError, match="MTP module"):
        estimate_inference(
            "deepseek-v3", "trn3-gen2", plan, speculative=Speculative("mtp", 2), **kw
        )


def test_per_position_acceptance_is_checked():
    with pytest.raises(ConfigError, match="must not increase"):
        Speculative("eagle3", 3, per_position=(0.5, 0.7, 0.2))
    with pytest.raises(ConfigError, match="3 tokens"):
        Speculative("eagle3", 3, per_position=(0.5, 0.4))


def test_max_batch_is_the_largest_that_fits():
    plan = ParallelPlan(tp=1)
    kw = dict(input_tokens=1000, output_tokens=1000, precision_name="fp8")
    b = max_batch("llama-3.1-8b", "dgx-h100", plan, kv_cache_dtype="fp8", **kw)
    budget = max_batch(
        "llama-3.1-8b", "dgx-h100", plan, kv_cache_dtype="fp8", max_prefill_tokens=2048, **kw
    )
    assert budget > b  # a token budget per pass bounds the prefill working set
    assert 64 < b < 4096
    prec = with_kv_cache(precision("fp8"), "fp8")
    h100 = chip("h100-sxm")
    m = model("llama-3.1-8b")
    assert infer_memory(m, plan, h100, b, 2000, 1000, prec).fits
    assert not infer_memory(m, plan, h100, b + 1, 2000, 1000, prec).fits
    # an FP8 KV cache holds about twice the sequences of a bf16 one
    b16 = max_batch("llama-3.1-8b", "dgx-h100", plan, max_prefill_tokens=2048, **kw)
    assert 1.7 < budget / b16 < 2.1


def test_time_to_train_counts_whole_steps_and_evaluations():
    t = time_to_train(10.0, 1000, 2500)
    assert t.steps == 3 and t.samples_trained == 3000 and t.time_to_train_s == 30.0
    e = time_to_train(10.0, 1000, 2500, eval_interval=4000, eval_seconds=5.0)
    assert e.steps == 4 and e.evaluations == 1 and e.time_to_train_s == 45.0
    with pytest.raises(ConfigError, match="samples"):
        time_to_train(10.0, 1000, float("nan"))


def test_cli_samples_and_new_flags(capsys):
    rc = main(
        ["train", "--model", "llama-3.1-8b", "--system", "trn3-gen2", "--tp", "4",
         "--global-batch", "1152", "--seq-len", "8192", "--samples", "2e6", "--json"]
    )  # fmt: skip
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["mlperf"]["steps"] == 1737
    assert doc["time_to_train_s"] == pytest.approx(1737 * doc["step_time_s"])


@pytest.mark.parametrize(
    "argv, words",
    [
        (["train", "--model", "llama-3.1-8b", "--eval-interval", "5"], "needs --samples"),
        (["train", "--model", "llama-3.1-8b", "--samples", "5", "--tokens", "5"], "give one"),
        (["infer", "--model", "llama-3.1-8b", "--batch", "max"], "--batch max"),
        (["infer", "--model", "llama-3.1-8b", "--draft-model", "mtp"], "no multi-token"),
        (["infer", "--model", "llama-3.1-8b", "--spec-per-position", "0.5"], "--draft-model"),
        (
            [
                "infer",
                "--model",
                "llama-3.1-8b",
                "--draft-model",
                "eagle3",
                "--spec-per-position",
                "0.5,0.6",
            ],
            "must not increase",
        ),
        (["infer", "--model", "bert-large", "--tp", "1"], "encoder"),
    ],
)
def test_cli_refuses_bad_reach_input_with_one_line(argv, words, capsys):
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and words in err[0], err


def test_cli_batch_max_and_fp8_kv(capsys):
    rc = main(
        ["infer", "--model", "llama-3.1-8b", "--system", "dgx-h100", "--chips", "1", "--tp", "1",
         "--precision", "fp8", "--kv-cache-dtype", "fp8", "--batch", "max", "--json"]
    )  # fmt: skip
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["batch"] > 64 and doc["fits"]
