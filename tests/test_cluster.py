"""Cluster simulation: conservation, determinism, policies, failures and restarts."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from podsim.cluster import ClusterConfig, FailureModel, simulate
from podsim.cluster.failures import FailureEvent, FailureProcess
from podsim.cluster.links import IciLinks
from podsim.errors import PodsimError
from podsim.workload import Job, SyntheticSpec, generate_jobs, parse_synthetic

H = 3600.0
WALL_KEYS = {"engine_wall_s", "placement_s"}


def job(name, submit_s, shape, hours, priority=0, twisted=False):
    return Job(id=name, submit_s=submit_s, shape=tuple(int(v) for v in shape.split("x")), twisted=twisted,
               priority=priority, duration_s=hours * H)


def by_id(result):
    return {o.id: o for o in result.jobs}


def busy_v4_jobs(n=120, seed=3):
    spec = parse_synthetic(f"jobs={n},rate=3/h,duration=lognormal,median=3h,sigma=1,priorities=0:1;1:1", "tpu-v4")
    return generate_jobs(spec, seed)


def failing(availability=0.99, ocs=None, link=None):
    return FailureModel(host=FailureProcess.from_availability(availability, mttr_s=4 * H), ocs=ocs, link=link)


def check_conservation(result, total):
    """Every job is in exactly one end state; chip-hours add up per job and for the fleet."""
    m = result.metrics
    assert m["jobs_total"] == total
    assert (m["jobs_completed"] + m["jobs_running"] + m["jobs_queued"] + m["jobs_unplaceable"]
            + m["jobs_not_arrived"]) == total
    assert {o.status for o in result.jobs} <= {"completed", "running", "queued", "unplaceable", "not_arrived"}
    for o in result.jobs:
        assert o.allocated_chip_s == pytest.approx(o.useful_chip_s + o.lost_chip_s + o.overhead_chip_s, rel=1e-12, abs=1e-6)
        assert min(o.useful_chip_s, o.lost_chip_s, o.overhead_chip_s) >= 0
        if o.status == "completed":  # the whole job's work was done once, and kept
            assert o.useful_chip_s == pytest.approx(o.chips * o.nominal_s, rel=1e-9)
            assert o.progress == 1.0
        if o.status in ("unplaceable", "not_arrived"):
            assert o.allocated_chip_s == 0 and o.runs == 0
    # the integral of busy chips over time (measured at every change) = the sum over jobs
    assert m["busy_chip_h"] == pytest.approx(m["allocated_chip_h"], rel=1e-9)
    assert m["allocated_chip_h"] == pytest.approx(m["useful_chip_h"] + m["lost_chip_h"] + m["overhead_chip_h"], rel=1e-9)
    assert 0 <= m["utilisation"] <= 1 and 0 <= m["goodput"] <= 1
    assert m["healthy_chip_h"] <= m["fleet_chip_h"] + 1e-6


@pytest.mark.parametrize("policy,ocs", [("fifo", True), ("backfill", False), pytest.param("priority", True, marks=pytest.mark.slow),
                                        pytest.param("fifo", False, marks=pytest.mark.slow),
                                        pytest.param("backfill", True, marks=pytest.mark.slow),
                                        pytest.param("priority", False, marks=pytest.mark.slow)])  # slow: make test only
def test_conservation_and_no_chip_in_two_jobs(policy, ocs):
    """Host, OCS and link failures on; the audit checks the state at every scheduling pass and
    validates every placement (topology included) before it is taken."""
    jobs = busy_v4_jobs(30)
    fm = failing(0.99, ocs=FailureProcess(mtbf_s=2000 * H, mttr_s=H) if ocs else None,
                 link=FailureProcess(mtbf_s=20000 * H, mttr_s=2 * H))
    cfg = ClusterConfig(generation="tpu-v4", policy=policy, ocs=ocs, horizon_s=2 * 86400, failures=fm)
    result = simulate(cfg, jobs, seed=5, audit=True)
    check_conservation(result, len(jobs))
    m = result.metrics
    assert m["audits"] == m["passes"] > 100
    assert m["failures_host"] > 0 and m["failures_link"] > 0 and m["job_interruptions"] > 0
    if policy == "priority":
        assert m["preemptions"] > 0
    if not ocs:  # twisted requests ran untwisted; shapes longer than the static pod never run
        assert m["jobs_untwisted"] > 0 and m["ocs_reconfigurations"] == 0
        assert all("statically wired" in u["reason"] for u in result.unplaceable)


def test_same_seed_same_metrics_other_seed_other_failures():
    jobs = busy_v4_jobs(50)
    cfg = ClusterConfig(generation="tpu-v4", policy="backfill", horizon_s=2 * 86400, failures=failing(0.995))
    a, b, c = (simulate(cfg, jobs, seed=s) for s in (1, 1, 2))
    strip = lambda r: {k: v for k, v in r.metrics.items() if k not in WALL_KEYS}  # noqa: E731
    assert strip(a) == strip(b)
    assert [dataclasses.asdict(o) for o in a.jobs] == [dataclasses.asdict(o) for o in b.jobs]
    assert all(np.array_equal(a.timeseries[k], b.timeseries[k], equal_nan=True) for k in a.timeseries)
    assert strip(a) != strip(c)


def test_cpsat_batch_admission_conserves_and_is_reproducible():
    jobs = busy_v4_jobs(30)
    cfg = ClusterConfig(generation="tpu-v4", solver="cpsat", decision_time_limit=0.2, batch_window=8,
                        horizon_s=86400, failures=failing(0.995))
    a, b = simulate(cfg, jobs, seed=2, audit=True), simulate(cfg, jobs, seed=2)
    check_conservation(a, len(jobs))
    assert a.metrics["cpsat_calls"] > 0
    assert a.metrics["jobs_started"] == b.metrics["jobs_started"] and a.metrics["useful_chip_h"] == b.metrics["useful_chip_h"]


def test_fifo_starts_jobs_in_submission_order():
    jobs = generate_jobs(SyntheticSpec(jobs=150, arrival={"rate_per_h": 6}), 4)
    result = simulate(ClusterConfig(generation="tpu-v4", policy="fifo", horizon_s=20 * 86400), jobs)
    starts = [o.first_start_s for o in sorted(result.jobs, key=lambda o: o.submit_s) if not math.isnan(o.first_start_s)]
    assert len(starts) > 100 and all(a <= b for a, b in zip(starts, starts[1:], strict=False))


def test_easy_backfilling_never_delays_the_head():
    """A holds 32 cubes for 10 h; B (48 cubes) must wait for it. C (short) and D (long, but able
    to keep off B's reserved cubes) start at once; E would take B's cubes and waits. FIFO
    starts nobody before B."""
    reconf = 10.0
    jobs = [job("A", 0, "8x16x16", 10), job("B", 1, "12x16x16", 5), job("C", 2, "4x4x8", 1),
            job("D", 3, "4x4x8", 30), job("E", 4, "8x8x16", 30)]
    ends = {}
    for policy in ("backfill", "fifo"):
        out = by_id(simulate(ClusterConfig(generation="tpu-v4", policy=policy, horizon_s=4 * 86400), jobs))
        ends[policy] = out
        a_end = reconf + 10 * H
        assert out["A"].end_s == pytest.approx(a_end)
        assert out["B"].first_start_s == pytest.approx(a_end)  # the head is never delayed
    bf, ff = ends["backfill"], ends["fifo"]
    assert bf["C"].first_start_s == 2 and bf["D"].first_start_s == 3
    assert bf["E"].first_start_s >= bf["B"].first_start_s
    assert all(ff[k].first_start_s >= ff["B"].first_start_s for k in "CDE")


def test_priority_preempts_the_least_work_at_risk():
    """Four low-priority jobs fill the pod; a high-priority job preempts exactly one: the one
    whose last checkpoint is most recent, which loses only the work since then."""
    jobs = [job(f"low{k}", k * 1200.0, "8x8x16", 40) for k in range(4)] + [job("high", 5 * H, "8x8x16", 2, priority=1)]
    result = simulate(ClusterConfig(generation="tpu-v4", policy="priority", horizon_s=5 * 86400), jobs)
    out = by_id(result)
    assert out["high"].first_start_s == 5 * H
    victims = [k for k in range(4) if out[f"low{k}"].preemptions]
    assert len(victims) == 1 and result.metrics["preemptions"] == 1
    v = victims[0]
    # run time since the start (after the 10 s reconfiguration) modulo the 1 h checkpoint interval
    at_risk = [(5 * H - k * 1200.0 - 10.0) % H for k in range(4)]
    assert v == int(np.argmin(at_risk))
    assert out[f"low{v}"].lost_chip_s == pytest.approx(at_risk[v] * 1024)
    check_conservation(result, len(jobs))


def test_failure_restart_from_checkpoint_ocs_vs_static():
    """Hosts in cubes (1,1,1) and (2,2,2) of the home arrangement fail at 2.5 h for 5 h, hitting
    an 8x16x16 job. With OCS it restarts at once on 32 spare cubes (restart overhead + 10 s
    reconfiguration); statically wired, no 2x4x4 box of cubes avoids both, so it waits for the
    repair. Either way it keeps the 2 h before its last checkpoint."""
    cube_a, cube_b = 1 * 16 + 1 * 4 + 1, 2 * 16 + 2 * 4 + 2
    fails = [FailureEvent(2.5 * H, "host", 16 * cube_a, 5 * H), FailureEvent(2.5 * H, "host", 16 * cube_b, 5 * H)]
    jobs = [job("J", 0.0, "8x16x16", 10)]
    restart, reconf = 300.0, 10.0
    for ocs, overhead0 in ((True, reconf), (False, 0.0)):
        cfg = ClusterConfig(generation="tpu-v4", ocs=ocs, placement="first", horizon_s=2 * 86400)
        result = simulate(cfg, jobs, failures=fails, audit=True)
        j = result.jobs[0]
        ran = 2.5 * H - overhead0
        saved = math.floor(ran / H) * H
        if ocs:
            expected_end = 2.5 * H + restart + reconf + (10 * H - saved)
        else:
            expected_end = 7.5 * H + restart + (10 * H - saved)
        assert j.status == "completed" and j.interruptions == 1 and j.runs == 2
        assert j.end_s == pytest.approx(expected_end)
        assert j.lost_chip_s == pytest.approx((ran - saved) * 2048)
        assert j.overhead_chip_s == pytest.approx((2 * overhead0 + restart) * 2048)
        assert result.metrics["ocs_reconfigurations"] == (2 if ocs else 0)
        check_conservation(result, 1)


def test_ocs_failure_stops_cube_level_slices_until_repaired():
    """A cube-level torus needs a circuit on every OCS of its pod (ocs.7): an OCS failure stops
    the 8x8x8 job and it resumes from its checkpoint when the OCS is repaired; a sub-cube job
    (no circuits) carries on."""
    jobs = [job("big", 0.0, "8x8x8", 10), job("small", 0.0, "2x2x4", 10)]
    fails = [FailureEvent(2.5 * H, "ocs", 7, 1 * H)]
    out = by_id(simulate(ClusterConfig(generation="tpu-v4", horizon_s=86400), jobs, failures=fails))
    assert out["small"].interruptions == 0 and out["small"].end_s == pytest.approx(10 * H)
    assert out["big"].interruptions == 1
    assert out["big"].end_s == pytest.approx(3.5 * H + 310 + 8 * H)


def test_overlapping_failures_of_one_part_heal_with_the_last_repair():
    """Host 0 is down over [1 h, 4 h) and [2 h, 6 h): it is healthy again only at 6 h, so the
    fleet loses 4 chips x 5 h; a link between chips of host 0 adds nothing while the host is down."""
    fails = [FailureEvent(H, "host", 0, 3 * H), FailureEvent(2 * H, "host", 0, 4 * H), FailureEvent(2 * H, "link", 0, H)]
    m = simulate(ClusterConfig(generation="tpu-v4", horizon_s=10 * H), [], failures=fails).metrics
    # link 0 joins chips 0 and 16, both on host 0 (chips 0, 4, 16, 20), down at the time anyway
    assert m["healthy_chip_h"] == pytest.approx(4096 * 10 - 4 * 5)
    assert m["failures_host"] == 2 and m["failures_link"] == 1


def test_link_failures_disable_the_right_parts():
    """Links are chip ports; a copper link takes both end chips, an optical one its OCS port."""
    from podsim.topology import PodLayout, get_generation

    v4 = IciLinks(PodLayout(get_generation("tpu-v4")))
    assert v4.n_cables == 64 * (3 * 16 * 3 + 96)  # 144 copper + 96 optical per cube
    assert IciLinks(PodLayout(get_generation("tpu-v4"), ocs=False)).n_cables == 4096 * 3
    assert IciLinks(PodLayout(get_generation("tpu-v5e"))).n_cables == 256 * 2
    assert v4.parts(0) == {"chips": [0, 16], "ocs_ports": []}  # chip 0, +x: copper to local x=1
    assert v4.parts(1) == {"chips": [], "ocs_ports": [(0, 1)]}  # chip 0, -x: cube 0's '-' port on OCS 0
    with pytest.raises(PodsimError, match="link 99999999 does not exist"):
        v4.parts(99999999)
    # an optical link failure interrupts the cube-level job using that port, not a sub-cube one
    jobs = [job("big", 0.0, "4x4x4", 5), job("small", 0.0, "1x1x2", 5)]
    cfg = ClusterConfig(generation="tpu-v4", placement="first", horizon_s=86400)
    out = by_id(simulate(cfg, jobs, failures=[FailureEvent(H, "link", 1, H)]))
    assert out["big"].interruptions == 1 and out["small"].interruptions == 0


def test_never_placeable_jobs_have_a_reason():
    jobs = [job("twist", 0, "4x4x8", 1, twisted=True), job("long", 0, "4x4x192", 1), job("ok", 0, "4x4x4", 1)]
    cfg = ClusterConfig(generation="tpu-v4", ocs=False, untwist_on_static=False, horizon_s=86400)
    result = simulate(cfg, jobs)
    out = by_id(result)
    assert out["ok"].status == "completed"
    assert "needs OCS circuits" in out["twist"].reason and "does not fit the statically wired" in out["long"].reason
    assert result.metrics["jobs_unplaceable"] == 2 and len(result.unplaceable) == 2
    # with the default, the twisted request runs as a plain 4x4x8 torus
    out = by_id(simulate(cfg.model_copy(update={"untwist_on_static": True}), jobs))
    assert out["twist"].status == "completed" and out["twist"].untwisted


def test_jobs_after_the_horizon_and_running_at_the_end():
    jobs = [job("early", 0, "4x4x4", 100), job("late", 2 * 86400, "4x4x4", 1)]
    result = simulate(ClusterConfig(generation="tpu-v4", horizon_s=86400), jobs)
    out = by_id(result)
    assert out["early"].status == "running" and out["late"].status == "not_arrived"
    # a running job keeps its work so far as useful: (horizon - 10 s reconfiguration) x 64 chips
    assert out["early"].useful_chip_s == pytest.approx((86400 - 10) * 64)
    check_conservation(result, 2)


def test_time_series_and_progress():
    calls = []
    cfg = ClusterConfig(generation="tpu-v4", horizon_s=86400, sample_interval_s=3600)
    result = simulate(cfg, busy_v4_jobs(30), on_progress=lambda t, h: calls.append((t, h)))
    ts = result.timeseries
    assert len(ts["t_s"]) == 25 and np.all(np.diff(ts["t_s"]) == 3600) and ts["t_s"][-1] == 86400  # 0 h .. the horizon
    assert np.all(ts["busy_chips"] <= ts["healthy_chips"])
    assert np.all(ts["largest_placeable_chips"] <= ts["healthy_chips"] - ts["busy_chips"])
    assert calls[-1] == (86400, 86400) and len(calls) == 25


def test_step_based_jobs_use_the_slice_they_get():
    """Run time = steps x roofline step time on the slice: at a flat 0.6, FLOPs / (chips x peak x
    0.6); by default the per-op compute critical path of the model's trace on that slice."""
    from podsim.study import CachedStepTime, RooflineStepTime
    from podsim.study.steptime import compute_critical_path_s, default_study
    from podsim.topology import get_generation
    from podsim.trace import generate_trace
    from podsim.trace.configs import get_model

    jobs = [Job(id="gpt", submit_s=0.0, shape=(8, 8, 8), steps=1000, model="gpt3-175b")]
    config = ClusterConfig(generation="tpu-v4", horizon_s=30 * 86400)
    flat = CachedStepTime(RooflineStepTime(), lambda *job: default_study(*job, compute_efficiency=0.6))
    result = simulate(config, jobs, step_time=flat)
    step = get_model("gpt3-175b").training_flops_per_step() / (512 * 275e12 * 0.6)
    j = result.jobs[0]
    assert j.nominal_s == pytest.approx(1000 * step)
    assert j.end_s == pytest.approx(10.0 + 1000 * step)
    assert result.metrics["step_time_evaluations"] == 1
    v4 = get_generation("tpu-v4")
    per_op = compute_critical_path_s(generate_trace("gpt3-175b", (8, 8, 8), "fsdp=512", generation=v4), v4)
    assert simulate(config, jobs).jobs[0].nominal_s == pytest.approx(1000 * per_op)


@pytest.mark.parametrize("bad,match", [
    (dict(generation="gpu-h100"), "switched GPU cluster"),
    (dict(generation="tpu-v9"), "unknown generation"),
    (dict(policy="lifo"), "policy"),
    (dict(pods=0), "pods"),
])
def test_bad_config_is_an_error(bad, match):
    with pytest.raises(ValueError, match=match):
        ClusterConfig(**{"generation": "tpu-v4", "horizon_s": 10.0, **bad})


def test_bad_failures_and_jobs_are_one_line_errors():
    cfg = ClusterConfig(generation="tpu-v4", horizon_s=10.0)
    with pytest.raises(PodsimError, match="host 5000 does not exist; hosts are 0..1023"):
        simulate(cfg, [], failures=[FailureEvent(1.0, "host", 5000, 1.0)])
    with pytest.raises(PodsimError, match="has no OCS"):
        simulate(cfg.model_copy(update={"ocs": False}), [], failures=[FailureEvent(1.0, "ocs", 1, 1.0)])
    with pytest.raises(PodsimError, match="job id 'aa' is used twice"):  # names the repeated id, not the first
        simulate(cfg, [job("zz", 0, "4x4x4", 1), job("aa", 1, "4x4x4", 1), job("aa", 2, "4x4x4", 1)])
