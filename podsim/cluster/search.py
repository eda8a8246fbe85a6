"""Where jobs' slices go on a fleet's current state: the cluster's placement search and its memos.

`SliceSearch` answers the scheduler's placement questions with placement's public fit API
(`options_or_reason`, `FreeSpace`, `fit_request`, `to_slice`): where a job fits now
(`try_place`), where it fits keeping off a reserved slice (`place_avoiding`), EASY's
reservation for a blocked head (`reservation`), and the fewest running jobs whose release lets
a job fit (`first_fit_prefix`, for reservations and preemption). Speed comes from not trying
what cannot fit: a (shape, twist) that failed since capacity last came back is not tried again
(`failed_keys`), nor one needing more chips than are free; a slice found for one (shape, twist)
serves every queued job of that kind until the state changes (`_fits`). The memos are dropped
in two places only: `capacity_lost` (a job started, a part failed) and `capacity_gained` (a job
ended or stopped, a part was repaired).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from podsim.cluster.gang import GangFit
from podsim.placement import PodState, SliceRequest
from podsim.placement.greedy import fit_any
from podsim.placement.multislice import fit_multislice
from podsim.placement.place import to_slice
from podsim.placement.problem import PlacementSettings, options_or_reason
from podsim.placement.reshape import reshape_options
from podsim.placement.space import FreeSpace

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
        if self._slice is None:
            self._slice = to_slice(self.layout, self.options, self.assignment)
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

    def allows(self, sim: Scheduler, job: SimJob, fit: Fit) -> bool:
        if self.chips is None:
            return True
        if sim.now + sim.run_length(job, fit) <= self.shadow_s:
            return True
        return not self.chips[fit.chips].any()


class SliceSearch:
    """The placement search of one fleet's simulation over its live `state` (see the module)."""

    def __init__(self, layout: PodLayout, state: PodState, settings: PlacementSettings, placement: str,
                 counters: dict):
        self.layout, self.state, self.settings, self.placement = layout, state, settings, placement
        self.counters = counters  # placement_calls, placement_s
        self.failed_keys: set = set()
        self.preempt_failed: set = set()  # (key, priority) that preempting every lower job cannot place
        self.capacity_epoch = 0
        self._fits: dict[tuple, Fit] = {}  # (key, avoiding) -> slice found on the current state
        self._reservation: Reservation | None = None
        self._options: dict[tuple, tuple] = {}
        self._reshapes: dict[tuple, tuple] = {}
        self._never: dict[tuple, str] = {}
        self._empty_space = FreeSpace.of(PodState(layout))

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

    def try_place(self, job: SimJob, free_chips: int) -> Fit | None:
        """Where the job would go now (greedy), or None; remembers failures until capacity returns."""
        key = job.key
        if key in self.failed_keys:
            return None
        if job.chips > free_chips:
            self.failed_keys.add(key)
            return None
        fit = self._fits.get((key, False))
        if fit is None:
            fit = self.fit(job, FreeSpace.of(self.state))
            if fit is None:
                self.failed_keys.add(key)
            else:
                self._fits[(key, False)] = fit
        return fit

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

    def reservation(self, head: SimJob, running: Iterable[SimJob], free_chips: int, failure_epoch: int) -> Reservation:
        """EASY: when and where the blocked head will fit if the `running` jobs end when expected
        (kept while no running job was stopped and no part failed: `failure_epoch`)."""
        res = self._reservation
        if res is not None and res.head == head.idx and res.epoch == failure_epoch:
            if res.capacity_epoch != self.capacity_epoch:
                res.failed_keys.clear()
                res.capacity_epoch = self.capacity_epoch
            return res
        ordered = sorted(running, key=lambda j: (j.expected_end_s, j.idx))
        found = self.first_fit_prefix(head, ordered, free_chips)
        if found is None:
            res = Reservation(head.idx, failure_epoch, math.inf, None, capacity_epoch=self.capacity_epoch)
        else:
            k, p = found
            mask = np.zeros(self.layout.n_chips, bool)
            mask[p.chips] = True
            res = Reservation(head.idx, failure_epoch, ordered[k - 1].expected_end_s, mask,
                              capacity_epoch=self.capacity_epoch)
        self._reservation = res
        self._fits = {k: v for k, v in self._fits.items() if not k[1]}  # keep-off slices were for the old one
        return res

    def place_avoiding(self, job: SimJob, res: Reservation) -> Fit | None:
        """Where `job` fits now keeping off the head's reserved chips, or None."""
        if res.chips is None or job.key in res.failed_keys:
            return None
        fit = self._fits.get((job.key, True))
        if fit is None:
            space = FreeSpace.of(self.state)
            space.take(np.flatnonzero(res.chips))
            fit = self.fit(job, space)
            if fit is None:
                res.failed_keys.add(job.key)
            else:
                self._fits[(job.key, True)] = fit
        return fit

    # Memo invalidation: the only two places -----------------------------------------------
    def capacity_lost(self, new_victim: bool = False) -> None:
        """Chips were taken (a job started: `new_victim`) or broke: a slice found before may be
        gone. A 'does not fit' stays true; a job that just started is one more preemption victim."""
        self._fits.clear()
        if new_victim:
            self.preempt_failed.clear()

    def capacity_gained(self) -> None:
        """Chips came back (a job ended or stopped, a part was repaired): every memo is stale."""
        self._fits.clear()
        self.capacity_epoch += 1
        self.failed_keys.clear()
        self.preempt_failed.clear()
