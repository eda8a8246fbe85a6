"""Serving rows of the validation table: MLPerf Inference datacenter submissions on TPUs next to
podsim's serving simulation of the same setup.

The only TPU LLM submissions in MLPerf Inference rounds 3.1, 4.0, 4.1 and 5.0 are Google's GPT-J 6B
(CNN/DailyMail summarisation) on one 4-chip TPU v5e host (round 3.1 preview, round 4.0 available); the
round 4.1 and 5.0 TPU submissions (v5e, Trillium) are Stable Diffusion XL only, and Llama 2 70B
was submitted on GPUs only (checked: the `closed/Google/systems` folders of those rounds). Each
row is one submission's scenario:

- `offline`: every sample at once; the submission's static batches of 32 prompts (its class's BATCH_SIZE), each with 4
  beams sharing its prompt's KV cache, decoded to MLPerf's 128-token cap, costed as praxis runs
  the batch (`Replica._praxis_batch_s`: a dense prefill, then 128 extend steps over static beam
  buffers). Round 3.1's harness issues an Offline query's samples sorted by prompt length
  (backend.py, issue_queries), so 32 consecutive sorted prompts form a batch padded to the
  bucket of its longest: the batches per bucket follow the prompts' length distribution
  (`sorted_bucket_shares`, from CNN/DailyMail's published median and 90th percentile, CNNDM_SOURCE),
  and podsim's seconds per batch are the mix of its simulated runs at each bucket. The measured
  figure is seconds per batch, 32 / the samples per second the run logged;
- `server`: Poisson arrivals over MLPerf's 600 s minimum duration, batched as the submission's
  Saxml class and Saxml's batcher do (batch policy `batcher: saxml`: the class's BATCH_SIZE,
  BATCH_WAIT_SECS counted from the batch's first take, two batches live past the batcher, at
  most BATCH_SIZE x MAX_LIVE_BATCHES requests alive, every batch run at its compiled size). The
  measured figure is MLPerf's own Server result, the run's scheduled samples per second (its
  log's "Result is : VALID": 99th percentile latency within gptj.Server.target_latency, 20 s);
  podsim's is the highest Poisson rate at which a simulated run would be VALID: its p99
  end-to-end latency, and loadgen's early-stopping estimate of it, within the same bound
  (`podsim.serving.capacity.max_rate` of `mlperf_server_latency_s`: SERVER_REPLICATES seeds, the
  same at every probe, judged on their mean, bisected to RATE_TOLERANCE_RPS), as the replicates'
  mean scheduled samples per second at that rate. The row checks the serving simulation (queueing and
  batching) too. Beside it, as diagnostics: the p99 latency at the run's scheduled rate (the
  rows' metric before; ill-conditioned near saturation, where a few % of batch time is tens of
  % of p99) and the fastest request (it bounds one batch's time on the chips from below).

Error = predicted / measured - 1. No row sets a constant: the step model's constants are the
training table's (MATMUL_FRACTION, HBM_FRACTION) and the on-chip memory figure of v5e.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from podsim.errors import PodsimError
from podsim.serving.capacity import MaxRate, max_rate, mlperf_server_latency_s
from podsim.serving.engines import PRAXIS_COSTS, PRAXIS_WHAT_IFS, resolve_engine, with_costs
from podsim.serving.result import simulate_serving
from podsim.serving.spec import ServingConfig

GPTJ_DIMS = {"name": "gptj-6b", "n_layers": 28, "d_model": 4096, "n_heads": 16, "n_kv_heads": 16, "head_dim": 256,
             "d_ff": 16384, "vocab": 50401, "seq_len": 2048, "mlp": "gelu", "norm": "layernorm", "bias": True,
             "tied_embeddings": False, "learned_positions": False}
GPTJ_SOURCE = ("mlcommons/inference_results_v3.1@ba621a0d11e5dff0eeed1148efd80571f7acc554 closed/Google/code/gptj-99/params/gptj.py, "
               "class GPTJ (28 layers, model dims 4096, 16 heads x 256, hidden 4 x 4096, GELU, vocabulary 50401, parallel "
               "attention and MLP on one layer norm; MLP biases, none on attention)")
BEAMS, DECODE_CAP = 4, 128
V31 = "mlcommons/inference_results_v3.1@eaf622a25c00f2b4b1d2c4f5b4f430570429d24a"
V40 = "mlcommons/inference_results_v4.0@3c4a1cf196b70175cfe7c59e067cd1d923aa4f3f"
# the Saxml model classes the submissions published (their BATCH_SIZE, BUCKET_KEYS, BATCH_WAIT_SECS,
# MAX_LIVE_BATCHES): round 3.1's in the results repository; round 4.0's in the Saxml branch its
# README checks out (`saxml_git,checkout=mlperf4.0`), public as tpu-inference/saxml's mlperf4.0
V31_CLASSES = ("mlcommons/inference_results_v3.1@ba621a0d11e5dff0eeed1148efd80571f7acc554 "
               "closed/Google/code/gptj-99/params/gptj.py")
V40_CLASSES = "tpu-inference/saxml@8d3aa0791964605182055c210557cee309927bba (branch mlperf4.0) saxml/server/pax/lm/params/gptj.py"
V40_HARNESS = ("; the round 4.0 harness (krai's axs) is not in the results: taken as round 3.1's (200 client threads), "
               "whether it sorts Offline samples not known")
# round 3.1's harness sends each sample as one blocking Generate from a pool of --num_client_threads threads,
# default 200 (closed/Google/code/gptj-99/backend.py, main.py; the run's flags are not in the results); round
# 4.0's harness (krai's axs) is not in the results: taken as the same
CLIENTS_V31 = 200
SERVER_BOUND_S = 20.0  # gptj.Server.target_latency = 20000 ms at the 99th percentile (configs/mlperf.conf; both runs' logs)
SERVER_REPLICATES = 8  # seeds per rate probe of a Server row (the same at every probe: common random numbers)
RATE_TOLERANCE_RPS = 0.01  # the bisection's bracket, samples/s
OFFLINE_SAMPLES = 24_576  # an Offline run's samples at least (configs/mlperf.conf, *.Offline.min_query_count)
SETUP = (f"Saxml static batches of the class's BATCH_SIZE x {BEAMS} beams (prompt KV shared), run at that size (Saxml pads "
         f"a batch to its compiled size), formed by Saxml's batcher (batcher saxml); prompts padded to the longest bucket "
         f"1919 (Offline: to their sorted batch's bucket, see its note), {DECODE_CAP} output tokens each; int8 weights, bf16 matmuls (weight-only); tensor=4 on one 2x2 v5e slice")
ASSUMED = ("every batch holds an article over the second-longest bucket (so pads to 1,919) and one beam that runs to the "
           "128-token cap (early exit ends a batch when all beams end); Saxml's int8 quantises weights only")
OFFLINE_ASSUMED = ("batches of 32 consecutive length-sorted prompts (round 3.1's backend.py issue_queries sorts an Offline "
                   "query's samples), each padded to the bucket of its longest; article lengths lognormal through "
                   "CNN/DailyMail's published median (777) and 90th percentile (1,439 tokens; BigBird, arXiv 2007.14062, "
                   "Table 19: the shape an assumption, its tokenizer not GPT-J's for certain) plus the prompt template's "
                   "52 tokens; one beam per batch runs to the 128-token cap; Saxml's int8 quantises weights only")
V40_SORTED = "; round 4.0's harness assumed to sort like round 3.1's (not in the results)"
# CNN/DailyMail article lengths as published: Zaheer et al., "Big Bird: Transformers for Longer Sequences" (NeurIPS 2020,
# arXiv 2007.14062), appendix E.5, Table 19 "Shorter summarization dataset statistics": CNN/DailyMail, 287,113 / 13,368 /
# 11,490 training / dev / test instances, input length median 777 and 90th percentile 1,439 tokens (output 59 / 93).
# The table does not name its tokenizer: the paper's vocabulary is RoBERTa's, GPT-2's BPE (E.1; GPT-J's is GPT-2's
# too), its large summariser's Pegasus's SentencePiece; the split the figures are over is not stated (MLPerf uses dev)
CNNDM_MEDIAN_TOKENS, CNNDM_P90_TOKENS = 777, 1439
CNNDM_SOURCE = ("Zaheer et al., Big Bird: Transformers for Longer Sequences (NeurIPS 2020, arXiv 2007.14062), appendix E.5, "
                "Table 19: CNN/DailyMail input length median 777, 90th percentile 1,439 tokens")
# the tokens MLPerf's GPT-J preprocessing adds to each article: mlcommons/inference language/gpt-j dataset.py
# PROMPT_DICT["prompt_input"] with download_cnndm.py's instruction "Summarize the following news article:", 47 tokens
# before the article and 5 after in GPT-2's BPE (GPT-J's tokenizer; counted with GPT-2's encoder.json / vocab.bpe)
PROMPT_TEMPLATE_TOKENS = 52
PROMPT_CAP = 1919  # dataset.py truncates every prompt at max_length 1919 (the longest bucket)
LENGTH_SHAPES = ("lognormal", "piecewise")  # the rows' distribution shape through the two quantiles, and its sensitivity


@dataclass(frozen=True)
class ServingRow:
    """One MLPerf Inference submission's scenario, its Saxml class's batching, and what it measured."""

    id: str
    system: str
    scenario: str  # offline | server
    measured: float  # offline: seconds per batch; server: the scheduled samples per second of the VALID run
    logged: str  # the figure as the run logged it
    batch: int  # the class's BATCH_SIZE (one compiled size: every batch runs at it)
    buckets: tuple[int, ...]  # its BUCKET_KEYS
    max_wait_s: float  # its BATCH_WAIT_SECS
    max_live_batches: int  # its MAX_LIVE_BATCHES
    segments: tuple[int, ...] = (32, 64, 128)  # its MAX_DECODE_STEPS (praxis's decode-loop segments)
    # tensors cached per token and layer: round 3.1's praxis (2023-08) keeps GPT-J's keys before and after
    # the rotary embedding (attentions.py: key_state and key_post_rotary_pos_emb) until google/praxis@be97eb5
    # (2024-02-13); round 4.0's class sets consolidate_rope_key_state (one key state)
    kv_states: int = 3
    rate_per_s: float | None = None  # server: the scheduled rate
    clients: int | None = None  # the harness's client threads (requests outstanding at most), where it says
    measured_min_s: float | None = None  # server: the run's minimum latency (a diagnostic, not a row)
    measured_p99_s: float | None = None  # server: the run's p99 latency at its scheduled rate (a diagnostic, not a row)
    source: str = ""
    assumed: str = ""
    calibration: str = ""

    @property
    def metric(self) -> str:
        return f"s per {self.batch}-sample batch" if self.scenario == "offline" else "samples/s, p99 <= 20 s"


ROWS: tuple[ServingRow, ...] = (
    ServingRow("I1", "TPU v5e, 4 chips (TPU-v5e-4_SAX, preview); MLPerf Inference v3.1 closed", "offline", 32 / 9.81226,
               "9.81226 samples/s", 32, (512, 1024, 1919), 0.2, 2, clients=CLIENTS_V31,
               source=f"{V31} closed/Google/results/TPU-v5e-4_SAX/gptj-99/Offline/performance/run_1/mlperf_log_summary.txt; "
               f"class GPTJ4BS32Int8Opt10Early (code/gptj-99/README.md; {V31_CLASSES}: BATCH_SIZE 32, buckets 512/1024/1919, "
               "BATCH_WAIT_SECS 0.2 and MAX_LIVE_BATCHES 2 from class GPTJ)", assumed=OFFLINE_ASSUMED),
    ServingRow("I2", "TPU v5e, 4 chips (tpu-v5e-4, available); MLPerf Inference v4.0 closed", "offline", 32 / 10.1502,
               "10.1502 samples/s", 32, (512, 1024, 1536, 1919), 4.0, 10, clients=CLIENTS_V31, kv_states=2,
               source=f"{V40} closed/Google/results/tpu_v5e_x4/gptj-99/offline/performance/run_1/mlperf_log_summary.txt; "
               "systems/tpu_v5e_x4.json; class GPTJ4TokenizedINT8BS32XLAWait40MB6Offline (code/gptj/gptj_using_saxml_loadgen/"
               f"README.md; {V40_CLASSES}: BATCH_SIZE 32, buckets 512/1024/1536/1919, BATCH_WAIT_SECS 4.0, MAX_LIVE_BATCHES 10)",
               assumed=OFFLINE_ASSUMED + V40_SORTED + V40_HARNESS),
    ServingRow("I3", "TPU v5e, 4 chips (TPU-v5e-4_SAX, preview); MLPerf Inference v3.1 closed", "server", 7.13,
               "7.13 scheduled samples/s, VALID (p99 17.80 s, bound 20 s); min 4.58 s", 32, (512, 1024, 1919), 4.0, 6,
               rate_per_s=7.13, measured_min_s=4.581708162, measured_p99_s=17.802509927, clients=CLIENTS_V31,
               source=f"{V31} closed/Google/results/TPU-v5e-4_SAX/gptj-99/Server/performance/run_1/mlperf_log_summary.txt; "
               f"class GPTJ4BS32Int8Opt10Wait40MB6 ({V31_CLASSES}: BATCH_WAIT_SECS 4.0, MAX_LIVE_BATCHES 6); the latency "
               "bound gptj.Server.target_latency = 20000 ms at the 99th percentile (configs/mlperf.conf)", assumed=ASSUMED),
    ServingRow("I4", "TPU v5e, 4 chips (tpu-v5e-4, available); MLPerf Inference v4.0 closed", "server", 7.25,
               "7.25 scheduled samples/s, VALID (p99 18.83 s, bound 20 s); min 5.02 s", 36, (512, 1024, 1536, 1919), 4.0, 10,
               rate_per_s=7.25, measured_min_s=5.022518838, measured_p99_s=18.830208737, clients=CLIENTS_V31, segments=(32, 48, 64, 72, 80, 96, 102, 128),
               kv_states=2,
               source=f"{V40} closed/Google/results/tpu_v5e_x4/gptj-99/server/performance/run_1/mlperf_log_summary.txt; "
               f"class GPTJ4TokenizedINT8BS32XLAWait40MB6Server ({V40_CLASSES}: BATCH_SIZE 36, buckets 512/1024/1536/1919, "
               "BATCH_WAIT_SECS 4.0, MAX_LIVE_BATCHES 10, MAX_DECODE_STEPS 32/48/64/72/80/96/102/128)", assumed=ASSUMED + V40_HARNESS),
)


def article_cdf(tokens: float, shape: str = "lognormal") -> float:
    """Share of CNN/DailyMail articles at most `tokens` long, through the published median and
    90th percentile (CNNDM_SOURCE): `lognormal` (the rows' assumption), or `piecewise`, linear
    through (0, 0), the median and the 90th percentile and on at the last segment's slope to 1
    (the sensitivity to the shape)."""
    if shape not in LENGTH_SHAPES:
        raise PodsimError(f"length shape {shape!r}: one of {', '.join(LENGTH_SHAPES)}")
    if tokens <= 0:
        return 0.0
    med, p90 = CNNDM_MEDIAN_TOKENS, CNNDM_P90_TOKENS
    if shape == "lognormal":
        return NormalDist(math.log(med), math.log(p90 / med) / NormalDist().inv_cdf(0.9)).cdf(math.log(tokens))
    return 0.5 * tokens / med if tokens <= med else min(1.0, 0.5 + 0.4 * (tokens - med) / (p90 - med))


def sorted_bucket_shares(buckets: tuple[int, ...], shape: str = "lognormal", scale: float = 1.0) -> dict[int, float]:
    """Share of an Offline run's batches at each bucket when its samples are issued sorted by
    prompt length: 32 consecutive prompts pad to the bucket of their longest, so the batches per
    bucket follow the prompts' distribution (up to the one batch astride each bucket's edge, of
    ~768). A prompt is an article (`scale` x its tokens: a what-if for the tokenizer) plus
    PROMPT_TEMPLATE_TOKENS, truncated at PROMPT_CAP, the longest bucket."""
    if buckets[-1] != PROMPT_CAP:
        raise PodsimError(f"buckets {buckets}: the longest must be the prompts' cap {PROMPT_CAP}")
    shares, below = {}, 0.0
    for b in buckets[:-1]:
        at = article_cdf((b - PROMPT_TEMPLATE_TOKENS) / scale, shape)
        shares[b], below = at - below, at
    shares[buckets[-1]] = 1.0 - below
    return shares


def row_config(row: ServingRow, seed: int = 1, prompt_tokens: int | None = None) -> ServingConfig:
    """The serving configuration of a row (see the module docstring); `prompt_tokens`: every
    prompt's length (an Offline row's batches at one bucket; the longest bucket by default)."""
    if row.scenario == "offline":
        arrivals, duration, n = {"kind": "offline"}, 600.0, OFFLINE_SAMPLES
    else:
        arrivals, duration, n = {"kind": "poisson", "rate": row.rate_per_s * 3600.0}, 600.0, None  # MLPerf's 600 s minimum
    return ServingConfig.model_validate({
        "generation": "tpu-v5e", "slice": "2x2", "duration": duration, "seed": seed,
        "model": {"dims": GPTJ_DIMS, "parallel_block": True, "precision": {"weights": "int8"}, "kv_states": row.kv_states},
        "batch": {"kind": "static", "batcher": "saxml", "max_batch": row.batch, "batch_sizes": [row.batch],
                  "max_wait": row.max_wait_s, "max_live_batches": row.max_live_batches, "buckets": list(row.buckets),
                  "decode_segments": list(row.segments),
                  "batcher_depth": 2, "kv": "reserve"},  # both rounds' Saxml predates d290a4c: always 2 live
        "requests": {"arrivals": arrivals, "requests": n, "beams": BEAMS, "clients": row.clients, "prompt": {"kind": "fixed", "mean": prompt_tokens or row.buckets[-1]},
                     "output": {"kind": "fixed", "mean": DECODE_CAP}}})


def praxis_engine(costs: frozenset[str] | None):
    """The saxml engine with only `costs` of praxis's charged (the ablation), or None: as it is."""
    if costs is None:
        return None
    costs = frozenset(costs)
    if unknown := costs - PRAXIS_COSTS - PRAXIS_WHAT_IFS:
        raise PodsimError(f"praxis costs {sorted(unknown)} are not known; use: {', '.join(sorted(PRAXIS_COSTS | PRAXIS_WHAT_IFS))}")
    return with_costs(resolve_engine("saxml", "tpu-v5e", "static", "saxml"), costs)


def server_max_rate(row: ServingRow, replicates: int = SERVER_REPLICATES, tolerance_rps: float = RATE_TOLERANCE_RPS,
                    timer=None, praxis_costs: frozenset[str] | None = None) -> MaxRate:
    """A Server row's highest Poisson rate within MLPerf's bound (p99 end-to-end latency and its
    early-stopping estimate <= 20 s over the 600 s run), from the run's scheduled rate:
    `replicates` seeds, the same at every probe, judged on their mean (module docstring)."""
    return max_rate(row_config(row), SERVER_BOUND_S, metric=mlperf_server_latency_s, replicates=replicates, judge="mean",
                    tolerance_rps=tolerance_rps, start_rps=row.rate_per_s, timer=timer, engine=praxis_engine(praxis_costs))


def predict(row: ServingRow, praxis_costs: frozenset[str] | None = None, replicates: int = SERVER_REPLICATES,
            tolerance_rps: float = RATE_TOLERANCE_RPS) -> dict:
    """The row's prediction and the serving metrics behind it (a Server row's at the run's
    scheduled rate, and its rate search); `refused` when podsim cannot run the submission's setup
    (its KV cache does not fit), with the reason. `praxis_costs`: which of a Saxml batch's costs
    to charge (all by default; the ablation's subsets); `replicates`, `tolerance_rps`: a Server
    row's rate search."""
    try:
        r = simulate_serving(row_config(row), engine=praxis_engine(praxis_costs))
        rate = server_max_rate(row, replicates, tolerance_rps, praxis_costs=praxis_costs) if row.scenario == "server" else None
        bucket_s = offline_bucket_batch_s(row, praxis_costs, longest=r) if row.scenario == "offline" else {}
    except PodsimError as exc:
        return {"predicted": None, "metrics": {}, "min_s": None, "rate": None, "refused": str(exc), "bucket_s": {}}
    m = r.metrics
    if row.scenario == "offline":
        shares = sorted_bucket_shares(row.buckets)
        predicted = sum(shares[b] * bucket_s[b] for b in row.buckets)
    else:
        at = rate.at(rate.rate_rps)
        predicted = None if at is None else at.scheduled_rps
    e2e = r.tables["serving_requests"]["e2e_s"]
    return {"predicted": predicted, "metrics": m, "min_s": float(np.nanmin(e2e)) if np.isfinite(e2e).any() else None,
            "rate": rate, "bucket_s": bucket_s, "refused": "" if predicted is not None else f"no rate from "
            f"{rate.probes[0].rate_rps:g}/s down meets p99 <= {SERVER_BOUND_S:g} s: {rate.probes[0].why}"}


def offline_bucket_batch_s(row: ServingRow, praxis_costs: frozenset[str] | None = None, longest=None) -> dict[int, float]:
    """An Offline row's simulated seconds per batch with every prompt at each of its buckets
    (the whole Offline run at that length; `longest`: the longest bucket's result, if run)."""
    out = {}
    for b in row.buckets:
        r = longest if b == row.buckets[-1] and longest is not None else simulate_serving(
            row_config(row, prompt_tokens=b), engine=praxis_engine(praxis_costs))
        out[b] = row.batch / r.metrics["throughput_rps"]
    return out


def run_table(rows: tuple[ServingRow, ...] = ROWS, on_row: Callable[[dict], None] | None = None,
              praxis_costs: frozenset[str] | None = None, replicates: int = SERVER_REPLICATES,
              tolerance_rps: float = RATE_TOLERANCE_RPS) -> list[dict]:
    """Every row's record: its figures, error, setup and sources; a Server row's also its rate
    search (`rate_*`) and, at the run's scheduled rate, podsim's p99 and fastest request."""
    out = []
    for row in rows:
        p = predict(row, praxis_costs, replicates, tolerance_rps)
        m = p["metrics"]
        rate: MaxRate | None = p["rate"]
        rec = {"id": row.id, "system": row.system, "model": "gptj-6b", "scenario": row.scenario, "metric": row.metric,
               "measured": row.measured, "logged": row.logged, "predicted": p["predicted"],
               "error": None if p["predicted"] is None else p["predicted"] / row.measured - 1, "refused": p["refused"],
               "calibration": row.calibration, "setup": SETUP, "assumed": row.assumed, "source": row.source,
               "engine_wall_s": m.get("engine_wall_s"),
               "throughput_rps": row.batch / p["predicted"] if row.scenario == "offline" and p["predicted"] else m.get("throughput_rps"),
               "bucket_batch_s": p["bucket_s"],
               "bucket_shares": sorted_bucket_shares(row.buckets) if row.scenario == "offline" else {},
               "rejected": m.get("requests_rejected"), "measured_min_s": row.measured_min_s,
               "predicted_min_s": p["min_s"] if row.scenario == "server" else None,
               "measured_p99_s": row.measured_p99_s,
               "predicted_p99_s": m.get("e2e_p99_s") if row.scenario == "server" else None,
               "rate_rps": rate.rate_rps if rate else None, "rate_missed_rps": rate.missed_rps if rate else None,
               "rate_p99_s": rate.at(rate.rate_rps).interval["mean"] if rate and rate.rate_rps else None,
               "rate_probes": len(rate.probes) if rate else 0, "rate_replicates": rate.replicates if rate else 0,
               "rate_tolerance_rps": rate.tolerance_rps if rate else None}
        out.append(rec)
        if on_row:
            on_row(rec)
    return out


def summarise(table: list[dict]) -> dict:
    """Median |error| over the step-time rows (offline) and over every row (none sets a constant);
    a row podsim refuses counts as a miss of 100%."""
    def miss(r: dict) -> float:
        return 1.0 if r["error"] is None else abs(r["error"])

    step = [miss(r) for r in table if r["scenario"] == "offline" and not r["calibration"]]
    every = [miss(r) for r in table if not r["calibration"]]
    return {"rows": len(table), "refused": sum(r["error"] is None for r in table),
            "offline_median_abs_error": statistics.median(step) if step else 0.0,
            "median_abs_error": statistics.median(every) if every else 0.0, "max_abs_error": max(every, default=0.0)}


class _ScaledTimer:
    """A step timer whose step times are `factor` times another's (a what-if, never a row)."""

    def __init__(self, inner, factor: float):
        self._inner, self._factor = inner, factor

    def tokens_step_s(self, *args) -> float:
        return self._factor * self._inner.tokens_step_s(*args)

    def memory_s(self, hbm_bytes: float) -> float:
        return self._factor * self._inner.memory_s(hbm_bytes)

    def __getattr__(self, name):
        return getattr(self._inner, name)


def batch_time_sensitivity(row: ServingRow, batch_s: tuple[float, ...], rate_replicates: int = 0,
                           tolerance_rps: float = RATE_TOLERANCE_RPS) -> list[dict]:
    """A Server row's latency percentiles at the run's scheduled rate were one 1,919-token batch
    to take each of `batch_s` seconds on the chips (every step scaled alike): whether Saxml's
    scheduling, given the batch time the run implies, reproduces the run's latencies; with
    `rate_replicates`, also the row's rate search under each (`max_rps`: the scheduled samples/s
    within the bound), which moves far less with the batch time than the p99 does. A diagnostic
    beside the table; no row uses it."""
    from podsim.serving.simulate import ServingSim

    cfg = row_config(row)
    base = ServingSim(cfg)
    replica = base.replicas[0]
    length, steps, _ = replica._batch_shape([0])
    t_b = sum(replica.batch_s(row.batch, length, steps))
    out = []
    for target in (t_b, *batch_s):
        timer = _ScaledTimer(base.timer, target / t_b)
        sim = ServingSim(cfg, timer=timer)
        sim.run()
        e2e = sim.log.end_s - sim.req.arrival_s
        rate = server_max_rate(row, rate_replicates, tolerance_rps, timer=timer) if rate_replicates else None
        at = rate.at(rate.rate_rps) if rate else None
        out.append({"batch_s": target, "podsim": target == t_b, "retries": sim.retries_total,
                    **{f"p{q}_s": float(np.nanpercentile(e2e, q)) for q in (0, 50, 99)},
                    "max_rps": at.scheduled_rps if at else None})
    return out


ABLATION = (("none (praxis's step count only)", ()), ("+ dense prefill", ("dense_prefill",)),
            ("+ logits materialised", ("dense_prefill", "logits")),
            ("+ static beam buffers", ("dense_prefill", "logits", "static_buffers")),
            ("+ beam reorder (all, the rows)", ("dense_prefill", "logits", "static_buffers", "beam_reorder")),
            ("all, prefill collectives hidden (what-if)", ("dense_prefill", "logits", "static_buffers", "beam_reorder",
                                                           "prefill_collectives_hidden")),
            ("all, int8 weights materialised (what-if)", ("dense_prefill", "logits", "static_buffers", "beam_reorder",
                                                          "int8_materialised")))
"""Cumulative subsets of praxis's costs (podsim.serving.engines.PRAXIS_COSTS), then two what-ifs."""


def praxis_ablation(rows: tuple[ServingRow, ...] = ROWS, replicates: int = 2, tolerance_rps: float = 0.05) -> list[dict]:
    """Every row's error with each cumulative subset of a Saxml batch's costs, and the time of
    one round 3.1 batch (32 x 1,919 tokens, 128 output tokens) under it: what each mechanism
    does to every row (and, `p99_errors`, to a Server row's p99 at the run's rate). A diagnostic
    beside the table; the Server rows' rate searches with fewer `replicates` and a coarser
    `tolerance_rps` than the table's, to stay cheap."""
    from podsim.serving.simulate import ServingSim

    out = []
    for name, costs in ABLATION:
        on = frozenset(costs)
        table = run_table(rows, praxis_costs=on, replicates=replicates, tolerance_rps=tolerance_rps)
        replica = ServingSim(row_config(ROWS[0]), engine=praxis_engine(on)).replicas[0]
        out.append({"name": name, "costs": costs, "batch_s": sum(replica.batch_s(32, ROWS[0].buckets[-1], DECODE_CAP - 1)),
                    "errors": {r["id"]: r["error"] for r in table}, "median_abs_error": summarise(table)["median_abs_error"],
                    "p99_errors": {r["id"]: r["predicted_p99_s"] / r["measured_p99_s"] - 1 for r in table
                                   if r["predicted_p99_s"] and r["measured_p99_s"]}})
    return out


def offline_mix(row: ServingRow, scales: tuple[float, ...] = (0.9, 1.1), bucket_s: dict[int, float] | None = None) -> dict:
    """An Offline row's sorted batches: its simulated seconds per batch at each bucket, the share
    of batches at each under each length shape (LENGTH_SHAPES), the mixed seconds per batch and
    its error under each, and under the lognormal with article lengths scaled by each of
    `scales` (a what-if for the tokenizer: GPT-J's BPE against the table's unnamed one). The
    lognormal is the row; the rest are sensitivities, never rows. `bucket_s`: the seconds per
    batch at each bucket if already simulated (run_table's `bucket_batch_s`), else run here."""
    bucket_s = bucket_s or offline_bucket_batch_s(row)

    def mixed(shares: dict[int, float]) -> dict:
        t = sum(shares[b] * bucket_s[b] for b in row.buckets)
        return {"shares": shares, "batch_s": t, "error": t / row.measured - 1}

    return {"bucket_s": bucket_s, "upper_s": bucket_s[row.buckets[-1]],
            "shapes": {shape: mixed(sorted_bucket_shares(row.buckets, shape)) for shape in LENGTH_SHAPES},
            "scaled": {k: mixed(sorted_bucket_shares(row.buckets, "lognormal", k)) for k in scales}}
