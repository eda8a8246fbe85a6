"""Cluster results per slice shape: who waited, who lost work to failures.

The fleet metrics average over every job; large slices wait longer and lose more to failures
(a failure anywhere in a slice interrupts all of it), so planners read them per shape.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from podsim.cluster.result import ClusterResult
from podsim.topology import slice_name


def by_shape(result: ClusterResult) -> list[dict]:
    """Per requested shape (twisted ones apart), smallest first: `shape`, `chips`, `jobs`,
    `completed`, `started`, `wait_p50_s`, `wait_p95_s` (over started jobs; NaN if none),
    `allocated_chip_h`, `useful_chip_h`, `lost_chip_h`, `overhead_chip_h`, `goodput` (useful /
    allocated; NaN if never allocated) and `interruptions`."""
    groups = defaultdict(list)
    for o in result.jobs:
        groups[(o.chips, o.shape, o.twisted)].append(o)
    rows = []
    for (chips, shape, twisted), jobs in sorted(groups.items()):
        waits = np.array([o.wait_s for o in jobs if not math.isnan(o.first_start_s)])
        alloc = sum(o.allocated_chip_s for o in jobs) / 3600
        useful = sum(o.useful_chip_s for o in jobs) / 3600
        rows.append({
            "shape": slice_name(shape, twisted), "chips": chips, "jobs": len(jobs),
            "completed": sum(o.status == "completed" for o in jobs), "started": len(waits),
            "wait_p50_s": float(np.percentile(waits, 50)) if len(waits) else math.nan,
            "wait_p95_s": float(np.percentile(waits, 95)) if len(waits) else math.nan,
            "allocated_chip_h": alloc, "useful_chip_h": useful,
            "lost_chip_h": sum(o.lost_chip_s for o in jobs) / 3600,
            "overhead_chip_h": sum(o.overhead_chip_s for o in jobs) / 3600,
            "goodput": useful / alloc if alloc > 0 else math.nan,
            "interruptions": sum(o.interruptions for o in jobs),
        })
    return rows
