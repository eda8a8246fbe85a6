"""Reshaped placements (issue 27, items 2-3): generic torus pods, block slices (whole blocks
plus face, edge and corner pieces joined by OCS circuits) and homomorphic folds.

Must show: every fold and split placement returns passes the ring proof. The proof is
`validate_placement` (the fabric wired with every circuit, `check_slice_topology` comparing each
slice's live links with the torus or mesh it asked for) and, independently here, a walk round
every logical ring on the wired fabric's networkx graph: consecutive chips are joined by a cable.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from podsim.errors import PodsimError
from podsim.placement import PodState, SliceRequest, SolverParams, place, validate_placement
from podsim.placement.problem import PlacementSettings
from podsim.placement.space import request_options
from podsim.topology import PodLayout, get_generation
from podsim.topology.fabric import build_fabric
from podsim.topology.fold import check_fold, find_fold, grid_cycle, snake
from podsim.topology.shapes import validate_shape
from podsim.topology.torus import torus_id

TORUS = torus_id("8x8x8", 4, 6, 400)  # 8 blocks: small enough for many draws
V4_SMALL = get_generation("tpu-v4").model_copy(update={"pod_shape": (8, 8, 8)})


def rings_closed(fabric, slc) -> None:
    """Every logical neighbour pair of the slice's asked topology is joined by a cable."""
    g = fabric.to_networkx(np.asarray(slc.chips))
    shape, wrap = slc.shape, slc.wrap
    grid = np.asarray(slc.chips).reshape(shape)
    for d, n in enumerate(shape):
        if n == 1:
            continue
        a = grid
        b = np.roll(grid, -1, axis=d)
        pairs = zip(a.ravel(), b.ravel(), strict=True)
        if not (wrap[d] and n > 2):  # a mesh line: the last chip has no '+' neighbour
            keep = np.ones(shape, bool)
            idx = [slice(None)] * len(shape)
            idx[d] = n - 1
            keep[tuple(idx)] = False
            pairs = zip(a[keep], b[keep], strict=True)
        for u, v in pairs:
            assert g.has_edge(int(u), int(v)), f"{slc.spec} ({slc.form}): chips {u} and {v} are logical neighbours without a cable"


@st.composite
def pod_and_requests(draw):
    gen = draw(st.sampled_from(["torus", "v4"]))
    state = PodState.empty(TORUS) if gen == "torus" else PodState(__import__("podsim").topology.PodLayout(V4_SMALL))
    lay = state.layout
    # a random busy pod: some chips held by running sub-block jobs
    # a busy pod drawn as (share held, seed): cheap to generate, unlike a list of hundreds of chip ids
    share, seed = draw(st.sampled_from([0.0, 0.05, 0.15, 0.33])), draw(st.integers(0, 2**16))
    held = np.random.default_rng(seed).choice(lay.n_chips, int(share * lay.n_chips), replace=False).tolist()
    if held:
        from podsim.topology.shapes import SliceSpec
        from podsim.topology.slices import Slice

        spec = SliceSpec(lay.generation.id, (len(held),) + (1,) * (lay.dims - 1), False, "subcube", (False,) * lay.dims)
        state.allocate("busy", Slice(spec, np.array(sorted(held), np.int32), 0, tuple(sorted({h // 64 for h in held}))))
    sides = st.sampled_from([1, 2, 3, 4, 5, 6, 8])
    reqs = draw(st.lists(st.tuples(sides, sides, sides), min_size=1, max_size=4))
    return state, [SliceRequest(f"r{k}", s) for k, s in enumerate(reqs) if math.prod(s) <= lay.n_chips]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(pod_and_requests(), st.sampled_from(["greedy", "cpsat"]))
def test_every_fold_and_split_passes_the_ring_proof(case, solver):
    state, reqs = case
    if not reqs:
        return
    result = place(state, reqs, solver=solver, settings=PlacementSettings(fold="allowed"),
                   params=SolverParams(time_limit=0.2))
    views = validate_placement(state, result)
    fabric = build_fabric(state.layout, circuits=tuple(c for s in state.jobs.values() for c in s.circuits)
                          + tuple(c for p in result.placed for c in p.slice.circuits))
    for p in result.placed:
        assert p.slice.form in ("native", "fold", "split")
        event(p.slice.form)
        assert sorted(p.slice.shape) == sorted(p.request.shape) and len(p.slice.chips) == p.request.chips
        rings_closed(fabric, p.slice)
        assert p.request.id in views


def test_folds_close_every_ring():
    """Known folds: a 1-D ring of 64 into a cube, an 8x8 torus into 4x4x4 (two axes of 2 share
    one ring of 4), a rotation; a ring of odd length cannot fold into a mesh."""
    t = (True, True, True)
    f = find_fold((1, 1, 64), (False, False, True), (4, 4, 4), t)
    assert f is not None and check_fold(f) == ""
    f = find_fold((1, 8, 8), (False, True, True), (4, 4, 4), t)
    assert f is not None and not f.identity and "2*" in f.describe
    f = find_fold((4, 8, 4), t, (4, 4, 8), t)
    assert f is not None and f.identity
    assert find_fold((1, 1, 9), (False, False, True), (1, 3, 3), (False,) * 3) is None
    assert find_fold((3, 3, 3), (False,) * 3, (1, 3, 9), (False,) * 3) is None
    assert grid_cycle((3, 3)) is None and len(set(grid_cycle((4, 3)))) == 12
    assert all(sum(abs(x - y) for x, y in zip(a, b, strict=True)) == 1 for a, b in zip(snake((3, 2, 2)), snake((3, 2, 2))[1:], strict=False))


def test_a_broken_fold_is_caught():
    f = find_fold((1, 1, 16), (False, False, True), (1, 4, 4), (False,) * 3)
    bad = f.__class__(f.shape, f.wrap, f.target, f.target_wrap, f.coords[::-1][np.r_[1, 0, 2:16]], f.plan)
    assert "not physical neighbours" in check_fold(bad)


def test_generic_torus_rules_and_id():
    g = get_generation(TORUS)
    assert g.id == "torus-8x8x8-b4-p6-400gbps" and g.link_bytes_per_s == pytest.approx(50e9)
    assert validate_shape(g, "2x4x8").kind == "blocks" and validate_shape(g, "2x4x8").wrap == (False, True, True)
    assert validate_shape(g, "3x3x3").kind == "subcube" and validate_shape(g, "8x4x8").kind == "cubes"
    assert validate_shape(g, "6x4x4").wrap == (False, True, True)  # any shape is a request; placement splits it
    with pytest.raises(PodsimError, match="side 6 is neither inside one 4\\^3 block nor whole blocks"):
        request_options(PodLayout(g), SliceRequest("x", "6x4x4"))
    with pytest.raises(PodsimError, match="multiple of the block side"):
        get_generation("torus-10x8x8-b4-p6-400gbps")
    with pytest.raises(PodsimError, match="e.g. torus-16x16x16-b4-p6-400gbps"):
        get_generation("torus-big")
    assert get_generation(torus_id("8x8x8", 4, 12, 400)).link_bytes_per_s == pytest.approx(100e9)  # 2 links per neighbour


def test_fold_none_refuses_and_allowed_places_odd_shapes():
    """With fold none an odd shape is never placeable (the reason names the rule); allowed, it is
    split (6x6x6: a block, three faces, three edges, a corner) or folded, and the native shapes
    stay native."""
    state = PodState.empty("tpu-v4")
    reqs = [SliceRequest("odd", "6x6x6"), SliceRequest("line", "1x8x8"), SliceRequest("cube", "4x4x8")]
    none = place(state, reqs, solver="greedy")
    assert not none["odd"].placed and "multiple of 4" in none["odd"].reason and none["cube"].placed
    allowed = place(state, reqs, solver="greedy", settings=PlacementSettings(fold="allowed"))
    validate_placement(state, allowed)
    assert allowed["odd"].slice.form == "split" and len(allowed["odd"].cubes) == 8
    assert allowed["line"].slice.form == "fold" and allowed["cube"].slice.form == "native"


def test_odd_shape_generator_is_seeded_and_factorises():
    from podsim.workload.odd import OddShapeSpec, factorisations, odd_shape_jobs

    spec = OddShapeSpec(jobs=50, max_chips=256)
    a, b = odd_shape_jobs(spec, 1), odd_shape_jobs(spec, 1)
    assert [(j.shape, j.submit_s) for j in a] == [(j.shape, j.submit_s) for j in b]
    assert [j.shape for j in a] != [j.shape for j in odd_shape_jobs(spec, 2)]
    assert all(all(s == 1 or s % 2 == 0 for s in j.shape) and j.chips <= 256 for j in a)
    assert (2, 2, 6) in factorisations(24, 2, 16) and (3, 2, 4) not in factorisations(24, 2, 16)
    small = sum(j.chips <= 64 for j in a)
    assert small > len(a) / 2  # the truncated exponential favours small sizes


def test_hilbert_and_static_generic_boxes_place_validly():
    for gen in ("tpu-v4", TORUS):
        state = PodState(PodLayout(get_generation(gen), ocs=False))
        reqs = [SliceRequest("a", "4x4x4"), SliceRequest("b", "2x2x6"), SliceRequest("c", "2x2x2")]
        h = place(state, reqs, solver="greedy", policy="hilbert")
        validate_placement(state, h)
        assert all(p.placed and p.slice.form == "scatter" for p in h.placements)
    state = PodState(PodLayout(get_generation(TORUS), ocs=False))
    boxes = place(state, [SliceRequest("a", "4x4x4"), SliceRequest("b", "2x2x6"), SliceRequest("c", "3x3x3")], solver="greedy")
    validate_placement(state, boxes)
    assert all(p.placed and p.slice.form == "native" for p in boxes.placements)


def test_cpsat_chooses_reshaped_candidates_on_a_2d_pod():
    """On a static 2-D pod (v5e 16x16) a ring of 64 has no native rectangle; CP-SAT's own model
    holds its folds as candidates (chips as fixed intervals in the no-overlap), so the solve
    places it without the greedy completion and fills the pod."""
    state = PodState.empty("tpu-v5e")
    reqs = [SliceRequest("ring", "1x64"), SliceRequest("a", "8x16"), SliceRequest("b", "8x8")]
    r = place(state, reqs, solver="cpsat", settings=PlacementSettings(fold="allowed"))
    validate_placement(state, r)
    assert r["ring"].placed and r["ring"].slice.form == "fold" and r.stats.completed == 0
    assert sum(p.request.chips for p in r.placements if p.placed) == 256
