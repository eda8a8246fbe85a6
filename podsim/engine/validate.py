"""The one validator every simulation in the tests runs through: `RateValidator`.

It watches what the flow network does — every flow's route, size and submit time, the rate of
every active flow in every interval between rate changes, each flow's finish and delivery —
and checks it independently of the code that produced it:

1. bytes delivered equal bytes sent (the integral of each flow's rate is its size);
2. no link is above its capacity at any time;
3. no flow is faster than its bottleneck: its rate never exceeds the capacity of any link on
   its route, it has a saturated link on which no flow is faster (max-min fairness), and it
   is not delivered sooner than its size over its slowest link plus its route latency.

It checks as the simulation runs and forgets finished flows, so its memory follows the active
flows, not the whole run. `validate_rates(recording)` replays a stored `Recording` through it;
`validating()` attaches one to every simulation run inside the block.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field

import numpy as np

from podsim.errors import InternalError

_TOL = 1e-6
_I = np.empty(0, np.int64)
_F = np.empty(0)


class EngineInvariantError(InternalError):
    """A simulation broke one of the flow network's invariants (a bug in the engine, not bad
    input: the CLI exits 1 and asks for a report)."""


class RateValidator:
    """Online checks of one simulation (see the module docstring)."""

    def __init__(self, capacity: np.ndarray):
        self.capacity = np.asarray(capacity, float)
        self._fid, self._start, self._hops = _I, _I, _I
        self._size, self._lat, self._t_sub, self._sent = _F, _F, _F, _F
        self._pool = _I  # links of the active flows' routes
        self._wpool = _F  # the fraction of the flow's bytes on each of those links
        self.flows = 0
        self.finished_flows = 0

    # --- events ---------------------------------------------------------------------------
    def batch(self, indptr: np.ndarray, links: np.ndarray, size: np.ndarray, latency: np.ndarray, t: float,
              frac: np.ndarray | None = None) -> int:
        """Flows submitted at time t; returns the id of the first (ids are consecutive).
        `frac[i]`: the fraction of its flow's bytes on entry i (multipath; default 1)."""
        fid0 = self.flows
        n = len(size)
        self.flows += n
        self._start = np.concatenate([self._start, len(self._pool) + np.asarray(indptr[:-1], np.int64)])
        self._pool = np.concatenate([self._pool, np.asarray(links, np.int64)])
        self._wpool = np.concatenate([self._wpool, np.ones(len(links)) if frac is None else np.asarray(frac, float)])
        self._fid = np.concatenate([self._fid, fid0 + np.arange(n)])
        self._hops = np.concatenate([self._hops, np.diff(indptr)])
        self._size = np.concatenate([self._size, size])
        self._lat = np.concatenate([self._lat, latency])
        self._t_sub = np.concatenate([self._t_sub, np.full(n, float(t))])
        self._sent = np.concatenate([self._sent, np.zeros(n)])
        return fid0

    def epoch(self, t0: float, t1: float, fids: np.ndarray, rates: np.ndarray) -> None:
        """Flows `fids` held `rates` from t0 to t1."""
        if len(fids) == 0:
            return
        pos = self._find(fids)
        self._check_rates(t0, fids, rates, *self._entries(pos))
        self._sent[pos] += rates * (t1 - t0)

    def _check_rates(self, t0: float, fids: np.ndarray, rates: np.ndarray, which: np.ndarray, lk: np.ndarray,
                     w: np.ndarray) -> None:
        """Capacity and max-min fairness of `rates` on the flows' route entries (`_entries`)."""
        cap = self.capacity
        if not np.isfinite(rates).all() or (rates <= 0).any():
            raise EngineInvariantError(f"at t={t0:.9g} s a flow on a link has rate {rates.min()} (not finite and positive)")
        r = rates[which]
        load = np.bincount(lk, weights=r * w, minlength=len(cap))
        over = load > cap * (1 + _TOL)
        if over.any():
            k = int(np.flatnonzero(over)[0])
            raise EngineInvariantError(f"link {k} carries {load[k]:.6g} B/s > capacity {cap[k]:.6g} at t={t0:.9g} s")
        fast = r * w > cap[lk] * (1 + _TOL)
        if fast.any():
            k = int(np.flatnonzero(fast)[0])
            raise EngineInvariantError(f"flow {int(fids[which[k]])} puts {r[k] * w[k]:.6g} B/s on link {int(lk[k])} of {cap[lk[k]]:.6g} B/s")
        top = np.zeros(len(cap))
        np.maximum.at(top, lk, r)
        ok_entry = (load[lk] >= cap[lk] * (1 - _TOL)) & (r >= top[lk] * (1 - _TOL))
        has = np.zeros(len(fids), bool)
        has[which[ok_entry]] = True
        if not has.all():
            k = int(np.flatnonzero(~has)[0])
            raise EngineInvariantError(f"flow {int(fids[k])} at {rates[k]:.6g} B/s has no bottleneck link at t={t0:.9g} s (rates are not max-min fair)")

    def finished(self, fids: np.ndarray, t_finish: np.ndarray, t_delivery: np.ndarray) -> None:
        """Flows `fids` sent their last byte at t_finish and were delivered at t_delivery."""
        if len(fids) == 0:
            return
        pos = self._find(fids)
        size, hops, lat = self._size[pos], self._hops[pos], self._lat[pos]
        routed = hops > 0
        bad = routed & ~np.isclose(self._sent[pos], size, rtol=_TOL, atol=1e-6)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise EngineInvariantError(f"flow {int(fids[k])} delivered {self._sent[pos][k]:.9g} bytes of {size[k]:.9g} sent")
        which, lk, w = self._entries(pos)
        slowest = np.full(len(pos), np.inf)
        np.minimum.at(slowest, which, self.capacity[lk] / w)
        need = np.where(routed, size / slowest, 0.0) + lat
        took = t_delivery - self._t_sub[pos]
        early = took < need * (1 - _TOL) - 1e-12
        if early.any():
            k = int(np.flatnonzero(early)[0])
            raise EngineInvariantError(f"flow {int(fids[k])} delivered in {took[k]:.9g} s, faster than its bottleneck allows ({need[k]:.9g} s)")
        if not np.allclose(t_delivery, t_finish + lat, rtol=1e-9, atol=1e-12):
            raise EngineInvariantError("a flow was delivered at a time other than its finish plus its route latency")
        self.finished_flows += len(fids)
        self._forget(pos)

    def close(self) -> None:
        """The simulation ended: every flow must have been delivered."""
        if len(self._fid):
            raise EngineInvariantError(f"{self.flows} flows sent, {len(self._fid)} never finished (first: {int(self._fid[0])})")

    # --- bookkeeping ---------------------------------------------------------------------
    def _find(self, fids: np.ndarray) -> np.ndarray:
        pos = np.searchsorted(self._fid, fids)
        if (pos >= len(self._fid)).any() or not np.array_equal(self._fid[np.minimum(pos, len(self._fid) - 1)], fids):
            raise EngineInvariantError("the network reported a flow that is not active (never sent, or already finished)")
        return pos

    def _entries(self, pos: np.ndarray):
        """(entry -> index into pos, entry -> link, entry -> fraction of the flow's bytes) of
        the routes of the flows at `pos`."""
        h = self._hops[pos]
        which = np.repeat(np.arange(len(pos)), h)
        offs = np.arange(h.sum()) - np.repeat(np.cumsum(h) - h, h)
        at = np.repeat(self._start[pos], h) + offs
        return which, self._pool[at], self._wpool[at]

    def _forget(self, pos: np.ndarray) -> None:
        keep = np.ones(len(self._fid), bool)
        keep[pos] = False
        self._fid, self._start, self._hops = self._fid[keep], self._start[keep], self._hops[keep]
        self._size, self._lat, self._t_sub, self._sent = self._size[keep], self._lat[keep], self._t_sub[keep], self._sent[keep]
        if len(self._pool) > 2 * self._hops.sum() + 100_000:  # compact the route pool
            _, lk, w = self._entries(np.arange(len(self._fid)))
            self._start = np.concatenate([[0], np.cumsum(self._hops)[:-1]]).astype(np.int64) if len(self._hops) else _I
            self._pool, self._wpool = lk, w


@dataclass
class Recording:
    """A simulation written down (for tests that build one by hand): replay with validate_rates."""

    capacity: np.ndarray
    batches: list = field(default_factory=list)  # (indptr, links, size, latency, t_submit[, frac])
    epochs: list = field(default_factory=list)  # (t0, t1, fids, rates)
    finished: list = field(default_factory=list)  # (fids, t_finish, t_delivery)


def validate_rates(rec: Recording) -> None:
    """Raise EngineInvariantError unless the recording keeps the three invariants."""
    v = RateValidator(rec.capacity)
    for b in rec.batches:
        v.batch(*b)
    for e in rec.epochs:
        v.epoch(*e)
    for f in rec.finished:
        v.finished(*f)
    v.close()


class _Validating:
    def __init__(self):
        self.count = 0


_active: list[_Validating] = []


# Makers of validators that also record (engine/linkload.py), per thread (the dashboard runs
# sessions in threads); the innermost open one wins.
_local = threading.local()


def recorders() -> list:
    """This thread's stack of recorder makers."""
    if not hasattr(_local, "stack"):
        _local.stack = []
    return _local.stack


def validator_for(capacity: np.ndarray) -> RateValidator | None:
    """A validator for a new simulation if a recorder or a `validating()` block is open, else None."""
    stack = recorders()
    if stack:
        return stack[-1](capacity)
    return RateValidator(capacity) if _active else None


def check(v: RateValidator | None) -> None:
    """Close a finished simulation's validator and count it."""
    if v is None:
        return
    v.close()
    for a in _active:
        a.count += 1


@contextlib.contextmanager
def validating():
    """Validate every simulation run inside the block; yields a counter of those checked."""
    v = _Validating()
    _active.append(v)
    try:
        yield v
    finally:
        _active.remove(v)
