"""Serving fleets: LLM inference on slices, step by step.

The inference step model (`InferenceShard`: per-chip costs of prefill chunks and decode tokens
under tensor and expert parallelism, precision per op; `StepTimer`: their time on a slice, the
per-op compute model for compute and the engine for every collective), the paged KV cache
(`kv_budget`), request streams (Poisson, bursty, replayed Azure traces), and the SimPy serving
simulation with continuous or static batching, colocated or disaggregated prefill and decode::

    from podsim.serving import ServingConfig, simulate_serving
    cfg = ServingConfig.model_validate({"generation": "tpu-v5e", "slice": "2x4",
        "model": {"model": "llama2-70b", "precision": {"weights": "int8"}},
        "requests": {"arrivals": {"kind": "poisson", "rate": "2/s"}}, "duration": "10min"})
    r = simulate_serving(cfg)
    r.metrics["ttft_p99_s"], r.metrics["cost_per_million_tokens_usd"]
"""

from podsim.serving.costs import AttentionLoad, InferencePrecision, InferenceShard, Seq
from podsim.serving.kvcache import KvBudget, kv_budget
from podsim.serving.result import ServingResult, latencies, simulate_serving
from podsim.serving.spec import (
    Arrivals,
    BatchPolicy,
    Disaggregated,
    Lengths,
    RequestStream,
    ServedModel,
    ServingConfig,
    Slo,
)
from podsim.serving.steptime import StepTimer
from podsim.serving.trace import serving_step_trace
from podsim.serving.workload import Requests, draw_requests, load_request_trace

__all__ = [
    "Arrivals", "AttentionLoad", "BatchPolicy", "Disaggregated", "InferencePrecision", "InferenceShard", "KvBudget",
    "Lengths", "RequestStream", "Requests", "Seq", "ServedModel", "ServingConfig", "ServingResult", "Slo", "StepTimer",
    "draw_requests", "kv_budget", "latencies", "load_request_trace", "serving_step_trace", "simulate_serving",
]
