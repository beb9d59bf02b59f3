"""A serving engine's configuration, its resolved limits, and the state its scheduler reads.

- ``Deployment``: what runs where (model, system, parallel plan of one replica, precision,
  serving stack, compute model, speculative decoding, replicas).
- ``EngineConfig``: the engine's knobs as vLLM and vllm-neuron name them (``None`` means the
  policy's default, ``trnsim.serve.policies``), resolved into ``Limits`` (every number the
  scheduler uses, the KV cache's size included, each with where it came from).
- ``Live``: a request inside the engine; ``StepPlan``: what a scheduler returns for one step.

KV cache capacity (``kv_capacity``) comes from ``trnsim.perf.memory`` (weights and the prefill
working set of one rank against its share of HBM):

- vLLM (``vllm/v1/worker/gpu_worker.py`` determine_available_memory, as documented in
  vllm-neuron ``docs/design/vllm/determine_available_memory_design.md``): KV budget = HBM x
  ``gpu_memory_utilization`` - weights - activations of a ``max_num_batched_tokens`` pass;
- vllm-neuron (same document, "Heuristic formula"): total = HBM x ``gpu_memory_utilization``,
  KV budget = min(total - weights, ``VLLM_NEURON_KV_GMU_BUDGET_CAP_FRACTION`` (0.30) x total);
- TensorRT-LLM (``KvCacheConfig.free_gpu_memory_fraction``, 0.9 by default: "The fraction of
  GPU memory fraction that should be allocated for the KV cache", of the memory free after the
  engine is loaded; NVIDIA/TensorRT-LLM ``tensorrt_llm/llmapi/llm_args.py``): KV budget =
  fraction x (HBM - weights - activations of a ``max_num_tokens`` pass);
- the NxD-Inference form of vllm-neuron 0.2.x (vllm-project/vllm-neuron @ a5ef7c8
  ``vllm_neuron/worker/neuronx_distributed_model_loader.py`` _get_default_neuron_config): one
  ``max_model_len`` block per sequence, ``max_num_seqs`` blocks: the cache is sized by the
  configuration, and it must fit beside the weights.

Blocks = budget / (block_size x KV bytes per token on one rank); a replica whose budget holds
no ``max_model_len`` request does not fit (vLLM refuses to start the same way).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from trnsim.errors import ConfigError
from trnsim.hw import SystemSpec
from trnsim.perf.compute import ComputeModel
from trnsim.perf.cost import CostInputs
from trnsim.perf.infer import Speculative
from trnsim.perf.memory import infer_memory
from trnsim.perf.plan import ParallelPlan
from trnsim.perf.precision import KV_CACHE_BYTES, Precision, precision, with_kv_cache
from trnsim.perf.stacks import SoftwareStack, resolve_stack
from trnsim.perf.table_model import default_model
from trnsim.perf.train import _resolve_system
from trnsim.serve.kv import Holding
from trnsim.serve.workload import Request
from trnsim.workloads import ModelArgs, resolve_model

SAMPLING = ("device", "host")


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


KV_DTYPES = ("auto", *KV_CACHE_BYTES)
CAPACITY_POLICIES = ("guaranteed_no_evict", "max_utilization")


@dataclass(frozen=True)
class Deployment:
    """One model served by ``replicas`` engines, each on ``plan.tp x plan.pp`` ranks of
    ``system`` (``plan.ranks_per_chip`` ranks per chip)."""

    model: ModelArgs | str
    system: SystemSpec | str
    plan: ParallelPlan
    precision: str | Precision = "bf16"
    stack: str | SoftwareStack | None = None
    compute_model: ComputeModel | None = None
    speculative: Speculative | None = None
    replicas: int = 1
    cost_inputs: CostInputs = field(default_factory=CostInputs)

    def __post_init__(self) -> None:
        object.__setattr__(self, "model", resolve_model(self.model))
        object.__setattr__(self, "system", _resolve_system(self.system))
        object.__setattr__(self, "precision", precision(self.precision))
        if self.replicas < 1:
            raise ConfigError(f"deployment: replicas must be >= 1, got {self.replicas}")
        if self.plan.dp != 1:
            raise ConfigError(
                f"deployment: plan.dp ({self.plan.dp}) must be 1: replicas are given by "
                "`replicas` (each a separate engine behind the router)"
            )
        self.plan.check_model(self.model)
        if self.speculative is not None:
            self.plan.check_model(self.speculative.draft_model(self.model))
        chip = self.system.chip
        object.__setattr__(self, "stack", resolve_stack(self.stack, chip, "serve"))
        if self.compute_model is None:
            object.__setattr__(self, "compute_model", default_model(chip, self.plan.ranks_per_chip))
        ranks = self.replica_ranks * self.replicas
        if self.plan.ep > 1 and self.replicas % self.plan.ep:
            raise ConfigError(
                f"deployment: ep({self.plan.ep}) must divide replicas({self.replicas}): an "
                "expert-parallel group spans ep replicas (data-parallel attention)"
            )
        chips = math.ceil(ranks / self.plan.ranks_per_chip)
        if chips > self.system.chips:
            raise ConfigError(
                f"deployment: {self.replicas} replica(s) x tp({self.plan.tp}) x pp({self.plan.pp})"
                f" = {ranks} ranks need {chips} chips at {self.plan.ranks_per_chip} rank(s) per "
                f"chip; {self.system.name} has {self.system.chips}"
            )

    @property
    def replica_ranks(self) -> int:
        return self.plan.tp * self.plan.pp

    @property
    def chips_per_replica(self) -> float:
        return self.replica_ranks / self.plan.ranks_per_chip

    @property
    def chips(self) -> int:
        return math.ceil(self.replica_ranks * self.replicas / self.plan.ranks_per_chip)

    def describe(self) -> str:
        p = self.plan
        par = f"TP{p.tp}" + (f" PP{p.pp}" if p.pp > 1 else "") + (f" EP{p.ep}" if p.ep > 1 else "")
        rpc = f", {p.ranks_per_chip} ranks/chip" if p.ranks_per_chip > 1 else ""
        spec = ""
        if self.speculative is not None:
            s = self.speculative
            acc = "/".join(f"{x:g}" for x in s.positions) if s.per_position else f"{s.rate:g}"
            spec = f", speculative {s.draft_model(self.model).name} x{s.tokens} @ {acc}"
        return (
            f"{self.model.name} {self.precision.name} on {self.system.name}: {self.replicas} "
            f"replica(s) of {par}{rpc} ({plural(self.chips, 'chip')}), stack "
            f"{self.stack.name}{spec}"
        )


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """Engine settings (``None``: the policy's default; see ``trnsim.serve.policies``).

    Attributes:
        policy: ``vllm-v1``, ``neuron`` or ``optimum-neuron``.
        neuron_form: ``native`` (the current vllm-neuron plugin) or ``nxdi`` (the NxD
            Inference based 0.2.x plugin), for the ``neuron`` policy.
        max_num_seqs, max_num_batched_tokens, max_model_len, block_size: vLLM's names.
        prefix_caching: hash-based prefix caching of full blocks.
        gpu_memory_utilization: fraction of HBM the engine may use.
        kv_cap_fraction: vllm-neuron's ``VLLM_NEURON_KV_GMU_BUDGET_CAP_FRACTION``.
        num_gpu_blocks: KV blocks (overrides the computed capacity).
        prefill_buckets: vllm-neuron ``num_batched_tokens_buckets`` (NxDI: context-encoding
            buckets).
        batch_buckets: vllm-neuron ``num_seqs_buckets``.
        context_buckets: vllm-neuron ``decode_context_length_buckets`` (NxDI: token-generation
            buckets).
        chunked_prefill: prefill long prompts in ``max_num_batched_tokens`` segments (NxDI form;
            the native plugin and vLLM always do).
        prefill_chunk_size: optimum-neuron's chunked prefill (each new prompt runs in chunks of
            this many tokens, inside one step).
        long_prefill_token_threshold: vLLM's cap on one request's tokens per step (0: none).
        sampling: ``device`` or ``host`` (logits to the CPU and sampled there).
        async_scheduling: overlap host work with device execution while the batch is unchanged
            (needs device sampling).
        kv_cache_dtype: ``auto`` (the precision's), ``bf16``, ``fp16`` or ``fp8``.
        capacity_policy: (``trtllm``) TensorRT-LLM's capacity scheduler policy:
            ``guaranteed_no_evict`` (its default) or ``max_utilization``.
        kv_free_fraction: (``trtllm``) TensorRT-LLM's ``free_gpu_memory_fraction``: the share
            of the memory left after the weights and activations that the KV cache takes.
    """

    policy: str = "vllm-v1"
    neuron_form: str = "native"
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    max_model_len: int | None = None
    block_size: int | None = None
    prefix_caching: bool | None = None
    gpu_memory_utilization: float = 0.9
    kv_cap_fraction: float = 0.30
    num_gpu_blocks: int | None = None
    prefill_buckets: tuple[int, ...] | None = None
    batch_buckets: tuple[int, ...] | None = None
    context_buckets: tuple[int, ...] | None = None
    chunked_prefill: bool | None = None
    prefill_chunk_size: int | None = None
    long_prefill_token_threshold: int = 0
    sampling: str | None = None
    async_scheduling: bool | None = None
    kv_cache_dtype: str = "auto"
    capacity_policy: str | None = None
    kv_free_fraction: float | None = None

    def __post_init__(self) -> None:
        for name in (
            "max_num_seqs",
            "max_num_batched_tokens",
            "max_model_len",
            "block_size",
            "prefill_chunk_size",
        ):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise ConfigError(f"engine: {name} must be >= 1, got {v}")
        if self.num_gpu_blocks is not None and self.num_gpu_blocks < 2:
            raise ConfigError(f"engine: num_gpu_blocks must be >= 2, got {self.num_gpu_blocks}")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ConfigError(
                f"engine: gpu_memory_utilization must be in (0, 1], got "
                f"{self.gpu_memory_utilization}"
            )
        if not 0 < self.kv_cap_fraction <= 1:
            raise ConfigError(
                f"engine: kv_cap_fraction must be in (0, 1], got {self.kv_cap_fraction}"
            )
        if self.long_prefill_token_threshold < 0:
            raise ConfigError("engine: long_prefill_token_threshold must be >= 0")
        if self.sampling is not None and self.sampling not in SAMPLING:
            raise ConfigError(f"engine: sampling must be device or host, got {self.sampling!r}")
        if self.kv_cache_dtype not in KV_DTYPES:
            raise ConfigError(
                f"engine: kv_cache_dtype must be one of {', '.join(KV_DTYPES)}, got "
                f"{self.kv_cache_dtype!r}"
            )
        if self.capacity_policy is not None and self.capacity_policy not in CAPACITY_POLICIES:
            raise ConfigError(
                f"engine: capacity_policy must be one of {', '.join(CAPACITY_POLICIES)}, got "
                f"{self.capacity_policy!r}"
            )
        if self.kv_free_fraction is not None and not 0 < self.kv_free_fraction <= 1:
            raise ConfigError(
                f"engine: kv_free_fraction must be in (0, 1], got {self.kv_free_fraction}"
            )
        if self.neuron_form not in ("native", "nxdi"):
            raise ConfigError(
                f"engine: neuron_form must be native or nxdi, got {self.neuron_form!r}"
            )
        for name in ("prefill_buckets", "batch_buckets", "context_buckets"):
            b = getattr(self, name)
            if b is None:
                continue
            if not b or any(x < 1 for x in b) or list(b) != sorted(set(b)):
                raise ConfigError(
                    f"engine: {name} must be positive and strictly ascending, got {list(b)}"
                )


@dataclass(frozen=True, slots=True)
class Limits:
    """Every number a scheduler uses, resolved for one replica (``notes``: where the defaults
    came from). ``streams``: independent schedules a replica runs at once (TensorRT-LLM's
    pipeline-parallel micro-batches: ``pp`` of them, each with the whole model's step time, all
    on the replica's one KV pool of ``num_blocks``; 1 elsewhere)."""

    policy: str
    form: str
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    block_size: int
    prefix_caching: bool
    num_blocks: int
    chunked_prefill: bool
    long_prefill_token_threshold: int
    prefill_buckets: tuple[int, ...] | None
    batch_buckets: tuple[int, ...] | None
    context_buckets: tuple[int, ...] | None
    max_kv_concurrent: int
    sampling: str
    async_scheduling: bool
    kv_bytes_per_token: float
    notes: tuple[str, ...] = ()
    prefill_chunk: int = 0
    capacity_policy: str = ""
    streams: int = 1

    @property
    def kv_tokens(self) -> int:
        return (self.num_blocks - 1) * self.block_size


def kv_precision(dep: Deployment, cfg: EngineConfig) -> Precision:
    """The deployment's precision with its KV cache in ``cfg.kv_cache_dtype``."""
    return with_kv_cache(dep.precision, cfg.kv_cache_dtype)


def draft_weights(spec: Speculative, draft: ModelArgs, weights: float) -> float:
    """A draft's weight bytes on a rank: an MTP module shares the target's embedding and head
    (as ``trnsim.perf.infer`` counts it)."""
    if spec.method == "mtp":
        return weights * (1 - (draft.embedding_params + draft.head_params) / draft.n_params)
    return weights


def kv_capacity(
    dep: Deployment,
    prec: Precision,
    *,
    block_size: int,
    act_tokens: int,
    gmu: float,
    rule: str,
    cap_fraction: float = 0.30,
) -> tuple[int, float, str]:
    """(blocks, KV bytes per token on one rank, how) of one replica's KV cache (module doc):
    ``rule`` ``vllm``, ``neuron`` or ``trtllm`` (``gmu`` is then the fraction of the free
    memory)."""
    m, plan, chip = dep.model, dep.plan, dep.system.chip
    mem = infer_memory(m, plan, chip, 1, block_size, act_tokens, prec)
    weights, act = mem.weights, mem.activations
    per_token = mem.kv_cache / block_size
    if dep.speculative is not None:
        draft = dep.speculative.draft_model(m)
        dmem = infer_memory(draft, plan, chip, 1, block_size, 1, prec)
        weights += draft_weights(dep.speculative, draft, dmem.weights)
        per_token += dmem.kv_cache / block_size
    total = mem.capacity * gmu
    if rule == "trtllm":
        budget = (mem.capacity - weights - act) * gmu
        how = (
            f"{gmu:g} x ({mem.capacity / 1e9:.1f} GB HBM per rank - weights "
            f"{weights / 1e9:.1f} GB - activations {act / 1e9:.2f} GB) (TensorRT-LLM "
            "free_gpu_memory_fraction)"
        )
    elif rule == "vllm":
        budget = total - weights - act
        how = (
            f"{mem.capacity / 1e9:.1f} GB HBM per rank x {gmu:g} - weights "
            f"{weights / 1e9:.1f} GB - activations {act / 1e9:.2f} GB"
        )
    else:
        budget = min(total - weights, cap_fraction * total)
        how = (
            f"min({mem.capacity / 1e9:.1f} GB x {gmu:g} - weights {weights / 1e9:.1f} GB, "
            f"{cap_fraction:g} x {total / 1e9:.1f} GB) (vllm-neuron KV cap)"
        )
    blocks = int(budget // (per_token * block_size)) if budget > 0 else 0
    return blocks, per_token, f"{budget / 1e9:.2f} GB of KV per rank = {how}"


# --- requests inside the engine --------------------------------------------------------------


class Live:
    """A request inside an engine. ``computed``: tokens whose KV exists (prefix hits included);
    ``generated``: output tokens produced (fractional under speculative decoding, whose steps
    yield the expected number of tokens). A request needs prefill while ``pending() > 0``."""

    __slots__ = (
        "arrival",
        "cached",
        "computed",
        "first",
        "generated",
        "hold",
        "last",
        "output",
        "preemptions",
        "prompt",
        "replica",
        "req",
        "scheduled",
    )

    def __init__(self, req: Request, output: int, arrival: float) -> None:
        self.req = req
        self.prompt = req.prompt
        self.output = output
        self.computed = 0.0
        self.generated = 0.0
        self.first = -1.0
        self.scheduled = -1.0
        self.hold = Holding()
        self.cached = 0
        self.preemptions = 0
        self.replica = -1
        self.arrival = arrival
        self.last = -1.0  # time of the latest token

    def pending(self) -> float:
        """Tokens to compute before the next token can be sampled: the prompt (and, after a
        preemption, the tokens generated so far) not yet computed."""
        return self.prompt + max(self.generated, 1.0) - 1.0 - self.computed

    @property
    def context(self) -> float:
        """Tokens a decode step attends to: everything so far plus the token it computes."""
        return self.computed + 1.0


@dataclass(slots=True)
class StepPlan:
    """What a scheduler decides for one step (applied by the loop, in this order):
    ``preempted`` requests leave the running list (recompute later, at the front of the
    queue); ``admitted`` requests join it (with their prefix-hit blocks); then every
    scheduled request gets the blocks for its new tokens: ``chunks`` (request, prompt tokens
    to compute) and ``decodes`` (one step each).

    ``graphs`` (Neuron; empty elsewhere): the compiled graphs the step runs, one after
    another, each a padded shape: ``("p", tokens, prior)`` a prefill (segment) of ``tokens``
    padded tokens attending to ``prior`` cached ones, ``("d", batch, context)`` a decode of
    ``batch`` padded sequences each reading ``context`` tokens of KV. ``host_samples``: logits
    sampled on the host whatever the sampling setting (optimum-neuron's chunked prefill).
    ``host_s``: the engine's own host seconds in this step (its runner's work per step and per
    prefill, where the policy knows it; ``trnsim.serve.fitted``).
    ``stable``: a decode-only step that the scheduler would plan again unchanged until a
    request arrives or finishes (the loop may then run several at once)."""

    chunks: list[tuple[Live, int]] = field(default_factory=list)
    decodes: list[Live] = field(default_factory=list)
    admitted: list[tuple[Live, list[int]]] = field(default_factory=list)
    preempted: list[Live] = field(default_factory=list)
    graphs: list[tuple[str, int, int]] = field(default_factory=list)
    host_samples: int = 0
    host_s: float = 0.0
    stable: bool = False

    @property
    def decode_graph(self) -> tuple[str, int, int] | None:
        return next((g for g in self.graphs if g[0] == "d"), None)

    @property
    def empty(self) -> bool:
        return not self.chunks and not self.decodes

    @property
    def kind(self) -> str:
        if self.chunks and self.decodes:
            return "mixed"
        return "prefill" if self.chunks else ("decode" if self.decodes else "idle")


class Queues:
    """The scheduler's view of one replica: waiting (FCFS, preempted ones in front) and running
    (in admission order; vLLM preempts from the end)."""

    __slots__ = ("running", "waiting")

    def __init__(self) -> None:
        self.waiting: deque[Live] = deque()
        self.running: list[Live] = []
