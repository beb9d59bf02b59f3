"""``trnsim serve``: LLM serving under load (``trnsim.serve``): latency percentiles, throughput,
goodput, the highest rate meeting p99 SLOs, sweeps over load (several systems on one chart),
a Perfetto trace and per-request records."""

from __future__ import annotations

import argparse
import csv
import json
import math
from typing import Any

from rich.console import Console
from rich.table import Table

from trnsim.cli.argtypes import (
    fraction,
    fraction_list,
    nonneg_float,
    nonneg_int,
    positive_float,
    positive_int,
)
from trnsim.cli.infer import speculative_from_args
from trnsim.cli.train import (
    add_common,
    check_moe_imbalance,
    check_ranks_per_chip,
    check_stack,
    cost_inputs,
    dump,
    model_from_args,
    resolve_system,
)
from trnsim.errors import ConfigError, UsageError
from trnsim.hw.specs import SystemSpec
from trnsim.perf import ParallelPlan, Speculative
from trnsim.perf.precision import KV_CACHE_BYTES
from trnsim.perf.table_model import compute_model
from trnsim.report.output import atomic_write, output_path
from trnsim.report.progress import progress
from trnsim.report.tables import fit
from trnsim.report.units import pretty
from trnsim.serve import (
    ROUTERS,
    SLO,
    ClosedLoop,
    Deployment,
    EngineConfig,
    Lengths,
    OpenLoop,
    Synthetic,
    Trace,
    TraceLog,
    max_rate,
    policy_names,
    simulate,
    sweep,
)
from trnsim.serve.deploy import default_plan, default_policy
from trnsim.serve.engine import plural
from trnsim.serve.metrics import RECORD_FIELDS
from trnsim.serve.workload import ARRIVALS, LENGTH_KINDS
from trnsim.workloads import ModelArgs

DEFAULT_RATE = 2.0
DEFAULT_REQUESTS = 500
PROGRESS_MIN = 2000  # requests; a progress bar above this


def _ints(text: str) -> tuple[int, ...]:
    try:
        vals = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of integers"
        ) from None
    if not vals or any(v < 1 for v in vals):
        raise argparse.ArgumentTypeError(f"{text!r}: give positive integers, e.g. 128,256,512")
    return vals


def _floats(text: str) -> tuple[float, ...]:
    try:
        vals = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of numbers"
        ) from None
    if not vals or any(not (v > 0 and math.isfinite(v)) for v in vals):
        raise argparse.ArgumentTypeError(f"{text!r}: every value must be a number > 0")
    return vals


def _pd(text: str) -> tuple[int, int]:
    parts = text.split(":")
    try:
        p, d = (int(x) for x in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not P:D (prefill:decode replicas)") from None
    if p < 1 or d < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: both pools need >= 1 replica")
    return p, d


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_common(parser)
    e = parser.add_argument_group("engine (vLLM / vllm-neuron names; unset: the policy's default)")
    e.add_argument(
        "--policy",
        choices=policy_names(),
        help="scheduler: vllm-v1, neuron, optimum-neuron or trtllm (TensorRT-LLM) (default: "
        "neuron on Trainium/Inferentia, vllm-v1 elsewhere)",
    )
    e.add_argument(
        "--capacity-policy",
        choices=("guaranteed_no_evict", "max_utilization"),
        help="trtllm: TensorRT-LLM's capacity scheduler (default guaranteed_no_evict)",
    )
    e.add_argument(
        "--kv-free-fraction",
        type=fraction,
        help="trtllm: free_gpu_memory_fraction, the KV cache's share of the memory left after "
        "weights and activations (default 0.9)",
    )
    e.add_argument(
        "--neuron-form",
        choices=("native", "nxdi"),
        default="native",
        help="neuron policy: the current plugin (native) or the NxD Inference 0.2.x form",
    )
    e.add_argument("--max-num-seqs", type=positive_int, help="running requests at most")
    e.add_argument("--max-num-batched-tokens", type=positive_int, help="tokens per step at most")
    e.add_argument("--max-model-len", type=positive_int, help="prompt + output tokens at most")
    e.add_argument("--block-size", type=positive_int, help="KV block size in tokens")
    e.add_argument("--prefix-caching", action=argparse.BooleanOptionalAction, help="prefix caching")
    e.add_argument(
        "--gpu-memory-utilization", type=fraction, default=0.9, help="HBM fraction (default 0.9)"
    )
    e.add_argument(
        "--kv-cap-fraction",
        type=fraction,
        default=0.30,
        help="vllm-neuron KV cap (fraction of the memory budget; default 0.30)",
    )
    e.add_argument("--num-gpu-blocks", type=positive_int, help="KV blocks (override)")
    e.add_argument("--prefill-buckets", type=_ints, help="neuron: prefill token buckets")
    e.add_argument("--batch-buckets", type=_ints, help="neuron: decode batch buckets")
    e.add_argument("--context-buckets", type=_ints, help="neuron: decode context buckets")
    e.add_argument(
        "--chunked-prefill", action="store_true", help="neuron nxdi form: segmented prefill"
    )
    e.add_argument(
        "--prefill-chunk-size", type=positive_int, help="optimum-neuron: chunked prefill size"
    )
    e.add_argument(
        "--long-prefill-token-threshold",
        type=nonneg_int,
        default=0,
        help="vLLM: one request's tokens per step at most (0: no cap)",
    )
    e.add_argument("--sampling", choices=("device", "host"), help="where tokens are sampled")
    e.add_argument(
        "--async-scheduling",
        action=argparse.BooleanOptionalAction,
        help="overlap host work with the device while the batch is unchanged",
    )
    e.add_argument(
        "--kv-cache-dtype",
        choices=("auto", *KV_CACHE_BYTES),
        default="auto",
        help="store the KV cache in this dtype (auto: the precision's)",
    )
    e.add_argument(
        "--draft-model",
        help="speculative decoding: a draft model, eagle3 (an EAGLE-3 head) or mtp (the "
        "model's multi-token-prediction modules)",
    )
    e.add_argument(
        "--spec-tokens", type=positive_int, help="draft tokens per step (default 4; eagle3 3)"
    )
    e.add_argument(
        "--spec-acceptance",
        type=fraction,
        help="acceptance per draft token (default: the method's, as trnsim infer)",
    )
    e.add_argument(
        "--spec-per-position",
        type=fraction_list,
        help="measured acceptance of each draft position, comma-separated",
    )
    w = parser.add_argument_group("workload (one of --rate, --concurrency, --trace)")
    w.add_argument("--rate", type=positive_float, help=f"requests/s (default {DEFAULT_RATE:g})")
    w.add_argument("--concurrency", type=positive_int, help="closed loop: concurrent users")
    w.add_argument("--trace", help="trace file: Azure LLM CSV, Mooncake JSONL, or generic")
    w.add_argument("--trace-speedup", type=positive_float, default=1.0, help="replay faster")
    w.add_argument(
        "--requests", type=positive_int, help=f"requests (default {DEFAULT_REQUESTS}; a trace: all)"
    )
    w.add_argument("--arrival", choices=ARRIVALS, default="poisson")
    w.add_argument("--burstiness", type=positive_float, default=1.0, help="gamma arrivals")
    w.add_argument("--input-tokens", type=positive_int, default=1024, help="mean prompt tokens")
    w.add_argument("--output-tokens", type=positive_int, default=256, help="mean output tokens")
    w.add_argument("--input-dist", choices=LENGTH_KINDS, default="fixed")
    w.add_argument("--input-spread", type=nonneg_float, default=0.0, help="+- (uniform) or s.d.")
    w.add_argument("--output-dist", choices=LENGTH_KINDS, default="fixed")
    w.add_argument("--output-spread", type=nonneg_float, default=0.0, help="+- (uniform) or s.d.")
    w.add_argument("--shared-prefix", type=nonneg_int, default=0, help="shared prompt tokens")
    w.add_argument("--prefix-groups", type=positive_int, default=1, help="shared prefixes")
    w.add_argument("--seed", type=nonneg_int, default=0)
    c = parser.add_argument_group("cluster")
    c.add_argument("--replicas", type=positive_int, help="data-parallel replicas (default 1)")
    c.add_argument("--router", choices=ROUTERS, default="least-loaded")
    c.add_argument("--disagg", type=_pd, metavar="P:D", help="prefill:decode replicas")
    s = parser.add_argument_group("objectives, search and sweeps")
    s.add_argument("--slo-ttft", type=positive_float, help="TTFT objective (s)")
    s.add_argument("--slo-tpot", type=positive_float, help="TPOT objective (s)")
    s.add_argument("--slo-e2e", type=positive_float, help="end-to-end objective (s)")
    s.add_argument(
        "--max-rate", action="store_true", help="search the highest rate meeting the p99 SLOs"
    )
    s.add_argument("--sweep-rates", type=_floats, help="one run per rate, e.g. 1,2,4,8")
    s.add_argument("--sweep-concurrency", type=_ints, help="one run per concurrency")
    s.add_argument(
        "--systems", help="sweep these systems too (comma-separated), each with its default plan"
    )
    o = parser.add_argument_group("outputs")
    o.add_argument("--plot", help="PNG: latency against throughput per chip (with a sweep)")
    o.add_argument("--perfetto", help="Perfetto/Chrome trace JSON of steps and requests")
    o.add_argument(
        "--perfetto-max", type=positive_int, default=5000, help="requests/steps in the trace"
    )
    o.add_argument("--requests-out", help="per-request records, .csv or .jsonl")


# --- building the run from flags ------------------------------------------------------------


def _speculative(args: argparse.Namespace, m: ModelArgs) -> Speculative | None:
    """``--draft-model`` and its flags, read as ``trnsim infer`` reads them."""
    return speculative_from_args(args, m)


def _engine(args: argparse.Namespace, sysm: SystemSpec, policy: str | None = None) -> EngineConfig:
    return EngineConfig(
        policy=policy or args.policy or default_policy(sysm.chip),
        neuron_form=args.neuron_form,
        max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens,
        max_model_len=args.max_model_len,
        block_size=args.block_size,
        prefix_caching=args.prefix_caching,
        gpu_memory_utilization=args.gpu_memory_utilization or 0.9,
        kv_cap_fraction=args.kv_cap_fraction or 0.30,
        num_gpu_blocks=args.num_gpu_blocks,
        prefill_buckets=args.prefill_buckets,
        batch_buckets=args.batch_buckets,
        context_buckets=args.context_buckets,
        chunked_prefill=True if args.chunked_prefill else None,
        prefill_chunk_size=args.prefill_chunk_size,
        long_prefill_token_threshold=args.long_prefill_token_threshold,
        sampling=args.sampling,
        async_scheduling=args.async_scheduling,
        kv_cache_dtype=args.kv_cache_dtype,
        capacity_policy=args.capacity_policy,
        kv_free_fraction=args.kv_free_fraction,
    )


def _deployment(
    args: argparse.Namespace, m: ModelArgs, sysm: SystemSpec, spec: Speculative | None, own: bool
) -> Deployment:
    """The deployment on ``sysm``; ``own``: the system the user named (plan flags apply)."""
    rpc = args.ranks_per_chip if own else 1
    if own and (args.tp is not None or args.ep is not None):
        plan = ParallelPlan(
            tp=args.tp or 1,
            pp=args.pp or 1,
            ep=args.ep or 1,
            zero=0,
            recompute="none",
            ranks_per_chip=rpc,
            moe_imbalance=args.moe_imbalance,
        )
    else:
        try:
            plan = default_plan(m, sysm, args.precision, rpc, pp=(args.pp or 1) if own else 1)
        except ConfigError as exc:
            raise UsageError(f"{sysm.name}: {exc}") from None
        plan = plan.replace(moe_imbalance=args.moe_imbalance)
    replicas = args.replicas or (sum(args.disagg) if args.disagg else 1)
    if own and args.chips is not None:  # --chips: as many replicas as fill them
        per = plan.tp * plan.pp / rpc
        if args.replicas is not None or args.chips % per:
            raise UsageError(
                f"--chips {args.chips}: give it alone, a multiple of the {per:g} chip(s) of one "
                f"replica (TP{plan.tp} x PP{plan.pp} at {rpc} rank(s) per chip), or --replicas"
            )
        replicas = int(args.chips // per)
    if args.disagg and sum(args.disagg) != replicas:
        raise UsageError(
            f"--disagg {args.disagg[0]}:{args.disagg[1]} needs {sum(args.disagg)} replicas, "
            f"--replicas is {replicas}"
        )
    try:
        return Deployment(
            m,
            sysm,
            plan,
            precision=args.precision,
            stack=args.stack if own else None,
            compute_model=compute_model(args.compute, sysm.chip, rpc),
            speculative=spec,
            replicas=replicas,
            cost_inputs=cost_inputs(args, sysm.chip),
        )
    except ConfigError as exc:
        raise UsageError(f"deployment: {exc}") from None


def _lengths(args: argparse.Namespace) -> Synthetic:
    try:
        return Synthetic(
            Lengths(args.input_tokens, args.input_spread, args.input_dist),
            Lengths(args.output_tokens, args.output_spread, args.output_dist),
            shared_prefix=args.shared_prefix,
            prefix_groups=args.prefix_groups,
            seed=args.seed,
        )
    except ConfigError as exc:
        raise UsageError(f"workload: {exc}") from None


def _workload(args: argparse.Namespace, lengths: Synthetic) -> Any:
    given = [f for f in ("rate", "concurrency", "trace") if getattr(args, f) is not None]
    if len(given) > 1:
        raise UsageError(
            f"--{given[0]} and --{given[1]}: give one workload (rate, concurrency or trace)"
        )
    if args.trace is not None:
        try:
            return Trace(args.trace, args.trace_speedup, args.requests)
        except ConfigError as exc:
            raise UsageError(str(exc)) from None
    n = args.requests or DEFAULT_REQUESTS
    if args.concurrency is not None:
        return ClosedLoop(args.concurrency, n, lengths)
    return OpenLoop(args.rate or DEFAULT_RATE, n, args.arrival, args.burstiness, lengths)


def _slo(args: argparse.Namespace) -> SLO:
    return SLO(args.slo_ttft, args.slo_tpot, args.slo_e2e)


def _check(args: argparse.Namespace) -> None:
    sweeping = args.sweep_rates or args.sweep_concurrency
    if args.sweep_rates and args.sweep_concurrency:
        raise UsageError("--sweep-rates and --sweep-concurrency: give one")
    if args.max_rate and sweeping:
        raise UsageError("--max-rate and a sweep: run them separately")
    if args.max_rate and not _slo(args).any:
        raise UsageError("--max-rate needs an objective: --slo-ttft, --slo-tpot or --slo-e2e")
    if (args.max_rate or sweeping) and (args.trace or args.concurrency or args.rate):
        if args.max_rate and (args.trace or args.concurrency):
            raise UsageError("--max-rate searches Poisson rates; drop --trace/--concurrency")
        if sweeping and (args.trace or args.concurrency or args.rate):
            raise UsageError("a sweep sets the load itself; drop --rate/--concurrency/--trace")
    if args.systems and not sweeping:
        raise UsageError(
            "--systems compares systems over a sweep: add --sweep-rates or --sweep-concurrency"
        )
    if args.plot and not sweeping:
        raise UsageError("--plot draws a sweep: add --sweep-rates or --sweep-concurrency")
    if args.perfetto and (sweeping or args.max_rate):
        raise UsageError("--perfetto traces one run, not a sweep or a search")
    if args.requests_out and (sweeping or args.max_rate):
        raise UsageError("--requests-out records one run, not a sweep or a search")
    if args.requests_out and not args.requests_out.endswith((".csv", ".jsonl")):
        raise UsageError(f"--requests-out {args.requests_out!r}: name a .csv or .jsonl file")
    for flag in ("plot", "perfetto", "requests_out"):
        path = getattr(args, flag)
        if path:
            output_path(path, "--" + flag.replace("_", "-"))


# --- the verb -------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    _check(args)
    m = model_from_args(args)
    check_moe_imbalance(args, m)
    sysm = resolve_system(args.system)
    check_ranks_per_chip(args, sysm.chip)
    check_stack(args, sysm.chip, "serve")
    spec = _speculative(args, m)
    lengths = _lengths(args)
    try:
        engine = _engine(args, sysm)
        dep = _deployment(args, m, sysm, spec, True)
        slo = _slo(args)
    except (ConfigError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    if args.sweep_rates or args.sweep_concurrency:
        return _run_sweep(args, m, sysm, spec, lengths, engine, dep, slo)
    if args.max_rate:
        return _run_search(args, dep, lengths, engine, slo)
    wl = _workload(args, lengths)
    return _run_one(args, dep, wl, engine, slo)


def _simulate(args: argparse.Namespace, dep: Deployment, wl: Any, engine: EngineConfig, **kw: Any):
    try:
        return simulate(dep, wl, engine, router=args.router, disagg=args.disagg, **kw)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def _run_one(
    args: argparse.Namespace, dep: Deployment, wl: Any, engine: EngineConfig, slo: SLO
) -> int:
    trace = TraceLog(args.perfetto_max, args.perfetto_max) if args.perfetto else None
    n = getattr(wl, "requests", None)
    writer = _RecordWriter(args.requests_out) if args.requests_out else None
    show = not args.json and (n is None or n >= PROGRESS_MIN)
    try:
        with progress("serving", total=n) as bar:
            res = _simulate(
                args,
                dep,
                wl,
                engine,
                slo=slo,
                trace=trace,
                on_record=writer.add if writer else None,
                on_done=bar.advance if show else None,
            )
        if res.metrics.done == 0 and res.metrics.rejected:
            raise UsageError(
                f"every request was rejected ({res.metrics.rejected:,}): each prompt is at "
                f"least max_model_len {res.limits.max_model_len:,} tokens; shorten the "
                "prompts or raise --max-model-len (within the model's context)"
            )
        if writer is not None:
            writer.close()
    finally:
        if writer is not None:
            writer.discard()
    if args.perfetto:
        from trnsim.report.serving import write_serving_trace

        write_serving_trace(res, args.perfetto)
    if args.json:
        out = res.as_dict()
        if args.perfetto:
            out["perfetto"] = args.perfetto
        if args.requests_out:
            out["requests_out"] = args.requests_out
        dump(out)
    else:
        show_result(Console(), res)
        if args.perfetto:
            Console().print(f"[dim]Perfetto trace: {args.perfetto} (open in ui.perfetto.dev)[/dim]")
        if args.requests_out:
            Console().print(f"[dim]per-request records: {args.requests_out}[/dim]")
    return 0


def _run_search(
    args: argparse.Namespace, dep: Deployment, lengths: Synthetic, engine: EngineConfig, slo: SLO
) -> int:
    n = args.requests or DEFAULT_REQUESTS
    with progress("searching the rate", total=None) as bar:
        try:
            found = max_rate(
                dep,
                lengths,
                slo,
                engine,
                requests=n,
                arrival=args.arrival,
                burstiness=args.burstiness,
                router=args.router,
                disagg=args.disagg,
                advance=bar.advance,
            )
        except ConfigError as exc:
            raise UsageError(str(exc)) from None
    tried = [
        {"rate": r, "met": ok, "ttft_p99_s": a, "tpot_p99_s": b, "e2e_p99_s": c}
        for r, ok, a, b, c in found.tried
    ]
    if args.json:
        out: dict[str, Any] = {
            "deployment": dep.describe(),
            "slo": {"ttft_s": slo.ttft, "tpot_s": slo.tpot, "e2e_s": slo.e2e},
            "max_rate": found.rate,
            "reason": found.reason or None,
            "tried": tried,
        }
        if found.result is not None:
            out["at_max_rate"] = found.result.as_dict()
        dump(out)
    else:
        console = Console()
        if found.rate is None:
            console.print(f"[bold red]{found.reason}[/bold red]")
            console.print(f"[dim]{dep.describe()}; SLO {slo.describe()} (p99)[/dim]")
            return 1
        res = found.result
        console.print(
            f"[bold]highest rate meeting p99 {slo.describe()}: {found.rate:.4g} requests/s[/bold]"
            f" ({res.output_tokens_per_s:.4g} output tokens/s, "
            f"{res.output_tokens_per_s / res.chips:.4g} per chip, USD "
            f"{pretty(res.usd_per_million_tokens())} per million output tokens)"
        )
        show_result(console, res)
    return 0 if found.rate is not None else 1


def _run_sweep(args, m, sysm, spec, lengths, engine, dep, slo) -> int:
    rates = args.sweep_rates or ()
    concs = args.sweep_concurrency or ()
    n = args.requests or DEFAULT_REQUESTS
    systems = [(sysm, dep, engine)]
    for name in (args.systems or "").split(","):
        name = name.strip()
        if not name:
            continue
        other = resolve_system(name)
        try:
            systems.append(
                (other, _deployment(args, m, other, spec, False), _engine(args, other, args.policy))
            )
        except (ConfigError, ValueError) as exc:
            raise UsageError(f"--systems {name}: {exc}") from None
    curves = []
    with progress("sweeping", total=len(systems) * len(rates or concs)) as bar:
        for s, d, e in systems:
            try:
                pts = sweep(
                    d,
                    lengths,
                    e,
                    rates=rates,
                    concurrencies=concs,
                    requests=n,
                    arrival=args.arrival,
                    burstiness=args.burstiness,
                    router=args.router,
                    disagg=args.disagg if s is sysm else None,
                    slo=slo,
                    advance=bar.advance,
                )
            except ConfigError as exc:
                raise UsageError(f"{s.name}: {exc}") from None
            curves.append((s, d, pts))
    if args.plot:
        from trnsim.report.serving import latency_throughput_chart

        latency_throughput_chart(curves, args.plot, "rate" if rates else "concurrency", lengths)
    if args.json:
        dump(
            {
                "load": "rate" if rates else "concurrency",
                "workload": lengths.describe(),
                "curves": [
                    {
                        "system": s.name,
                        "deployment": d.describe(),
                        "points": [{"load": x, **r.summary()} for x, r in pts],
                    }
                    for s, d, pts in curves
                ],
                "png": args.plot,
            }
        )
        return 0
    console = Console()
    table = Table(title=f"load sweep: {lengths.describe()}", title_justify="left")
    for col in (
        "system",
        "rate/s" if rates else "users",
        "tok/s/chip",
        "TTFT p50",
        "TTFT p99",
        "TPOT p50",
        "TPOT p99",
    ):
        table.add_column(col)
    for s, _d, pts in curves:
        for x, r in pts:
            mm = r.metrics
            table.add_row(
                s.name,
                f"{x:g}",
                pretty(r.output_tokens_per_s / r.chips),
                pretty(mm.ttft.quantile(0.5), "s"),
                pretty(mm.ttft.quantile(0.99), "s"),
                pretty(mm.tpot.quantile(0.5), "s"),
                pretty(mm.tpot.quantile(0.99), "s"),
            )
    console.print(fit(table))
    for s, d, _ in curves:
        console.print(f"[dim]- {s.name}: {d.describe()}[/dim]")
    if args.plot:
        console.print(f"[dim]chart: {args.plot}[/dim]")
    return 0


class _RecordWriter:
    """Per-request records streamed to a temporary file, renamed over the target at the end."""

    def __init__(self, path: str) -> None:
        import os
        import tempfile

        self.path = output_path(path, "--requests-out")
        fd, self.tmp = tempfile.mkstemp(
            prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent
        )
        self.f = os.fdopen(fd, "w", newline="")
        self.jsonl = path.endswith(".jsonl")
        self.w = None if self.jsonl else csv.writer(self.f)
        if self.w is not None:
            self.w.writerow(RECORD_FIELDS)
        self.closed = False

    def add(self, rec: tuple) -> None:
        if self.jsonl:
            self.f.write(json.dumps(dict(zip(RECORD_FIELDS, rec, strict=True))) + "\n")
        else:
            self.w.writerow(["" if v is None else v for v in rec])

    def close(self) -> None:
        self.f.close()
        tmp = self.tmp

        def move(target: str) -> None:
            import os

            os.replace(tmp, target)

        atomic_write(self.path, move)
        self.closed = True

    def discard(self) -> None:
        import os

        if not self.f.closed:
            self.f.close()
        if os.path.exists(self.tmp):
            os.unlink(self.tmp)


# --- human output ---------------------------------------------------------------------------


def _kv(console: Console, title: str, rows: list[tuple[str, str]]) -> None:
    """Label/value rows; values are sentences, so they wrap as words (not as figures)."""
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column("quantity", style="bold", no_wrap=True)
    table.add_column("value", ratio=1)
    for k, v in rows:
        table.add_row(k, v)
    console.print(table)


def show_result(console: Console, res: Any) -> None:
    s = res.summary()
    lim = res.limits
    m = res.metrics
    thr = s["throughput"]
    kvu = s["kv_utilization"]
    rows = [
        ("deployment", res.deployment.describe()),
        (
            "engine",
            f"{lim.policy}"
            + (f" ({lim.form})" if lim.policy == "neuron" else "")
            + f", max_num_seqs {lim.max_num_seqs}, max_num_batched_tokens "
            f"{lim.max_num_batched_tokens}, max_model_len {lim.max_model_len}",
        ),
        ("workload", res.workload),
        (
            "requests completed",
            f"{m.done:,}"
            + (f" ({m.rejected} rejected: prompt >= max_model_len)" if m.rejected else ""),
        ),
        (
            "throughput",
            f"{thr['requests_per_s']:.4g} req/s, {pretty(thr['output_tokens_per_s'])} output "
            f"tok/s ({pretty(thr['output_tokens_per_s_per_chip'])} per chip)",
        ),
        (
            "KV cache",
            f"{lim.num_blocks - 1:,} blocks of {lim.block_size} tokens; mean use "
            f"{kvu['mean']:.1%}, peak {kvu['peak']:.1%}",
        ),
        ("padding waste", f"{s['padding_waste']:.1%} of computed tokens"),
        ("preemptions", f"{s['preemptions']:,}"),
        ("prefix cache hits", f"{s['prefix_hit_rate']:.1%} of prompt tokens"),
        ("USD per million output tokens", pretty(s["usd_per_million_output_tokens"])),
    ]
    if res.slo.any:
        g = s["goodput"]
        rows.append(
            (
                "goodput",
                f"{g['fraction']:.1%} of requests meet {res.slo.describe()} "
                f"({g['requests_per_s']:.4g} req/s)",
            )
        )
    if res.disagg:
        t = s["kv_transfers"]
        rows.append(("KV transfers", f"{t['count']:,}, mean {pretty(t['mean_s'], 's')}"))
    dep = res.deployment
    title = f"{dep.model.name} serving on {plural(res.chips, 'chip')} of {dep.system.name}"
    _kv(console, title, rows)
    table = Table(title="latency", title_justify="left")
    for col in ("", "mean", "p50", "p90", "p95", "p99", "max"):
        table.add_column(col)
    for name, key in (
        ("TTFT", "ttft_s"),
        ("TPOT", "tpot_s"),
        ("ITL", "itl_s"),
        ("E2E", "e2e_s"),
        ("queueing", "queue_s"),
    ):
        q = s[key]
        table.add_row(
            name, *(pretty(q[k], "s") for k in ("mean", "p50", "p90", "p95", "p99", "max"))
        )
    console.print(fit(table))
    for a in res.assumptions:
        console.print(f"[dim]- {a}[/dim]")
