"""Routing a pattern's flows on a job's placement, and the symmetry fast path.

`Placement` is a fabric with a job's slices and a routing policy (`ROUTING_POLICIES`).
`Router.routes(pattern)` gives each flow its links (ICI routes inside a slice by the policy,
`ecmp_routes` between slices), the fraction of its bytes on each link (1 on a single path) and
its latency (the fraction-weighted sum of its links' latencies: every minimal path has the
same hop count), cached per pattern.

Symmetry fast path: on a plain torus slice, the translations of the torus are automorphisms
of its links and (for even shifts) of its dimension-order routes. When every pattern in play
is unchanged by translations with periods P (per axis), max-min rates are the same on every
translate of a flow, so it is enough to keep the flows whose source lies in the fundamental
domain (coordinates < P) and to fold every link onto its representative (`canon_link`): the
load a representative link sees from the kept flows equals the load each link of its orbit
carries in the full simulation (orbits of flows and of links have the same size). One ring
stands for all identical rings; one chip of a translation-invariant pattern for all chips. Multipath routes
are translation invariant on plain and twisted tori alike (both are Cayley graphs), so they
need no parity period, and a twisted torus folds patterns that every translation keeps (an
all-to-all over the whole slice).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from podsim.collectives.adaptive import adaptive_split
from podsim.collectives.dcnfold import DcnFold, fold_crossing
from podsim.collectives.routeparts import RoutePart, _subset, join_parts, route_sums
from podsim.collectives.schedule import Pattern
from podsim.errors import PodsimError
from podsim.topology import Fabric, SliceView, slice_routes
from podsim.topology.degraded import detour_routes
from podsim.topology.multipath import (
    ROUTING_POLICIES,
    path_dag,
    reduce_coords,
    split_routes,
)
from podsim.topology.routing import ecmp_routes
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
    dcn: DcnFold | None = None  # classes of the cross-slice flows (dcnfold), or None


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


def _invariant(view: SliceView, pattern: Pattern) -> bool:
    """Whether every translation of the (twisted) torus maps the pattern's flows onto its flows
    (checked on the unit translations, which generate them all)."""
    slc = view.slice
    if any(p != 1 for p in pattern_periods(pattern, view)):
        return False
    src, dst, w = pattern.flows(None)
    local = np.full(view.fabric.n_chips, -1, np.int64)
    local[view.chips] = np.arange(view.n)
    ls, ld = local[src], local[dst]
    if (ls < 0).any() or (ld < 0).any():
        return False
    w = np.ones(len(src)) if w is None else np.asarray(w, float)
    order = np.lexsort((ld, ls))
    want = (ls[order], ld[order], w[order])
    for d in range(len(view.shape)):
        step = np.zeros(len(view.shape), np.int64)
        step[d] = 1
        move = [np.ravel_multi_index(tuple(reduce_coords(view.coords[x] + step, slc.shape, slc.wrap, slc.twist).T), view.shape)
                for x in (ls, ld)]
        o = np.lexsort((move[1], move[0]))
        if not all(np.array_equal(a, b[o]) for a, b in zip(want, (move[0], move[1], w), strict=True)):
            return False
    return True


def translation_symmetry(view: SliceView, patterns: Sequence[Pattern], routing: str = "dimension_order") -> Symmetry | None:
    """The largest translation symmetry every pattern shares on this slice, or None when the
    slice is not a torus (meshes are cut on unwrapped axes; switched GPU slices are not
    handled), when it is twisted and routed dimension-order or the patterns are not invariant
    under every translation, or when nothing would be saved."""
    slc = view.slice
    if slc.spec.kind not in ("cubes", "rectangle") or slc.form != "native":  # a fold or scatter: links are not translates
        return None
    if slc.twisted and (routing == "dimension_order" or not all(_invariant(view, p) for p in patterns)):
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
        if n % 2 == 0 and routing == "dimension_order":
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


def slice_symmetry(views: Sequence[SliceView], patterns: Sequence[Pattern],
                   routing: str = "dimension_order", stays_memo: dict | None = None) -> Symmetry | None:
    """Identical slices of a multislice job run the same SPMD program, and ICI flows never
    leave their slice or share a link with DCN flows (those go chip -> NIC -> ...), so the
    ICI flows of the first slice stand for every slice's: its links represent the matching
    links of the others, and inside it the translation symmetry folds further. Patterns whose
    flows cross slices are routed in full. None when the slices differ, or a pattern mixes
    intra- and inter-slice flows (its ICI load would differ between slices). `stays_memo`
    keeps, per pattern on these views, whether its flows stay in the first slice."""
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
        hit = stays_memo.get(id(pat)) if stays_memo is not None else None
        if hit is None:  # (all stay, some stay) of the flows from the first slice
            stays = first[pat.flows(first)[1]]
            hit = (pat, len(stays) > 0 and bool(stays.all()), bool(stays.any()))
            if stays_memo is not None:
                stays_memo[id(pat)] = hit  # holds the pattern, so its id stays its own
        if hit[1]:
            inside.append(pat)
        elif hit[2]:
            return None
    canon = np.arange(fab.n_links)
    live = v0.port_link >= 0
    for v in views[1:]:
        if not np.array_equal(v.port_link >= 0, live):
            return None
        canon[v.port_link[live]] = v0.port_link[live]
    inner = translation_symmetry(v0, inside, routing) if inside else None
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
    frac: np.ndarray | None = None  # fraction of the flow's bytes on each entry (None: all)
    represented: int | None = None  # flows these stand for, when not n_flows x multiplicity

    @property
    def n_flows(self) -> int:
        return len(self.src)

    @property
    def flows_represented(self) -> int:
        return self.n_flows * self.multiplicity if self.represented is None else self.represented


@dataclass(frozen=True, eq=False)
class Placement:
    """A fabric with the slices of one job (or of several jobs sharing it), the routing policy
    inside slices (`dimension_order`, `shortest_paths`, `adaptive`) and the ICI links and chips
    that failed (fabric link / chip ids; a link fails with its reverse, a chip with its links):
    flows whose route would touch one go around (podsim.topology.degraded)."""

    fabric: Fabric
    views: tuple[SliceView, ...]
    routing: str = "dimension_order"
    failed_links: tuple[int, ...] = ()
    failed_chips: tuple[int, ...] = ()
    slice_of_chip: np.ndarray = field(init=False, repr=False)
    local_of_chip: np.ndarray = field(init=False, repr=False)
    link_failed: np.ndarray = field(init=False, repr=False)
    chip_failed: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        check_routing(self.routing)
        fab = self.fabric
        for name, ids, n in (("failed_links", self.failed_links, fab.n_links), ("failed_chips", self.failed_chips, fab.n_chips)):
            bad = [int(i) for i in ids if not 0 <= int(i) < n]
            if bad:
                raise PodsimError(f"{name}: {bad[0]} is not an id of this fabric (0..{n - 1})")
        chip_failed = np.zeros(fab.n_chips, bool)
        chip_failed[list(self.failed_chips)] = True
        link_failed = np.zeros(fab.n_links, bool)
        link_failed[list(self.failed_links)] = True
        link_failed |= link_failed[fab.link_reverse]
        ends = (fab.link_src < fab.n_chips) & (fab.link_dst < fab.n_chips)
        link_failed[ends] |= chip_failed[fab.link_src[ends]] | chip_failed[fab.link_dst[ends]]
        object.__setattr__(self, "link_failed", link_failed)
        object.__setattr__(self, "chip_failed", chip_failed)
        s = np.full(self.fabric.n_chips, -1, np.int64)
        loc = np.full(self.fabric.n_chips, -1, np.int64)
        for i, v in enumerate(self.views):
            s[v.chips] = i
            loc[v.chips] = np.arange(v.n)
        object.__setattr__(self, "slice_of_chip", s)
        object.__setattr__(self, "local_of_chip", loc)

    def route_parts(self, src: np.ndarray, dst: np.ndarray, periods: tuple[int, ...] | None = None) -> list[RoutePart]:
        """Flows between global chips in parts: per slice (ICI, by the routing policy) and
        across slices (DCN). With `periods` (a translation symmetry of the one slice),
        multipath routes come folded onto representative links (see `split_routes`)."""
        src = np.asarray(src, np.int64)
        dst = np.asarray(dst, np.int64)
        ss, sd = self.slice_of_chip[src], self.slice_of_chip[dst]
        parts = []
        for i, v in enumerate(self.views):
            sel = np.flatnonzero((ss == i) & (sd == i))
            if not len(sel):
                continue
            ls, ld = self.local_of_chip[src[sel]], self.local_of_chip[dst[sel]]
            multipath = self.routing != "dimension_order" and v.slice.spec.kind != "gpu"
            if multipath and v.slice.form == "scatter":
                raise PodsimError("a scattered slice (hilbert allocation) is routed dimension-order over its pod; "
                                  f"routing {self.routing!r} is not modelled for it")
            if multipath:
                part = RoutePart(sel, *split_routes(v, ls, ld, periods), partial(path_dag, v, ls, ld))
            elif v.slice.spec.kind == "gpu":  # across nodes over the DCN, spread as dcn.ecmp says
                part = RoutePart(sel, *ecmp_routes(self.fabric, v.chips[ls], v.chips[ld], switched=True))
            else:
                r = slice_routes(v, ls, ld)
                part = RoutePart(sel, r.indptr, r.links.astype(np.int64), None)
            parts.extend(self._around_failures(v, part, ls, ld, multipath))
        sel = np.flatnonzero((ss != sd) | (ss < 0))
        if len(sel):
            parts.append(RoutePart(sel, *ecmp_routes(self.fabric, src[sel], dst[sel])))
        return parts

    @property
    def degraded(self) -> bool:
        return bool(self.link_failed.any())

    def _around_failures(self, view: SliceView, part: RoutePart, ls: np.ndarray, ld: np.ndarray,
                         multipath: bool) -> list[RoutePart]:
        """The part as is, or split: flows that touch a failed part routed around it."""
        if not self.degraded or view.slice.spec.kind == "gpu":
            return [part]
        hops = np.diff(part.indptr)
        hit = np.zeros(len(hops), bool)
        hit[np.repeat(np.arange(len(hops)), hops)[self.link_failed[part.links]]] = True
        hit |= self.chip_failed[view.chips[ls]] | self.chip_failed[view.chips[ld]]
        if not hit.any():
            return [part]
        out = []
        keep = np.flatnonzero(~hit)
        if len(keep):
            ip, lk, fr = _subset(part.indptr, part.links, part.frac, keep)
            out.append(RoutePart(part.sel[keep], ip, lk, fr,
                                 partial(path_dag, view, ls[keep], ld[keep]) if part.dag is not None else None))
        bad = np.flatnonzero(hit)
        ip, lk, fr = detour_routes(view, ls[bad], ld[bad], self.link_failed, self.chip_failed, multipath)
        out.append(RoutePart(part.sel[bad], ip, lk, fr))
        return out

    def route(self, src: np.ndarray, dst: np.ndarray):
        """(indptr, links, frac) of flows between global chips: ICI inside a slice, DCN between."""
        return join_parts(len(np.asarray(src)), self.route_parts(src, dst))


def check_routing(routing: str) -> None:
    if routing not in ROUTING_POLICIES:
        raise PodsimError(f"routing {routing!r} is not known; use one of: {', '.join(ROUTING_POLICIES)}")


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
                if sym.dcn is not None and id(pattern) in sym.dcn.patterns:
                    return self._folded_dcn(pattern, sym.dcn)
                sym = None  # crosses slices: every flow, on the DCN's own links
        n = pattern.n_flows // (1 if sym is None else sym.multiplicity)
        if n > MAX_FLOWS:
            raise PodsimError(f"{pattern.name} on group {pattern.layout.name} has {n:,} flows to route, more than the "
                              f"{MAX_FLOWS:,} podsim simulates at once; use a smaller group, another algorithm or the fast path")
        src, dst, weight = pattern.flows(None if sym is None else sym.keep)
        parts = self.placement.route_parts(src, dst, None if sym is None else sym.periods)
        if self.placement.routing == "adaptive":
            fab = self.placement.fabric
            canon = sym.canon_link if sym is not None else np.arange(fab.n_links)
            parts = [p if p.dag is None else RoutePart(p.sel, *adaptive_split(
                p.dag, (p.indptr, p.links, p.frac), fab.link_capacity_bytes_per_s, canon,
                None if weight is None else weight[p.sel])) for p in parts]
        indptr, links, frac = join_parts(len(src), parts)
        lat_link = self.placement.fabric.link_latency_s
        latency = route_sums(indptr, links, frac, lat_link)
        if sym is not None:
            links = sym.canon_link[links]
        multipath = any(p.frac is not None for p in parts)
        pr = PatternRoutes(src, dst, weight, indptr, links, latency, 1 if sym is None else sym.multiplicity,
                           frac if multipath else None)
        self._cache[id(pattern)] = (pattern, pr)
        return pr

    def _folded_dcn(self, pattern: Pattern, fold: DcnFold) -> PatternRoutes:
        """A cross-slice pattern's representative flows (one per class), on representative links."""
        f = fold.patterns[id(pattern)]
        pr = PatternRoutes(f.src, f.dst, f.weight, f.indptr, f.links, f.latency_s, 1, f.frac, represented=f.represented)
        self._cache[id(pattern)] = (pattern, pr)
        return pr


class RouterPool:
    """Routers of one placement, one per symmetry, so route caches are shared."""

    def __init__(self, placement: Placement):
        self.placement = placement
        self._routers: dict[tuple, Router] = {}
        self._dcn_folds: dict[frozenset, DcnFold | None] = {}
        self._stays: dict[int, tuple] = {}  # a step's plans ask again and again for a few patterns

    def router(self, patterns: Sequence[Pattern], fold: bool = True, fold_dcn: bool = False) -> Router:
        """The router for a set of patterns that run together; `fold` uses the symmetry they
        share (if any) so only representative flows are routed; `fold_dcn` also folds the
        flows that cross slices into classes (worth it for a whole step, not one collective)."""
        sym = None
        if fold and len(self.placement.views) == 1 and not self.placement.degraded:
            sym = translation_symmetry(self.placement.views[0], patterns, self.placement.routing)
        elif fold and not self.placement.degraded:
            sym = slice_symmetry(self.placement.views, patterns, self.placement.routing, self._stays)
            if sym is not None and fold_dcn:
                sym = _with_dcn_fold(self.placement, sym, patterns, self._dcn_folds)
        # a DCN fold holds only for the patterns it was built on
        dcn = frozenset(sym.dcn.patterns) if sym is not None and sym.dcn is not None else None
        key = (sym.periods, sym.first_slice is not None, dcn) if sym is not None else ()
        if key not in self._routers:
            self._routers[key] = Router(self.placement, sym)
        return self._routers[key]


def _with_dcn_fold(placement: Placement, sym: Symmetry, patterns: Sequence[Pattern],
                   cache: dict[frozenset, DcnFold | None]) -> Symmetry:
    """The slice symmetry with the cross-slice flows folded into classes (dcnfold)."""
    gpu = sym.view.slice.spec.kind == "gpu"  # GPU slices use the DCN inside a slice too
    if gpu or (fold := fold_crossing(placement, patterns, cache, MAX_FLOWS)) is None:
        return sym
    moved = fold.canon_link != np.arange(len(sym.canon_link))
    canon = np.where(moved, fold.canon_link, sym.canon_link)
    return Symmetry(sym.view, sym.periods, sym.keep, canon, sym.multiplicity, sym.first_slice, fold)
