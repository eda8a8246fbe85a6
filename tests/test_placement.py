"""Placement: the models on known cases, the pod state, and the validator's own teeth.

Every result below goes through `validate_placement`; CP-SAT time limits are small.
"""

from __future__ import annotations

import numpy as np
import pytest

from podsim.errors import PodsimError
from podsim.placement import PodState, SliceRequest, SolverParams, place, validate_placement
from podsim.placement.cpsat import build_model, hint_model, solver_for
from podsim.placement.greedy import greedy_assign
from podsim.placement.metrics import free_space_summary, largest_placeable, placement_report
from podsim.placement.place import count_fitting, place_one
from podsim.placement.problem import PlacementSettings, make_problem
from podsim.placement.result import SlicePlacement
from podsim.placement.validate import InvalidPlacement
from podsim.topology import PodLayout, get_generation
from podsim.topology.fabric import Circuit
from podsim.topology.shapes import validate_shape
from podsim.topology.slices import Slice, plan_slice

FAST = SolverParams(time_limit=0.5)


def run(state, reqs, solver="cpsat", **kw):
    """Place and validate; every result in this file goes through the one validator."""
    result = place(state, reqs, solver=solver, params=kw.pop("params", FAST), **kw)
    validate_placement(state, result, reqs)
    return result


def v4_with_usable(n_usable: int, pods: int = 1) -> PodState:
    """A v4 pod where only the first `n_usable` cubes of each pod are healthy."""
    state = PodState(PodLayout(get_generation("tpu-v4"), pods=pods))
    per = state.layout.cubes_per_pod
    state.fail(cubes=[p * per + c for p in range(pods) for c in range(n_usable, per)])
    return state


def mini(gen_id: str, shape, **kw) -> PodState:
    gen = get_generation(gen_id).model_copy(update={"pod_shape": tuple(shape)})
    return PodState(PodLayout(gen, **kw))


# --- CP-SAT against greedy on cases where greedy is known to lose --------------------------------

def test_cube_selection_beats_greedy_knapsack():
    """10 usable cubes; 6 + 5 + 5 cubes asked. Largest-first greedy takes the 6, CP-SAT the two 5s."""
    state = v4_with_usable(10)
    reqs = [SliceRequest("six", "4x4x24"), SliceRequest("five-a", "4x4x20"), SliceRequest("five-b", "4x4x20")]
    g = run(state, reqs, solver="greedy")
    c = run(state, reqs)
    assert [p.request.id for p in g.placed] == ["six"]
    assert sorted(p.request.id for p in c.placed) == ["five-a", "five-b"]
    assert c.stats.status == "OPTIMAL" and c.placed_chips == 640 > g.placed_chips == 384
    assert g["five-a"].reason == "needs 5 healthy cubes, 4 left after higher-value requests (10 free before)"


def test_rectangles_beat_greedy_with_priorities():
    """8x8 static pod: an 8x8 job arrived first, two 4x8 jobs of priority 1 weigh as much each."""
    state = mini("tpu-v5e", (8, 8))
    reqs = [SliceRequest("big", "8x8", arrival_s=0), SliceRequest("a", "4x8", priority=1, arrival_s=1),
            SliceRequest("b", "4x8", priority=1, arrival_s=2)]
    g = run(state, reqs, solver="greedy")
    c = run(state, reqs)
    assert [p.request.id for p in g.placed] == ["big"]
    assert sorted(p.request.id for p in c.placed) == ["a", "b"]
    assert c.priority_weighted_chips == 128 > g.priority_weighted_chips == 64


def test_reason_names_cubes_needed_and_free():
    state = v4_with_usable(14)
    r = run(state, [SliceRequest("big", "8x8x16", twisted=True)])
    assert r["big"].reason == "needs 16 healthy cubes, 14 free"


# --- OCS ports and units -----------------------------------------------------------------------

def test_failed_ocs_port_keeps_cube_out_of_tori_but_not_subcube_slices():
    """Cube 0 has a failed port: no cube-level slice may use it; a sub-cube slice may."""
    state = v4_with_usable(2)
    lay = state.layout
    ocs, port = lay.ocs_port(0, 2, 0, 5)  # cube 0, z dimension, '+' face, link 5
    state.fail(ocs_ports=[(int(ocs), int(port))])
    r = run(state, [SliceRequest("t", "4x4x4"), SliceRequest("u", "4x4x4"), SliceRequest("s", "2x4x4")])
    assert r["t"].cubes == [1] and not r["u"].placed
    assert r["s"].placed and r["s"].cubes == [0]
    state.fail(cubes=[1])
    r = run(state, [SliceRequest("u", "4x4x4")])
    assert r["u"].reason == "needs 1 healthy cube, 0 free (1 more free but with a failed OCS port)"


def test_ocs_unit_down_blocks_cube_level_slices_in_its_pod():
    state = v4_with_usable(4, pods=2)
    state.fail(ocs=[3])  # an OCS of pod 0
    r = run(state, [SliceRequest("a", "4x4x8"), SliceRequest("b", "4x4x8"), SliceRequest("c", "4x4x8")])
    pods = sorted(p.slice.pod for p in r.placed)
    assert pods == [1, 1] and len(r.unplaced) == 1
    assert "in one pod" in r.unplaced[0].reason


def test_slices_never_span_pods():
    state = v4_with_usable(3, pods=2)
    r = run(state, [SliceRequest("four", "4x4x16"), SliceRequest("x", "4x4x12"), SliceRequest("y", "4x4x12")])
    assert not r["four"].placed and r["four"].reason.startswith("needs 4 healthy cubes in one pod")
    assert sorted(p.slice.pod for p in (r["x"], r["y"])) == [0, 1]


# --- locality and fragmentation ----------------------------------------------------------------

def test_cube_slices_stay_in_one_block_and_keep_blocks_whole():
    """Two 4-cube slices on an empty v4 pod share one 8-cube DCN block; 7 blocks stay whole."""
    state = PodState.empty("tpu-v4")
    r = run(state, [SliceRequest("a", "4x4x16"), SliceRequest("b", "4x4x16")])
    blocks = {c // 8 for p in r.placed for c in p.cubes}
    assert len(blocks) == 1
    after = state.copy()
    for p in r.placed:
        after.allocate(p.request.id, p)
    assert free_space_summary(after)["free_blocks"] == 7


def test_subcube_slices_fill_broken_cubes_first():
    """A cube with a failed host hosts the small slices; the whole cubes stay whole."""
    state = PodState.empty("tpu-v4")
    state.fail(hosts=[5 * 16])  # one host of cube 5
    reqs = [SliceRequest(f"s{k}", "2x2x2") for k in range(3)]
    for solver in ("cpsat", "greedy"):
        r = run(state, reqs, solver=solver)
        assert {c for p in r.placed for c in p.cubes} == {5}, solver


def test_age_term_lets_old_low_priority_request_win():
    """One 4x4x4 slot: priority 1 arriving now vs priority 0 waiting 2 h (weight x3 vs x2)."""
    state = v4_with_usable(1)
    reqs = [SliceRequest("new-hi", "4x4x4", priority=1, arrival_s=7200), SliceRequest("old-lo", "4x4x4", arrival_s=0)]
    assert [p.request.id for p in run(state, reqs, now_s=7200).placed] == ["old-lo"]
    assert [p.request.id for p in run(state, reqs, now_s=1800).placed] == ["new-hi"]


# --- static pods and the OCS-less baseline ------------------------------------------------------

def test_static_wraparound_only_on_full_axes():
    state = PodState.empty("tpu-v5e")
    r = run(state, [SliceRequest("half", "8x16"), SliceRequest("q", "8x8")])
    views = validate_placement(state, r)
    rows = {d["id"]: d for d in placement_report(r, views)}
    assert rows["half"]["topology"] == "partial torus"
    # 8x16 with wraparound on the 16 axis: the best cut crosses the 8-long axis, 16 links
    assert rows["half"]["bisection_bytes_per_s"] == pytest.approx(16 * 50e9)
    assert rows["q"]["topology"] == "mesh"


def test_static_boxes_rotate_and_respect_failed_hosts():
    """A 16x8 hole: an 8x16 request is placed as 16x8; no box crosses a failed host."""
    state = PodState.empty("tpu-v5e")
    state.allocate("left", plan_slice(state.layout, validate_shape(state.layout.generation, "16x8"), origin=(0, 0)))
    r = run(state, [SliceRequest("r", "8x16")])
    assert r["r"].shape == "16x8" and r["r"].slice.origin == (0, 8)
    state.release("left")
    state.fail(hosts=[0])
    r = run(state, [SliceRequest("whole", "16x16"), SliceRequest("h", "8x16")])
    assert not r["whole"].placed and r["h"].placed


def test_no_ocs_baseline_needs_contiguous_cubes():
    """Same failed cubes: OCS fits a 2x2x2-cube slice from scattered cubes, static wiring cannot."""
    gen = get_generation("tpu-v4")
    free_cubes = [0, 3, 12, 15, 48, 51, 60, 63]  # the corners of the 4x4x4 cube grid
    fail = [c for c in range(64) if c not in free_cubes]
    counts = {}
    for ocs in (True, False):
        state = PodState(PodLayout(gen, ocs=ocs))
        state.fail(cubes=fail)
        counts[ocs] = run(state, [SliceRequest("x", "8x8x8")])["x"].placed
    assert counts == {True: True, False: False}


def test_count_fitting_ocs_closed_form_matches_cpsat():
    state = mini("tpu-v4", (8, 8, 8))  # 8 cubes
    state.fail(hosts=[3])
    assert count_fitting(state, "4x4x8") == 3
    reqs = [SliceRequest(f"c{k}", "4x4x8") for k in range(4)]
    assert len(run(state, reqs).placed) == 3


def test_largest_placeable():
    state = v4_with_usable(12)
    assert largest_placeable(state) == {"shape": "8x8x12", "chips": 768}
    st = PodState.empty("tpu-v5e")
    st.fail(hosts=[0])
    assert largest_placeable(st)["chips"] == 128


# --- determinism and hints -------------------------------------------------------------------

def _v4_mixed(seed: int):
    rng = np.random.default_rng(seed)
    state = PodState.empty("tpu-v4")
    state.fail(hosts=rng.choice(1024, 60, replace=False).tolist())
    shapes = ["2x2x1", "2x4x4", "1x1x1", "4x4x4", "4x4x8", "8x8x8", "2x2x2", "4x8x8"]
    reqs = [SliceRequest(f"r{k}", shapes[k % len(shapes)], twisted=shapes[k % len(shapes)] in ("4x4x8", "4x8x8"),
                         priority=int(rng.integers(0, 3)), arrival_s=float(-rng.uniform(0, 3600))) for k in range(24)]
    return state, reqs


@pytest.mark.parametrize("workers", [1, 2])
def test_deterministic_mode_same_inputs_same_placement(workers):
    state, reqs = _v4_mixed(1)
    params = SolverParams(time_limit=0.3, num_workers=workers, random_seed=7)
    a, b = (run(state, reqs, params=params) for _ in range(2))
    assert [p.chips for p in a.placements] == [p.chips for p in b.placements]
    assert [p.ocs_circuits for p in a.placements] == [p.ocs_circuits for p in b.placements]


@pytest.mark.parametrize("gen,ocs", [("tpu-v4", True), ("tpu-v4", False), ("tpu-v5e", False)])
def test_greedy_hint_is_complete_and_feasible(gen, ocs):
    """The hint satisfies every constraint, symmetry breaking included."""
    state, reqs = _v4_mixed(2)
    if gen == "tpu-v5e":
        state = PodState.empty(gen)
        state.fail(hosts=[5])
        reqs = [SliceRequest(f"e{k}", s) for k, s in enumerate(["2x2", "2x4", "4x2", "1x1", "4x4", "2x2", "2x4", "4x8"] * 4)]
    elif not ocs:
        state = PodState(PodLayout(get_generation(gen), ocs=False))
        reqs = [r for r in reqs if not r.twisted]
    problem = make_problem(state, reqs)
    for policy in ("first", "best"):
        hint = greedy_assign(problem, policy)
        pm = build_model(problem, hint)
        hint_model(pm, hint)
        solver = solver_for(SolverParams(time_limit=2))
        solver.parameters.fix_variables_to_their_hinted_value = True
        status = solver.status_name(solver.solve(pm.model))
        assert status in ("OPTIMAL", "FEASIBLE"), (policy, status)


def test_solver_params_refuse_all_cores():
    with pytest.raises(PodsimError, match="num_workers must be >= 1"):
        SolverParams(num_workers=0)


# --- pod state ------------------------------------------------------------------------------

def test_state_allocate_release_fail_repair():
    state = PodState.empty("tpu-v4")
    p = place_one(state, SliceRequest("j", "4x4x8", twisted=True))
    state.allocate("j", p)
    assert state.n_busy_chips == 128 and (state.port_job >= 0).sum() == 2 * 2 * 48
    with pytest.raises(PodsimError, match="held by job 'j'"):
        state.allocate("k", p)
    cube = p.cubes[0]
    assert state.fail(hosts=[cube * 16 + 3]) == ["j"]
    ocs, port = p.ocs_circuits[0][:2]
    assert state.fail(ocs_ports=[(ocs, port)]) == ["j"]
    assert state.fail(ocs=[40]) == ["j"]
    assert state.fail(hosts=[1000]) == []
    assert state.fail(chips=[p.chips[5]]) == ["j"]
    slc = state.release("j")
    assert state.n_busy_chips == 0 and (state.port_job < 0).all()
    with pytest.raises(PodsimError, match="has failed"):
        state.allocate("j", slc)
    state.repair(hosts=[cube * 16 + 3], ocs=[40], ocs_ports=[(ocs, port)], chips=[p.chips[5]])
    state.allocate("j", slc)
    with pytest.raises(PodsimError, match="does not exist"):
        state.fail(hosts=[5000])


def test_place_one_fast_path_gives_reason():
    state = v4_with_usable(1)
    ok = place_one(state, SliceRequest("a", "4x4x4"))
    state.allocate("a", ok)
    miss = place_one(state, SliceRequest("b", "4x4x4"))
    assert not miss.placed and miss.reason == "needs 1 healthy cube, 0 free"
    assert not place_one(state, SliceRequest("c", "8x8x8")).placed


def test_twisted_request_on_static_wiring_is_a_reason_not_an_error():
    state = PodState.empty("tpu-v4", ocs=False)
    r = run(state, [SliceRequest("t", "4x4x8", twisted=True)])
    assert not r["t"].placed and r["t"].reason == "slice 4x4x8_T is a twisted torus, which needs OCS circuits; this pod is statically wired"
    assert place_one(state, SliceRequest("t", "4x4x8", twisted=True)).reason == r["t"].reason


# --- the validator fails when it should ------------------------------------------------------

def _placed(state, req, **kw) -> SlicePlacement:
    layout = state.layout
    spec = validate_shape(layout.generation, req.shape, req.twisted, layout.ocs)
    return SlicePlacement(req, plan_slice(layout, spec, **kw))


def test_validator_rejects_chip_used_twice():
    state = PodState.empty("tpu-v4")
    a = _placed(state, SliceRequest("a", "4x4x4"), cubes=[3])
    b = _placed(state, SliceRequest("b", "2x2x1"), cubes=[3], origin=(0, 0, 0))
    with pytest.raises(InvalidPlacement, match="given to two slices"):
        validate_placement(state, [a, b])


def test_validator_rejects_failed_host_and_held_chip():
    state = PodState.empty("tpu-v4")
    a = _placed(state, SliceRequest("a", "4x4x4"), cubes=[2])
    state.fail(hosts=[2 * 16])
    with pytest.raises(InvalidPlacement, match=r"uses failed chip \d+ \(host 32, cube 2\)"):
        validate_placement(state, [a])
    state.repair(hosts=[32])
    state.allocate("old", _placed(state, SliceRequest("old", "2x2x1"), cubes=[2], origin=(2, 2, 2)))
    with pytest.raises(InvalidPlacement, match="held by a running job"):
        validate_placement(state, [a])


def test_validator_rejects_miswired_circuits():
    """Swap the '-' ends of two x circuits of a 4x4x8: the torus is no longer the one asked for."""
    state = PodState.empty("tpu-v4")
    good = _placed(state, SliceRequest("t", "8x8x8"), cubes=[0, 1, 2, 3, 4, 5, 6, 7])
    validate_placement(state, [good])
    c = list(good.slice.circuits)
    i, j = 0, 16  # same OCS (x, index 0), two different cubes
    assert c[i].ocs == c[j].ocs
    c[i], c[j] = Circuit(c[i].ocs, c[i].port_a, c[j].port_b), Circuit(c[j].ocs, c[j].port_a, c[i].port_b)
    s = good.slice
    bad = SlicePlacement(good.request, Slice(s.spec, s.chips, s.pod, s.cubes, tuple(c)))
    with pytest.raises(InvalidPlacement, match="is not wired as a torus"):
        validate_placement(state, [bad])


def test_validator_rejects_failed_port_and_foreign_port():
    state = PodState.empty("tpu-v4")
    good = _placed(state, SliceRequest("t", "4x4x4"), cubes=[9])
    o, a, b = good.slice.circuits[0]
    state.fail(ocs_ports=[(o, a)])
    with pytest.raises(InvalidPlacement, match="has failed"):
        validate_placement(state, [good])
    state.repair(ocs_ports=[(o, a)])
    other = _placed(state, SliceRequest("u", "4x4x4"), cubes=[10])
    s = good.slice
    stolen = (Circuit(o, a, other.slice.circuits[0].port_b),) + s.circuits[1:]
    with pytest.raises(InvalidPlacement, match="another cube's OCS port"):
        validate_placement(state, [SlicePlacement(good.request, Slice(s.spec, s.chips, s.pod, s.cubes, stolen))])


def test_validator_rejects_wrong_shape_twist_and_missing_reason():
    state = PodState.empty("tpu-v4")
    req = SliceRequest("t", "4x4x8", twisted=True)
    plain = _placed(state, SliceRequest("t", "4x4x8"), cubes=[0, 1])
    with pytest.raises(InvalidPlacement, match="twisted=True"):
        validate_placement(state, [SlicePlacement(req, plain.slice)])
    rotated = _placed(state, SliceRequest("t", "8x4x4"), cubes=[0, 1])
    with pytest.raises(InvalidPlacement, match="asked for 4x4x8"):
        validate_placement(state, [SlicePlacement(SliceRequest("t", "4x4x8"), rotated.slice)])
    with pytest.raises(InvalidPlacement, match="gives no reason"):
        validate_placement(state, [SlicePlacement(req)])


def test_settings_are_checked():
    with pytest.raises(PodsimError, match="block_cubes"):
        PlacementSettings(block_cubes=0)
    with pytest.raises(PodsimError, match="priority"):
        SliceRequest("x", "4x4x4", priority=-1)
