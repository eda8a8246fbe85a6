"""Alpha-beta closed forms: the textbook costs, and the same model evaluated on a schedule.

Textbook forms (hardware.md §5; p ranks, n bytes, alpha per step, beta seconds per byte of
one link): `ring_*`, `bidir_ring_*`, `torus_*`, `halving_doubling_*`.

`schedule_time_s` evaluates the same alpha-beta model on any schedule and placement: a phase
costs alpha + beta-term where alpha is the latency of a flow's route (hops x hop latency) and
the beta-term is the time the busiest link on that route needs for all the bytes that cross
it in this step (with the streams of the stage that move in lockstep with it); the phase's
cost is that of its slowest flow, a ring's p - 1 steps cost p - 1 times one step, streams of
a stage run side by side and stages add. On a torus ring this is exactly (p - 1)(alpha + n/p beta) and the other textbook
forms (tests/test_collectives.py checks it); on multi-hop embeddings (halving-doubling on a
torus, all-to-all, rings that close over a mesh) it prices the congestion the textbook forms,
written for a fully connected network, leave out.
"""

from __future__ import annotations

import math

import numpy as np

from podsim.collectives.routes import Router
from podsim.collectives.schedule import Phase, Schedule

# --- textbook forms ---------------------------------------------------------------------

def ring_reduce_scatter_s(p: int, n: float, alpha: float, beta: float) -> float:
    """col.1 / col.6: (p-1) alpha + (p-1)/p n beta (all-gather alike, n the gathered size)."""
    return (p - 1) * alpha + (p - 1) / p * n * beta


def ring_all_reduce_s(p: int, n: float, alpha: float, beta: float) -> float:
    """col.11: 2(p-1) alpha + 2(p-1)/p n beta."""
    return 2 * ring_reduce_scatter_s(p, n, alpha, beta)


def bidir_ring_all_reduce_s(p: int, n: float, alpha: float, beta: float) -> float:
    """col.21: both directions of the ring, n/2 each."""
    return ring_all_reduce_s(p, n / 2, alpha, beta)


def torus_all_reduce_s(dims: tuple[int, ...], n: float, alpha: float, beta: float, streams: int = 2) -> float:
    """col.20 generalised: reduce-scatter axis by axis, all-gather back, `streams` equal
    shares of the buffer running on disjoint links (2: both directions; 2 x D: every
    rotation of the axis order in both directions, all links busy)."""
    share = n / streams
    t = 0.0
    for p in dims:
        t += ring_all_reduce_s(p, share, alpha, beta)
        share /= p
    return t


def halving_doubling_all_reduce_s(p: int, n: float, alpha: float, beta: float) -> float:
    """col.9 (Rabenseifner, p a power of two, fully connected): 2 lg p alpha + 2(p-1)/p n beta."""
    return 2 * math.log2(p) * alpha + 2 * (p - 1) / p * n * beta


# --- the model on a schedule ------------------------------------------------------------

def _phase_costs(router: Router, phases: list[Phase]) -> list[float]:
    """Cost of each of several phases that run at the same time (one per stream)."""
    cap = router.placement.fabric.link_capacity_bytes_per_s
    routed = [router.routes(ph.pattern) for ph in phases]
    per_entry = []
    for ph, r in zip(phases, routed, strict=True):
        b = np.full(r.n_flows, ph.bytes) if r.weight is None else ph.bytes * r.weight
        w = np.repeat(b, np.diff(r.indptr))
        if r.frac is not None:
            w *= r.frac  # in place: an all-pairs DCN pattern has tens of millions of entries
        per_entry.append(w)
    if len(routed) == 1:  # no concatenated copies of the one phase's links and weights
        load = np.bincount(routed[0].links, weights=per_entry[0], minlength=len(cap))
    else:
        links = np.concatenate([r.links for r in routed]) if routed else np.empty(0, np.int64)
        load = np.bincount(links, weights=np.concatenate(per_entry) if per_entry else None, minlength=len(cap))
    del per_entry
    link_time = np.divide(load, cap, out=np.zeros_like(load), where=cap > 0)
    out = []
    for r in routed:
        if r.n_flows == 0:
            out.append(0.0)
            continue
        hops = np.diff(r.indptr)
        t = np.zeros(r.n_flows)
        has = hops > 0
        if has.any():
            t[has] = np.maximum.reduceat(link_time[r.links], r.indptr[:-1][has])
        out.append(float((r.latency_s + t).max()))
    return out


def stage_time_s(router: Router, stage) -> float:
    """Streams side by side. Streams in lockstep (their current phases carry the same bytes
    and have the same steps left) share links step by step; streams out of step are priced
    alone, as if on links of their own (the engine then shows what their overlap costs)."""
    cursors = [[list(stream), 0, stream[0].repeat if stream else 0] for stream in stage]
    totals = np.zeros(len(stage))
    cache: dict[tuple, list[float]] = {}
    while True:
        live = [i for i, c in enumerate(cursors) if c[1] < len(c[0])]
        if not live:
            break
        classes: dict[tuple, list[int]] = {}
        for i in live:
            ph = cursors[i][0][cursors[i][1]]
            classes.setdefault((ph.bytes, ph.repeat, cursors[i][2]), []).append(i)
        run = min(cursors[i][2] for i in live)
        for members in classes.values():
            phases = [cursors[i][0][cursors[i][1]] for i in members]
            key = tuple(id(ph) for ph in phases)
            if key not in cache:
                cache[key] = _phase_costs(router, phases)
            for i, cost in zip(members, cache[key], strict=True):
                totals[i] += run * cost
        for i in live:
            c = cursors[i]
            c[2] -= run
            if c[2] == 0:
                c[1] += 1
                c[2] = c[0][c[1]].repeat if c[1] < len(c[0]) else 0
    return float(totals.max()) if len(totals) else 0.0


def schedule_time_s(schedule: Schedule, router: Router) -> float:
    """The alpha-beta time of a schedule on a placement (see the module docstring)."""
    return sum(stage_time_s(router, stage) for stage in schedule.stages)
