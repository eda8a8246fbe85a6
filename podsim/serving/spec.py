"""The configuration of a serving run, as pydantic models a scenario embeds: the model and how
it is sharded, the batch policy, the request stream, the fleet (replicas of one slice, or
prefill and decode pools), the latency targets. `ServingConfig` is the one configuration of a
serving simulation: `podsim serve` flags, a scenario's `workload.serving` and the dashboard
build it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from podsim import quantities as q
from podsim.errors import PodsimError, first_error
from podsim.quantities import MAX_HORIZON_S, Duration, Fraction, Rate, Seed
from podsim.serving.costs import InferencePrecision, InferenceShard
from podsim.serving.engines import ENGINE_NAMES
from podsim.topology import parse_shape
from podsim.trace.configs import PRESETS, TransformerConfig, get_model


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class ServedModel(_Model):
    """The model and how one replica shards it over its slice."""

    model: str | None = Field(None, description="transformer preset (podsim trace models), e.g. llama2-70b")
    overrides: dict[str, Any] = Field(default_factory=dict, description="preset fields, e.g. {n_layers: 40}")
    dims: dict[str, Any] | None = Field(None, description="a model by its dimensions instead of a preset: the "
                                        "fields of a transformer config (name, n_layers, d_model, n_heads, ...)")
    tensor: q.TENSOR_CHIPS.type | None = Field(None, description="tensor-parallel chips; default: the slice's chips / expert")
    expert: q.EXPERT_GROUPS.type = Field(1, description="expert-parallel groups (mixture-of-experts models)")
    precision: InferencePrecision = Field(default_factory=InferencePrecision)
    parallel_block: bool | None = Field(None, description="attention and MLP read one normalised input and one "
                                        "all-reduce sums both (GPT-J, PaLM); none: the model's own (its preset's)")
    capacity_factor: float = Field(1.0, ge=1.0, le=64.0, description="MoE dispatch buffer per expert / its share")
    kv_states: Literal[2, 3] = Field(2, description="tensors cached per token and layer: 2 (K, V); 3 where the keys are "
                                                    "kept before and after the rotary embedding too (praxis before "
                                                    "google/praxis@be97eb5, 2024-02-13)")

    @model_validator(mode="after")
    def _one_model(self) -> ServedModel:
        if (self.model is None) == (self.dims is None):
            raise PodsimError("serving model: give model (a preset) or dims (a model by its dimensions), one of the two")
        if self.dims is not None and self.overrides:
            raise PodsimError("serving model: overrides change a preset; with dims give every field in dims")
        self.config()  # a bad preset, override or dimension is refused here, with its field
        return self

    def parallel(self) -> bool:
        """Whether the layers run as parallel blocks: as given, else as the model is (GPT-J's and
        PaLM's presets are; a model given by dims is not unless it says so)."""
        return self.config().parallel_block if self.parallel_block is None else self.parallel_block

    def shard(self, chips: int, kv_read_fraction: float = 1.0) -> InferenceShard:
        """The per-chip shard one replica of `chips` chips runs (tensor: as given, else the chips
        over the expert groups); `kv_read_fraction`: the engine's (podsim.serving.engines)."""
        tensor = self.tensor if self.tensor is not None else max(chips // self.expert, 1)
        return InferenceShard(self.config(), tensor, self.expert, self.precision, self.parallel(), self.capacity_factor,
                              self.kv_states, kv_read_fraction)

    def config(self) -> TransformerConfig:
        cfg = self._config()
        if not cfg.causal:  # an encoder reads its whole input at once: no token is generated
            decoders = ", ".join(k for k, v in PRESETS.items() if isinstance(v, TransformerConfig) and v.causal)
            raise PodsimError(f"serving model {cfg.name!r} is an encoder (bidirectional attention, causal: false): it "
                              f"generates no tokens, so it has no decode, TTFT or TPOT; serve a decoder: {decoders}")
        return cfg

    def _config(self) -> TransformerConfig:
        if self.dims is not None:
            body = {"source": "given by its dimensions", "seq_len": 4096, "global_batch": 1, "mlp": "swiglu",
                    "norm": "rmsnorm", "bias": False, "tied_embeddings": False, "learned_positions": False, **self.dims}
            body.setdefault("name", "custom")
            body.setdefault("n_kv_heads", body.get("n_heads", 1))
            try:
                return TransformerConfig.model_validate(body)
            except ValidationError as exc:
                where, msg = first_error(exc, "dims")
                raise PodsimError(f"serving model dims: {where}: {msg}") from None
        cfg = get_model(self.model, dict(self.overrides))
        if not isinstance(cfg, TransformerConfig):
            presets = ", ".join(k for k, v in PRESETS.items() if isinstance(v, TransformerConfig))
            raise PodsimError(f"serving model {self.model!r} is not a transformer; serve one of: {presets}")
        return cfg


class BatchPolicy(_Model):
    """How a replica batches requests into steps.

    `continuous`: iteration-level scheduling (Orca, vLLM): every step runs each running
    sequence's next token and fills the rest of `token_budget` with prompt tokens of waiting
    requests in arrival order, `chunked` (Sarathi: a prompt may be split over steps) or
    `separate` (a step prefills whole prompts only, before any decoding). `static`: request-level
    batches (FasterTransformer, Saxml): up to `max_batch` requests, formed when that many wait
    or the first has waited `max_wait`, prefilled together (prompts padded to the smallest of
    `buckets` that holds the longest, if given) and decoded until every one has finished; a
    batch runs at the smallest of `batch_sizes` that holds it (a server compiled for those
    shapes pads the rest: Saxml pads to its BATCH_SIZE list), or at its own size.
    Who forms static batches (`batcher`): `idle` forms one when the replica is idle, from the
    requests waiting, once `max_batch` wait or the first has waited `max_wait` since it arrived;
    `saxml` is Saxml's PerMethodBatcher (google/saxml, saxml/server/model_service_base.py and
    utils.py): up to two batches live past the batcher (one on the device, the next formed
    behind it; one when `max_live_batches` <= 2 since 2024; `batcher_depth` sets it), a new
    one started only when a live batch has returned, by taking the queue's first request and
    then collecting until `max_batch` or `max_wait` after that take; the device runs them
    first in, first out; at most `max_batch` x `max_live_batches` requests alive (queued, in
    batches, running), a request beyond that turned away (RESOURCE_EXHAUSTED) and retried by
    the Sax client with backoff.
    KV cache: `paged` allocates `page_tokens`-token pages as sequences grow and, when none is
    free, preempts the latest admitted sequence (its pages freed, recomputed later: vLLM's
    recompute); `reserve` admits a request only when pages for its prompt and whole output are
    free (never preempts).
    Continuous steps as an engine compiles them: `prefill_seqs` caps the prompts in prefill at once
    (JetStream prefills one request per call: ov.19); `buckets` pads each prompt chunk to the
    smallest that holds it (JetStream's prefill buckets, ov.20; a prompt past the largest is split into
    chunks of the largest over steps, as JetStream's chunked prefill does; a static batch's prompt
    past it is refused: the engines truncate it); `batch_sizes` pads a step's decoding sequences to the smallest
    that holds them (JetStream's generate step runs over every slot, ov.21; CUDA-graph batch
    sizes, ov.8). Padding costs compute; the KV cache holds the real tokens only."""

    kind: Literal["continuous", "static"] = "continuous"
    token_budget: q.TOKEN_BUDGET.type = Field(2048, description="continuous: tokens per step (decode + prefill); static: "
                                              "prompt tokens per prefill step at most (an engine that prefills in "
                                              "steps, e.g. TensorRT-LLM's max_num_tokens)")
    max_seqs: q.STEP_SEQS.type = Field(256, description="continuous: sequences in a step at most")
    prefill: Literal["chunked", "separate"] = Field("chunked", description="continuous: chunked prompts, or prefill-only steps")
    prefill_seqs: q.STEP_SEQS.type | None = Field(None, description="continuous: prompts in prefill at once at most "
                                                  "(JetStream: 1); none: as many as the budget holds")
    max_batch: q.STATIC_BATCH.type = Field(32, description="static: requests per batch")
    max_wait: Duration = Field(0.0, le=3600.0, description="static: how long the first request waits for the batch to fill")
    buckets: tuple[int, ...] = Field((), description="prompt lengths a static batch (its longest prompt) or a continuous "
                                                     "step's prompt chunk pads to, the smallest that holds it; none: unpadded")
    batch_sizes: tuple[int, ...] = Field((), description="batch sizes the server runs: a static batch, or a continuous "
                                                         "step's decoding sequences, pads to the smallest that holds it; "
                                                         "none: its own size")
    batcher: Literal["idle", "saxml"] = Field("idle", description="static: who forms batches: when the replica is idle, or "
                                                                  "Saxml's pipelined batcher (see the policy's docstring)")
    max_live_batches: q.LIVE_BATCHES.type = Field(4, description="static, saxml: requests alive at most max_batch x this "
                                                                "(Saxml's MAX_LIVE_BATCHES, default 4)")
    batcher_depth: q.BATCHER_DEPTH.type | None = Field(None, description="static, saxml: batches live past the batcher; none: "
                                      "Saxml's rule since 2024-04 (1 when max_live_batches <= 2, else 2; before: 2)")
    decode_segments: tuple[int, ...] = Field((), description="static, saxml: praxis's MAX_DECODE_STEPS, the decode "
                                             "loop's segments (each beam's KV buffer sized to the current one, plus 1); "
                                             "none: one segment of the longest output")
    kv: Literal["paged", "reserve"] = Field("paged", description="KV-cache admission: paged with preemption, or reserve")
    page_tokens: q.PAGE_TOKENS.type = Field(16, description="tokens per KV-cache page")

    @model_validator(mode="after")
    def _sane(self) -> BatchPolicy:
        if list(self.buckets) != sorted(set(self.buckets)) or any(b < 1 for b in self.buckets):
            raise PodsimError(f"batch policy buckets {list(self.buckets)} must be increasing positive token counts")
        if list(self.decode_segments) != sorted(set(self.decode_segments)) or any(b < 1 for b in self.decode_segments):
            raise PodsimError(f"batch policy decode_segments {list(self.decode_segments)} must be increasing positive "
                              "token counts")
        if list(self.batch_sizes) != sorted(set(self.batch_sizes)) or any(b < 1 for b in self.batch_sizes):
            raise PodsimError(f"batch policy batch_sizes {list(self.batch_sizes)} must be increasing positive counts")
        holds, name = (self.max_batch, "max_batch") if self.kind == "static" else (self.max_seqs, "max_seqs")
        if self.batch_sizes and self.batch_sizes[-1] < holds:
            raise PodsimError(f"batch policy batch_sizes {list(self.batch_sizes)}: the largest must hold {name} {holds}")
        if self.prefill_seqs is not None and self.prefill_seqs > self.max_seqs:
            raise PodsimError(f"batch policy prefill_seqs {self.prefill_seqs} is more than max_seqs {self.max_seqs}: a prompt "
                              f"in prefill holds one of the step's sequences; use at most {self.max_seqs}")
        if self.kind != "static" and (self.batcher != "idle" or self.batcher_depth is not None):
            raise PodsimError("batch policy batcher is for static batches: set kind static")
        _refuse_changed(self, ("max_batch", "max_wait", "max_live_batches", "decode_segments") if self.kind == "continuous" else
                        ("max_seqs", "prefill", "prefill_seqs"), f"batch kind {self.kind}")
        if self.kind == "static" and self.batcher != "saxml":
            _refuse_changed(self, ("max_live_batches", "batcher_depth", "decode_segments"), f"batcher {self.batcher}")
        return self


def _refuse_changed(model: BaseModel, names: tuple[str, ...], where: str) -> None:
    """A field of another mode set away from its default would be ignored: refused instead (a
    default-valued one, as a model dump carries, is harmless)."""
    fields = type(model).model_fields
    for name in names:
        if getattr(model, name) != fields[name].get_default(call_default_factory=True):
            raise PodsimError(f"{name} does not apply with {where}; leave it out (a field podsim would ignore is refused)")


class Lengths(_Model):
    """Token counts of prompts or outputs: `fixed` (mean), `uniform` [low, high], `lognormal`
    (mean and coefficient of variation `cv`, clipped to [low, high]), or `trace` (the request
    trace's column)."""

    kind: Literal["fixed", "uniform", "lognormal", "trace"] = "fixed"
    mean: float | None = Field(None, gt=0, le=1e7)
    cv: float = Field(1.0, gt=0, le=20.0)
    low: int = Field(1, ge=1, le=10_000_000)
    high: int = Field(1_000_000, ge=1, le=10_000_000)

    @model_validator(mode="after")
    def _given(self) -> Lengths:
        if self.kind in ("fixed", "lognormal") and self.mean is None:
            raise PodsimError(f"{self.kind} lengths need a mean (tokens)")
        if self.low > self.high:
            raise PodsimError(f"lengths low {self.low} > high {self.high}")
        return self


class Arrivals(_Model):
    """When requests arrive: `poisson` at `rate`; `bursty` (a Gamma renewal process at `rate`
    with inter-arrival coefficient of variation `cv` > 1, as serving studies model bursts);
    `trace` (the request trace's timestamps, compressed by `time_scale`); `offline` (every
    request at time 0: MLPerf's Offline scenario)."""

    kind: Literal["poisson", "bursty", "trace", "offline"] = "poisson"
    rate: Rate | None = Field(None, description="requests per hour; e.g. 10/s, 600/min")
    cv: q.BURST_CV.type = Field(2.0, description="bursty: coefficient of variation of the gaps")
    time_scale: q.ARRIVAL_SCALE.type = Field(1.0, description="trace: divide the trace's gaps by this (2: twice the rate)")

    @model_validator(mode="after")
    def _rate(self) -> Arrivals:
        if self.kind in ("poisson", "bursty") and self.rate is None:
            raise PodsimError(f"{self.kind} arrivals need a rate, e.g. 10/s")
        if self.kind in ("trace", "offline") and self.rate is not None:
            raise PodsimError(f"{self.kind} arrivals take no rate (the trace sets the times; offline sends all at once)")
        _refuse_changed(self, (*(("cv",) if self.kind != "bursty" else ()), *(("time_scale",) if self.kind != "trace" else ())),
                        f"{self.kind} arrivals")
        return self

    @property
    def rate_per_s(self) -> float | None:
        return None if self.rate is None else self.rate / 3600.0


class RequestStream(_Model):
    """The requests: arrivals, prompt and output lengths, beams per request, or a trace file
    (CSV with TIMESTAMP, ContextTokens, GeneratedTokens: Azure's LLM inference trace format)."""

    arrivals: Arrivals = Field(default_factory=lambda: Arrivals(kind="poisson", rate=3600.0))
    prompt: Lengths = Field(default_factory=lambda: Lengths(kind="fixed", mean=1024))
    output: Lengths = Field(default_factory=lambda: Lengths(kind="fixed", mean=256))
    trace: Path | str | None = Field(None, description="request trace CSV; 'azure-conv' / 'azure-code' for the shipped samples")
    beams: q.BEAMS.type = Field(1, description="beams per request (beam search): the prompt's KV shared by all")
    requests: q.SERVE_REQUESTS.type | None = Field(None, description="at most this many requests")
    clients: q.CLIENTS.type | None = Field(None, description="at most this many requests outstanding (a load "
                                "generator's client threads, as an MLPerf harness has); a request waits for a free "
                                "client, its latency counted from its arrival; none: no limit")

    @model_validator(mode="after")
    def _trace(self) -> RequestStream:
        uses = [n for n, v in (("arrivals", self.arrivals.kind), ("prompt", self.prompt.kind), ("output", self.output.kind)) if v == "trace"]
        if uses and self.trace is None:
            raise PodsimError(f"{', '.join(uses)} come from a trace: give trace (a CSV, or azure-conv / azure-code)")
        if self.trace is not None and not uses:
            raise PodsimError("a trace is given but nothing reads it: set arrivals, prompt or output kind to trace")
        if self.arrivals.kind == "offline" and self.requests is None:
            raise PodsimError("offline arrivals send every request at once: give requests (how many)")
        return self


class Disaggregated(_Model):
    """Prefill and decode on separate replicas (Splitwise, DistServe): `prefill` replicas run
    prompts only, then each request's KV cache moves to a decode replica over `transfer`
    (`dcn`: separate slices; `ici`: the two slices are halves of one torus)."""

    prefill: q.SERVE_REPLICAS.type = Field(..., description="prefill replicas")
    decode: q.SERVE_REPLICAS.type = Field(..., description="decode replicas")
    transfer: Literal["dcn", "ici"] = "dcn"


class Slo(_Model):
    """Latency targets a request must meet to count towards SLO attainment and goodput."""

    ttft: q.SLO_TTFT.duration = Field(2.0, description="time to first token")
    tpot: q.SLO_TPOT.duration = Field(0.1, description="time per output token after the first")


class ServingSetup(_Model):
    """A serving fleet and its traffic, without the generation and the seed (a scenario gives
    those at its top level; `ServingConfig` adds them)."""

    slice: str = Field(..., description="slice shape of one replica, e.g. 2x4")
    model: ServedModel
    replicas: q.SERVE_REPLICAS.type = Field(1, description="replicas, each on its own slice")
    disaggregated: Disaggregated | None = None
    router: Literal["least_loaded", "round_robin"] = "least_loaded"
    batch: BatchPolicy = Field(default_factory=BatchPolicy)
    requests: RequestStream = Field(default_factory=RequestStream)
    slo: Slo = Field(default_factory=Slo)
    duration: Duration = Field(600.0, gt=0, le=MAX_HORIZON_S, description="arrivals for this long (offline: ignored)")
    drain: Duration | None = Field(None, ge=0, le=MAX_HORIZON_S, description="time after the arrivals end for requests "
                                                                           "in flight (default: duration)")
    warmup: Duration = Field(0.0, ge=0, le=MAX_HORIZON_S, description="requests arriving before this are run but not counted")
    routing: Literal["dimension_order", "shortest_paths", "adaptive"] = "dimension_order"
    engine: Literal[ENGINE_NAMES] = Field("auto", description="the serving engine whose host time, attention kernels and "
                                          "batch costs are modelled (podsim.serving.engines): auto (saxml for Saxml's "
                                          "batcher, else vllm), ideal (the chips alone), vllm, tensorrt-llm, jetstream, saxml")
    hbm_reserve: Fraction = Field(0.0, description="share of HBM the runtime keeps (not for weights or KV cache)")

    @model_validator(mode="after")
    def _fleet(self) -> ServingSetup:
        if self.disaggregated is not None and self.replicas != 1:
            raise PodsimError("disaggregated serving sets its replicas as prefill and decode; leave replicas at 1")
        if self.disaggregated is not None and self.batch.kind == "static":
            raise PodsimError("disaggregated serving runs continuous batching on both pools; use batch kind continuous")
        if self.requests.beams > 1 and self.batch.kv == "paged":
            raise PodsimError("beam search shares a prompt's pages across beams: use batch kv reserve with beams > 1")
        if self.warmup >= self.duration and self.requests.arrivals.kind != "offline":
            raise PodsimError(f"warmup {self.warmup:g} s is not shorter than the duration {self.duration:g} s")
        if self.requests.arrivals.rate is not None:
            check_request_count(self.requests.arrivals.rate_per_s, self.duration)
        return self

    @property
    def replica_count(self) -> int:
        """Slices the fleet runs on."""
        return self.replicas if self.disaggregated is None else self.disaggregated.prefill + self.disaggregated.decode

    @property
    def drain_s(self) -> float:
        return self.duration if self.drain is None else self.drain


class ServingConfig(ServingSetup):
    """One serving simulation: a fleet of replicas of `model` on `slice` slices of
    `generation`, a request stream, a batch policy, targets; `duration` of arrivals, then up to
    `drain` more for the requests in flight."""

    generation: str = Field(..., description="generation id, e.g. tpu-v5e")
    seed: Seed = 0

    @classmethod
    def of(cls, setup: ServingSetup, generation: str, seed: int) -> ServingConfig:
        """The config of a setup on `generation` with `seed` (a scenario's serving workload)."""
        return cls.model_validate({**setup.model_dump(include=set(ServingSetup.model_fields)), "generation": generation, "seed": seed})


class CapacitySearch(_Model):
    """Fewest chips to serve `rate` within the p99 targets (podsim.serving.capacity)."""

    rate: Rate = Field(..., description="the request rate to serve, e.g. 20/s (Poisson, or the stream's own kind)")
    ttft_p99: q.SLO_TTFT.duration = Field(..., description="p99 time-to-first-token target")
    tpot_p99: q.SLO_TPOT.duration = Field(..., description="p99 time-per-output-token target")
    replicas: tuple[int, int] = Field((1, 64), description="[low, high]: the replica counts searched")
    slices: tuple[str, ...] = Field((), description="candidate slice shapes of one replica; default: the workload's")
    replicates: q.CAPACITY_REPLICATES.type = Field(3, description="runs per size with independent seeds")
    judge: Literal["mean", "interval"] = Field("mean", description="judge a size on the replicates' mean, or on the "
                                               "upper end of its 95% interval")

    @model_validator(mode="after")
    def _range(self) -> CapacitySearch:
        lo, hi = self.replicas
        if not 1 <= lo <= hi <= 100_000:
            raise PodsimError(f"capacity replicas [{lo}, {hi}] must satisfy 1 <= low <= high <= 100000")
        for s in self.slices:
            parse_shape(s)
        if self.judge == "interval" and self.replicates < 2:
            raise PodsimError("capacity judge interval needs replicates >= 2 (one run has no interval); or judge: mean")
        return self


class ServingWorkload(ServingSetup):
    """A scenario's serving workload: a fleet and its traffic (the generation and the seed are
    the scenario's), and optionally the capacity search to run on it."""

    capacity: CapacitySearch | None = None

    @model_validator(mode="after")
    def _search_rate(self) -> ServingWorkload:
        if self.capacity is not None:
            check_request_count(self.capacity.rate / 3600.0, self.duration, "capacity rate: ")
        return self


def check_request_count(rate_per_s: float, duration_s: float, what: str = "") -> None:
    """Arrivals at `rate_per_s` for `duration_s` stay within MAX_REQUESTS, checked when the spec
    is read (draw_requests draws them only when the run starts: validate passed 1e9/s)."""
    expected = rate_per_s * duration_s
    if expected > q.MAX_REQUESTS:
        raise PodsimError(f"{what}{rate_per_s:g} requests/s for {duration_s:g} s is {expected:,.0f} requests; at most "
                          f"{q.MAX_REQUESTS:,} (a lower rate or a shorter duration)")
