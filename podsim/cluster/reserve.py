"""EASY reservations found pod by pod: when a blocked head job will fit if the running jobs end
when expected, and where.

A one-slice head fits in one pod, and fitting only gets easier as jobs end (cube-level,
sub-cube, boxes, Hilbert's any N chips), so the fleet's earliest fit is the earliest of the
pods': per pod, its running jobs are released in expected-end order until the head fits
there (`_release_in`, as the whole-fleet `space_without` would release them), and the fleet's
answer is the pod that gets there first, ties broken as the greedy ranks pods. Each pod's
answer depends on that pod alone, so it is kept per head kind until the pod changes. A
cube-level head fits a pod once enough of its cubes are usable, so the job that lets it fit is
read off each cube's release position (`_cubes_usable_after`) instead of a fit per released job,
and its cubes are chosen only for the pod that wins.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from podsim.cluster.podviews import PodMemo, PodView, PodViews
from podsim.errors import InternalError
from podsim.placement.greedy import cubes_score, native, rank_any
from podsim.placement.pods import to_fleet
from podsim.placement.problem import PlacementSettings
from podsim.placement.space import Assignment, FreeSpace

if TYPE_CHECKING:
    from podsim.cluster.accounting import SimJob
    from podsim.topology import PodLayout

BY_POD_KINDS = ("cubes", "subcube", "box", "chipbox")  # whose fit only gets easier as chips come free


class PodReservations:
    """The running jobs of each pod, and EASY's earliest fit of a head pod by pod (see the module)."""

    def __init__(self, layout: PodLayout, views: PodViews, placement: str, settings: PlacementSettings, counters: dict):
        self.layout, self.views, self.placement, self.settings = layout, views, placement, settings
        self.counters = counters
        self.state = views.state
        self._memo: dict[tuple, PodMemo] = {}  # head kind -> per pod, when and where it fits as jobs end
        self._pod_jobs: list[dict[int, SimJob]] = [{} for _ in range(layout.pods)]  # running jobs touching each pod
        self._locals: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}  # (running job, pod) -> its chips, cubes there
        self._pods: dict[int, tuple] = {}  # pod -> (version, its running jobs in expected-end order, their parts, {degraded: usable_at})

    def covers(self, job: SimJob, opts, reshapes) -> bool:
        """Whether the job's earliest fit can be found pod by pod (one slice of a kind whose fit
        only gets easier as chips come free)."""
        if job.request.slices > 1:
            return False
        if self.placement == "hilbert":
            return True
        return bool(opts) and not reshapes and opts[0].kind in BY_POD_KINDS

    def job_started(self, job: SimJob) -> None:
        for pod in self._pods_of(job):
            self._pod_jobs[pod][job.idx] = job

    def job_stopped(self, job: SimJob) -> None:
        for pod in self._pods_of(job):
            del self._pod_jobs[pod][job.idx]
            self._locals.pop((job.idx, pod), None)

    def _pods_of(self, job: SimJob) -> set[int]:
        """The pods of the job's slice (each slice lies in one pod; a gang's in several)."""
        pod_of_chip = self.layout.pod_of_chip
        return {int(pod_of_chip[int(s.chips[0])]) for s in getattr(job.slice, "slices", (job.slice,))}

    def _jobs(self, pod: int) -> tuple[list[SimJob], list, dict]:
        """The pod's running jobs in expected-end order, their chips and cubes there
        (`_local`), and a memo of cube release positions: kept until the pod changes."""
        version = int(self.state.pod_version[pod])
        got = self._pods.get(pod)
        if got is None or got[0] != version:
            jobs = sorted(self._pod_jobs[pod].values(), key=lambda j: (j.expected_end_s, j.idx))
            got = self._pods[pod] = (version, jobs, [self._local(j, pod) for j in jobs], {})
        return got[1:]

    def earliest(self, head: SimJob, opts, reshapes, need: tuple[int, int | None]) -> tuple[float, Assignment] | None:
        """(expected end of the running job whose end lets the head fit, where it fits then, in
        fleet ids), or None if it fits in no pod even when all their jobs have ended."""
        memo = self._memo.get(head.key)
        if memo is None:
            memo = self._memo[head.key] = PodMemo(self.layout.pods)
        versions = self.state.pod_version
        changed = np.flatnonzero(versions != memo.versions)
        for pod in changed.tolist():
            got = self._release_in(head, pod, opts, reshapes, need)
            if got is None:
                memo.answers.pop(pod, None)
            else:
                memo.answers[pod] = got
        memo.versions[changed] = versions[changed]
        if not memo.answers:
            return None
        when, score, pod, tie, a = min(memo.answers.values(), key=lambda r: r[:4])
        if isinstance(a, int):  # a cube-level head ranked by its count: choose its cubes now
            a = self._reserved_fit(head, pod, a, (score, tie), opts)
            memo.answers[pod] = (when, score, pod, tie, a)
        return when[0], a

    def _reserved_fit(self, head: SimJob, pod: int, first: int, rank: tuple, opts) -> Assignment:
        """Where the cube-level head goes in `pod` once its running jobs up to `first` (in
        expected-end order) have ended, in fleet ids."""
        _, parts, _ = self._jobs(pod)
        space = self._released(pod, self.views(pod), parts[:first + 1])
        r = rank_any(space, opts, (), self.placement, self.settings)
        if r is None or (r[0], r[2]) != rank:
            raise InternalError(f"{head.request.name} does not fit pod {pod} as its usable cubes were counted")
        return to_fleet(self.layout, r[3], pod)

    def _release_in(self, head: SimJob, pod: int, opts, reshapes, need: tuple[int, int | None]):
        """((end, idx) of the running job whose end lets the head fit in `pod`, score, pod, tie,
        where) releasing the pod's running jobs in expected-end order, as `space_without` does;
        None if it never fits there. A cube-level head fits once enough cubes are usable, so the
        job is read off each cube's release position (`_cubes_usable_after`) without a fit per job."""
        jobs, parts, memo = self._jobs(pod)
        if not jobs:
            return None
        view = self.views(pod)
        chips_needed, cubes_needed_ = need
        if cubes_needed_ is not None:
            got = self._cubes_usable_after(head, pod, view, parts, memo, cubes_needed_)
            if got is None:
                return None
            first, usable = got
            j = jobs[first]  # ranked by the pod's count; its cubes are chosen if it wins (`_reserved_fit`)
            return (j.expected_end_s, j.idx), native(cubes_score(usable, self.placement)), pod, (), first
        space = view.space.copy()
        free = view.free
        ports = self.views.ports(pod)
        for j, (chips, cubes) in zip(jobs, parts, strict=True):
            space.give_back(chips, cubes, ports)
            free += len(chips)
            if free < chips_needed:
                continue
            self.counters["placement_calls"] += 1
            r = rank_any(space, opts, reshapes, self.placement, self.settings)
            if r is not None:
                return (j.expected_end_s, j.idx), r[0], pod, r[2], to_fleet(self.layout, r[3], pod)
        return None

    def _released(self, pod: int, view: PodView, parts: list) -> FreeSpace:
        """The pod's free space once the jobs of `parts` gave their chips (and ports) back."""
        space = view.space.copy()
        space.give_back(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]), self.views.ports(pod))
        return space

    def _cubes_usable_after(self, head: SimJob, pod: int, view: PodView, parts: list, memo: dict,
                            need: int) -> tuple[int, int] | None:
        """The position (0-based, in `parts`' order) of the release after which the pod has
        `need` usable cubes for the head, and how many it has then; None if never."""
        degraded = head.key[2]
        usable_at = memo.get(degraded)
        if usable_at is None:
            usable_at = memo[degraded] = self._usable_at(pod, view, parts, degraded)
        n = len(parts)
        if need > len(usable_at):
            return None
        k = max(int(np.partition(usable_at, need - 1)[need - 1]), 1)
        return None if k > n else (k - 1, int(np.count_nonzero(usable_at <= k)))

    def _usable_at(self, pod: int, view: PodView, parts: list, degraded: bool) -> np.ndarray:
        """Per cube of the pod, the release (1-based, in `parts`' order; 0: now) after which a
        cube-level slice may take it, len(parts) + 1 if never: once each of its chips is free or
        released, and its ports are free (or freed by a released slice with circuits) and
        healthy, as `space_without` counts them."""
        lay = self.layout
        n = len(parts)
        never = n + 1
        order = np.arange(1, n + 1)
        holder = np.where(view.space.chip_free, 0, never)  # the release (1-based) after which each chip is free
        holder[np.concatenate([p[0] for p in parts])] = np.repeat(order, [len(p[0]) for p in parts])
        ok_now = view.space.cube_ocs_degraded_ok if degraded else view.space.cube_ocs_ok
        ports_first = np.full(len(ok_now), never)  # the first release after which the cube's ports are usable
        ports = self.views.ports(pod)
        cubes = np.concatenate([p[1] for p in parts])
        if len(cubes) and ports is not None:
            at = np.repeat(order, [len(p[1]) for p in parts])
            at = np.where(ports[1 if degraded else 0][cubes], at, never)
            ports_first[cubes[::-1]] = at[::-1]  # a cube in two slices: the earlier release wins
        ports_first[ok_now] = 0
        return np.maximum(holder.reshape(lay.cubes_per_pod, -1).max(axis=1), ports_first)

    def _local(self, job: SimJob, pod: int) -> tuple[np.ndarray, np.ndarray]:
        """The job's chips in `pod` and (if its slice has circuits) its cubes there, in the pod's own ids."""
        key = (job.idx, pod)
        got = self._locals.get(key)
        if got is None:
            lay = self.layout
            lo = pod * lay.chips_per_pod
            chips = np.asarray(job.slice.chips)
            chips = chips[(chips >= lo) & (chips < lo + lay.chips_per_pod)] - lo
            cubes = np.zeros(0, np.int64)
            if job.slice.circuits and lay.has_cubes:
                c0 = pod * lay.cubes_per_pod
                cubes = np.asarray(job.slice.cubes, np.int64)
                cubes = cubes[(cubes >= c0) & (cubes < c0 + lay.cubes_per_pod)] - c0
            got = self._locals[key] = (chips, cubes)
        return got
