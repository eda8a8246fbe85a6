"""Read-only views of a running ClusterSim: the time-series sample and the bookkeeping audit.

Both read the simulation's live state and change nothing in it (the sample brings the
chip-second integrals up to now first, as every reader of them does).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from podsim.cluster.accounting import running_overhead_chip_s
from podsim.errors import InternalError
from podsim.placement.metrics import largest_placeable

if TYPE_CHECKING:
    from podsim.cluster.accounting import SimJob
    from podsim.cluster.jobqueue import JobQueue
    from podsim.cluster.search import SliceSearch
    from podsim.placement import PodState
    from podsim.topology import PodLayout


class Observed(Protocol):
    """What the sample and the audit read of a running simulation (ClusterSim is one)."""

    config: Any
    layout: PodLayout
    state: PodState
    settings: Any
    search: SliceSearch
    queue: JobQueue
    jobs: list[SimJob]
    running: dict[int, SimJob]
    counters: dict
    busy: int
    healthy: int
    busy_chip_s: float
    lost_chip_s: float
    overhead_settled_chip_s: float

    @property
    def now(self) -> float: ...

    @property
    def free_chips(self) -> int: ...

    def advance(self) -> None:
        """Bring the chip-second integrals up to now."""

SERIES_KEYS = ("t_s", "busy_chips", "healthy_chips", "queued_jobs", "queued_chips", "running_jobs",
               "largest_placeable_chips", "busy_chip_s", "lost_chip_s", "overhead_chip_s")


def sample(sim: Observed) -> dict[str, float]:
    """One time-series sample of the fleet now (`largest_placeable_chips` only with
    `config.fragmentation`)."""
    out: dict[str, float] = {
        "t_s": sim.now, "busy_chips": sim.busy, "healthy_chips": sim.healthy,
        "queued_jobs": len(sim.queue), "queued_chips": sum(sim.jobs[e[-1]].chips for e in sim.queue.entries),
        "running_jobs": len(sim.running),
    }
    if sim.config.fragmentation:
        out["largest_placeable_chips"] = largest_placeable(sim.state, sim.settings)["chips"]
    # cumulative chip-seconds so far, for goodput over time: busy (= allocated), lost at stops,
    # overhead (restart + reconfiguration) of ended runs plus the part of running ones spent so far
    sim.advance()
    out["busy_chip_s"] = sim.busy_chip_s
    out["lost_chip_s"] = sim.lost_chip_s
    out["overhead_chip_s"] = sim.overhead_settled_chip_s + running_overhead_chip_s(sim.running.values(), sim.now)
    return out


def audit(sim: Observed) -> None:
    """Check the bookkeeping against the pod state: no chip in two jobs, none broken."""
    sim.counters["audits"] += 1
    st = sim.state
    held = st.chip_job >= 0
    if int(held.sum()) != sim.busy or sum(j.chips for j in sim.running.values()) != sim.busy:
        raise InternalError(f"busy chips {sim.busy} != chips held {int(held.sum())}")
    if (held & st.chip_failed).any():
        raise InternalError("a failed chip is held by a job")
    seen = np.zeros(sim.layout.n_chips, np.int32)
    for j in sim.running.values():
        seen[np.asarray(j.slice.chips)] += 1
    if (seen > 1).any() or not np.array_equal(seen > 0, held):
        raise InternalError("a chip is in two jobs, or held by no running job")
    if sim.healthy != st.n_healthy_chips:
        raise InternalError(f"healthy chips {sim.healthy} != {st.n_healthy_chips}")
    queued = {e[-1] for e in sim.queue.entries}
    if queued != {j.idx for j in sim.jobs if j.status == "queued"}:
        raise InternalError("the queue and the job states disagree")
    sim.queue.check()
    for job in {sim.jobs[e[-1]].key: sim.jobs[e[-1]] for e in sim.queue.entries}.values():
        sim.search.audit(job, sim.free_chips)  # the pod-by-pod answer against the whole fleet's
