"""Capacity for serving: the fewest chips that serve a request rate within latency targets.

For each candidate slice shape, the fewest replicas whose serving simulation at `rate` meets
p99 TTFT <= `ttft_p99` and p99 TPOT <= `tpot_p99`, each size judged over `replicates` runs with
independent seeds (podsim.stats.replicate_seeds): on the replicates' mean (`judge: mean`) or on
the upper end of its 95% Student-t interval (`judge: interval`, the cautious answer). A size
whose runs leave a request unfinished at the end of the drain, or reject one, misses whatever
its percentiles say (they are over the finished requests). The search assumes more replicas
never miss what fewer meet: it doubles from `low` until a size meets (or `high` misses: no
answer), then bisects. The answer over shapes is the fewest chips (then the lower cost per
million tokens).

`max_rate` answers the other way round, as MLPerf Inference's Server scenario reports: the
highest Poisson (or bursty) arrival rate at which one configuration meets a latency percentile
bound, bisected over the rate with the same replicate seeds at every probe;
`mlperf_server_latency_s` is the latency a run must keep within the bound for loadgen to call
it VALID (its percentile and its early-stopping estimate).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from podsim.errors import PodsimError
from podsim.quantities import MAX_REQUESTS
from podsim.serving.result import ServingResult, simulate_serving
from podsim.serving.spec import CapacitySearch, ServingConfig
from podsim.stats import metric_intervals, replicate_seeds
from podsim.topology import parse_shape
from podsim.units import format_seconds

TARGETS = ("ttft_p99_s", "tpot_p99_s")
SUMMARISED = (*TARGETS, "ttft_p50_s", "tpot_p50_s", "e2e_p99_s", "slo_attainment", "goodput_rps", "tokens_per_s_per_chip",
              "cost_per_million_tokens_usd", "energy_per_million_tokens_kwh", "requests_unfinished", "requests_rejected")


@dataclass(frozen=True)
class Probe:
    """One size's verdict: its replicas and chips, whether it met, its figures' intervals."""

    slice: str
    replicas: int
    chips: int
    met: bool
    why: str
    intervals: dict  # metric -> Interval.to_dict()

    def mean(self, metric: str) -> float:
        iv = self.intervals.get(metric)
        return math.nan if iv is None else iv["mean"]


@dataclass(frozen=True)
class CapacityAnswer:
    """The fewest chips over the candidate shapes, and every probe the search ran."""

    search: CapacitySearch
    answer: Probe | None  # None: no shape meets the targets within the replica range
    best: dict[str, Probe | None]  # per slice shape: its fewest replicas that meet
    probes: tuple[Probe, ...] = field(default=())

    def metrics(self) -> dict:
        a = self.answer
        out = {"capacity_rate_rps": self.search.rate / 3600.0, "capacity_met": a is not None,
               "capacity_chips": a.chips if a else None, "capacity_replicas": a.replicas if a else None,
               "capacity_slice": a.slice if a else None, "capacity_replicates": self.search.replicates,
               "capacity_judge": self.search.judge}
        for m in ("ttft_p99_s", "tpot_p99_s", "cost_per_million_tokens_usd", "tokens_per_s_per_chip"):
            out[f"capacity_{m}"] = a.mean(m) if a else None
        return out

    def table(self) -> dict[str, list]:
        """One row per probe (by slice, then replicas): the slice, replicas, chips, verdict and
        the targets' intervals."""
        cols: dict[str, list] = {"slice": [], "replicas": [], "chips": [], "met": [], "why": []}
        for m in (*TARGETS, "cost_per_million_tokens_usd", "slo_attainment"):
            for part in ("mean", "low", "high"):
                cols[f"{m.removesuffix('_s')}_{part}"] = []
        for p in sorted(self.probes, key=lambda p: (p.slice, p.replicas)):
            cols["slice"].append(p.slice)
            cols["replicas"].append(p.replicas)
            cols["chips"].append(p.chips)
            cols["met"].append(p.met)
            cols["why"].append(p.why)
            for m in (*TARGETS, "cost_per_million_tokens_usd", "slo_attainment"):
                iv = p.intervals.get(m, {})
                for part in ("mean", "low", "high"):
                    v = iv.get(part)
                    cols[f"{m.removesuffix('_s')}_{part}"].append(math.nan if v is None else v)
        return cols


def _incomplete(each: list[dict]) -> str:
    """Why a probe misses whatever its percentiles say (a replicate left requests unfinished or
    rejected them), or ''."""
    if any(m["requests_unfinished"] or m["requests_rejected"] for m in each):
        worst = max(each, key=lambda m: m["requests_unfinished"] + m["requests_rejected"])
        return f"{worst['requests_unfinished']} unfinished, {worst['requests_rejected']} rejected requests in a replicate"
    return ""


def _verdict(search: CapacitySearch, ivs: dict, each: list[dict]) -> tuple[bool, str]:
    if why := _incomplete(each):
        return False, why
    misses = []
    for metric, limit in (("ttft_p99_s", search.ttft_p99), ("tpot_p99_s", search.tpot_p99)):
        iv = ivs.get(metric)
        if iv is None or math.isnan(iv.mean):
            misses.append(f"no {metric}")
            continue
        value = iv.high if search.judge == "interval" and iv.n > 1 else iv.mean
        if value > limit:
            name = metric.removesuffix("_s").replace("_p99", " p99").upper().replace(" P99", " p99")
            misses.append(f"{name} {format_seconds(value)} > {format_seconds(limit)}")
    return (not misses), "; ".join(misses) or "met"


def _refuse_rateless(config: ServingConfig, search: str) -> None:
    """Refuse arrivals without a rate for `search`, which sets it."""
    if (kind := config.requests.arrivals.kind) in ("trace", "offline"):
        raise PodsimError(f"{search} sets the request rate; {kind} arrivals have none "
                          "(use poisson or bursty arrivals, lengths may still come from a trace)")


def _at_rate(config: ServingConfig, rate) -> ServingConfig:
    """`config` with its arrivals at `rate` (requests per hour)."""
    arrivals = config.requests.arrivals.model_copy(update={"rate": rate})
    return config.model_copy(update={"requests": config.requests.model_copy(update={"arrivals": arrivals})})


def _bisect(meets: Callable, met, missed, width, *, integer: bool = False) -> tuple:
    """Halve the bracket between a value that meets (`met`) and one that misses (`missed`, on
    either side) until it is at most `width` wide, over the integers with `integer`; the final
    (met, missed). Both searches here assume one crossing (module docstring)."""
    while abs(missed - met) > width:
        mid = (met + missed) // 2 if integer else (met + missed) / 2
        if meets(mid):
            met = mid
        else:
            missed = mid
    return met, missed


def on_slice(config: ServingConfig, shape: str) -> ServingConfig:
    """`config` with each replica on slice `shape`: a tensor degree that does not fill the shape's
    chips is dropped (a candidate shape takes its own)."""
    model = config.model
    if model.tensor is not None and model.tensor * model.expert != math.prod(parse_shape(shape)):
        model = model.model_copy(update={"tensor": None})
    return config.model_copy(update={"slice": shape, "model": model})


def serving_capacity(config: ServingConfig, search: CapacitySearch, *, generation=None,
                     on_probe: Callable[[Probe], None] | None = None) -> CapacityAnswer:
    """Search every candidate slice for its fewest replicas (module docstring); no I/O."""
    if config.disaggregated is not None:
        raise PodsimError("the capacity search scales colocated replicas; for prefill and decode pools, sweep "
                          "disaggregated.prefill and disaggregated.decode instead")
    _refuse_rateless(config, "the capacity search")
    base = _at_rate(config, search.rate)
    seeds = replicate_seeds(config.seed, search.replicates)
    shapes = search.slices or (config.slice,)
    probes: list[Probe] = []
    best: dict[str, Probe | None] = {}
    for shape in shapes:
        chips = math.prod(parse_shape(shape))
        cfg = on_slice(base, shape)
        seen: dict[int, Probe] = {}

        def probe(n: int, cfg=cfg, shape=shape, chips=chips, seen=seen) -> Probe:
            if n not in seen:
                each = [simulate_serving(cfg.model_copy(update={"replicas": n, "seed": s}), generation=generation).metrics
                        for s in seeds]
                ivs = metric_intervals(each, SUMMARISED)
                met, why = _verdict(search, ivs, each)
                seen[n] = Probe(shape, n, n * chips, met, why, {k: iv.to_dict() for k, iv in ivs.items()})
                probes.append(seen[n])
                if on_probe is not None:
                    on_probe(seen[n])
            return seen[n]

        lo, hi = search.replicas
        n, last_missed, first_met = lo, lo - 1, None
        while n <= hi:
            if probe(n).met:
                first_met = n
                break
            last_missed = n
            n = min(2 * n, hi) if n < hi else hi + 1
        if first_met is None:
            best[shape] = None
            continue
        # last_missed misses (or is below the range), first_met meets
        best[shape] = probe(_bisect(lambda n, probe=probe: probe(n).met, first_met, last_missed, 1, integer=True)[0])
    found = [p for p in best.values() if p is not None]
    answer = min(found, key=lambda p: (p.chips, p.mean("cost_per_million_tokens_usd") if not math.isnan(
        p.mean("cost_per_million_tokens_usd")) else math.inf)) if found else None
    return CapacityAnswer(search, answer, best, tuple(probes))


def answer_text(ans: CapacityAnswer) -> str:
    """The capacity answer as people read it (CLI, report, dashboard)."""
    s = ans.search
    head = (f"fewest chips for {s.rate / 3600:g} requests/s at p99 TTFT <= {format_seconds(s.ttft_p99)} and p99 TPOT <= "
            f"{format_seconds(s.tpot_p99)} "
            f"({s.replicates} replicate{'s' if s.replicates != 1 else ''} per size, judged on the {s.judge})")
    if ans.answer is None:
        return f"{head}: none within {s.replicas[0]}..{s.replicas[1]} replicas of {', '.join(ans.best)}"
    a = ans.answer
    return f"{head}: {a.chips} chips = {a.replicas} x {a.slice}"


@dataclass(frozen=True)
class RateProbe:
    """One arrival rate's verdict: whether its replicates met the bound, and the metric's interval."""

    rate_rps: float
    met: bool
    why: str
    interval: dict  # the metric's Interval.to_dict() over the replicates
    scheduled_rps: float  # the replicates' mean realised arrival rate (requests counted / window)


@dataclass(frozen=True)
class MaxRate:
    """The highest arrival rate probed that meets `metric <= bound_s` (`rate_rps`; None: even the
    lowest probed misses) and the lowest probed above it that misses (`missed_rps`; None: the
    search's ceiling meets): the answer is within `tolerance_rps` of the crossing."""

    metric: str
    bound_s: float
    replicates: int
    judge: str
    tolerance_rps: float
    rate_rps: float | None
    missed_rps: float | None
    probes: tuple[RateProbe, ...]

    def at(self, rate_rps: float | None) -> RateProbe | None:
        """The probe at `rate_rps` (None when not probed)."""
        return next((p for p in self.probes if p.rate_rps == rate_rps), None)


def early_stopping_latency_s(latencies_s: np.ndarray, percentile: float = 0.99, confidence: float = 0.99) -> float:
    """MLPerf loadgen's early-stopping estimate of a latency percentile (mlcommons/inference@05a9cec
    loadgen/results.cc `EarlyStopping`, Server case; early_stopping.cc): the lowest bound L for
    which n queries with t over L still let loadgen conclude at `confidence` that the true
    `percentile` is within L, i.e.
    I_percentile(n - t, t + 1) <= 1 - confidence (the regularised incomplete beta loadgen's
    `odds` computes, tolerance 0). NaN latencies (unfinished queries) count as over any bound;
    inf when no t passes (too few queries)."""
    from scipy.special import betainc

    lat = np.sort(np.where(np.isnan(latencies_s), np.inf, np.asarray(latencies_s, dtype=float)))
    n = len(lat)
    t = np.arange(n)
    ok = np.flatnonzero(betainc(n - t, t + 1, percentile) <= 1 - confidence)
    return float(lat[n - 1 - ok.max()]) if len(ok) else math.inf


def mlperf_server_latency_s(result: ServingResult, percentile: float = 99.0) -> float:
    """The latency an MLPerf Server run must keep within its target for loadgen's VALID: the
    end-to-end `percentile` of every counted request ("Performance constraints satisfied") and
    its early-stopping estimate ("Early stopping satisfied"), the larger; a request unfinished
    at the drain's end counts as over any bound."""
    req, log, cfg = result.requests, result.log, result.config
    counted = (req.arrival_s >= cfg.warmup) & (req.arrival_s < cfg.duration)
    e2e = (log.end_s - req.arrival_s)[counted]
    if not len(e2e):
        return math.nan
    pct = float(np.percentile(np.where(np.isnan(e2e), np.inf, e2e), percentile))
    return max(pct, early_stopping_latency_s(e2e, percentile / 100.0))


RATE_STEP = 1.25  # the bracketing step: x or / this factor per probe until the verdict changes


def max_rate(config: ServingConfig, bound_s: float, *, metric: str | Callable[[ServingResult], float] = "e2e_p99_s",
             replicates: int = 4,
             judge: str = "mean", tolerance_rps: float = 0.01, start_rps: float | None = None, timer=None,
             generation=None, engine=None,
             on_probe: Callable[[RateProbe], None] | None = None) -> MaxRate:
    """The highest arrival rate (requests/s) at which `config` meets `metric` <= `bound_s`: MLPerf
    Inference's Server result (the scheduled rate of a run whose p99 latency is within the bound).

    Every probe runs `replicates` simulations with the seeds `replicate_seeds(config.seed,
    replicates)`, the same at every rate (common random numbers: a seed's Poisson arrival times
    at rate r are its unit-rate times / r), judged on their mean (`judge: mean`) or the upper end
    of the 95% interval (`interval`); a probe whose replicate leaves a request unfinished or
    rejected misses. From `start_rps` (default: the config's rate) the rate is multiplied (or
    divided) by RATE_STEP until the verdict changes, then bisected until the bracket is at most
    `tolerance_rps` wide. The search assumes a higher rate never meets what a lower one misses
    (near saturation the curve is noisy; the bisection then returns one crossing, reproducibly).
    `metric`: a serving metric's name, or a function of a result (e.g. mlperf_server_latency_s).
    `timer`, `generation`, `engine`: passed to every simulation (what-ifs). No I/O."""
    _refuse_rateless(config, "the rate search")
    arrivals = config.requests.arrivals
    if not (bound_s > 0 and math.isfinite(bound_s)):
        raise PodsimError(f"rate search bound {bound_s!r} s: give a positive, finite latency")
    if not (tolerance_rps > 0 and math.isfinite(tolerance_rps)):
        raise PodsimError(f"rate search tolerance {tolerance_rps!r} requests/s: give a positive, finite rate")
    if replicates < 1:
        raise PodsimError(f"rate search replicates {replicates!r}: give at least 1")
    if judge not in ("mean", "interval"):
        raise PodsimError(f"rate search judge {judge!r}: allowed mean, interval")
    start = arrivals.rate_per_s if start_rps is None else float(start_rps)
    if not (start > 0 and math.isfinite(start)):
        raise PodsimError(f"rate search start {start_rps!r} requests/s: give a positive, finite rate")
    window = config.duration - config.warmup
    ceiling = MAX_REQUESTS / config.duration / 2  # draw_requests' limit, with room for the Poisson spread
    floor = tolerance_rps
    seeds = replicate_seeds(config.seed, replicates)
    name = metric.__name__ if callable(metric) else metric
    seen: dict[float, RateProbe] = {}

    def probe(rate: float) -> RateProbe:
        if rate not in seen:
            cfg = _at_rate(config, rate * 3600.0)
            runs = [simulate_serving(cfg.model_copy(update={"seed": s}), timer=timer, generation=generation,
                                     engine=engine) for s in seeds]
            each = [r.metrics for r in runs]
            if callable(metric):
                each = [{**m, name: float(metric(r))} for m, r in zip(each, runs, strict=True)]
            elif metric not in each[0]:
                raise PodsimError(f"rate search metric {metric!r} is not a serving metric; e.g. e2e_p99_s, ttft_p99_s, "
                                  "tpot_p99_s")
            iv = metric_intervals(each, (name,))[name]
            value = iv.high if judge == "interval" and iv.n > 1 else iv.mean
            why = _incomplete(each)
            if not why and math.isnan(value):
                why = f"no {name}"
            elif not why and value > bound_s:
                why = f"{name} {format_seconds(value)} > {format_seconds(bound_s)}"
            seen[rate] = RateProbe(rate, not why, why or "met", iv.to_dict(),
                                   float(np.mean([m["requests"] for m in each])) / window)
            if on_probe is not None:
                on_probe(seen[rate])
        return seen[rate]

    lo, hi = None, None  # lo meets, hi misses
    rate = min(start, ceiling)
    if probe(rate).met:
        lo = rate
        while hi is None and lo < ceiling:
            rate = min(lo * RATE_STEP, ceiling)
            if probe(rate).met:
                lo = rate
            else:
                hi = rate
    else:
        hi = rate
        while lo is None and hi > floor:
            rate = max(hi / RATE_STEP, floor)
            if probe(rate).met:
                lo = rate
            else:
                hi = rate
    if lo is not None and hi is not None:
        lo, hi = _bisect(lambda r: probe(r).met, lo, hi, tolerance_rps)
    return MaxRate(name, bound_s, replicates, judge, tolerance_rps, lo, hi,
                   tuple(sorted(seen.values(), key=lambda p: p.rate_rps)))
