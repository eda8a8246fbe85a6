"""`podsim serve --generation GEN --slice SHAPE --model PRESET [--rate 10/s | --arrivals ...]
[--prompt SPEC --output SPEC] [--batch continuous|static ...] [--replicas N | --disaggregated P:D]
[--slo-ttft 2s --slo-tpot 100ms] [--capacity-rate 20/s ...] [--json]`: simulate a serving fleet
(TTFT, TPOT, throughput, cost per million tokens) and, with --capacity-rate, find the fewest chips
that serve that rate within p99 TTFT and TPOT of the SLO. The flags build the serving workload a
scenario's `workload.serving` holds; the result is the RunResult `podsim run` gives for it."""

from __future__ import annotations

import typer
from pydantic import ValidationError

from podsim import quantities as q
from podsim.cli import app
from podsim.cli.common import (
    comma_counts,
    comma_list,
    console,
    emit_json,
    progress_reporter,
    refuse_options,
    table,
)
from podsim.errors import PodsimError, first_error
from podsim.trace.configs import parse_assignments, parse_overrides
from podsim.units import format_seconds

LENGTH_HELP = "fixed:N, uniform:low=A,high=B, lognormal:mean=M,cv=C[,low=A,high=B], or trace (needs --trace)"


def parse_lengths(text: str, flag: str) -> dict:
    """'fixed:1024' / 'lognormal:mean=800,cv=1.5' / 'uniform:low=10,high=900' / 'trace' -> Lengths fields."""
    kind, _, rest = text.partition(":")
    kind = kind.strip()
    if kind == "trace":
        return {"kind": "trace"}
    if kind == "fixed":
        return {"kind": "fixed", "mean": rest.strip()} if rest.strip() else _bad(flag, text)
    if kind in ("uniform", "lognormal"):
        return {"kind": kind, **parse_assignments(rest.split(",") if rest else [], flag, "lognormal:mean=800,cv=1")}
    return _bad(flag, text)


def _bad(flag: str, text: str):
    raise PodsimError(f"{flag} {text!r} is not understood; use {LENGTH_HELP}")


def parse_pools(text: str) -> dict:
    """'2:6' -> {prefill: 2, decode: 6}."""
    a, sep, b = text.partition(":")
    try:
        return {"prefill": int(a), "decode": int(b)} if sep else _pools(text)
    except ValueError:
        return _pools(text)


def _pools(text: str):
    raise PodsimError(f"--disaggregated {text!r}: give PREFILL:DECODE replicas, e.g. 1:3")


def parse_range(text: str) -> tuple[int, int]:
    a, sep, b = text.partition(":")
    try:
        return (int(a), int(b)) if sep else (1, int(a))
    except ValueError:
        raise PodsimError(f"--capacity-replicas {text!r}: give LOW:HIGH replicas, e.g. 1:32 (or HIGH)") from None


def _rows(result) -> list[tuple[str, str]]:
    from podsim.report.render import key_rows

    return [(name, cells[0]) for name, cells in key_rows([result])]


@app.command("serve")
def serve_cmd(
    ctx: typer.Context,
    generation: str = typer.Option(..., "--generation", "-g", help="generation id, e.g. tpu-v5e, tpu-v6e"),
    slice_: str = typer.Option(..., "--slice", help="slice shape of one replica, e.g. 2x4"),
    model: str = typer.Option(..., "--model", help="transformer preset (podsim trace models), e.g. llama2-70b"),
    override: list[str] = typer.Option(None, "--override", help="model field KEY=VALUE (repeatable), e.g. n_layers=40"),
    tensor: int = typer.Option(None, "--tensor", help="tensor-parallel chips (default: the slice's chips / expert)", callback=q.TENSOR_CHIPS.option("--tensor")),
    expert: int = typer.Option(1, "--expert", help="expert-parallel groups (mixture-of-experts models)", callback=q.EXPERT_GROUPS.option("--expert")),
    weights: str = typer.Option("bf16", "--weights", help="weights as stored: bf16, int8 or fp8"),
    kv_cache: str = typer.Option("bf16", "--kv-cache", help="KV cache as stored: bf16, int8 or fp8"),
    matmul: str = typer.Option("bf16", "--matmul", help="MXU rate of the weight matmuls: bf16 (weight-only quantisation), int8 or fp8"),
    engine: str = typer.Option("auto", "--engine", help="serving engine whose host time and kernels are modelled: auto, ideal, "
                               "tensorrt-llm, tensorrt-llm-0.6, vllm, jetstream, saxml (podsim.serving.engines)"),
    parallel_block: bool = typer.Option(None, "--parallel-block/--sequential-block", help="attention and MLP on one norm, one all-reduce (GPT-J, PaLM), or one after the other (default: the model's own: gptj-6b and palm-540b are parallel)"),
    rate: str = typer.Option(None, "--rate", help="Poisson (or --arrivals bursty) request rate, e.g. 10/s, 600/min"),
    arrivals: str = typer.Option("poisson", "--arrivals", help="poisson, bursty (Gamma gaps, --cv), trace (--trace's times) or offline"),
    cv: float = typer.Option(2.0, "--cv", help="bursty: coefficient of variation of the gaps", callback=q.BURST_CV.option("--cv")),
    trace: str = typer.Option(None, "--trace", help="request trace CSV (TIMESTAMP, ContextTokens, GeneratedTokens), or azure-conv / azure-code"),
    time_scale: float = typer.Option(1.0, "--time-scale", help="trace arrivals: divide the gaps by this", callback=q.ARRIVAL_SCALE.option("--time-scale")),
    requests: int = typer.Option(None, "--requests", help="at most this many requests (offline: how many)", callback=q.SERVE_REQUESTS.option("--requests")),
    prompt: str = typer.Option("fixed:1024", "--prompt", help=f"prompt lengths: {LENGTH_HELP}"),
    output: str = typer.Option("fixed:256", "--output", help=f"output lengths: {LENGTH_HELP}"),
    beams: int = typer.Option(1, "--beams", help="beams per request (needs --kv reserve above 1)", callback=q.BEAMS.option("--beams")),
    batch: str = typer.Option("continuous", "--batch", help="continuous (iteration-level) or static (request-level batches)"),
    token_budget: int = typer.Option(2048, "--token-budget", help="continuous: tokens per step", callback=q.TOKEN_BUDGET.option("--token-budget")),
    max_seqs: int = typer.Option(256, "--max-seqs", help="continuous: sequences per step", callback=q.STEP_SEQS.option("--max-seqs")),
    prefill: str = typer.Option("chunked", "--prefill", help="continuous: chunked prompts, or separate prefill-only steps"),
    prefill_seqs: int = typer.Option(None, "--prefill-seqs", help="continuous: prompts in prefill at once at most (JetStream: 1)", callback=q.STEP_SEQS.option("--prefill-seqs")),
    kv: str = typer.Option("paged", "--kv", help="paged (preempt and recompute when full) or reserve (prompt + output at admission)"),
    page_tokens: int = typer.Option(16, "--page-tokens", help="tokens per KV-cache page", callback=q.PAGE_TOKENS.option("--page-tokens")),
    max_batch: int = typer.Option(32, "--max-batch", help="static: requests per batch", callback=q.STATIC_BATCH.option("--max-batch")),
    max_wait: str = typer.Option("0s", "--max-wait", help="static: how long a batch waits to fill"),
    buckets: str = typer.Option("", "--buckets", help="prompt lengths a static batch or a continuous step's prompt chunk pads to, e.g. 512,1024,2048"),
    batch_sizes: str = typer.Option("", "--batch-sizes", help="batch sizes the server runs (a static batch or a continuous step's decoding sequences pads to the smallest that holds it), e.g. 32"),
    batcher: str = typer.Option("idle", "--batcher", help="static: idle (form a batch when the slice is idle) or saxml (Saxml's pipelined batcher)"),
    max_live_batches: int = typer.Option(4, "--max-live-batches", help="static, saxml: requests alive at most --max-batch x this", callback=q.LIVE_BATCHES.option("--max-live-batches")),
    batcher_depth: int = typer.Option(None, "--batcher-depth", help="static, saxml: batches live past the batcher (default: Saxml's rule)", callback=q.BATCHER_DEPTH.option("--batcher-depth")),
    decode_segments: str = typer.Option("", "--decode-segments", help="static, saxml: praxis's MAX_DECODE_STEPS, e.g. 32,64,128 (beams' KV buffers sized to the current segment)"),
    clients: int = typer.Option(None, "--clients", help="at most this many requests outstanding (a load generator's client threads)", callback=q.CLIENTS.option("--clients")),
    replicas: int = typer.Option(1, "--replicas", help="replicas, each on its own slice", callback=q.SERVE_REPLICAS.option("--replicas")),
    disaggregated: str = typer.Option(None, "--disaggregated", help="PREFILL:DECODE replicas on separate slices, e.g. 1:3"),
    transfer: str = typer.Option("dcn", "--transfer", help="disaggregated: KV moves over the dcn, or ici (halves of one torus)"),
    router: str = typer.Option("least_loaded", "--router", help="least_loaded or round_robin"),
    slo_ttft: str = typer.Option("2s", "--slo-ttft", help="time-to-first-token target (and the capacity search's p99 target)"),
    slo_tpot: str = typer.Option("100ms", "--slo-tpot", help="time-per-output-token target (and the capacity search's p99 target)"),
    duration: str = typer.Option("10min", "--duration", help="arrivals for this long"),
    drain: str = typer.Option(None, "--drain", help="time after the arrivals end for requests in flight (default: the duration)"),
    warmup: str = typer.Option("0s", "--warmup", help="requests arriving before this are not counted"),
    hbm_reserve: float = typer.Option(0.0, "--hbm-reserve", help="share of HBM the runtime keeps", callback=q.HBM_RESERVE.option("--hbm-reserve")),
    capacity_rate: str = typer.Option(None, "--capacity-rate", help="also find the fewest chips serving this rate within the SLO at p99"),
    capacity_replicas: str = typer.Option("1:64", "--capacity-replicas", help="LOW:HIGH replicas the capacity search tries"),
    capacity_slices: str = typer.Option("", "--capacity-slices", help="candidate slice shapes, e.g. 2x4,4x4 (default: --slice)"),
    capacity_replicates: int = typer.Option(3, "--capacity-replicates", help="runs per probed size", callback=q.CAPACITY_REPLICATES.option("--capacity-replicates")),
    judge: str = typer.Option("mean", "--judge", help="capacity: judge a size on the mean, or the 95% interval's upper end"),
    replicates: int = typer.Option(1, "--replicates", help="repeat the run with independent seeds (means, 95% intervals)", callback=q.REPLICATES.option("--replicates")),
    seed: int = typer.Option(0, "--seed", help="seed of the request stream, 0 .. 2^63-1", callback=q.SEED.option("--seed")),
    as_json: bool = typer.Option(False, "--json", help="one JSON object on stdout, the schema of `podsim run --json` with the capacity table"),
) -> None:
    """Simulate a serving fleet (TTFT, TPOT, throughput, cost per million tokens) and find the fewest chips for a rate."""
    from podsim.scenario.serving import serving_run_result
    from podsim.serving.spec import ServingWorkload

    _refuse_inapplicable(ctx, batch, batcher, arrivals, disaggregated, capacity_rate, replicas)
    arr = {"kind": arrivals, **({"cv": cv} if arrivals == "bursty" else {}), **({"time_scale": time_scale} if arrivals == "trace" else {})}
    padding = {"buckets": comma_counts(buckets, "--buckets", "512,1024,2048", q.SEQ_LEN),
               "batch_sizes": comma_counts(batch_sizes, "--batch-sizes", "8,16,32")}
    static = {"max_batch": max_batch, "max_wait": max_wait, **padding, "batcher": batcher,
              "max_live_batches": max_live_batches, "batcher_depth": batcher_depth,
              "decode_segments": comma_counts(decode_segments, "--decode-segments", "32,64,128", q.SEQ_LEN)}
    continuous = {"token_budget": token_budget, "max_seqs": max_seqs, "prefill": prefill, "prefill_seqs": prefill_seqs, **padding}
    if rate is not None:
        arr["rate"] = rate
    body = {
        "slice": slice_, "engine": engine, "replicas": replicas, "router": router, "duration": duration, "warmup": warmup, "hbm_reserve": hbm_reserve,
        "model": {"model": model, "overrides": parse_overrides(override), "tensor": tensor, "expert": expert,
                  "parallel_block": parallel_block, "precision": {"weights": weights, "kv_cache": kv_cache, "matmul": matmul}},
        "batch": {"kind": batch, "kv": kv, "page_tokens": page_tokens,
                  **(static if batch == "static" else continuous if batch == "continuous" else {})},
        "requests": {"arrivals": arr, "prompt": parse_lengths(prompt, "--prompt"), "output": parse_lengths(output, "--output"),
                     "trace": trace, "beams": beams, "requests": requests, "clients": clients},
        "slo": {"ttft": slo_ttft, "tpot": slo_tpot},
    }
    if drain is not None:
        body["drain"] = drain
    if disaggregated:
        body["disaggregated"] = {**parse_pools(disaggregated), "transfer": transfer}
    if capacity_rate:
        body["capacity"] = {"rate": capacity_rate, "ttft_p99": slo_ttft, "tpot_p99": slo_tpot, "replicas": parse_range(capacity_replicas),
                            "slices": comma_list(capacity_slices, "--capacity-slices", "2x4,4x4"),
                            "replicates": capacity_replicates, "judge": judge}
    try:
        workload = ServingWorkload.model_validate(body)
    except ValidationError as exc:
        where, msg = first_error(exc, "serving")
        raise PodsimError(f"{_flag(where)}: {msg}") from None
    with progress_reporter("serving") as update:
        def progress(done: float, total: float) -> None:
            update(done, total, f"{format_seconds(done)} simulated")

        result = serving_run_result(workload, generation, seed, replicates, name=f"serve {model} on {generation} {slice_}",
                                    on_progress=progress)
    if as_json:
        emit_json({**result.summary(tables=("serving_capacity",)), "scenario": result.scenario})
        return
    table(f"{result.name}: {format_seconds(workload.duration)} of traffic", _rows(result))
    for note in result.topology.get("notes", []):
        console.print(f"[dim]{note}[/dim]")


def _refuse_inapplicable(ctx, batch: str, batcher: str, arrivals: str, disaggregated: str | None, capacity_rate: str | None,
                         replicas: int) -> None:
    """Options of another mode than the one given are refused (they would be ignored)."""
    if batch == "continuous":
        refuse_options(ctx, ("max_batch", "max_wait", "batcher", "max_live_batches", "batcher_depth",
                             "decode_segments"), "with --batch continuous (they shape static batches)")
    elif batch == "static":
        refuse_options(ctx, ("token_budget", "max_seqs", "prefill", "prefill_seqs"), "with --batch static (they shape continuous steps)")
        if batcher != "saxml":
            refuse_options(ctx, ("max_live_batches", "batcher_depth", "decode_segments"),
                           f"with --batcher {batcher} (they shape Saxml's batches)")
    if arrivals != "bursty":
        refuse_options(ctx, ("cv",), f"with --arrivals {arrivals} (it shapes bursty gaps)")
    if arrivals != "trace":
        refuse_options(ctx, ("time_scale",), f"with --arrivals {arrivals} (it scales a trace's gaps)")
    if not disaggregated:
        refuse_options(ctx, ("transfer",), "without --disaggregated (it moves KV from prefill to decode replicas)")
    if not capacity_rate:
        refuse_options(ctx, ("capacity_replicas", "capacity_slices", "capacity_replicates", "judge"),
                       "without --capacity-rate (they set the capacity search)")
    if replicas == 1 and not disaggregated and not capacity_rate:
        refuse_options(ctx, ("router",), "with one replica (it spreads requests over replicas)")


FLAGS = {"model.precision": "--weights/--kv-cache/--matmul", "requests.arrivals": "--rate/--arrivals/--cv/--time-scale",
         "requests.prompt": "--prompt", "requests.output": "--output", "slice": "--slice", "replicas": "--replicas", "duration": "--duration", "warmup": "--warmup", "model": "--model",
         "batch": "--batch", "requests": "--rate/--arrivals/--prompt/--output", "slo": "--slo-ttft/--slo-tpot",
         "capacity": "--capacity-*", "disaggregated": "--disaggregated",
         **{f"batch.{f}": "--" + f.replace("_", "-") for f in ("token_budget", "max_seqs", "prefill", "prefill_seqs", "kv", "page_tokens", "max_batch",
                                                             "max_wait", "buckets", "batch_sizes", "batcher", "max_live_batches",
                                                             "batcher_depth", "decode_segments")},
         "disaggregated.transfer": "--transfer", "requests.arrivals.cv": "--cv", "requests.arrivals.time_scale": "--time-scale"}


def _flag(where: str) -> str:
    """A pydantic location (requests.arrivals.rate) as the flag that set it (the longest known prefix)."""
    parts = where.split(".")
    for k in range(len(parts), 0, -1):
        if ".".join(parts[:k]) in FLAGS:
            return f"{FLAGS['.'.join(parts[:k])]} ({where})"
    return where

