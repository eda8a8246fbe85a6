"""Per-link load over time, recorded while the engine runs (for timelines and counters).

`record_link_load()` opens a block; every simulation inside it runs with a `LinkLoadRecorder`,
which keeps, for each interval between rate changes, the load on every link some flow crosses
(it reuses RateValidator's route bookkeeping, and checks its invariants too inside a
`validating()` block). Under the symmetry fast path only the
representative flows are simulated, so the links seen are their representatives (each carries
the same load as the links it stands for).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import numpy as np

from podsim.engine import validate
from podsim.engine.validate import RateValidator


class LinkLoadRecorder(RateValidator):
    """Keeps (t0, t1, links, load in B/s) per interval, using the validator's bookkeeping of
    routes; checks the invariants too when `check` (inside a `validating()` block)."""

    def __init__(self, capacity: np.ndarray, check: bool = False):
        super().__init__(capacity)
        self.check = check
        self.intervals: list[tuple[float, float, np.ndarray, np.ndarray]] = []

    def epoch(self, t0: float, t1: float, fids: np.ndarray, rates: np.ndarray) -> None:
        if not len(fids):
            return
        pos = self._find(fids)
        if t1 > t0 or self.check:  # the route entries, looked up once for both uses
            which, lk, w = self._entries(pos)
            if t1 > t0:
                used, local = np.unique(lk, return_inverse=True)
                load = np.bincount(local, weights=rates[which] * w, minlength=len(used))
                self.intervals.append((t0, t1, used, load))
            if self.check:
                self._check_rates(t0, fids, rates, which, lk, w)
        self._sent[pos] += rates * (t1 - t0)

    def finished(self, fids: np.ndarray, t_finish: np.ndarray, t_delivery: np.ndarray) -> None:
        if self.check:
            super().finished(fids, t_finish, t_delivery)
        elif len(fids):
            self.finished_flows += len(fids)
            self._forget(self._find(fids))


@dataclass
class LinkLoad:
    """The recorded intervals of the simulations run inside one `record_link_load()` block."""

    runs: list[LinkLoadRecorder] = field(default_factory=list)

    @property
    def last(self) -> LinkLoadRecorder | None:
        return self.runs[-1] if self.runs else None


def bytes_per_link(rec: LinkLoadRecorder) -> dict[int, float]:
    """Bytes each recorded link carried (the integral of its load)."""
    out: dict[int, float] = {}
    for t0, t1, links, load in rec.intervals:
        for k, v in zip(links.tolist(), (load * (t1 - t0)).tolist(), strict=True):
            out[k] = out.get(k, 0.0) + v
    return out


def link_series(rec: LinkLoadRecorder, link: int) -> list[tuple[float, float, float]]:
    """(t0, t1, load B/s) of one link over the intervals it was loaded, in time order."""
    out = []
    for t0, t1, links, load in rec.intervals:
        i = np.searchsorted(links, link)
        if i < len(links) and links[i] == link:
            out.append((t0, t1, float(load[i])))
    return out


@contextlib.contextmanager
def record_link_load(enabled: bool = True):
    """Record link load in every simulation run inside the block; yields a LinkLoad."""
    box = LinkLoad()
    if not enabled:
        yield box
        return

    def make(capacity: np.ndarray) -> LinkLoadRecorder:
        rec = LinkLoadRecorder(capacity, check=bool(validate._active))
        box.runs.append(rec)
        return rec

    stack = validate.recorders()
    stack.append(make)
    try:
        yield box
    finally:
        stack.remove(make)
