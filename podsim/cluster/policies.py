"""Queue policies: which queued jobs a scheduling pass tries to start, in what order.

A policy orders the queue (`sort_key`) and runs a pass (`schedule`) over the `Scheduler`
protocol below: the only members of the simulation a policy may use (ClusterSim implements it).
A pass is *full* after capacity came back (a job ended or was interrupted, a part was
repaired); otherwise only the jobs that just arrived are new, and every job tried before
would fail again on the same free space, so only the new ones are tried.

- `fifo`: start jobs in submission order; stop at the first that does not fit.
- `backfill`: FIFO with EASY backfilling (Mu'alem & Feitelson, IEEE TPDS 2001): the blocked head
  gets a reservation - the earliest time its slice fits if running jobs end when expected (their
  remaining run time is known: it is the job's requested duration) and the slice it would take
  then; a job behind it may start now if it ends by that time or keeps off that slice.
- `priority`: highest priority first (then submission order); a job that does not fit may
  preempt running jobs of lower priority, least work at risk first; preempted jobs lose the
  work since their last checkpoint and queue again.

A full pass looks at the first `schedule_depth` queued jobs in order, but not one by one: jobs of
one kind (shape, twist, slices, priority: `Scheduler.queued_by_kind`) get the same answer from
the placement search while the state is unchanged, and a pass only takes capacity away (starts)
until a preemption gives some back, so once a kind cannot start, its later jobs are skipped
(`KindMerge`; revived after a preemption). The jobs tried, and their order, are those of the
plain loop; the work is the number of kinds, not of queued jobs.

Interrupted jobs keep their original submission time, so they queue ahead of later arrivals.
With `solver="cpsat"` each pass offers the first `batch_window` queued jobs (policy order) to
the CP-SAT batch admission, which picks the subset to start (weights favour priority and age);
EASY reservations then do not apply, preemption does.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from podsim.cluster.accounting import SimJob
    from podsim.cluster.config import ClusterConfig
    from podsim.cluster.fits import Fit, Reservation


@runtime_checkable
class Scheduler(Protocol):
    """What a queue policy may ask of the simulation during a pass."""

    config: ClusterConfig  # solver, batch_window, schedule_depth

    @property
    def now(self) -> float: ...

    def head(self) -> SimJob | None:
        """The first queued job in policy order (None: the queue is empty)."""

    def queued(self, limit: int | None = None) -> list[SimJob]:
        """Queued jobs in policy order (the first `limit`)."""

    def queued_by_kind(self, limit: int) -> list[Sequence[SimJob]]:
        """The first `limit` queued jobs split by kind, each kind's in policy order. Jobs of one
        kind get the same answer from try_place, place_avoiding and preempt_for on one state."""

    def queue_entry(self, job: SimJob) -> tuple:
        """The job's place in the queue's order."""

    def run_length(self, job: SimJob, fit: Any) -> float:
        """How long the job would run on `fit` (overheads and remaining work)."""

    def try_place(self, job: SimJob) -> Fit | None:
        """Where the job would go now, or None."""

    def start(self, job: SimJob, where: Any) -> None:
        """Start the job on `where` (a Fit, or a placement from batch admission)."""

    def reservation(self, head: SimJob) -> Reservation:
        """EASY: when and where the blocked head will fit if running jobs end when expected."""

    def place_avoiding(self, job: SimJob, res: Reservation) -> Fit | None:
        """Where the job fits now keeping off the reserved chips, or None."""

    def preempt_for(self, job: SimJob) -> bool:
        """Stop lower-priority jobs so the job fits, and start it; False if that cannot work."""

    def batch_admit(self, window: list[SimJob]) -> None:
        """CP-SAT batch admission over `window`: start every job it places."""


class QueuePolicy:
    """Base: FIFO order, and the batch (CP-SAT) path shared by every policy."""

    name = "fifo"
    preemptive = False

    def sort_key(self, job: SimJob) -> tuple:
        return (job.job.submit_s,)

    def schedule(self, sim: Scheduler, full: bool, new: list[SimJob]) -> None:
        if sim.config.solver == "cpsat":
            self.schedule_batch(sim, full, new)
        else:
            self.schedule_greedy(sim, full, new)

    def schedule_batch(self, sim: Scheduler, full: bool, new: list[SimJob]) -> None:
        window = sim.queued(sim.config.batch_window)
        if not window:
            return
        if full or any(j in window for j in new):
            sim.batch_admit(window)
        if self.preemptive:
            for job in sim.queued(sim.config.batch_window):
                if sim.try_place(job) is None:
                    sim.preempt_for(job)

    def schedule_greedy(self, sim: Scheduler, full: bool, new: list[SimJob]) -> None:
        start_head(sim)


def start_head(sim: Scheduler) -> SimJob | None:
    """Start jobs from the head of the queue until one does not fit; return it (None: drained)."""
    while True:
        head = sim.head()
        if head is None:
            return None
        p = sim.try_place(head)
        if p is None:
            return head
        sim.start(head, p)


class KindMerge:
    """The jobs of several kinds (`Scheduler.queued_by_kind`) in queue order. `drop()` the kind
    of the job just handed out when it cannot start (its later jobs would get the same answer
    while the state is unchanged); `revive()` the dropped kinds after the state changed, from
    their first job past the current one."""

    def __init__(self, sim: Scheduler, streams: list[Sequence[SimJob]]):
        self.sim, self.streams = sim, streams
        self.heap = [(sim.queue_entry(st[0]), i, 0) for i, st in enumerate(streams) if len(st)]
        heapq.heapify(self.heap)
        self.last: tuple[int, int] | None = None  # (stream, position) of the job handed out last
        self.current: tuple | None = None  # its queue entry
        self.dropped: dict[int, int] = {}  # stream -> position of the job it was dropped at

    def __iter__(self) -> KindMerge:
        return self

    def __next__(self) -> SimJob:
        if self.last is not None:
            i, pos = self.last
            self._push(i, pos + 1)
        if not self.heap:
            raise StopIteration
        self.current, i, pos = heapq.heappop(self.heap)
        self.last = (i, pos)
        return self.streams[i][pos]

    def _push(self, i: int, pos: int) -> None:
        if pos < len(self.streams[i]):
            heapq.heappush(self.heap, (self.sim.queue_entry(self.streams[i][pos]), i, pos))

    def drop(self) -> None:
        i, pos = self.last
        self.dropped[i] = pos
        self.last = None

    def revive(self) -> None:
        for i, pos in self.dropped.items():
            stream = self.streams[i]
            pos += 1
            while pos < len(stream) and self.sim.queue_entry(stream[pos]) <= self.current:
                pos += 1  # passed over while the kind could not start: the plain loop found the same
            self._push(i, pos)
        self.dropped.clear()


class Fifo(QueuePolicy):
    name = "fifo"


class Backfill(QueuePolicy):
    name = "backfill"

    def schedule_greedy(self, sim: Scheduler, full: bool, new: list[SimJob]) -> None:
        head = start_head(sim)
        if head is None:
            return
        if full:
            cands = KindMerge(sim, sim.queued_by_kind(sim.config.schedule_depth + 1))
        else:
            cands = [j for j in new if j.status == "queued" and j is not head]
        res = None
        for job in cands:
            if job is head:
                continue
            p = sim.try_place(job)
            if p is None:
                if full:  # a pass only takes chips: every later job of this kind fails too
                    cands.drop()
                continue
            if res is None:
                res = sim.reservation(head)
            if res.allows(sim, job, p):
                sim.start(job, p)
                continue
            q = sim.place_avoiding(job, res)
            if q is not None:
                sim.start(job, q)


class Priority(QueuePolicy):
    name = "priority"
    preemptive = True

    def sort_key(self, job: SimJob) -> tuple:
        return (-job.job.priority, job.job.submit_s)

    def schedule_greedy(self, sim: Scheduler, full: bool, new: list[SimJob]) -> None:
        if full:
            cands = KindMerge(sim, sim.queued_by_kind(sim.config.schedule_depth + 1))
        else:
            cands = sorted((j for j in new if j.status == "queued"), key=sim.queue_entry)
        for job in cands:
            if job.status != "queued":
                continue
            p = sim.try_place(job)
            if p is not None:
                sim.start(job, p)
            elif not sim.preempt_for(job):
                if full:  # the same kind fails the same way until a start or a preemption changes the state
                    cands.drop()
                continue
            if full:
                cands.revive()


QUEUE_POLICIES: dict[str, type[QueuePolicy]] = {"fifo": Fifo, "backfill": Backfill, "priority": Priority}


def get_policy(name: str) -> QueuePolicy:
    try:
        return QUEUE_POLICIES[name]()
    except KeyError:
        from podsim.errors import PodsimError

        raise PodsimError(f"queue policy {name!r} is not known; use one of {', '.join(QUEUE_POLICIES)}") from None
