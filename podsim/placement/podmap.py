"""A pod map: who holds each cube (or chip, on pods without cubes) and which parts are broken.

What a person wants to see of a pod state at a glance. Cube pods (v4, v5p, 7x) are mapped per
cube, since the OCS joins whole cubes; static 2-D pods (v2, v3, v5e, v6e) per chip.
"""

from __future__ import annotations

import numpy as np


def _status(chips: int, busy: int, failed: int, fault: bool) -> str:
    if failed == chips:
        return "failed"
    if failed or fault:
        return "degraded"
    if busy == chips:
        return "busy"
    return "partly busy" if busy else "free"


def pod_map(state) -> dict:
    """Cells of a `PodState` with their jobs and failures.

    Returns `{"unit": "cube" | "chip", "grid": cells per pod along each axis, "pods": n,
    "cells": [...]}`; each cell has `id` (cube or chip id), `pod`, `pos` (position in its pod's
    home arrangement), `chips`, `busy_chips`, `failed_chips`, `jobs` ({job id: chips held},
    most chips first), `failed_hosts` (hosts of the cell that are down), `ocs_fault` (cube pods:
    a failed OCS port of the cube or a failed OCS unit of its pod, so no cube-level slice can
    use it) and `status` (free, partly busy, busy, degraded, failed).
    """
    lay = state.layout
    owner = np.full(lay.n_chips, None, dtype=object)
    for job, slc in state.jobs.items():
        owner[slc.chips] = job
    failed = state.chip_failed
    cells = []
    if lay.has_cubes:
        ocs_fault = ~state.cube_ports_healthy
        for k in range(lay.n_cubes):
            chips = lay.cube_chips[k]
            hosts = lay.hosts_of_cube[k]
            cells.append(_cell(int(k), int(lay.pod_of_cube[k]), lay.cube_grid_pos[k], owner[chips], failed[chips],
                               int(state.host_failed[hosts].sum()), bool(ocs_fault[k])))
        grid = tuple(lay.generation.cube_grid)
    else:
        for c in range(lay.n_chips):
            cells.append(_cell(c, int(lay.pod_of_chip[c]), lay.coord[c], owner[c:c + 1], failed[c:c + 1],
                               int(state.host_failed[lay.host_of_chip[c]]), False))
        grid = tuple(lay.generation.pod_shape)
    return {"unit": "cube" if lay.has_cubes else "chip", "grid": grid, "pods": lay.pods, "cells": cells}


def _cell(cid: int, pod: int, pos, owners: np.ndarray, failed: np.ndarray, failed_hosts: int, ocs_fault: bool) -> dict:
    held = [o for o in owners if o is not None]
    jobs: dict[str, int] = {}
    for o in held:
        jobs[o] = jobs.get(o, 0) + 1
    jobs = dict(sorted(jobs.items(), key=lambda kv: (-kv[1], kv[0])))
    n, busy, bad = len(owners), len(held), int(failed.sum())
    return {"id": cid, "pod": pod, "pos": tuple(int(v) for v in pos), "chips": n, "busy_chips": busy,
            "failed_chips": bad, "jobs": jobs, "failed_hosts": failed_hosts, "ocs_fault": ocs_fault,
            "status": _status(n, busy, bad, ocs_fault)}
