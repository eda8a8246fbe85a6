"""The small pure functions the dashboard draws from: cables and circuits of a slice, the pod
map, per-port link utilisation and per-shape cluster figures, each against an independent count."""

from __future__ import annotations

import math

import numpy as np
import pytest

from podsim.cluster import ClusterConfig, FailureModel, simulate
from podsim.cluster.breakdown import by_shape
from podsim.cluster.failures import FailureProcess
from podsim.engine import simulate_collective, simulate_step
from podsim.engine.summary import port_utilisation
from podsim.placement import PodState, SliceRequest
from podsim.placement.place import place_one
from podsim.placement.podmap import pod_map
from podsim.scenario.run import cluster_run_result
from podsim.topology import build_slice
from podsim.topology.cables import chip_cubes, circuit_rows, slice_cables
from podsim.topology.metrics import ici_cables
from podsim.trace import StepTrace
from podsim.trace.model import Collective, Compute, parse_group
from podsim.workload import generate_jobs, parse_synthetic


def expected_cables(shape, wrap) -> int:
    """Cables of a torus/mesh: per axis, (n - 1 + wraps) links on each of N/n lines; a size-2
    torus axis keeps its two cables."""
    n = math.prod(shape)
    return sum((s - 1 + (1 if w and s > 1 else 0)) * n // s for s, w in zip(shape, wrap, strict=True))


@pytest.mark.parametrize("gen, shape, twisted, ocs", [
    ("tpu-v4", "4x4x8", False, True), ("tpu-v4", "4x4x8", True, True), ("tpu-v4", "8x8x8", False, True),
    ("tpu-v4", "4x4x8", False, False), ("tpu-v4", "2x2x1", False, True), ("tpu-v5e", "16x16", False, True),
    ("tpu-v5e", "4x8", False, True), ("tpu-v4", "4x4x2", False, True),
])
def test_slice_cables_count_kind_and_wraparound(gen, shape, twisted, ocs):
    """Every cable once; optical cables are exactly the OCS circuits; wraparounds are the cables
    that close each ring (N/n per wrapped axis)."""
    built = build_slice(gen, shape, twisted=twisted, ocs=ocs)
    view, slc = built.view, built.slice
    c = slice_cables(view)
    assert len(c["a"]) == ici_cables(view) == expected_cables(slc.shape, slc.wrap)
    if ocs and slc.spec.kind == "cubes":
        assert int((c["kind"] == "optical").sum()) == len(slc.circuits)
    if slc.spec.kind == "subcube" or gen == "tpu-v5e":
        assert set(c["kind"]) == {"copper"}
    want_wrap = sum(view.n // s for s, w in zip(slc.shape, slc.wrap, strict=True) if w and s > 1)
    assert int(c["wrap"].sum()) == want_wrap
    # every cable joins slice neighbours along its axis
    da = view.coords[c["b"], c["dim"]] - view.coords[c["a"], c["dim"]]
    n_d = np.asarray(slc.shape)[c["dim"]]
    assert np.all((da == 1) | (c["wrap"] & (da == 1 - n_d)))


def test_twisted_wraparound_shifts_the_other_coordinates():
    """On a twisted 4x4x8 torus the x and y wraparounds land on a chip shifted along z; on a
    plain torus they land on the same row."""
    for twisted, shifted in ((False, False), (True, True)):
        view = build_slice("tpu-v4", "4x4x8", twisted=twisted).view
        c = slice_cables(view)
        w = c["wrap"] & (c["dim"] < 2)
        moved = (view.coords[c["a"][w], 2] != view.coords[c["b"][w], 2]).any()
        assert moved == shifted


def test_circuit_rows_name_the_cube_faces():
    built = build_slice("tpu-v4", "4x4x8", twisted=True)
    rows = circuit_rows(built.fabric.layout, built.slice.circuits)
    assert len(rows) == 96 == len({r["ocs"] for r in rows}) * 2
    assert {r["face_a"] for r in rows} == {"+"} and {r["face_b"] for r in rows} == {"-"}
    assert {r["cube_a"] for r in rows} | {r["cube_b"] for r in rows} == set(built.slice.cubes)
    # the slice is one cube along x: a plain torus wraps a cube onto itself, the twist onto the other cube
    assert all(r["cube_a"] != r["cube_b"] for r in rows if r["dim"] == "x")
    plain = build_slice("tpu-v4", "4x4x8")
    assert all(r["cube_a"] == r["cube_b"] for r in circuit_rows(plain.fabric.layout, plain.slice.circuits) if r["dim"] == "x")
    assert np.array_equal(np.unique(chip_cubes(built.view)), [0, 1])


def test_pod_map_marks_jobs_and_failures():
    state = PodState.empty("tpu-v4")
    state.fail(hosts=[17], cubes=[5], ocs_ports=[(12, 6)])
    small = place_one(state, SliceRequest("dev", "2x2x1"))
    state.allocate("dev", small)
    big = place_one(state, SliceRequest("train", "4x4x8"))
    state.allocate("train", big)
    m = pod_map(state)
    assert m["unit"] == "cube" and m["grid"] == (4, 4, 4) and len(m["cells"]) == 64
    cells = {c["id"]: c for c in m["cells"]}
    assert cells[5]["status"] == "failed" and cells[5]["failed_chips"] == 64
    assert cells[1]["failed_hosts"] == 1 and cells[1]["failed_chips"] == 4 and cells[1]["status"] == "degraded"
    assert cells[3]["ocs_fault"] and cells[3]["status"] == "degraded"  # port 6 of OCS 12 is cube 3's '+' link
    assert cells[3]["pos"] == (0, 0, 3)
    assert sum(c["jobs"].get("train", 0) for c in m["cells"]) == 128
    assert sum(c["jobs"].get("dev", 0) for c in m["cells"]) == 4
    assert sum(c["busy_chips"] for c in m["cells"]) == state.n_busy_chips
    assert [c["status"] for c in m["cells"] if "train" in c["jobs"]] == ["busy", "busy"]


def test_pod_map_of_a_static_pod_is_per_chip():
    state = PodState.empty("tpu-v5e")
    state.fail(hosts=[0])
    m = pod_map(state)
    assert m["unit"] == "chip" and m["grid"] == (16, 16) and len(m["cells"]) == 256
    failed = [c for c in m["cells"] if c["status"] == "failed"]
    assert len(failed) == state.layout.chips_per_host and all(c["failed_hosts"] == 1 for c in failed)


def test_port_utilisation_of_a_ring_all_reduce():
    """An all-reduce along x alone: only x ports carry bytes; every x link of a bidirectional
    ring is equally loaded, and mean utilisation x capacity x step time gives back each link's bytes."""
    built = build_slice("tpu-v4", "4x4x8")
    r = simulate_collective(built, "all_reduce", "256MiB", group="x", algorithm="bidir_ring").step
    u = port_utilisation(r, built.view)
    assert u["ports"] == ["x+", "x-", "y+", "y-", "z+", "z-"]
    x = u["mean"][:, :2]
    assert np.all(x > 0) and np.allclose(x, x[0, 0])
    assert np.all(u["mean"][:, 2:] == 0)
    cap = built.fabric.generation.link_bytes_per_s
    links = built.view.port_link[:, 0, :]
    assert np.allclose(x * cap * r.step_time_s, r.link_bytes[links])
    assert np.all(u["peak"][:, :2] <= 1 + 1e-9)


def test_port_utilisation_is_nan_where_a_mesh_has_no_link():
    built = build_slice("tpu-v4", "2x2x1")
    trace = StepTrace((Compute("c", flops=1e9), Collective("ar", "all_reduce", 2**20, parse_group("x,y"), deps=("c",))))
    u = port_utilisation(simulate_step(trace, built), built.view)
    assert np.isnan(u["mean"][:, 4:]).all()  # the z axis has one chip: no port
    # a 2x2 mesh: each chip has one x and one y neighbour; each cable is two directed ports
    assert int(np.isfinite(u["mean"]).sum()) == 2 * ici_cables(built.view) == 8
    assert np.isfinite(u["mean"][:, :4]).reshape(4, 2, 2).sum(axis=2).tolist() == [[1, 1]] * 4


def test_by_shape_adds_up_to_the_fleet_metrics():
    jobs = generate_jobs(parse_synthetic("jobs=120,rate=3/h,median=2h", "tpu-v4"), 3)
    cfg = ClusterConfig(generation="tpu-v4", policy="backfill", horizon_s=3 * 86400,
                        failures=FailureModel(host=FailureProcess.from_availability(0.99, mttr_s=4 * 3600)))
    result = simulate(cfg, jobs, seed=3)
    rows = by_shape(cluster_run_result(result).table("jobs"))
    m = result.metrics
    assert sum(r["jobs"] for r in rows) == m["jobs_total"]
    assert sum(r["completed"] for r in rows) == m["jobs_completed"]
    assert sum(r["started"] for r in rows) == m["jobs_started"]
    assert math.isclose(sum(r["useful_chip_h"] for r in rows), m["useful_chip_h"], rel_tol=1e-9)
    assert math.isclose(sum(r["lost_chip_h"] for r in rows), m["lost_chip_h"], rel_tol=1e-9, abs_tol=1e-9)
    assert [r["chips"] for r in rows] == sorted(r["chips"] for r in rows)
    for r in rows:
        if r["allocated_chip_h"] > 0:
            assert 0 <= r["goodput"] <= 1
            assert math.isclose(r["allocated_chip_h"], r["useful_chip_h"] + r["lost_chip_h"] + r["overhead_chip_h"], rel_tol=1e-9)
