"""Place a batch of slice requests on a pod state: greedy or CP-SAT, with reasons for misses.

    result = place(state, requests, solver="cpsat", params=SolverParams(time_limit=1))
    validate_placement(state, result)         # no part used twice, none broken, right topology
    for p in result.placed:
        state.allocate(p.request.id, p)

CP-SAT never returns less than greedy: it is warm-started with the better of the first-fit and
best-fit solutions as a complete hint, the hint is returned if the solver finds nothing better
in its time limit, and any request that still fits afterwards is added greedily.

Multislice requests (`slices` > 1) are gangs: all N slices or none, in one site unless the
request allows `span_sites`. The batch is expanded so a gang is N one-slice copies
(`expand_gangs`). The greedy places gangs first, largest weight first, on the fewest sites then
pods (`multislice.gang_first`), then the one-slice requests. CP-SAT places gangs jointly with
the one-slice requests (`cpsat_gang`: copies all or none, fewest sites then pods below one unit
of weight), so a gang never blocks a single that a joint placement fits; if it finds no
solution in its limit, the gang-first greedy (its hint) is returned (`SolveStats.kept_hint`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Literal

from podsim import quantities as q
from podsim.errors import PodsimError
from podsim.placement.cpsat import SolverParams, build_model, hint_model, read_solution, solve_model
from podsim.placement.degraded import darken
from podsim.placement.greedy import GREEDY_POLICIES, Policy, fit_any, fit_request
from podsim.placement.multislice import check_sites, fit_multislice, gang_first
from podsim.placement.problem import (
    PlacementSettings,
    Problem,
    expand_gangs,
    make_problem,
    options_or_reason,
)
from podsim.placement.realise import to_slice
from podsim.placement.requests import SliceRequest
from podsim.placement.reshape import reshape_options
from podsim.placement.result import PlacementResult, SlicePlacement, SolveStats
from podsim.placement.space import Assignment, FreeSpace, cubes_needed, request_options
from podsim.topology import format_shape

Solver = Literal["cpsat", "greedy"]
SOLVERS: tuple[str, ...] = ("cpsat", "greedy")


def place(state, requests: Sequence[SliceRequest], *, solver: Solver = "cpsat", policy: Policy = "best",
          params: SolverParams | None = None, settings: PlacementSettings | None = None,
          now_s: float = 0.0) -> PlacementResult:
    """Decide which requests to place now and where; the state is not changed.

    Parameters
    ----------
    state : PodState
        The pods, their jobs and failures.
    requests : sequence of SliceRequest
        The batch to place.
    solver : {'cpsat', 'greedy'}
        CP-SAT's optimisation models (batch admission; never worse than greedy), or the greedy
        baseline (`policy` 'first' or 'best' fit; 'hilbert' on static pods).
    params : SolverParams, optional
        CP-SAT's limits (deterministic time units), workers and seed.
    settings : PlacementSettings, optional
        Sites, degraded placement, folds and splits.
    now_s : float
        The current time, for the age term of the admission weight.

    Returns
    -------
    PlacementResult
        One SlicePlacement per request (in order; `result[id]`), the solver's statistics and the
        pods' chip totals; every placement has passed `validate_placement`.

    Examples
    --------
    >>> from podsim import PodState, SliceRequest, place
    >>> state = PodState.empty("tpu-v4")
    >>> result = place(state, [SliceRequest("a", "4x4x8"), SliceRequest("b", "8x8x8")], solver="greedy")
    >>> [p.placed for p in result.placements], result["a"].slice.chips.size
    ([True, True], 128)
    """
    if solver not in SOLVERS:
        raise PodsimError(f"solver {solver!r} is not known; use one of {', '.join(SOLVERS)}")
    if policy not in GREEDY_POLICIES and not (policy == "hilbert" and solver == "greedy"):
        raise PodsimError(f"greedy policy {policy!r} is not known; use one of {', '.join(GREEDY_POLICIES)}"
                          + (" (hilbert: with the greedy solver)" if policy == "hilbert" else ""))
    params = params or SolverParams()
    q.ARRIVAL_TIME.check(now_s, "now (s)")  # the range of --now and of a request's arrival_s
    problem = make_problem(state, requests, settings, now_s)
    if policy == "hilbert":  # the non-contiguous baseline: every request takes any free chips
        problem = dataclasses.replace(problem, reshapes=tuple(
            reshape_options(state.layout, r, policy="hilbert") for r in problem.requests))
    check_sites(state.layout, problem.settings.sites)
    problem = expand_gangs(problem)  # a multislice request as N one-slice copies, all or none
    t0 = time.perf_counter()
    if solver == "greedy":
        final = gang_first(problem, policy)
        stats = SolveStats(f"greedy-{policy}", "HEURISTIC", None, None, time.perf_counter() - t0, problem.value(final))
    else:
        final, stats = _cpsat(problem, params, policy)
    return PlacementResult(_materialise(state, problem, final, policy), stats, state.layout.n_chips,
                           state.n_healthy_chips, state.n_busy_chips, problem.settings.sites)


def _place_gang(state, space: FreeSpace, request: SliceRequest, opts, policy: Policy,
                settings: PlacementSettings) -> SlicePlacement:
    """A multislice request's N slices, all or none, on the fewest sites then pods."""
    mf = fit_multislice(space, request, opts, policy, settings)
    if not mf.assignments:
        return SlicePlacement(request, None, f"needs {mf.reason}")
    return _gang_slices(state, request, opts, mf.assignments)


def _gang_slices(state, request: SliceRequest, opts, assignments: Sequence[Assignment]) -> SlicePlacement:
    """The placement of a gang's N assignments: their slices, darkened for down OCS units."""
    slices = tuple(darken(state, to_slice(state.layout, opts, a)) for a in assignments)
    return SlicePlacement(request, slices[0], slices=slices)


def _cpsat(problem: Problem, params: SolverParams, policy: Policy) -> tuple[list, SolveStats]:
    t0 = time.perf_counter()
    greedy = [gang_first(problem, pol) for pol in (policy, *(p for p in GREEDY_POLICIES if p != policy))]
    hint = max(greedy, key=problem.value)
    pm = build_model(problem, hint)
    hint_model(pm, hint)
    status, objective, bound, solution, solver_s = "NO_REQUESTS", None, None, None, None
    if pm.placed:
        cp, status, solver_s = solve_model(pm, params)
        if status == "MODEL_INVALID":  # a bug in the model (inputs are bounded), not a reason to fall back
            raise RuntimeError(f"CP-SAT rejected the placement model as MODEL_INVALID ({len(problem.requests)} requests)")
        if status in ("OPTIMAL", "FEASIBLE"):
            solution = read_solution(pm, cp)
            objective, bound = cp.objective_value, cp.best_objective_bound
    kept = solution is None or problem.value(solution) < problem.value(hint)
    chosen = hint if kept else solution
    final = gang_first(problem, policy, start=chosen)
    completed = sum(1 for i, (a, b) in enumerate(zip(chosen, final, strict=True))
                    if a is None and b is not None and _answers(problem, i))
    stats = SolveStats("cpsat", status, objective, bound, time.perf_counter() - t0, problem.value(final),
                       hint_value=problem.value(hint), kept_hint=kept and bool(pm.placed), completed=completed,
                       solver_s=solver_s,
                       wall_capped=bool(params.deterministic and status != "OPTIMAL" and solver_s is not None
                                        and solver_s >= 0.99 * params.wall_cap_s),
                       n_vars=pm.n_vars, n_constraints=pm.n_constraints,
                       params={"time_limit": params.time_limit, "num_workers": params.num_workers,
                               "random_seed": params.random_seed, "deterministic": params.deterministic})
    return final, stats


def _answers(problem: Problem, i: int) -> bool:
    """Request i stands for a request of the batch: a one-slice request or a gang's first copy."""
    g = problem.gang_id(i)
    return g is None or problem.gangs[g].copies[0] == i


def _materialise(state, problem: Problem, final: Sequence[Assignment | None], policy: Policy) -> tuple[SlicePlacement, ...]:
    """One SlicePlacement per request of the batch, in order (a gang's copies joined again)."""
    after = problem.space.copy()
    for a in final:
        if a is not None:
            after.take(after.chips_of(a))
    out = []
    for i, (req, a) in enumerate(zip(problem.requests, final, strict=True)):
        g = problem.gang_id(i)
        if g is not None:
            if _answers(problem, i):
                out.append(_gang_placement(state, problem, g, final, after, policy))
        elif a is not None:
            out.append(SlicePlacement(req, darken(state, to_slice(state.layout, problem.options[i], a))))
        else:
            out.append(SlicePlacement(req, None, unplaced_reason(state, problem, i, after)))
    return tuple(out)


def _gang_placement(state, problem: Problem, g: int, final, after: FreeSpace, policy: Policy) -> SlicePlacement:
    """A multislice request's N slices (darkened for down OCS units), or why it has none."""
    gang = problem.gangs[g]
    req, opts = gang.request, problem.options[gang.copies[0]]
    got = [final[c] for c in gang.copies]
    if all(a is not None for a in got):
        return _gang_slices(state, req, opts, got)
    if not opts:
        return SlicePlacement(req, None, problem.errors[gang.copies[0]])
    before = fit_multislice(problem.space, req, opts, policy, problem.settings)
    if not before.assignments:
        return SlicePlacement(req, None, f"needs {before.reason}")
    now = fit_multislice(after, req, opts, policy, problem.settings)
    return SlicePlacement(req, None, f"needs {now.reason or f'{req.slices} slices of {req.name}'} after higher-value "
                                     f"requests (all {req.slices} fit in the free space before)")


def unplaced_reason(state, problem: Problem, i: int, after: FreeSpace) -> str:
    """One line saying why request i has no slice: broken or missing parts, or outbid."""
    if not problem.options[i]:
        if not problem.reshape_of(i):
            return problem.errors[i]
        forms = " or ".join(dict.fromkeys(r.form for r in problem.reshape_of(i)))
        req = problem.requests[i]
        return f"no {forms} of {req.name} fits the free space ({int(problem.space.chip_free.sum())} free chips); natively: {problem.errors[i]}"
    req, opts = problem.requests[i], problem.options[i]
    lay = problem.layout
    before = problem.space
    fitted_before = fit_request(before, opts, "first", problem.settings) is not None
    outbid = fitted_before
    kind = opts[0].kind
    one_pod = " in one pod" if lay.pods > 1 else ""
    if kind == "cubes":
        need = cubes_needed(lay.generation, opts[0].shape)
        cubes = f"{need} healthy cube{'s' if need != 1 else ''}{one_pod}"
        per = lay.cubes_per_pod
        usable = "cube_usable_degraded" if opts[0].degraded else "cube_usable"
        free_b = max(int(getattr(before, usable)[p * per:(p + 1) * per].sum()) for p in range(lay.pods))
        free_a = max(int(getattr(after, usable)[p * per:(p + 1) * per].sum()) for p in range(lay.pods))
        if outbid:
            return f"needs {cubes}, {free_a} left after higher-value requests ({free_b} free before)"
        whole = max(int(before.cube_whole_free[p * per:(p + 1) * per].sum()) for p in range(lay.pods))
        down = [state.ocs_down_in_pod(p) for p in range(lay.pods)]
        if opts[0].degraded:
            cut = state.ocs_failed.reshape(lay.pods, lay.dims, lay.links_per_face).all(axis=2).any(axis=1)
            if whole >= need and cut.all():
                return (f"needs {cubes}, {free_b} free for a degraded torus: every pod has all OCS units of a "
                        f"dimension down (the dark circuits would cut its cubes apart)")
        elif whole >= need and all(down):
            ids = ", ".join(str(o) for o in down[0][:4])
            return (f"needs {cubes}, {free_b} free: OCS {ids} down, and every cube-level "
                    f"torus needs a circuit on each OCS of its pod")
        extra = f" ({whole - free_b} more free but with a failed OCS port)" if whole > free_b else ""
        return f"needs {cubes}, {free_b} free{extra}"
    if kind == "subcube":
        what, where = f"aligned {format_shape(opts[0].shape)} position", "inside any cube"
        free = f"{int(before.chip_free.sum())} free chips"
    elif kind == "blocks":
        what, where = f"set of blocks with free {req.name} pieces", "in one pod"
        free = f"{int(before.chip_free.sum())} free chips"
    elif kind == "chipbox":
        what, where = f"{req.name} box of chips", f"in the static {format_shape(lay.generation.pod_shape)} torus"
        free = f"{int(before.chip_free.sum())} free chips"
    elif lay.has_cubes:
        what = f"contiguous box of {'x'.join(str(v) for v in opts[0].unit_shape)} cubes"
        where = f"in the static {format_shape(lay.generation.cube_grid)} cube arrangement"
        free = f"{int(before.cube_whole_free.sum())} whole free cubes, but without OCS a slice needs them contiguous"
    else:
        what = f"{req.name} rectangle"
        where = f"in {'any' if lay.pods > 1 else 'the'} {format_shape(lay.generation.pod_shape)} pod"
        free = f"{int(before.chip_free.sum())} free chips"
    if outbid:
        return f"no {what} left {where} after higher-value requests"
    return f"no free {what} {where} ({free})"


def place_one(state, request: SliceRequest, policy: Policy = "best",
              settings: PlacementSettings | None = None) -> SlicePlacement:
    """The fast path for a scheduler: where one request would go now (greedy, no solver).

    The state is not changed; call `state.allocate(request.id, result)` to take it."""
    settings = settings or PlacementSettings()
    opts, err = options_or_reason(state.layout, request, settings.rotate)
    reshapes = reshape_options(state.layout, request, settings.fold, settings.rotate, policy)
    if not opts and not reshapes:
        return SlicePlacement(request, None, err)
    space = FreeSpace.of(state)
    if request.slices > 1:  # a multislice request: all its slices or none
        return _place_gang(state, space, request, opts, policy, settings)
    a = fit_any(space, opts, reshapes, policy, settings)
    if a is not None:
        return SlicePlacement(request, darken(state, to_slice(state.layout, opts, a)))
    problem = Problem(space, (request,), (tuple(opts),), (err,), (1,), (0,), settings, reshapes=(reshapes,))
    return SlicePlacement(request, None, unplaced_reason(state, problem, 0, space))


def count_fitting(state, shape: str | tuple[int, ...], twisted: bool = False, solver: Solver = "cpsat",
                  params: SolverParams | None = None, settings: PlacementSettings | None = None) -> int:
    """How many copies of one slice shape fit in the free space at once.

    Cube-level slices on OCS pods: exact, sum over pods of usable cubes // cubes per slice (any
    cubes will do). Otherwise a packing problem: CP-SAT (optimal within its limit) or greedy."""
    probe = SliceRequest("probe", shape, twisted)
    opts = request_options(state.layout, probe)
    if opts[0].kind == "cubes":  # OCS: any usable cubes of one pod will do
        need = cubes_needed(state.layout.generation, probe.shape)
        usable = FreeSpace.of(state).cube_usable.reshape(state.layout.pods, -1).sum(axis=1)
        return int((usable // need).sum())
    chips = probe.chips
    upper = int(state.chip_free.sum()) // chips
    if upper == 0:
        return 0
    reqs = [SliceRequest(f"copy-{k}", shape, twisted) for k in range(upper)]
    result = place(state, reqs, solver=solver, params=params, settings=settings)
    return len(result.placed)
