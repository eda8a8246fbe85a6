"""One placement problem: a pod's free space, a batch of requests and how they are valued.

Built once per scheduling decision from a `PodState`; the greedy and CP-SAT solvers read it and
never change it (they take copies of its free space).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from podsim.errors import PodsimError, first_duplicate
from podsim.placement.requests import SliceRequest, processing_order
from podsim.placement.reshape import reshape_options
from podsim.placement.space import FreeSpace, Option, request_options


@dataclass(frozen=True)
class PlacementSettings:
    """What a good placement is, beyond admitting the most value.

    block_cubes: cubes per DCN aggregation block, counted in consecutive cube ids within a pod.
      The default 8 is one row of racks of a v4 pod (64 racks in 8 rows x 8 racks, v4.18, one
      cube per rack, v4.16). Used to prefer a slice's cubes under one block and to keep whole
      blocks free.
    prefer_same_block: minimise the blocks each cube-level slice spans.
    rotate: static pods may place a box in any axis order the generation allows (8x16 as 16x8).
    age_scale_s: waiting this long doubles a request's weight (the age term).
    sites: data centres the pods are split over (consecutive pods, equal numbers, as
      `DcnSpec.sites`); a multislice request stays in one unless it allows `span_sites`.
    """

    block_cubes: int = 8
    prefer_same_block: bool = True
    rotate: bool = True
    age_scale_s: float = 3600.0
    sites: int = 1
    fold: str = "none"  # "allowed": requests may be folded or split (podsim.placement.reshape)

    def __post_init__(self):
        if self.block_cubes < 1:
            raise PodsimError(f"block_cubes must be >= 1, got {self.block_cubes}")
        if not self.age_scale_s > 0:
            raise PodsimError(f"age_scale_s must be > 0, got {self.age_scale_s}")
        if self.fold not in ("none", "allowed"):
            raise PodsimError(f"fold {self.fold!r} is not known; use none or allowed")


@dataclass(frozen=True)
class Gang:
    """A multislice request in an expanded problem: the indices of its N one-slice copies."""

    request: SliceRequest
    copies: tuple[int, ...]
    weight: int  # the whole request's weight (the copies' weights sum to it)


@dataclass(frozen=True, eq=False)
class Problem:
    """Requests with their options (or the reason they can never fit), weights and order.

    An expanded problem (`expand_gangs`) holds each multislice request as N one-slice copies
    ('job/k'); `gangs` lists them and `gang_index[i]` is request i's gang (-1: a single)."""

    space: FreeSpace
    requests: tuple[SliceRequest, ...]
    options: tuple[tuple[Option, ...], ...]  # empty: the request can never be realised here
    errors: tuple[str, ...]  # why options is empty
    weights: tuple[int, ...]
    order: tuple[int, ...]
    settings: PlacementSettings
    gangs: tuple[Gang, ...] = ()
    gang_index: tuple[int, ...] = ()
    reshapes: tuple[tuple, ...] = ()  # per request, its reshaped realisations (`fold: allowed`)

    def reshape_of(self, i: int) -> tuple:
        return self.reshapes[i] if self.reshapes else ()

    def gang_id(self, i: int) -> int | None:
        """The gang request i is a copy of, or None for a one-slice request."""
        g = self.gang_index[i] if self.gang_index else -1
        return None if g < 0 else g

    @property
    def layout(self):
        return self.space.layout

    @property
    def n(self) -> int:
        return len(self.requests)

    def kind(self, i: int) -> str | None:
        return self.options[i][0].kind if self.options[i] else None

    def symmetry_key(self, i: int) -> tuple:
        """(option shapes, gang): requests with one key are interchangeable in the CP-SAT model
        (shared positions, ordered slots); a gang's copies only with each other."""
        return tuple(o.shape for o in self.options[i]), self.gang_id(i)

    # DCN aggregation blocks ----------------------------------------------------------------------
    @property
    def blocks_per_pod(self) -> int:
        return math.ceil(self.layout.cubes_per_pod / self.settings.block_cubes)

    def block_of(self, cubes: np.ndarray | int) -> np.ndarray:
        per = self.layout.cubes_per_pod
        c = np.asarray(cubes)
        return (c // per) * self.blocks_per_pod + (c % per) // self.settings.block_cubes

    def pod_of_block(self, block: int) -> int:
        return block // self.blocks_per_pod

    def block_size(self, block: int) -> int:
        per, bc = self.layout.cubes_per_pod, self.settings.block_cubes
        local = block % self.blocks_per_pod
        return min(bc, per - local * bc)

    def value(self, assignments: Sequence) -> int:
        """The primary objective: total weight of the placed requests, each at the speed its
        placement runs (1 natively; a priced reshaped placement less)."""
        return sum(placed_value(w, a) for w, a in zip(self.weights, assignments, strict=True) if a is not None)


def placed_value(weight: int, a) -> int:
    """A placed request's admission value: its weight at the speed of its placement."""
    return weight if a.speed >= 1.0 else int(round(weight * a.speed))


def options_or_reason(layout, req: SliceRequest, rotate: bool) -> tuple[tuple[Option, ...], str]:
    """The ways `req` may be realised on this layout, or why it never can be."""
    try:
        opts = tuple(request_options(layout, req, rotate))
    except PodsimError as exc:
        if req.twisted and not layout.ocs:
            return (), f"slice {req.name} is a twisted torus, which needs OCS circuits; this pod is statically wired"
        return (), str(exc)
    return opts, "" if opts else f"slice {req.name} has no orientation that fits this pod"


def make_problem(state, requests: Sequence[SliceRequest], settings: PlacementSettings | None = None,
                 now_s: float = 0.0) -> Problem:
    """Freeze the state's free space and work out each request's options and weight."""
    settings = settings or PlacementSettings()
    dup = first_duplicate(r.id for r in requests)
    if dup is not None:
        raise PodsimError(f"request id {dup!r} is used twice; ids must be unique")
    held = [r.id for r in requests if r.id in state]
    if held:
        raise PodsimError(f"request {held[0]!r} already holds a slice in this pod state")
    space = FreeSpace.of(state)
    options, errors, reshapes = [], [], []
    for req in requests:
        opts, err = options_or_reason(space.layout, req, settings.rotate)
        options.append(opts)
        errors.append(err)
        reshapes.append(reshape_options(space.layout, req, settings.fold, settings.rotate))
    weights = tuple(r.weight(now_s, settings.age_scale_s) for r in requests)
    return Problem(space, tuple(requests), tuple(options), tuple(errors), weights,
                   tuple(processing_order(requests, weights)), settings,
                   reshapes=tuple(reshapes) if any(reshapes) else ())


def expand_gangs(problem: Problem) -> Problem:
    """The same batch with every multislice request as N one-slice copies (ids 'job/k').

    Each copy has the request's options; the request's weight is split over its copies (the
    first takes the remainder), so the value of an all-or-none placement is unchanged."""
    if all(r.slices == 1 for r in problem.requests):
        return problem
    rows: list[tuple[SliceRequest, tuple[Option, ...], str, int, int]] = []  # request, options, error, weight, gang
    gangs: list[Gang] = []
    for i, r in enumerate(problem.requests):
        if r.slices == 1:
            rows.append((r, problem.options[i], problem.errors[i], problem.weights[i], -1))
            continue
        base, extra = divmod(problem.weights[i], r.slices)
        gangs.append(Gang(r, tuple(range(len(rows), len(rows) + r.slices)), problem.weights[i]))
        rows.extend((r.member(k), problem.options[i], problem.errors[i], base + (extra if k == 0 else 0), len(gangs) - 1)
                    for k in range(r.slices))
    reqs, opts, errs, weights, index = (tuple(col) for col in zip(*rows, strict=True))
    reshapes = ()
    if problem.reshapes:  # a gang is never reshaped: its copies have none
        single = iter(problem.reshapes[i] for i, r in enumerate(problem.requests) if r.slices == 1)
        reshapes = tuple(next(single) if g < 0 else () for g in index)
    return Problem(problem.space, reqs, opts, errs, weights, tuple(processing_order(reqs, weights)),
                   problem.settings, tuple(gangs), index, reshapes)
