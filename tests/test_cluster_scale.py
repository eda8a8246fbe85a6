"""The cluster simulation at fleet scale (issue 35): the goodput it reports against a closed form,
the planning shortcuts it takes against the plain constructions, and reshaped jobs' slowdowns
charged or said not to be.

The pod-by-pod search is checked against a search of the whole fleet at every pass of every
`audit=True` simulation (podsim.cluster.observe.audit), and bit for bit against the code before
it by `benchmarks/bench_cluster.py --digest`; the fit ranking it rests on, in
tests/test_placement_pods.py."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest

from podsim.cluster import ClusterConfig, FailureModel, simulate
from podsim.cluster.breakdown import by_shape, checkpoint_goodput
from podsim.cluster.failures import FailureProcess
from podsim.scenario.run import cluster_run_result
from podsim.study import CachedStepTime, EngineStepTime, RooflineStepTime, StepStudy
from podsim.topology import PodLayout, get_generation
from podsim.topology.circuits import Circuit, CircuitColumns, cube_circuits
from podsim.topology.pod import MINUS, PLUS, _row_major
from podsim.topology.shapes import twist_vectors, validate_shape
from podsim.topology.slices import plan_slice
from podsim.workload import Job
from podsim.workload.odd import OddShapeSpec, odd_shape_jobs

H = 3600.0


def test_goodput_of_long_jobs_matches_the_checkpoint_closed_form():
    """Seven never-ending 8x8x8 jobs (128 hosts each) on a v4 pod whose hosts are 99.5%
    available: a job is interrupted at 128 / MTBF per second and keeps work only at its hourly
    checkpoints after each restart (5 min) and OCS reconfiguration (10 s), so its goodput is
    lambda tau exp(-lambda o) q / (1 - q) = 0.674 (podsim.cluster.breakdown); the simulation's
    agrees within its sampling error (about 2,000 runs: seeds 3, 4, 5 give 0.679, 0.672, 0.666)."""
    days = 20
    jobs = [Job(id=f"j{i}", submit_s=0.0, shape=(8, 8, 8), duration_s=1e6 * H) for i in range(7)]
    host = FailureProcess.from_availability(0.995)
    cfg = ClusterConfig(generation="tpu-v4", horizon_s=days * 86400, failures=FailureModel(host=host), fragmentation=False)
    m = simulate(cfg, jobs, seed=3).metrics
    want = checkpoint_goodput(128, host.mtbf_s, cfg.checkpoint_interval_s, cfg.restart_overhead_s + cfg.reconfigure_delay_s)
    assert want == pytest.approx(0.6742, abs=1e-4)
    assert m["restarts"] > 1800
    assert m["goodput"] == pytest.approx(want, abs=0.025)
    # the rest of the allocated chip-hours: lost since the last checkpoint, restarts, reconfiguration
    assert m["lost_failure_chip_h"] + m["restart_chip_h"] + m["reconfiguration_chip_h"] == pytest.approx(
        m["allocated_chip_h"] - m["useful_chip_h"], rel=1e-9)


def test_the_closed_form_limits():
    assert checkpoint_goodput(1, 1e18, H, 300.0) == pytest.approx(1.0)
    assert checkpoint_goodput(768, 199 * H, H, 310.0) == pytest.approx(0.060, abs=1e-3)  # a 3,072-chip v4 slice
    assert checkpoint_goodput(16, 199 * H, H, 310.0) > checkpoint_goodput(64, 199 * H, H, 310.0)


def test_goodput_by_shape_falls_as_the_closed_form_does():
    """A v4 popularity mix: each shape's goodput (podsim.cluster.breakdown.by_shape) within 0.1
    of the closed form for its hosts, and the fleet's goodput is the allocation-weighted mean."""
    from podsim.workload import SyntheticSpec, generate_jobs

    jobs = generate_jobs(SyntheticSpec(generation="tpu-v4", jobs=400, arrival={"rate_per_h": 2.0}), 4)
    host = FailureProcess.from_availability(0.995)
    cfg = ClusterConfig(generation="tpu-v4", policy="backfill", horizon_s=8 * 86400, failures=FailureModel(host=host))
    r = cluster_run_result(simulate(cfg, jobs, seed=4))
    rows = by_shape(r.table("jobs"))
    checked = 0
    for row in rows:
        bound = checkpoint_goodput(row["chips"] // 4, host.mtbf_s, cfg.checkpoint_interval_s, cfg.restart_overhead_s + 10.0)
        if row["allocated_chip_h"] > 2000 and row["interruptions"] >= 20:
            assert row["goodput"] == pytest.approx(bound, abs=0.1), row["shape"]
            checked += 1
    assert checked >= 5
    useful = sum(row["useful_chip_h"] for row in rows)
    assert r.metrics["goodput"] == pytest.approx(useful / sum(row["allocated_chip_h"] for row in rows), rel=1e-9)


def _circuits_by_hand(layout, grid, cubes, twisted):
    """cube_circuits as it was built before the template: per dimension, each cube's '+' face
    links to the '-' face links of the next cube (wrapping, with the twist)."""
    grid_a, cubes = np.array(grid), np.asarray(cubes)
    cube = np.array(layout.generation.cube_shape)
    twist = np.array(twist_vectors(tuple(grid_a * cube))) // cube if twisted else np.zeros((3, 3), int)
    pos, idx, out = _row_major(tuple(grid)), np.arange(layout.links_per_face), []
    for d in range(3):
        nxt = pos.copy()
        nxt[:, d] += 1
        wrapped = nxt[:, d] == grid_a[d]
        nxt[wrapped, d] = 0
        nxt[wrapped] = (nxt[wrapped] + twist[d]) % grid_a
        a, b = cubes[np.ravel_multi_index(tuple(pos.T), grid)], cubes[np.ravel_multi_index(tuple(nxt.T), grid)]
        ocs, pa = layout.ocs_port(a[:, None], d, PLUS, idx[None, :])
        _, pb = layout.ocs_port(b[:, None], d, MINUS, idx[None, :])
        out += [Circuit(o, x, y) for o, x, y in zip(ocs.ravel(), pa.ravel(), pb.ravel(), strict=True)]
    return out


@pytest.mark.parametrize("grid,twisted", [((1, 1, 1), False), ((1, 1, 2), True), ((1, 2, 2), True), ((2, 2, 4), True),
                                          ((3, 4, 4), False), ((2, 4, 4), True)])
def test_cube_circuits_and_their_columns_equal_the_construction_by_hand(grid, twisted):
    layout = PodLayout(get_generation("tpu-v4"), pods=3)
    rng = np.random.default_rng(5)
    n = math.prod(grid)
    for pod in range(3):
        cubes = (rng.permutation(64)[:n] + 64 * pod).tolist()
        want = _circuits_by_hand(layout, grid, cubes, twisted)
        assert cube_circuits(layout, grid, cubes, twisted) == want
        spec = validate_shape(layout.generation, tuple(4 * g for g in grid), twisted, True)
        lazy, plain = (plan_slice(layout, spec, cubes=cubes, pod=pod, lazy_circuits=z) for z in (True, False))
        assert isinstance(lazy.circuits, CircuitColumns) and isinstance(plain.circuits, tuple)
        assert len(lazy.circuits) == len(want) and lazy.circuits == plain.circuits == tuple(want)
        assert np.array_equal(lazy.chips, plain.chips)
        assert lazy.circuits[1:] == tuple(want[1:]) and lazy.circuits + () == tuple(want) == () + lazy.circuits
        assert pickle.loads(pickle.dumps(lazy.circuits)) == tuple(want)  # as its columns


def _study(model, gen, shape, twisted, slices, sites):
    return StepStudy(gen, shape, model=model, plan="tensor=2,fsdp=auto", twisted=twisted, slices=slices)


def test_reshaped_jobs_are_priced_by_the_engine_under_the_roofline():
    """Jobs given in time with slowdown_model on Hilbert-scattered slices: the roofline (no
    communication) cannot price a placement, so the engine does, and the run equals one with
    the engine as the step-time model. Without slowdown_model the runs are counted as not charged."""
    jobs = odd_shape_jobs(OddShapeSpec(jobs=40, max_chips=64, max_side=8, rate_per_h=40, median_s=H), 3)
    cfg = ClusterConfig(generation="torus-8x8x8-b4-p6-400gbps", ocs=False, placement="hilbert", horizon_s=86400,
                        slowdown_model="llama2-70b", slowdown_overrides={"n_layers": 1})
    roof = simulate(cfg, jobs, seed=1, step_time=CachedStepTime(RooflineStepTime(), _study)).metrics
    engine = simulate(cfg, jobs, seed=1, step_time=CachedStepTime(EngineStepTime(), _study)).metrics
    assert roof["runs_scatter"] == 40 and roof["slowdown_charged_max"] > 1.1 and roof["runs_slowdown_not_charged"] == 0
    for k in ("jobs_completed", "useful_chip_h", "slowdown_charged_mean", "slowdown_charged_max", "jct_p95_s"):
        assert roof[k] == engine[k], k
    bare = simulate(cfg.model_copy(update={"slowdown_model": None, "slowdown_overrides": {}}), jobs, seed=1).metrics
    assert bare["runs_slowdown_not_charged"] == bare["runs_scatter"] == 40 and bare["slowdown_charged_max"] == 1.0
