"""Property tests: random pod states (failures, running jobs) and random request sets.

For every draw, every solver's result passes `validate_placement`, CP-SAT admits at least as
much weight as either greedy policy, placing never changes the state, and the placed slices can
all be allocated together and released again.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from podsim.placement import PodState, SliceRequest, SolverParams, place, validate_placement
from podsim.placement.place import place_one
from podsim.topology import PodLayout, get_generation

V4_SHAPES = ["1x1x1", "1x2x2", "2x2x1", "2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8", "4x8x8", "8x8x8", "4x4x12", "8x8x16"]
TWISTABLE = {"4x4x8", "4x8x8", "8x8x16"}
V5E_SHAPES = ["1x1", "2x2", "2x4", "4x2", "4x4", "4x8", "8x4", "8x8", "8x16"]
PARAMS = SolverParams(time_limit=0.2)
ARRAYS = ("chip_job", "chip_down", "host_failed", "cube_failed", "ocs_failed", "port_failed", "port_job")


def _layout(kind: str) -> PodLayout:
    """Small pods with the real rules: a 2x2x2-cube v4 (with or without OCS), an 8x8 v5e."""
    if kind == "v5e":
        return PodLayout(get_generation("tpu-v5e").model_copy(update={"pod_shape": (8, 8)}))
    return PodLayout(get_generation("tpu-v4").model_copy(update={"pod_shape": (8, 8, 8)}), ocs=kind == "v4-ocs")


@st.composite
def scenarios(draw, kind: str):
    state = PodState(_layout(kind))
    lay = state.layout
    shapes = V5E_SHAPES if kind == "v5e" else V4_SHAPES

    def request(prefix: str, k: int) -> SliceRequest:
        shape = draw(st.sampled_from(shapes))
        twisted = kind == "v4-ocs" and shape in TWISTABLE and draw(st.booleans())
        return SliceRequest(f"{prefix}{k}", shape, twisted, draw(st.integers(0, 2)), draw(st.sampled_from([0.0, -1800.0, -7200.0])))

    def failures() -> dict:
        f = {"hosts": draw(st.lists(st.integers(0, lay.n_hosts - 1), max_size=6)),
             "chips": draw(st.lists(st.integers(0, lay.n_chips - 1), max_size=2))}
        if lay.has_cubes:
            f["cubes"] = draw(st.lists(st.integers(0, lay.n_cubes - 1), max_size=1))
        if lay.ocs:
            used = 2 * lay.cubes_per_pod
            f["ocs_ports"] = draw(st.lists(st.tuples(st.integers(0, lay.n_ocs - 1), st.integers(0, used - 1)), max_size=3))
            f["ocs"] = [draw(st.integers(0, lay.n_ocs - 1))] if draw(st.integers(0, 5)) == 0 else []
        return f

    state.fail(**failures())
    for k in range(draw(st.integers(0, 4))):  # running jobs
        p = place_one(state, request("run", k), policy=draw(st.sampled_from(["first", "best"])))
        if p.placed:
            state.allocate(p.request.id, p)
    state.fail(**failures())  # some failures hit running jobs
    reqs = [request("req", k) for k in range(draw(st.integers(1, 10)))]
    now_s = draw(st.sampled_from([0.0, 3600.0]))
    return state, reqs, now_s


@pytest.mark.parametrize("kind", ["v4-ocs", "v4-static", "v5e"])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_solver_result_is_valid_and_cpsat_never_worse(kind, data):
    state, reqs, now_s = data.draw(scenarios(kind))
    before = {name: getattr(state, name).copy() for name in ARRAYS}
    values = {}
    for solver, policy in (("greedy", "first"), ("greedy", "best"), ("cpsat", "best"), ("cpsat", "first")):
        result = place(state, reqs, solver=solver, policy=policy, params=PARAMS, now_s=now_s)
        validate_placement(state, result, reqs)
        values[(solver, policy)] = result.stats.value
        event(f"{solver}: {len(result.placed)} of {len(reqs)} placed" if solver == "cpsat" else "greedy")
        assert result.stats.value == sum(r.weight(now_s) for r in reqs if result[r.id].placed)
        for name in ARRAYS:
            assert np.array_equal(getattr(state, name), before[name]), f"{solver} changed the state's {name}"
        after = state.copy()
        for p in result.placed:
            after.allocate(p.request.id, p)
        assert after.n_busy_chips == state.n_busy_chips + result.placed_chips
        for p in result.placed:
            after.release(p.request.id)
        assert np.array_equal(after.chip_job, state.chip_job) and np.array_equal(after.port_job, state.port_job)
    best_greedy = max(values[("greedy", "first")], values[("greedy", "best")])
    assert values[("cpsat", "best")] >= best_greedy
    assert values[("cpsat", "first")] >= best_greedy
    event("cpsat beat greedy" if values[("cpsat", "best")] > best_greedy else "cpsat tied greedy")
