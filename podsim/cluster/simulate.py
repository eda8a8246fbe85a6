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

Accounting (chip-seconds, per job: allocated = overhead + useful + lost) is
podsim.cluster.accounting's; failure events as parts down, podsim.cluster.outages'; the remedies
for a down OCS unit (degraded slices, spare ports), podsim.cluster.remedies'.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

import numpy as np
import simpy

import podsim.cluster.gang as gang
import podsim.cluster.observe as observe
from podsim.cluster.accounting import (
    FreeChipSteps,
    SimJob,
    at_risk_s,
    job_outcome,
    make_sim_job,
    settle_run,
)
from podsim.cluster.config import ClusterConfig
from podsim.cluster.failures import FailureEvent, draw_fleet_failures
from podsim.cluster.fits import Fit, Reservation
from podsim.cluster.jobqueue import JobQueue
from podsim.cluster.links import IciLinks
from podsim.cluster.outages import DownParts, check_failures, event_parts
from podsim.cluster.policies import get_policy
from podsim.cluster.remedies import is_degraded, remap_spare_ports
from podsim.cluster.result import ClusterResult, summarise
from podsim.cluster.runtime import RunTimes, prices_placement
from podsim.cluster.search import SliceSearch
from podsim.errors import PodsimError, first_duplicate
from podsim.placement import PodState, SolverParams, place, validate_placement
from podsim.placement.problem import PlacementSettings
from podsim.placement.result import SlicePlacement
from podsim.study import CachedStepTime, RooflineStepTime, StepTimeModel
from podsim.workload import Job
from podsim.workload.replay import count_inferred

ProgressFn = Callable[[float, float], None]


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
        self.settings = PlacementSettings(sites=config.sites, fold=config.fold)
        self.policy = get_policy(config.policy)
        self.step_time = step_time if isinstance(step_time, CachedStepTime) else CachedStepTime(step_time or RooflineStepTime())
        self.on_progress = on_progress
        self.audit = audit
        self.env = simpy.Environment()
        self.horizon_s = config.horizon_s
        # the measured window (steady-state metrics) and, with drain, how long the jobs of the
        # window may run on after the horizon (no arrivals then; failures go on)
        self.window = (config.warmup_s, config.horizon_s)
        self.end_s = config.horizon_s + (config.drain_limit if config.drain else 0.0)
        self.checkpoint_s = config.checkpoint_interval_s
        self.reconfigure_s = config.reconfigure_delay_s
        self.links = IciLinks(self.layout)
        dup = first_duplicate(j.id for j in jobs)
        if dup is not None:
            raise PodsimError(f"job id {dup!r} is used twice; job ids must be unique")
        self.jobs = [make_sim_job(i, j, config, self.layout) for i, j in enumerate(sorted(jobs, key=lambda j: (j.submit_s, j.id)))]
        if failures is None:
            failures = draw_fleet_failures(self.layout, config.failures, self.end_s, self.seed) if config.failures.any else []
        self.failures = sorted(failures)
        check_failures(self.failures, self.layout, self.links)
        # queue, running set
        self.queue = JobQueue(self.jobs)
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
        self.free_steps = FreeChipSteps()  # free healthy chips over time, for the wait split
        self.lost_chip_s = 0.0  # settled at each stop: work since the last checkpoint
        self.overhead_settled_chip_s = 0.0  # restart + reconfiguration of runs already ended
        # chip-seconds inside the measured window, each in one bucket (summarise: the breakdown)
        self.acct = {k: 0.0 for k in ("busy", "healthy", "idle_queued", "reconfiguration", "restart", "useful",
                                      "degraded", "lost_failure", "lost_preemption")}
        self._down = DownParts()
        self.counters = {"sim_events": 0, "ocs_reconfigurations": 0, "failures_host": 0, "failures_ocs": 0, "failures_link": 0,
                         "job_interruptions": 0, "preemptions": 0, "passes": 0, "placement_calls": 0,
                         "placement_s": 0.0, "cpsat_calls": 0, "cpsat_wall_capped": 0, "audits": 0, "spare_remaps": 0,
                         "degraded_starts": 0, "runs_fold": 0, "runs_split": 0, "runs_scatter": 0, "runs_slowdown_not_charged": 0,
                         "slowdown_charged_sum": 0.0, "slowdown_fold_sum": 0.0, "slowdown_split_sum": 0.0,
                         "slowdown_scatter_sum": 0.0, "slowdown_charged_max": math.nan}
        self.search = SliceSearch(self.layout, self.state, self.settings, config.placement, self.counters)
        self.times = RunTimes(config, self.layout, self.state, self.settings, self.step_time)
        reshaping = config.fold == "allowed" or config.placement == "hilbert"
        if (reshaping and prices_placement(self.step_time)
                and config.slowdown_model is None and any(j.job.model is None for j in self.jobs)):
            raise PodsimError("fold: allowed or hilbert placement with the engine's step time prices each non-native slice "
                              "with a model's step; jobs given in time need slowdown_model (a preset, e.g. gpt3-175b)")
        if config.placement == "hilbert" and any(j.job.slices > 1 for j in self.jobs):
            raise PodsimError("placement hilbert allocates single-slice jobs; the stream has multislice jobs")
        self.series: dict[str, list] = {k: [] for k in observe.SERIES_KEYS}

    # Small helpers -------------------------------------------------------------------------
    @property
    def now(self) -> float:
        return self.env.now

    @property
    def free_chips(self) -> int:
        return self.healthy - self.busy

    def work_s(self, job: SimJob, slc, slow: float | None = None) -> float:
        """Run time of the whole job on `slc` (podsim.cluster.runtime)."""
        return self.times.work_s(job, slc, slow)

    def overhead_of(self, job: SimJob, slc) -> float:
        return (self.config.restart_overhead_s if job.restart else 0.0) + (self.reconfigure_s if slc.circuits else 0.0)

    def run_length(self, job: SimJob, slc) -> float:
        return self.overhead_of(job, slc) + (1.0 - job.progress) * self.work_s(job, slc)

    def advance(self) -> None:
        t = self.env.now
        dt = t - self._last_t
        if dt > 0:
            self.busy_chip_s += self.busy * dt
            self.healthy_chip_s += self.healthy * dt
            t0, t1 = self.window
            w = max(0.0, min(t, t1) - max(self._last_t, t0))
            if w > 0:
                self.acct["busy"] += self.busy * w
                self.acct["healthy"] += self.healthy * w
                if self.queue:  # healthy chips free while a job waited: fragmentation, queue order, reservations
                    self.acct["idle_queued"] += (self.healthy - self.busy) * w
            self.free_steps.append(self._last_t, self.healthy - self.busy)
            self._last_t = t

    # Queue (podsim.cluster.jobqueue) ---------------------------------------------------------
    def queue_entry(self, job: SimJob) -> tuple:
        return (*self.policy.sort_key(job), job.seq, job.idx)

    def _enqueue(self, job: SimJob) -> None:
        self.advance()  # the idle-while-queued integral changes with the queue
        job.status = "queued"
        self.queue.push(job, self.queue_entry(job))

    def head(self) -> SimJob | None:
        return self.queue.head()

    def queued(self, limit: int | None = None) -> list[SimJob]:
        """Queued jobs in policy order (the first `limit`)."""
        return self.queue.first(limit)

    def queued_by_kind(self, limit: int) -> list[Sequence[SimJob]]:
        """The first `limit` queued jobs split by kind, each kind's in policy order."""
        return self.queue.by_kind(limit)

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
        victims.sort(key=lambda v: (v.job.priority, v.chips * at_risk_s(v, now, self.checkpoint_s), v.idx))
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

    def batch_admit(self, window: list[SimJob]) -> None:
        """CP-SAT batch admission over `window`; start every job it places."""
        reqs = [j.request for j in window]
        params = SolverParams(time_limit=self.config.decision_time_limit, num_workers=self.config.cpsat_workers,
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
        slc = gang.slice_of(self.state, where)
        self.counters["sim_events"] += 1
        if self.audit:
            validate_placement(self.state, [gang.placement_of(job.request, slc)], sites=self.settings.sites)
        self.advance()
        gang.allocate(self.state, job.rid, slc)
        self.search.capacity_lost(new_victim=True)
        self.queue.remove(job)
        job.slice = slc
        self.search.job_started(job)
        job.status = "running"
        job.runs += 1
        now = self.now
        if math.isnan(job.first_start_s):
            job.first_start_s = now
        job.alloc_s = now
        degraded = is_degraded(self.state, self.layout, slc)  # once per start: the slowdown and the counter
        job.overhead_s = self.overhead_of(job, slc)
        job.reconfigure_s = self.reconfigure_s if slc.circuits else 0.0
        job.slow = self.times.slowdown(job, slc, degraded)
        job.form = getattr(slc, "form", "native")
        if job.form != "native":
            self.counters[f"runs_{job.form}"] += 1
            self.counters["runs_slowdown_not_charged"] += not self.times.charged(job, slc)
            self.counters["slowdown_charged_sum"] += job.slow
            self.counters[f"slowdown_{job.form}_sum"] += job.slow
            self.counters["slowdown_charged_max"] = max(job.slow, self.counters["slowdown_charged_max"])  # NaN: none yet
        job.work_s = self.work_s(job, slc, job.slow)
        length = job.overhead_s + (1.0 - job.progress) * job.work_s
        job.expected_end_s = now + length
        if slc.circuits:
            self.counters["ocs_reconfigurations"] += 1
            self.counters["degraded_starts"] += degraded
        self.busy += job.chips
        self.running[job.idx] = job
        job.proc = self.env.process(self._run(job, length))

    def _run(self, job: SimJob, length: float):
        try:
            yield self.env.timeout(length)
        except simpy.Interrupt:
            return
        self._finish(job)

    def _settle(self, job: SimJob, keep_all: bool, why: str = "") -> None:
        """Account the current run up to now and give back its slice (`why` a stop: failure or preempted)."""
        self.counters["sim_events"] += 1
        self.advance()
        lost0, overhead0 = job.lost_chip_s, job.overhead_chip_s
        parts = settle_run(job, self.now, self.checkpoint_s, keep_all, self.window)
        self.lost_chip_s += job.lost_chip_s - lost0
        self.overhead_settled_chip_s += job.overhead_chip_s - overhead0
        for k in ("reconfiguration", "restart", "useful", "degraded"):
            self.acct[k] += parts[k]
        self.acct["lost_preemption" if why == "preempted" else "lost_failure"] += parts["lost"]
        gang.release(self.state, job.rid, job.slice)
        self.search.job_stopped(job)
        self.busy -= job.chips
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
        self._settle(job, keep_all=False, why=why)
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
            observe.audit(self)

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
                    job.nominal_s = job.job.steps * self.step_time.step_time_s(  # as asked: all slices in one site
                        job.job.model, self.gen, job.request.shape, job.request.twisted, slices=job.job.slices)
                job.seq = self._seq
                self.counters["sim_events"] += 1
                self._seq += 1
                reason = self.never_reason(job)
                if reason:
                    job.status, job.reason = "unplaceable", reason
                    continue
                self._enqueue(job)
                batch.append(job)
            if batch:
                self.request_pass(full=False, new=batch)

    def _failures(self):
        for ev in self.failures:
            if ev.time_s >= self.end_s:
                break
            if ev.time_s > self.now:
                yield self.env.timeout(ev.time_s - self.now)
            self.counters[f"failures_{ev.component}"] += 1
            self.counters["sim_events"] += 1
            parts = event_parts(ev, self.links, self.state)
            newly = self._down.fail(parts)
            if any(newly.values()):
                self.advance()
                hit = self.state.fail(**newly)
                self.search.capacity_lost()
                self.healthy = self.state.n_healthy_chips
                self.failure_epoch += 1
                for idx in gang.jobs_hit(hit):
                    job = self.jobs[idx]
                    self.counters["job_interruptions"] += 1
                    self.stop(job, "failure")
                self._remap_spares()
            self.env.timeout(ev.repair_s).callbacks.append(lambda _e, parts=parts: self._repair(parts))

    def _repair(self, parts: list[tuple[str, object]]) -> None:
        self.counters["sim_events"] += 1
        fixed = self._down.repair(parts)
        if any(fixed.values()):
            self.advance()
            self.state.repair(**fixed)
            self.healthy = self.state.n_healthy_chips
            self.failure_epoch += 1
            self.search.capacity_gained()
            self._remap_spares()
            self.request_pass(full=True)

    def _remap_spares(self) -> None:
        """With `config.spare_ports`: move fibers off failed OCS ports onto spares (cubes come back)."""
        moved = remap_spare_ports(self.config, self.state)
        if moved:
            self.counters["spare_remaps"] += moved
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
        for k, v in observe.sample(self).items():
            self.series[k].append(v)

    # Run -----------------------------------------------------------------------------------
    def run(self) -> ClusterResult:
        t0 = time.perf_counter()
        self.env.process(self._failures())
        self.env.process(self._arrivals())
        self.env.process(self._sampler())
        self.env.run(until=self.horizon_s)
        if not self.series["t_s"] or self.series["t_s"][-1] < self.horizon_s:
            self._sample()  # the horizon itself, so the last day's figures (per-day goodput) are whole
        if self.config.drain:  # the window's jobs run on (no arrivals) until they end or the limit
            t0 = self.window[0]
            todo = [j for j in self.jobs if t0 <= j.job.submit_s < self.horizon_s]
            step = self.config.sample_step_s
            while self.now < self.end_s and any(j.status in ("queued", "running") for j in todo):
                self.env.run(until=min(self.end_s, self.now + step))
        self.advance()
        for job in list(self.running.values()):
            self._settle(job, keep_all=True)
            job.status = "running"
        if self.on_progress is not None:
            self.on_progress(self.horizon_s, self.horizon_s)
        wall = time.perf_counter() - t0
        return self._result(wall)

    def _result(self, wall_s: float) -> ClusterResult:
        waits = self.free_steps.wait_split(self.jobs, self.now)  # the horizon, or the end of a drain
        outcomes = [job_outcome(j, *waits.get(j.idx, (math.nan, math.nan))) for j in self.jobs]
        series = {k: np.asarray(v, float) for k, v in self.series.items() if v}
        counters = dict(self.counters)
        counters["step_time_evaluations"] = self.step_time.calls
        n_reshaped = sum(counters[f"runs_{f}"] for f in ("fold", "split", "scatter"))
        total = counters.pop("slowdown_charged_sum")
        counters["slowdown_charged_mean"] = total / n_reshaped if n_reshaped else math.nan
        for f in ("fold", "split", "scatter"):
            part = counters.pop(f"slowdown_{f}_sum")
            counters[f"slowdown_{f}_mean"] = part / counters[f"runs_{f}"] if counters[f"runs_{f}"] else math.nan
        inferred, rounded, extra = count_inferred(j.job for j in self.jobs)
        counters.update(jobs_shape_inferred=inferred, jobs_rounded=rounded, rounded_extra_chip_h=extra / 3600.0)
        return summarise(self.config, self.layout, outcomes, series, counters, self.acct, wall_s, self.seed,
                         end_s=self.now)


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
