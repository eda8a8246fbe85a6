"""The serving table's rows beyond Saxml's: published measured serving runs on GPUs and TPUs
(podsim/data/reference/serving_measurements.md, ids sv.N), each the serving configuration podsim
runs it with and the figure it measured.

Sources (`group`, the unit of leave-one-source-out):
- `trtllm-0.6`: TensorRT-LLM's performance tables as of v0.6.1 (throughput, gptSessionBenchmark's
  static batches) and v0.5 (batch-1 first-token latency), H100 FP8 (sv.1-sv.18);
- `trtllm-0.11`: TensorRT-LLM v0.11's in-flight-batching tables, H100 FP8 and FP16 (sv.19-sv.38);
- `mlperf-h100`: MLPerf Inference v4.0 (NVIDIA) and v4.1 (Google) Llama 2 70B on 8 H100s, TensorRT-LLM
  (sv.39-sv.42);
- `jetstream`: JetStream's experimental JAX engine on TPU v5e-8 (sv.62);
- `mlperf-tpu`: the four Saxml rows of podsim.validation.serving (I1-I4 = sv.45-sv.48).

Every row's figure: `tpg` output tokens/s per GPU (TensorRT-LLM's static tables), `tps` output
tokens/s of the serving group (its in-flight tables: gptManagerBenchmark's token_throughput, every request's
output tokens over the run's wall time on rank 0, not divided by GPUs),
`ttft` the batch-1 first-token latency (seconds), `offline` an MLPerf Offline run's output
tokens/s over its replicas, `server` an MLPerf Server run's scheduled samples/s within its p99
TTFT and TPOT bounds (md.10). Lengths are fixed where the source fixes them; the MLPerf and
JetStream rows take OpenOrca's mean lengths (md.9) for every request (the distribution is not
published: an assumption each row states).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from podsim.serving.kvcache import kv_fraction_reserve
from podsim.serving.spec import ServingConfig

FP8 = {"weights": "fp8", "kv_cache": "fp8", "matmul": "fp8"}  # --enable_fp8 --fp8_kv_cache; quant_algo / kv_cache_quant_algo FP8
OPENORCA_IN, OPENORCA_OUT = 219, 292  # md.9: 218.7 input and 291.9 output tokens per sample (means)


@dataclass(frozen=True)
class ServeRow:
    """One measured serving run: the serving configuration podsim runs (a ServingConfig body),
    the figure (`metric`) and what it measured; `replicas`: identical serving groups the figure
    is summed over (podsim simulates one); `bound`: a Server row's p99 (TTFT, TPOT) targets."""

    id: str
    group: str
    system: str
    engine: str
    metric: str  # tpg | tps | ttft | offline | server
    measured: float
    config: dict
    replicas: int = 1
    bound: tuple[float, float] | None = None
    assumed: str = ""
    source: str = ""
    published: str = ""
    calibration: str = field(default="", compare=False)  # set by the calibration rule (serving_table), never by hand

    @property
    def generation(self) -> str:
        return self.config["generation"]

    @property
    def kind(self) -> str:
        """The band kind its error counts for: throughput (the decode and prefill steps at load),
        ttft (a lone request's first token) or rate (a rate within latency bounds)."""
        return {"ttft": "ttft", "server": "rate"}.get(self.metric, "throughput")


def _model(preset: str, tensor: int, precision: dict) -> dict:
    """A row's served model: a podsim.trace.configs preset (each cites its serving_measurements.md row; its layer,
    parallel or sequential, is the preset's: ServedModel.parallel)."""
    return {"model": preset, "tensor": tensor, "precision": dict(precision)}


def _requests(n: int, isl: int, osl: int) -> dict:
    return {"arrivals": {"kind": "offline"}, "requests": n, "prompt": {"kind": "fixed", "mean": isl},
            "output": {"kind": "fixed", "mean": osl}}


V061 = ("[TRTLLM-V061] NVIDIA/TensorRT-LLM@77d24b5fa178f11ed7fafdd9833b7245e075f721:docs/source/performance.md")
STATIC_ASSUMED = ("the table's runs used the doc's benchmark command (their batch sizes and engine builds are not "
                  "given): every sequence to the output length, the whole batch's context phase in one step")


def _static(rid: str, name: str, tp: int, batch: int, isl: int, osl: int, measured: float) -> ServeRow:
    """A gptSessionBenchmark row. Its context phase is one step of batch x prompt tokens (`token_budget`):
    NVIDIA/TensorRT-LLM cpp/tensorrt_llm/runtime/gptSession.cpp, GptSession::MicroBatchConfig, sets ctxBatchSize =
    genBatchSize = ceilDiv(maxBatchSize, pipelineParallelism) unless micro-batch sizes are given (the store's
    v0.6-era copy, with maxKvCacheLength, and every later one); benchmarks/cpp/gptSessionBenchmark.cpp sets them only
    from --ctx_micro_batch_size / --gen_micro_batch_size, which the v0.6.1 doc's commands do not pass."""
    cfg = {"generation": "gpu-h100", "slice": str(tp), "engine": "tensorrt-llm-0.6", "model": _model(name, tp, FP8),
           "batch": {"kind": "static", "max_batch": batch, "kv": "reserve", "token_budget": batch * isl},
           "requests": _requests(batch, isl, osl)}
    metric = "ttft" if osl == 1 and batch == 1 else "tpg"
    what = f"batch 1, {isl}-token prompt, first token" if metric == "ttft" else f"static batch {batch}, {isl}/{osl} tokens"
    return ServeRow(rid, "trtllm-0.6", f"TensorRT-LLM {'v0.5' if metric == 'ttft' else 'v0.6.1'}, {name} FP8 on {tp} H100, "
                    f"{what}", "tensorrt-llm-0.6", metric, measured, cfg, assumed=STATIC_ASSUMED if metric == "tpg" else "",
                    source=V061, published="2023-12-18")


V011 = "[TRTLLM-V011] NVIDIA/TensorRT-LLM docs/source/performance/perf-overview.md (v0.11.0)"
IFB_PAGE_TOKENS = 64
"""KV-cache block size of the v0.11 engines: the page's trtllm-build command sets no `--tokens_per_block`, so the
plugin default holds (tensorrt_llm/plugin/plugin.py, PluginConfig `_tokens_per_block: int = field(default=64)`, the
v0.11-era version with `_reduce_fusion`; the store's copy gives no commit). Every row's prompt + output is a
multiple of 64, so it reserves what 16-token pages did."""
IFB_KV_FRACTION = 0.99
"""`--kv_cache_free_gpu_mem_fraction 0.99` of the page's gptManagerBenchmark command: the KV cache takes 99% of the
GPU memory free once the engine (weights, activations) is loaded, not 99% of all of it."""
IFB_ASSUMED = "how a context is chunked over steps (--enable_chunked_context at the engine's default chunking, not stated)"
IFB_FP16_ASSUMED = ("; the FP16 column's engines built without the configs' quantization fields (the page says so for A100, "
                    "not for H100 FP16)")


def _ifb(rid: str, name: str, tp: int, n: int, isl: int, osl: int, max_batch: int, max_tokens: int, measured: float,
         precision: dict = FP8) -> ServeRow:
    cfg = {"generation": "gpu-h100", "slice": str(tp), "engine": "tensorrt-llm", "model": _model(name, tp, precision),
           "batch": {"kind": "continuous", "max_seqs": max_batch, "token_budget": max_tokens, "prefill": "chunked",
                     "kv": "reserve", "page_tokens": IFB_PAGE_TOKENS}, "requests": _requests(n, isl, osl)}
    cfg["hbm_reserve"] = kv_fraction_reserve(ServingConfig.model_validate(cfg), IFB_KV_FRACTION)
    dtype = "FP8" if precision else "FP16"
    return ServeRow(rid, "trtllm-0.11", f"TensorRT-LLM v0.11 in-flight batching, {name} {dtype} on {tp} H100, {isl}/{osl} "
                    f"tokens, {n:,} requests", "tensorrt-llm", "tps", measured, cfg,
                    assumed=IFB_ASSUMED + ("" if precision else IFB_FP16_ASSUMED), source=V011, published="2024-07-17")


MLPERF_MAX_NUM_TOKENS = 16384
"""Tokens per step of NVIDIA's Llama 2 70B engines: the builder's `max_num_tokens` default
(mlcommons/inference_results_v4.0@920148447684d8a0db7c3c73076c9b73ac362751:closed/NVIDIA/code/llama2-70b/tensorrt/builder.py,
`max_num_tokens: int = 16384`, passed to trtllm-build as `--max_num_tokens`); the stored Offline and Server configs do not
override it (their parent, configs/llama2-70b/__init__.py, is not stored). The same builder built the engines of
the v4.1 rows (NVIDIA's code as Google submitted it): assumed."""
MLPERF_ASSUMED = (f"every request {OPENORCA_IN} prompt and {OPENORCA_OUT} output tokens (OpenOrca's means, md.9: the "
                  "distribution is not published); 16,384 tokens per step (the builder's max_num_tokens default; the "
                  "parent config is not stored); FP8 KV cache (the checkpoint quantised with --kv_cache_dtype=fp8); "
                  "the KV cache 90% of what the weights and one step's workspace leave (kvcache_free_gpu_mem_frac 0.90); "
                  "16-token KV pages (the builder sets no --tokens_per_block; trtllm-build's default at the harness's "
                  "TensorRT-LLM, eb8f26c, is not stored); the harness's default scheduler (max_util) as paged KV with "
                  "preemption; prompts chunked to fill a step (the harness's chunked-context setting, in its unstored "
                  "llm_server, not found)")
MLPERF_KV_FRACTION = 0.90
"""`kvcache_free_gpu_mem_frac` of the H100 Llama 2 70B configs: NVIDIA's MLPerf Inference v4.0 Offline
(mlcommons/inference_results_v4.0@8121a81:closed/NVIDIA/configs/llama2-70b/Offline/__init__.py) and Google's MLPerf
Inference v4.1 Server (mlcommons/inference_results_v4.1@a2f5d66:closed/Google/configs/llama2-70b/Server/__init__.py; its
Offline config is not stored)."""


def _mlperf(rid: str, system: str, scenario: str, measured: float, batch: int, source: str, published: str,
            rate_per_replica: float | None = None) -> ServeRow:
    cfg = {"generation": "gpu-h100", "slice": "2", "engine": "tensorrt-llm", "model": _model("llama2-70b", 2, FP8),
           "batch": {"kind": "continuous", "max_seqs": batch, "token_budget": MLPERF_MAX_NUM_TOKENS, "prefill": "chunked",
                     "kv": "paged"},
           "requests": _requests(1, OPENORCA_IN, OPENORCA_OUT)}
    cfg["hbm_reserve"] = kv_fraction_reserve(ServingConfig.model_validate(cfg), MLPERF_KV_FRACTION)
    if scenario == "offline":
        cfg["requests"] = _requests(8000, OPENORCA_IN, OPENORCA_OUT)
        return ServeRow(rid, "mlperf-h100", system + ", Offline", "tensorrt-llm", "offline", measured, cfg, replicas=4,
                        assumed=MLPERF_ASSUMED + "; 8,000 samples per replica (of the run's 200,640 over 4)",
                        source=source, published=published)
    cfg.update({"duration": 600.0, "requests": {"arrivals": {"kind": "poisson", "rate": rate_per_replica * 3600.0},
                                                "prompt": {"kind": "fixed", "mean": OPENORCA_IN},
                                                "output": {"kind": "fixed", "mean": OPENORCA_OUT}}})
    return ServeRow(rid, "mlperf-h100", system + ", Server", "tensorrt-llm", "server", measured, cfg, replicas=4,
                    bound=(2.0, 0.2), assumed=MLPERF_ASSUMED + "; 600 s of Poisson arrivals per probe (the run's minimum is "
                    "longer); TPOT's p99 over requests' mean time per output token", source=source, published=published)


MLPERF40 = "mlcommons/inference_results_v4.0@3c4a1cf196b70175cfe7c59e067cd1d923aa4f3f"
MLPERF41 = "mlcommons/inference_results_v4.1@a2f5d66d17e8f75c02fd74dfe810ecca6a046696"

ROWS: tuple[ServeRow, ...] = (
    _static("sv.1", "gptj-6b", 1, 1024, 128, 128, 26150),
    _static("sv.2", "gptj-6b", 1, 120, 128, 2048, 8011),
    _static("sv.3", "gptj-6b", 1, 64, 2048, 128, 2551),
    _static("sv.4", "gptj-6b", 1, 64, 2048, 2048, 3327),
    _static("sv.5", "llama2-7b", 1, 768, 128, 128, 19694),
    _static("sv.6", "llama2-7b", 1, 112, 128, 2048, 6818),
    _static("sv.7", "llama2-7b", 1, 80, 2048, 128, 2244),
    _static("sv.8", "llama2-7b", 1, 48, 2048, 2048, 2740),
    _static("sv.9", "llama2-70b", 2, 1024, 128, 128, 2657),
    _static("sv.10", "llama2-70b", 4, 480, 128, 2048, 1486),
    _static("sv.11", "llama2-70b", 2, 96, 2048, 128, 306),
    _static("sv.12", "llama2-70b", 2, 64, 2048, 2048, 547),
    _static("sv.13", "gptj-6b", 1, 1, 128, 1, 0.007),
    _static("sv.14", "gptj-6b", 1, 1, 2048, 1, 0.029),
    _static("sv.15", "llama2-7b", 1, 1, 128, 1, 0.007),
    _static("sv.16", "llama2-7b", 1, 1, 2048, 1, 0.036),
    _static("sv.17", "llama2-70b", 4, 1, 128, 1, 0.026),
    _static("sv.18", "llama2-70b", 4, 1, 2048, 1, 0.109),
    _ifb("sv.19", "llama2-7b", 1, 30000, 128, 128, 4096, 8192, 17684.88),
    _ifb("sv.20", "llama2-7b", 1, 3000, 2048, 128, 4096, 8192, 2342.71),
    _ifb("sv.21", "llama2-7b", 1, 3000, 128, 2048, 4096, 8192, 6814.72),
    _ifb("sv.22", "llama2-7b", 1, 1500, 2048, 2048, 4096, 8192, 2820.31),
    _ifb("sv.23", "llama3-8b", 1, 30000, 128, 128, 2048, 8192, 27781.28),
    _ifb("sv.24", "llama3-8b", 1, 3000, 2048, 128, 2048, 8192, 3555.57),
    _ifb("sv.25", "llama3-8b", 1, 3000, 128, 2048, 2048, 8192, 17894.85),
    _ifb("sv.26", "llama3-8b", 1, 1500, 2048, 2048, 2048, 8192, 8398.71),
    _ifb("sv.27", "llama2-70b", 2, 30000, 128, 128, 2048, 2048, 6502.44),  # TP 2: max_batch_size and max_num_tokens 2048
    _ifb("sv.28", "llama2-70b", 2, 3000, 2048, 128, 2048, 2048, 747.14),
    _ifb("sv.29", "llama2-70b", 4, 3000, 128, 2048, 4096, 8192, 9202.42),
    _ifb("sv.30", "llama2-70b", 8, 1500, 2048, 2048, 8192, 16384, 7647.54),
    _ifb("sv.31", "llama3-70b", 8, 30000, 128, 128, 8192, 16384, 13853.05),
    _ifb("sv.32", "mixtral-8x7b", 2, 30000, 128, 128, 2048, 3072, 24770.44),
    _ifb("sv.33", "mixtral-8x7b", 2, 1500, 2048, 2048, 2048, 3072, 11486.66),
    _ifb("sv.34", "gptj-6b", 1, 30000, 128, 128, 2048, 2048, 24456.84),
    _ifb("sv.35", "llama2-7b", 1, 30000, 128, 128, 4096, 8192, 11605.69, precision={}),
    _ifb("sv.36", "llama3-8b", 1, 1500, 2048, 2048, 2048, 8192, 3996.93, precision={}),
    _ifb("sv.37", "llama2-70b", 4, 3000, 128, 2048, 4096, 8192, 3787.24, precision={}),
    _ifb("sv.38", "llama2-70b", 8, 30000, 128, 128, 8192, 16384, 10093.27, precision={}),
    _mlperf("sv.39", "MLPerf Inference v4.0 closed, NVIDIA DGX H100 (8 x H100, 4 x TP 2), Llama 2 70B", "offline", 21805.8,
            896, f"[MLPERF-INF40] {MLPERF40} closed/NVIDIA/results/DGX-H100_H100-SXM-80GBx8_TRT/llama2-70b-99.9/Offline",
            "2024-03-27"),
    _mlperf("sv.41", "MLPerf Inference v4.1 closed, Google A3 (8 x H100, 4 x TP 2), Llama 2 70B", "offline", 24133.7, 896,
            f"[MLPERF-INF41] {MLPERF41} closed/Google/results/DGX-H100_H100-SXM-80GBx8_TRT/llama2-70b-99/Offline "
            "(Google's Offline config is not stored; its run log's target_qps 80 and min_duration 2,400,000 ms are "
            "NVIDIA's v4.1 Offline H100_SXM_80GB_TP2x4's, closed/NVIDIA/configs/llama2-70b/Offline/__init__.py: TP 2, "
            "gpu_batch_size 896, kvcache_free_gpu_mem_frac 0.90; Google's stored Server config repeats NVIDIA's H100 "
            "classes verbatim)", "2024-08-28"),
)
"""The rows podsim scores beside Saxml's (serving.ROWS); the Server rows sv.40 and sv.42 are in
SERVER_ROWS (each a rate search: minutes, not run by the tests)."""

SERVER_ROWS: tuple[ServeRow, ...] = (
    _mlperf("sv.40", "MLPerf Inference v4.0 closed, NVIDIA DGX H100 (8 x H100, 4 x TP 2), Llama 2 70B", "server", 70.98, 1024,
            f"[MLPERF-INF40] {MLPERF40} closed/NVIDIA/results/DGX-H100_H100-SXM-80GBx8_TRT/llama2-70b-99.9/Server",
            "2024-03-27", rate_per_replica=70.98 / 4),
    _mlperf("sv.42", "MLPerf Inference v4.1 closed, Google A3 (8 x H100, 4 x TP 2), Llama 2 70B", "server", 75.10, 1024,
            f"[MLPERF-INF41] {MLPERF41} closed/Google/results/DGX-H100_H100-SXM-80GBx8_TRT/llama2-70b-99/Server",
            "2024-08-28", rate_per_replica=75.10 / 4),
)

JS_EXP = "AI-Hypercomputer/JetStream@{commit}:experimental/jax"
JS_EXP_CHUNKS, JS_EXP_PAGE, JS_EXP_HBM_UTILIZATION = (128, 256, 512, 1024), 128, 0.8
"""The experimental engine's settings for Llama 2 7B, the same at both rows' commits (runtime/engine.py
`InferenceParams`: prefill_chunk_sizes, page_size, hbm_utilization; `max_num_seqs` is each row's).
Each step prefills one request's chunk, padded to the smallest chunk size that holds it (engine.py
picks it; batch_scheduler.py keeps one active prefill), beside a decode over all `max_num_seqs`
slots (the generate state's arrays are that long); KV pages of `page_size` tokens in what
`hbm_utilization` of HBM leaves beside the weights (runtime/kv_cache.py), weights and KV bf16
(nn/linear.py, kv_cache.py)."""


def _js_exp(rid: str, seqs: int, n: int, isl: int, osl: int, measured: float, how: str, source: str, published: str) -> ServeRow:
    """A row of JetStream's experimental JAX engine: Llama 2 7B chat, TP 8 on a v5e-8, OpenOrca offline."""
    return ServeRow(
        rid, "jetstream", f"JetStream experimental JAX engine, Llama 2 7B on TPU v5e-8 (TP 8), OpenOrca, {n:,} requests "
        f"offline, {seqs} sequences", "jetstream", "tps", measured,
        {"generation": "tpu-v5e", "slice": "2x4", "engine": "jetstream", "model": _model("llama2-7b", 8, {}),
         "hbm_reserve": 1 - JS_EXP_HBM_UTILIZATION,
         "batch": {"kind": "continuous", "prefill": "chunked", "kv": "paged", "max_seqs": seqs,
                   "token_budget": JS_EXP_CHUNKS[-1] + seqs, "prefill_seqs": 1, "buckets": list(JS_EXP_CHUNKS),
                   "batch_sizes": [seqs], "page_tokens": JS_EXP_PAGE},
         "requests": _requests(n, isl, osl)},
        assumed=f"every request {isl} prompt and {osl} output tokens ({how}; the spread is not published); the engine's "
        "OFFLINE start (decoding waits until 95% of the slots are taken, batch_scheduler.py) not modelled",
        source=source, published=published)


JETSTREAM_ROWS: tuple[ServeRow, ...] = (
    _js_exp("sv.62", 160, 1000, 219, 292, 3975.3, "the run's 218,743 and 291,740 over 1,000",
            f"[JS-EXP] {JS_EXP.format(commit='a3bb30e972a344675c20d56d8f61dc309e6a5f7b')}/README.md; settings: runtime/engine.py at that commit "
            "(max_num_seqs 160)", "2025-01-09"),
    _js_exp("sv.66", 320, 10000, 222, 293, 4811.16, "the run's 2,219,196 and 2,931,585 over 10,000",
            "AI-Hypercomputer/JetStream commit db6b30efbad9267e5aafa49bf3789447b53f39fe (2025-02-19), its message's "
            "benchmarking result; settings: experimental/jax/inference/runtime/engine.py at that commit (max_num_seqs "
            "320), mini_offline_benchmarking.py (10,000 requests drawn from the 24,576-sample OpenOrca set)", "2025-02-19"),
)

ALL_ROWS = ROWS + JETSTREAM_ROWS
"""Every row scored by the fast table (the Server rows run with `--server`)."""
