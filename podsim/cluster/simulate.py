"""Job-level cluster simulation on SimPy: arrivals, a queue policy, placement, failures, restarts.

    result = simulate(ClusterConfig(generation="tpu-v4", pods=1, policy="backfill", horizon_s=30 * 86400),
                      jobs, failures=None, seed=1)
    result.metrics["goodput"], result.timeseries["busy_chips"]

Processes: one arrival process (jobs with the same submission time arrive together), one
failure process (each failure schedules its repair), one sampler (time series, progress), and
one process per job run: a timeout of the run's length, interrupted (simpy.Interrupt) when a
failure or a preemption stops the job. The bookkeeping of a stop is done where the stop is
decided, so every figure is settled before the next scheduling pass.

Scheduling passes: every event that can change what fits asks for a pass; passes asked at the
same instant are merged into one that runs after them (a zero-delay event queued last). The
policy (podsim.cluster.policies) decides which queued jobs to try, through the `Scheduler`
protocol that ClusterSim implements; where a job fits is the placement search's
(podsim.cluster.search: memos of what fits and what does not, dropped only when capacity is
lost or gained); an arrival-only pass tries only the new jobs.

Accounting (chip-seconds, per job): allocated = overhead (restart + OCS reconfiguration, and
the extra run time of a degraded slice) + useful (work kept, in healthy-slice time) + lost (work
since the last checkpoint when a failure or a preemption stops the job). A job still running at
the horizon keeps its work done so far as useful.
"""

from __future__ import annotations

import bisect
import math
import time
from collections.abc import Callable, Sequence

import numpy as np
import simpy

from podsim.cluster.config import ClusterConfig
from podsim.cluster.failures import FailureEvent, draw_fleet_failures
from podsim.cluster.links import IciLinks
from podsim.cluster.policies import get_policy
from podsim.cluster.result import ClusterResult, JobOutcome, summarise
from podsim.cluster.search import Fit, Reservation, SliceSearch
from podsim.cluster.steptime import CachedStepTime, RooflineStepTime, StepTimeModel
from podsim.errors import InternalError, PodsimError, first_duplicate
from podsim.placement import (
    PlacementSettings,
    PodState,
    SlicePlacement,
    SliceRequest,
    SolverParams,
    darken,
    largest_placeable,
    place,
    validate_placement,
)
from podsim.workload import Job

ProgressFn = Callable[[float, float], None]


class SimJob:
    """One job's mutable state in the simulation."""

    __slots__ = ("idx", "job", "request", "key", "chips", "seq", "status", "progress", "first_start_s",
                 "end_s", "alloc_s", "overhead_s", "work_s", "expected_end_s", "proc", "restart", "runs",
                 "interruptions", "preemptions", "alloc_chip_s", "useful_chip_s", "lost_chip_s",
                 "overhead_chip_s", "reason", "untwisted", "nominal_s", "slice", "qentry", "slow")

    def __init__(self, idx: int, job: Job, request: SliceRequest, untwisted: bool):
        self.idx, self.job, self.request, self.untwisted = idx, job, request, untwisted
        self.key = (request.shape, request.twisted, request.allow_degraded)
        self.chips = request.chips
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
        self.slow = 1.0  # run time factor of the current run (a degraded slice: config.degraded_slowdown)

    @property
    def rid(self) -> str:
        return self.request.id


class ClusterSim:
    """The simulation of one fleet; `run()` once. Use `simulate(...)`."""

    def __init__(self, config: ClusterConfig, jobs: Sequence[Job], failures: Sequence[FailureEvent] | None,
                 seed: int = 0, step_time: StepTimeModel | None = None, on_progress: ProgressFn | None = None,
                 audit: bool = False):
        self.config = config
        self.seed = int(seed)
        self.layout = config.layout()
        self.gen = self.layout.generation
        self.state = PodState(self.layout)
        self.settings = PlacementSettings()
        self.policy = get_policy(config.policy)
        self.step_time = CachedStepTime(step_time or RooflineStepTime())
        self.on_progress = on_progress
        self.audit = audit
        self.env = simpy.Environment()
        self.horizon_s = config.horizon_s
        self.checkpoint_s = config.checkpoint_interval_s
        self.reconfigure_s = config.reconfigure_delay_s
        self.links = IciLinks(self.layout)
        dup = first_duplicate(j.id for j in jobs)
        if dup is not None:
            raise PodsimError(f"job id {dup!r} is used twice; job ids must be unique")
        self.jobs = [self._make_job(i, j) for i, j in enumerate(sorted(jobs, key=lambda j: (j.submit_s, j.id)))]
        if failures is None:
            failures = draw_fleet_failures(self.layout, config.failures, self.horizon_s, self.seed) if config.failures.any else []
        self.failures = sorted(failures)
        self._check_failures()
        # queue, running set, capacity memo
        self._queue: list[tuple] = []
        self._seq = 0
        self.running: dict[int, SimJob] = {}
        self.failure_epoch = 0  # a running job stopped or a part failed: reservations are redone
        # pass requests
        self._pass_pending = False
        self._pending_full = False
        self._pending_new: list[SimJob] = []
        # integrals and counters
        self.busy = 0
        self.healthy = self.layout.n_chips
        self._last_t = 0.0
        self.busy_chip_s = 0.0
        self.healthy_chip_s = 0.0
        self.lost_chip_s = 0.0  # settled at each stop: work since the last checkpoint
        self.overhead_settled_chip_s = 0.0  # restart + reconfiguration of runs already ended
        self._down: dict[tuple[str, object], int] = {}
        self.counters = {"ocs_reconfigurations": 0, "failures_host": 0, "failures_ocs": 0, "failures_link": 0,
                         "job_interruptions": 0, "preemptions": 0, "passes": 0, "placement_calls": 0,
                         "placement_s": 0.0, "cpsat_calls": 0, "cpsat_wall_capped": 0, "audits": 0, "spare_remaps": 0,
                         "degraded_starts": 0}
        self.search = SliceSearch(self.layout, self.state, self.settings, config.placement, self.counters)
        self.series: dict[str, list] = {k: [] for k in ("t_s", "busy_chips", "healthy_chips", "queued_jobs",
                                                        "queued_chips", "running_jobs", "largest_placeable_chips",
                                                        "busy_chip_s", "lost_chip_s", "overhead_chip_s")}

    # Set-up ------------------------------------------------------------------------------
    def _make_job(self, idx: int, job: Job) -> SimJob:
        twisted = job.twisted
        untwisted = False
        if twisted and not self.layout.ocs and self.config.untwist_on_static:
            twisted, untwisted = False, True
        mode = self.config.degraded_placement
        degraded = self.layout.ocs and (mode == "all" or (mode == "requested" and job.allow_degraded))
        req = SliceRequest(str(idx), job.shape, twisted, job.priority, job.submit_s, degraded)
        sj = SimJob(idx, job, req, untwisted)
        if job.duration_s is not None:
            sj.nominal_s = float(job.duration_s)
            if not (math.isfinite(sj.nominal_s) and sj.nominal_s >= 0):
                raise PodsimError(f"job {job.id!r}: duration_s {job.duration_s} must be a finite number >= 0")
        return sj

    def _check_failures(self) -> None:
        lay = self.layout
        limits = {"host": (lay.n_hosts, "hosts"), "ocs": (lay.n_ocs, "OCS units"), "link": (self.links.n_ports, "links")}
        for ev in self.failures:
            n, what = limits[ev.component]
            if ev.component == "ocs" and n == 0:
                raise PodsimError(f"failure at {ev.time_s:g} s: OCS {ev.id}, but this {lay.generation.id} fleet has no OCS")
            if not 0 <= ev.id < n:
                raise PodsimError(f"failure at {ev.time_s:g} s: {ev.component} {ev.id} does not exist; {what} are 0..{n - 1}")
            if ev.component == "link":
                self.links.parts(ev.id)  # a link on a length-1 axis is an error too

    # Small helpers -------------------------------------------------------------------------
    @property
    def now(self) -> float:
        return self.env.now

    @property
    def free_chips(self) -> int:
        return self.healthy - self.busy

    def work_s(self, job: SimJob, slc) -> float:
        """Run time of the whole job on slice `slc` (a Slice or a Fit): its duration, or steps x
        step time there."""
        j = job.job
        slow = self._slowdown(job, slc)
        if j.duration_s is not None:
            return float(j.duration_s) * slow
        return slow * j.steps * self.step_time.step_time_s(j.model, self.gen.id, tuple(slc.shape), slc.twisted)

    def _slowdown(self, job: SimJob, slc) -> float:
        return self.config.degraded_slowdown if job.request.allow_degraded and self._degraded(slc) else 1.0

    def _degraded(self, slc) -> bool:
        """Whether a cube-level slice (a Slice or a Fit) has circuits left dark by a down OCS unit."""
        if not slc.circuits:
            return False
        if isinstance(slc, Fit):
            return bool(self.state.ocs_down_in_pod(slc.assignment.pod))
        return len(slc.circuits) < len(slc.cubes) * self.layout.ocs_per_pod

    def overhead_of(self, job: SimJob, slc) -> float:
        return (self.config.restart_overhead_s if job.restart else 0.0) + (self.reconfigure_s if slc.circuits else 0.0)

    def run_length(self, job: SimJob, slc) -> float:
        return self.overhead_of(job, slc) + (1.0 - job.progress) * self.work_s(job, slc)

    def _advance(self) -> None:
        t = self.env.now
        dt = t - self._last_t
        if dt > 0:
            self.busy_chip_s += self.busy * dt
            self.healthy_chip_s += self.healthy * dt
            self._last_t = t

    # Queue ---------------------------------------------------------------------------------
    def queue_entry(self, job: SimJob) -> tuple:
        return (*self.policy.sort_key(job), job.seq, job.idx)

    def _enqueue(self, job: SimJob) -> None:
        job.status = "queued"
        job.qentry = self.queue_entry(job)
        bisect.insort(self._queue, job.qentry)

    def _dequeue(self, job: SimJob) -> None:
        i = bisect.bisect_left(self._queue, job.qentry)
        if i >= len(self._queue) or self._queue[i] != job.qentry:
            raise InternalError(f"job {job.job.id!r} is not in the queue")
        del self._queue[i]
        job.qentry = None

    def head(self) -> SimJob | None:
        return self.jobs[self._queue[0][-1]] if self._queue else None

    def queued(self, limit: int | None = None) -> list[SimJob]:
        """Queued jobs in policy order (the first `limit`)."""
        entries = self._queue if limit is None else self._queue[:limit]
        return [self.jobs[e[-1]] for e in entries]

    # Placement (the search's answers on the live state) -----------------------------------
    def never_reason(self, job: SimJob) -> str:
        """Why the job cannot run even on an empty, healthy fleet ('' if it can)."""
        return self.search.never_reason(job)

    def try_place(self, job: SimJob) -> Fit | None:
        """Where the job would go now (greedy), or None."""
        return self.search.try_place(job, self.free_chips)

    def reservation(self, head: SimJob) -> Reservation:
        """EASY: when and where the blocked head will fit if running jobs end when expected."""
        return self.search.reservation(head, self.running.values(), self.free_chips, self.failure_epoch)

    def place_avoiding(self, job: SimJob, res: Reservation) -> Fit | None:
        """Where `job` fits now keeping off the head's reserved chips, or None."""
        return self.search.place_avoiding(job, res)

    def preempt_for(self, job: SimJob) -> bool:
        """Stop lower-priority jobs (least work at risk first) so `job` fits; start it. False if
        even stopping all of them would not make room."""
        victims = [r for r in self.running.values() if r.job.priority < job.job.priority]
        if not victims:
            return False
        mkey = (job.key, job.job.priority)
        if mkey in self.search.preempt_failed or self.free_chips + sum(v.chips for v in victims) < job.chips:
            return False
        now = self.now
        victims.sort(key=lambda v: (v.job.priority, v.chips * self._at_risk_s(v, now), v.idx))
        found = self.search.first_fit_prefix(job, victims, self.free_chips)
        if found is None:
            self.search.preempt_failed.add(mkey)
            return False
        k, p = found
        chips = np.zeros(self.layout.n_chips, bool)
        chips[p.chips] = True
        for v in victims[:k]:
            if chips[np.asarray(v.slice.chips)].any():
                v.preemptions += 1
                self.counters["preemptions"] += 1
                self.stop(v, "preempted")
        self.start(job, p)
        return True

    def _at_risk_s(self, job: SimJob, now: float) -> float:
        """Run time since the job's last checkpoint (what stopping it now would lose)."""
        c = max(0.0, now - job.alloc_s - job.overhead_s)
        return c - math.floor(c / self.checkpoint_s) * self.checkpoint_s

    def batch_admit(self, window: list[SimJob]) -> None:
        """CP-SAT batch admission over `window`; start every job it places."""
        reqs = [j.request for j in window]
        params = SolverParams(time_limit_s=self.config.decision_time_limit_s, num_workers=self.config.cpsat_workers,
                              random_seed=self.seed, deterministic=True)
        t0 = time.perf_counter()
        result = place(self.state, reqs, solver="cpsat", policy=self.config.placement, params=params,
                       settings=self.settings, now_s=self.now)
        self.counters["cpsat_calls"] += 1
        self.counters["cpsat_wall_capped"] += int(result.stats.wall_capped)  # then not reproducible
        self.counters["placement_s"] += time.perf_counter() - t0
        by_id = {j.rid: j for j in window}
        for p in result.placed:
            self.start(by_id[p.request.id], p)
        for j in window:
            if j.status == "queued":
                self.search.failed_keys.add(j.key)

    # Job life cycle ------------------------------------------------------------------------
    def start(self, job: SimJob, where: Fit | SlicePlacement) -> None:
        """Give the job its slice and start its run (the state checks every chip and port)."""
        slc = darken(self.state, where.slice)
        if self.audit:
            validate_placement(self.state, [SlicePlacement(job.request, slc)])
        self._advance()
        self.state.allocate(job.rid, slc)
        self.search.capacity_lost(new_victim=True)
        self._dequeue(job)
        job.slice = slc
        job.status = "running"
        job.runs += 1
        now = self.now
        if math.isnan(job.first_start_s):
            job.first_start_s = now
        job.alloc_s = now
        job.overhead_s = self.overhead_of(job, slc)
        job.work_s = self.work_s(job, slc)
        job.slow = self._slowdown(job, slc)
        length = job.overhead_s + (1.0 - job.progress) * job.work_s
        job.expected_end_s = now + length
        if slc.circuits:
            self.counters["ocs_reconfigurations"] += 1
            self.counters["degraded_starts"] += self._degraded(slc)
        self.busy += job.chips
        self.running[job.idx] = job
        job.proc = self.env.process(self._run(job, length))

    def _run(self, job: SimJob, length: float):
        try:
            yield self.env.timeout(length)
        except simpy.Interrupt:
            return
        self._finish(job)

    def _settle(self, job: SimJob, keep_all: bool) -> None:
        """Account the current run up to now and give back its slice."""
        self._advance()
        a = self.now - job.alloc_s
        o = min(a, job.overhead_s)
        c = a - o
        saved = c if keep_all else math.floor(c / self.checkpoint_s) * self.checkpoint_s
        if job.work_s > 0:
            job.progress = min(1.0, job.progress + saved / job.work_s)
        lost = c - saved
        slow_s = saved * (1.0 - 1.0 / job.slow)  # a degraded slice's extra run time: held, not useful
        o += slow_s
        saved -= slow_s
        chips = job.chips
        job.alloc_chip_s += a * chips
        job.overhead_chip_s += o * chips
        job.useful_chip_s += saved * chips
        job.lost_chip_s += lost * chips
        self.lost_chip_s += lost * chips
        self.overhead_settled_chip_s += o * chips
        self.state.release(job.rid)
        self.busy -= chips
        del self.running[job.idx]
        job.slice = None
        job.proc = None
        self.search.capacity_gained()

    def _finish(self, job: SimJob) -> None:
        self._settle(job, keep_all=True)
        job.progress = 1.0
        job.status = "completed"
        job.end_s = self.now
        self.request_pass(full=True)

    def stop(self, job: SimJob, why: str) -> None:
        """Stop a running job (failure or preemption): it keeps its checkpointed work and queues again."""
        proc = job.proc
        self._settle(job, keep_all=False)
        job.interruptions += why == "failure"
        job.restart = True
        self.failure_epoch += 1
        self._enqueue(job)
        proc.interrupt(why)
        self.request_pass(full=True)

    # Scheduling passes ---------------------------------------------------------------------
    def request_pass(self, full: bool, new: Sequence[SimJob] = ()) -> None:
        self._pending_full |= full
        self._pending_new.extend(new)
        if not self._pass_pending:
            self._pass_pending = True
            self.env.timeout(0).callbacks.append(self._pass)

    def _pass(self, _event) -> None:
        self._pass_pending = False
        full, new = self._pending_full, self._pending_new
        self._pending_full, self._pending_new = False, []
        self.counters["passes"] += 1
        self.policy.schedule(self, full, new)
        if self.audit:
            self._audit()

    def _audit(self) -> None:
        """Check the bookkeeping against the pod state: no chip in two jobs, none broken."""
        self.counters["audits"] += 1
        st = self.state
        held = st.chip_job >= 0
        if int(held.sum()) != self.busy or sum(j.chips for j in self.running.values()) != self.busy:
            raise InternalError(f"busy chips {self.busy} != chips held {int(held.sum())}")
        if (held & st.chip_failed).any():
            raise InternalError("a failed chip is held by a job")
        seen = np.zeros(self.layout.n_chips, np.int32)
        for j in self.running.values():
            seen[np.asarray(j.slice.chips)] += 1
        if (seen > 1).any() or not np.array_equal(seen > 0, held):
            raise InternalError("a chip is in two jobs, or held by no running job")
        if self.healthy != st.n_healthy_chips:
            raise InternalError(f"healthy chips {self.healthy} != {st.n_healthy_chips}")
        queued = {e[-1] for e in self._queue}
        if queued != {j.idx for j in self.jobs if j.status == "queued"}:
            raise InternalError("the queue and the job states disagree")

    # Processes -----------------------------------------------------------------------------
    def _arrivals(self):
        jobs = self.jobs
        i = 0
        while i < len(jobs) and jobs[i].job.submit_s < self.horizon_s:
            t = jobs[i].job.submit_s
            if t > self.now:
                yield self.env.timeout(t - self.now)
            batch = []
            while i < len(jobs) and jobs[i].job.submit_s == t:
                job = jobs[i]
                i += 1
                if job.job.steps is not None:
                    job.nominal_s = job.job.steps * self.step_time.step_time_s(job.job.model, self.gen.id, job.request.shape, job.request.twisted)
                job.seq = self._seq
                self._seq += 1
                reason = self.never_reason(job)
                if reason:
                    job.status, job.reason = "unplaceable", reason
                    continue
                self._enqueue(job)
                batch.append(job)
            if batch:
                self.request_pass(full=False, new=batch)

    def _parts(self, ev: FailureEvent) -> list[tuple[str, object]]:
        if ev.component == "host":
            return [("hosts", ev.id)]
        if ev.component == "ocs":
            return [("ocs", ev.id)]
        parts = self.links.parts(ev.id)  # an optical link fails the port its fiber is on now (maybe a spare)
        ports = [(int(o), self.state.physical_port(int(o), int(p))) for o, p in parts["ocs_ports"]]
        return [("chips", c) for c in parts["chips"]] + [("ocs_ports", p) for p in ports]

    def _failures(self):
        for ev in self.failures:
            if ev.time_s >= self.horizon_s:
                break
            if ev.time_s > self.now:
                yield self.env.timeout(ev.time_s - self.now)
            self.counters[f"failures_{ev.component}"] += 1
            parts = self._parts(ev)
            newly: dict[str, list] = {"hosts": [], "ocs": [], "ocs_ports": [], "chips": []}
            for part in parts:
                n = self._down.get(part, 0)
                self._down[part] = n + 1
                if n == 0:
                    newly[part[0]].append(part[1])
            if any(newly.values()):
                self._advance()
                hit = self.state.fail(**newly)
                self.search.capacity_lost()
                self.healthy = self.state.n_healthy_chips
                self.failure_epoch += 1
                for rid in hit:
                    job = self.jobs[int(rid)]
                    self.counters["job_interruptions"] += 1
                    self.stop(job, "failure")
                self._remap_spares()
            self.env.timeout(ev.repair_s).callbacks.append(lambda _e, parts=parts: self._repair(parts))

    def _repair(self, parts: list[tuple[str, object]]) -> None:
        fixed: dict[str, list] = {"hosts": [], "ocs": [], "ocs_ports": [], "chips": []}
        for part in parts:
            n = self._down[part] - 1
            self._down[part] = n
            if n == 0:
                fixed[part[0]].append(part[1])
        if any(fixed.values()):
            self._advance()
            self.state.repair(**fixed)
            self.healthy = self.state.n_healthy_chips
            self.failure_epoch += 1
            self.search.capacity_gained()
            self._remap_spares()
            self.request_pass(full=True)

    def _remap_spares(self) -> None:
        """With `config.spare_ports`: move fibers off failed OCS ports onto spares (cubes come back)."""
        if self.config.spare_ports:
            moves = self.state.remap_spares()
            if moves:
                self.counters["spare_remaps"] += len(moves)
                self.search.capacity_gained()
                self.request_pass(full=True)

    def _sampler(self):
        step = self.config.sample_step_s
        while True:
            self._sample()
            if self.on_progress is not None:
                self.on_progress(self.now, self.horizon_s)
            if self.now + step >= self.horizon_s:
                return
            yield self.env.timeout(step)

    def _sample(self) -> None:
        s = self.series
        s["t_s"].append(self.now)
        s["busy_chips"].append(self.busy)
        s["healthy_chips"].append(self.healthy)
        s["queued_jobs"].append(len(self._queue))
        s["queued_chips"].append(sum(self.jobs[e[-1]].chips for e in self._queue))
        s["running_jobs"].append(len(self.running))
        if self.config.fragmentation:
            s["largest_placeable_chips"].append(largest_placeable(self.state, self.settings)["chips"])
        # cumulative chip-seconds so far, for goodput over time: busy (= allocated), lost at stops,
        # overhead (restart + reconfiguration) of ended runs plus the part of running ones spent so far
        self._advance()
        now = self.now
        s["busy_chip_s"].append(self.busy_chip_s)
        s["lost_chip_s"].append(self.lost_chip_s)
        s["overhead_chip_s"].append(self.overhead_settled_chip_s + sum(
            min(now - j.alloc_s, j.overhead_s) * j.chips for j in self.running.values()))

    # Run -----------------------------------------------------------------------------------
    def run(self) -> ClusterResult:
        t0 = time.perf_counter()
        self.env.process(self._failures())
        self.env.process(self._arrivals())
        self.env.process(self._sampler())
        self.env.run(until=self.horizon_s)
        self._advance()
        for job in list(self.running.values()):
            self._settle(job, keep_all=True)
            job.status = "running"
        if self.on_progress is not None:
            self.on_progress(self.horizon_s, self.horizon_s)
        wall = time.perf_counter() - t0
        return self._result(wall)

    def _result(self, wall_s: float) -> ClusterResult:
        outcomes = []
        for j in self.jobs:
            status = j.status if j.status != "pending" else "not_arrived"
            outcomes.append(JobOutcome(
                id=j.job.id, submit_s=j.job.submit_s, shape=j.request.shape, twisted=j.job.twisted,
                untwisted=j.untwisted, chips=j.chips, priority=j.job.priority, status=status,
                first_start_s=j.first_start_s, end_s=j.end_s, nominal_s=j.nominal_s, runs=j.runs,
                interruptions=j.interruptions, preemptions=j.preemptions, allocated_chip_s=j.alloc_chip_s,
                useful_chip_s=j.useful_chip_s, lost_chip_s=j.lost_chip_s, overhead_chip_s=j.overhead_chip_s,
                progress=j.progress, reason=j.reason))
        series = {k: np.asarray(v, float) for k, v in self.series.items() if v}
        counters = dict(self.counters)
        counters["step_time_evaluations"] = self.step_time.calls
        return summarise(self.config, self.layout, outcomes, series, counters, self.busy_chip_s,
                         self.healthy_chip_s, wall_s, self.seed)


def simulate(config: ClusterConfig, jobs: Sequence[Job], failures: Sequence[FailureEvent] | None = None,
             seed: int = 0, on_progress: ProgressFn | None = None, step_time: StepTimeModel | None = None,
             audit: bool = False) -> ClusterResult:
    """Run the cluster simulation; no I/O.

    failures: explicit failure events (e.g. from a trace); None draws them from
      `config.failures` with `seed` (no processes configured: no failures).
    on_progress(sim_time_s, horizon_s): called at every time-series sample.
    step_time: how long a step of a job's model takes on a slice (default: the roofline model).
    audit: check the state's bookkeeping after every scheduling pass and validate every
      placement (slow; for tests).
    """
    return ClusterSim(config, jobs, failures, seed, step_time, on_progress, audit).run()
