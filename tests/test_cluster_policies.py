"""Queue policies against the declared Scheduler protocol: a fake scheduler that has only the
protocol's members runs every policy's pass, so a policy reaching past the protocol fails here."""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from podsim.cluster import search as search_module
from podsim.cluster.config import ClusterConfig
from podsim.cluster.policies import QUEUE_POLICIES, Scheduler, get_policy
from podsim.cluster.simulate import ClusterSim
from podsim.workload import Job


@dataclass
class FakeJob:
    name: str
    chips: int
    submit_s: float
    priority: int = 0
    status: str = "queued"

    @property
    def job(self):
        return SimpleNamespace(submit_s=self.submit_s, priority=self.priority)


@dataclass
class FakeScheduler:
    """Chips as a count: a job fits if it needs no more than are free; nothing else."""

    free: int
    queue: list[FakeJob]
    config: ClusterConfig = field(default_factory=lambda: ClusterConfig(generation="tpu-v4", pods=1, horizon_s=1.0))
    running: list[FakeJob] = field(default_factory=list)
    started: list[str] = field(default_factory=list)
    now: float = 0.0

    def head(self):
        return self.queued()[0] if self.queued() else None

    def queued(self, limit=None):
        q = sorted((j for j in self.queue if j.status == "queued"), key=self.queue_entry)
        return q if limit is None else q[:limit]

    def queued_by_kind(self, limit):
        kinds = {}
        for job in self.queued(limit):  # a job's answers depend on its chips and priority only
            kinds.setdefault((job.chips, job.priority), []).append(job)
        return list(kinds.values())

    def queue_entry(self, job):
        return (-job.priority, job.submit_s, job.name)

    def run_length(self, job, fit):
        return 1.0

    def try_place(self, job):
        return "fit" if job.chips <= self.free else None

    def start(self, job, where):
        job.status = "running"
        self.free -= job.chips
        self.running.append(job)
        self.started.append(job.name)

    def reservation(self, head):
        return SimpleNamespace(allows=lambda sim, job, fit: job.chips <= 8)  # small jobs end before the head's start

    def place_avoiding(self, job, res):
        return None

    def preempt_for(self, job):
        victims = [r for r in self.running if r.priority < job.priority]
        if self.free + sum(v.chips for v in victims) < job.chips:
            return False
        for v in victims:
            v.status = "queued"
            self.running.remove(v)
            self.free += v.chips
        self.start(job, "fit")
        return True

    def batch_admit(self, window):
        for job in window:
            if self.try_place(job):
                self.start(job, "fit")


def jobs(*spec) -> list[FakeJob]:
    return [FakeJob(n, c, t, p) for n, c, t, p in spec]


def test_the_fake_and_the_simulation_are_schedulers():
    fake = FakeScheduler(64, [])
    sim = ClusterSim(ClusterConfig(generation="tpu-v4", pods=1, horizon_s=3600.0),
                     [Job(id="a", submit_s=0.0, shape=(4, 4, 4), duration_s=10.0)], None)
    assert isinstance(fake, Scheduler) and isinstance(sim, Scheduler)
    assert set(QUEUE_POLICIES) == {"fifo", "backfill", "priority"}


def test_fifo_stops_at_the_first_job_that_does_not_fit():
    s = FakeScheduler(64, jobs(("a", 32, 0, 0), ("b", 64, 1, 0), ("c", 8, 2, 0)))
    get_policy("fifo").schedule(s, True, [])
    assert s.started == ["a"]  # b blocks; c waits behind it


def test_backfill_starts_small_jobs_behind_the_blocked_head():
    s = FakeScheduler(64, jobs(("a", 32, 0, 0), ("b", 64, 1, 0), ("c", 8, 2, 0), ("d", 16, 3, 0)))
    get_policy("backfill").schedule(s, True, [])
    assert s.started == ["a", "c"]  # d fits but would delay b's reservation


def test_priority_preempts_lower_priority_jobs():
    s = FakeScheduler(64, jobs(("low", 64, 0, 0), ("high", 32, 1, 2)))
    get_policy("priority").schedule(s, True, [])  # high first: it fits at once
    assert s.started == ["high"]
    s = FakeScheduler(0, [])
    s.running, s.free = [FakeJob("low", 64, 0, 0, "running")], 0
    s.queue = [s.running[0], *jobs(("high", 32, 1, 2))]
    get_policy("priority").schedule(s, True, [])
    assert s.started == ["high"] and s.running[0].name == "high"


@pytest.mark.parametrize("name", ["fifo", "backfill", "priority"])
def test_every_policy_runs_the_batch_path_on_the_protocol(name):
    s = FakeScheduler(64, jobs(("a", 32, 0, 0), ("b", 16, 1, 0), ("c", 64, 2, 0)))
    s.config = ClusterConfig(generation="tpu-v4", pods=1, horizon_s=1.0, solver="cpsat")
    get_policy(name).schedule(s, True, [])
    assert s.started == ["a", "b"]


def test_memos_are_invalidated_in_two_places():
    """Every clear of the search's memos is in capacity_lost or capacity_gained (a reservation
    keeps its own keep-off failures per capacity epoch)."""
    tree = ast.parse(inspect.getsource(search_module) + inspect.getsource(inspect.getmodule(ClusterSim)))
    owners = set()
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef):
            for node in ast.walk(fn):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "clear"
                        and isinstance(node.func.value, ast.Attribute)
                        and node.func.value.attr in ("_fits", "failed_keys", "preempt_failed")
                        and ast.unparse(node.func.value.value) in ("self", "self.search")):  # not a reservation's own
                    owners.add(fn.name)
    assert owners == {"capacity_lost", "capacity_gained"}
