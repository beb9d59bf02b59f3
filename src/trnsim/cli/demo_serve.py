"""Demo section: serving under load, Llama-3.1-8B on one Trn3 chip (vllm-neuron) against one
H100 (vLLM V1): the same Poisson traffic at three rates, simulated live."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from trnsim.perf import ParallelPlan
from trnsim.serve import Deployment, EngineConfig, Lengths, OpenLoop, Synthetic, simulate

LENGTHS = Synthetic(Lengths(1024, 256, "uniform"), Lengths(256, 64, "uniform"))
SYSTEMS = (
    (
        "Trn3, vllm-neuron",
        "trn3-gen2-ultraserver",
        EngineConfig(policy="neuron", sampling="device", max_model_len=4096),
    ),
    ("H100, vLLM", "p5.48xlarge", EngineConfig(policy="vllm-v1", max_model_len=4096)),
)


def section(console: Console) -> None:
    t = Table(title=f"Llama-3.1-8B on one chip, 300 Poisson requests; {LENGTHS.describe()}")
    for col in ("system", "rate/s", "tok/s", "TTFT p50", "TTFT p99", "TPOT p50", "USD/Mtok"):
        t.add_column(col, justify="right")
    for label, system, engine in SYSTEMS:
        dep = Deployment("llama-3.1-8b", system, ParallelPlan(tp=1))
        for rate in (1.0, 2.0, 4.0):
            m = simulate(dep, OpenLoop(rate, 300, lengths=LENGTHS), engine)
            q = m.metrics
            t.add_row(
                label,
                f"{rate:g}",
                f"{m.output_tokens_per_s:.0f}",
                f"{q.ttft.quantile(0.5) * 1e3:.0f} ms",
                f"{q.ttft.quantile(0.99) * 1e3:.0f} ms",
                f"{q.tpot.quantile(0.5) * 1e3:.1f} ms",
                f"{m.usd_per_million_tokens():.3f}",
            )
    console.print(t)
    console.print(
        "[dim]vllm-neuron pads prefills to buckets, runs one prefill per step and reads "
        "max_model_len of KV per decode; where TTFT p99 explodes the rate is past the knee "
        "(trnsim serve --max-rate --slo-ttft 0.5 finds it)[/dim]"
    )
