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
    """Cost of each of several phases that run at the same time (one per stream), all moving
    the same bytes per flow (streams in lockstep): per flow, its route latency plus bytes times
    its busiest link's load per byte over capacity. The per-byte part depends only on the
    routes, so it is worked out once per set of patterns (a step prices one pattern at many
    sizes) and kept in the router's `prices`."""
    nbytes = {ph.bytes for ph in phases}
    if len(nbytes) > 1:
        raise ValueError("phases priced together move the same bytes per flow")
    key = tuple(id(ph.pattern) for ph in phases)
    memo = getattr(router, "prices", None)
    hit = memo.get(key) if memo is not None else None
    if hit is None:
        hit = (tuple(ph.pattern for ph in phases), _per_byte(router, [ph.pattern for ph in phases]))
        if memo is not None:
            memo[key] = hit
    b = nbytes.pop()
    return [float((lat + b * k).max()) if len(lat) else 0.0 for lat, k in hit[1]]


def _per_byte(router: Router, patterns: list) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per pattern, (each flow's route latency, its busiest link's load per byte over capacity)
    when every pattern's flows move one byte each (times their weight) at once."""
    cap = router.capacity
    routed = [router.routes(p) for p in patterns]
    per_entry = []
    for r in routed:
        w = np.repeat(np.ones(r.n_flows) if r.weight is None else np.asarray(r.weight, float), np.diff(r.indptr))
        if r.frac is not None:
            w *= r.frac  # in place: an all-pairs DCN pattern has tens of millions of entries
        per_entry.append(w)
    links = routed[0].links if len(routed) == 1 else np.concatenate([r.links for r in routed])
    weights = per_entry[0] if len(routed) == 1 else np.concatenate(per_entry)
    del per_entry
    if 16 * len(links) < len(cap):  # a few links of a large fabric: work on those only
        used, local = np.unique(links, return_inverse=True)
        local = local.ravel()
    else:
        used, local = slice(None), links
    load = np.bincount(local, weights=weights, minlength=len(cap) if isinstance(used, slice) else len(used))
    c = cap[used]
    link_time = np.divide(load, c, out=np.zeros_like(load), where=c > 0)
    out, at = [], 0
    for r in routed:
        n_entries = len(r.links)
        hops = np.diff(r.indptr)
        t = np.zeros(r.n_flows)
        has = hops > 0
        if has.any():
            t[has] = np.maximum.reduceat(link_time[local[at:at + n_entries]], r.indptr[:-1][has])
        out.append((np.asarray(r.latency_s, float), t))
        at += n_entries
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


class _Sampled:
    """A router that answers with `Router.sample`: some of each pattern's flows."""

    def __init__(self, router: Router, max_flows: int):
        self.placement, self._router, self._max = router.placement, router, max_flows
        self.capacity = router.capacity
        self.prices: dict = {}
        self._cache: dict[int, tuple] = {}

    def routes(self, pattern):
        if id(pattern) not in self._cache:
            self._cache[id(pattern)] = (pattern, self._router.sample(pattern, self._max))
        return self._cache[id(pattern)][1]


def schedule_bound_s(schedule: Schedule, router: Router, max_flows: int) -> float:
    """A lower bound of `schedule_time_s` that routes at most ~`max_flows` flows per pattern:
    the same model on the flows from the first representative chips only. Every link carries
    at most its full load, and every flow priced is a flow of the phase, so each phase, stage
    and the schedule cost at most what they cost in full. Exact where the bottleneck is the
    sampled chips' own links (a chip's link to its NIC carries only its flows)."""
    return schedule_time_s(schedule, _Sampled(router, max_flows))
