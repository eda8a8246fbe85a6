"""The flow-level network: one SimPy process that owns every active flow of a simulation.

Flows arrive in batches (one phase of one stream of one collective); each batch reports back
once its last flow is delivered. Rates are max-min fair over the links (maxmin.py) and are
recomputed only when flows start or end. The next completion is a single `env.timeout`
stamped with a generation counter: when rates change before it fires, the stamp no longer
matches and the timer is ignored (SimPy timeouts cannot be cancelled). A flow is delivered
its route latency after its last byte leaves (cut-through: alpha + bytes / rate). A multipath
flow lists each link once with the fraction of its bytes that crosses it (`frac`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import simpy

from podsim.engine.maxmin import active_links, max_min_rates
from podsim.engine.validate import RateValidator
from podsim.errors import PodsimError


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


class FlowNetwork:
    """Active flows on the links of one fabric; per-owner (job) bytes and peak utilisation
    per link (a flow puts all its bytes on every link of its route)."""

    def __init__(self, env: simpy.Environment, capacity: np.ndarray, owners: int = 1,
                 validator: RateValidator | None = None):
        self.env = env
        self.capacity = np.asarray(capacity, float)
        n_links = len(self.capacity)
        f = np.empty(0)
        i = np.empty(0, np.int64)
        self._rem, self._size, self._rate, self._lat = f, f, f, f
        self._batch, self._owner, self._fid = i, i, i
        self._ef, self._el, self._ew = i, i, f
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
        is the fraction of its flow's bytes on entry i (default: all of them)."""
        cap = self.capacity[links]
        if cap.size and not (np.isfinite(cap).all() and (cap > 0).all()):  # a flow at rate 0 never finishes
            bad = int(np.asarray(links)[~(np.isfinite(cap) & (cap > 0))][0])
            raise PodsimError(f"a flow crosses link {bad} of capacity {self.capacity[bad]:g} B/s; link bandwidths must be finite and > 0")
        if frac is None:
            frac = np.ones(len(links))
        self._pending.append((indptr, links, np.asarray(nbytes, float), latency_s, owner, callback, np.asarray(frac, float)))
        if not self._wake.triggered:
            self._wake.succeed()

    # --- the manager process -------------------------------------------------------------
    def _run(self):
        while True:
            yield self._wake
            self._wake = self.env.event()
            now = self.env.now
            dt = now - self._t
            if dt > 0 and len(self._rem):
                self._rem -= self._rate * dt
                if self.validator is not None:
                    self.validator.epoch(self._t, now, self._fid, self._rate)
            self._t = now
            changed = self._admit(now)
            changed |= self._retire(now)
            if changed:
                self._reallocate()
            self._arm()

    def _admit(self, now: float) -> bool:
        if not self._pending:
            return False
        rem, rate, lat, batch, owner = [self._rem], [self._rate], [self._lat], [self._batch], [self._owner]
        fid, ef, el, ew = [self._fid], [self._ef], [self._el], [self._ew]
        n = len(self._rem)
        for indptr, links, nbytes, latency, own, cb, frac in self._pending:
            slot = self._next_slot
            self._next_slot += 1
            hops = np.diff(indptr)
            instant = (hops == 0) | (nbytes <= 0)
            fid0 = self.validator.batch(indptr, links, nbytes, latency, now, frac) if self.validator is not None else self.flows
            ids = fid0 + np.arange(len(nbytes))
            self.flows += len(nbytes)
            b = _Batch(int((~instant).sum()), now + float(latency[instant].max(initial=0.0)), cb)
            if instant.any() and self.validator is not None:
                self.validator.finished(ids[instant], np.full(int(instant.sum()), now), now + latency[instant])
            self._batches[slot] = b
            if b.left == 0:
                self._fire(slot, now)
                continue
            keep = ~instant
            k = int(keep.sum())
            rem.append(nbytes[keep])
            rate.append(np.zeros(k))
            lat.append(latency[keep])
            batch.append(np.full(k, slot, np.int64))
            owner.append(np.full(k, own, np.int64))
            fid.append(ids[keep])
            kh = hops[keep]
            # a batch crosses a few dozen links: add in place, not a fabric-long bincount per batch
            np.add.at(self.link_bytes[own], links, np.repeat(nbytes, hops) * frac)
            ef.append(n + np.repeat(np.arange(k), kh))
            el.append(links[np.repeat(keep, hops)])
            ew.append(frac[np.repeat(keep, hops)])
            n += k
        self._pending.clear()
        self._rem, self._rate = np.concatenate(rem), np.concatenate(rate)
        self._size = np.concatenate([self._size, *rem[1:]])
        self._lat, self._batch, self._owner = np.concatenate(lat), np.concatenate(batch), np.concatenate(owner)
        self._fid, self._ef, self._el = np.concatenate(fid), np.concatenate(ef), np.concatenate(el)
        self._ew = np.concatenate(ew)
        return True

    def _retire(self, now: float) -> bool:
        if not len(self._rem):
            return False
        done = self._rem <= 1e-9 * self._size + self._rate * 1e-12
        if not done.any():
            return False
        idx = np.flatnonzero(done)
        delivery = now + self._lat[idx]
        if self.validator is not None:
            self.validator.finished(self._fid[idx], np.full(len(idx), now), delivery)
        slots, inv, counts = np.unique(self._batch[idx], return_inverse=True, return_counts=True)
        latest = np.full(len(slots), -np.inf)
        np.maximum.at(latest, inv, delivery)
        for slot, c, d in zip(slots.tolist(), counts.tolist(), latest.tolist(), strict=True):
            b = self._batches[slot]
            b.left -= c
            b.delivery = max(b.delivery, d)
            if b.left == 0:
                self._fire(slot, now)
        keep = ~done
        new_index = np.cumsum(keep) - 1
        ekeep = keep[self._ef]
        self._ef = new_index[self._ef[ekeep]]
        self._el = self._el[ekeep]
        self._ew = self._ew[ekeep]
        self._rem, self._size, self._lat = self._rem[keep], self._size[keep], self._lat[keep]
        self._batch, self._owner, self._fid = self._batch[keep], self._owner[keep], self._fid[keep]
        self._rate = self._rate[keep]
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
        # Work on the links active flows cross, not the whole fabric (35k links on a v4 pod,
        # 150k on four).
        used, local = active_links(self._el, len(self.capacity))
        cap = self.capacity[used]
        self._rate = max_min_rates(self._ef, local, len(self._rem), cap, self._ew)
        load = np.bincount(local, weights=self._rate[self._ef] * self._ew, minlength=len(used))
        self.link_peak_utilisation[used] = np.maximum(self.link_peak_utilisation[used], load / cap)

    def _arm(self) -> None:
        if not len(self._rem):
            return
        self._gen += 1
        gen = self._gen
        dt = float((self._rem / self._rate).min())
        ev = self.env.timeout(max(dt, 0.0))
        ev.callbacks.append(lambda _ev: self._timer(gen))

    def _timer(self, gen: int) -> None:
        if gen == self._gen and not self._wake.triggered:
            self._wake.succeed()
