"""A fleet seen pod by pod: each pod's free space as of its version, and each kind of job's
answers per pod, kept until the pod changes (`PodState.pod_version`)."""

from __future__ import annotations

import numpy as np

from podsim.placement import PodState
from podsim.placement.pods import pod_space
from podsim.placement.space import FreeSpace

STALE = object()  # a memo's best answer must be chosen again


class PodMemo:
    """One kind's answer in every pod, each as of the pod's version (None: not searched yet)."""

    __slots__ = ("versions", "answers", "best", "top", "state_version")

    def __init__(self, pods: int):
        self.state_version = -1  # the state's version when the answers were last brought up to date
        self.versions = np.full(pods, -1, np.int64)
        self.answers: dict[int, object] = {}  # pod -> its ranked fit (one slice) or its slices (multislice)
        self.best = STALE  # the fleet's answer (a Fit, GangFit or None)
        self.top = STALE  # one slice: the least-ranked pod's answer (None: no pod), kept as pods change



class PodView:
    """One pod's free space as of its version, and the counts that rule a kind out cheaply."""

    __slots__ = ("version", "space", "free", "_usable")

    def __init__(self, version: int, space: FreeSpace):
        self.version, self.space = version, space
        self.free = int(np.count_nonzero(space.chip_free))
        self._usable: dict[bool, int] = {}

    def usable(self, degraded: bool) -> int:
        """Cubes a cube-level slice may take (whole, free, with working OCS)."""
        n = self._usable.get(degraded)
        if n is None:
            cubes = self.space.cube_usable_degraded if degraded else self.space.cube_usable
            n = self._usable[degraded] = int(np.count_nonzero(cubes))
        return n


class PodViews:
    """Every pod's `PodView` of a live state, made again only when the pod changed."""

    def __init__(self, state: PodState):
        self.state = state
        self._views: dict[int, PodView] = {}

    def __call__(self, pod: int) -> PodView:
        version = int(self.state.pod_version[pod])
        view = self._views.get(pod)
        if view is None or view.version != version:
            view = self._views[pod] = PodView(version, pod_space(self.state, pod))
        return view

    def ports(self, pod: int) -> tuple[np.ndarray, np.ndarray] | None:
        """The pod's cubes whose OCS ports are healthy (strict, and for a degraded torus), None without OCS."""
        lay = self.state.layout
        if not lay.ocs:
            return None
        c0 = pod * lay.cubes_per_pod
        return (self.state.cube_ports_healthy[c0:c0 + lay.cubes_per_pod],
                self.state.cube_ports_degraded_healthy[c0:c0 + lay.cubes_per_pod])
