"""Choosing a collective's algorithm (`auto`) from closed forms and flow counts.

Every applicable algorithm is a candidate. How many flows pricing it would route is known
before any is built (`Router.flows_to_route`: representatives under the symmetry its patterns
share, every flow that crosses slices). A candidate within `RANK_FLOWS` flows is priced by its
alpha-beta closed form on those routes (`schedule_time_s`). A candidate over it is first
ranked by a lower bound of that closed form, from the flows of a few representative chips
(`schedule_bound_s`); only if the bound could beat the best price so far is it priced in full
(building its flows, which simulating it would need anyway), and a candidate with more flows
than the engine simulates (the flows budget, `--max-flows`) is never taken. The choice is the one
pricing every candidate in full would make (the fastest; ties to the earlier name in ALGORITHMS),
without building the flows of those that cannot win. `Plan.why` says it in one line.

Pricing folds a candidate by its own patterns' symmetry; a whole step folds only by what all its
patterns share, so the engine may route a chosen pattern with more flows than pricing counted.
The engine then plans that collective again with `exclude` naming the algorithms it cannot
simulate (engine/core.py); `why` says so, and with none left the engine's budget error stands.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from podsim.bounds import budget
from podsim.collectives.algorithms import ALGORITHMS, KINDS, applicable, build_schedule
from podsim.collectives.closed_form import schedule_bound_s, schedule_time_s
from podsim.collectives.groups import GroupLayout
from podsim.collectives.routes import RouterPool
from podsim.collectives.schedule import Schedule
from podsim.errors import PodsimError

RANK_FLOWS = 1 << 18
"""Most flows an algorithm's closed form routes while it is ranked (beyond: its lower bound first)."""
BOUND_FLOWS = 1 << 15
"""About how many flows per pattern a lower bound routes (those of the first representative chips)."""


@dataclass(frozen=True, eq=False)
class Plan:
    """The schedule chosen for one collective, its closed-form time, every candidate priced
    (`candidates_s`), the lower bounds of those ruled out without pricing (`bounds_s`), and why
    this one (one line)."""

    schedule: Schedule
    closed_form_s: float
    candidates_s: dict[str, float]
    bounds_s: dict[str, float] = field(default_factory=dict)
    why: str = ""


def closed_form_s(schedule: Schedule, pool: RouterPool) -> float:
    """Alpha-beta time of a schedule (routes folded by symmetry where the pool allows)."""
    return schedule_time_s(schedule, pool.router(schedule.patterns()))


def _flows(schedule: Schedule, pool: RouterPool) -> tuple[object, int, tuple[int, str]]:
    """The router pricing the schedule uses, the flows it routes, and (flows, name) of its
    largest pattern."""
    router = pool.router(schedule.patterns())
    n = [(router.flows_to_route(p), p.name) for p in schedule.patterns()]
    return router, sum(k for k, _ in n), max(n, default=(0, ""))


def _us(t: float) -> str:
    return f"{t * 1e6:.4g} us"


def plan_collective(kind: str, layout: GroupLayout, size_bytes: float, algorithm: str, pool: RouterPool,
                    shift: int = 1, exclude: Mapping[str, tuple[str, str]] | None = None) -> Plan:
    """Build the schedule of `algorithm`; `auto` picks the fastest by closed form (ties go to
    the earlier name in ALGORITHMS), ranking without building the flows of candidates that
    cannot win (see the module docstring). `exclude`: algorithms `auto` may not take, each with
    (why, in a phrase for `Plan.why`; the error to raise when no candidate is left)."""
    # the collective library's time per collective (generation `collective_latency`, NCCL's on GPUs):
    # the same for every algorithm, so it never changes the choice; the engine waits it at the start
    launch = pool.placement.fabric.generation.collective_latency_s
    if algorithm != "auto":
        sched = build_schedule(kind, layout, size_bytes, algorithm, shift)
        t = closed_form_s(sched, pool) + launch
        return Plan(sched, t, {algorithm: t}, why=f"{algorithm}: as asked (closed form {_us(t)})")
    if kind not in KINDS:
        raise PodsimError(f"unknown collective {kind!r}; known: {', '.join(KINDS)}")
    exclude = exclude or {}
    ok = [a for a, why in applicable(kind, layout).items() if not why and a not in exclude]
    order = {a: i for i, a in enumerate(ALGORITHMS)}
    cands: dict[str, float] = {}
    bounds: dict[str, float] = {}
    scheds: dict[str, Schedule] = {}
    large: list[tuple[str, object, int, tuple[int, str]]] = []
    refused: list[str] = [err for _, err in exclude.values()]
    for alg in ok:
        sched = scheds[alg] = build_schedule(kind, layout, size_bytes, alg, shift)
        router, n, most = _flows(sched, pool)
        if n <= RANK_FLOWS and max((router.budget_flows(p) for p in sched.patterns()), default=0) <= budget().flows:
            cands[alg] = schedule_time_s(sched, router)
        else:
            large.append((alg, router, n, most))
    for alg, router, _, _ in large:
        bounds[alg] = schedule_bound_s(scheds[alg], router, BOUND_FLOWS)
    notes = []
    for alg, router, n, most in sorted(large, key=lambda c: (bounds[c[0]], order[c[0]])):
        best = min(cands.values(), default=None)
        if best is not None and bounds[alg] > best:
            notes.append(f"{alg} ruled out by its bound {_us(bounds[alg])} ({n:,} flows not built)")
            continue
        if most[0] > budget().flows:
            refused.append(f"{most[1]} of {alg} on group {layout.name}: {most[0]:,} flows, more than the {budget().flows:,} "
                           "podsim simulates at once (--max-flows); use a smaller group or another algorithm")
            notes.append(f"{alg} not simulable ({n:,} flows; bound {_us(bounds[alg])})")
            continue
        cands[alg] = schedule_time_s(scheds[alg], router)
        del bounds[alg]
    if not cands:
        raise PodsimError(refused[0] if refused else f"no algorithm can run {kind} on group {layout.name}")
    cands = {a: t + launch for a, t in cands.items()}
    best_alg = min(cands, key=lambda a: (cands[a], order[a]))
    others = sorted((a for a in cands if a != best_alg), key=lambda a: (cands[a], order[a]))
    of = " of those this step can simulate" if exclude else ""
    why = f"{best_alg}: fastest by closed form{of}, {_us(cands[best_alg])}"
    if others:
        why += " (next " + ", ".join(f"{a} {_us(cands[a])}" for a in others[:2]) + ")"
    notes += [note for note, _ in exclude.values()]
    if notes:
        why += "; " + "; ".join(notes)
    return Plan(scheds[best_alg], cands[best_alg], {a: cands[a] for a in ok if a in cands}, bounds, why)
