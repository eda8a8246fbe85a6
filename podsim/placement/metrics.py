"""Figures of a pod state and a placement: free space, fragmentation, per-slice bandwidth.

Fragmentation is measured as the largest slice that could still be placed in one piece
(`largest_placeable`) against the free chips: 0 means the free space is one usable piece.
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np

from podsim.errors import PodsimError
from podsim.placement.greedy import fit_request
from podsim.placement.problem import PlacementSettings
from podsim.placement.requests import SliceRequest
from podsim.placement.space import FreeSpace, request_options
from podsim.topology import format_shape
from podsim.topology.metrics import bisection_bytes_per_s
from podsim.topology.slices import SliceView


def _most_cubic(n: int) -> tuple[int, int, int]:
    """a <= b <= c with a*b*c = n and the smallest c/a (cube-level slices of n cubes)."""
    best = (1, 1, n)
    for a in range(1, round(n ** (1 / 3)) + 2):
        if n % a:
            continue
        for b in range(a, math.isqrt(n // a) + 1):
            if (n // a) % b == 0:
                c = n // a // b
                if c >= b and c / a < best[2] / best[0]:
                    best = (a, b, c)
    return best


@functools.lru_cache(maxsize=64)
def _candidate_shapes(layout) -> list[tuple[int, ...]]:
    """Slice shapes worth probing on a layout without OCS cube selection, largest first."""
    gen = layout.generation
    shapes: list[tuple[int, ...]] = []
    if layout.has_cubes:
        grid = gen.cube_grid
        for a, b, c in itertools.product(*(range(1, g + 1) for g in grid)):
            if a <= b <= c or not gen.nondecreasing_shapes:
                shapes.append(tuple(v * s for v, s in zip((a, b, c), gen.cube_shape, strict=True)))
        shapes += [s for s in itertools.product((1, 2, 4), repeat=3) if math.prod(s) < gen.chips_per_cube]
    elif gen.slice_rule == "listed":
        shapes = [tuple(int(v) for v in s.split("x")) for s in gen.slice_shapes]
    else:
        pows = [2 ** k for k in range(1, 12)]
        shapes = [(a, b) for a in pows for b in pows if a <= b <= 2 * a and a <= max(gen.pod_shape) and b <= max(gen.pod_shape)]
    return sorted(set(shapes), key=lambda s: (-math.prod(s), s))


@functools.lru_cache(maxsize=4096)
def _probe_options(layout, shape: tuple[int, ...], rotate: bool):
    """The options of a probe slice (cached: a scheduler asks at every sample), None if invalid."""
    try:
        return tuple(request_options(layout, SliceRequest("probe", shape), rotate))
    except PodsimError:
        return None


def largest_placeable(state, settings: PlacementSettings | None = None) -> dict:
    """The largest slice that fits in the free space now: {"shape", "chips"} (None, 0 if none)."""
    settings = settings or PlacementSettings()
    space = FreeSpace.of(state)
    lay = state.layout
    gen = lay.generation
    if lay.ocs:
        per = lay.cubes_per_pod
        k = int(np.count_nonzero(space.cube_usable.reshape(lay.pods, per), axis=1).max())
        k = min(k, int(gen.max_slice_cubes.value) if gen.max_slice_cubes else k)
        if k:
            shape = tuple(v * s for v, s in zip(_most_cubic(k), gen.cube_shape, strict=True))
            return {"shape": format_shape(shape), "chips": math.prod(shape)}
    free = int(space.chip_free.sum())
    for shape in _candidate_shapes(lay):
        if (lay.ocs and math.prod(shape) >= gen.chips_per_cube) or math.prod(shape) > free:
            continue
        opts = _probe_options(lay, shape, settings.rotate)
        if opts is None:
            continue
        a = fit_request(space, opts, "first", settings)
        if a is not None:
            return {"shape": format_shape(a.shape), "chips": math.prod(shape)}
    return {"shape": None, "chips": 0}


def free_space_summary(state, settings: PlacementSettings | None = None) -> dict:
    """Free, healthy and busy chips; usable cubes and whole free DCN blocks; fragmentation."""
    settings = settings or PlacementSettings()
    lay = state.layout
    space = FreeSpace.of(state)
    free = int(space.chip_free.sum())
    largest = largest_placeable(state, settings)
    out = {"chips": lay.n_chips, "healthy_chips": state.n_healthy_chips, "busy_chips": state.n_busy_chips,
           "free_chips": free, "largest_placeable": largest,
           "fragmentation": 0.0 if free == 0 else 1.0 - largest["chips"] / free}
    if lay.has_cubes:
        usable = space.cube_usable
        per, bc = lay.cubes_per_pod, settings.block_cubes
        blocks = [usable[p * per + s:p * per + min(s + bc, per)] for p in range(lay.pods) for s in range(0, per, bc)]
        out.update(usable_cubes=int(usable.sum()), whole_free_cubes=int(space.cube_whole_free.sum()),
                   free_blocks=sum(1 for b in blocks if b.all()), blocks=len(blocks))
    return out


def placement_report(result, views: dict[str, SliceView]) -> list[dict]:
    """Per request: the placement dict plus the realised slice's bisection bandwidth.

    `views` comes from `validate_placement`, which proved each slice's topology."""
    out = []
    for p in result.placements:
        d = p.to_dict()
        view = views.get(p.members[0].request.id)  # a multislice request: its first slice (all are one shape)
        if p.placed and view is None:
            raise PodsimError(f"request {p.request.id!r} is placed but was not validated")
        d["bisection_bytes_per_s"] = None if view is None else bisection_bytes_per_s(view)
        out.append(d)
    return out
