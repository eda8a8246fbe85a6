"""Array helpers shared across packages: distinct values that keep start-up light, and a hash.

numpy 2's `np.unique(a)` (no index or count outputs) asks `np.ma.is_masked`, which imports
numpy.ma on first use: tens of milliseconds of a small command's start-up (benchmarks/
bench_startup.py). These do the same by sorting, for the integer labels podsim uses.
"""

from __future__ import annotations

import numpy as np


def unique(a) -> np.ndarray:
    """The sorted distinct values of `a` (flattened), as `np.unique(a)` gives them."""
    s = np.sort(np.asarray(a), axis=None)
    if s.size < 2:
        return s
    keep = np.empty(s.size, bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def has_duplicates(a) -> bool:
    """Whether some value occurs twice in `a`."""
    s = np.sort(np.asarray(a), axis=None)
    return bool((s[1:] == s[:-1]).any())


def splitmix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser of each value: a well-spread 64-bit hash (wrapping uint64 arithmetic)."""
    z = x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))
