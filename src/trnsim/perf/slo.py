"""Serving latency bounds (SLOs): the TTFT and TPOT a serving plan must meet to be chosen.

A serving plan picked for throughput or cost alone can be one nobody would deploy (a batch of
256 whose first token takes 32 s). The planner in serving mode (``search_inference``) and
``compare`` therefore choose among the plans that meet a ``ServingSLO``; the defaults are
MLPerf Inference's latency constraints for its LLM datacenter benchmarks in the server
("conversational") scenario, Llama-2-70B and Mixtral-8x7B: TTFT <= 2,000 ms and TPOT <= 200 ms
(mlcommons/inference_policies, ``inference_rules.adoc``, benchmark table, commit ac93e89c).
MLPerf bounds the 99th percentile; trnsim's estimate is one request's latency at a steady
batch (no queueing), so it is compared with the bound as is.
"""

from __future__ import annotations

from dataclasses import dataclass

from trnsim import inputs

SLO_SOURCE = (
    "MLPerf Inference server scenario, Llama-2-70B and Mixtral-8x7B (mlcommons/"
    "inference_policies inference_rules.adoc, ac93e89c)"
)


@dataclass(frozen=True, slots=True)
class ServingSLO:
    """Latency bounds of a serving plan: time to first token and time per output token, in
    seconds; ``source`` says where they come from."""

    ttft_s: float = 2.0
    tpot_s: float = 0.2
    source: str = SLO_SOURCE

    def __post_init__(self) -> None:
        inputs.check("slo-ttft", self.ttft_s)
        inputs.check("slo-tpot", self.tpot_s)

    def met(self, ttft_s: float, tpot_s: float) -> bool:
        return ttft_s <= self.ttft_s and tpot_s <= self.tpot_s

    def describe(self) -> str:
        return (
            f"latency bound: TTFT <= {self.ttft_s * 1e3:,.4g} ms, TPOT <= "
            f"{self.tpot_s * 1e3:,.4g} ms ({self.source})"
        )

    def as_dict(self) -> dict[str, float | str]:
        return {"ttft_s": self.ttft_s, "tpot_s": self.tpot_s, "source": self.source}


DEFAULT_SLO = ServingSLO()
