"""Collectives in flight at once, shared by the physical axes they use: the overlap rule of the
analytic estimate.

Each collective has its closed-form time alone (podsim.plan.pricing) and the physical axes of the
slice it occupies (x, y, z; `dcn` for the network between slices). While several are in flight,
each axis is shared equally by the collectives on it, and a collective runs at the share of its
most crowded axis: 1 / (collectives on that axis). So a tensor-parallel all-reduce that starts
with an FSDP gather and reduce-scatter on its axis takes three times as long until one of them
ends (what the flow engine's max-min sharing gives when their flows meet on the same links, and
what it does not give when they use different links of the axis: the rule is per axis, not per
link). Time advances from one end to the next (a fluid queue, a handful of collectives at a time).

`Flight` holds the collectives beside the chain (FSDP gathers, gradient reductions, their
successors) and runs the chain's own collectives through the same sharing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass
class Job:
    """One collective in flight: its axes, seconds of its alone time still to run, its label
    (logical axes, for the breakdown) and what starts when it ends."""

    axes: frozenset[str]
    left: float
    label: str
    tag: str = ""  # 'gather' for the FSDP gathers (the chain waits for them)
    then: list[Job] = field(default_factory=list)
    end: float = math.nan


@dataclass
class Flight:
    """The collectives beside the chain, advanced in time (see the module docstring)."""

    t: float = 0.0
    active: list[Job] = field(default_factory=list)
    ended: dict[str, float] = field(default_factory=dict)  # label -> latest end

    def start(self, job: Job, at: float) -> Job:
        """Start `job` at `at` (or now, if the flight has moved past it)."""
        if at > self.t:
            self.advance(at)
        if job.left <= 0:
            self._done(job, max(at, self.t))
        else:
            self.active.append(job)
        return job

    def _rates(self, extra: frozenset[str] | None) -> tuple[list[float], float]:
        count: dict[str, int] = {}
        for j in self.active:
            for a in j.axes:
                count[a] = count.get(a, 0) + 1
        if extra:
            for a in extra:
                count[a] = count.get(a, 0) + 1
        rates = [1.0 / max(count[a] for a in j.axes) if j.axes else 1.0 for j in self.active]
        r_extra = 1.0 / max(count[a] for a in extra) if extra else 1.0
        return rates, r_extra

    def _done(self, job: Job, t: float) -> None:
        job.end = t
        self.ended[job.label] = max(self.ended.get(job.label, -math.inf), t)
        for nxt in job.then:
            if nxt.left <= 0:
                self._done(nxt, t)
            else:
                self.active.append(nxt)

    def advance(self, until: float, chain: frozenset[str] | None = None, chain_left: float = 0.0,
                watch: Job | None = None) -> float:
        """Run the flight until `until`; with `chain` (a chain collective's axes and seconds
        left), until it ends instead, sharing the axes; with `watch`, until that job ends.
        Returns the time reached."""
        while True:
            if watch is not None and not math.isnan(watch.end):
                return self.t
            if chain is None and watch is None and self.t >= until:
                return self.t
            rates, r_c = self._rates(chain)
            dt = until - self.t if (chain is None and watch is None) else math.inf
            for j, r in zip(self.active, rates, strict=True):
                dt = min(dt, j.left / r)
            if chain is not None:
                dt = min(dt, chain_left / r_c)
            if not math.isfinite(dt):  # watching a job that is not in flight
                return self.t
            dt = max(dt, 0.0)
            self.t += dt
            if chain is not None:
                chain_left -= r_c * dt
            finished = []
            for j, r in zip(self.active, rates, strict=True):
                j.left -= r * dt
                if j.left <= 1e-15:
                    finished.append(j)
            if finished:
                self.active = [j for j in self.active if j.left > 1e-15]
                for j in finished:
                    self._done(j, self.t)
            if chain is not None and chain_left <= 1e-15:
                return self.t

    def shares(self, axes: frozenset[str]) -> bool:
        """Whether a collective in flight uses one of `axes`."""
        return any(not axes.isdisjoint(j.axes) for j in self.active)

    def run_chain(self, axes: frozenset[str], seconds: float, at: float) -> float:
        """A chain collective of `seconds` alone on `axes` starting at `at`: when it ends. The
        flight may already stand past `at` (it ran ahead to a gather's end): the time between
        counts at the share it has now."""
        if seconds <= 0:
            return at
        if at > self.t:
            self.advance(at)
        if not self.shares(axes):
            return at + seconds  # alone on its axes (the flight catches up lazily)
        if at < self.t:
            _, r = self._rates(axes)
            seconds -= (self.t - at) * r
            if seconds <= 0:
                return at + (self.t - at) + seconds / r
        return self.advance(math.inf, chain=axes, chain_left=seconds)

    def wait(self, job: Job) -> float:
        """When `job` ends (running the flight until then)."""
        if math.isnan(job.end):
            self.advance(math.inf, watch=job)
        return job.end

    def idle_after(self) -> float:
        """When everything in flight has ended."""
        while self.active:
            self.advance(math.inf, watch=self.active[0])
        return self.t
