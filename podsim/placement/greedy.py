"""Greedy baselines: first fit and best fit for every slice kind, and the fast one-request path.

Requests are taken largest weight first (`processing_order`); each gets the first or the best
position in what is left, or nothing. Best fit means:
- cube-level (OCS): the pod with the fewest usable cubes that hold the slice; inside it the
  fullest single DCN block that holds it, else the fewest blocks (largest first);
- sub-cube: the cube with the fewest free chips where it fits, cubes that cannot serve a
  cube-level slice first (keeps whole cubes whole);
- static boxes: the position touching the most occupied cells and pod edges (maximal contact).
A reshaped request (`fold: allowed`, podsim.placement.reshape) that has no native fit takes its
first fold or split that fits (`fit_reshaped`): a fold's box is placed by the native fits here.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Literal

import numpy as np

from podsim.errors import PodsimError
from podsim.placement.hilbert import rank_hilbert
from podsim.placement.problem import PlacementSettings, Problem
from podsim.placement.realise import to_slice
from podsim.placement.reshape import HilbertRequest, Reshape, rank_blocks
from podsim.placement.space import (
    Assignment,
    FreeSpace,
    Option,
    contact,
    cubes_needed,
    subcube_candidates,
    window_sums,
)

Policy = Literal["first", "best", "hilbert"]
GREEDY_POLICIES: tuple[str, ...] = ("first", "best")


# Each fit below has a ranked core: (score, pod, tie, Assignment). Over several pods the greedy
# takes the least (score, pod, tie), and a pod's own best is decided inside the pod, so a fit of
# one pod alone (a one-pod FreeSpace, podsim.placement.pods) ranks against every other pod's.
Ranked = tuple[tuple, int, tuple, Assignment]


def _first(ranked: Ranked | None) -> Assignment | None:
    return None if ranked is None else ranked[3]


def cubes_score(usable: int, policy: Policy) -> tuple:
    """`rank_cubes`' score of a pod with `usable` usable cubes (a pod holds a cube-level slice of
    `need` cubes when usable >= need): a scheduler ranks pods by it without choosing their cubes."""
    return (usable,) if policy == "best" else ()


def native(score: tuple) -> tuple:
    """`rank_any`'s score of a native fit (every native fit ranks before every reshaped one)."""
    return (0, *score)


def rank_cubes(space: FreeSpace, opt: Option, policy: Policy, block_cubes: int = 8) -> Ranked | None:
    """Cube-level slice on an OCS pod: any `need` usable cubes of one pod; best fit takes the pod
    with the fewest usable cubes (score), first fit the first pod."""
    lay = space.layout
    need = cubes_needed(lay.generation, opt.shape)
    per = lay.cubes_per_pod
    usable = (space.cube_usable_degraded if opt.degraded else space.cube_usable).reshape(lay.pods, per)
    counts = np.count_nonzero(usable, axis=1)
    fits = np.flatnonzero(counts >= need)
    if not len(fits):
        return None
    if policy == "first":
        pod = int(fits[0])
        u = np.flatnonzero(usable[pod]) + pod * per
        return cubes_score(int(counts[pod]), policy), pod, (), Assignment("cubes", opt.shape, pod, tuple(u[:need].tolist()))
    pod = int(fits[np.argmin(counts[fits])])  # the fewest usable cubes, then the first pod
    by_block: dict[int, list[int]] = {}  # the pod's usable cubes by DCN block, in id order (<= a pod's cubes)
    for c in (np.flatnonzero(usable[pod]) + pod * per).tolist():
        by_block.setdefault((c % per) // block_cubes, []).append(c)
    holding = [b for b, cubes in by_block.items() if len(cubes) >= need]
    if holding:  # the fullest block that holds it (the first of equals)
        chosen = by_block[min(holding, key=lambda b: (len(by_block[b]), b))][:need]
    else:  # the fewest blocks: largest first (the first of equals)
        chosen = []
        for b in sorted(by_block, key=lambda b: (-len(by_block[b]), b)):
            chosen.extend(by_block[b][:need - len(chosen)])
            if len(chosen) == need:
                break
    return cubes_score(int(counts[pod]), policy), pod, (), Assignment("cubes", opt.shape, pod, tuple(chosen))


def rank_subcube(space: FreeSpace, opt: Option, policy: Policy) -> Ranked | None:
    """Sub-cube slice: an aligned position inside one cube whose chips are all free; best fit
    takes the cube with the fewest free chips, one that cannot serve a cube-level slice first."""
    lay = space.layout
    cube_shape = lay.generation.cube_shape
    origins, masks = subcube_candidates(opt.shape, cube_shape)
    cells = space.cube_cells
    if all(c % s == 0 for s, c in zip(opt.shape, cube_shape, strict=True)):  # the positions tile the cube
        blocks = cells.reshape(len(cells), *(v for s, c in zip(opt.shape, cube_shape, strict=True) for v in (c // s, s)))
        fits = blocks.all(axis=(2, 4, 6)).reshape(len(cells), -1)  # (cubes, candidates), candidates row-major
    else:
        fits = ((~cells).astype(np.int16) @ masks.T.astype(np.int16)) == 0
    ok = fits.any(axis=1)
    if not ok.any():
        return None
    cand = np.flatnonzero(ok)
    if policy == "first":
        cube = int(cand[0])
        score: tuple = ()
    else:
        free = cells[cand].sum(axis=1)
        usable = space.cube_usable[cand]
        k = int(np.lexsort((cand, usable, free))[0])
        cube = int(cand[k])
        score = (int(free[k]), bool(usable[k]))
    k = int(np.argmax(fits[cube]))
    pod = int(lay.pod_of_cube[cube])
    return score, pod, (cube - pod * lay.cubes_per_pod,), Assignment(
        "subcube", opt.shape, pod, (cube,), tuple(int(v) for v in origins[k]))


def rank_box(space: FreeSpace, opts: Sequence[Option], policy: Policy) -> Ranked | None:
    """Static box (a rectangle, whole cubes in the OCS-less home arrangement, or a box of chips
    on a statically wired generic torus); best fit: the most contact (score), then pod, origin."""
    lay = space.layout
    cube_units = lay.has_cubes and opts[0].kind == "box"
    best = None
    for pod in range(lay.pods):
        occ = ~(space.cube_grid_free(pod) if cube_units else space.grid[pod])
        for o, opt in enumerate(opts):
            if any(s > g for s, g in zip(opt.unit_shape, occ.shape, strict=True)):
                continue
            feasible = window_sums(occ, opt.unit_shape) == 0
            if not feasible.any():
                continue
            if policy == "first":
                origin = tuple(int(v) for v in np.argwhere(feasible)[0])
                score: tuple = ()
            else:
                contacts = np.where(feasible, contact(occ, opt.unit_shape), -1)
                origin = tuple(int(v) for v in np.unravel_index(np.argmax(contacts), contacts.shape))
                score = (-int(contacts[origin]),)
            key = (score, pod, (origin, o))
            if best is None or key < best[0]:
                best = (key, opt)
    if best is None:
        return None
    (score, pod, tie), opt = best
    origin = tie[0]
    if cube_units:
        origin = tuple(v * c for v, c in zip(origin, lay.generation.cube_shape, strict=True))
    return score, pod, tie, Assignment(opts[0].kind, opt.shape, pod, (), origin)


def rank_request(space: FreeSpace, opts: Sequence[Option], policy: Policy = "best",
                 settings: PlacementSettings | None = None) -> Ranked | None:
    """`fit_request` with its rank (see `Ranked`)."""
    if policy not in GREEDY_POLICIES:
        raise PodsimError(f"greedy policy {policy!r} is not known; use one of {', '.join(GREEDY_POLICIES)}")
    if not opts:
        return None
    kind = opts[0].kind
    if kind == "cubes":
        return rank_cubes(space, opts[0], policy, (settings or PlacementSettings()).block_cubes)
    if kind == "subcube":
        return rank_subcube(space, opts[0], policy)
    if kind == "blocks":
        return rank_blocks(space, opts, policy)
    return rank_box(space, opts, policy)


def fit_request(space: FreeSpace, opts: Sequence[Option], policy: Policy = "best",
                settings: PlacementSettings | None = None) -> Assignment | None:
    """Where one request would go in `space` now (no change to `space`)."""
    return _first(rank_request(space, opts, policy, settings))


def rank_reshaped(space: FreeSpace, reshapes: Sequence[Reshape], policy: str, settings) -> Ranked | None:
    """`fit_reshaped` with its rank: the realisation's place in `reshapes` first, then its
    fit's own rank."""
    for i, r in enumerate(reshapes):
        if r.form == "split":
            got = rank_blocks(space, [Option("blocks", r.shape, r.spec, r.shape)], policy, form="split")
            if got is not None:
                return (i, *got[0]), got[1], got[2], got[3]
            continue
        got = rank_request(space, r.targets, policy, settings)
        if got is not None:
            return (i, *got[0]), got[1], got[2], fold_assignment(space.layout, r, got[3])
    return None


def fit_reshaped(space: FreeSpace, reshapes: Sequence[Reshape], policy: str, settings) -> Assignment | None:
    """The first reshaped realisation that fits `space` (in `reshapes` order), or None."""
    return _first(rank_reshaped(space, reshapes, policy, settings))


def fold_assignment(layout, r: Reshape, host_a: Assignment) -> Assignment:
    """The reshaped assignment of a fold whose box sits at `host_a`."""
    host = to_slice(layout, r.targets, host_a)
    coords = r.fold.coords
    local = np.ravel_multi_index(tuple(coords.T), host.shape)
    chips = tuple(int(c) for c in np.asarray(host.chips)[local])
    return Assignment("reshaped", r.shape, host_a.pod, tuple(host.cubes), None, form="fold",
                      detail=(chips, tuple(host.circuits), r.spec, host_a))


def rank_any(space: FreeSpace, opts: Sequence[Option], reshapes: Sequence = (), policy: Policy = "best",
             settings: PlacementSettings | None = None) -> Ranked | None:
    """`fit_any` with its rank: a native fit ranks before every reshaped one (see `Ranked`)."""
    if policy == "hilbert":  # the non-contiguous baseline: any free chips along the curve
        return rank_hilbert(space, reshapes[0].request) if reshapes and isinstance(reshapes[0], HilbertRequest) else None
    r = rank_request(space, opts, policy, settings) if opts else None
    if r is not None:
        return native(r[0]), r[1], r[2], r[3]
    if reshapes:
        r = rank_reshaped(space, reshapes, policy, settings)
        if r is not None:
            return (1, *r[0]), r[1], r[2], r[3]
    return None


def fit_any(space: FreeSpace, opts: Sequence[Option], reshapes: Sequence = (), policy: Policy = "best",
            settings: PlacementSettings | None = None) -> Assignment | None:
    """The native fit of a request, else its first reshaped realisation that fits (`fold: allowed`)."""
    return _first(rank_any(space, opts, reshapes, policy, settings))


def greedy_assign(problem: Problem, policy: Policy = "best", start: Sequence | None = None,
                  skip: Collection[int] = ()) -> list[Assignment | None]:
    """Greedy placement of the whole batch; `start` keeps earlier assignments and fills the rest.

    Requests in `skip` (a multislice request's copies, placed all or none elsewhere) are left as they are."""
    space = problem.space.copy()
    out: list[Assignment | None] = list(start) if start is not None else [None] * problem.n
    for a in out:
        if a is not None:
            space.take(space.chips_of(a))
    for i in problem.order:
        if out[i] is not None or i in skip:
            continue
        a = fit_any(space, problem.options[i], problem.reshape_of(i), policy, problem.settings)
        if a is not None:
            space.take(space.chips_of(a))
            out[i] = a
    return out
