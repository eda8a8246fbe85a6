"""Placement results: per request placed or not (with a reason), the batch summary, and what the
solver did (`SolveStats`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from podsim.placement.requests import SliceRequest
from podsim.topology import format_shape, get_generation
from podsim.topology.slices import Slice


@dataclass(frozen=True)
class SolveStats:
    """What a solver run did. `objective` and `bound` are CP-SAT's (None for greedy)."""

    solver: str
    status: str
    objective: float | None
    bound: float | None
    wall_s: float  # the whole solver path: greedy hints, model build, solve, read
    value: int  # total admission weight of the placed requests (primary objective)
    hint_value: int | None = None
    kept_hint: bool = False  # CP-SAT found nothing better than the greedy hint; the hint is returned
    completed: int = 0  # requests added afterwards by the greedy completion
    solver_s: float | None = None  # CP-SAT's own wall time
    wall_capped: bool = False  # a deterministic search was stopped by the wall-clock cap, not its work limit
    n_vars: int = 0
    n_constraints: int = 0
    params: dict = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class SlicePlacement:
    """One request's outcome: its slice (chips, cubes, OCS circuits) or why it was not placed.

    A multislice request keeps all its slices in `slices` (`slice` is the first of them)."""

    request: SliceRequest
    slice: Slice | None = None
    reason: str = ""
    slices: tuple[Slice, ...] = ()

    @property
    def all_slices(self) -> tuple[Slice, ...]:
        """Every slice it holds: one, or a multislice request's N; none if not placed."""
        if self.slice is None:
            return ()
        return self.slices or (self.slice,)

    @property
    def members(self) -> list[SlicePlacement]:
        """One single-slice placement per slice (ids 'job/k' for a multislice request)."""
        if self.request.slices == 1 or self.slice is None:
            return [self]
        return [SlicePlacement(self.request.member(k), s) for k, s in enumerate(self.all_slices)]

    @property
    def pods(self) -> list[int]:
        """The pods its slices are in (sorted, distinct)."""
        return sorted({int(s.pod) for s in self.all_slices})

    @property
    def placed(self) -> bool:
        return self.slice is not None

    @property
    def chips(self) -> list[int]:
        return [int(c) for s in self.all_slices for c in s.chips]

    @property
    def cubes(self) -> list[int]:
        return [int(c) for s in self.all_slices for c in s.cubes]

    @property
    def ocs_circuits(self) -> list[tuple[int, int, int]]:
        return [tuple(c) for s in self.all_slices for c in s.circuits]

    @property
    def shape(self) -> str | None:
        """The realised shape (a static box may be rotated: 8x16 placed as 16x8)."""
        return None if self.slice is None else format_shape(self.slice.shape)

    @property
    def topology(self) -> str | None:
        """'torus', 'twisted torus', 'mesh' or 'partial torus' (proved by validate_placement)."""
        return None if self.slice is None else self.slice.spec.topology

    @property
    def dark_circuits(self) -> int:
        """Circuits of its torus a degraded cube slice leaves dark (down OCS units); 0 otherwise."""
        out = 0
        for s in self.all_slices:
            if s.circuits:
                per_cube = len(s.shape) * get_generation(s.spec.generation).ocs.links_per_face.value
                out += int(len(s.cubes) * per_cube - len(s.circuits))
        return out

    def to_dict(self) -> dict:
        s = self.slice
        extra = {}
        if self.request.slices > 1:
            extra = {"slices": self.request.slices, "pods": self.pods,
                     "slice_pods": [int(x.pod) for x in self.all_slices]}
        return {
            "id": self.request.id, "request": self.request.name, "priority": self.request.priority, **extra,
            "placed": self.placed, "shape": self.shape, "pod": None if s is None else s.pod,
            "origin": None if s is None or s.origin is None else list(s.origin),
            "topology": self.topology, "cubes": self.cubes, "chips": self.chips,
            "ocs_circuits": [list(c) for c in self.ocs_circuits], "dark_circuits": self.dark_circuits,
            "reason": self.reason or None,
        }


@dataclass(frozen=True, eq=False)
class PlacementResult:
    """The outcome of one batch, in request order, with solver statistics and pod totals."""

    placements: tuple[SlicePlacement, ...]
    stats: SolveStats
    pod_chips: int
    healthy_chips: int
    busy_chips_before: int
    sites: int = 1  # data centres the pods are split over (multislice requests are kept in one unless they allow more)

    @property
    def placed(self) -> list[SlicePlacement]:
        return [p for p in self.placements if p.placed]

    @property
    def unplaced(self) -> list[SlicePlacement]:
        return [p for p in self.placements if not p.placed]

    def __getitem__(self, request_id: str) -> SlicePlacement:
        for p in self.placements:
            if p.request.id == request_id:
                return p
        raise KeyError(request_id)

    @property
    def placed_chips(self) -> int:
        return sum(p.request.total_chips for p in self.placed)

    @property
    def priority_weighted_chips(self) -> int:
        return sum(p.request.priority_weighted_chips() for p in self.placed)

    @property
    def utilisation(self) -> float:
        """Busy chips after this batch / all chips of the pod(s)."""
        return (self.busy_chips_before + self.placed_chips) / self.pod_chips

    def summary(self) -> dict:
        st = self.stats
        return {
            "solver": st.solver, "status": st.status, "requests": len(self.placements),
            "placed": len(self.placed), "placed_chips": self.placed_chips,
            "priority_weighted_chips": self.priority_weighted_chips,
            "utilisation": self.utilisation,
            "utilisation_of_healthy": (self.busy_chips_before + self.placed_chips) / max(self.healthy_chips, 1),
            "solve_s": st.wall_s, "cpsat_s": st.solver_s, "objective": st.objective, "bound": st.bound, "admitted_weight": st.value,
            "greedy_hint_weight": st.hint_value, "kept_hint": st.kept_hint, "completed_by_greedy": st.completed,
            "model_vars": st.n_vars, "model_constraints": st.n_constraints, "params": st.params,
        }
