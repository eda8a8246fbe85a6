"""The cluster simulation's queue: waiting jobs in the policy's order, and the same jobs by kind.

An entry is the job's place in the order, `(*policy sort key, arrival sequence, job index)`, so
entries sort as the queue does and end with the index that finds the job. Besides the one
ordered list, each kind of job (its placement key and priority: jobs of one kind get the same
answers from the placement search) keeps its own ordered list, so a scheduling pass can take
the first N queued jobs kind by kind (`by_kind`) without walking them one by one.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import TYPE_CHECKING

from podsim.errors import InternalError

if TYPE_CHECKING:
    from podsim.cluster.accounting import SimJob


def kind_of(job: SimJob) -> tuple:
    """What a job's placement answers depend on: its request (shape, twist, ...) and priority."""
    return job.key, job.job.priority


class JobQueue:
    """Queued jobs in policy order (`entries`) and by kind (`kinds`); `jobs[i]` is job index i."""

    def __init__(self, jobs: list[SimJob]):
        self.jobs = jobs
        self.entries: list[tuple] = []
        self.kinds: dict[tuple, list[tuple]] = {}

    def __len__(self) -> int:
        return len(self.entries)

    def push(self, job: SimJob, entry: tuple) -> None:
        job.qentry = entry
        bisect.insort(self.entries, entry)
        bisect.insort(self.kinds.setdefault(kind_of(job), []), entry)

    def remove(self, job: SimJob) -> None:
        for entries in (self.entries, self.kinds[kind_of(job)]):
            i = bisect.bisect_left(entries, job.qentry)
            if i >= len(entries) or entries[i] != job.qentry:
                raise InternalError(f"job {job.job.id!r} is not in the queue")
            del entries[i]
        job.qentry = None

    def head(self) -> SimJob | None:
        return self.jobs[self.entries[0][-1]] if self.entries else None

    def first(self, limit: int | None = None) -> list[SimJob]:
        """Queued jobs in order (the first `limit`)."""
        entries = self.entries if limit is None else self.entries[:limit]
        return [self.jobs[e[-1]] for e in entries]

    def by_kind(self, limit: int) -> list[Sequence[SimJob]]:
        """The first `limit` queued jobs split by kind, each kind's in order: a cut of each
        kind's own list, no walk over the jobs."""
        if not self.entries:
            return []
        last = self.entries[min(limit, len(self.entries)) - 1]
        out = []
        for entries in self.kinds.values():
            cut = bisect.bisect_right(entries, last)
            if cut:
                out.append(_Jobs(entries[:cut], self.jobs))
        return out

    def check(self) -> None:
        """The kinds' lists hold the queue's entries, each once (an audit)."""
        if sorted(e for entries in self.kinds.values() for e in entries) != self.entries:
            raise InternalError("the queue by kind and the queue disagree")


class _Jobs(Sequence):
    """Queue entries read as the jobs they stand for."""

    __slots__ = ("entries", "jobs")

    def __init__(self, entries: list[tuple], jobs: list[SimJob]):
        self.entries, self.jobs = entries, jobs

    def __len__(self) -> int:
        return len(self.entries)

    def __getitem__(self, i):
        return self.jobs[self.entries[i][-1]]
