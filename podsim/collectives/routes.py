"""Routing a pattern's flows on a job's placement, and the symmetry fast path.

`Placement` is a fabric with a job's slices. `Router.routes(pattern)` gives each flow its
links (ICI routes inside a slice, `dcn_routes` between slices) and its latency (the sum of
its links' latencies), cached per pattern.

Symmetry fast path: on a plain torus slice, the translations of the torus are automorphisms
of its links and (for even shifts) of its dimension-order routes. When every pattern in play
is unchanged by translations with periods P (per axis), max-min rates are the same on every
translate of a flow, so it is enough to keep the flows whose source lies in the fundamental
domain (coordinates < P) and to fold every link onto its representative (`canon_link`): the
load a representative link sees from the kept flows equals the load each link of its orbit
carries in the full simulation (orbits of flows and of links have the same size). One ring
stands for all identical rings; one chip of a translation-invariant pattern for all chips.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from podsim.collectives.schedule import Pattern
from podsim.errors import PodsimError
from podsim.topology import Fabric, SliceView, dcn_routes, slice_routes
from podsim.trace.model import SLICE_AXES


@dataclass(frozen=True, eq=False)
class Symmetry:
    """Translations with `periods` (per slice axis) of one plain torus slice."""

    view: SliceView
    periods: tuple[int, ...]
    keep: np.ndarray  # bool over the fabric's chips: the fundamental domain
    canon_link: np.ndarray  # fabric link id -> representative link id
    multiplicity: int  # flows (and links) each representative stands for
    # Slice folding (a multislice job): chips of the first slice; patterns whose flows leave
    # it cross the DCN and are routed in full (multiplicity 1).
    first_slice: np.ndarray | None = None


def pattern_periods(pattern: Pattern, view: SliceView) -> tuple[int, ...]:
    """Translation periods (per slice axis) under which the pattern's full flow set is unchanged."""
    lay = pattern.layout
    out = []
    for a, n in enumerate(view.shape):
        span = lay.span[a] if a < len(lay.span) else 0
        name = SLICE_AXES[a]
        if span == 0:
            period = 1
        elif span < n:
            period = span
        elif name in lay.axes:
            period = pattern.periods[lay.axes.index(name)] * (n // lay.grid[lay.axes.index(name)])
        else:
            period = 1
        out.append(period)
    return tuple(out)


def translation_symmetry(view: SliceView, patterns: Sequence[Pattern]) -> Symmetry | None:
    """The largest translation symmetry every pattern shares on this slice, or None when the
    slice is not a plain torus (meshes are cut on unwrapped axes; twisted tori and switched
    GPU slices are not handled) or when nothing would be saved."""
    slc = view.slice
    if slc.spec.kind not in ("cubes", "rectangle") or slc.twisted:
        return None
    if any(lay_dcn for p in patterns for lay_dcn in p.layout.dcn):
        return None
    shape = view.shape
    periods = []
    for a, n in enumerate(shape):
        if not slc.wrap[a]:
            periods.append(n)
            continue
        per = 1
        for pat in patterns:
            per = math.lcm(per, pattern_periods(pat, view)[a])
        if n % 2 == 0:
            per = math.lcm(per, 2)  # ties on even rings are broken by the source's parity
        periods.append(per if n % per == 0 else n)
    mult = math.prod(n // p for n, p in zip(shape, periods, strict=True))
    if mult == 1:
        return None
    fab = view.fabric
    coords = view.coords.astype(np.int64)
    canon_local = np.ravel_multi_index(tuple((coords % np.array(periods)).T), shape)
    keep = np.zeros(fab.n_chips, bool)
    keep[view.chips[(coords < np.array(periods)).all(1)]] = True
    canon = np.arange(fab.n_links)
    live = view.port_link >= 0
    rep = view.port_link[canon_local]
    if (rep[live] < 0).any():
        return None
    canon[view.port_link[live]] = rep[live]
    cap, lat = fab.link_capacity_bytes_per_s, fab.link_latency_s
    if not (np.array_equal(cap, cap[canon]) and np.array_equal(lat, lat[canon])):
        return None
    return Symmetry(view, tuple(periods), keep, canon, mult)


def slice_symmetry(views: Sequence[SliceView], patterns: Sequence[Pattern]) -> Symmetry | None:
    """Identical slices of a multislice job run the same SPMD program, and ICI flows never
    leave their slice or share a link with DCN flows (those go chip -> NIC -> ...), so the
    ICI flows of the first slice stand for every slice's: its links represent the matching
    links of the others, and inside it the translation symmetry folds further. Patterns whose
    flows cross slices are routed in full. None when the slices differ, or a pattern mixes
    intra- and inter-slice flows (its ICI load would differ between slices)."""
    if len(views) < 2:
        return None
    v0 = views[0]
    spec = v0.slice.spec
    if any(v.slice.spec != spec or v.slice.twisted != v0.slice.twisted for v in views):
        return None
    fab = v0.fabric
    first = np.zeros(fab.n_chips, bool)
    first[v0.chips] = True
    inside = []
    for pat in patterns:
        src, dst, _ = pat.flows(first)
        if len(dst) == 0:
            continue
        stays = first[dst]
        if stays.all():
            inside.append(pat)
        elif stays.any():
            return None
    canon = np.arange(fab.n_links)
    live = v0.port_link >= 0
    for v in views[1:]:
        if not np.array_equal(v.port_link >= 0, live):
            return None
        canon[v.port_link[live]] = v0.port_link[live]
    inner = translation_symmetry(v0, inside) if inside else None
    if inner is not None:
        canon = inner.canon_link[canon]
        keep, periods, mult = inner.keep, inner.periods, inner.multiplicity * len(views)
    else:
        keep, periods, mult = first, tuple(v0.shape), len(views)
    cap, lat = fab.link_capacity_bytes_per_s, fab.link_latency_s
    if not (np.array_equal(cap, cap[canon]) and np.array_equal(lat, lat[canon])):
        return None
    return Symmetry(v0, periods, keep, canon, mult, first_slice=first)


@dataclass(frozen=True, eq=False)
class PatternRoutes:
    """A pattern's routed flows (under a symmetry: the representatives only)."""

    src: np.ndarray
    dst: np.ndarray
    weight: np.ndarray | None
    indptr: np.ndarray
    links: np.ndarray
    latency_s: np.ndarray
    multiplicity: int

    @property
    def n_flows(self) -> int:
        return len(self.src)


@dataclass(frozen=True, eq=False)
class Placement:
    """A fabric with the slices of one job (or of several jobs sharing it)."""

    fabric: Fabric
    views: tuple[SliceView, ...]
    slice_of_chip: np.ndarray = field(init=False, repr=False)
    local_of_chip: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        s = np.full(self.fabric.n_chips, -1, np.int64)
        loc = np.full(self.fabric.n_chips, -1, np.int64)
        for i, v in enumerate(self.views):
            s[v.chips] = i
            loc[v.chips] = np.arange(v.n)
        object.__setattr__(self, "slice_of_chip", s)
        object.__setattr__(self, "local_of_chip", loc)

    def route(self, src: np.ndarray, dst: np.ndarray):
        """(indptr, links) of flows between global chips: ICI inside a slice, DCN between."""
        src = np.asarray(src, np.int64)
        dst = np.asarray(dst, np.int64)
        ss, sd = self.slice_of_chip[src], self.slice_of_chip[dst]
        parts = []
        for i, v in enumerate(self.views):
            sel = np.flatnonzero((ss == i) & (sd == i))
            if len(sel):
                parts.append((sel, slice_routes(v, self.local_of_chip[src[sel]], self.local_of_chip[dst[sel]])))
        sel = np.flatnonzero((ss != sd) | (ss < 0))
        if len(sel):
            parts.append((sel, dcn_routes(self.fabric, src[sel], dst[sel])))
        hops = np.zeros(len(src), np.int64)
        for sel, r in parts:
            hops[sel] = r.hops
        indptr = np.concatenate([[0], np.cumsum(hops)]).astype(np.int64)
        links = np.empty(indptr[-1], np.int64)
        for sel, r in parts:
            start = np.repeat(indptr[sel], r.hops)
            offset = np.arange(len(r.links)) - np.repeat(r.indptr[:-1], r.hops)
            links[start + offset] = r.links
        return indptr, links


MAX_FLOWS = 2_000_000
"""Most flows one pattern may route at once (memory: every flow keeps its route's links)."""


class Router:
    """Routes of patterns on a placement, optionally folded by a symmetry; cached."""

    def __init__(self, placement: Placement, symmetry: Symmetry | None = None):
        self.placement = placement
        self.symmetry = symmetry
        self._cache: dict[int, tuple[Pattern, PatternRoutes]] = {}

    def routes(self, pattern: Pattern) -> PatternRoutes:
        hit = self._cache.get(id(pattern))
        if hit is not None:
            return hit[1]
        sym = self.symmetry
        if sym is not None and sym.first_slice is not None:
            _, dst, _ = pattern.flows(sym.first_slice)
            if len(dst) and not sym.first_slice[dst].all():
                sym = None  # crosses slices: every flow, on the DCN's own links
        n = pattern.n_flows // (1 if sym is None else sym.multiplicity)
        if n > MAX_FLOWS:
            raise PodsimError(f"{pattern.name} on group {pattern.layout.name} has {n:,} flows to route, more than the "
                              f"{MAX_FLOWS:,} podsim simulates at once; use a smaller group, another algorithm or the fast path")
        src, dst, weight = pattern.flows(None if sym is None else sym.keep)
        indptr, links = self.placement.route(src, dst)
        lat_link = self.placement.fabric.link_latency_s
        flow_of = np.repeat(np.arange(len(src)), np.diff(indptr))
        latency = np.bincount(flow_of, weights=lat_link[links], minlength=len(src))
        if sym is not None:
            links = sym.canon_link[links]
        pr = PatternRoutes(src, dst, weight, indptr, links, latency, 1 if sym is None else sym.multiplicity)
        self._cache[id(pattern)] = (pattern, pr)
        return pr


class RouterPool:
    """Routers of one placement, one per symmetry, so route caches are shared."""

    def __init__(self, placement: Placement):
        self.placement = placement
        self._routers: dict[tuple, Router] = {}

    def router(self, patterns: Sequence[Pattern], fold: bool = True) -> Router:
        """The router for a set of patterns that run together; `fold` uses the symmetry they
        share (if any) so only representative flows are routed."""
        sym = None
        if fold and len(self.placement.views) == 1:
            sym = translation_symmetry(self.placement.views[0], patterns)
        elif fold:
            sym = slice_symmetry(self.placement.views, patterns)
        key = (sym.periods, sym.first_slice is not None) if sym is not None else ()
        if key not in self._routers:
            self._routers[key] = Router(self.placement, sym)
        return self._routers[key]
