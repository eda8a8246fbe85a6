"""Serving fleets: LLM inference on slices, step by step.

The inference step model (`InferenceShard`: per-chip costs of prefill chunks and decode tokens
under tensor and expert parallelism, precision per op; `StepTimer`: their time on a slice, the
per-op compute model for compute and the engine for every collective), the paged KV cache
(`kv_budget`), request streams (Poisson, bursty, replayed Azure traces), the SimPy serving
simulation with continuous or static batching, colocated or disaggregated prefill and decode,
and the capacity search (`serving_capacity`)::

    from podsim.serving import ServingConfig, simulate_serving
    cfg = ServingConfig.model_validate({"generation": "tpu-v5e", "slice": "2x4",
        "model": {"model": "llama2-70b", "precision": {"weights": "int8"}},
        "requests": {"arrivals": {"kind": "poisson", "rate": "2/s"}}, "duration": "10min"})
    r = simulate_serving(cfg)
    r.metrics["ttft_p99_s"], r.metrics["cost_per_million_tokens_usd"]

The face's four names are imported from their modules on first use, so reading the configuration
models (a scenario file's schema) does not load the simulator and the engine; the step model's
pieces (`InferenceShard`, `StepTimer`, `kv_budget`, ...) are imported from their modules.
"""

from __future__ import annotations

import importlib

_WHERE = {
    "ServingConfig": "spec", "ServingResult": "result", "simulate_serving": "result", "serving_capacity": "capacity",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"podsim.serving.{_WHERE[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
