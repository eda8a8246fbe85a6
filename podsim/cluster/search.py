"""Where jobs' slices go on a fleet's current state: the cluster's placement search and its memos.

`SliceSearch` answers the scheduler's placement questions with placement's public fit API:
where a job fits now (`try_place`), where it fits keeping off a reserved slice
(`place_avoiding`), EASY's reservation for a blocked head (`reservation`), and the fewest
running jobs whose release lets a job fit (`first_fit_prefix`, for preemption).

It searches pod by pod (podsim.placement.pods): the greedy's answer on the fleet is the
least-ranked answer of its pods, each found in the pod alone. Each kind of job (shape, twist,
degraded, slices, sites: `SimJob.key`) keeps every pod's answer with the pod's version
(`PodState.pod_version`, bumped by every allocation, release, failure and repair there), so an
event costs one pod's search per kind asked, not the fleet's. A pod with fewer free chips (or
usable cubes) than the kind needs is not searched at all. EASY's reservation is found the same
way: per pod, the running jobs there are released in the order they are expected to end until
the head fits; the fleet's answer is the pod that gets there first (kept per pod and version).
A kind that CP-SAT batch admission left out counts as not fitting until capacity comes back
(`failed_keys`); `preempt_failed` remembers a (kind, priority) that preempting every lower job
cannot place. Both are dropped in two places: `capacity_lost` (a job started, a part failed)
and `capacity_gained` (a job ended or stopped, a part was repaired).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from podsim.cluster.fits import Fit, Reservation
from podsim.cluster.gang import GangFit
from podsim.cluster.podviews import STALE, PodMemo, PodView, PodViews
from podsim.cluster.reserve import PodReservations
from podsim.errors import InternalError
from podsim.placement import PodState, SliceRequest
from podsim.placement.greedy import cubes_score, fit_any, native, rank_any
from podsim.placement.multislice import choose_pods, fill, fit_multislice
from podsim.placement.pods import to_fleet
from podsim.placement.problem import PlacementSettings, options_or_reason
from podsim.placement.reshape import reshape_options
from podsim.placement.space import FreeSpace, cubes_needed

if TYPE_CHECKING:
    from podsim.cluster.accounting import SimJob
    from podsim.topology import PodLayout


class SliceSearch:
    """The placement search of one fleet's simulation over its live `state` (see the module)."""

    def __init__(self, layout: PodLayout, state: PodState, settings: PlacementSettings, placement: str,
                 counters: dict):
        self.layout, self.state, self.settings, self.placement = layout, state, settings, placement
        self.counters = counters  # placement_calls, placement_s
        self.failed_keys: set = set()  # kinds batch admission left out, until capacity comes back
        self.preempt_failed: set = set()  # (key, priority) that preempting every lower job cannot place
        self.capacity_epoch = 0
        self._reservation: Reservation | None = None
        self._options: dict[tuple, tuple] = {}
        self._reshapes: dict[tuple, tuple] = {}
        self._never: dict[tuple, str] = {}
        self._empty_space = FreeSpace.of(PodState(layout))
        self._view = PodViews(state)
        self._memo: dict[tuple, PodMemo] = {}  # key -> its answer per pod
        self._need: dict[tuple, tuple[int, int | None]] = {}  # key -> (chips of one slice, cubes of a cube-level slice)
        self.reserve = PodReservations(layout, self._view, placement, settings, counters)

    def options(self, key: tuple) -> tuple:
        opts = self._options.get(key)
        if opts is None:
            shape, twisted, degraded = key[:3]
            probe = SliceRequest("probe", shape, twisted, allow_degraded=degraded)
            opts, reason = options_or_reason(self.layout, probe, self.settings.rotate)
            self._options[key] = opts
            probe = SliceRequest("probe", shape, twisted, allow_degraded=degraded, slices=key[3])
            self._reshapes[key] = () if key[3] > 1 else reshape_options(self.layout, probe, self.settings.fold,
                                                                        self.settings.rotate, self.placement)
            if not opts and not self._reshapes[key]:
                self._never[key] = reason
            cubes = cubes_needed(self.layout.generation, shape) if opts and opts[0].kind == "cubes" else None
            self._need[key] = (math.prod(shape), cubes)
        return opts

    def never_reason(self, job: SimJob) -> str:
        """Why the job cannot run even on an empty, healthy fleet ('' if it can)."""
        key = job.key
        if key not in self._never:
            opts = self.options(key)
            first = "hilbert" if self.placement == "hilbert" else "first"
            if (opts or self._reshapes.get(key)) and self._fit(job, opts, self._empty_space, first) is None:
                what = f"{job.request.slices} slices of {job.request.name} do" if job.request.slices > 1 else f"slice {job.request.name} does"
                self._never[key] = f"{what} not fit an empty {self.layout.generation.id} fleet of {self.layout.pods} pod(s)"
            self._never.setdefault(key, "")
        return self._never[key]

    # The whole fleet at once (preemption, and reservations the pod-by-pod search does not cover)
    def fit(self, job: SimJob, space: FreeSpace) -> Fit | None:
        """The greedy fit of `job` in `space` (counted in the placement counters), or None."""
        t0 = time.perf_counter()
        fit = self._fit(job, self.options(job.key), space, self.placement)
        self.counters["placement_calls"] += 1
        self.counters["placement_s"] += time.perf_counter() - t0
        return fit

    def _fit(self, job: SimJob, opts, space: FreeSpace, policy) -> Fit | GangFit | None:
        req = job.request
        if req.slices > 1:  # a multislice job: all N slices on the fewest sites, then pods, or none
            mf = fit_multislice(space, req, opts, policy, self.settings)
            return GangFit(Fit(a, opts, self._empty_space) for a in mf.assignments) if mf.assignments else None
        a = fit_any(space, opts, self._reshapes.get(job.key, ()), policy, self.settings)
        return Fit(a, opts, self._empty_space) if a is not None else None

    # Pod by pod ------------------------------------------------------------------------------
    def _may_fit(self, key: tuple, view: PodView) -> bool:
        """False if the pod has too few free chips (or usable cubes) for one slice of the kind."""
        chips, cubes = self._need[key]
        if view.free < chips:
            return False
        return cubes is None or bool(self._reshapes.get(key)) or view.usable(key[2]) >= cubes

    def _answer_in(self, job: SimJob, pod: int, space: FreeSpace, view: PodView | None):
        """The kind's answer in one pod's `space`: a one-slice job's ranked fit (score, pod, tie,
        its assignment in the pod's own ids or None until the pod wins, its Fit once made), a
        multislice job's slices (up to N, in fleet ids); None or () where nothing fits."""
        key = job.key
        if view is not None and job.request.slices == 1:
            if not self._may_fit(key, view):
                return None
            cubes = self._need[key][1]
            if cubes is not None and self.placement != "hilbert" and view.usable(key[2]) >= cubes:
                # a cube-level slice fits natively: its rank is the pod's count; its cubes are
                # chosen only if the pod wins (`_choose`)
                return native(cubes_score(view.usable(key[2]), self.placement)), pod, (), None, None
        t0 = time.perf_counter()
        self.counters["placement_calls"] += 1
        opts = self.options(key)
        if job.request.slices > 1:
            got = fill(space.copy(), opts, job.request.slices, self.placement, self.settings) if opts else []
            out = tuple(to_fleet(self.layout, a, pod) for a in got)
        else:
            r = rank_any(space, opts, self._reshapes.get(key, ()), self.placement, self.settings)
            out = None if r is None else (r[0], pod, r[2], r[3], None)  # in the pod's own ids until chosen
        self.counters["placement_s"] += time.perf_counter() - t0
        return out

    def _memo_of(self, key: tuple) -> PodMemo:
        """The kind's per-pod memo, made (with its options) the first time the kind is asked."""
        memo = self._memo.get(key)
        if memo is None:
            self.options(key)
            memo = self._memo[key] = PodMemo(self.layout.pods)
        return memo

    def _sync(self, job: SimJob, memo: PodMemo) -> PodMemo:
        """Bring the kind's answers up to date in the pods that changed since they were found."""
        if memo.state_version == self.state.version:
            return memo
        memo.state_version = self.state.version
        versions = self.state.pod_version
        changed = np.flatnonzero(versions != memo.versions)
        if len(changed):
            pods = changed.tolist()
            for pod in pods:
                view = self._view(pod)
                got = self._answer_in(job, pod, view.space, view)
                if got:
                    memo.answers[pod] = got
                else:
                    memo.answers.pop(pod, None)
            memo.versions[changed] = versions[changed]
            top = memo.top if job.request.slices == 1 else STALE
            if top is not STALE:  # one slice: the least-ranked pod, from the changed ones
                if top is not None and top[1] in pods:
                    top = STALE  # the winner itself changed: rank them all again
                else:
                    for pod in pods:
                        got = memo.answers.get(pod)
                        if got is not None and (top is None or got[:3] < top[:3]):
                            top = got
            if top is STALE or top is not memo.top:
                memo.best = STALE
            memo.top = top
        return memo

    def _choose(self, job: SimJob, answers: dict, memo: PodMemo | None = None) -> Fit | GangFit | None:
        """The fleet's answer from the pods' own: the least-ranked pod (`memo.top` when it is
        known), or a multislice job's pods."""
        if not answers:
            if memo is not None and job.request.slices == 1:
                memo.top = None
            return None
        opts = self.options(job.key)
        if job.request.slices == 1:
            best = memo.top if memo is not None and memo.top is not STALE else min(answers.values(), key=lambda r: r[:3])
            if best[4] is not None:  # the same pod won before and has not changed: the same Fit
                return best[4]
            a = best[3]
            if a is None:  # ranked by its count only: choose its cubes now
                got = rank_any(self._view(best[1]).space, opts, self._reshapes.get(job.key, ()), self.placement, self.settings)
                if got is None or (got[0], best[1], got[2]) != best[:3]:
                    raise InternalError(f"pod {best[1]}'s rank for {job.request.name} changed: {best[:3]} then {got and got[:3]}")
                a = got[3]
            fit = Fit(to_fleet(self.layout, a, best[1]), opts, self._empty_space)
            answers[best[1]] = (*best[:3], a, fit)  # kept while the pod is unchanged
            if memo is not None:
                memo.top = answers[best[1]]
            return fit
        fits = [answers.get(p, ()) for p in range(self.layout.pods)]
        mf = choose_pods(self.layout, fits, lambda: [self.state.pod_free_chips(p) for p in range(self.layout.pods)],
                         job.request, self.placement, self.settings)
        return GangFit(Fit(a, opts, self._empty_space) for a in mf.assignments) if mf.assignments else None

    def try_place(self, job: SimJob, free_chips: int) -> Fit | None:
        """Where the job would go now (greedy), or None."""
        key = job.key
        if key in self.failed_keys or job.chips > free_chips:
            return None
        memo = self._sync(job, self._memo_of(key))
        if memo.best is STALE:
            memo.best = self._choose(job, memo.answers, memo)
        return memo.best

    def audit(self, job: SimJob, free_chips: int) -> None:
        """Check the pod-by-pod answer for the job's kind against a search of the whole fleet now."""
        if job.key in self.failed_keys:
            return
        got = self.try_place(job, free_chips)
        want = self._fit(job, self.options(job.key), FreeSpace.of(self.state), self.placement)
        parts = [[f.assignment for f in getattr(x, "parts", (x,))] if x is not None else None for x in (got, want)]
        if parts[0] != parts[1]:
            raise InternalError(f"the pod-by-pod search placed {job.request.name} at {parts[0]}, the fleet's at {parts[1]}")

    def place_avoiding(self, job: SimJob, res: Reservation) -> Fit | None:
        """Where `job` fits now keeping off the head's reserved chips, or None."""
        if res.chips is None or job.key in res.failed_keys:
            return None
        hit = res.avoiding.get(job.key)
        if hit is not None and hit[0] == self.state.version:  # the same state: the same answer
            return hit[1]
        answers = dict(self._sync(job, self._memo_of(job.key)).answers)
        lay = self.layout
        for pod in res.pods:  # the reserved pods' answers keeping off the chips, kept per pod version
            version = int(self.state.pod_version[pod])
            hit = res.avoiding.get((job.key, pod))
            if hit is None or hit[0] != version:
                space = self._view(pod).space.copy()
                lo = pod * lay.chips_per_pod
                space.take(res.chip_ids[(res.chip_ids >= lo) & (res.chip_ids < lo + lay.chips_per_pod)] - lo)
                hit = res.avoiding[(job.key, pod)] = (version, self._answer_in(job, pod, space, None))
            if hit[1]:
                answers[pod] = hit[1]
            else:
                answers.pop(pod, None)
        fit = self._choose(job, answers)
        for pod in res.pods:  # a reserved pod's answer with the Fit `_choose` made for it, kept
            version, answer = res.avoiding[(job.key, pod)]
            if answer and answers.get(pod) is not answer:
                res.avoiding[(job.key, pod)] = (version, answers[pod])
        if fit is None:
            res.failed_keys.add(job.key)
        res.avoiding[job.key] = (self.state.version, fit)
        return fit

    # Running jobs per pod (for reservations) ------------------------------------------------
    def job_started(self, job: SimJob) -> None:
        self.reserve.job_started(job)

    def job_stopped(self, job: SimJob) -> None:
        self.reserve.job_stopped(job)

    # Reservations ----------------------------------------------------------------------------
    def reservation(self, head: SimJob, running: Iterable[SimJob], free_chips: int, failure_epoch: int) -> Reservation:
        """EASY: when and where the blocked head will fit if the `running` jobs end when expected
        (kept while no running job was stopped and no part failed: `failure_epoch`)."""
        res = self._reservation
        if res is not None and res.head == head.idx and res.epoch == failure_epoch:
            if res.capacity_epoch != self.capacity_epoch:
                res.failed_keys.clear()
                res.capacity_epoch = self.capacity_epoch
            return res
        opts, reshapes = self.options(head.key), self._reshapes.get(head.key, ())
        if self.reserve.covers(head, opts, reshapes):
            found = self.reserve.earliest(head, opts, reshapes, self._need[head.key])
            found = None if found is None else (found[0], Fit(found[1], opts, self._empty_space))
        else:
            ordered = sorted(running, key=lambda j: (j.expected_end_s, j.idx))
            k_fit = self.first_fit_prefix(head, ordered, free_chips)
            found = None if k_fit is None else (ordered[k_fit[0] - 1].expected_end_s, k_fit[1])
        if found is None:
            res = Reservation(head.idx, failure_epoch, math.inf, None, capacity_epoch=self.capacity_epoch)
        else:
            shadow_s, p = found
            ids = np.asarray(p.chips, np.int64)
            mask = np.zeros(self.layout.n_chips, bool)
            mask[ids] = True
            res = Reservation(head.idx, failure_epoch, shadow_s, mask, capacity_epoch=self.capacity_epoch, chip_ids=ids,
                              pods=tuple(np.unique(self.layout.pod_of_chip[ids]).tolist()),
                              chips_per_cube=self.layout.generation.chips_per_cube if self.layout.has_cubes else 1)
        self._reservation = res
        return res

    def space_without(self, released: Sequence[SimJob]) -> FreeSpace:
        """The free space if the `released` running jobs gave their slices back now."""
        space = FreeSpace.of(self.state)
        ports = (self.state.cube_ports_healthy, self.state.cube_ports_degraded_healthy) if self.layout.ocs else None
        for j in released:
            space.give_back(np.asarray(j.slice.chips), list(j.slice.cubes) if j.slice.circuits else (), ports)
        return space

    def first_fit_prefix(self, job: SimJob, ordered: list[SimJob], free_chips: int) -> tuple[int, Fit] | None:
        """Smallest k such that `job` fits once ordered[:k] are released (binary search: fitting
        only gets easier as more is released), with where it would go; None if never."""
        need = job.chips - free_chips
        cum = np.cumsum([j.chips for j in ordered]) if ordered else np.zeros(0)
        lo = max(1, int(np.searchsorted(cum, need)) + 1) if need > 0 else 1
        hi = len(ordered)
        if lo > hi:
            return None
        best = self.fit(job, self.space_without(ordered[:hi]))
        if best is None:
            return None
        k_best = hi
        while lo < hi:
            mid = (lo + hi) // 2
            p = self.fit(job, self.space_without(ordered[:mid]))
            if p is not None:
                hi, k_best, best = mid, mid, p
            else:
                lo = mid + 1
        return k_best, best

    # Memo invalidation: the only two places -----------------------------------------------
    def capacity_lost(self, new_victim: bool = False) -> None:
        """Chips were taken (a job started: `new_victim`) or broke. A 'does not fit' stays true;
        a job that just started is one more preemption victim. (The pod-by-pod answers follow
        the pods' versions.)"""
        if new_victim:
            self.preempt_failed.clear()

    def capacity_gained(self) -> None:
        """Chips came back (a job ended or stopped, a part was repaired): every 'does not fit' is stale."""
        self.capacity_epoch += 1
        self.failed_keys.clear()
        self.preempt_failed.clear()
