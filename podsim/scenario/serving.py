"""A scenario's serving workload: the fleet of `workload.serving` on the scenario's generation
(with its figure overrides: a price, a power), run once or `replicates` times with independent
seeds, and its capacity search when it asks for one.

    workload:
      serving:
        slice: 2x4
        model: {model: llama2-70b, precision: {weights: int8}}
        requests: {arrivals: {kind: poisson, rate: 4/s}, trace: azure-conv, prompt: {kind: trace}, output: {kind: trace}}
        capacity: {rate: 8/s, ttft_p99: 2s, tpot_p99: 100ms, slices: [2x4, 4x4]}
"""

from __future__ import annotations

from podsim.scenario.replicates import pool_replicates, run_replicates
from podsim.serving.capacity import on_slice, serving_capacity
from podsim.serving.result import ServingResult, simulate_serving
from podsim.serving.simulate import ServingSim
from podsim.serving.spec import ServingConfig, ServingWorkload
from podsim.serving.workload import load_request_trace
from podsim.topology import Generation, topology_summary
from podsim.validation.bands import capacity_band_metrics, serving_band_metrics

# settings and counters: the same in every replicate, or not results
NOT_AVERAGED = frozenset({"generation", "slice", "replicas", "chips", "model", "parallelism", "batch_policy", "serving_mode",
                          "slo_ttft_s", "slo_tpot_s", "kv_cache_tokens", "kv_cache_pages", "weight_bytes_per_chip",
                          "hbm_bound_decode_s", "decode_step_b1_s", "seed", "engine_wall_s", "replicates", "engine",
                          "engine_figures", "matmul_peak_flops_per_s", "matmul_peak_source"})


def serving_config(w: ServingWorkload, gen: Generation, seed: int) -> ServingConfig:
    return ServingConfig.of(w, gen.id, seed)


def check_serving(w: ServingWorkload, gen: Generation) -> None:
    """Build what a run builds first (the shard, the step timer's slice, the KV budget), so a
    model that does not fit, a plan the slice cannot take or a precision the chip has no rate for
    is refused when the scenario loads."""
    if w.requests.trace is not None:
        load_request_trace(w.requests.trace)
    cfg = serving_config(w, gen, 0)
    ServingSim(cfg, requests=_no_requests(), generation=gen)
    if w.capacity is not None:
        for shape in w.capacity.slices:  # as the search runs them (serving.capacity.on_slice)
            ServingSim(on_slice(cfg, shape), requests=_no_requests(), generation=gen)


def _no_requests():
    import numpy as np

    from podsim.serving.workload import Requests

    return Requests(np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))


def _cost(result: ServingResult, gen: Generation) -> dict:
    m = result.metrics
    price, power = gen.price_per_chip_hour, gen.power_per_chip
    return {"chip_h": m["serving_chip_h"], "busy_chip_h": m["serving_chip_h"], "per": "the measured window",
            "price_per_chip_h_usd": price.value, "price_source": price.source, "price_note": price.note,
            "cost_usd": m["cost_usd"], "power_per_chip_w": power.value, "power_source": power.source,
            "power_note": power.note, "energy_kwh": m["energy_kwh"],
            "cost_per_million_tokens_usd": m["cost_per_million_tokens_usd"],
            "energy_per_million_tokens_kwh": m["energy_per_million_tokens_kwh"]}


def run_serving(w: ServingWorkload, gen: Generation, seed: int, replicates: int = 1, on_progress=None, dcn=None):
    """(metrics, topology, cost, tables, intervals) of the serving workload, as a RunResult
    holds them; several replicates: metrics the means, intervals their 95% intervals, tables
    the first replicate's plus every replicate's figures. `dcn`: the DCN a disaggregated
    fleet's KV caches cross (the scenario's `dcn` section; default podsim's DcnSpec)."""
    from podsim.scenario.result import normalise_table

    seeds, runs = run_replicates(seed, replicates, lambda s, progress: simulate_serving(
        serving_config(w, gen, s), generation=gen, dcn=dcn, on_progress=progress), on_progress)
    first = runs[0]
    metrics = dict(first.metrics)
    intervals: dict[str, dict] = {}
    tables = {name: normalise_table(name, cols) for name, cols in first.tables.items()}
    if replicates > 1:
        metrics, intervals, tables["replicates"] = pool_replicates([r.metrics for r in runs], seeds, seed, NOT_AVERAGED)
    cost = _cost(first, gen)
    if replicates > 1:
        cost.update({k: metrics[k] for k in ("cost_usd", "energy_kwh", "cost_per_million_tokens_usd",
                                             "energy_per_million_tokens_kwh") if k in metrics})
    metrics.update(serving_band_metrics(gen.id))  # the validation table's typical error per answer
    if w.capacity is not None:
        ans = serving_capacity(serving_config(w, gen, seed), w.capacity, generation=gen)
        metrics.update(ans.metrics())
        metrics.update(capacity_band_metrics(gen.id))
        tables["serving_capacity"] = normalise_table("serving_capacity", ans.table())
        metrics["capacity_answer"] = f"{_capacity_text(ans)} (chips: {metrics['capacity_chips_error_text']})"
    topo = topology_summary(gen, w.slice)
    topo.update(replicas=w.replica_count, fleet_chips=metrics["chips"], kv_budget=first.budget.as_dict(),
                notes=list(first.notes))
    return metrics, topo, cost, tables, intervals


def _capacity_text(ans) -> str:
    from podsim.serving.capacity import answer_text

    return answer_text(ans)


def serving_run_result(w: ServingWorkload, generation: str | Generation, seed: int = 0, replicates: int = 1,
                       name: str = "serving", on_progress=None):
    """A serving workload on a generation as the RunResult `podsim run` returns for a scenario
    with it (what `podsim serve` flags and the dashboard's serving page build); no targets."""
    import time

    from podsim.scenario.result import RunResult
    from podsim.topology import get_generation

    gen = get_generation(generation)
    t0 = time.perf_counter()
    check_serving(w, gen)
    metrics, topo, cost, tables, intervals = run_serving(w, gen, seed, replicates, on_progress)
    scenario = {"name": name, "topology": {"generation": gen.id}, "workload": {"serving": w.model_dump(mode="json")},
                "seed": seed, "replicates": replicates}
    return RunResult(name=name, kind="serving", scenario=scenario, metrics=metrics, topology=topo, cost=cost, tables=tables,
                     wall_s=time.perf_counter() - t0, intervals=intervals)
