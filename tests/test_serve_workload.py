"""Workloads: arrival processes, length distributions and the trace formats people have."""

from __future__ import annotations

import json

import numpy as np
import pytest

from trnsim.errors import ConfigError
from trnsim.serve.workload import ClosedLoop, Lengths, OpenLoop, Synthetic, Trace


def gaps(wl: OpenLoop) -> np.ndarray:
    t = np.array([r.arrival for r in wl.requests_iter()])
    return np.diff(t)


def test_poisson_arrivals_have_exponential_gaps_at_the_rate():
    g = gaps(OpenLoop(4.0, 20000, "poisson"))
    assert g.mean() == pytest.approx(0.25, rel=0.03)
    assert g.std() / g.mean() == pytest.approx(1.0, rel=0.05)


def test_gamma_burstiness_sets_the_gap_variability_at_the_same_mean():
    """vllm bench serve --burstiness: gamma gaps of shape 1/burstiness (CV^2 = burstiness)."""
    g = gaps(OpenLoop(4.0, 20000, "gamma", burstiness=4.0))
    assert g.mean() == pytest.approx(0.25, rel=0.05)
    assert (g.std() / g.mean()) ** 2 == pytest.approx(4.0, rel=0.1)


def test_constant_arrivals_are_evenly_spaced():
    assert np.allclose(gaps(OpenLoop(2.0, 10, "constant")), 0.5)


def test_requests_are_seeded_and_counted():
    a = [
        (r.arrival, r.prompt, r.output)
        for r in OpenLoop(3, 50, lengths=Synthetic(seed=5)).requests_iter()
    ]
    b = [
        (r.arrival, r.prompt, r.output)
        for r in OpenLoop(3, 50, lengths=Synthetic(seed=5)).requests_iter()
    ]
    assert a == b and len(a) == 50
    assert len(list(ClosedLoop(4, 9).requests_iter())) == 9


@pytest.mark.parametrize("kind", ["uniform", "normal", "lognormal"])
def test_length_distributions_keep_their_mean(kind):
    x = Lengths(1000, 200, kind).sample(np.random.default_rng(0), 20000)
    assert x.mean() == pytest.approx(1000, rel=0.01)
    assert x.min() >= 1


def test_shared_prefix_gives_equal_leading_ids():
    syn = Synthetic(Lengths(100), Lengths(10), shared_prefix=1024, prefix_groups=2)
    reqs = list(OpenLoop(1, 20, lengths=syn).requests_iter())
    assert all(r.prompt == 1124 and len(r.hash_ids) == 2 for r in reqs)
    assert len({r.hash_ids for r in reqs}) == 2


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (dict(rate=0, requests=5), "rate must be > 0"),
        (dict(rate=-1, requests=5), "rate must be > 0"),
        (dict(rate=1, requests=0), "requests must be >= 1"),
    ],
)
def test_bad_open_loops(bad, match):
    with pytest.raises(ConfigError, match=match):
        OpenLoop(**bad)


def test_bad_closed_loops_and_lengths():
    with pytest.raises(ConfigError, match="concurrency must be >= 1"):
        ClosedLoop(0, 5)
    with pytest.raises(ConfigError, match="reaches 0 tokens"):
        Lengths(100, 100, "uniform")


# --- traces --------------------------------------------------------------------------------------


def test_azure_trace(tmp_path):
    """Azure/AzurePublicDataset AzureLLMInferenceTrace_*.csv: TIMESTAMP (with 7 fractional
    digits), ContextTokens, GeneratedTokens."""
    p = tmp_path / "azure.csv"
    p.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,374,44\n"
        "2023-11-16 18:15:50.9951690,396,109\n"
        "2023-11-16 18:15:51.0,879,32\n"
    )
    reqs = list(Trace(str(p)).requests_iter())
    assert [(r.prompt, r.output) for r in reqs] == [(374, 44), (396, 109), (879, 32)]
    assert reqs[0].arrival == 0.0
    assert reqs[1].arrival == pytest.approx(50.9951690 - 46.6805900, abs=1e-6)


def test_mooncake_trace(tmp_path):
    """kvcache-ai/Mooncake mooncake_trace.jsonl: timestamp (ms), input_length, output_length,
    hash_ids (512-token blocks)."""
    p = tmp_path / "mooncake.jsonl"
    p.write_text(
        '{"timestamp": 0, "input_length": 655, "output_length": 52, "hash_ids": [46, 47]}\n'
        '{"timestamp": 10535, "input_length": 672, "output_length": 26, "hash_ids": [46, 47]}\n'
    )
    reqs = list(Trace(str(p), speedup=2).requests_iter())
    assert reqs[1].arrival == pytest.approx(10.535 / 2)
    assert reqs[0].hash_ids == (46, 47) and reqs[0].hash_block == 512


def test_generic_csv_and_jsonl(tmp_path):
    c = tmp_path / "t.csv"
    c.write_text("arrival_s,input_tokens,output_tokens,hash_ids\n0.5,10,5,1 2\n1.5,20,6,\n")
    reqs = list(Trace(str(c)).requests_iter())
    assert reqs[0].hash_ids == (1, 2) and reqs[1].arrival == 1.0
    j = tmp_path / "t.jsonl"
    j.write_text(json.dumps({"arrival_s": 3, "input_tokens": 7, "output_tokens": 2}) + "\n")
    assert next(Trace(str(j)).requests_iter()).prompt == 7


@pytest.mark.parametrize(
    ("text", "name", "match"),
    [
        ("TIMESTAMP,ContextTokens\n2023-11-16 18:15:46,3\n", "a.csv", "missing GeneratedTokens"),
        ("when,in,out\n1,2,3\n", "b.csv", "missing column"),
        ("arrival_s,input_tokens,output_tokens\n0,-5,3\n", "c.csv", "input_tokens is negative"),
        ("arrival_s,input_tokens,output_tokens\n0,2.5,3\n", "d.csv", "not a whole number"),
        ("arrival_s,input_tokens,output_tokens\n5,2,3\n1,2,3\n", "e.csv", "time goes backwards"),
        ('{"timestamp": 0, "input_length": 5}\n', "f.jsonl", "missing output_length"),
        ('{"timestamp": 0, "input_length": 5, "output_length": -1}\n', "g.jsonl", "negative"),
        ("not json\n{", "h.jsonl", None),
        ("", "i.csv", "empty"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,1,1\n", "j.csv", "not a time"),
    ],
)
def test_bad_traces_name_the_file_line_and_rule(tmp_path, text, name, match):
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(ConfigError) as err:
        list(Trace(str(p)).requests_iter())
    msg = str(err.value)
    assert str(p) in msg or name in msg
    if match:
        assert match in msg


def test_a_missing_trace_file():
    with pytest.raises(ConfigError, match="no such file"):
        Trace("/no/such/trace.csv")
