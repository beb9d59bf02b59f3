"""trnsim.serve: LLM serving under load, a request-level discrete-event simulation of vLLM
(``vllm-v1``) and vllm-neuron (``neuron``, native and NxD-Inference forms) engines on any
system of the catalog, above ``trnsim.perf`` (whose per-step cost it runs every step).

Entry points: ``simulate(deployment, workload, engine)`` -> ``ServeResult``; ``Deployment``,
``EngineConfig``, workloads ``OpenLoop``/``ClosedLoop``/``Trace`` with ``Synthetic`` and
``Lengths``; ``SLO``; ``max_rate`` (the highest rate meeting p99 SLOs) and ``sweep``.

The pieces: ``workload`` (arrivals, lengths, trace files), ``engine`` (configuration, limits,
KV capacity), ``kv`` (paged blocks, prefix caching, LRU), ``policies`` (the schedulers, pure
functions of the state), ``cost`` (step times of a plan, host terms), ``loop`` (the event loop,
router, disaggregated prefill/decode), ``metrics`` (streaming percentiles), ``search`` (rate
search and sweeps), ``fitted`` (fitted constants), ``calibration`` (set L: the published rows).
"""

from trnsim.serve.api import ServeResult, resolve, simulate
from trnsim.serve.engine import Deployment, EngineConfig, Limits
from trnsim.serve.loop import ROUTERS, TraceLog
from trnsim.serve.metrics import SLO
from trnsim.serve.policies import names as policy_names
from trnsim.serve.search import RateSearch, max_rate, sweep
from trnsim.serve.workload import ClosedLoop, Lengths, OpenLoop, Request, Synthetic, Trace

__all__ = [
    "ROUTERS",
    "SLO",
    "ClosedLoop",
    "Deployment",
    "EngineConfig",
    "Lengths",
    "Limits",
    "OpenLoop",
    "RateSearch",
    "Request",
    "ServeResult",
    "Synthetic",
    "Trace",
    "TraceLog",
    "max_rate",
    "policy_names",
    "resolve",
    "simulate",
    "sweep",
]
