"""A pattern's routes in parts (per slice, across slices), and joining them into one CSR."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from podsim.topology.multipath import PathDag


@dataclass(frozen=True, eq=False)
class RoutePart:
    """Routes of the flows `sel` of a pattern; `frac` None on single paths; `dag()` builds the
    minimal-path DAGs of multipath routes (for re-splitting by load)."""

    sel: np.ndarray
    indptr: np.ndarray
    links: np.ndarray
    frac: np.ndarray | None = None
    dag: Callable[[], PathDag] | None = None


def _subset(indptr: np.ndarray, links: np.ndarray, frac: np.ndarray | None, flows: np.ndarray):
    """The CSR routes of `flows` only."""
    hops = np.diff(indptr)[flows]
    idx = np.repeat(indptr[flows], hops) + (np.arange(hops.sum()) - np.repeat(np.cumsum(hops) - hops, hops))
    ip = np.concatenate([[0], np.cumsum(hops)]).astype(np.int64)
    return ip, links[idx], None if frac is None else frac[idx]


def join_parts(n_flows: int, parts: Sequence[RoutePart]):
    """(indptr, links, frac) of all flows from their parts (one part of every flow, in order:
    its own arrays, not a copy)."""
    if len(parts) == 1 and len(parts[0].sel) == n_flows:  # sel is sorted and distinct
        p = parts[0]
        return (np.asarray(p.indptr, np.int64), np.asarray(p.links, np.int64),
                np.ones(len(p.links)) if p.frac is None else np.asarray(p.frac, float))
    hops = np.zeros(n_flows, np.int64)
    for p in parts:
        hops[p.sel] = np.diff(p.indptr)
    indptr = np.concatenate([[0], np.cumsum(hops)]).astype(np.int64)
    links = np.empty(indptr[-1], np.int64)
    frac = np.ones(indptr[-1])
    for p in parts:
        h = np.diff(p.indptr)
        start = np.repeat(indptr[p.sel], h)
        offset = np.arange(len(p.links)) - np.repeat(p.indptr[:-1], h)
        links[start + offset] = p.links
        if p.frac is not None:
            frac[start + offset] = p.frac
    return indptr, links, frac


def route_sums(indptr: np.ndarray, links: np.ndarray, frac: np.ndarray, per_link: np.ndarray,
               chunk: int = 1 << 22) -> np.ndarray:
    """Per flow, the sum of per_link[link] x frac over its route's entries in route order (as
    one bincount over all entries would add them), a few million entries at a time so large
    patterns need no entry-sized temporaries beyond that."""
    n = len(indptr) - 1
    out = np.zeros(n)
    a = 0
    while a < n:
        b = max(a + 1, min(n, int(np.searchsorted(indptr, indptr[a] + chunk, side="right")) - 1))
        lo, hi = indptr[a], indptr[b]
        w = per_link[links[lo:hi]]
        w *= frac[lo:hi]
        out[a:b] = np.bincount(np.repeat(np.arange(b - a), np.diff(indptr[a:b + 1])), weights=w, minlength=b - a)
        a = b
    return out
