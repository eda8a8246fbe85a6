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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from podsim.cluster.gang import GangFit
from podsim.errors import InternalError
from podsim.placement import PodState, SliceRequest
from podsim.placement.greedy import cubes_score, fit_any, native, rank_any
from podsim.placement.multislice import choose_pods, fill, fit_multislice
from podsim.placement.place import to_slice
from podsim.placement.pods import pod_space, to_fleet
from podsim.placement.problem import PlacementSettings, options_or_reason
from podsim.placement.reshape import reshape_options
from podsim.placement.space import FreeSpace, cubes_needed

if TYPE_CHECKING:
    from podsim.cluster.accounting import SimJob
    from podsim.cluster.policies import Scheduler
    from podsim.topology import PodLayout


class Fit:
    """Where a job of one (shape, twist) would go now: the greedy assignment. Its Slice, with the
    OCS circuits, is built only if a job starts there (`slice`), since most fits a scheduler
    looks at are never taken."""

    __slots__ = ("assignment", "options", "space", "_chips", "_slice")

    def __init__(self, assignment, options, space: FreeSpace):
        self.assignment, self.options, self.space = assignment, options, space  # space: for chip ids only
        self._chips = self._slice = None

    @property
    def layout(self):
        return self.space.layout

    @property
    def shape(self) -> tuple[int, ...]:
        return self.assignment.shape

    @property
    def twisted(self) -> bool:
        return bool(self.options and self.options[0].spec.twisted)

    @property
    def form(self) -> str:
        return self.assignment.form

    @property
    def pod(self) -> int:
        return self.assignment.pod

    @property
    def circuits(self) -> bool:
        """Whether the slice needs OCS circuits (a cube-level or block slice of an OCS pod, or a
        fold onto one)."""
        a = self.assignment
        if a.kind == "reshaped":
            return bool(a.detail[1])
        return a.kind in ("cubes", "blocks") and self.layout.ocs

    @property
    def chips(self) -> np.ndarray:
        if self._chips is None:
            self._chips = self.space.chips_of(self.assignment)
        return self._chips

    @property
    def slice(self):
        if self._slice is None:  # its circuits made only if read (the state takes their ports as arrays)
            self._slice = to_slice(self.layout, self.options, self.assignment, lazy_circuits=True)
        return self._slice


@dataclass
class Reservation:
    """EASY backfilling's promise to the blocked head: its slice `chips` is free by `shadow_s`.

    `chips` None: the head cannot fit even if every running job ended (failed parts block it);
    nothing is reserved until that changes."""

    head: int
    epoch: int
    shadow_s: float
    chips: np.ndarray | None
    failed_keys: set = field(default_factory=set)
    capacity_epoch: int = 0
    chip_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # the reserved chips' ids
    pods: tuple[int, ...] = ()  # the pods they are in
    overlap: dict = field(default_factory=dict)  # id(fit) -> (fit, whether it takes a reserved chip)

    def allows(self, sim: Scheduler, job: SimJob, fit: Fit) -> bool:
        """Whether `job` may start on `fit` now: it ends by the shadow time or keeps off the
        reserved chips. For a job given in time on a native slice (its run length is plain
        arithmetic) the keep-off test goes first and is kept per fit: every job of a kind that
        the reservation blocks is tested against the same fit."""
        if self.chips is None:
            return True
        if job.job.steps is None and getattr(fit, "form", "native") == "native":
            return not self._overlaps(fit) or sim.now + sim.run_length(job, fit) <= self.shadow_s
        if sim.now + sim.run_length(job, fit) <= self.shadow_s:
            return True
        return not self._overlaps(fit)

    def _overlaps(self, fit) -> bool:
        """Whether `fit` takes a reserved chip (kept per fit object while the reservation lasts)."""
        hit = self.overlap.get(id(fit))
        if hit is None or hit[0] is not fit:
            pods = getattr(fit, "pods", None) or (fit.pod,)
            taken = any(p in self.pods for p in pods) and bool(self.chips[fit.chips].any())
            hit = self.overlap[id(fit)] = (fit, taken)
        return hit[1]


class _PodMemo:
    """One kind's answer in every pod, each as of the pod's version (None: not searched yet)."""

    __slots__ = ("versions", "answers", "best", "state_version")

    def __init__(self, pods: int):
        self.state_version = -1  # the state's version when the answers were last brought up to date
        self.versions = np.full(pods, -1, np.int64)
        self.answers: dict[int, object] = {}  # pod -> its ranked fit (one slice) or its slices (multislice)
        self.best = _STALE


_STALE = object()


class _PodView:
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
        self._views: dict[int, _PodView] = {}
        self._memo: dict[tuple, _PodMemo] = {}  # key -> its answer per pod
        self._res_memo: dict[tuple, _PodMemo] = {}  # key -> per pod, when and where it fits as jobs end
        self._pod_jobs: list[dict[int, SimJob]] = [{} for _ in range(layout.pods)]  # running jobs touching each pod
        self._need: dict[tuple, tuple[int, int | None]] = {}  # key -> (chips of one slice, cubes of a cube-level slice)
        self._locals: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}  # (running job, pod) -> its chips and cubes there

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
    def _view(self, pod: int) -> _PodView:
        version = int(self.state.pod_version[pod])
        view = self._views.get(pod)
        if view is None or view.version != version:
            view = self._views[pod] = _PodView(version, pod_space(self.state, pod))
        return view

    def _may_fit(self, key: tuple, view: _PodView) -> bool:
        """False if the pod has too few free chips (or usable cubes) for one slice of the kind."""
        chips, cubes = self._need[key]
        if view.free < chips:
            return False
        return cubes is None or bool(self._reshapes.get(key)) or view.usable(key[2]) >= cubes

    def _answer_in(self, job: SimJob, pod: int, space: FreeSpace, view: _PodView | None):
        """The kind's answer in one pod's `space`: a one-slice job's ranked fit (score, pod, tie,
        its assignment in the pod's own ids), a multislice job's slices (up to N, in fleet ids);
        None or () where nothing fits."""
        key = job.key
        if view is not None and job.request.slices == 1:
            if not self._may_fit(key, view):
                return None
            cubes = self._need[key][1]
            if cubes is not None and self.placement != "hilbert" and view.usable(key[2]) >= cubes:
                # a cube-level slice fits natively: its rank is the pod's count; its cubes are
                # chosen only if the pod wins (`_choose`)
                return native(cubes_score(view.usable(key[2]), self.placement)), pod, (), None
        t0 = time.perf_counter()
        self.counters["placement_calls"] += 1
        opts = self.options(key)
        if job.request.slices > 1:
            got = fill(space.copy(), opts, job.request.slices, self.placement, self.settings) if opts else []
            out = tuple(to_fleet(self.layout, a, pod) for a in got)
        else:
            r = rank_any(space, opts, self._reshapes.get(key, ()), self.placement, self.settings)
            out = None if r is None else (r[0], pod, r[2], r[3])  # in the pod's own ids until chosen
        self.counters["placement_s"] += time.perf_counter() - t0
        return out

    def _sync(self, job: SimJob, memo: _PodMemo) -> _PodMemo:
        """Bring the kind's answers up to date in the pods that changed since they were found."""
        if memo.state_version == self.state.version:
            return memo
        memo.state_version = self.state.version
        versions = self.state.pod_version
        changed = np.flatnonzero(versions != memo.versions)
        if len(changed):
            for pod in changed.tolist():
                view = self._view(pod)
                got = self._answer_in(job, pod, view.space, view)
                if got:
                    memo.answers[pod] = got
                else:
                    memo.answers.pop(pod, None)
            memo.versions[changed] = versions[changed]
            memo.best = _STALE
        return memo

    def _choose(self, job: SimJob, answers: dict) -> Fit | GangFit | None:
        """The fleet's answer from the pods' own: the least-ranked pod, or a multislice job's pods."""
        if not answers:
            return None
        opts = self.options(job.key)
        if job.request.slices == 1:
            best = min(answers.values(), key=lambda r: r[:3])
            a = best[3]
            if a is None:  # ranked by its count only: choose its cubes now (kept while the pod is unchanged)
                got = rank_any(self._view(best[1]).space, opts, self._reshapes.get(job.key, ()), self.placement, self.settings)
                if got is None or (got[0], best[1], got[2]) != best[:3]:
                    raise InternalError(f"pod {best[1]}'s rank for {job.request.name} changed: {best[:3]} then {got and got[:3]}")
                a = got[3]
                answers[best[1]] = (*best[:3], a)
            return Fit(to_fleet(self.layout, a, best[1]), opts, self._empty_space)
        fits = [answers.get(p, ()) for p in range(self.layout.pods)]
        mf = choose_pods(self.layout, fits, lambda: [self.state.pod_free_chips(p) for p in range(self.layout.pods)],
                         job.request, self.placement, self.settings)
        return GangFit(Fit(a, opts, self._empty_space) for a in mf.assignments) if mf.assignments else None

    def try_place(self, job: SimJob, free_chips: int) -> Fit | None:
        """Where the job would go now (greedy), or None."""
        key = job.key
        if key in self.failed_keys or job.chips > free_chips:
            return None
        memo = self._memo.get(key)
        if memo is None:
            self.options(key)
            memo = self._memo[key] = _PodMemo(self.layout.pods)
        self._sync(job, memo)
        if memo.best is _STALE:
            memo.best = self._choose(job, memo.answers)
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
        memo = self._memo.get(job.key)
        if memo is None:
            self.options(job.key)
            memo = self._memo[job.key] = _PodMemo(self.layout.pods)
        answers = dict(self._sync(job, memo).answers)
        lay = self.layout
        for pod in res.pods:
            space = self._view(pod).space.copy()
            lo = pod * lay.chips_per_pod
            mine = res.chip_ids[(res.chip_ids >= lo) & (res.chip_ids < lo + lay.chips_per_pod)] - lo
            space.take(mine)
            got = self._answer_in(job, pod, space, None)
            if got:
                answers[pod] = got
            else:
                answers.pop(pod, None)
        fit = self._choose(job, answers)
        if fit is None:
            res.failed_keys.add(job.key)
        return fit

    # Running jobs per pod (for reservations) ------------------------------------------------
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
        if self._by_pod(head):
            found = self._reserve_by_pod(head)
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
                              pods=tuple(np.unique(self.layout.pod_of_chip[ids]).tolist()))
        self._reservation = res
        return res

    def _by_pod(self, job: SimJob) -> bool:
        """Whether the head's earliest fit can be found pod by pod: one slice of a kind whose fit
        only gets easier as chips come free (cube-level, sub-cube, boxes, Hilbert's any chips)."""
        opts = self.options(job.key)
        if job.request.slices > 1:
            return False
        if self.placement == "hilbert":
            return True
        return bool(opts) and not self._reshapes.get(job.key) and opts[0].kind in ("cubes", "subcube", "box", "chipbox")

    def _reserve_by_pod(self, head: SimJob) -> tuple[float, Fit] | None:
        """The first running job (in expected-end order) whose end lets the head fit in some pod,
        and where: the least of the pods' own answers (`_release_in`), kept per pod and version."""
        memo = self._res_memo.get(head.key)
        if memo is None:
            memo = self._res_memo[head.key] = _PodMemo(self.layout.pods)
        versions = self.state.pod_version
        changed = np.flatnonzero(versions != memo.versions)
        for pod in changed.tolist():
            got = self._release_in(head, pod)
            if got is None:
                memo.answers.pop(pod, None)
            else:
                memo.answers[pod] = got
        memo.versions[changed] = versions[changed]
        if not memo.answers:
            return None
        when, score, pod, tie, a = min(memo.answers.values(), key=lambda r: r[:4])
        if isinstance(a, int):  # a cube-level head ranked by its count: choose its cubes now
            a = self._reserved_fit(head, pod, a, (score, tie))
            memo.answers[pod] = (when, score, pod, tie, a)
        return when[0], Fit(a, self.options(head.key), self._empty_space)

    def _reserved_fit(self, head: SimJob, pod: int, first: int, rank: tuple):
        """Where the cube-level head goes in `pod` once its running jobs up to `first` (in
        expected-end order) have ended, in fleet ids."""
        jobs = sorted(self._pod_jobs[pod].values(), key=lambda j: (j.expected_end_s, j.idx))
        space = self._released(pod, self._view(pod), [self._local(j, pod) for j in jobs[:first + 1]])
        r = rank_any(space, self.options(head.key), (), self.placement, self.settings)
        if r is None or (r[0], r[2]) != rank:
            raise InternalError(f"{head.request.name} does not fit pod {pod} as its usable cubes were counted")
        return to_fleet(self.layout, r[3], pod)

    def _release_in(self, head: SimJob, pod: int):
        """((end, idx) of the running job whose end lets the head fit in `pod`, score, pod, tie,
        where) releasing the pod's running jobs in expected-end order, as `space_without` does;
        None if it never fits there. A cube-level head fits once enough cubes are usable, so the
        job is read off each cube's release position (`_cubes_usable_after`) without a fit per job."""
        jobs = sorted(self._pod_jobs[pod].values(), key=lambda j: (j.expected_end_s, j.idx))
        if not jobs:
            return None
        view = self._view(pod)
        chips_needed, cubes_needed_ = self._need[head.key]
        parts = [self._local(j, pod) for j in jobs]
        if cubes_needed_ is not None:
            got = self._cubes_usable_after(head, pod, view, parts, cubes_needed_)
            if got is None:
                return None
            first, usable = got
            j = jobs[first]  # ranked by the pod's count; its cubes are chosen if it wins (`_reserved_fit`)
            return (j.expected_end_s, j.idx), native(cubes_score(usable, self.placement)), pod, (), first
        space = view.space.copy()
        free = view.free
        ports = self._pod_ports(pod)
        opts = self.options(head.key)
        reshapes = self._reshapes.get(head.key, ())
        for j, (chips, cubes) in zip(jobs, parts, strict=True):
            space.chip_free[chips] = True
            free += len(chips)
            if len(cubes) and ports is not None:
                space.cube_ocs_ok[cubes] = ports[0][cubes]
                space.cube_ocs_degraded_ok[cubes] = ports[1][cubes]
            if free < chips_needed:
                continue
            self.counters["placement_calls"] += 1
            r = rank_any(space, opts, reshapes, self.placement, self.settings)
            if r is not None:
                return (j.expected_end_s, j.idx), r[0], pod, r[2], to_fleet(self.layout, r[3], pod)
        return None

    def _released(self, pod: int, view: _PodView, parts: list) -> FreeSpace:
        """The pod's free space once the jobs of `parts` gave their chips (and ports) back."""
        space = view.space.copy()
        space.chip_free[np.concatenate([p[0] for p in parts])] = True
        ports = self._pod_ports(pod)
        cubes = np.concatenate([p[1] for p in parts])
        if len(cubes) and ports is not None:
            space.cube_ocs_ok[cubes] = ports[0][cubes]
            space.cube_ocs_degraded_ok[cubes] = ports[1][cubes]
        return space

    def _cubes_usable_after(self, head: SimJob, pod: int, view: _PodView, parts: list,
                            need: int) -> tuple[int, int] | None:
        """The position (0-based, in `parts`' order) of the release after which the pod has
        `need` usable cubes for the head, and how many it has then; None if never. A cube is
        usable once each of its chips is free or released, and its ports are free (or freed by a
        released slice with circuits) and healthy, as `space_without` counts them."""
        lay = self.layout
        n = len(parts)
        never = n + 1
        order = np.arange(1, n + 1)
        holder = np.where(view.space.chip_free, 0, never)  # the release (1-based) after which each chip is free
        holder[np.concatenate([p[0] for p in parts])] = np.repeat(order, [len(p[0]) for p in parts])
        degraded = head.key[2]
        ok_now = view.space.cube_ocs_degraded_ok if degraded else view.space.cube_ocs_ok
        ports_first = np.full(len(ok_now), never)  # the first release after which the cube's ports are usable
        ports = self._pod_ports(pod)
        cubes = np.concatenate([p[1] for p in parts])
        if len(cubes) and ports is not None:
            at = np.repeat(order, [len(p[1]) for p in parts])
            at = np.where(ports[1 if degraded else 0][cubes], at, never)
            ports_first[cubes[::-1]] = at[::-1]  # a cube in two slices: the earlier release wins
        ports_first[ok_now] = 0
        usable_at = np.maximum(holder.reshape(lay.cubes_per_pod, -1).max(axis=1), ports_first)
        if need > len(usable_at):
            return None
        k = max(int(np.partition(usable_at, need - 1)[need - 1]), 1)
        return None if k > n else (k - 1, int(np.count_nonzero(usable_at <= k)))

    def _pod_ports(self, pod: int) -> tuple[np.ndarray, np.ndarray] | None:
        """The pod's cubes whose ports are healthy (strict, and for a degraded torus), None without OCS."""
        lay = self.layout
        if not lay.ocs:
            return None
        c0 = pod * lay.cubes_per_pod
        return (self.state.cube_ports_healthy[c0:c0 + lay.cubes_per_pod],
                self.state.cube_ports_degraded_healthy[c0:c0 + lay.cubes_per_pod])

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

    def space_without(self, released: Sequence[SimJob]) -> FreeSpace:
        """The free space if the `released` running jobs gave their slices back now."""
        space = FreeSpace.of(self.state)
        ports_ok = self.state.cube_ports_healthy if self.layout.ocs else None
        for j in released:
            space.chip_free[np.asarray(j.slice.chips)] = True
            if j.slice.circuits and ports_ok is not None:
                cubes = list(j.slice.cubes)
                space.cube_ocs_ok[cubes] = ports_ok[cubes]
                space.cube_ocs_degraded_ok[cubes] = self.state.cube_ports_degraded_healthy[cubes]
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
