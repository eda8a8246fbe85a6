"""What a non-native placement costs (issue 27, item 5), from the engine.

Must show: a fold that keeps every ring minimal costs nothing; a scattered slice's collective
time equals the closed form on its actual routes."""

from __future__ import annotations

import numpy as np
import pytest

from podsim.cluster import ClusterConfig, simulate
from podsim.engine import simulate_collective
from podsim.placement import PodState, SliceRequest, place
from podsim.placement.problem import PlacementSettings
from podsim.study import CachedStepTime, EngineStepTime, RooflineStepTime
from podsim.topology import PodLayout, get_generation
from podsim.topology.placed import built_asked, built_placed
from podsim.topology.routing import slice_routes
from podsim.topology.shapes import SliceSpec
from podsim.topology.slices import Slice
from podsim.workload import Job

V4 = get_generation("tpu-v4")


def test_a_fold_that_keeps_rings_minimal_costs_nothing():
    """1x8x8 (two rings of 8) folded onto a 4x4x4 cube: every logical link is one cable, so its
    ring all-reduce over both rings takes exactly as long as on the 1x8x8 slice as asked, and the
    step-time model charges a step of a model on it nothing."""
    state = PodState.empty("tpu-v4")
    p = place(state, [SliceRequest("f", "1x8x8")], solver="greedy", settings=PlacementSettings(fold="allowed"))["f"]
    assert p.slice.form == "fold" and len(p.slice.cubes) == 1
    folded = built_placed(state.layout, p.slice)
    asked = built_asked(V4, (1, 8, 8), False, True)
    for group in ("y", "z", "y,z"):
        a = simulate_collective(folded, "all_reduce", 256e6, group=group, algorithm="ring")
        b = simulate_collective(asked, "all_reduce", 256e6, group=group, algorithm="ring")
        assert a.simulated_s == pytest.approx(b.simulated_s, rel=1e-12)
    factor, source = CachedStepTime(EngineStepTime()).slowdown("bert-large", V4, p.slice, state.layout,
                                                                   overrides={"n_layers": 2})
    assert factor == pytest.approx(1.0, abs=1e-9) and "fold placement" in source


def test_scattered_ring_time_is_the_closed_form_on_its_routes():
    """A Hilbert-allocated 1x1x16 slice among busy chips: its ring all-reduce is 2(p-1) steps,
    each as long as the most loaded link of its actual routes takes for the flows crossing it
    (bytes/p x flows / capacity) plus the longest route's latency."""
    state = PodState.empty("tpu-v4", ocs=False)
    busy = np.arange(0, 4096, 3)[:400].astype(np.int32)
    state.allocate("busy", Slice(SliceSpec("tpu-v4", (400, 1, 1), False, "subcube", (False,) * 3), busy, 0,
                                 tuple(sorted(set((busy // 64).tolist())))))
    slc = place(state, [SliceRequest("s", "1x1x16")], solver="greedy", policy="hilbert")["s"].slice
    assert slc.form == "scatter"
    built = built_placed(state.layout, slc)
    size, p = 64e6, 16
    res = simulate_collective(built, "all_reduce", size, group="z", algorithm="ring")
    src = np.arange(p)
    routes = slice_routes(built.view, src, (src + 1) % p)
    fab = built.fabric
    assert routes.hops.max() > 1  # scattered: some ring neighbours are several hops apart
    load = np.bincount(routes.links, minlength=fab.n_links)
    cap = fab.link_capacity_bytes_per_s[routes.links].min()
    latency = max(fab.link_latency_s[routes.route(f)].sum() for f in range(p))
    closed = 2 * (p - 1) * (size / p * load.max() / cap + latency)
    assert res.simulated_s == pytest.approx(closed, rel=1e-9)


def test_the_cluster_runs_a_priced_placement_at_its_speed():
    """A folded job given in time runs its duration x the charged factor; with the roofline
    (no communication) nothing is charged, and the reason says so."""
    jobs = [Job("f", 0.0, (1, 8, 8), duration_s=3600.0), Job("n", 0.0, (4, 4, 4), duration_s=3600.0)]
    cfg = ClusterConfig(generation="tpu-v4", horizon_s=86400, fold="allowed", slowdown_model="bert-large",
                        slowdown_overrides={"n_layers": 2})
    r = {o.id: o for o in simulate(cfg, jobs, step_time=EngineStepTime()).jobs}
    assert r["f"].placement == "fold" and r["n"].placement == "native" and r["n"].slowdown == 1.0
    assert r["f"].end_s - r["f"].first_start_s == pytest.approx(10.0 + 3600.0 * r["f"].slowdown)
    roof = CachedStepTime(RooflineStepTime())
    layout = PodLayout(V4)
    slc = place(PodState(layout), [SliceRequest("f", "1x8x8")], solver="greedy",
                settings=PlacementSettings(fold="allowed"))["f"].slice
    assert roof.slowdown("bert-large", V4, slc, layout)[0] == 1.0 and "no communication" in roof.slowdown("bert-large", V4, slc, layout)[1]
    with pytest.raises(Exception, match="slowdown_model"):
        simulate(ClusterConfig(generation="tpu-v4", horizon_s=86400, fold="allowed"), jobs, step_time=EngineStepTime())
