"""Cluster numbers a planner can defend: the chip-hour breakdown adds up, waits count the
still-queued jobs, every job is in one state in every summary, warm-up and drain."""

from __future__ import annotations

import math

import numpy as np
import pytest

from podsim.cluster import ClusterConfig, FailureModel, simulate
from podsim.cluster.breakdown import chip_hour_breakdown
from podsim.cluster.failures import FailureProcess
from podsim.cluster.result import BREAKDOWN
from podsim.report.render import jobs_text, key_rows
from podsim.scenario.run import cluster_run_result
from podsim.workload import Job, generate_jobs, parse_synthetic

H = 3600.0


def v4_jobs(n=150, rate="4/h", seed=3):
    spec = parse_synthetic(f"jobs={n},rate={rate},duration=lognormal,median=4h,sigma=1,priorities=0:1;1:1", "tpu-v4")
    return generate_jobs(spec, seed)


def config(**kw):
    base = dict(generation="tpu-v4", pods=1, policy="backfill", horizon_s=3 * 86400,
                failures=FailureModel(host=FailureProcess.from_availability(0.99, mttr_s=4 * H)))
    return ClusterConfig(**{**base, **kw})


def check_breakdown(m: dict) -> None:
    """Each chip-hour of the window in exactly one bucket: the buckets add up to chips x window,
    the held ones to the busy chip-hours, the free ones to healthy - busy."""
    parts = {p["metric"]: p["chip_h"] for p in chip_hour_breakdown(m)}
    assert list(parts) == [k for k, _ in BREAKDOWN] and min(parts.values()) >= -1e-9
    window = m["horizon_s"] - m["warmup_s"]
    assert sum(parts.values()) == pytest.approx(m["chips"] * window / H, rel=1e-9)
    assert m["fleet_chip_h"] == pytest.approx(m["chips"] * window / H, rel=1e-12)
    held = sum(parts[k] for k in parts if k not in ("idle_queued_chip_h", "idle_empty_chip_h", "down_chip_h"))
    assert held == pytest.approx(m["busy_chip_h"], rel=1e-9)
    assert parts["idle_queued_chip_h"] + parts["idle_empty_chip_h"] == pytest.approx(m["healthy_chip_h"] - m["busy_chip_h"], rel=1e-9, abs=1e-6)
    assert m["goodput"] == pytest.approx(parts["useful_chip_h"] / held, rel=1e-9)


@pytest.mark.parametrize("policy", ["fifo", pytest.param("backfill", marks=pytest.mark.slow),
                                    pytest.param("priority", marks=pytest.mark.slow)])  # slow: make test only
def test_breakdown_adds_up_and_names_where_chip_hours_went(policy):
    r = simulate(config(policy=policy), v4_jobs(), seed=2)
    m = r.metrics
    check_breakdown(m)
    assert m["lost_failure_chip_h"] > 0 and m["reconfiguration_chip_h"] > 0 and m["restart_chip_h"] > 0
    assert m["idle_queued_chip_h"] > 0  # a v4 mix at this load leaves cubes free that the queued shapes cannot use
    if policy == "priority":
        assert m["preemptions"] > 0 and m["lost_preemption_chip_h"] > 0
    else:
        assert m["lost_preemption_chip_h"] == 0
    # the fleet totals agree with the per-job records (whole horizon: nothing clipped)
    assert m["lost_chip_h"] == pytest.approx(sum(o.lost_chip_s for o in r.jobs) / H, rel=1e-9)
    assert m["useful_chip_h"] == pytest.approx(sum(o.useful_chip_s for o in r.jobs) / H, rel=1e-9)
    assert m["overhead_chip_h"] == pytest.approx(sum(o.overhead_chip_s for o in r.jobs) / H, rel=1e-9)


def test_reconfiguration_and_restart_split_by_hand():
    """One 4x4x8 job on an OCS pod, one host failure after 2.5 h, checkpoints hourly: the first
    run waits 10 s for circuits (ocs.17), the second 10 s + the 5 min restart; 0.5 h is lost."""
    from podsim.cluster.failures import FailureEvent

    jobs = [Job(id="a", submit_s=0.0, shape=(4, 4, 8), duration_s=5 * H)]
    cfg = ClusterConfig(generation="tpu-v4", pods=1, horizon_s=2 * 86400)
    r = simulate(cfg, jobs, failures=[FailureEvent(2.5 * H + 10, "host", 0, 3600.0)], seed=0)
    m = r.metrics
    chips = 128
    assert m["reconfiguration_chip_h"] == pytest.approx(2 * 10 * chips / H)
    assert m["restart_chip_h"] == pytest.approx(300 * chips / H)
    assert m["lost_failure_chip_h"] == pytest.approx(0.5 * chips)
    assert m["useful_chip_h"] == pytest.approx(5 * chips)
    check_breakdown(m)


def test_waits_count_the_still_queued_jobs():
    """An overloaded pod: jobs still queued at the horizon count with their wait so far, so the
    p95 wait is at least the started-only one and equals the percentile computed here."""
    cfg = config(horizon_s=2 * 86400)
    r = simulate(cfg, v4_jobs(n=300, rate="12/h"), seed=1)
    m = r.metrics
    assert m["jobs_queued"] > 20
    arrived = [o for o in r.jobs if o.status not in ("unplaceable", "not_arrived")]
    waits = [cfg.horizon_s - o.submit_s if math.isnan(o.first_start_s) else o.wait_s for o in arrived]
    assert m["wait_p95_s"] == pytest.approx(np.percentile(waits, 95))
    assert m["wait_p95_s"] > m["wait_p95_started_s"]
    assert m["wait_p95_with_queued_s"] == m["wait_p95_s"]  # the old name, the same figure


def test_every_job_in_one_state_in_every_summary():
    """Jobs submitted after the horizon are counted (not arrived), in the metrics and in the
    key-figure row the CLI, the report and `make demo` print."""
    jobs = v4_jobs(n=200, rate="2/h")  # ~100 h of arrivals on a 72 h horizon
    r = simulate(config(), jobs, seed=4)
    m = r.metrics
    assert m["jobs_not_arrived"] > 0
    states = ("jobs_completed", "jobs_running", "jobs_queued", "jobs_unplaceable", "jobs_not_arrived")
    assert sum(m[k] for k in states) == m["jobs_total"] == len(jobs)
    text = jobs_text(m)
    assert text.startswith(f"{len(jobs)} = ") and f"{m['jobs_not_arrived']} not yet arrived" in text
    row = dict(key_rows([cluster_run_result(r)]))["jobs"][0]
    assert row == text


@pytest.mark.slow
def test_warmup_measures_the_window_only():
    """With a one-day warm-up: fleet figures over the last two days (the breakdown adds up to
    chips x 2 d), waits and slowdowns over the jobs submitted after the warm-up only."""
    jobs = v4_jobs()
    whole = simulate(config(), jobs, seed=2).metrics
    r = simulate(config(warmup_s=86400.0), jobs, seed=2)
    m = r.metrics
    check_breakdown(m)
    assert m["fleet_chip_h"] == pytest.approx(4096 * 48)
    measured = [o for o in r.jobs if 86400 <= o.submit_s < 3 * 86400]
    assert m["jobs_measured"] == len(measured) and 0 < len(measured) < len(jobs)
    arrived = [o for o in measured if o.status not in ("unplaceable", "not_arrived")]
    waits = [3 * 86400 - o.submit_s if math.isnan(o.first_start_s) else o.wait_s for o in arrived]
    assert m["wait_p95_s"] == pytest.approx(np.percentile(waits, 95))
    assert m["jobs_total"] == whole["jobs_total"]  # every job still has its one state
    # the same simulation: the busy chip-hours of day 1 plus the window's are the whole run's
    assert m["busy_chip_h"] < whole["busy_chip_h"]


def test_drain_lets_the_window_jobs_finish():
    """No failures: with a drain every job submitted before the horizon completes, its wait is
    whole (no lower bounds), and the window's fleet figures equal the undrained run's."""
    cfg = ClusterConfig(generation="tpu-v4", pods=1, policy="backfill", horizon_s=2 * 86400)
    jobs = v4_jobs(n=200, rate="6/h")
    cut = simulate(cfg, jobs, seed=1)
    drained = simulate(cfg.model_copy(update={"drain": True, "drain_limit_s": 30 * 86400.0}), jobs, seed=1)
    c, d = cut.metrics, drained.metrics
    assert c["jobs_queued"] + c["jobs_running"] > 0
    window = [o for o in drained.jobs if o.submit_s < cfg.horizon_s]
    assert {o.status for o in window} <= {"completed", "unplaceable"} and d["drain_s"] > 0
    assert d["wait_p95_s"] >= c["wait_p95_s"]  # the lower bounds of the cut run become whole waits
    for k in ("busy_chip_h", "useful_chip_h", "healthy_chip_h", "fleet_chip_h", "utilisation"):
        assert d[k] == pytest.approx(c[k], rel=1e-9), k
    check_breakdown(d)
    assert d["jobs_completed"] > c["jobs_completed"]


def test_the_time_series_ends_at_the_horizon_so_the_last_day_has_its_goodput_bar():
    """A 3-day run has 3 per-day goodput bars (the last sample used to fall one step short of
    the horizon, so the report lost the last day's bar)."""
    from podsim.report.figures import daily_goodput

    r = cluster_run_result(simulate(config(), v4_jobs(), seed=2))
    ts = r.table("timeseries")
    assert ts["t_s"][-1] == 3 * 86400
    days, goodput = daily_goodput(ts)
    assert list(days) == [0.5, 1.5, 2.5] and np.all(np.isfinite(goodput))
