"""profile_step: shapes-only training steps, fake process groups, agreement with trnsim train."""

import time

import pytest

torch = pytest.importorskip("torch")

import trnsim.torch as tt  # noqa: E402
from trnsim.errors import ConfigError  # noqa: E402
from trnsim.perf import ParallelPlan, estimate_training  # noqa: E402
from trnsim.workloads import ModelArgs  # noqa: E402

TINY = ModelArgs("tiny-llama", d_model=256, n_layers=2, n_heads=8, n_kv_heads=4, d_ff=512,
                 vocab=1024)  # fmt: skip


@pytest.mark.slow
def test_llama3_8b_fsdp_step_agrees_with_train_within_10_percent():
    """Llama-3-8B on a Trn3 Gen2 UltraServer, FSDP2 over 8 ranks, 4096 tokens: the captured
    step and trnsim train's estimate of the same plan (selective recomputation in train is
    the flash-attention backward's recomputation here); in under a minute."""
    plan = ParallelPlan(dp=8, zero=3, micro_batch=1, recompute="selective")
    t0 = time.process_time()  # CPU seconds: the work, whatever else loads the machine
    sp = tt.profile_step("llama-3-8b", system="trn3-gen2", parallel=plan, seq_len=4096,
                         global_batch=16)  # fmt: skip
    cpu = time.process_time() - t0
    est = estimate_training("llama-3-8b", "trn3-gen2", plan, global_batch=16, seq_len=4096)
    assert cpu < 60
    assert abs(sp.step_time_s / est.step_time_s - 1) < 0.10, (sp.breakdown, est.breakdown)
    assert sp.profile.fallbacks == {}
    # FSDP2's collectives were captured over the DP group (8 ranks, stride 1) and hidden
    colls = [r.collective for r in sp.profile.records if r.kind == "collective"]
    assert {c[0] for c in colls} == {"all-gather", "reduce-scatter"}
    assert {(c[1], c[2]) for c in colls} == {(8, 1)}
    assert sp.breakdown["fsdp_comm"] > 0 and sp.breakdown["fsdp_exposed"] == 0


def test_tensor_parallel_collectives_are_captured_per_group():
    plan = ParallelPlan(tp=2, dp=2, zero=3, micro_batch=1, sequence_parallel=True)
    sp = tt.profile_step(TINY, system="trn3-gen1", parallel=plan, seq_len=256, global_batch=4)
    colls = {(r.collective[0], r.collective[1], r.collective[2]) for r in sp.profile.records
             if r.kind == "collective"}  # fmt: skip
    assert ("all-gather", 2, 1) in colls and ("reduce-scatter", 2, 1) in colls  # TP + SP
    assert ("all-gather", 2, 2) in colls and ("reduce-scatter", 2, 2) in colls  # FSDP on DP
    assert sp.breakdown["tp_comm"] > 0
    # local shapes: the q projection of rank 0 has n_heads / tp heads
    q = [r for r in sp.profile.records if r.module.endswith("attn.q") and r.kind == "matmul"]
    assert q[0].mmk[3] == TINY.n_heads * TINY.head_dim // 2


def test_own_module_and_plain_step():
    cfg = tt.GPTConfig(d_model=64, n_layers=2, n_heads=4, seq_len=64)
    model = tt.GPT(cfg)
    idx = torch.randint(0, cfg.vocab, (2, 64))
    sp = tt.profile_step(model, (idx, idx), system="trn3-gen1", seq_len=64, global_batch=2)
    assert sp.step_time_s > 0 and sp.breakdown["forward"] > 0 and sp.breakdown["backward"] > 0
    assert sp.as_dict()["ops"] == len(sp.profile.records)


def test_unsupported_plans_are_refused_clearly():
    with pytest.raises(ConfigError, match="pp=2"):
        tt.profile_step(TINY, parallel=ParallelPlan(pp=2), seq_len=128)
    with pytest.raises(ConfigError, match="chips"):
        tt.profile_step(TINY, system="trn3-gen1", parallel=ParallelPlan(dp=128), seq_len=128,
                        global_batch=128)  # fmt: skip


def test_hugging_face_config_is_built_and_stepped(tmp_path):
    """A config.json (the transformers fields; transformers itself is not needed) becomes a
    Llama-shaped module under FakeTensorMode."""
    import json

    cfg = {"model_type": "llama", "hidden_size": 128, "num_hidden_layers": 2,
           "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 256,
           "vocab_size": 512, "max_position_embeddings": 256}  # fmt: skip
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    sp = tt.profile_step(str(path), system="trn3-gen1", seq_len=64, global_batch=1)
    q = [r for r in sp.profile.records if r.module.endswith("attn.q") and r.kind == "matmul"]
    assert q[0].mmk == (1, 64, 128, 128)  # [tokens, d] x [d, heads x head_dim]
    assert sp.step_time_s > 0 and sp.profile.fallbacks == {}
