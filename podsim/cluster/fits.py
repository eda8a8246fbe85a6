"""What the cluster's placement search answers: where a job would go (`Fit`), and EASY's
promise to a blocked head (`Reservation`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np

from podsim.placement.place import to_slice
from podsim.placement.space import FreeSpace

if TYPE_CHECKING:
    from podsim.cluster.accounting import SimJob


class Clock(Protocol):
    """What a reservation asks of the simulation (its Scheduler, podsim.cluster.policies)."""

    @property
    def now(self) -> float: ...

    def run_length(self, job: SimJob, fit) -> float:
        """How long the job would run on `fit` (overheads and remaining work)."""


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
    avoiding: dict = field(default_factory=dict)  # kind -> (state version, where it fits keeping off the chips)
    chips_per_cube: int = 1

    def allows(self, sim: Clock, job: SimJob, fit: Fit) -> bool:
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
            taken = any(p in self.pods for p in pods)
            if taken and getattr(fit, "assignment", None) is not None and fit.assignment.kind == "cubes":
                taken = bool(self._cubes_taken()[list(fit.assignment.cubes)].any())  # whole cubes: any reserved chip in them
            elif taken:
                taken = bool(self.chips[fit.chips].any())
            hit = self.overlap[id(fit)] = (fit, taken)
        return hit[1]

    def _cubes_taken(self) -> np.ndarray:
        """(cubes,) whether a cube holds a reserved chip."""
        got = self.overlap.get("cubes")
        if got is None:
            got = self.overlap["cubes"] = self.chips.reshape(len(self.chips) // self.chips_per_cube, -1).any(axis=1)
        return got
