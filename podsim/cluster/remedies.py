"""The cluster's remedies for a down OCS unit: degraded cube slices and spare OCS ports.

A job that allows it (`ClusterConfig.degraded_placement`) may run on a cube-level slice with
circuits left dark by a down OCS unit, at `degraded_slowdown` times its run time; with
`spare_ports` the fibers on failed OCS ports move to spare ports (the state's `remap_spares`).
"""

from __future__ import annotations

from podsim.cluster.config import ClusterConfig
from podsim.placement import PodState
from podsim.topology import PodLayout
from podsim.workload import Job


def allows_degraded(config: ClusterConfig, layout: PodLayout, job: Job) -> bool:
    """Whether the job's slice request may take a degraded cube slice."""
    mode = config.degraded_placement
    return layout.ocs and (mode == "all" or (mode == "requested" and job.allow_degraded))


def is_degraded(state: PodState, layout: PodLayout, slc) -> bool:
    """Whether a cube-level slice (a Slice or a Fit) has circuits left dark by a down OCS unit."""
    parts = getattr(slc, "parts", None)  # a multislice job's GangFit: degraded if any slice is
    if parts is not None:
        return any(is_degraded(state, layout, p) for p in parts)
    if not slc.circuits:
        return False
    if hasattr(slc, "assignment"):  # a placement search's Fit: its pod's down units darken it
        return bool(state.ocs_down_in_pod(slc.assignment.pod))
    return len(slc.circuits) < len(slc.cubes) * layout.ocs_per_pod


def remap_spare_ports(config: ClusterConfig, state: PodState) -> int:
    """With `config.spare_ports`: move fibers off failed OCS ports onto spares (cubes come
    back); returns the number of fibers moved."""
    if not config.spare_ports:
        return 0
    return len(state.remap_spares())
