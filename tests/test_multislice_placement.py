"""Multislice placement (issue 13 item 4): N slices of a shape, all or none, fewest DCN hops.

Hand-built fleets of v4 pods where only some cubes are usable, so each pod holds a known number
of 2-cube (4x4x8) slices; every result goes through `validate_placement`.
"""

from __future__ import annotations

import json

import pytest
from helpers import run_podsim, v4_fleet

from podsim.errors import PodsimError
from podsim.placement import PodState, SliceRequest, SolverParams, place, validate_placement
from podsim.placement.metrics import placement_report
from podsim.placement.multislice import dcn_span
from podsim.placement.place import place_one
from podsim.placement.problem import PlacementSettings
from podsim.placement.requests import parse_requests
from podsim.placement.result import SlicePlacement
from podsim.placement.validate import InvalidPlacement
from podsim.topology import PodLayout, get_generation

FAST = SolverParams(time_limit=0.5)


def run(state, reqs, solver="greedy", sites=1):
    result = place(state, reqs, solver=solver, params=FAST, settings=PlacementSettings(sites=sites))
    validate_placement(state, result, reqs)
    return result


@pytest.mark.parametrize("solver", ["greedy", "cpsat"])
def test_all_or_nothing(solver):
    """Two pods hold 2 slices each: 3 slices are placed over both pods, 5 get nothing at all."""
    state = v4_fleet([4, 4])
    three = run(state, [SliceRequest("j3", "4x4x8", slices=3)], solver)["j3"]
    assert three.placed and len(three.all_slices) == 3 and three.pods == [0, 1]
    assert len(three.chips) == len(set(three.chips)) == 3 * 128
    res = run(state, [SliceRequest("j5", "4x4x8", slices=5), SliceRequest("one", "4x4x8")], solver)
    assert not res["j5"].placed and res["j5"].all_slices == () and "4 fit" in res["j5"].reason
    assert res["one"].placed  # the refused gang leaves its space to others
    assert res.placed_chips == 128


def test_one_pod_preferred_over_the_tightest_single_fit():
    """Pod 0 fits one slice (best fit for a single slice), pods 1 and 2 fit 4 and 2: two slices go
    together in pod 2, the tightest pod holding both, not split over the DCN."""
    state = v4_fleet([2, 8, 4])
    res = run(state, [SliceRequest("j", "4x4x8", slices=2), SliceRequest("s", "4x4x8")])
    assert res["j"].pods == [2]
    assert res["s"].pods == [0]


def test_same_site_preferred_over_crossing_sites():
    """Pods 0..3 in two sites (0,1 | 2,3) each fit one slice except pod 1: a pod-by-pod first fit
    would take pods 0 and 2 (a WAN hop); the multislice placer keeps both in site 1."""
    state = v4_fleet([2, 0, 2, 2])
    res = run(state, [SliceRequest("j", "4x4x8", slices=2)], sites=2)
    assert res["j"].pods == [2, 3]
    assert dcn_span(state.layout, res["j"].pods, sites=2) == (1, 2)
    assert res.sites == 2


def test_span_sites_refused_unless_allowed():
    state = v4_fleet([2, 2])
    no = run(state, [SliceRequest("j", "4x4x8", slices=2)], sites=2)["j"]
    assert not no.placed and "span_sites" in no.reason and "at most 1 fit in one site" in no.reason
    yes = run(state, [SliceRequest("j", "4x4x8", slices=2, span_sites=True)], sites=2)["j"]
    assert yes.pods == [0, 1]
    assert dcn_span(state.layout, yes.pods, sites=2) == (2, 2)
    # the same two pods as one site: allowed without span_sites
    assert run(state, [SliceRequest("j", "4x4x8", slices=2)], sites=1)["j"].pods == [0, 1]


def test_greedy_takes_gangs_in_processing_order():
    """One pod holds one gang of 2 x 4x4x8: the greedy gives it to the larger weight, then on a
    tie to the earlier arrival, whatever the order of the batch."""
    state = v4_fleet([4])
    for a, b, winner in ((dict(priority=0), dict(priority=1), "b"), (dict(arrival_s=5.0), dict(arrival_s=0.0), "b"),
                         (dict(), dict(), "a")):
        reqs = [SliceRequest("a", "4x4x8", slices=2, **a), SliceRequest("b", "4x4x8", slices=2, **b)]
        res = run(state, reqs)
        assert [p.request.id for p in res.placed] == [winner], (a, b)


def test_place_one_places_a_gang_like_the_batch():
    state = v4_fleet([2, 0, 2, 2])
    req = SliceRequest("j", "4x4x8", slices=2)
    one = place_one(state, req, settings=PlacementSettings(sites=2))
    assert one.pods == [2, 3] and validate_placement(state, [one], sites=2)
    assert not place_one(state, SliceRequest("k", "4x4x8", slices=4), settings=PlacementSettings(sites=2)).placed


def test_validator_rejects_partial_and_cross_site_gangs():
    state = v4_fleet([2, 2])
    req = SliceRequest("j", "4x4x8", slices=2, span_sites=True)
    good = place(state, [req], solver="greedy", settings=PlacementSettings(sites=2))["j"]
    s0, s1 = good.all_slices
    with pytest.raises(InvalidPlacement, match="all or none"):
        validate_placement(state, [SlicePlacement(req, s0, slices=(s0,))])
    strict = SliceRequest("j", "4x4x8", slices=2)
    with pytest.raises(InvalidPlacement, match="without span_sites"):
        validate_placement(state, [SlicePlacement(strict, s0, slices=(s0, s1))], sites=2)
    with pytest.raises(InvalidPlacement, match="chip .* two slices"):
        validate_placement(state, [SlicePlacement(strict, s0, slices=(s0, s0))])


def test_cpsat_packs_singles_around_gangs_and_reports_each_slice():
    state = v4_fleet([8, 8])
    reqs = [SliceRequest("gang", "4x4x16", slices=3, priority=1)] + [SliceRequest(f"s{k}", "4x4x8") for k in range(5)]
    res = run(state, reqs, solver="cpsat")
    assert res["gang"].placed and len(res["gang"].cubes) == 12
    assert len(res.placed) == 1 + 2  # 16 cubes - 12 leave two 2-cube singles
    views = validate_placement(state, res)
    assert {"gang/0", "gang/1", "gang/2"} <= set(views)
    rows = {r["id"]: r for r in placement_report(res, views)}
    assert rows["gang"]["slices"] == 3 and len(rows["gang"]["slice_pods"]) == 3
    for k, slc in enumerate(res["gang"].all_slices):  # each member can be held in the state on its own
        state.allocate(f"gang/{k}", slc)
    assert state.n_busy_chips == 3 * 256


def test_static_pods_place_gangs_in_one_pod_first():
    gen = get_generation("tpu-v5e").model_copy(update={"pod_shape": (4, 4)})
    state = PodState(PodLayout(gen, pods=2))
    res = run(state, [SliceRequest("j", "2x4", slices=2)])
    assert res["j"].pods in ([0], [1])
    res = run(state, [SliceRequest("j", "4x4", slices=2)])
    assert res["j"].pods == [0, 1]


def test_requests_file_fields():
    v4 = get_generation("tpu-v4")
    (r,) = parse_requests([{"id": "a", "shape": "4x4x8", "slices": 4, "span_sites": True}], v4)
    assert (r.slices, r.span_sites, r.total_chips) == (4, True, 512)
    assert r.priority_weighted_chips() == 512
    with pytest.raises(PodsimError, match=r"request 'a' \(entry 1\) field 'slices'"):
        parse_requests([{"id": "a", "shape": "4x4x8", "slices": 0}], v4)
    with pytest.raises(PodsimError, match="field 'span_sites': only a multislice"):
        parse_requests([{"id": "a", "shape": "4x4x8", "span_sites": True}], v4)
    with pytest.raises(PodsimError, match="sites 3 must be"):
        place(v4_fleet([2, 2]), [r], solver="greedy", settings=PlacementSettings(sites=3))


def test_place_cli_fleet_and_sites(capsys, tmp_path):
    req = tmp_path / "requests.yaml"
    req.write_text("- {id: wide, shape: 16x16x16, slices: 2}\n"
                   "- {id: far, shape: 16x16x16, slices: 3}\n"
                   "- {id: far2, shape: 16x16x16, slices: 2, span_sites: true}\n")
    code, out, err = run_podsim(capsys, "place", "-g", "tpu-v4", "--pods", "4", "--sites", "2", "-r", str(req),
                                "--solver", "greedy", "--json")
    assert code == 0, err
    rows = {r["id"]: r for r in json.loads(out)["requests"]}
    assert rows["wide"]["pods"] in ([0, 1], [2, 3]) and rows["far2"]["placed"]
    assert not rows["far"]["placed"] and "span_sites" in rows["far"]["reason"]
    code, out, err = run_podsim(capsys, "place", "-g", "tpu-v4", "--pods", "3", "--sites", "2", "-r", str(req))
    assert code == 2 and "sites 2" in err and len(err.strip().splitlines()) == 1
