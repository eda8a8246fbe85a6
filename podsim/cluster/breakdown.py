"""Cluster results per slice shape: who waited, who lost work to failures.

The fleet metrics average over every job; large slices wait longer and lose more to failures
(a failure anywhere in a slice interrupts all of it), so planners read them per shape.
"""

from __future__ import annotations

import math

import numpy as np


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
            "wait_p50_s": float(np.percentile(waits, 50)) if len(waits) else math.nan,
            "wait_p95_s": float(np.percentile(waits, 95)) if len(waits) else math.nan,
            "allocated_chip_h": alloc, "useful_chip_h": useful,
            "lost_chip_h": float(jobs["lost_chip_s"][sel].sum()) / 3600,
            "overhead_chip_h": float(jobs["overhead_chip_s"][sel].sum()) / 3600,
            "goodput": useful / alloc if alloc > 0 else math.nan,
            "interruptions": int(jobs["interruptions"][sel].sum()),
        })
    return rows
