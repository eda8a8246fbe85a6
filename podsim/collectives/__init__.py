"""Collective algorithms as phases of flows, with their alpha-beta closed forms beside them.

Typical use::

    from podsim.collectives import RouterPool, Placement, group_layout, plan_collective
    placement = Placement(built.fabric, (built.view,))
    layout = group_layout(placement.views, "all")
    plan = plan_collective("all_reduce", layout, 2**30, "auto", RouterPool(placement))
    plan.schedule.algorithm, plan.closed_form_s      # 'torus_all_links', 8.04e-3 on a v4 pod
"""

from __future__ import annotations

from dataclasses import dataclass

from podsim.collectives.algorithms import (
    ALGORITHMS,
    KINDS,
    applicable,
    build_schedule,
    busbw_factor,
)
from podsim.collectives.closed_form import (
    bidir_ring_all_reduce_s,
    halving_doubling_all_reduce_s,
    ring_all_reduce_s,
    ring_reduce_scatter_s,
    schedule_time_s,
    torus_all_reduce_s,
)
from podsim.collectives.groups import GroupLayout, group_layout
from podsim.collectives.routes import Placement, Router, RouterPool
from podsim.collectives.schedule import Schedule
from podsim.errors import PodsimError


@dataclass(frozen=True, eq=False)
class Plan:
    """The schedule chosen for one collective, its closed-form time, and every candidate's."""

    schedule: Schedule
    closed_form_s: float
    candidates_s: dict[str, float]


def closed_form_s(schedule: Schedule, pool: RouterPool) -> float:
    """Alpha-beta time of a schedule (routes folded by symmetry where the pool allows)."""
    return schedule_time_s(schedule, pool.router(schedule.patterns()))


def plan_collective(kind: str, layout: GroupLayout, size_bytes: float, algorithm: str, pool: RouterPool,
                    shift: int = 1) -> Plan:
    """Build the schedule of `algorithm`; `auto` picks the fastest by closed form (ties go to
    the earlier name in ALGORITHMS)."""
    if algorithm != "auto":
        sched = build_schedule(kind, layout, size_bytes, algorithm, shift)
        t = closed_form_s(sched, pool)
        return Plan(sched, t, {algorithm: t})
    if kind not in KINDS:
        raise PodsimError(f"unknown collective {kind!r}; known: {', '.join(KINDS)}")
    ok = [a for a, why in applicable(kind, layout).items() if not why]
    best = None
    cands: dict[str, float] = {}
    skipped: list[str] = []
    for alg in ok:
        sched = build_schedule(kind, layout, size_bytes, alg, shift)
        try:
            t = closed_form_s(sched, pool)
        except PodsimError as exc:  # too many flows to route: not a candidate
            skipped.append(str(exc))
            continue
        cands[alg] = t
        if best is None or t < best[1]:
            best = (sched, t)
    if best is None:
        raise PodsimError(skipped[0] if skipped else f"no algorithm can run {kind} on group {layout.name}")
    return Plan(best[0], best[1], cands)


# The public API: plan a collective (schedule + closed form) and the closed forms themselves.
# A schedule's parts (Pattern, Phase), route symmetry and schedule_time_s stay in their modules.
__all__ = [
    "ALGORITHMS", "KINDS", "GroupLayout", "Placement", "Plan", "Router", "RouterPool", "Schedule",
    "applicable", "bidir_ring_all_reduce_s", "build_schedule", "busbw_factor", "closed_form_s", "group_layout",
    "halving_doubling_all_reduce_s", "plan_collective", "ring_all_reduce_s", "ring_reduce_scatter_s",
    "torus_all_reduce_s",
]
