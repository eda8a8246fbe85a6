"""What a serving simulation returns: per-request latencies, the fleet's throughput, SLO
attainment, goodput, cost and energy per million tokens, and the KV cache's use.

Definitions (registered in podsim.metrics): a request counts when it arrives in [warmup,
duration) (offline: every request). TTFT = first token - arrival; TPOT = (last token - first
token) / (output tokens - 1), for requests of two or more output tokens; end-to-end latency =
last token - arrival. Percentiles are over the counted requests that got there (a request still
running at the end has no end-to-end latency; `requests_unfinished` says how many). A request
meets the SLO when it finished with TTFT <= slo.ttft and TPOT <= slo.tpot (one output token:
TTFT only); unfinished and rejected requests miss it. Throughput counts the output tokens of
counted requests that finished, over the window (duration - warmup; offline: from 0 to the
last token). Cost = the fleet's chips x window hours x the published price per chip-hour;
energy = the same chip-hours x the measured mean power per chip (every chip taken as drawing
its mean power all the time); per million output tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from podsim.serving.kvcache import KvBudget
from podsim.serving.simulate import RequestLog, ServingSim
from podsim.serving.spec import ServingConfig
from podsim.serving.workload import Requests
from podsim.stats import percentile

PERCENTILES = (50, 95, 99)


@dataclass(frozen=True, eq=False)
class ServingResult:
    """One serving simulation: its config, requests and what happened to them, flat metrics,
    the KV budget, per-request and time-series tables (columns of equal length)."""

    config: ServingConfig
    requests: Requests
    log: RequestLog
    metrics: dict
    budget: KvBudget
    tables: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


def latencies(req: Requests, log: RequestLog) -> dict[str, np.ndarray]:
    """TTFT, TPOT and end-to-end latency per request (NaN where it does not apply)."""
    ttft = log.first_s - req.arrival_s
    e2e = log.end_s - req.arrival_s
    many = req.output >= 2
    tpot = np.full(len(req), np.nan)
    tpot[many] = (log.end_s[many] - log.first_s[many]) / (req.output[many] - 1)
    return {"ttft_s": ttft, "tpot_s": tpot, "e2e_s": e2e}


def serving_metrics(sim: ServingSim, wall_s: float) -> tuple[dict, dict[str, dict[str, np.ndarray]]]:
    """The flat metrics and the tables of a finished simulation (definitions above)."""
    cfg, req, log = sim.config, sim.req, sim.log
    gen = sim.generation
    offline = cfg.requests.arrivals.kind == "offline"
    lat = latencies(req, log)
    counted = np.ones(len(req), dtype=bool) if offline else (req.arrival_s >= cfg.warmup) & (req.arrival_s < cfg.duration)
    finished = counted & ~np.isnan(log.end_s)
    n = int(counted.sum())
    ttft = lat["ttft_s"][counted & ~np.isnan(log.first_s)]
    tpot = lat["tpot_s"][finished & (req.output >= 2)]
    e2e = lat["e2e_s"][finished]
    ok_tpot = np.where(req.output >= 2, lat["tpot_s"] <= cfg.slo.tpot, True)
    met = finished & (lat["ttft_s"] <= cfg.slo.ttft) & ok_tpot
    if offline:
        window = float(np.nanmax(log.end_s)) if finished.any() else math.nan
    else:
        window = cfg.duration - cfg.warmup
    out_tokens = float(req.output[finished].sum() * req.beams)
    chips = sim.shard.chips * cfg.replica_count
    price, power = gen.price_per_chip_hour.value, gen.power_per_chip.value
    chip_h = chips * window / 3600.0 if window == window else math.nan
    cost = chip_h * price if price is not None else None
    energy = chip_h * power / 1000.0 if power is not None else None

    def per_mtok(x: float | None) -> float | None:
        return x / (out_tokens / 1e6) if x is not None and out_tokens > 0 else None

    steps = [r.steps for r in sim.replicas]
    n_steps = sum(len(s) for s in steps)
    tokens_stepped = sum(float(s.column("tokens").sum()) for s in steps)
    m = {
        "generation": gen.id, "slice": cfg.slice, "replicas": cfg.replica_count, "chips": chips,
        "model": sim.shard.cfg.name, "parallelism": f"tensor={sim.shard.tensor}" + (f",expert={sim.shard.expert}" if sim.shard.expert > 1 else ""),
        "batch_policy": f"static/{cfg.batch.batcher}" if cfg.batch.kind == "static" else f"continuous/{cfg.batch.prefill}",
        "serving_mode": "disaggregated" if cfg.disaggregated else "colocated",
        "requests": n, "requests_completed": int(finished.sum()), "requests_unfinished": int((counted & np.isnan(log.end_s) & ~log.rejected).sum()),
        "requests_rejected": int((counted & log.rejected).sum()),
        "offered_rps": n / window if window and window == window and not offline else math.nan,
    }
    for name, values in (("ttft", ttft), ("tpot", tpot), ("e2e", e2e)):
        m[f"{name}_mean_s"] = float(values.mean()) if len(values) else math.nan
        for q in PERCENTILES:
            m[f"{name}_p{q}_s"] = percentile(values, q)
    m.update({
        "slo_ttft_s": cfg.slo.ttft, "slo_tpot_s": cfg.slo.tpot,
        "slo_attainment": float(met[counted].mean()) if n else math.nan,
        "goodput_rps": float(met.sum()) / window if window else math.nan,
        "throughput_rps": float(finished.sum()) / window if window else math.nan,
        "output_tokens": out_tokens, "prompt_tokens": float(req.prompt[finished].sum()),
        "tokens_per_s": out_tokens / window if window else math.nan,
        "tokens_per_s_per_chip": out_tokens / window / chips if window else math.nan,
        "serving_chip_h": chip_h, "cost_usd": cost, "energy_kwh": energy,
        "cost_per_million_tokens_usd": per_mtok(cost), "energy_per_million_tokens_kwh": per_mtok(energy),
        "kv_cache_tokens": sim.budget.tokens, "kv_cache_pages": sim.budget.pages,
        "kv_peak_fraction": max(r.ledger.peak for r in sim.replicas) / sim.budget.pages,
        "kv_tokens_max": sim.kv_tokens_max, "concurrent_seqs_max": max(r.max_seqs_seen for r in sim.replicas),
        "kv_preemptions": int(log.preemptions[counted].sum()),
        "serving_steps": n_steps, "tokens_per_step_mean": tokens_stepped / n_steps if n_steps else math.nan,
        "replica_busy_fraction": sum(r.busy_s for r in sim.replicas) / (len(sim.replicas) * max(sim.env.now, 1e-12)),
        "weight_bytes_per_chip": sim.budget.weight_bytes, "hbm_bound_decode_s": sim.timer.hbm_bound_s(),
        "decode_step_b1_s": sim.timer.tokens_step_s(1, 1, 1.0, 1024.0, 1023.0, 1.0),
        "engine": sim.engine.name, "engine_figures": sim.engine.describe(),
        "matmul_peak_flops_per_s": sim.timer.chip.peak_for(sim.shard.precision.matmul),
        "matmul_peak_source": matmul_peak_source(sim),
        "seed": cfg.seed, "engine_wall_s": wall_s, "simulated_s": sim.env.now,
    })
    tables = {"serving_requests": _request_table(req, log, lat, met, counted),
              "serving_timeseries": _timeseries(sim, window if window == window else sim.env.now)}
    return m, tables


def matmul_peak_source(sim: ServingSim) -> str:
    """Where the weight matmuls' peak rate comes from: the generation's bf16 figure, or the chip's
    published low-precision rates (podsim.perf.chips)."""
    precision, gen = sim.shard.precision.matmul, sim.generation
    if precision == "bf16":
        return f"bf16 {gen.peak_bf16_tflops_per_chip.value:g} TFLOP/s ({gen.peak_bf16_tflops_per_chip.source})"
    return f"{precision} {sim.timer.chip.peak_for(precision) / 1e12:,.0f} TFLOP/s ({sim.timer.chip.peak_source})"


def _request_table(req: Requests, log: RequestLog, lat: dict, met: np.ndarray, counted: np.ndarray) -> dict[str, np.ndarray]:
    return {"arrival_s": req.arrival_s, "prompt_tokens": req.prompt, "output_tokens": req.output,
            "ttft_s": lat["ttft_s"], "tpot_s": lat["tpot_s"], "e2e_s": lat["e2e_s"], "replica": log.replica,
            "preemptions": log.preemptions, "met_slo": met, "counted": counted, "rejected": log.rejected}


def _timeseries(sim: ServingSim, span: float, bins: int = 120) -> dict[str, np.ndarray]:
    """Per time bin over the fleet: tokens per second, mean running sequences per replica, mean
    KV-cache use (fraction of pages), busy fraction."""
    span = max(span, 1e-9)
    edges = np.linspace(0.0, span, bins + 1)
    tokens = np.zeros(bins)
    seqs = np.zeros(bins)
    pages = np.zeros(bins)
    busy = np.zeros(bins)
    width = span / bins
    for r in sim.replicas:
        s = r.steps
        if not len(s):
            continue
        end, dt = s.column("end_s"), s.column("dt_s")
        i = np.clip(((end - dt / 2) / width).astype(int), 0, bins - 1)
        inside = end - dt / 2 < span
        np.add.at(tokens, i[inside], s.column("decode_tokens")[inside])
        np.add.at(seqs, i[inside], (s.column("seqs") * dt)[inside])
        np.add.at(pages, i[inside], (s.column("pages") * dt)[inside])
        np.add.at(busy, i[inside], dt[inside])
    k = len(sim.replicas)
    return {"t_s": edges[1:], "tokens_per_s": tokens / width, "running_seqs": seqs / (width * k),
            "kv_used_fraction": pages / (width * k * sim.budget.pages), "busy_fraction": np.minimum(busy / (width * k), 1.0)}


def simulate_serving(config: ServingConfig, *, requests: Requests | None = None, on_progress=None, audit: bool = False,
                     timer=None, dcn=None, generation=None, run_ahead: bool = True,
                     engine=None) -> ServingResult:
    """Run one serving simulation (see podsim.serving.simulate); no I/O. `generation`: the
    config's generation with figures overridden (a scenario's), else its published one.
    `run_ahead=False`: every step through the clock (the same result, slower; for tests).
    `engine`: engine parameters (`podsim.serving.engines.EngineModel`) in place of the config's
    (what-ifs and diagnostics)."""
    sim = ServingSim(config, requests, timer=timer, on_progress=on_progress, audit=audit, dcn=dcn, generation=generation,
                     run_ahead=run_ahead, engine=engine)
    wall = sim.run()
    metrics, tables = serving_metrics(sim, wall)
    notes = [sim.engine.describe(), f"weight matmuls at {matmul_peak_source(sim)}",
             f"on-chip prefetch: {sim.timer.onchip_source}", f"collectives: {sim.timer.collective_source}"]
    if sim.kv_transfer is not None:
        notes.append(f"KV transfer over the {sim.kv_transfer.path}: {sim.kv_transfer.fixed_s * 1e6:.1f} us + "
                     f"{1 / sim.kv_transfer.per_byte_s / 1e9:.3g} GB/s per chip")
    return ServingResult(config, sim.req, sim.log, metrics, sim.budget, tables, tuple(notes))
