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
from podsim.placement.hilbert import fit_hilbert
from podsim.placement.problem import PlacementSettings, Problem
from podsim.placement.realise import to_slice
from podsim.placement.reshape import HilbertRequest, Reshape, fit_blocks
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


def fit_cubes(space: FreeSpace, opt: Option, policy: Policy, block_cubes: int = 8) -> Assignment | None:
    """Cube-level slice on an OCS pod: any `need` usable cubes of one pod."""
    lay = space.layout
    need = cubes_needed(lay.generation, opt.shape)
    per = lay.cubes_per_pod
    usable = space.cube_usable_degraded if opt.degraded else space.cube_usable
    pods = []
    for pod in range(lay.pods):
        u = np.flatnonzero(usable[pod * per:(pod + 1) * per]) + pod * per
        if len(u) >= need:
            if policy == "first":
                return Assignment("cubes", opt.shape, pod, tuple(int(c) for c in u[:need]))
            pods.append((len(u), pod, u))
    if not pods:
        return None
    _, pod, u = min(pods, key=lambda t: (t[0], t[1]))
    block = (u % per) // block_cubes
    ids, counts = np.unique(block, return_counts=True)
    fits = counts >= need
    if fits.any():
        b = ids[fits][np.argmin(counts[fits])]
        chosen = u[block == b][:need]
    else:
        chosen_list: list[int] = []
        for b in ids[np.lexsort((ids, -counts))]:
            chosen_list.extend(u[block == b][: need - len(chosen_list)])
            if len(chosen_list) == need:
                break
        chosen = np.array(chosen_list)
    return Assignment("cubes", opt.shape, pod, tuple(int(c) for c in chosen))


def fit_subcube(space: FreeSpace, opt: Option, policy: Policy) -> Assignment | None:
    """Sub-cube slice: an aligned position inside one cube whose chips are all free."""
    lay = space.layout
    origins, masks = subcube_candidates(opt.shape, lay.generation.cube_shape)
    cells = space.cube_cells
    fits = ((~cells).astype(np.int16) @ masks.T.astype(np.int16)) == 0  # (cubes, candidates)
    ok = fits.any(axis=1)
    if not ok.any():
        return None
    cand = np.flatnonzero(ok)
    if policy == "first":
        cube = int(cand[0])
    else:
        free = cells[cand].sum(axis=1)
        cube = int(cand[np.lexsort((cand, space.cube_usable[cand], free))[0]])
    k = int(np.argmax(fits[cube]))
    return Assignment("subcube", opt.shape, int(lay.pod_of_cube[cube]), (cube,), tuple(int(v) for v in origins[k]))


def fit_box(space: FreeSpace, opts: Sequence[Option], policy: Policy) -> Assignment | None:
    """Static box (a rectangle, whole cubes in the OCS-less home arrangement, or a box of chips
    on a statically wired generic torus)."""
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
                key = (pod, origin, o)
            else:
                score = np.where(feasible, contact(occ, opt.unit_shape), -1)
                origin = tuple(int(v) for v in np.unravel_index(np.argmax(score), score.shape))
                key = (-int(score[origin]), pod, origin, o)
            if best is None or key < best[0]:
                best = (key, pod, origin, opt)
    if best is None:
        return None
    _, pod, origin, opt = best
    if cube_units:
        origin = tuple(v * c for v, c in zip(origin, lay.generation.cube_shape, strict=True))
    return Assignment(opts[0].kind, opt.shape, pod, (), origin)


def fit_request(space: FreeSpace, opts: Sequence[Option], policy: Policy = "best",
                settings: PlacementSettings | None = None) -> Assignment | None:
    """Where one request would go in `space` now (no change to `space`)."""
    if policy not in GREEDY_POLICIES:
        raise PodsimError(f"greedy policy {policy!r} is not known; use one of {', '.join(GREEDY_POLICIES)}")
    if not opts:
        return None
    kind = opts[0].kind
    if kind == "cubes":
        return fit_cubes(space, opts[0], policy, (settings or PlacementSettings()).block_cubes)
    if kind == "subcube":
        return fit_subcube(space, opts[0], policy)
    if kind == "blocks":
        return fit_blocks(space, opts, policy)
    return fit_box(space, opts, policy)


def fit_reshaped(space: FreeSpace, reshapes: Sequence[Reshape], policy: str, settings) -> Assignment | None:
    """The first reshaped realisation that fits `space` (in `reshapes` order), or None."""
    for r in reshapes:
        if r.form == "split":
            a = fit_blocks(space, [Option("blocks", r.shape, r.spec, r.shape)], policy, form="split")
            if a is not None:
                return a
            continue
        host_a = fit_request(space, r.targets, policy, settings)
        if host_a is not None:
            return fold_assignment(space.layout, r, host_a)
    return None


def fold_assignment(layout, r: Reshape, host_a: Assignment) -> Assignment:
    """The reshaped assignment of a fold whose box sits at `host_a`."""
    host = to_slice(layout, r.targets, host_a)
    coords = r.fold.coords
    local = np.ravel_multi_index(tuple(coords.T), host.shape)
    chips = tuple(int(c) for c in np.asarray(host.chips)[local])
    return Assignment("reshaped", r.shape, host_a.pod, tuple(host.cubes), None, form="fold",
                      detail=(chips, tuple(host.circuits), r.spec, host_a))


def fit_any(space: FreeSpace, opts: Sequence[Option], reshapes: Sequence = (), policy: Policy = "best",
            settings: PlacementSettings | None = None) -> Assignment | None:
    """The native fit of a request, else its first reshaped realisation that fits (`fold: allowed`)."""
    if policy == "hilbert":  # the non-contiguous baseline: any free chips along the curve
        return fit_hilbert(space, reshapes[0].request) if reshapes and isinstance(reshapes[0], HilbertRequest) else None
    a = fit_request(space, opts, policy, settings) if opts else None
    if a is None and reshapes:
        a = fit_reshaped(space, reshapes, policy, settings)
    return a


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
