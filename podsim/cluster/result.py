"""What a cluster simulation returns: per-job outcomes, the fleet's metrics, time series.

Definitions (chip-seconds over the measured window [warm-up, horizon], the whole horizon by
default; reported in chip-hours):
- utilisation = busy chip-hours / healthy chip-hours (a chip is busy while a job holds it,
  restart overhead and OCS reconfiguration included; healthy while no failure covers it);
- goodput = useful chip-hours / allocated chip-hours, where allocated = useful + lost (work
  since the last checkpoint, thrown away by a failure or a preemption) + overhead (restart,
  OCS reconfiguration, a degraded slice's extra time); fleet_goodput = useful / all chip-hours;
- the breakdown: every chip-hour of the window in one bucket (BREAKDOWN): useful, lost to
  failures, lost to preemptions, restarts, OCS reconfiguration, degraded slowdown, idle while
  jobs waited (fragmentation, queue order), idle with no job waiting, down (failed parts);
- wait = first start - submission over the jobs that arrived in the window and could ever be
  placed; a job still queued at the end counts with its wait so far (a lower bound), so a fleet
  too small to drain its queue does not look better (`wait_*_started_s`: started jobs only);
  slowdown = (end - submission) / max(nominal run time, 10 s) over completed jobs of the window
  (bounded slowdown, Feitelson's tau = 10 s); job completion time (JCT) = end - submission,
  completed jobs of the window;
- wait split (per job, its first wait): waiting for resource while fewer healthy chips are free
  than the job needs, for shape while enough are free but not in a form its slice can take;
  wait_shape_share = shape seconds / all waiting seconds of the window's jobs that started;
- every job is in exactly one state at the end (STATUSES): completed, running, queued, never
  placeable or not arrived (submitted after the horizon);
- fragmentation = 1 - largest placeable slice / free chips, averaged over the samples with
  free chips; jobs never placed are those whose slice cannot fit even an empty, healthy fleet.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from podsim.stats import percentile
from podsim.topology.shapes import slice_name

SLOWDOWN_TAU_S = 10.0
STATUSES = ("completed", "running", "queued", "unplaceable", "not_arrived")
# Where the window's chip-hours went: (metric, label); they add up to fleet_chip_h.
BREAKDOWN = (
    ("useful_chip_h", "useful"),
    ("lost_failure_chip_h", "lost to failures (work since the last checkpoint)"),
    ("lost_preemption_chip_h", "lost to preemptions (work since the last checkpoint)"),
    ("restart_chip_h", "restarts from a checkpoint"),
    ("reconfiguration_chip_h", "OCS reconfiguration"),
    ("degraded_chip_h", "slowed slices' extra run time (degraded torus, non-native placement)"),
    ("idle_queued_chip_h", "idle while jobs waited (fragmentation, queue order)"),
    ("idle_empty_chip_h", "idle, no job waiting"),
    ("down_chip_h", "down (failed parts)"),
)


@dataclass(frozen=True)
class JobOutcome:
    """One job at the end of the simulation."""

    id: str
    submit_s: float
    shape: tuple[int, ...]
    twisted: bool  # as requested
    untwisted: bool  # ran as a plain torus (twisted request on a fleet without OCS)
    chips: int
    priority: int
    status: str  # completed, running, queued, unplaceable, not_arrived (submitted after the horizon)
    first_start_s: float
    end_s: float
    nominal_s: float  # run time on the slice asked for, without interruptions
    runs: int
    interruptions: int
    preemptions: int
    allocated_chip_s: float
    useful_chip_s: float
    lost_chip_s: float
    overhead_chip_s: float
    progress: float
    reason: str
    wait_shape_s: float = math.nan  # of the first wait: enough chips free, not in a form the slice takes
    wait_resource_s: float = math.nan  # of the first wait: fewer chips free than the job needs
    placement: str = ""  # the last run's slice: native, fold, split or scatter ('' never ran)
    slowdown: float = math.nan  # the last run's run time factor (non-native placement x degraded torus)

    @property
    def wait_s(self) -> float:
        return self.first_start_s - self.submit_s

    @property
    def jct_s(self) -> float:
        """Job completion time: end - submission (NaN unless completed)."""
        return self.end_s - self.submit_s if self.status == "completed" else math.nan


@dataclass(frozen=True, eq=False)
class ClusterResult:
    """The simulator's record: metrics (flat dict), per-job outcomes, time series, never-placed
    shapes, the config. Outputs (CLI, dashboard, store, report) read it as the RunResult
    `podsim.scenario.run.cluster_run_result` makes of it."""

    metrics: dict
    jobs: tuple[JobOutcome, ...]
    timeseries: dict[str, np.ndarray]
    unplaceable: tuple[dict, ...]
    config: dict


def derived_series(ts: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Ratios over time from the sampled counts (NaN where undefined): utilisation = busy /
    healthy chips; goodput so far = 1 - (lost + overhead) / busy chip-seconds; fragmentation =
    1 - largest placeable slice / free chips."""
    busy, healthy = ts["busy_chips"], ts["healthy_chips"]
    out = {}
    with np.errstate(invalid="ignore", divide="ignore"):
        out["utilisation"] = np.where(healthy > 0, busy / healthy, np.nan)
        if "busy_chip_s" in ts:
            wasted = ts["lost_chip_s"] + ts["overhead_chip_s"]
            out["goodput_cumulative"] = np.where(ts["busy_chip_s"] > 0, 1.0 - wasted / ts["busy_chip_s"], np.nan)
        if "largest_placeable_chips" in ts:
            free = healthy - busy
            out["fragmentation"] = np.where(free > 0, 1.0 - ts["largest_placeable_chips"] / np.maximum(free, 1), np.nan)
    return out


def summarise(config, layout, outcomes: list[JobOutcome], series: dict[str, np.ndarray], counters: dict,
              acct: dict[str, float], wall_s: float, seed: int, end_s: float | None = None) -> ClusterResult:
    """Fold per-job outcomes and the window's chip-second integrals (`acct`: busy, healthy,
    idle_queued and the run parts of podsim.cluster.accounting) into the metrics of the module
    docstring; `end_s` is when the simulation stopped (the horizon, later with a drain)."""
    t0, t1 = config.warmup_s, config.horizon_s
    end_s = t1 if end_s is None else end_s
    status = np.array([o.status for o in outcomes])
    counts = {s: int((status == s).sum()) for s in STATUSES}
    measured = [o for o in outcomes if t0 <= o.submit_s < t1]
    arrived = [o for o in measured if o.status not in ("unplaceable", "not_arrived")]
    started = np.array([o.wait_s for o in arrived if not math.isnan(o.first_start_s)])
    # The capacity planner's wait: jobs still queued at the end count with their wait so far
    # (a lower bound), so a fleet too small to drain its queue does not look better.
    waits = np.array([end_s - o.submit_s if math.isnan(o.first_start_s) else o.wait_s for o in arrived])
    done = [o for o in measured if o.status == "completed"]
    slowdown = np.array([(o.end_s - o.submit_s) / max(o.nominal_s, SLOWDOWN_TAU_S) for o in done])
    jct = np.array([o.jct_s for o in done])
    split = np.array([(o.wait_shape_s, o.wait_resource_s) for o in arrived
                      if not math.isnan(o.first_start_s) and not math.isnan(o.wait_shape_s)]).reshape(-1, 2)
    h = 3600.0
    fleet_chip_s = layout.n_chips * (t1 - t0)
    busy, healthy = acct["busy"], acct["healthy"]
    lost = acct["lost_failure"] + acct["lost_preemption"]
    overhead = acct["restart"] + acct["reconfiguration"] + acct["degraded"]
    useful = acct["useful"]
    alloc = useful + lost + overhead
    metrics = {
        "generation": config.generation, "pods": config.pods, "chips": layout.n_chips, "ocs": layout.ocs,
        "policy": config.policy, "solver": config.solver, "horizon_s": config.horizon_s, "seed": seed,
        "warmup_s": t0, "drain_s": end_s - t1,
        "jobs_total": len(outcomes), "jobs_completed": counts["completed"], "jobs_running": counts["running"],
        "jobs_queued": counts["queued"], "jobs_unplaceable": counts["unplaceable"],
        "jobs_not_arrived": counts["not_arrived"], "jobs_started": sum(not math.isnan(o.first_start_s) for o in outcomes),
        "jobs_measured": len(measured),
        "jobs_untwisted": sum(o.untwisted for o in outcomes),
        "utilisation": busy / healthy if healthy > 0 else math.nan,
        "goodput": useful / alloc if alloc > 0 else math.nan,
        "fleet_goodput": useful / fleet_chip_s,
        "availability": healthy / fleet_chip_s,
        "wait_p50_s": percentile(waits, 50), "wait_p95_s": percentile(waits, 95), "wait_p99_s": percentile(waits, 99),
        "wait_mean_s": float(waits.mean()) if len(waits) else math.nan,
        "wait_p50_started_s": percentile(started, 50), "wait_p95_started_s": percentile(started, 95),
        "wait_p99_started_s": percentile(started, 99),
        "wait_p95_with_queued_s": percentile(waits, 95), "wait_p99_with_queued_s": percentile(waits, 99),
        "jct_mean_s": float(jct.mean()) if len(jct) else math.nan, "jct_p50_s": percentile(jct, 50),
        "jct_p95_s": percentile(jct, 95),
        "wait_shape_mean_s": float(split[:, 0].mean()) if len(split) else math.nan,
        "wait_resource_mean_s": float(split[:, 1].mean()) if len(split) else math.nan,
        "wait_shape_share": float(split[:, 0].sum() / split.sum()) if split.sum() > 0 else math.nan,
        "slowdown_mean": float(slowdown.mean()) if len(slowdown) else math.nan,
        "slowdown_p50": percentile(slowdown, 50), "slowdown_p95": percentile(slowdown, 95), "slowdown_p99": percentile(slowdown, 99),
        "fleet_chip_h": fleet_chip_s / h, "healthy_chip_h": healthy / h, "busy_chip_h": busy / h,
        "allocated_chip_h": alloc / h, "useful_chip_h": useful / h, "lost_chip_h": lost / h,
        "overhead_chip_h": overhead / h,
        "lost_failure_chip_h": acct["lost_failure"] / h, "lost_preemption_chip_h": acct["lost_preemption"] / h,
        "restart_chip_h": acct["restart"] / h, "reconfiguration_chip_h": acct["reconfiguration"] / h,
        "degraded_chip_h": acct["degraded"] / h, "idle_queued_chip_h": acct["idle_queued"] / h,
        "idle_empty_chip_h": max(0.0, healthy - busy - acct["idle_queued"]) / h,
        "down_chip_h": (fleet_chip_s - healthy) / h,
        "restarts": sum(max(0, o.runs - 1) for o in outcomes),
    }
    series = {**series, **derived_series(series)}
    largest = series.get("largest_placeable_chips")
    if largest is not None and len(largest):
        frag = series["fragmentation"][~np.isnan(series["fragmentation"])]
        metrics.update(largest_placeable_mean_chips=float(largest.mean()), largest_placeable_min_chips=float(largest.min()),
                       fragmentation_mean=float(frag.mean()) if len(frag) else 0.0)
    metrics.update(counters)
    metrics["engine_wall_s"] = wall_s
    groups: dict[tuple, list[JobOutcome]] = defaultdict(list)
    for o in outcomes:
        if o.status == "unplaceable":
            groups[(o.shape, o.twisted)].append(o)
    unplaceable = tuple(
        {"shape": slice_name(shape, tw), "jobs": len(group), "reason": group[0].reason}
        for (shape, tw), group in sorted(groups.items(), key=lambda kv: -len(kv[1])))
    return ClusterResult(metrics, tuple(outcomes), series, unplaceable, config.model_dump(mode="json"))
