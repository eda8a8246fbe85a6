"""A fleet's free space one pod at a time: what a scheduler of many pods searches.

A slice (one slice of a request) lies inside one pod, and every greedy fit ranks its candidates
by (score, pod, tie) with the score and the tie decided inside the pod (podsim.placement.greedy:
`Ranked`). So the greedy's answer on the whole fleet is the least (score, pod, tie) of each
pod's own answer, found in a one-pod space (`pod_space`: the pod's free chips, cubes and OCS
ports, numbered as in a fleet of one pod) and put back in fleet ids (`to_fleet`). A scheduler
that keeps each pod's answer until that pod changes (`PodState.pod_version`) searches only the
pods an event touched.
"""

from __future__ import annotations

import dataclasses
import functools

from podsim.placement.space import Assignment, FreeSpace
from podsim.topology import PodLayout
from podsim.topology.fabric import Circuit


@functools.lru_cache(maxsize=64)
def pod_layout(layout: PodLayout) -> PodLayout:
    """The layout of one pod of `layout` (its ids are the pod's own, from 0)."""
    return PodLayout(layout.generation, pods=1, ocs=layout.ocs)


def pod_space(state, pod: int) -> FreeSpace:
    """The free space of one pod of `state` as a fleet of that pod alone (work in proportion to the pod)."""
    return FreeSpace(pod_layout(state.layout), *state.pod_arrays(pod))


def to_fleet(layout: PodLayout, a: Assignment, pod: int) -> Assignment:
    """An assignment found in a one-pod space (`pod_space`), in the ids of pod `pod` of `layout`."""
    if pod == 0:
        return a
    cube0 = pod * layout.cubes_per_pod if layout.has_cubes else 0
    detail = a.detail
    if a.kind == "reshaped":  # a fold (chips, circuits, spec, the box's assignment) or a scatter (chips, (), spec)
        chip0, ocs0 = pod * layout.chips_per_pod, pod * layout.ocs_per_pod
        chips, circuits, spec, *host = detail
        detail = (tuple(c + chip0 for c in chips), tuple(Circuit(c[0] + ocs0, c[1], c[2]) for c in circuits), spec,
                  *(to_fleet(layout, h, pod) for h in host))
    return dataclasses.replace(a, pod=pod, cubes=tuple(c + cube0 for c in a.cubes), detail=detail)
