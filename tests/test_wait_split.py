"""The wait split (issue 27, item 6): each job's first wait is waiting for resource (fewer
healthy chips free than it needs) or for shape (enough free, not in a form its slice takes)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from podsim.cluster import ClusterConfig, simulate
from podsim.cluster.accounting import FreeChipSteps
from podsim.workload import Job, SyntheticSpec, generate_jobs

H = 3600.0


def _job(idx, chips, submit, start, status="completed"):
    return SimpleNamespace(idx=idx, chips=chips, job=SimpleNamespace(submit_s=submit), first_start_s=start, status=status)


def test_split_follows_the_free_chips_step_function():
    steps = FreeChipSteps()
    for t, free in ((0, 100), (10, 20), (30, 64), (50, 0)):
        steps.append(t, free)
    jobs = [_job(0, 64, 5, 40),                      # 5-10 enough (shape), 10-30 short, 30-40 enough
            _job(1, 16, 0, 60),                      # enough until 50, then nothing free
            _job(2, 128, 0, math.nan, "queued"),     # never enough: all resource, to the horizon
            _job(3, 8, 0, math.nan, "unplaceable")]  # never queued: left out
    out = steps.wait_split(jobs, horizon_s=70)
    assert out[0] == pytest.approx((5 + 10, 20))
    assert out[1] == pytest.approx((50, 10))
    assert out[2] == pytest.approx((0, 70))
    assert 3 not in out


def test_a_job_behind_a_big_one_waits_for_resource_only():
    """A holds 2048 of the pod's 4096 chips for 10 h; B needs 3072, so it waits for resource."""
    jobs = [Job("A", 0, (8, 16, 16), duration_s=10 * H), Job("B", 1, (12, 16, 16), duration_s=H)]
    r = {o.id: o for o in simulate(ClusterConfig(generation="tpu-v4", horizon_s=2 * 86400), jobs).jobs}
    assert r["B"].wait_shape_s == pytest.approx(0) and r["B"].wait_resource_s == pytest.approx(r["B"].wait_s)
    assert r["A"].wait_s == 0 == r["A"].wait_shape_s == r["A"].wait_resource_s


def test_split_adds_up_and_shape_waits_appear_on_a_static_pod():
    """On a busy statically wired pod, jobs wait for a contiguous box while enough chips are free:
    every started job's two parts add up to its wait, and some of the waiting is for shape."""
    jobs = generate_jobs(SyntheticSpec(jobs=150, arrival={"rate_per_h": 8}), 5)
    result = simulate(ClusterConfig(generation="tpu-v4", ocs=False, policy="fifo", horizon_s=20 * 86400), jobs)
    started = [o for o in result.jobs if not math.isnan(o.first_start_s)]
    for o in started:
        assert o.wait_shape_s >= 0 and o.wait_resource_s >= 0
        assert o.wait_shape_s + o.wait_resource_s == pytest.approx(o.wait_s, abs=1e-6)
    m = result.metrics
    assert m["wait_shape_mean_s"] > 0 and m["wait_resource_mean_s"] > 0
    assert m["wait_shape_mean_s"] + m["wait_resource_mean_s"] == pytest.approx(m["wait_mean_s"], rel=1e-9)
    assert 0 < m["wait_shape_share"] < 1
    done = [o.end_s - o.submit_s for o in result.jobs if o.status == "completed"]
    assert m["jct_p95_s"] == pytest.approx(float(np.percentile(done, 95)))
