"""CP-SAT placement, in the OR-Tools sample style: build, solve, read.

`cpsat_model.build_model` makes one model for a batch (its docstring says which parts and why).
`solve_model` sets every parameter explicitly; `read_solution` turns the values back into
assignments. `hint_model` gives a complete hint (the greedy solution), made consistent with
the symmetry breaking.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from ortools.sat.python import cp_model

from podsim.errors import PodsimError
from podsim.placement.cpsat_gang import canonical_gangs, hint_gangs
from podsim.placement.cpsat_model import build_model, rect_key
from podsim.placement.cpsat_vars import PlacementModel
from podsim.placement.space import Assignment
from podsim.quantities import SEED

CPSAT_SEED_MODULUS = 2**31  # CP-SAT's random_seed is an int32: a 64-bit seed is folded into it


@dataclass(frozen=True)
class SolverParams:
    """CP-SAT parameters, all explicit.

    deterministic: the time limit is applied as CP-SAT deterministic time (work units, not
      wall-clock) and the search is interleaved (`interleave_search`), so the same inputs,
      seed and worker count give the same placement on any machine (tested) - unless the
      wall-clock safety cap (`wall_cap_s`: 30 x the limit + 10 s) stops the search first, which
      a heavily loaded machine can cause and `SolveStats.wall_capped` (podsim.placement.result) then reports.
      deterministic=False: the limit is wall-clock seconds, and the placement may differ
      between runs.
    """

    time_limit: float = 1.0  # CP-SAT deterministic time units (deterministic=True), else wall-clock seconds
    num_workers: int = 1
    random_seed: int = 0
    deterministic: bool = True
    log: bool = False

    @property
    def wall_cap_s(self) -> float:
        """Wall-clock seconds after which a deterministic search is stopped anyway."""
        return 30 * self.time_limit + 10.0 if self.deterministic else self.time_limit

    def __post_init__(self):
        if not self.time_limit > 0:
            raise PodsimError(f"time limit must be > 0 (CP-SAT deterministic time units; wall-clock seconds when not deterministic), got {self.time_limit}")
        if not math.isfinite(self.time_limit):
            raise PodsimError(f"time limit must be a finite number (CP-SAT deterministic time units; wall-clock seconds when not deterministic), got {self.time_limit}")
        SEED.check(self.random_seed, "random seed")
        if self.num_workers < 1:
            raise PodsimError(f"num_workers must be >= 1 (0 would use every core), got {self.num_workers}")


# --- hint ---------------------------------------------------------------------------------------

def canonical(pm: PlacementModel, assignments: Sequence[Assignment | None]) -> list[Assignment | None]:
    """The same placement, permuted to satisfy the model's symmetry breaking.

    Identical rectangles swap positions so they come in processing order; sub-cube slices move
    onto the first whole cubes of each block (whole usable cubes of one block are
    interchangeable on an OCS pod); a cube-level gang's copies are sorted by position index.
    None of this changes what is placed or its value."""
    out = list(assignments)
    canonical_gangs(pm, out)
    if pm.rects:  # identical rectangles: positions sorted in processing order
        p = pm.problem
        groups: dict[tuple, list[int]] = defaultdict(list)
        for i in p.order:
            if i in pm.rects and out[i] is not None:
                groups[p.symmetry_key(i)].append(i)
        for members in groups.values():
            spots = sorted((out[i] for i in members), key=lambda a: rect_key(p.layout, a, p.options[members[0]]))
            for i, a in zip(members, spots, strict=True):
                out[i] = a
    if not pm.symmetric_fresh:
        return out
    remap: dict[int, int] = {}
    next_slot: dict[int, int] = defaultdict(int)
    for i, a in enumerate(out):
        if a is None or a.kind != "subcube":
            continue
        cube = a.cubes[0]
        b = int(pm.problem.block_of(cube))
        if cube not in pm.block_cubes.get(b, ()):
            continue
        if cube not in remap:
            remap[cube] = pm.fresh[b][next_slot[b]]
            next_slot[b] += 1
        out[i] = Assignment(a.kind, a.shape, a.pod, (remap[cube],), a.origin)
    return out


def hint_model(pm: PlacementModel, assignments: Sequence[Assignment | None]) -> None:
    """Hint every variable from a (greedy) placement."""
    p, m = pm.problem, pm.model
    m.clear_hints()
    hint = canonical(pm, assignments)
    for i, v in pm.placed.items():
        m.add_hint(v, hint[i] is not None and not any(a == hint[i] for _, a in pm.cands.get(i, ())))
    for i, cands in pm.cands.items():
        for v, a in cands:
            m.add_hint(v, hint[i] is not None and a == hint[i])
    count: dict[tuple[int, int], int] = defaultdict(int)
    for i, a in enumerate(hint):
        if a is not None and a.kind == "cubes":
            for c in a.cubes:
                count[(i, int(p.block_of(c)))] += 1
    opened: set[int] = set()
    for key, n in pm.counts.items():
        m.add_hint(n, count.get(key, 0))
        m.add_hint(pm.spans[key], count.get(key, 0) > 0)
        if count.get(key, 0):
            opened.add(key[1])
    for (i, pod), y in pm.pod_choice.items():
        m.add_hint(y, hint[i] is not None and hint[i].pod == pod)
    touched = {a.cubes[0] for a in hint if a is not None and a.kind == "subcube"}
    for c, t in pm.touched.items():
        m.add_hint(t, c in touched)
        if c in touched:
            opened.add(int(p.block_of(c)))
    for b, o in pm.opened.items():
        m.add_hint(o, b in opened)
    for key, members in pm.groups.items():
        taken = {hint[i] for i in members if hint[i] is not None}
        for v, a in pm.positions.get(key, ()):
            m.add_hint(v, a in taken)
    for i, rects in pm.rects.items():
        a = hint[i]
        for pres, x, y, pod, shape in rects:
            on = a is not None and a.pod == pod and a.shape == shape
            m.add_hint(pres, on)
            m.add_hint(x, a.origin[0] if on else 0)
            m.add_hint(y, a.origin[1] if on else 0)
    hint_gangs(pm, hint)


# --- solve and read --------------------------------------------------------------------------------

def solver_for(params: SolverParams) -> cp_model.CpSolver:
    """A CpSolver with every parameter set explicitly."""
    solver = cp_model.CpSolver()
    sp = solver.parameters
    sp.num_workers = params.num_workers
    sp.random_seed = params.random_seed % CPSAT_SEED_MODULUS
    sp.log_search_progress = params.log
    # The model breaks the symmetries it knows (aggregated cubes, shared positions, ordered
    # whole cubes and identical requests). CP-SAT's own symmetry detection (levels 1-2) was
    # measured to stall presolve 10+ s past the time limit on the 200-request v4 benchmark
    # (OR-Tools 9.15), so it is off.
    sp.symmetry_level = 0
    # Interleaved search runs CP-SAT's portfolio (LNS, feasibility jump, core search, ...) in
    # deterministic batches, even on one worker; measured on the 200-request v4 benchmark it
    # proves optimality in ~1 s where the single default search stalls at a 35-50% gap.
    sp.interleave_search = True
    if params.deterministic:
        sp.max_deterministic_time = params.time_limit
    sp.max_time_in_seconds = params.wall_cap_s
    return solver


def solve_model(pm: PlacementModel, params: SolverParams) -> tuple[cp_model.CpSolver, str, float]:
    """Solve; returns the solver (for values), its status name and the wall time in seconds."""
    solver = solver_for(params)
    t0 = time.perf_counter()
    status = solver.solve(pm.model)
    return solver, solver.status_name(status), time.perf_counter() - t0


def read_solution(pm: PlacementModel, solver: cp_model.CpSolver) -> list[Assignment | None]:
    """Assignments from the solver's values; cube-level slices get concrete cubes here."""
    p = pm.problem
    out: list[Assignment | None] = [None] * p.n
    for key, members in pm.groups.items():
        taken = iter(a for v, a in pm.positions.get(key, ()) if solver.boolean_value(v))
        for i in members:
            if solver.boolean_value(pm.placed[i]):
                out[i] = next(taken)
    for i, cands in pm.cands.items():
        for v, a in cands:
            if solver.boolean_value(v):
                out[i] = a
    for i, rects in pm.rects.items():
        for pres, x, y, pod, shape in rects:
            if solver.boolean_value(pres):
                out[i] = Assignment("box", shape, pod, (), (int(solver.value(x)), int(solver.value(y))))
    left = {b: [c for c in cubes if not (c in pm.touched and solver.boolean_value(pm.touched[c]))]
            for b, cubes in pm.block_cubes.items()}
    blocks_of: dict[int, list[tuple[int, cp_model.IntVar]]] = defaultdict(list)
    for (i, b), n in sorted(pm.counts.items()):
        blocks_of[i].append((b, n))
    for i in p.order:
        if i not in pm.placed or p.kind(i) != "cubes" or not solver.boolean_value(pm.placed[i]):
            continue
        cubes: list[int] = []
        pod = -1
        for b, n in blocks_of[i]:
            k = int(solver.value(n))
            if k:
                cubes.extend(left[b][:k])
                left[b] = left[b][k:]
                pod = p.pod_of_block(b)
        out[i] = Assignment("cubes", p.options[i][0].shape, pod, tuple(cubes))
    return out


__all__ = [
    "CPSAT_SEED_MODULUS", "PlacementModel", "SolverParams", "build_model", "canonical",
    "hint_model", "read_solution", "rect_key", "solve_model", "solver_for",
]
