"""Serving rows of the validation table: MLPerf Inference datacenter submissions on TPUs next to
podsim's serving simulation of the same setup.

The only TPU LLM submissions in MLPerf Inference rounds 3.1, 4.0, 4.1 and 5.0 are Google's GPT-J 6B
(CNN/DailyMail summarisation) on one 4-chip TPU v5e host (round 3.1 preview, round 4.0 available); the
round 4.1 and 5.0 TPU submissions (v5e, Trillium) are Stable Diffusion XL only, and Llama 2 70B
was submitted on GPUs only (checked: the `closed/Google/systems` folders of those rounds). Each
row is one submission's scenario:

- `offline`: every sample at once; the submission's static batches of 32 prompts, each with 4
  beams sharing its prompt's KV cache, padded to the longest of Saxml's buckets and decoded to
  MLPerf's 128-token cap: one prefill step and 127 decode steps per batch. The measured figure
  is seconds per batch, 32 / the samples per second the run logged, so the row checks the
  step model's prefill and decode step times;
- `server`: Poisson arrivals at the scheduled rate the run logged, the same batches formed as
  Saxml's batcher does (full at 32 or after 4 s); the measured figure is the run's 99th
  percentile latency, so the row checks the serving simulation (queueing and batching) too.

Error = predicted / measured - 1. No row sets a constant: the step model's constants are the
training table's (MATMUL_FRACTION, HBM_FRACTION) and the on-chip memory figure of v5e.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

from podsim.serving.result import simulate_serving
from podsim.serving.spec import ServingConfig

GPTJ_DIMS = {"name": "gptj-6b", "n_layers": 28, "d_model": 4096, "n_heads": 16, "n_kv_heads": 16, "head_dim": 256,
             "d_ff": 16384, "vocab": 50401, "seq_len": 2048, "mlp": "gelu", "norm": "layernorm", "bias": True,
             "tied_embeddings": False, "learned_positions": False}
GPTJ_SOURCE = ("mlcommons/inference_results_v3.1@ba621a0d11e5dff0eeed1148efd80571f7acc554 closed/Google/code/gptj-99/params/gptj.py, "
               "class GPTJ (28 layers, model dims 4096, 16 heads x 256, hidden 4 x 4096, GELU, vocabulary 50401, parallel "
               "attention and MLP on one layer norm; MLP biases, none on attention)")
BATCH, BEAMS, BUCKETS, DECODE_CAP = 32, 4, (512, 1024, 1919), 128
V31 = "mlcommons/inference_results_v3.1@eaf622a25c00f2b4b1d2c4f5b4f430570429d24a"
V40 = "mlcommons/inference_results_v4.0@3c4a1cf196b70175cfe7c59e067cd1d923aa4f3f"
SETUP = (f"static batches of {BATCH} x {BEAMS} beams (prompt KV shared), prompts padded to the longest bucket {BUCKETS[-1]}, "
         f"{DECODE_CAP} output tokens each; int8 weights, bf16 matmuls (weight-only); tensor=4 on one 2x2 v5e slice")
ASSUMED = ("every batch of 32 CNN/DailyMail articles holds one over 1,024 tokens (so pads to 1,919) and one beam that "
           "runs to the 128-token cap (early exit ends a batch when all beams end); Saxml's int8 quantises weights only")


@dataclass(frozen=True)
class ServingRow:
    """One MLPerf Inference submission's scenario and what it measured."""

    id: str
    system: str
    scenario: str  # offline | server
    measured: float  # offline: seconds per 32-sample batch; server: p99 latency (s)
    logged: str  # the figure as the run logged it
    rate_per_s: float | None = None  # server: the scheduled rate
    max_wait_s: float = 0.0  # server: Saxml's BATCH_WAIT_SECS
    source: str = ""
    assumed: str = ""
    calibration: str = ""

    @property
    def metric(self) -> str:
        return "s per 32-sample batch" if self.scenario == "offline" else "p99 latency"


ROWS: tuple[ServingRow, ...] = (
    ServingRow("I1", "TPU v5e, 4 chips (TPU-v5e-4_SAX, preview); MLPerf Inference v3.1 closed", "offline", BATCH / 9.81226,
               "9.81226 samples/s", source=f"{V31} closed/Google/results/TPU-v5e-4_SAX/gptj-99/Offline/performance/run_1/"
               "mlperf_log_summary.txt; model class GPTJ4BS32Int8Opt10Early (code/gptj-99/README.md, params/gptj.py)",
               assumed=ASSUMED),
    ServingRow("I2", "TPU v5e, 4 chips (tpu-v5e-4, available); MLPerf Inference v4.0 closed", "offline", BATCH / 10.1502,
               "10.1502 samples/s", source=f"{V40} closed/Google/results/tpu_v5e_x4/gptj-99/offline/performance/run_1/"
               "mlperf_log_summary.txt; systems/tpu_v5e_x4.json; model class GPTJ4TokenizedINT8BS32XLAWait40MB6Offline "
               "(code/gptj/gptj_using_saxml_loadgen/README.md)",
               assumed=ASSUMED + "; the round 4.0 class (defined in Saxml, not in the results repository) as round 3.1's: its name "
               "gives 4 chips, int8, batch 32"),
    ServingRow("I3", "TPU v5e, 4 chips (TPU-v5e-4_SAX, preview); MLPerf Inference v3.1 closed", "server", 17.802509927,
               "p99 17.80 s at 7.13 scheduled samples/s (bound 20 s)", rate_per_s=7.13, max_wait_s=4.0,
               source=f"{V31} closed/Google/results/TPU-v5e-4_SAX/gptj-99/Server/performance/run_1/mlperf_log_summary.txt; "
               "model class GPTJ4BS32Int8Opt10Wait40MB6 (BATCH_WAIT_SECS 4.0, MAX_LIVE_BATCHES 6)",
               assumed=ASSUMED + "; batches run one after another (Saxml may keep up to 6 live: not modelled)"),
    ServingRow("I4", "TPU v5e, 4 chips (tpu-v5e-4, available); MLPerf Inference v4.0 closed", "server", 18.830208737,
               "p99 18.83 s at 7.25 scheduled samples/s (bound 20 s)", rate_per_s=7.25, max_wait_s=4.0,
               source=f"{V40} closed/Google/results/tpu_v5e_x4/gptj-99/server/performance/run_1/mlperf_log_summary.txt; "
               "model class GPTJ4TokenizedINT8BS32XLAWait40MB6Server",
               assumed=ASSUMED + "; batches run one after another (Saxml may keep up to 6 live: not modelled)"),
)


def row_config(row: ServingRow, seed: int = 1) -> ServingConfig:
    """The serving configuration of a row (see the module docstring)."""
    if row.scenario == "offline":
        arrivals, duration, n = {"kind": "offline"}, 600.0, 10 * BATCH
    else:
        arrivals, duration, n = {"kind": "poisson", "rate": row.rate_per_s * 3600.0}, 600.0, None  # MLPerf's 600 s minimum
    return ServingConfig.model_validate({
        "generation": "tpu-v5e", "slice": "2x2", "duration": duration, "seed": seed,
        "model": {"dims": GPTJ_DIMS, "parallel_block": True, "precision": {"weights": "int8"}},
        "batch": {"kind": "static", "max_batch": BATCH, "max_wait": row.max_wait_s, "buckets": list(BUCKETS), "kv": "reserve"},
        "requests": {"arrivals": arrivals, "requests": n, "beams": BEAMS, "prompt": {"kind": "fixed", "mean": BUCKETS[-1]},
                     "output": {"kind": "fixed", "mean": DECODE_CAP}}})


def predict(row: ServingRow) -> dict:
    """The row's prediction and the serving metrics behind it."""
    r = simulate_serving(row_config(row))
    m = r.metrics
    predicted = BATCH / m["throughput_rps"] if row.scenario == "offline" else m["e2e_p99_s"]
    return {"predicted": predicted, "metrics": m}


def run_table(rows: tuple[ServingRow, ...] = ROWS, on_row: Callable[[dict], None] | None = None) -> list[dict]:
    out = []
    for row in rows:
        p = predict(row)
        rec = {"id": row.id, "system": row.system, "model": "gptj-6b", "scenario": row.scenario, "metric": row.metric,
               "measured": row.measured, "logged": row.logged, "predicted": p["predicted"],
               "error": p["predicted"] / row.measured - 1, "calibration": row.calibration, "setup": SETUP,
               "assumed": row.assumed, "source": row.source, "engine_wall_s": p["metrics"]["engine_wall_s"],
               "throughput_rps": p["metrics"]["throughput_rps"]}
        out.append(rec)
        if on_row:
            on_row(rec)
    return out


def summarise(table: list[dict]) -> dict:
    """Median |error| over the step-time rows (offline) and over every row (none sets a constant)."""
    step = [abs(r["error"]) for r in table if r["scenario"] == "offline" and not r["calibration"]]
    every = [abs(r["error"]) for r in table if not r["calibration"]]
    return {"rows": len(table), "offline_median_abs_error": statistics.median(step) if step else 0.0,
            "median_abs_error": statistics.median(every) if every else 0.0, "max_abs_error": max(every, default=0.0)}
