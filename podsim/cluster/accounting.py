"""Per-job records of the cluster simulation and their chip-second accounting.

A run of a job on a slice allocates its chips from start to stop; the chip-seconds split into
overhead (restart + OCS reconfiguration, and the extra run time of a degraded slice), useful
(work kept, in healthy-slice time) and lost (work since the last checkpoint when a failure or a
preemption stops the job). `settle_run` does that split when a run ends; a job still running
at the horizon keeps its work done so far as useful (`keep_all`).

The split is also a time line, so it can be clipped to a measurement window (warm-up excluded):
a run started at a0 spends [a0, a0 + reconfiguration) waiting for its OCS circuits, then its
restart overhead, then computes; of the computing stretch the part up to the last checkpoint
is kept (useful, and on a degraded slice the extra time it took, spread evenly over it) and the
rest is lost. `run_split` returns each part's chip-seconds inside [t0, t1].
"""

from __future__ import annotations

import math

import numpy as np

from podsim.cluster.config import ClusterConfig
from podsim.cluster.remedies import allows_degraded
from podsim.cluster.result import JobOutcome
from podsim.errors import PodsimError
from podsim.placement import SliceRequest
from podsim.topology import PodLayout
from podsim.workload import Job


class SimJob:
    """One job's mutable state in the simulation."""

    __slots__ = ("idx", "job", "request", "key", "chips", "seq", "status", "progress", "first_start_s",
                 "end_s", "alloc_s", "overhead_s", "work_s", "expected_end_s", "proc", "restart", "runs",
                 "interruptions", "preemptions", "alloc_chip_s", "useful_chip_s", "lost_chip_s",
                 "overhead_chip_s", "reason", "untwisted", "nominal_s", "slice", "qentry", "slow", "reconfigure_s",
                 "form")

    def __init__(self, idx: int, job: Job, request: SliceRequest, untwisted: bool):
        self.idx, self.job, self.request, self.untwisted = idx, job, request, untwisted
        self.key = (request.shape, request.twisted, request.allow_degraded, request.slices, request.span_sites)
        self.chips = request.total_chips
        self.status = "pending"
        self.progress = 0.0
        self.first_start_s = self.end_s = math.nan
        self.alloc_s = self.overhead_s = self.work_s = self.expected_end_s = math.nan
        self.proc = None
        self.restart = False
        self.runs = self.interruptions = self.preemptions = 0
        self.alloc_chip_s = self.useful_chip_s = self.lost_chip_s = self.overhead_chip_s = 0.0
        self.reason = ""
        self.nominal_s = math.nan
        self.slice = None
        self.qentry = None
        self.slow = 1.0  # run time factor of the current run (degraded slice, non-native placement)
        self.reconfigure_s = 0.0  # the part of the current run's overhead spent waiting for OCS circuits
        self.form = "native"  # how the current (last) run's slice realises the asked topology

    @property
    def rid(self) -> str:
        return self.request.id


def make_sim_job(idx: int, job: Job, config: ClusterConfig, layout: PodLayout) -> SimJob:
    """The simulation's record of a job: its slice request (untwisted on a static fleet with
    `untwist_on_static`; degraded cube slices allowed per `degraded_placement`)."""
    twisted = job.twisted
    untwisted = False
    if twisted and not layout.ocs and config.untwist_on_static:
        twisted, untwisted = False, True
    degraded = allows_degraded(config, layout, job)
    req = SliceRequest(str(idx), job.shape, twisted, job.priority, job.submit_s, degraded, job.slices, job.span_sites)
    sj = SimJob(idx, job, req, untwisted)
    if job.duration_s is not None:
        sj.nominal_s = float(job.duration_s)
        if not (math.isfinite(sj.nominal_s) and sj.nominal_s >= 0):
            raise PodsimError(f"job {job.id!r}: duration_s {job.duration_s} must be a finite number >= 0")
    return sj


SPLIT = ("reconfiguration", "restart", "useful", "degraded", "lost")  # a run's parts, in time order


def _clip(a: float, b: float, t0: float, t1: float) -> float:
    return max(0.0, min(b, t1) - max(a, t0))


def settle_run(job: SimJob, now: float, checkpoint_s: float, keep_all: bool,
               window: tuple[float, float] = (0.0, math.inf)) -> dict[str, float]:
    """Account the job's current run up to `now` on the job (progress and chip-seconds); returns
    the run's chip-seconds per part of SPLIT inside `window` (the fleet's measured window) for
    the fleet totals. Without `keep_all` only the work up to the last checkpoint is kept."""
    a = now - job.alloc_s
    o = min(a, job.overhead_s)
    c = a - o
    saved = c if keep_all else math.floor(c / checkpoint_s) * checkpoint_s
    if job.work_s > 0:
        job.progress = min(1.0, job.progress + saved / job.work_s)
    lost = c - saved
    slow_frac = 1.0 - 1.0 / job.slow  # a degraded slice's extra run time: held, not useful
    chips = job.chips
    job.alloc_chip_s += a * chips
    job.overhead_chip_s += (o + saved * slow_frac) * chips
    job.useful_chip_s += saved * (1.0 - slow_frac) * chips
    job.lost_chip_s += lost * chips
    t0, t1 = window
    r = min(o, job.reconfigure_s)
    start, compute = job.alloc_s, job.alloc_s + o
    kept = _clip(compute, compute + saved, t0, t1)
    return {"reconfiguration": _clip(start, start + r, t0, t1) * chips,
            "restart": _clip(start + r, compute, t0, t1) * chips,
            "useful": kept * (1.0 - slow_frac) * chips, "degraded": kept * slow_frac * chips,
            "lost": _clip(compute + saved, now, t0, t1) * chips}


def at_risk_s(job: SimJob, now: float, checkpoint_s: float) -> float:
    """Run time since the job's last checkpoint (what stopping it now would lose)."""
    c = max(0.0, now - job.alloc_s - job.overhead_s)
    return c - math.floor(c / checkpoint_s) * checkpoint_s


def running_overhead_chip_s(running, now: float) -> float:
    """Overhead chip-seconds spent so far by the runs in progress."""
    return sum(min(now - j.alloc_s, j.overhead_s) * j.chips for j in running)


class FreeChipSteps:
    """The fleet's free healthy chips as a step function of time (one step per change), and each
    job's wait split by it: waiting for *resource* while fewer chips are free than the job needs,
    for *shape* while enough are free but not in a form its slice can take (fragmentation, the
    wrong cubes, a reserved head), as the RFold peer reports queueing delay (arXiv 2510.03891)."""

    def __init__(self):
        self.t: list[float] = []
        self.free: list[float] = []

    def append(self, t_s: float, free_chips: int) -> None:
        """Free chips from `t_s` until the next step (steps come in time order)."""
        self.t.append(t_s)
        self.free.append(free_chips)

    def wait_split(self, jobs, horizon_s: float) -> dict[int, tuple[float, float]]:
        """Job index -> (waiting for shape, waiting for resource) seconds over its first wait:
        submission to first start, or to the horizon for a job queued then (jobs never queued
        are left out). The two add up to the wait."""
        t = np.asarray(self.t + [horizon_s], float)
        free = np.asarray(self.free, float)
        waiting = [(j.idx, j.chips, j.job.submit_s, j.first_start_s if not math.isnan(j.first_start_s) else horizon_s)
                   for j in jobs if not math.isnan(j.first_start_s) or j.status == "queued"]
        if not waiting or not len(free):
            return {i: (0.0, max(0.0, end - start)) for i, _, start, end in waiting}
        seg = np.diff(t)
        out: dict[int, tuple[float, float]] = {}
        for chips in sorted({c for _, c, _, _ in waiting}):
            ok = free >= chips
            cum = np.concatenate([[0.0], np.cumsum(seg * ok)])

            def enough(x: float, ok=ok, cum=cum) -> float:  # seconds in [0, x] with enough chips free
                k = min(max(int(np.searchsorted(t, x, side="right")) - 1, 0), len(seg) - 1)
                return float(cum[k] + ok[k] * min(max(x - t[k], 0.0), seg[k]))

            for i, c, start, end in waiting:
                if c == chips:
                    shape = max(0.0, enough(end) - enough(start))
                    out[i] = (shape, max(0.0, (end - start) - shape))
        return out


def job_outcome(j: SimJob, wait_shape_s: float = math.nan, wait_resource_s: float = math.nan) -> JobOutcome:
    """The job's record at the end of the run (with its wait split, `FreeChipSteps.wait_split`)."""
    status = j.status if j.status != "pending" else "not_arrived"
    return JobOutcome(
        id=j.job.id, submit_s=j.job.submit_s, shape=j.request.shape, twisted=j.job.twisted,
        untwisted=j.untwisted, chips=j.chips, priority=j.job.priority, status=status,
        first_start_s=j.first_start_s, end_s=j.end_s, nominal_s=j.nominal_s, runs=j.runs,
        interruptions=j.interruptions, preemptions=j.preemptions, allocated_chip_s=j.alloc_chip_s,
        useful_chip_s=j.useful_chip_s, lost_chip_s=j.lost_chip_s, overhead_chip_s=j.overhead_chip_s,
        progress=j.progress, reason=j.reason, wait_shape_s=wait_shape_s, wait_resource_s=wait_resource_s,
        placement=j.form if j.runs else "", slowdown=j.slow if j.runs else math.nan)
