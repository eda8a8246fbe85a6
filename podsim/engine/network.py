"""The flow-level network: one SimPy process that owns every active flow of a simulation.

Flows arrive in batches (one phase of one stream of one collective); each batch reports back
once its last flow is delivered. Rates are max-min fair over the links (maxmin.py) and are
recomputed only when flows start or end. The next completion is a single `env.timeout`
stamped with a generation counter: when rates change before it fires, the stamp no longer
matches and the timer is ignored (SimPy timeouts cannot be cancelled). A flow is delivered
its route latency after its last byte leaves (cut-through: alpha + bytes / rate). A multipath
flow lists each link once with the fraction of its bytes that crosses it (`frac`).

A step makes ~40k such changes on ~40 active flows, so the per-event cost is numpy call
overhead: each distinct batch's arrays are worked out once (`_Shape`), flow state lives in a
few stacked arrays, and rates are remembered per exact set of active routes (a step's layers
repeat a few dozen sets).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import simpy

from podsim.engine.validate import RateValidator
from podsim.errors import PodsimError
from podsim.maxmin import active_links, max_min_rates


class CountingEnvironment(simpy.Environment):
    """A SimPy environment that counts the events it processes (the engine's `events`)."""

    def __init__(self):
        super().__init__()
        self.events_processed = 0

    def step(self) -> None:
        self.events_processed += 1
        super().step()


class _Batch:
    __slots__ = ("left", "delivery", "callback")

    def __init__(self, left: int, delivery: float, callback: Callable[[], None]):
        self.left = left
        self.delivery = delivery
        self.callback = callback


class _Shape:
    """What a batch of flows adds to the network, worked out once per distinct set of submitted
    arrays: a model's layers repeat a handful of phases, so most batches reuse one."""

    __slots__ = ("n", "left", "instant", "instant_lat", "max_instant_lat", "flows", "ids", "entries", "weight",
                 "link_bytes")

    def __init__(self, indptr: np.ndarray, links: np.ndarray, nbytes: np.ndarray, latency: np.ndarray,
                 frac: np.ndarray):
        hops = np.diff(indptr)
        instant = (hops == 0) | (nbytes <= 0)
        keep = ~instant
        k = int(keep.sum())
        on_kept = np.repeat(keep, hops)
        self.n, self.left = len(nbytes), k
        self.instant = np.flatnonzero(instant)
        self.instant_lat = latency[instant]
        self.max_instant_lat = float(self.instant_lat.max(initial=0.0))
        # rows: bytes left, size, rate, latency (see FlowNetwork); ids relative to the batch's first
        self.flows = np.array([nbytes[keep], nbytes[keep], np.zeros(k), latency[keep]], float)
        self.ids = np.array([np.zeros(k, np.int64), np.flatnonzero(keep)], np.int64)
        self.entries = np.array([np.repeat(np.arange(k), hops[keep]), links[on_kept]], np.int64)
        self.weight = np.asarray(frac[on_kept], float)
        self.link_bytes = np.repeat(nbytes, hops) * frac


def _runs(slots: np.ndarray, delivery: np.ndarray):
    """(slot, flows, latest delivery) of each batch among finished flows. Flows sit in
    submission order, so each batch's are one run of equal slots. This runs per event on a
    few dozen flows: a plain loop for a handful, else as few numpy calls as will do."""
    if len(slots) <= 4:
        out: list[list] = []
        for slot, d in zip(slots.tolist(), delivery.tolist(), strict=True):
            if out and out[-1][0] == slot:
                out[-1][1] += 1
                out[-1][2] = max(out[-1][2], d)
            else:
                out.append([slot, 1, d])
        return out
    new = np.empty(len(slots), bool)
    new[0] = True
    np.not_equal(slots[1:], slots[:-1], out=new[1:])
    starts = new.nonzero()[0]
    at = starts.tolist() + [len(slots)]
    counts = [b - a for a, b in zip(at[:-1], at[1:], strict=True)]
    return zip(slots[starts].tolist(), counts, np.maximum.reduceat(delivery, starts).tolist(), strict=True)


_SOLVED_ENTRIES = 4096  # remember rates of sets of routes up to this many entries ...
_SOLVED_BYTES = 2**24  # ... in keys of up to 16 MiB in all (then start afresh)
_NO_FLOWS = np.empty((4, 0))
_NO_IDS = np.empty((2, 0), np.int64)
_NO_WEIGHT = np.empty(0)


class FlowNetwork:
    """Active flows on the links of one fabric; per-owner (job) bytes and peak utilisation
    per link (a flow puts all its bytes on every link of its route).

    Active flows are columns of `_flows` (rows: bytes left, size, rate, route latency) and
    `_ids` (rows: batch slot, flow id), in submission order; route entries are columns of
    `_entries` (rows: flow column, link) with `_weight` the fraction of the flow's bytes."""

    def __init__(self, env: simpy.Environment, capacity: np.ndarray, owners: int = 1,
                 validator: RateValidator | None = None):
        self.env = env
        self.capacity = np.asarray(capacity, float)
        n_links = len(self.capacity)
        self._flows, self._ids, self._entries, self._weight = _NO_FLOWS, _NO_IDS, _NO_IDS, _NO_WEIGHT
        self._shapes: dict[tuple, tuple] = {}
        self._solved: dict[bytes, np.ndarray] = {}
        self._solved_bytes = 0
        self._pending: list[tuple] = []
        self._batches: dict[int, _Batch] = {}
        self._next_slot = 0
        self._t = 0.0
        self._gen = 0
        self.link_bytes = np.zeros((owners, n_links))
        self.link_peak_utilisation = np.zeros(n_links)
        self.flows = 0
        self.validator = validator
        self._wake = env.event()
        env.process(self._run())

    # --- interface -----------------------------------------------------------------------
    def submit(self, indptr: np.ndarray, links: np.ndarray, nbytes: np.ndarray, latency_s: np.ndarray,
               owner: int, callback: Callable[[], None], frac: np.ndarray | None = None) -> None:
        """Start flows now; `callback()` runs once every one of them is delivered. `frac[i]`
        is the fraction of its flow's bytes on entry i (default: all of them). The arrays are
        read once per identity and kept: submit them again unchanged, never edited in place."""
        key = (id(indptr), id(links), id(nbytes), id(latency_s), id(frac))
        hit = self._shapes.get(key)
        if hit is None:
            cap = self.capacity[links]
            if cap.size and not (np.isfinite(cap).all() and (cap > 0).all()):  # a flow at rate 0 never finishes
                bad = int(np.asarray(links)[~(np.isfinite(cap) & (cap > 0))][0])
                raise PodsimError(f"a flow crosses link {bad} of capacity {self.capacity[bad]:g} B/s; link bandwidths must be finite and > 0")
            nb = np.asarray(nbytes, float)
            fr = np.ones(len(links)) if frac is None else np.asarray(frac, float)
            if len(self._shapes) >= 4096:  # callers that submit fresh arrays every time
                self._shapes.clear()
            # the key's arrays are kept alive with it, so their ids cannot be reused meanwhile
            hit = self._shapes[key] = ((indptr, links, nb, latency_s, fr), _Shape(indptr, links, nb, latency_s, fr),
                                       (indptr, links, nbytes, latency_s, frac))
        self._pending.append((hit[0], hit[1], owner, callback))
        if not self._wake.triggered:
            self._wake.succeed()

    # --- the manager process -------------------------------------------------------------
    def _run(self):
        while True:
            yield self._wake
            self._wake = self.env.event()
            now = self.env.now
            dt = now - self._t
            if dt > 0 and self._flows.shape[1]:
                self._flows[0] -= self._flows[2] * dt
                if self.validator is not None:
                    self.validator.epoch(self._t, now, self._ids[1], self._flows[2])
            self._t = now
            changed = self._admit(now)
            changed |= self._retire(now)
            if changed:
                self._reallocate()
            self._arm()

    def _admit(self, now: float) -> bool:
        if not self._pending:
            return False
        flows, ids, entries, weight = [self._flows], [self._ids], [self._entries], [self._weight]
        n = self._flows.shape[1]
        for args, s, own, cb in self._pending:
            slot = self._next_slot
            self._next_slot += 1
            fid0 = self.validator.batch(*args[:4], now, args[4]) if self.validator is not None else self.flows
            self.flows += s.n
            b = _Batch(s.left, now + s.max_instant_lat, cb)
            if len(s.instant) and self.validator is not None:
                self.validator.finished(fid0 + s.instant, np.full(len(s.instant), now), now + s.instant_lat)
            self._batches[slot] = b
            if b.left == 0:
                self._fire(slot, now)
                continue
            flows.append(s.flows)
            i = s.ids.copy()
            i[0] = slot
            i[1] += fid0
            ids.append(i)
            e = s.entries.copy()
            e[0] += n
            entries.append(e)
            weight.append(s.weight)
            # a batch crosses a few dozen links: add in place, not a fabric-long bincount per batch
            np.add.at(self.link_bytes[own], args[1], s.link_bytes)
            n += s.left
        self._pending.clear()
        if len(flows) > 1:
            self._flows = np.concatenate(flows, axis=1)
            self._ids = np.concatenate(ids, axis=1)
            self._entries = np.concatenate(entries, axis=1)
            self._weight = np.concatenate(weight)
        return True

    def _retire(self, now: float) -> bool:
        fl = self._flows
        if not fl.shape[1]:
            return False
        done = fl[0] <= 1e-9 * fl[1] + fl[2] * 1e-12
        idx = done.nonzero()[0]  # (np.flatnonzero and fl[3, idx] cost µs each; this runs per event)
        if not len(idx):
            return False
        delivery = now + fl[3][idx]
        if self.validator is not None:
            self.validator.finished(self._ids[1][idx], np.full(len(idx), now), delivery)
        for slot, c, d in _runs(self._ids[0][idx], delivery):
            b = self._batches[slot]
            b.left -= c
            b.delivery = max(b.delivery, d)
            if b.left == 0:
                self._fire(slot, now)
        if len(idx) == fl.shape[1]:
            self._flows, self._ids, self._entries, self._weight = _NO_FLOWS, _NO_IDS, _NO_IDS, _NO_WEIGHT
            return True
        keep = ~done
        new_index = np.empty(len(keep), np.int64)  # kept flows' new columns (a bool cumsum is slower)
        new_index[keep] = np.arange(len(keep) - len(idx))
        ekeep = keep[self._entries[0]]
        e = self._entries.compress(ekeep, axis=1)  # not [:, mask]: that comes out column-major
        e[0] = new_index[e[0]]
        self._entries, self._weight = e, self._weight[ekeep]
        self._flows, self._ids = fl.compress(keep, axis=1), self._ids.compress(keep, axis=1)
        return True

    def _fire(self, slot: int, now: float) -> None:
        b = self._batches.pop(slot)
        delay = b.delivery - now
        if delay <= 0:
            b.callback()
        else:
            ev = self.env.timeout(delay)
            ev.callbacks.append(lambda _ev, cb=b.callback: cb())

    def _reallocate(self) -> None:
        """Max-min fair rates of the active flows. The rates depend only on the routes, so a
        step's repeated layers hit the same few sets of routes again and again (the 4-pod GPT-3
        step of bench_fleet.py solves 33,764 times over 21 distinct sets; 33,966 over 24 under
        dcn.ecmp hash): remember them, keyed by the exact route arrays."""
        if not self._flows.shape[1]:
            return
        key = self._entries.tobytes() + self._weight.tobytes() if len(self._weight) <= _SOLVED_ENTRIES else None
        hit = self._solved.get(key) if key is not None else None
        if hit is None:
            # work on the links active flows cross, not the whole fabric (35k links on a v4
            # pod, 150k on four)
            ef, el = self._entries
            used, local = active_links(el, len(self.capacity))
            cap = self.capacity[used]
            rate = max_min_rates(ef, local, self._flows.shape[1], cap, self._weight)
            load = np.bincount(local, weights=rate[ef] * self._weight, minlength=len(used))
            # peaks only grow, so a remembered set's utilisation is in them already: raise
            # them on a solve, not on every hit
            self.link_peak_utilisation[used] = np.maximum(self.link_peak_utilisation[used], load / cap)
            hit = rate
            if key is not None:
                if self._solved_bytes > _SOLVED_BYTES:
                    self._solved.clear()
                    self._solved_bytes = 0
                self._solved[key] = hit
                self._solved_bytes += len(key)
        self._flows[2] = hit

    def _arm(self) -> None:
        fl = self._flows
        if not fl.shape[1]:
            return
        self._gen += 1
        gen = self._gen
        dt = float((fl[0] / fl[2]).min())
        ev = self.env.timeout(max(dt, 0.0))
        ev.callbacks.append(lambda _ev: self._timer(gen))

    def _timer(self, gen: int) -> None:
        if gen == self._gen and not self._wake.triggered:
            self._wake.succeed()
