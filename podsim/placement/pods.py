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

import numpy as np

from podsim.placement.space import Assignment, FreeSpace
from podsim.topology import PodLayout
from podsim.topology.circuits import Circuit


@functools.lru_cache(maxsize=64)
def pod_layout(layout: PodLayout) -> PodLayout:
    """The layout of one pod of `layout` (its ids are the pod's own, from 0)."""
    return PodLayout(layout.generation, pods=1, ocs=layout.ocs)


def pod_space(state, pod: int) -> FreeSpace:
    """The free space of one pod of `state` as a fleet of that pod alone (work in proportion to
    the pod), read-only: its cube masks are worked out once (`copy()` gives a mutable one)."""
    return FrozenSpace(pod_layout(state.layout), *state.pod_arrays(pod))


class FrozenSpace(FreeSpace):
    """A FreeSpace that is only read (its arrays are read-only), so the masks derived from its
    chips are kept: a scheduler asks the same pod about many kinds of slice."""

    def __init__(self, *args):
        super().__init__(*args)
        for arr in (self.chip_free, self.cube_ocs_ok, self.cube_ocs_degraded_ok):
            arr.setflags(write=False)
        self._derived: dict[str, np.ndarray] = {}

    def copy(self) -> FreeSpace:
        return FreeSpace(self.layout, self.chip_free, self.cube_ocs_ok, self.cube_ocs_degraded_ok, self.port_ok)

    def _kept(self, name: str, compute) -> np.ndarray:
        arr = self._derived.get(name)
        if arr is None:
            arr = self._derived[name] = compute()
        return arr

    @property
    def cube_whole_free(self) -> np.ndarray:
        return self._kept("whole", lambda: FreeSpace.cube_whole_free.fget(self))

    @property
    def cube_usable(self) -> np.ndarray:
        return self._kept("usable", lambda: self.cube_whole_free & self.cube_ocs_ok)

    @property
    def cube_usable_degraded(self) -> np.ndarray:
        return self._kept("usable_degraded", lambda: self.cube_whole_free & self.cube_ocs_degraded_ok)


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
