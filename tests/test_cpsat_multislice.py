"""CP-SAT places multislice requests (gangs) jointly with one-slice requests (issue 13 item 4).

Small hand-built fleets where the answer is known: v4 pods with only some cubes usable (each
pod holds a known number of 2-cube 4x4x8 slices) and 4x4 v5e pods with a corner failed. Every
result goes through `validate_placement`; the fewest pods and sites are checked against a
brute force over pod subsets.
"""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from helpers import v4_fleet
from test_cluster_multislice import check_accounting, gangs

from podsim.cluster import ClusterConfig, simulate
from podsim.placement import PodState, SliceRequest, SolverParams, place, validate_placement
from podsim.placement.cpsat import build_model, hint_model, read_solution, solve_model, solver_for
from podsim.placement.multislice import dcn_span, gang_first
from podsim.placement.problem import PlacementSettings, expand_gangs, make_problem
from podsim.topology import PodLayout, get_generation

FAST = SolverParams(time_limit=0.5)


def small_v5e(pods: int, cornered: list[int]) -> PodState:
    """4x4 v5e pods; the pods in `cornered` have their 2x2 corner failed (they hold one 2x4)."""
    gen = get_generation("tpu-v5e").model_copy(update={"pod_shape": (4, 4)})
    state = PodState(PodLayout(gen, pods=pods))
    state.fail(chips=[16 * p + c for p in cornered for c in (0, 1, 4, 5)])
    return state


def run(state, reqs, solver, sites=1, params=FAST):
    result = place(state, reqs, solver=solver, params=params, settings=PlacementSettings(sites=sites))
    validate_placement(state, result, reqs)
    return result


def model_only(state, reqs, sites=1):
    """The CP-SAT model's own answer (no greedy hint, no completion): what its objective prefers."""
    problem = expand_gangs(make_problem(state, reqs, PlacementSettings(sites=sites)))
    pm = build_model(problem)
    cp, status, _ = solve_model(pm, FAST)
    assert status == "OPTIMAL"
    return problem, read_solution(pm, cp)


def fewest_pods(holds: list[int], n: int, site_of=None, one_site=True) -> int:
    """Brute force: the fewest pods whose capacities add up to n (in one site if asked)."""
    for k in range(1, len(holds) + 1):
        for pods in itertools.combinations(range(len(holds)), k):
            if sum(holds[p] for p in pods) >= n and (not one_site or site_of is None or len({site_of[p] for p in pods}) == 1):
                return k
    return 0


@pytest.mark.parametrize("case", ["v4 cubes", "v5e rectangles"])
def test_joint_placement_beats_gang_first(case):
    """The gang-first greedy puts the 2-slice gang in the only pod that holds both slices, so
    the large single no longer fits; CP-SAT splits the gang over the two small pods and places all.

    v4: pods with 3, 3, 4 usable cubes, a gang of 2 x 4x4x8 (2 cubes each) and one 4x8x8 (4 cubes).
    v5e: 4x4 pods, pods 0 and 2 with a failed corner, a gang of 2 x 2x4 and one 4x4."""
    if case == "v4 cubes":
        state = v4_fleet([3, 3, 4])
        reqs = [SliceRequest("gang", "4x4x8", slices=2), SliceRequest("big", "4x8x8")]
        split = [0, 1]
    else:
        state = small_v5e(3, cornered=[0, 2])
        reqs = [SliceRequest("gang", "2x4", slices=2), SliceRequest("big", "4x4")]
        split = [0, 2]
    greedy = run(state, reqs, "greedy")
    cpsat = run(state, reqs, "cpsat")
    assert greedy["gang"].placed and not greedy["big"].placed
    assert "after higher-value requests" in greedy["big"].reason
    assert len(cpsat.placed) == 2 and cpsat["gang"].pods == split
    total = sum(r.weight() for r in reqs)
    assert cpsat.stats.value == total > greedy.stats.value == reqs[0].weight()
    assert cpsat.stats.hint_value == greedy.stats.value and not cpsat.stats.kept_hint


@pytest.mark.parametrize("case", ["v4 cubes", "v4 sub-cube", "v5e rectangles"])
def test_model_puts_a_gang_on_the_fewest_pods(case):
    """Without a hint, the model's own optimum keeps the gang on the fewest pods that can hold
    it (checked by brute force over pod subsets), with singles packed around it."""
    if case == "v4 cubes":  # pods hold 2, 1, 1, 1 slices; a gang of 3 and two singles fill all
        state = v4_fleet([4, 2, 2, 2])
        reqs = [SliceRequest("gang", "4x4x8", slices=3), SliceRequest("a", "4x4x8"), SliceRequest("b", "4x4x8")]
        holds = [2, 1, 1, 1]
    elif case == "v4 sub-cube":  # one-host slices; pod 1 has one usable cube (16 hosts), pod 0 two
        state = v4_fleet([2, 1])
        reqs = [SliceRequest("gang", "2x2x1", slices=16), SliceRequest("a", "2x2x1")]
        holds = [32, 16]
    else:  # pod 1 holds two 2x4, pods 0 and 2 one each
        state = small_v5e(3, cornered=[0, 2])
        reqs = [SliceRequest("gang", "2x4", slices=2)]
        holds = [1, 2, 1]
    problem, sol = model_only(state, reqs)
    gang = problem.gangs[0]
    pods = {sol[c].pod for c in gang.copies}
    assert all(sol[c] is not None for c in gang.copies)
    assert len(pods) == fewest_pods(holds, gang.request.slices)
    result = run(state, reqs, "cpsat")
    assert len(result.placed) == len(reqs) and len(result["gang"].pods) == len(pods)


def test_sites_hard_unless_span_sites():
    """Sites are pods (0,1 | 2,3). A gang never crosses them without span_sites, even where
    that costs it its place; with span_sites it crosses only when one site cannot hold it, and
    then on the fewest sites."""
    site_of = [0, 0, 1, 1]
    state = v4_fleet([2, 0, 2, 2])  # site 0 holds 1 slice, site 1 holds 2
    res = run(state, [SliceRequest("j", "4x4x8", slices=2)], "cpsat", sites=2)
    assert res["j"].pods == [2, 3] and dcn_span(state.layout, res["j"].pods, sites=2) == (1, 2)
    state = v4_fleet([2, 2, 2, 2])  # a gang of 3 fits no site (2 each)
    strict = run(state, [SliceRequest("j", "4x4x8", slices=3)], "cpsat", sites=2)["j"]
    assert not strict.placed and "span_sites" in strict.reason
    wide = run(state, [SliceRequest("j", "4x4x8", slices=3, span_sites=True)], "cpsat", sites=2)["j"]
    assert dcn_span(state.layout, wide.pods, sites=2) == (2, fewest_pods([1, 1, 1, 1], 3, site_of, one_site=False))
    # span_sites is a permission, not a preference: one site that holds it is used
    state = v4_fleet([4, 2, 2, 2])
    problem, sol = model_only(state, [SliceRequest("j", "4x4x8", slices=3, span_sites=True)], sites=2)
    pods = sorted({sol[c].pod for c in problem.gangs[0].copies})
    assert dcn_span(state.layout, pods, sites=2) == (1, 2) and pods == [0, 1]


def test_span_sites_trades_a_wan_hop_for_placed_weight():
    """Site 0 holds the gang, but then the big single (site 0's pod 0) does not fit; the gang
    that may span sites goes over the WAN so both are placed, the one that may not stays home
    and the single waits."""
    state = v4_fleet([4, 2, 2, 0])  # pod 0: 4 cubes (2 slices or the 4-cube single), pods 1, 2: 1 slice
    single = SliceRequest("big", "4x8x8")
    for span, placed in ((False, 1), (True, 2)):
        reqs = [SliceRequest("j", "4x4x8", slices=2, span_sites=span), single]
        res = run(state, reqs, "cpsat", sites=2)
        assert len(res.placed) == placed
        if span:
            assert res["j"].pods == [1, 2] and res["big"].pods == [0]


def test_a_gang_that_can_never_fit_gets_its_reason_and_no_model_part():
    """A gang whose shape no layout realises has no placed variables (its copies share the empty
    options): the model adds nothing for it, the single beside it is placed, the gang says why."""
    state = v4_fleet([2, 2])
    reqs = [SliceRequest("g", "16x16x32", slices=2), SliceRequest("a", "4x4x8")]
    res = run(state, reqs, "cpsat")
    assert not res["g"].placed and "needs 128 cubes" in res["g"].reason and res["a"].placed
    pm = build_model(expand_gangs(make_problem(state, reqs)))
    assert not pm.gang_present and not pm.gang_pods and set(pm.placed) == {2}


def test_timeout_without_a_solution_falls_back_to_gang_first():
    """A search stopped before any solution returns the greedy gang-first placement (the hint)
    and says so (kept_hint, the solver's status)."""
    state = v4_fleet([3, 3, 4])
    reqs = [SliceRequest("gang", "4x4x8", slices=2), SliceRequest("big", "4x8x8")]
    res = run(state, reqs, "cpsat", params=SolverParams(time_limit=1e-9))
    greedy = run(state, reqs, "greedy")
    assert res.stats.status not in ("OPTIMAL", "FEASIBLE")  # the limit is below any search
    assert res.stats.kept_hint and res.stats.value == greedy.stats.value
    assert res["gang"].pods == greedy["gang"].pods and not res["big"].placed
    problem = expand_gangs(make_problem(state, reqs))
    assert res.stats.hint_value == problem.value(gang_first(problem))


def test_cluster_batch_admission_with_gangs_audited():
    """The cluster simulation with CP-SAT batch admission and multislice jobs: every batch goes
    through validate_placement (audit), chip-seconds add up, gangs complete."""
    jobs = gangs(n=20, seed=4)
    cfg = ClusterConfig(generation="tpu-v4", pods=2, sites=2, policy="fifo", solver="cpsat",
                        decision_time_limit=0.2, batch_window=6, horizon_s=2 * 86400)
    jobs = [dataclasses.replace(j, span_sites=j.slices > 1 and k % 2 == 0) for k, j in enumerate(jobs)]
    result = simulate(cfg, jobs, seed=5, audit=True)
    check_accounting(result)
    assert result.metrics["cpsat_calls"] > 0 and result.metrics["audits"] > 0
    out = {o.id: o for o in result.jobs}
    assert any(out[j.id].status == "completed" for j in jobs if j.slices > 1)


@pytest.mark.parametrize("gen,ocs", [pytest.param("tpu-v4", True, marks=pytest.mark.slow),
                                     pytest.param("tpu-v4", False, marks=pytest.mark.slow), ("tpu-v5e", False)])
def test_gang_first_hint_is_feasible_and_copies_are_ordered(gen, ocs):
    """The greedy gang-first hint satisfies every constraint of the joint model, the copies'
    symmetry breaking included (solved with every variable fixed to its hint); the model's own
    solution keeps each cube-level gang's copies in pod order."""
    state = PodState(PodLayout(get_generation(gen), pods=2, ocs=ocs))
    state.fail(hosts=[3, 40])
    if gen == "tpu-v4":
        shapes = [("4x4x8", 3), ("2x2x2", 4), ("4x4x4", 2), ("8x8x8", 1), ("2x2x1", 1), ("4x4x8", 1), ("4x4x4", 5)]
    else:
        shapes = [("4x8", 3), ("2x2", 4), ("8x8", 2), ("16x16", 1), ("2x4", 1), ("4x8", 1), ("8x16", 2)]
    reqs = [SliceRequest(f"r{k}", s, slices=n, span_sites=n > 1 and k % 2 == 0, priority=k % 2)
            for k, (s, n) in enumerate(shapes)]
    settings = PlacementSettings(sites=2)
    problem = expand_gangs(make_problem(state, reqs, settings))
    for policy in ("first", "best"):
        hint = gang_first(problem, policy)
        assert any(hint[c] is not None for g in problem.gangs for c in g.copies)
        pm = build_model(problem, hint)
        hint_model(pm, hint)
        solver = solver_for(SolverParams(time_limit=2))
        solver.parameters.fix_variables_to_their_hinted_value = True
        assert solver.status_name(solver.solve(pm.model)) in ("OPTIMAL", "FEASIBLE"), policy
        if policy == "best":  # the model's own answer from that start keeps each cube-level gang in pod order
            solver = solver_for(SolverParams(time_limit=2))
            assert solver.status_name(solver.solve(pm.model)) in ("OPTIMAL", "FEASIBLE")
            sol = read_solution(pm, solver)
            for g in problem.gangs:
                got = [sol[c] for c in g.copies]
                assert all(a is None for a in got) or all(a is not None for a in got)
                if got[0] is not None and got[0].kind == "cubes":
                    keys = [sum(int(problem.block_of(c)) for c in a.cubes) for a in got]
                    assert keys == sorted(keys) and [a.pod for a in got] == sorted(a.pod for a in got)


@pytest.mark.parametrize("case", ["v4 cubes", "v5e rectangles"])
def test_copies_of_a_gang_are_ordered(case):
    """Symmetry breaking: with two pods holding one slice each, the gang's copy 0 in pod 0 and
    copy 1 in pod 1 is feasible; the same placement with the copies swapped is not."""
    if case == "v4 cubes":
        state, req = v4_fleet([2, 2]), SliceRequest("g", "4x4x8", slices=2)
    else:
        state, req = small_v5e(2, cornered=[0, 1]), SliceRequest("g", "2x4", slices=2)
    problem = expand_gangs(make_problem(state, [req]))
    first, second = problem.gangs[0].copies

    def in_pod(pm, i, pod):
        if pm.pod_choice:
            return [pm.pod_choice[(i, pod)]]
        return [pres for pres, _, _, p, _ in pm.rects[i] if p == pod]

    for order, feasible in (((0, 1), True), ((1, 0), False)):
        pm = build_model(problem)
        pm.model.add(sum(in_pod(pm, first, order[0])) == 1)
        pm.model.add(sum(in_pod(pm, second, order[1])) == 1)
        _, status, _ = solve_model(pm, FAST)
        assert (status in ("OPTIMAL", "FEASIBLE")) == feasible and (feasible or status == "INFEASIBLE"), (order, status)
