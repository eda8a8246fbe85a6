"""Step times of multislice jobs (issue 13): the step-time interface takes the slice count and
the sites the slices span. The engine simulates the N slices on the DCN (what `build_job`
builds); the roofline splits the job's global batch over N slices and says it times no
traffic. bert-large on 4x4x4 v4 slices keeps each engine step under about a second."""

from __future__ import annotations

import pytest
from helpers import ask

from podsim.cluster import ClusterConfig, simulate
from podsim.cluster.gang import GangSlice, sites_spanned
from podsim.engine import build_job, simulate_step
from podsim.errors import PodsimError
from podsim.scenario.steptime import RecordingStepTime
from podsim.study import CachedStepTime, EngineStepTime, RooflineStepTime
from podsim.study.multislice import MultisliceSpec, with_terms
from podsim.study.steptime import StepEstimate, default_study
from podsim.topology import DcnSpec, PodLayout, build_slice, get_generation
from podsim.trace import generate_trace
from podsim.trace.configs import get_model
from podsim.trace.plans import multislice_plan
from podsim.workload import Job

V4 = get_generation("tpu-v4")
MODEL, SHAPE = "bert-large", (4, 4, 4)  # global batch 8192: 64 sequences per chip on 2 x 64 chips
BATCH = get_model(MODEL).global_batch


def direct(slices: int, sites: int = 1):
    """The engine's step on `slices` slices, built by hand the way `podsim steptime --slices` does,
    with the multislice terms a study adds (podsim.study.multislice, defaults)."""
    trace = generate_trace(MODEL, SHAPE, f"fsdp=64,dcn={slices}", generation=V4)
    return with_terms(simulate_step(None, build_job(trace, V4, SHAPE, slices, dcn=DcnSpec(sites=sites))), MultisliceSpec())


def test_engine_step_of_n_slices_is_simulate_step_on_build_job():
    """The interface's answer for 2 slices (1 and 2 sites) is the engine's on build_job's job."""
    eng = EngineStepTime()
    for sites in (1, 2):
        e, r = ask(eng, MODEL, V4, SHAPE, False, slices=2, sites=sites), direct(2, sites)
        assert e.step_time_s == r.step_time_s and e.exposed_comm_s == r.exposed_comm_s
        assert e.step_time_s == pytest.approx(e.compute_s + e.exposed_comm_s + e.multislice_s, rel=1e-12)
        assert e.multislice_s == r.multislice["added_s"] > 0 and "straggler wait" in e.source
        assert "dcn=2, 2 slices" in e.source and ("2 sites" in e.source) == (sites == 2)
        # the cross-slice all-reduce runs on the DCN in one site, on the WAN between two
        assert (r.levels["dcn"]["busy_s"] > 0) == (sites == 1) and (r.levels["wan"]["busy_s"] > 0) == (sites == 2)
    # the WAN hop (1 ms each way by default) makes two sites slower than one
    assert ask(eng, MODEL, V4, SHAPE, False, slices=2, sites=2).step_time_s > \
        ask(eng, MODEL, V4, SHAPE, False, slices=2).step_time_s


def test_two_slices_cost_at_most_the_dcn_time_over_one_slice_of_the_same_per_slice_batch():
    """Weak scaling check: 2 slices of a batch-B job against 1 slice of batch B/2 (same work per
    chip, same ICI collectives): the step can only grow, and by no more than the DCN busy time."""
    two = ask(EngineStepTime(), MODEL, V4, SHAPE, False, slices=2)
    half = generate_trace(MODEL, SHAPE, "fsdp=64", generation=V4, overrides={"global_batch": BATCH // 2})
    one = simulate_step(half, build_slice(V4, SHAPE))
    dcn_busy_s = direct(2).levels["dcn"]["busy_s"]
    assert two.compute_s == pytest.approx(one.compute_s, rel=1e-9)
    assert one.step_time_s <= two.step_time_s - two.multislice_s <= one.step_time_s + dcn_busy_s
    assert two.exposed_comm_s > one.exposed_comm_s  # the DCN all-reduce's tail is exposed


def test_roofline_splits_the_global_batch_and_says_it_times_no_traffic():
    """Closed form: FLOPs(global batch) / (N x 64 chips x peak x eff); the per-op roofline is the
    engine's compute on the same N slices (collectives free)."""
    flops = get_model(MODEL).training_flops_per_step()
    roof = RooflineStepTime()
    for n in (1, 2, 4):
        e = ask(roof, MODEL, V4, SHAPE, False, slices=n, compute_efficiency=0.5)
        assert e.step_time_s == pytest.approx(flops / (n * 64 * V4.peak_flops_per_s * 0.5), rel=1e-12)
        assert ("DCN traffic not modelled" in e.source) == (n > 1)
    assert "DCN and WAN traffic not modelled" in ask(roof, MODEL, V4, SHAPE, False, slices=2, sites=2, compute_efficiency=0.5).source
    per_op = ask(RooflineStepTime(), MODEL, V4, SHAPE, False, slices=2)
    eng = ask(EngineStepTime(), MODEL, V4, SHAPE, False, slices=2)
    assert per_op.step_time_s == pytest.approx(eng.compute_s, rel=1e-9) and per_op.exposed_comm_s == 0.0
    assert per_op.source == "roofline, per-op compute (fsdp=64,dcn=2), 2 slices, DCN traffic not modelled"


def test_cache_keys_by_slices_and_sites():
    """A 1-slice and a 2-slice job of one model are different questions with different answers;
    asking again is free."""
    cached = CachedStepTime(RooflineStepTime(), lambda *job: default_study(*job, compute_efficiency=0.5))
    one = cached.step_time_s(MODEL, V4, SHAPE, False)
    two = cached.step_time_s(MODEL, V4, SHAPE, False, slices=2)
    assert two == pytest.approx(one / 2) and cached.calls == 2
    cached.step_time_s(MODEL, V4, SHAPE, False, slices=2, sites=2)
    cached.step_time_s(MODEL, V4, SHAPE, False, slices=2)
    assert cached.calls == 3
    eng = CachedStepTime(EngineStepTime())
    a, b = (eng.estimate(MODEL, V4, SHAPE, False, slices=n) for n in (1, 2))
    assert a.step_time_s != b.step_time_s and a.source != b.source and eng.calls == 2
    for kw, msg in (({"slices": 0}, "slices 0 must be a whole number >= 1"),
                    ({"slices": 2, "sites": 3}, "2 slice.s. cannot span 3 sites"),
                    ({"slices": 1.5}, "slices 1.5 must be")):
        with pytest.raises(PodsimError, match=msg):
            cached.estimate(MODEL, V4, SHAPE, False, **kw)


def test_multislice_plan_sets_dcn_and_refuses_a_different_one():
    assert multislice_plan(None, MODEL, 64, 1) == "fsdp=64"
    assert multislice_plan("tensor=4,fsdp=auto", MODEL, 64, 3) == "tensor=4,fsdp=16,dcn=3"
    assert multislice_plan("fsdp=auto,dcn=2", MODEL, 64, 2) == "fsdp=64,dcn=2"
    with pytest.raises(PodsimError, match="dcn=2 but the job has 4 slice"):
        multislice_plan("fsdp=auto,dcn=2", MODEL, 64, 4)


def test_engine_mode_cluster_run_times_a_multislice_job_by_its_n_slices():
    """A 2-slice job given in steps runs with the engine's step time on 2 slices."""
    steps = 1000
    jobs = [Job(id="g", submit_s=0.0, shape=SHAPE, slices=2, steps=steps, model=MODEL),
            Job(id="s", submit_s=0.0, shape=SHAPE, steps=steps, model=MODEL)]
    rec = RecordingStepTime(EngineStepTime())
    r = simulate(ClusterConfig(generation="tpu-v4", horizon_s=86400, reconfigure_s=0), jobs, step_time=rec, audit=True)
    out = {o.id: o for o in r.jobs}
    assert out["g"].status == out["s"].status == "completed"
    assert out["g"].nominal_s == pytest.approx(steps * direct(2).step_time_s, rel=1e-12)
    assert out["g"].end_s == pytest.approx(out["g"].nominal_s, rel=1e-12)
    t = rec.table()
    assert sorted(zip(t["slices"], t["sites"], strict=True)) == [(1, 1), (2, 1)]  # asked once each (cached)


def test_a_gang_split_over_two_sites_is_timed_over_the_wan():
    """Two whole-pod slices in a fleet of two pods in two sites: placed one per site, the job's
    step is asked for 2 slices over 2 sites; its nominal time assumes one site."""
    calls = []

    class Recorder:
        def estimate(self, study):
            calls.append((study.slices, study.sites))
            return StepEstimate(1.0 + study.sites, 1.0, float(study.sites), "stand-in")

    job = Job(id="big", submit_s=0.0, shape=(16, 16, 16), slices=2, span_sites=True, steps=3600, model=MODEL)
    cfg = ClusterConfig(generation="tpu-v4", pods=2, sites=2, horizon_s=86400, reconfigure_s=0)
    (o,) = simulate(cfg, [job], seed=1, audit=True, step_time=Recorder()).jobs
    assert o.status == "completed" and set(calls) == {(2, 1), (2, 2)}
    assert o.nominal_s == pytest.approx(2 * 3600) and o.end_s == pytest.approx(3 * 3600)


def test_sites_spanned_counts_the_sites_of_the_gangs_pods():
    layout = PodLayout(V4, pods=4)

    class P:  # a slice on a pod
        def __init__(self, pod):
            self.pod = pod

    assert sites_spanned(P(3), layout, sites=2) == 1
    assert sites_spanned(GangSlice([P(0), P(1)]), layout, sites=2) == 1
    assert sites_spanned(GangSlice([P(1), P(2)]), layout, sites=2) == 2
    assert sites_spanned(GangSlice([P(0), P(3)]), layout, sites=1) == 1


ENGINE_SCENARIO = """
name: engine-gangs
topology: {generation: tpu-v4, pods: 1}
workload: {synthetic: {jobs: 4, rate: 4/h, mix: {4x4x4: 1}, slices: {1: 1, 2: 1}, models: {bert-large: 1},
                       steps: {kind: fixed, median: 2000}}}
step_time: {model: engine, compute_efficiency: 0.5}
horizon: 1d
seed: 3
"""


def test_a_scenario_with_engine_step_times_runs_multislice_jobs():
    from podsim.scenario.load import load_scenario_text
    from podsim.scenario.run import run_scenario

    r = run_scenario(load_scenario_text(ENGINE_SCENARIO))
    assert r.metrics["jobs_completed"] == 4
    t = r.tables["step_times"]
    rows = {int(n): (s, e) for n, s, e in zip(t["slices"], t["source"], t["exposed_comm_s"], strict=True)}
    assert set(rows) == {1, 2} and set(int(x) for x in t["sites"]) == {1}
    assert rows[2][0].startswith("engine (fsdp=64,dcn=2, 2 slices; compute at 50% of peak; + straggler wait") and rows[2][1] > rows[1][1]
    from podsim.report import figures  # the report names the 2-slice row apart from the 1-slice one
    labels = sorted(figures.step_times(r).data[0].y)  # each with its step's error band (podsim.validation.bands)
    assert [y.split(" (")[0] for y in labels] == ["bert-large 4x4x4", "bert-large 4x4x4 x2"] and all("(±" in y for y in labels)
    with pytest.raises(PodsimError, match="names dcn; leave it out"):
        run_scenario(load_scenario_text(ENGINE_SCENARIO.replace(
            "compute_efficiency: 0.5}", "parallelism: {bert-large: 'fsdp=auto,dcn=2'}}")))


SITES_SCENARIO = """
name: engine-sites
topology: {generation: tpu-v5e, pods: 2, wiring: static}
dcn: {sites: 2}
workload: {synthetic: {jobs: 2, rate: 4/h, mix: {16x16: 1}, slices: {2: 1}, span_sites: true, models: {bert-large: 1},
                       steps: {kind: fixed, median: 2000}}}
step_time: {model: engine}
horizon: 1d
"""


def test_a_scenario_times_a_gang_across_two_sites_over_the_wan():
    """Two whole v5e pods in two sites: the engine is asked for one site (nominal) and for the
    two the placement spans; the WAN's 1 ms hops make the second slower by at least one hop."""
    from podsim.scenario.load import load_scenario_text
    from podsim.scenario.run import run_scenario

    r = run_scenario(load_scenario_text(SITES_SCENARIO))
    assert r.metrics["jobs_completed"] == 2
    t = r.tables["step_times"]
    by_sites = {int(s): float(x) for s, x in zip(t["sites"], t["step_time_s"], strict=True)}
    assert set(int(n) for n in t["slices"]) == {2} and set(by_sites) == {1, 2}
    assert by_sites[2] - by_sites[1] >= 1e-3
