"""The Sax client's retries: every request a Saxml server turned away (RESOURCE_EXHAUSTED, its
live-request limit reached) is retried with exponential backoff until admitted.

google/saxml@fe1d6b48e5824e9d89b921e7d339074a43f0351b saxml/client/go/sax.go retries a query on
errors.ServerShouldRetry (Unavailable, ResourceExhausted, NotFound: saxml/common/errors.go) through
saxml/common/retrier.go: cenkalti/backoff's ExponentialBackOff with InitialInterval 10 ms and no
time limit (MaxElapsedTime 0), the library's RandomizationFactor 0.5, Multiplier 1.5 and
MaxInterval 60 s (cenkalti/backoff exponential.go). A request's k-th attempt draws its +-50%
from a hash of (seed, request, k), so the attempts' times do not depend on the order the
simulation visits them in; the requests' next attempts are arrays, so attempts that must fail
(the simulation knows when the next place can free) advance together, without events.
"""

from __future__ import annotations

import numpy as np

from podsim._arrays import splitmix64

INITIAL_S, MULTIPLIER, MAX_INTERVAL_S = 0.010, 1.5, 60.0
_MASK64 = (1 << 64) - 1


def _splitmix64(x: int) -> int:
    """`podsim._arrays.splitmix64` of one Python integer (the same bits, without arrays)."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


class SaxRetries:
    """The requests waiting to retry, as arrays: request id, next attempt's time, the interval
    after it, attempts so far. `earliest`, `admit` (it got in) and `fail` (it did not, and
    neither will its attempts before a time)."""

    def __init__(self, seed: int, capacity: int = 1024):
        self._key = np.uint64(_splitmix64(int(seed) & _MASK64))
        self.rid = np.empty(capacity, dtype=np.uint64)
        self.t = np.empty(capacity)
        self.interval = np.empty(capacity)
        self.k = np.empty(capacity, dtype=np.uint64)
        self.n = 0
        self.failed = 0  # attempts that failed, over the run

    def __len__(self) -> int:
        return self.n

    def _jitter(self, rid: np.ndarray, k: np.ndarray) -> np.ndarray:
        """The backoff's factors in [0.5, 1.5) for attempts `k` of requests `rid` (splitmix64)."""
        z = splitmix64((rid << np.uint64(20)) ^ k ^ self._key)
        return 0.5 + (z >> np.uint64(11)).astype(float) * 2.0**-53

    def add(self, rid: int, now: float) -> float:
        """Request `rid` was turned away at `now`: its first retry's time."""
        if self.n == len(self.t):
            self.rid, self.t, self.interval, self.k = (np.concatenate([a, np.empty_like(a)])
                                                       for a in (self.rid, self.t, self.interval, self.k))
        i = self.n
        self.rid[i], self.k[i] = rid, 1
        self.t[i] = now + INITIAL_S * self._jitter_one(rid, 0)
        self.interval[i] = INITIAL_S * MULTIPLIER
        self.n += 1
        return float(self.t[i])

    def earliest(self) -> tuple[float, int]:
        """(time, slot) of the next attempt; call only when some request waits."""
        i = int(np.argmin(self.t[:self.n]))
        return float(self.t[i]), i

    def admit(self, i: int) -> int:
        """Slot `i`'s request got in: drop it (the last slot moves to `i`); its id."""
        rid = int(self.rid[i])
        last = self.n - 1
        for a in (self.rid, self.t, self.interval, self.k):
            a[i] = a[last]
        self.n = last
        return rid

    def _jitter_one(self, rid: int, k: int) -> float:
        """`_jitter` of one attempt, in Python integers (the same bits)."""
        return 0.5 + (_splitmix64((rid << 20) ^ k ^ int(self._key)) >> 11) * 2.0**-53

    def fail_one(self, i: int, until: float = -np.inf) -> None:
        """`fail` for one slot, without arrays (the same times)."""
        rid, k, t, interval = int(self.rid[i]), int(self.k[i]), float(self.t[i]), float(self.interval[i])
        while True:
            t += interval * self._jitter_one(rid, k)
            k += 1
            interval = min(interval * MULTIPLIER, MAX_INTERVAL_S)
            self.failed += 1
            if not t < until:
                break
        self.t[i], self.k[i], self.interval[i] = t, k, interval

    def fail(self, slots, until: float = -np.inf) -> None:
        """The attempts of `slots` failed: draw each one's next, and go on drawing while it falls
        before `until` (those attempts fail too: nothing can free a place before then)."""
        idx = np.atleast_1d(np.asarray(slots, dtype=np.int64))
        while len(idx):
            self.t[idx] += self.interval[idx] * self._jitter(self.rid[idx], self.k[idx])
            self.k[idx] += np.uint64(1)
            self.interval[idx] = np.minimum(self.interval[idx] * MULTIPLIER, MAX_INTERVAL_S)
            self.failed += len(idx)
            idx = idx[self.t[idx] < until]

    def fail_before(self, until: float) -> None:
        """Every attempt before `until` fails."""
        self.fail(np.flatnonzero(self.t[:self.n] < until), until)
