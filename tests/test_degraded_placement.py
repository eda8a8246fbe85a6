"""Degraded placement (down OCS units, `allow_degraded`) and spare OCS ports, in placement and
in the cluster simulation (issue 12, item 3)."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from helpers import run_podsim

from podsim.cluster import ClusterConfig, simulate
from podsim.cluster.config import make_config
from podsim.cluster.failures import FailureEvent
from podsim.errors import PodsimError
from podsim.placement import PodState, SliceRequest, place, validate_placement
from podsim.placement.degraded import dark_circuits, darken
from podsim.placement.metrics import placement_report
from podsim.placement.place import place_one
from podsim.placement.requests import parse_requests
from podsim.placement.result import SlicePlacement
from podsim.placement.validate import InvalidPlacement
from podsim.topology import get_generation
from podsim.topology.shapes import validate_shape
from podsim.topology.slices import plan_slice
from podsim.workload import Job

H = 3600.0
V4 = get_generation("tpu-v4")


def _state(ocs=()):
    st = PodState.empty("tpu-v4")
    if ocs:
        st.fail(ocs=list(ocs))
    return st


@pytest.mark.parametrize("down", [(16,), (0, 20, 40)])
def test_degraded_slice_invariants(down):
    """Placed only when allowed; dark exactly on the down units; every chip used once; valid."""
    st = _state(down)
    strict = place_one(st, SliceRequest("s", "8x8x8"))
    assert strict.slice is None and "OCS" in strict.reason
    reqs = [SliceRequest("a", "8x8x8", allow_degraded=True), SliceRequest("b", "4x8x8", allow_degraded=True),
            SliceRequest("c", "4x4x8")]
    res = place(st, reqs, solver="greedy")
    views = validate_placement(st, res)
    assert set(views) == {"a", "b"} and res.placements[2].slice is None
    chips = np.concatenate([p.slice.chips for p in res.placed])
    assert len(np.unique(chips)) == len(chips) == 512 + 256
    for p in res.placed:
        n_cubes = len(p.slice.cubes)
        assert len(p.slice.circuits) == n_cubes * (48 - len(down))
        assert not any(c.ocs in down for c in p.slice.circuits)
        assert {c.ocs for c in dark_circuits(st.layout, p.slice)} == set(down)


def test_healthy_pod_slice_is_unchanged_and_cpsat_places_degraded():
    st = _state()
    p = place_one(st, SliceRequest("a", "8x8x8", allow_degraded=True))
    assert len(p.slice.circuits) == 8 * 48 and darken(st, p.slice) is p.slice
    st.fail(ocs=[5])
    res = place(st, [SliceRequest("a", "8x8x8", allow_degraded=True), SliceRequest("b", "4x4x8")], solver="cpsat")
    validate_placement(st, res)
    assert [q.slice is not None for q in res.placements] == [True, False]


def test_validator_rejects_degraded_slices_that_break_a_rule():
    st = _state((16,))
    good = place_one(st, SliceRequest("a", "4x4x8", allow_degraded=True))
    validate_placement(st, [good])
    with pytest.raises(InvalidPlacement, match="does not allow a degraded torus"):
        validate_placement(st, [SlicePlacement(SliceRequest("a", "4x4x8"), good.slice)])
    up_dark = replace(good.slice, circuits=good.slice.circuits[1:])  # a circuit on an up OCS left out
    assert good.slice.circuits[0].ocs != 16
    with pytest.raises(InvalidPlacement, match="dark although OCS"):
        validate_placement(st, [SlicePlacement(good.request, up_dark)])
    full = plan_slice(st.layout, validate_shape(V4, (4, 4, 8)), cubes=list(good.slice.cubes))
    with pytest.raises(InvalidPlacement, match="is down"):  # the full torus has a circuit through OCS 16
        validate_placement(st, [SlicePlacement(good.request, full)])


def test_degraded_slice_that_the_dark_circuits_cut_apart():
    """All 16 x-dimension OCS down: two cubes joined along x are cut apart; placement refuses."""
    st = _state(range(16))
    req = SliceRequest("a", "8x4x4", allow_degraded=True)
    p = place_one(st, req)
    assert p.slice is None and "all OCS units of a dimension down" in p.reason
    cut = darken(st, plan_slice(st.layout, validate_shape(V4, (8, 4, 4)), cubes=[0, 1]))
    with pytest.raises(InvalidPlacement, match="cut apart"):
        validate_placement(st, [SlicePlacement(req, cut)])


def test_spare_ports_remap_failed_face_ports():
    st = _state()
    st.fail(ocs_ports=[(3, 0)])  # cube 0's '+' port on OCS 3
    assert not st.cube_ocs_ok[0]
    assert st.remap_spares() == [(3, 0, 128)]
    assert st.cube_ocs_ok[0]
    p = place_one(st, SliceRequest("a", "16x16x16"))
    validate_placement(st, [p])  # the circuit keeps face port 0; its fiber is on healthy spare 128
    st.allocate("a", p)
    assert st.fail(ocs_ports=[(3, 0)]) == []  # the old port carries nothing now
    assert st.fail(ocs_ports=[(3, 128)]) == ["a"]  # the spare does
    st.release("a")
    with pytest.raises(InvalidPlacement, match="has failed"):
        validate_placement(st, [SlicePlacement(SliceRequest("b", "16x16x16"), p.slice)])


def test_spares_run_out_and_down_units_are_not_helped():
    st = _state((7,))
    st.fail(ocs_ports=[(2, 2 * c) for c in range(9)])  # nine failed face ports on one OCS, 8 spares
    moves = st.remap_spares()
    assert len(moves) == 8 and {q for _, _, q in moves} == set(range(128, 136))
    assert not st.cube_ports_healthy[:9].all() and st.cube_ports_degraded_healthy[:8].all()
    assert not st.cube_ports_degraded_healthy[8]
    assert st.remap_spares() == []


def test_requests_file_field():
    reqs = parse_requests([{"id": "a", "shape": "4x4x8", "allow_degraded": True}], V4)
    assert reqs[0].allow_degraded
    with pytest.raises(PodsimError, match=r"request 'a' \(entry 1\) field 'allow_degraded'"):
        parse_requests([{"id": "a", "shape": "4x4x8", "allow_degraded": "perhaps"}], V4)


# Cluster simulation -----------------------------------------------------------------------------

def _jobs(n=16, allow=lambda i: True):
    return [Job(id=f"j{i}", submit_s=0.0, shape=(8, 8, 8), duration_s=24 * H, allow_degraded=allow(i)) for i in range(n)]


def _run(jobs, failures, **kw):
    cfg = ClusterConfig(generation="tpu-v4", horizon_s=3 * 24 * H, fragmentation=False, **kw)
    return simulate(cfg, jobs, failures=failures, audit=True)


def test_cluster_degraded_placement_raises_goodput():
    fails = [FailureEvent(H, "ocs", 5, 24 * H)]
    off = _run(_jobs(), fails)
    req = _run(_jobs(allow=lambda i: i % 2 == 0), fails, degraded_placement="requested")
    on = _run(_jobs(), fails, degraded_placement="all")
    assert off.metrics["degraded_starts"] == 0 and on.metrics["degraded_starts"] == 8
    assert 0 < req.metrics["degraded_starts"] <= 8
    assert on.metrics["fleet_goodput"] > req.metrics["fleet_goodput"] >= off.metrics["fleet_goodput"]
    # the unit is repaired after 25 h: without degraded placement nothing cube-level ran in between
    assert off.metrics["jobs_completed"] < on.metrics["jobs_completed"]


def test_cluster_degraded_slowdown_is_overhead_not_work():
    """Slowdown 2 on the degraded runs: allocated = overhead + useful + lost, and useful equals the
    work done (each degraded day of running is half a day of work)."""
    fails = [FailureEvent(H, "ocs", 5, 24 * H)]
    r = _run(_jobs(8), fails, degraded_placement="all", degraded_slowdown=2.0)
    for o in r.jobs:
        assert o.allocated_chip_s == pytest.approx(o.overhead_chip_s + o.useful_chip_s + o.lost_chip_s)
    done = [o for o in r.jobs if o.status == "completed"]
    assert done and all(o.useful_chip_s == pytest.approx(24 * H * 512) for o in done)
    fast = _run(_jobs(8), fails, degraded_placement="all")
    assert r.metrics["busy_chip_h"] > fast.metrics["busy_chip_h"]  # the same work held the chips longer
    assert max(o.end_s for o in done) > max(o.end_s for o in fast.jobs)


def test_cluster_spare_ports_raise_goodput():
    lay = ClusterConfig(generation="tpu-v4", horizon_s=H).layout()
    chip = int(lay.face_chip[0, 0, 0, 0])  # an optical '+x' link of cube 0
    link = (chip * 3 + 0) * 2 + 0
    fails = [FailureEvent(H, "link", link, 48 * H)]
    jobs = [Job(id=f"j{i}", submit_s=0.0, shape=(16, 16, 16), duration_s=24 * H) for i in range(3)]
    off = _run(jobs, fails)
    on = _run(jobs, fails, spare_ports=True)
    assert on.metrics["spare_remaps"] == 1 and off.metrics["spare_remaps"] == 0
    assert on.metrics["fleet_goodput"] > off.metrics["fleet_goodput"]


def test_config_and_cli_errors(capsys):
    with pytest.raises(PodsimError, match="degraded_placement"):
        make_config(generation="tpu-v4", horizon_s=H, degraded_placement="maybe")
    with pytest.raises(PodsimError, match="degraded_slowdown"):
        make_config(generation="tpu-v4", horizon_s=H, degraded_slowdown=0.5)
    code, out, err = run_podsim(capsys, "cluster", "-g", "tpu-v4", "--horizon", "1h", "--synthetic", "jobs=2",
                                "--degraded-placement", "bogus")
    assert code == 2 and "degraded_placement" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_degraded_bisection_is_the_torus_minus_the_dark_line():
    """OCS 16 is (y, index 0): an 8x8x8 loses 1 of the 16 y cable lines, so its y cut carries 15/16;
    the x and z cuts are whole, so the bisection (the smallest cut) is 15/16 of the healthy one."""
    healthy, down = _state(), _state((16,))
    rows = []
    for st in (healthy, down):
        res = place(st, [SliceRequest("a", "8x8x8", allow_degraded=True)], solver="greedy")
        rows.append(placement_report(res, validate_placement(st, res))[0])
    assert rows[0]["dark_circuits"] == 0 and rows[1]["dark_circuits"] == 8
    assert rows[1]["bisection_bytes_per_s"] == pytest.approx(rows[0]["bisection_bytes_per_s"] * 15 / 16)


def test_place_cli_spare_ports(capsys, tmp_path):
    (tmp_path / "r.yaml").write_text("- {id: p, shape: 16x16x16}\n")
    (tmp_path / "f.yaml").write_text('ocs_ports: ["3:0"]\n')
    args = ["place", "-g", "tpu-v4", "-r", str(tmp_path / "r.yaml"), "-f", str(tmp_path / "f.yaml"), "--solver", "greedy", "--json"]
    code, out, _ = run_podsim(capsys, *args)
    assert code == 0 and not json.loads(out)["requests"][0]["placed"]
    code, out, _ = run_podsim(capsys, *args, "--spare-ports")
    assert code == 0 and json.loads(out)["requests"][0]["placed"]


@pytest.mark.parametrize("seed", range(4))
def test_random_failures_every_placement_validates(seed):
    """Random down units, failed ports (some remapped) and mixed requests: both solvers' results
    validate, and the state then takes every slice (no port or chip twice, none broken)."""
    rng = np.random.default_rng(seed)
    st = _state(tuple(int(o) for o in rng.choice(48, int(rng.integers(0, 6)), replace=False)))
    st.fail(ocs_ports=[(int(o), int(p)) for o, p in zip(rng.integers(0, 48, 12), rng.integers(0, 128, 12), strict=True)])
    if seed % 2:
        st.remap_spares()
    shapes = ["4x4x4", "4x4x8", "4x8x8", "8x8x8", "2x2x4", "8x8x16"]
    reqs = [SliceRequest(f"r{i}", shapes[int(rng.integers(len(shapes)))], allow_degraded=bool(rng.integers(2)))
            for i in range(10)]
    for solver in ("greedy", "cpsat"):
        res = place(st, reqs, solver=solver)
        validate_placement(st, res, reqs)
        after = st.copy()
        for p in res.placed:
            after.allocate(p.request.id, p)
            assert not any(after.ocs_failed[c.ocs] for c in p.slice.circuits)
        assert len(res.placed) > 0
        assert any(p.dark_circuits for p in res.placed) == bool(st.ocs_failed.any())
        assert all(p.request.allow_degraded for p in res.placed if p.dark_circuits)
