"""The CP-SAT placement model of one batch: variables and constraints (the build step of
OR-Tools' build, solve, read; `cpsat.py` solves, hints and reads it).

`build_model` makes one model for a batch; which parts it holds depends on the requests:

a. cube-level slices on OCS pods (v4, v5p, 7x): healthy free cubes with working OCS are
   interchangeable for a torus (the OCS joins them in any order), so identical cubes are
   aggregated: an integer count of cubes per request and DCN block (symmetry broken by
   construction); concrete cubes are picked when reading the solution. Secondary goals: span
   few blocks (`spans`), keep whole blocks untouched (`opened`).
b. sub-cube slices: 3-D packing by enumeration (CP-SAT has no 3-D no-overlap): a boolean per
   candidate position, at most one per chip; identical requests share one set of positions
   (as many taken as requests of the group placed), which removes their symmetry. Candidates
   are every cube that cannot serve a cube-level slice and, per block, as many
   interchangeable whole cubes as there are sub-cube requests; `touched` marks whole cubes
   broken into, ordered so the first whole cubes of a block are used first (symmetry), and
   penalised.
c. static pods: 2-D rectangles with optional intervals and `add_no_overlap_2d` (busy and
   failed chips are fixed boxes, plus a redundant area cut); identical requests take
   positions in processing order. Cube boxes of the OCS-less baseline by enumeration over the
   cube grid, positions shared like (b). Neither straddles the pod edge.
d. batch admission: `placed[r]` for every request, all-or-nothing, maximising
   sum(weight x placed) (priority-weighted chips with an age term); identical requests are
   admitted in processing order (symmetry). The secondary goals are scaled below one unit of
   weight so they never trade away admitted value.
e. multislice requests (gangs): N one-slice copies placed by a-c like any request, tied all or
   none, in one site unless `span_sites`, on few pods (`cpsat_gang`). Copies are never grouped
   or ordered with another request's, only with their own gang's.
f. candidate placements (`_candidates`): block slices of a generic torus pod, chip boxes of a
   statically wired one, and reshaped realisations (`fold: allowed`: folds and splits) enter the
   model as up to `MAX_CANDIDATES` concrete placements per request, found by the greedy fits on
   the free space (each next one off the chips of those before); a boolean each, their chips
   sharing the per-chip constraints of (b) and whole cubes counting as touched in (a)/(c). A
   request takes its native placement or one candidate; a candidate is worth its weight at the
   speed of its placement (podsim.placement.problem.placed_value), and a reshaped one pays a
   secondary penalty, so a native placement wins a tie. On cube-less static pods (2-D
   rectangles) a reshaped candidate's chips are optional fixed intervals in the no-overlap.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence

import numpy as np
from ortools.sat.python import cp_model

from podsim.errors import PodsimError
from podsim.placement.cpsat_gang import add_gangs, gang_penalty
from podsim.placement.cpsat_vars import PlacementModel
from podsim.placement.greedy import fit_request, fit_reshaped
from podsim.placement.problem import Problem, placed_value
from podsim.placement.space import Assignment, box_candidates, cubes_needed, subcube_candidates

# --- build ---------------------------------------------------------------------------------------

def build_model(problem: Problem, hint: Sequence[Assignment | None] | None = None) -> PlacementModel:
    """The CP-SAT model of a batch: admission, cube selection, sub-cube and static packing."""
    pm = PlacementModel(problem)
    m = pm.model
    lay = problem.layout
    for i in range(problem.n):
        if problem.options[i] and problem.kind(i) not in CANDIDATE_KINDS:
            pm.placed[i] = m.new_bool_var(f"placed[{problem.requests[i].id}]")
    if lay.has_cubes:
        _blocks(pm)
        _candidates(pm, hint)
        _subcube_part(pm, hint)
        if lay.ocs:
            _cube_part(pm)
        else:
            _cube_box_part(pm)
    else:
        _rect_part(pm)
    _symmetric_requests(pm)
    add_gangs(pm)
    _objective(pm)
    return pm


def _blocks(pm: PlacementModel) -> None:
    p = pm.problem
    usable = np.flatnonzero(p.space.cube_usable)
    blocks = p.block_of(usable)
    for b in np.unique(blocks):
        pm.block_cubes[int(b)] = [int(c) for c in usable[blocks == b]]


CANDIDATE_KINDS = ("blocks", "chipbox")  # native kinds placed as candidates
MAX_CANDIDATES = 6


def candidate_list(problem: Problem, i: int, hint=None) -> list[Assignment]:
    """Concrete placements of request i the model may choose among (see (f)): the hint's, then
    for its native candidate kind and each reshaped realisation the greedy fit on the free space,
    again off the chips of the ones before."""
    out: list[Assignment] = []
    if hint is not None and hint[i] is not None and (hint[i].kind in CANDIDATE_KINDS or hint[i].kind == "reshaped"
                                                     or hint[i].form != "native"):
        out.append(hint[i])
    finders = []
    if problem.options[i] and problem.kind(i) in CANDIDATE_KINDS:
        finders.append(lambda sp: fit_request(sp, problem.options[i], "best", problem.settings))
    for r in problem.reshape_of(i):
        finders.append(lambda sp, r=r: fit_reshaped(sp, [r], "best", problem.settings))
    for find in finders:
        space = problem.space.copy()
        for _ in range(2):
            if len(out) >= MAX_CANDIDATES:
                return out
            a = find(space)
            if a is None:
                break
            if a not in out:
                out.append(a)
            space.take(space.chips_of(a))
    return out


def _candidates(pm: PlacementModel, hint) -> None:
    p, m = pm.problem, pm.model
    lay = p.layout
    per_cube = lay.generation.chips_per_cube
    usable = {c for cubes in pm.block_cubes.values() for c in cubes}
    for i in p.order:
        for k, a in enumerate(candidate_list(p, i, hint)):
            v = m.new_bool_var(f"cand[{p.requests[i].id},{k}]")
            pm.cands[i].append((v, a))
            chips = np.asarray(p.space.chips_of(a))
            for cube in np.unique(chips // per_cube):
                cube = int(cube)
                if cube in usable and cube not in pm.touched:
                    pm.touched[cube] = m.new_bool_var(f"touched[{cube}]")
            for chip in chips.tolist():
                pm.cell_terms[(chip // per_cube, chip % per_cube)].append(v)
        if pm.cands[i]:
            m.add(sum(v for v, _ in pm.cands[i]) + (pm.placed[i] if i in pm.placed else 0) <= 1)
    if pm.cands:
        pm.symmetric_fresh = False  # whole cubes are no longer interchangeable: a candidate names its own


def _group(pm: PlacementModel, kind: str) -> dict[tuple, list[int]]:
    """Requests of one kind grouped by identical options; a group shares its position variables."""
    p = pm.problem
    for i in p.order:
        if i in pm.placed and p.kind(i) == kind:
            pm.groups[(kind, *p.symmetry_key(i))].append(i)
    return {k: v for k, v in pm.groups.items() if k[0] == kind}


def _link_group(pm: PlacementModel, key: tuple, members: list[int]) -> None:
    """As many positions taken as requests of the group placed."""
    terms = [v for v, _ in pm.positions[key]]
    placed = [pm.placed[i] for i in members]
    if terms:
        pm.model.add(sum(terms) == sum(placed))
    else:
        for v in placed:
            pm.model.add(v == 0)


def _subcube_part(pm: PlacementModel, hint) -> None:
    p, m = pm.problem, pm.model
    lay = p.layout
    groups = _group(pm, "subcube")
    if not groups:
        _cell_constraints(pm)
        return
    n_sub = sum(len(g) for g in groups.values())
    space = p.space
    usable = space.cube_usable
    partial = np.flatnonzero(space.cube_cells.any(axis=1) & ~usable)
    hinted = {a.cubes[0] for a in (hint or ()) if a is not None and a.kind == "subcube"}
    pm.symmetric_fresh = lay.ocs and not pm.cands  # whole cubes are interchangeable only when the OCS wires them
    for b, cubes in pm.block_cubes.items():
        sel = cubes[:n_sub]
        if not pm.symmetric_fresh:
            sel = sorted(set(sel) | (hinted & set(cubes)))
        pm.fresh[b] = sel
    cand_cubes = sorted([int(c) for c in partial] + [c for sel in pm.fresh.values() for c in sel])
    for c in (c for sel in pm.fresh.values() for c in sel):
        if c not in pm.touched:
            pm.touched[c] = m.new_bool_var(f"touched[{c}]")
    occ = (~space.cube_cells[cand_cubes]).astype(np.int16)
    cell_terms = pm.cell_terms
    for key, members in groups.items():
        shape = key[1][0]
        origins, masks = subcube_candidates(shape, lay.generation.cube_shape)
        fits = (occ @ masks.T.astype(np.int16)) == 0
        for ci, k in zip(*np.nonzero(fits), strict=True):
            cube = cand_cubes[ci]
            v = m.new_bool_var(f"sub[{shape},{cube},{k}]")
            pm.positions[key].append((v, Assignment("subcube", shape, int(lay.pod_of_cube[cube]), (cube,),
                                                    tuple(int(x) for x in origins[k]))))
            for cell in np.flatnonzero(masks[k]):
                cell_terms[(cube, int(cell))].append(v)
        _link_group(pm, key, members)
    _cell_constraints(pm)
    if pm.symmetric_fresh:
        for sel in pm.fresh.values():
            for a, b in zip(sel, sel[1:], strict=False):
                m.add(pm.touched[a] >= pm.touched[b])


def _cell_constraints(pm: PlacementModel) -> None:
    """At most one slice per chip (sub-cube positions and candidates); in a whole cube, only
    while the cube counts as touched."""
    m = pm.model
    for (cube, _), terms in pm.cell_terms.items():
        if cube in pm.touched:
            m.add(sum(terms) <= pm.touched[cube])
        elif len(terms) > 1:
            m.add_at_most_one(terms)


def _cube_part(pm: PlacementModel) -> None:
    p, m = pm.problem, pm.model
    lay = p.layout
    reqs = [i for i in pm.placed if p.kind(i) == "cubes"]
    per_pod: dict[int, list[int]] = defaultdict(list)
    for b in pm.block_cubes:
        per_pod[p.pod_of_block(b)].append(b)
    for i in reqs:
        need = cubes_needed(lay.generation, p.options[i][0].shape)
        pods = [pod for pod, bs in sorted(per_pod.items()) if sum(len(pm.block_cubes[b]) for b in bs) >= need]
        if not pods:
            m.add(pm.placed[i] == 0)
            continue
        chosen = []
        for pod in pods:
            y = pm.placed[i] if lay.pods == 1 else m.new_bool_var(f"pod[{i},{pod}]")
            if lay.pods > 1:
                pm.pod_choice[(i, pod)] = y
                chosen.append(y)
            terms = []
            for b in per_pod[pod]:
                cap = min(need, len(pm.block_cubes[b]))
                n = m.new_int_var(0, cap, f"n[{i},{b}]")
                s = m.new_bool_var(f"span[{i},{b}]")
                m.add(n <= cap * s)
                pm.counts[(i, b)] = n
                pm.spans[(i, b)] = s
                terms.append(n)
            m.add(sum(terms) == need * y)
        if lay.pods > 1:
            m.add(sum(chosen) == pm.placed[i])
    in_block: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for key in pm.counts:
        in_block[key[1]].append(key)
    for b, cubes in pm.block_cubes.items():
        touched = [c for c in cubes if c in pm.touched]
        load = [pm.counts[k] for k in in_block[b]] + [pm.touched[c] for c in touched]
        if load:
            m.add(sum(load) <= len(cubes))
        if len(cubes) == p.block_size(b) and load:
            o = m.new_bool_var(f"opened[{b}]")
            pm.opened[b] = o
            for k in in_block[b]:
                m.add_implication(pm.spans[k], o)
            for c in touched:
                m.add_implication(pm.touched[c], o)


def _cube_box_part(pm: PlacementModel) -> None:
    """Whole-cube boxes in the OCS-less home arrangement, by enumeration over the cube grid."""
    p, m = pm.problem, pm.model
    lay = p.layout
    per = lay.cubes_per_pod
    grid = lay.generation.cube_grid
    cube_terms: dict[int, list] = defaultdict(list)
    for key, members in _group(pm, "box").items():
        opts = p.options[members[0]]
        for pod in range(lay.pods):
            free = p.space.cube_grid_free(pod).ravel()
            for opt in opts:
                if any(s > g for s, g in zip(opt.unit_shape, grid, strict=True)):
                    continue
                origins, masks = box_candidates(opt.unit_shape, grid)
                for k in np.flatnonzero(~(masks & ~free).any(axis=1)):
                    v = m.new_bool_var(f"box[{opt.shape},{pod},{k}]")
                    origin = tuple(int(o) * c for o, c in zip(origins[k], lay.generation.cube_shape, strict=True))
                    pm.positions[key].append((v, Assignment("box", opt.shape, pod, (), origin)))
                    for cell in np.flatnonzero(masks[k]):
                        cube_terms[pod * per + int(cell)].append(v)
        _link_group(pm, key, members)
    for cube, terms in cube_terms.items():
        extra = [pm.touched[cube]] if cube in pm.touched else []
        if len(terms) + len(extra) > 1:
            m.add_at_most_one(terms + extra)


def _rect_part(pm: PlacementModel) -> None:
    """Static 2-D pods: optional rectangles and add_no_overlap_2d, one per pod."""
    p, m = pm.problem, pm.model
    lay = p.layout
    pod_shape = lay.generation.pod_shape
    if len(pod_shape) != 2:
        raise PodsimError(f"static placement supports 2-D pods; {lay.generation.id} is {len(pod_shape)}-D")
    xs: dict[int, list] = defaultdict(list)
    ys: dict[int, list] = defaultdict(list)
    area: dict[int, list] = defaultdict(list)
    keys: dict[int, cp_model.LinearExpr] = {}
    for i in pm.placed:
        pres, key = [], []
        for pod in range(lay.pods):
            for o, opt in enumerate(p.options[i]):
                sx, sy = opt.shape
                a = m.new_bool_var(f"rect[{i},{pod},{opt.shape}]")
                x = m.new_int_var(0, pod_shape[0] - sx, f"x[{i},{pod},{opt.shape}]")
                y = m.new_int_var(0, pod_shape[1] - sy, f"y[{i},{pod},{opt.shape}]")
                m.add(x == 0).only_enforce_if(~a)  # an absent box sits at 0: no junk symmetry
                m.add(y == 0).only_enforce_if(~a)
                xs[pod].append(m.new_optional_fixed_size_interval_var(x, sx, a, f"ix[{i}]"))
                ys[pod].append(m.new_optional_fixed_size_interval_var(y, sy, a, f"iy[{i}]"))
                area[pod].append(sx * sy * a)
                pm.rects[i].append((a, x, y, pod, opt.shape))
                pres.append(a)
                key.append(_rect_key(lay, pod, o, len(p.options[i])) * a + len(p.options[i]) * (pod_shape[1] * x + y))
        m.add(sum(pres) == pm.placed[i])
        keys[i] = sum(key)
    # Identical requests take positions in processing order (symmetry; canonical() orders the hint).
    last: dict[tuple, int] = {}
    for i in p.order:
        if i in keys:
            alike = p.symmetry_key(i)
            if alike in last:
                j = last[alike]
                m.add(keys[j] < keys[i]).only_enforce_if([pm.placed[j], pm.placed[i]])
            last[alike] = i
    for pod in range(lay.pods):
        occ = ~p.space.grid[pod]
        if area[pod]:
            m.add(sum(area[pod]) <= int((~occ).sum()))  # redundant: strengthens the relaxation
        for x in range(pod_shape[0]):
            row = np.concatenate([[False], occ[x], [False]]).astype(np.int8)
            edges = np.flatnonzero(np.diff(row))
            for y0, y1 in zip(edges[::2], edges[1::2], strict=True):
                xs[pod].append(m.new_fixed_size_interval_var(x, 1, f"busy_x[{pod},{x},{y0}]"))
                ys[pod].append(m.new_fixed_size_interval_var(int(y0), int(y1 - y0), f"busy_y[{pod},{x},{y0}]"))
    _rect_candidates(pm, xs, ys)
    for pod in range(lay.pods):
        if xs[pod]:
            m.add_no_overlap_2d(xs[pod], ys[pod])


def _rect_candidates(pm: PlacementModel, xs: dict, ys: dict) -> None:
    """Reshaped candidates on static 2-D pods (folds onto another rectangle): each candidate's
    chips as optional fixed intervals (one per row segment) in its pod's no-overlap, present when
    the candidate is chosen, at most one candidate or native rectangle per request."""
    p, m = pm.problem, pm.model
    lay = p.layout
    per = lay.chips_per_pod
    cols = lay.generation.pod_shape[1]
    for i in p.order:
        if not p.reshape_of(i):
            continue
        for k, a in enumerate(candidate_list(p, i)):
            v = m.new_bool_var(f"cand[{p.requests[i].id},{k}]")
            pm.cands[i].append((v, a))
            chips = np.sort(np.asarray(p.space.chips_of(a)))
            pod = int(chips[0] // per)
            x, y = np.divmod(chips % per, cols)
            for row in np.unique(x):
                ry = y[x == row]
                breaks = np.flatnonzero(np.diff(ry) != 1)
                for seg in np.split(ry, breaks + 1):
                    xs[pod].append(m.new_optional_fixed_size_interval_var(int(row), 1, v, f"cx[{i},{k}]"))
                    ys[pod].append(m.new_optional_fixed_size_interval_var(int(seg[0]), len(seg), v, f"cy[{i},{k}]"))
        if pm.cands[i]:
            m.add(sum(v for v, _ in pm.cands[i]) + (pm.placed[i] if i in pm.placed else 0) <= 1)


def _rect_key(lay, pod: int, o: int, n_opts: int) -> int:
    """Constant part of a rectangle's position key: pod and orientation (x, y added linearly)."""
    return pod * math.prod(lay.generation.pod_shape) * n_opts + o


def rect_key(lay, a: Assignment, opts) -> int:
    """Row-major position key of a static rectangle (pod, x, y, orientation) as in the model."""
    o = next(k for k, opt in enumerate(opts) if opt.shape == a.shape)
    return _rect_key(lay, a.pod, o, len(opts)) + len(opts) * (lay.generation.pod_shape[1] * a.origin[0] + a.origin[1])


def _symmetric_requests(pm: PlacementModel) -> None:
    """Identical requests (same options and weight) are admitted in processing order."""
    p = pm.problem
    last: dict[tuple, int] = {}
    for i in p.order:
        if i not in pm.placed:
            continue
        key = (p.symmetry_key(i), p.requests[i].twisted, p.weights[i])
        if key in last:
            pm.model.add(pm.placed[last[key]] >= pm.placed[i])
        last[key] = i


def _objective(pm: PlacementModel) -> None:
    p = pm.problem
    secondary = list(pm.opened.values()) + list(pm.touched.values())
    if p.settings.prefer_same_block:
        secondary += list(pm.spans.values())
    secondary += [v for cands in pm.cands.values() for v, a in cands if a.form != "native"]  # native wins a tie
    penalty, worst = gang_penalty(pm, sum(secondary), len(secondary))
    pm.big = worst + 1
    primary = sum(p.weights[i] * v for i, v in pm.placed.items())
    primary += sum(placed_value(p.weights[i], a) * v for i, cands in pm.cands.items() for v, a in cands)
    pm.model.maximize(pm.big * primary - penalty)
