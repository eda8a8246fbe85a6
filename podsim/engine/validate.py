"""The one validator every simulation in the tests runs through: `validate_rates`.

A `Recording` keeps what the flow network did — every flow's route, size, submit, finish and
delivery times, and the rate of every active flow in every interval between rate changes —
and `validate_rates` checks it independently of the code that produced it:

1. bytes delivered equal bytes sent (the integral of each flow's rate is its size);
2. no link is above its capacity at any time;
3. no flow is faster than its bottleneck: its rate never exceeds the capacity of any link on
   its route, it has a saturated link on which no flow is faster (max-min fairness), and it
   is not delivered sooner than its size over its slowest link plus its route latency.

`validating()` turns recording on for every simulation inside it and validates each one.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import numpy as np

_TOL = 1e-6


class EngineInvariantError(AssertionError):
    """A simulation broke one of the flow network's invariants (a bug in the engine)."""


@dataclass
class Recording:
    capacity: np.ndarray
    batches: list = field(default_factory=list)  # (first fid, indptr, links, size, latency, t_submit)
    finished: list = field(default_factory=list)  # (fids, t_finish, t_delivery)
    epochs: list = field(default_factory=list)  # (t0, t1, fids, rates)
    n_flows: int = 0

    def add_batch(self, indptr, links, size, latency, t) -> int:
        fid0 = self.n_flows
        self.batches.append((fid0, indptr, links, size, latency, t))
        self.n_flows += len(size)
        return fid0

    def flow_table(self):
        """(start, hops, links, size, latency, t_submit) over all flow ids."""
        if not self.batches:
            e = np.empty(0)
            return e.astype(np.int64), e.astype(np.int64), e.astype(np.int64), e, e, e
        hops = np.concatenate([np.diff(b[1]) for b in self.batches])
        links = np.concatenate([b[2] for b in self.batches]).astype(np.int64)
        start = np.concatenate([[0], np.cumsum(hops)[:-1]]).astype(np.int64)
        size = np.concatenate([b[3] for b in self.batches])
        lat = np.concatenate([b[4] for b in self.batches])
        t_sub = np.concatenate([np.full(len(b[3]), b[5]) for b in self.batches])
        return start, hops, links, size, lat, t_sub


def _entries(start: np.ndarray, hops: np.ndarray, fids: np.ndarray):
    """(entry -> position in fids, entry -> index into the links array) of the given flows."""
    h = hops[fids]
    pos = np.repeat(np.arange(len(fids)), h)
    offs = np.arange(h.sum()) - np.repeat(np.cumsum(h) - h, h)
    return pos, np.repeat(start[fids], h) + offs


def validate_rates(rec: Recording) -> None:
    """Raise EngineInvariantError unless the recording keeps the three invariants."""
    cap = rec.capacity
    start, hops, links, size, lat, t_sub = rec.flow_table()
    n = rec.n_flows
    delivered = np.zeros(n)
    for t0, t1, fids, rates in rec.epochs:
        if len(fids) == 0:
            continue
        pos, ent = _entries(start, hops, fids)
        lk = links[ent]
        r = rates[pos]
        if not np.isfinite(rates).all() or (rates <= 0).any():
            raise EngineInvariantError(f"at t={t0:.9g} s a flow on a link has rate {rates.min()} (not finite and positive)")
        load = np.bincount(lk, weights=r, minlength=len(cap))
        over = load > cap * (1 + _TOL)
        if over.any():
            k = int(np.flatnonzero(over)[0])
            raise EngineInvariantError(f"link {k} carries {load[k]:.6g} B/s > capacity {cap[k]:.6g} at t={t0:.9g} s")
        # Faster than a link of its route?
        fast = r > cap[lk] * (1 + _TOL)
        if fast.any():
            k = int(np.flatnonzero(fast)[0])
            raise EngineInvariantError(f"flow {int(fids[pos[k]])} runs at {r[k]:.6g} B/s over link {int(lk[k])} of {cap[lk[k]]:.6g} B/s")
        # Max-min: every flow has a saturated link where no flow is faster.
        top = np.zeros(len(cap))
        np.maximum.at(top, lk, r)
        ok_entry = (load[lk] >= cap[lk] * (1 - _TOL)) & (r >= top[lk] * (1 - _TOL))
        has = np.zeros(len(fids), bool)
        has[pos[ok_entry]] = True
        if not has.all():
            k = int(np.flatnonzero(~has)[0])
            raise EngineInvariantError(f"flow {int(fids[k])} at {rates[k]:.6g} B/s has no bottleneck link at t={t0:.9g} s (rates are not max-min fair)")
        np.add.at(delivered, fids, rates * (t1 - t0))
    routed = hops > 0
    bad = routed & ~np.isclose(delivered, size, rtol=_TOL, atol=1e-6)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise EngineInvariantError(f"flow {k} delivered {delivered[k]:.9g} bytes of {size[k]:.9g} sent")
    if rec.finished:
        fids = np.concatenate([f[0] for f in rec.finished])
        t_fin = np.concatenate([f[1] for f in rec.finished])
        t_del = np.concatenate([f[2] for f in rec.finished])
        if len(np.unique(fids)) != n or len(fids) != n:
            raise EngineInvariantError(f"{n} flows sent, {len(np.unique(fids))} finished")
        slowest = np.full(n, np.inf)
        if len(links):
            flow_of = np.repeat(np.arange(n), hops)
            slowest = np.full(n, np.inf)
            np.minimum.at(slowest, flow_of, cap[links])
        need = np.where(routed, size / slowest, 0.0) + lat
        early = (t_del - t_sub[fids]) < need[fids] * (1 - _TOL) - 1e-12
        if early.any():
            k = int(np.flatnonzero(early)[0])
            raise EngineInvariantError(f"flow {int(fids[k])} delivered in {t_del[k] - t_sub[fids[k]]:.9g} s, faster than its bottleneck allows ({need[fids[k]]:.9g} s)")
        if not np.allclose(t_del, t_fin + lat[fids], rtol=1e-9, atol=1e-12):
            raise EngineInvariantError("a flow was delivered at a time other than its finish plus its route latency")
    elif n:
        raise EngineInvariantError(f"{n} flows sent, none finished")


class _Validating:
    def __init__(self):
        self.count = 0


_active: list[_Validating] = []


def recording_on() -> bool:
    return bool(_active)


def check(rec: Recording) -> None:
    """Validate a finished simulation's recording if a `validating()` block is open."""
    if _active:
        validate_rates(rec)
        for v in _active:
            v.count += 1


@contextlib.contextmanager
def validating():
    """Record and validate every simulation run inside the block; yields a counter."""
    v = _Validating()
    _active.append(v)
    try:
        yield v
    finally:
        _active.remove(v)
