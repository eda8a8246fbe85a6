"""Cluster results broken down: where the fleet's chip-hours went, and per slice shape who
waited and who lost work to failures.

The fleet metrics average over every job; large slices wait longer and lose more to failures
(a failure anywhere in a slice interrupts all of it), so planners read them per shape.

`checkpoint_goodput` is the closed form a shape's goodput is checked against: a job on h hosts
is interrupted at rate lambda = h / MTBF (Poisson, exponential times to failure); each run pays
an overhead o (restart, OCS reconfiguration) and then keeps its work only at checkpoints, every
tau of compute. A run lasts 1/lambda on average and keeps tau for each checkpoint it reaches,
P(reach the k-th) = exp(-lambda (o + k tau)), so (renewal-reward) the share of a long job's
allocated time that is kept is lambda tau exp(-lambda o) q / (1 - q), q = exp(-lambda tau).
"""

from __future__ import annotations

import math

import numpy as np

from podsim.cluster.result import BREAKDOWN
from podsim.stats import percentile


def by_shape(jobs: dict[str, np.ndarray]) -> list[dict]:
    """Per requested shape of a run's jobs table (RunResult.table("jobs"); twisted shapes
    apart), fewest chips first: `shape`, `chips`, `jobs`, `completed`, `started`, `wait_p50_s`,
    `wait_p95_s` (over started jobs; NaN if none), `allocated_chip_h`, `useful_chip_h`,
    `lost_chip_h`, `overhead_chip_h`, `goodput` (useful / allocated; NaN if never allocated) and
    `interruptions`."""
    chips, shape = np.asarray(jobs["chips"]), np.asarray(jobs["shape"], dtype=object)
    rows = []
    for n, name in sorted(set(zip(chips.tolist(), shape.tolist(), strict=True))):
        sel = (chips == n) & (shape == name)
        started = ~np.isnan(jobs["first_start_s"][sel])
        waits = jobs["wait_s"][sel][started]
        alloc = float(jobs["allocated_chip_s"][sel].sum()) / 3600
        useful = float(jobs["useful_chip_s"][sel].sum()) / 3600
        rows.append({
            "shape": name, "chips": n, "jobs": int(sel.sum()),
            "completed": int((jobs["status"][sel] == "completed").sum()), "started": int(started.sum()),
            "wait_p50_s": percentile(waits, 50),
            "wait_p95_s": percentile(waits, 95),
            "allocated_chip_h": alloc, "useful_chip_h": useful,
            "lost_chip_h": float(jobs["lost_chip_s"][sel].sum()) / 3600,
            "overhead_chip_h": float(jobs["overhead_chip_s"][sel].sum()) / 3600,
            "goodput": useful / alloc if alloc > 0 else math.nan,
            "interruptions": int(jobs["interruptions"][sel].sum()),
        })
    return rows


def chip_hour_breakdown(metrics: dict) -> list[dict]:
    """Where a job stream's chip-hours went over its measured window, one row per bucket of
    BREAKDOWN (useful, lost to failures, lost to preemptions, restarts, OCS reconfiguration,
    degraded slowdown, idle while jobs waited, idle with no job waiting, down): `metric`,
    `label`, `chip_h`, `share` of the fleet's chip-hours. The rows add up to `fleet_chip_h`.
    A run stored before the breakdown existed gets its coarse split (lost, overhead, idle, down)."""
    fleet = metrics["fleet_chip_h"]
    if "idle_queued_chip_h" in metrics:
        parts = [(m, label, metrics[m]) for m, label in BREAKDOWN]
    else:
        idle = max(0.0, metrics["healthy_chip_h"] - metrics["busy_chip_h"])
        parts = [("useful_chip_h", "useful", metrics["useful_chip_h"]),
                 ("lost_chip_h", "lost to failures and preemptions", metrics["lost_chip_h"]),
                 ("overhead_chip_h", "restarts and OCS reconfiguration", metrics["overhead_chip_h"]),
                 ("idle_chip_h", "idle (healthy, free)", idle),
                 ("down_chip_h", "down (failed parts)", fleet - metrics["healthy_chip_h"])]
    return [{"metric": m, "label": label, "chip_h": float(v), "share": float(v) / fleet if fleet > 0 else math.nan}
            for m, label, v in parts]


def checkpoint_goodput(hosts: int, mtbf_s: float, checkpoint_s: float, overhead_s: float) -> float:
    """The long-run goodput (kept / allocated time) of a job on `hosts` hosts whose hosts fail
    independently with mean time between failures `mtbf_s`, checkpointing every `checkpoint_s`
    of compute after `overhead_s` per run (see the module): an upper bound for finite jobs'
    runs only in that a job's last run keeps all its work."""
    lam = hosts / mtbf_s
    q = math.exp(-lam * checkpoint_s)
    if q >= 1.0:
        return 1.0
    return lam * checkpoint_s * math.exp(-lam * overhead_s) * q / -math.expm1(-lam * checkpoint_s)


def goodput_gap(metrics: dict, jobs: dict[str, np.ndarray], top: int = 3) -> str:
    """Where the allocated chip-hours that were not useful went: the share of allocated lost to
    failures, lost to preemptions, spent restarting, reconfiguring and slowed down; then the
    shapes holding most of that (their share of it, and their goodput)."""
    alloc = metrics["allocated_chip_h"]
    if not alloc > 0:
        return "no chip-hours allocated"
    parts = [("lost to failures", "lost_failure_chip_h"), ("lost to preemptions", "lost_preemption_chip_h"),
             ("restarts", "restart_chip_h"), ("OCS reconfiguration", "reconfiguration_chip_h"),
             ("slowed slices", "degraded_chip_h")]
    text = ", ".join(f"{label} {metrics[k] / alloc:.1%}" for label, k in parts if metrics.get(k, 0) > 0)
    if not text:
        return "none"
    rows = by_shape(jobs)
    waste = sum(r["allocated_chip_h"] - r["useful_chip_h"] for r in rows)
    if waste > 0:
        worst = sorted(rows, key=lambda r: -(r["allocated_chip_h"] - r["useful_chip_h"]))[:top]
        text += "; most of it in " + ", ".join(
            f"{r['shape']} ({(r['allocated_chip_h'] - r['useful_chip_h']) / waste:.0%}, goodput {r['goodput']:.0%})"
            for r in worst)
    return f"of the allocated chip-hours: {text}"
