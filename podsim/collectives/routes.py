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
from dataclasses import dataclass, field, replace
from functools import partial

import numpy as np

from podsim._arrays import unique
from podsim.bounds import budget, check_budget
from podsim.collectives.adaptive import adaptive_split
from podsim.collectives.crossing import (
    DcnTranslation,
    crossing_flows,
    crossing_routes,
    dcn_groups,
    dcn_translation,
    fabric_groups,
    pattern_periods,
)
from podsim.collectives.dcnfold import DcnFold, fold_crossing
from podsim.collectives.routeparts import RoutePart, _subset, join_parts, route_sums
from podsim.collectives.schedule import Pattern
from podsim.errors import PodsimError
from podsim.topology.degraded import detour_routes
from podsim.topology.fabric import Fabric
from podsim.topology.multipath import (
    ROUTING_POLICIES,
    path_dag,
    reduce_coords,
    split_routes,
)
from podsim.topology.routing import ecmp_routes, slice_routes
from podsim.topology.slices import SliceView


@dataclass(frozen=True, eq=False)
class Symmetry:
    """Translations with `periods` (per slice axis) of one plain torus slice, and (a multislice
    job) the slices folded onto one representative per class of alike slices."""

    view: SliceView
    periods: tuple[int, ...]
    keep: np.ndarray  # bool over the fabric's chips: the fundamental domain(s)
    canon_link: np.ndarray  # fabric link id -> representative link id
    multiplicity: int  # flows (and links) each representative stands for inside its slice
    # Slice folding (a multislice job): per kept chip, how many chips it stands for (its
    # translations in every slice of its class); flows that cross slices are routed in full
    # or folded into classes (`dcn`).
    chip_weight: np.ndarray | None = None
    slice_classes: tuple[int, ...] | None = None  # per slice, its class (0 .. classes-1)
    dcn: DcnFold | None = None  # classes of the cross-slice flows (dcnfold), or None


def _invariant(view: SliceView, pattern: Pattern) -> bool:
    """Whether every translation of the (twisted) torus maps the pattern's flows inside this
    slice onto themselves (checked on the unit translations, which generate them all)."""
    slc = view.slice
    if any(p != 1 for p in pattern_periods(pattern, view)):
        return False
    src, dst, w = pattern.flows(None)
    local = np.full(view.fabric.n_chips, -1, np.int64)
    local[view.chips] = np.arange(view.n)
    ls, ld = local[src], local[dst]
    here = (ls >= 0) & (ld >= 0)  # a multislice pattern: its flows inside this slice
    w = np.ones(len(src)) if w is None else np.asarray(w, float)
    ls, ld, w = ls[here], ld[here], w[here]
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


@dataclass(frozen=True, eq=False)
class _Translation:
    """Translations of a slice's torus: periods, each local chip's representative (its
    coordinates modulo the periods), the fundamental domain, and how many chips each stands for."""

    periods: tuple[int, ...]
    canon_local: np.ndarray
    domain: np.ndarray
    multiplicity: int

    def fold_links(self, canon: np.ndarray, view: SliceView) -> bool:
        """Point `canon` at each of the view's ICI links' representative; False when a
        representative port has no link (the slice is not a full torus)."""
        live = view.port_link >= 0
        rep = view.port_link[self.canon_local]
        if (rep[live] < 0).any():
            return False
        canon[view.port_link[live]] = rep[live]
        return True


def _translation(views: Sequence[SliceView], patterns: Sequence[Pattern], routing: str) -> _Translation | None:
    """The largest translation symmetry the patterns' flows inside each of `views` (slices of
    one shape and twist) share, or None (see translation_symmetry)."""
    view = views[0]
    slc = view.slice
    if slc.spec.kind not in ("cubes", "rectangle") or slc.form != "native":  # a fold or scatter: links are not translates
        return None
    if slc.twisted and (routing == "dimension_order" or not all(_invariant(v, p) for v in views for p in patterns)):
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
    coords = view.coords.astype(np.int64)
    canon_local = np.ravel_multi_index(tuple((coords % np.array(periods)).T), shape)
    return _Translation(tuple(periods), canon_local, (coords < np.array(periods)).all(1), mult)


def _same_links(fab: Fabric, canon: np.ndarray) -> bool:
    """Whether every link has its representative's capacity and latency."""
    cap, lat = fab.link_capacity_bytes_per_s, fab.link_latency_s
    return np.array_equal(cap, cap[canon]) and np.array_equal(lat, lat[canon])


def translation_symmetry(view: SliceView, patterns: Sequence[Pattern], routing: str = "dimension_order") -> Symmetry | None:
    """The largest translation symmetry every pattern shares on this slice, or None when the
    slice is not a torus (meshes are cut on unwrapped axes; switched GPU slices are not
    handled), when it is twisted and routed dimension-order or the patterns are not invariant
    under every translation, or when nothing would be saved."""
    t = _translation((view,), patterns, routing)
    if t is None:
        return None
    fab = view.fabric
    canon = np.arange(fab.n_links)
    if not t.fold_links(canon, view) or not _same_links(fab, canon):
        return None
    keep = np.zeros(fab.n_chips, bool)
    keep[view.chips[t.domain]] = True
    return Symmetry(view, t.periods, keep, canon, t.multiplicity)


def slice_symmetry(views: Sequence[SliceView], patterns: Sequence[Pattern],
                   routing: str = "dimension_order", cache: dict | None = None) -> Symmetry | None:
    """Slices of a multislice job run one SPMD program, and flows inside a slice never share a
    link with flows of another slice or with flows between slices (those go chip -> NIC ->
    ...). So slices whose inside flows agree (every pattern's, on the same local chips: one
    class; `Pattern.split` says which without building flows) need one representative each:
    its ICI links stand for the matching links of its class, and inside it the translation
    symmetry of the inside flows folds further. A pattern may mix flows inside and across
    slices (a ring over `z,dcn`): its inside part folds as any other, its crossing part is
    routed in full or folded into classes (dcnfold). None when the slices differ in shape,
    twist or wiring, are switched GPU slices (their own flows use the DCN), or a pattern
    cannot say how its flows fall on the slices. `cache` (one per set of views and routing)
    keeps the symmetry of each slice classing and translation periods: the links' fold is the
    same for every set of patterns that gives them (it is linear in links)."""
    if len(views) < 2:
        return None
    v0 = views[0]
    spec = v0.slice.spec
    if spec.kind == "gpu" or any(v.slice.spec != spec or v.slice.twisted != v0.slice.twisted for v in views):
        return None
    splits = [p.split for p in patterns]
    if any(sp is None or len(sp.labels) != len(views) for sp in splits):
        return None
    classes = np.zeros(len(views), np.int64)
    for sp in splits:
        if sp.inside:
            classes = np.unique(classes * (int(sp.labels.max()) + 1) + sp.labels, return_inverse=True)[1].ravel()
    # number the classes in slice order, the first slice of each its representative
    _, rep, inverse, size = np.unique(classes, return_index=True, return_inverse=True, return_counts=True)
    order = np.argsort(rep)
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    classes, rep, size = rank[inverse.ravel()], rep[order], size[order]
    reps = [views[i] for i in rep]
    inside = [p for p, sp in zip(patterns, splits, strict=True) if sp.inside]
    t = _translation(reps, inside, routing) if inside else None
    key = (tuple(int(c) for c in classes), None if t is None else t.periods)
    if cache is None or key not in cache:
        sym = _slice_fold(views, classes, rep, size, t)
        if cache is None:
            return sym
        cache[key] = sym
    return cache[key]


def _slice_fold(views: Sequence[SliceView], classes: np.ndarray, rep: np.ndarray, size: np.ndarray,
                t: _Translation | None) -> Symmetry | None:
    """The slice symmetry of slice classes (`classes` per slice, `rep` and `size` per class)
    and the inside translation `t` (see slice_symmetry)."""
    v0 = views[0]
    reps = [views[i] for i in rep]
    fab = v0.fabric
    canon = np.arange(fab.n_links)
    live = v0.port_link >= 0
    for v in views[1:]:
        if not np.array_equal(v.port_link >= 0, live):
            return None
    for v, c in zip(views, classes, strict=True):
        canon[v.port_link[live]] = views[rep[c]].port_link[live]
    if t is not None:
        inner = np.arange(fab.n_links)
        if all(t.fold_links(inner, v) for v in reps):
            canon = inner[canon]
        else:
            t = None
    periods, domain, mult = (t.periods, t.domain, t.multiplicity) if t is not None else (tuple(v0.shape), slice(None), 1)
    if not _same_links(fab, canon):
        return None
    keep = np.zeros(fab.n_chips, bool)
    weight = np.zeros(fab.n_chips, np.int64)
    for v, n in zip(reps, size, strict=True):
        keep[v.chips[domain]] = True
        weight[v.chips[domain]] = mult * n
    return Symmetry(v0, periods, keep, canon, mult, chip_weight=weight, slice_classes=tuple(int(c) for c in classes))


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
"""The default flows budget (podsim.bounds.Budget.flows, --max-flows): most flows one pattern may
route at once (memory: every flow keeps its route's links)."""


class Router:
    """Routes of patterns on a placement, optionally folded by a symmetry; cached. Routes of
    flows across slices do not depend on the symmetry: routers of one pool share them
    (`crossing`, by pattern)."""

    def __init__(self, placement: Placement, symmetry: Symmetry | None = None, crossing: dict | None = None,
                 grouped: bool = False, translation: DcnTranslation | None = None, groups: tuple | None = None):
        self.placement = placement
        self.symmetry = symmetry
        self._cache: dict[int, tuple[Pattern, PatternRoutes]] = {}
        self._crossing = {} if crossing is None else crossing
        # pricing only (never simulated): flows across slices may come as grouped spine
        # entries (routing.dcn_split_groups), which `capacity` and `latency` cover, and (with
        # `translation`, crossing.dcn_translation) one flow per orbit on orbit representatives
        self.grouped = grouped
        self._groups = (groups if groups is not None else dcn_groups(placement.fabric)) if grouped else None
        self.translation = translation if grouped else None
        self.prices: dict = {}  # closed_form's per-byte phase costs, by pattern ids (held with them)

    @property
    def capacity(self) -> np.ndarray:
        """Capacity per link id the routes use (fabric links, then spine groups when grouped)."""
        fab = self.placement.fabric
        return fab.link_capacity_bytes_per_s if self._groups is None else self._groups[1]

    def flows_to_route(self, pattern: Pattern) -> int:
        """How many flows `routes(pattern)` routes, worked out without building any: the
        representatives under the symmetry, every flow that crosses slices (what the engine
        routes where the DCN fold does not hold; a pricing router with a `translation` routes
        only 1/order of them, so `auto` ranks and budgets candidates by this upper bound)."""
        sym = self.symmetry
        if sym is None:
            return pattern.n_flows
        if sym.chip_weight is None:
            return pattern.n_flows // sym.multiplicity
        sp = pattern.split
        reps = np.unique(sym.slice_classes, return_index=True)[1]
        return int(sp.slice_inside[reps].sum()) // sym.multiplicity + sp.crossing

    def flows_to_simulate(self, pattern: Pattern) -> int:
        """How many flows one phase of `pattern` submits: its routes' if routed, else
        `flows_to_route` with the flows across slices as their DCN classes where folded."""
        hit = self._cache.get(id(pattern))
        if hit is not None:
            return hit[1].n_flows
        n = self.flows_to_route(pattern)
        sym = self.symmetry
        if sym is not None and sym.dcn is not None and id(pattern) in sym.dcn.patterns:
            n += len(sym.dcn.patterns[id(pattern)].src) - pattern.split.crossing
        return n

    def routes(self, pattern: Pattern) -> PatternRoutes:
        hit = self._cache.get(id(pattern))
        if hit is not None:
            return hit[1]
        sym = self.symmetry
        if sym is not None and sym.chip_weight is not None:
            pr = self._slice_routes(pattern, sym)
        else:
            self._check_size(pattern, self.flows_to_route(pattern))
            src, dst, weight = pattern.flows(None if sym is None else sym.keep)
            indptr, links, frac, latency = self._route(src, dst, weight, sym)
            pr = PatternRoutes(src, dst, weight, indptr, links, latency, 1 if sym is None else sym.multiplicity, frac)
        self._cache[id(pattern)] = (pattern, pr)
        return pr

    def sample(self, pattern: Pattern, max_flows: int) -> PatternRoutes:
        """Routes of some of the flows `routes(pattern)` would route (about `max_flows` or
        fewer): those inside slices from the first kept chips, on representative links, and
        those across slices from every chip behind the same NICs, on their own links. Each
        link's load from them is at most its load in full (and a NIC's uplinks carry all they
        carry in full), so schedule_time_s on them is a lower bound of the closed form."""
        sym = self.symmetry
        fab = self.placement.fabric
        member = np.zeros(fab.n_chips, bool)
        member[pattern.layout.members.ravel()] = True
        kept = np.flatnonzero(member if sym is None else sym.keep & member)
        per_chip = max(pattern.n_flows // max(pattern.layout.members.size, 1), 1)
        keep = np.zeros(fab.n_chips, bool)
        keep[kept[:max(max_flows // per_chip, 1)]] = True
        src, dst, w = pattern.flows(keep)
        if sym is None or sym.chip_weight is None:
            indptr, links, frac, latency = self._route(src, dst, w, sym)
            return PatternRoutes(src, dst, w, indptr, links, latency, 1, frac)
        where = self.placement.slice_of_chip
        here = where[src] == where[dst]
        parts = []
        if here.any():
            a, b, c = src[here], dst[here], None if w is None else w[here]
            parts.append((a, b, c, *self._route(a, b, c, sym)))
        sp = pattern.split
        if sp.crossing:
            # whole NICs: the kept chips' NICs, as many as the flows allow (one at least)
            nics = unique(fab.nic_of_chip[kept[:max(max_flows // per_chip, 1)]])
            out = max(sp.crossing // max(pattern.layout.members.size, 1), 1)
            behind = np.flatnonzero(member & np.isin(fab.nic_of_chip, nics))
            chips_per_nic = max(len(behind) // max(len(nics), 1), 1)
            nics = nics[:max(max_flows // (out * chips_per_nic), 1)]
            keep[:] = member & np.isin(fab.nic_of_chip, nics)
            src, dst, w = pattern.flows(keep)
            away = where[src] != where[dst]
            a, b, c = src[away], dst[away], None if w is None else w[away]
            if len(a):
                parts.append((a, b, c, *self._route(a, b, c, None)))
        if not parts:
            return PatternRoutes(src[:0], dst[:0], None, np.zeros(1, np.int64), np.empty(0, np.int64), np.empty(0), 1)
        return _join_routes(parts)

    @staticmethod
    def _check_size(pattern: Pattern, n: int) -> None:
        check_budget("flows", n, f"{pattern.name} on group {pattern.layout.name}",
                     "every flow keeps its route's links in memory; or use a smaller group, another algorithm or the fast path")

    def _route(self, src: np.ndarray, dst: np.ndarray, weight: np.ndarray | None, sym: Symmetry | None):
        """(indptr, links, frac or None, latency) of flows, on representative links under `sym`."""
        parts = self.placement.route_parts(src, dst, None if sym is None else sym.periods)
        if self.placement.routing == "adaptive":
            fab = self.placement.fabric
            canon = sym.canon_link if sym is not None else np.arange(fab.n_links)
            parts = [p if p.dag is None else RoutePart(p.sel, *adaptive_split(
                p.dag, (p.indptr, p.links, p.frac), fab.link_capacity_bytes_per_s, canon,
                None if weight is None else weight[p.sel])) for p in parts]
        indptr, links, frac = join_parts(len(src), parts)
        latency = route_sums(indptr, links, frac, self.placement.fabric.link_latency_s)
        if sym is not None:
            links = sym.canon_link[links]
        return indptr, links, frac if any(p.frac is not None for p in parts) else None, latency

    def _slice_routes(self, pattern: Pattern, sym: Symmetry) -> PatternRoutes:
        """Under a slice symmetry: the flows inside slices from the kept chips (on
        representative links, each standing for its chip's weight), then the flows across
        slices, folded into classes when the DCN fold holds them, else every one."""
        sp = pattern.split
        where = self.placement.slice_of_chip
        parts, represented = [], 0
        if sp.inside:
            self._check_size(pattern, self.flows_to_route(pattern) - sp.crossing)
            src, dst, w = pattern.flows(sym.keep)
            if sp.crossing:
                here = where[src] == where[dst]
                src, dst, w = src[here], dst[here], None if w is None else w[here]
            parts.append((src, dst, w, *self._route(src, dst, w, sym)))
            represented += int(sym.chip_weight[src].sum())
        if sp.crossing:
            fold = sym.dcn.patterns.get(id(pattern)) if sym.dcn is not None else None
            if fold is not None:
                parts.append((fold.src, fold.dst, fold.weight, fold.indptr, fold.links, fold.frac, fold.latency_s))
                represented += fold.represented
            else:  # every flow on the DCN's own links (pricing: one per orbit of the translations)
                trans = self.translation
                if self.grouped:
                    part = crossing_routes(self.placement, pattern, self._crossing, self._groups, trans)
                else:
                    self._check_size(pattern, sp.crossing)
                    src, dst, w = crossing_flows(self.placement, pattern)
                    part = (src, dst, w, *self._route(src, dst, w, None))
                parts.append(part)
                represented += len(part[0]) * (1 if trans is None else trans.order)
        pr = _join_routes(parts)
        return replace(pr, represented=represented)


def _join_routes(parts: list[tuple]) -> PatternRoutes:
    """One PatternRoutes of parts (src, dst, weight, indptr, links, frac, latency), in order."""
    if len(parts) == 1:
        src, dst, w, ip, lk, fr, lat = parts[0]
        return PatternRoutes(src, dst, w, ip, lk, lat, 1, fr)
    src = np.concatenate([p[0] for p in parts])
    dst = np.concatenate([p[1] for p in parts])
    w = None if all(p[2] is None for p in parts) else np.concatenate(
        [np.ones(len(p[0])) if p[2] is None else np.asarray(p[2], float) for p in parts])
    offsets = np.cumsum([0] + [p[3][-1] for p in parts[:-1]])
    ip = np.concatenate([[0]] + [p[3][1:] + o for p, o in zip(parts, offsets, strict=True)]).astype(np.int64)
    lk = np.concatenate([np.asarray(p[4], np.int64) for p in parts])
    fr = None if all(p[5] is None for p in parts) else np.concatenate(
        [np.ones(len(p[4])) if p[5] is None else np.asarray(p[5], float) for p in parts])
    return PatternRoutes(src, dst, w, ip, lk, np.concatenate([p[6] for p in parts]), 1, fr)


def fold_reason(placement: Placement, patterns: Sequence[Pattern], symmetry: Symmetry | None, jobs: int = 1) -> str:
    """Why a step's flows fold no further than `symmetry` (the router's), in a phrase."""
    views = placement.views
    v0 = views[0]
    if jobs > 1:
        return "several jobs share the fabric, so no symmetry is folded"
    if placement.degraded:
        return "failed links or chips break the symmetry"
    if symmetry is None:
        kind = v0.slice.spec.kind
        if kind not in ("cubes", "rectangle"):
            return f"{kind} slices are not folded"
        if len(views) == 1:
            if v0.slice.twisted and placement.routing == "dimension_order":
                return "a twisted torus routed dimension-order has no translation symmetry"
            return "the step's patterns share no translation of the slice"
        if any(v.slice.spec != v0.slice.spec or v.slice.twisted != v0.slice.twisted for v in views):
            return "the slices differ in shape or twist"
        if any(p.split is None for p in patterns):
            return "a pattern cannot say which of its flows cross slices"
        return "the slices' links differ"
    crossing = [p.split.crossing for p in patterns if p.split is not None and p.split.crossing]
    ecmp = placement.fabric.dcn.ecmp if placement.fabric.dcn.kind == "eps" else placement.fabric.dcn.kind
    if crossing and symmetry.dcn is None:
        if max(crossing) > budget().flows:
            return f"a pattern has {max(crossing):,} flows across slices, more than the DCN fold takes ({budget().flows:,}, --max-flows)"
        return f"the flows across slices fall into no fewer classes (dcn {ecmp})"
    if symmetry.dcn is not None:
        return f"the {symmetry.dcn.flows:,} flows across slices fold into {symmetry.dcn.classes:,} classes (dcn {ecmp})"
    return "folded as far as the step's symmetry allows"


class RouterPool:
    """Routers of one placement, one per symmetry, so route caches are shared."""

    def __init__(self, placement: Placement):
        self.placement = placement
        self._routers: dict[tuple, Router] = {}
        self._dcn_folds: dict[frozenset, DcnFold | None] = {}
        self._crossing: dict = {}  # routes of flows across slices, by pattern [and translation] (held with it)
        self._symmetries: dict[frozenset, tuple] = {}  # by the patterns' ids (held with them)
        self._translations: dict = {}  # crossing.dcn_translation's cache (the placement's)
        self._slice_folds: dict = {}  # slice_symmetry's cache (the placement's)
        self._crossing_translations: dict[frozenset, tuple] = {}  # by the patterns' ids (held with them)

    def _symmetry(self, patterns: Sequence[Pattern]) -> Symmetry | None:
        """The symmetry the patterns share (translation on one slice, slices on several),
        worked out once per set of patterns: a step's plans ask about the same sets again."""
        key = frozenset(id(p) for p in patterns)
        hit = self._symmetries.get(key)
        if hit is None:
            views, routing = self.placement.views, self.placement.routing
            sym = (translation_symmetry(views[0], patterns, routing) if len(views) == 1
                   else slice_symmetry(views, patterns, routing, self._slice_folds))
            hit = self._symmetries[key] = (tuple(patterns), sym)
        return hit[1]

    def router(self, patterns: Sequence[Pattern], fold: bool = True, fold_dcn: bool = False) -> Router:
        """The router for a set of patterns that run together; `fold` uses the symmetry they
        share (if any) so only representative flows are routed; `fold_dcn` also folds the
        flows that cross slices into classes (worth it for a whole step, not one collective)."""
        sym = self._symmetry(patterns) if fold and not self.placement.degraded else None
        if sym is not None and len(self.placement.views) > 1 and fold_dcn:
            sym = _with_dcn_fold(self.placement, sym, patterns, self._dcn_folds, self._crossing, self._translations)
        trans = self._crossing_translation(patterns) if sym is not None and sym.chip_weight is not None and not fold_dcn else None
        # a DCN fold holds only for the patterns it was built on
        dcn = frozenset(sym.dcn.patterns) if sym is not None and sym.dcn is not None else None
        key = ((sym.periods, sym.slice_classes, dcn) if sym is not None else (), fold_dcn, trans and trans.periods)
        if key not in self._routers:
            groups = None if fold_dcn else fabric_groups(self.placement.fabric, self._translations)
            self._routers[key] = Router(self.placement, sym, self._crossing, grouped=not fold_dcn, translation=trans,
                                        groups=groups)
        return self._routers[key]

    def _crossing_translation(self, patterns: Sequence[Pattern]) -> DcnTranslation | None:
        """The translations that map the patterns' flows across slices and the DCN onto
        themselves (crossing.dcn_translation), once per set of patterns."""
        key = frozenset(id(p) for p in patterns)
        hit = self._crossing_translations.get(key)
        if hit is None:
            crossing = [p for p in patterns if p.split is not None and p.split.crossing]
            trans = dcn_translation(self.placement, crossing, self._translations) if crossing else None
            hit = self._crossing_translations[key] = (tuple(patterns), trans)
        return hit[1]

    def drop_pricing(self) -> None:
        """Drop the routers that priced candidates (their routes), keeping the routes of flows
        across slices for the step's DCN fold: memory, before the fold's own peak."""
        self._routers.clear()
        self._symmetries.clear()
        self._crossing_translations.clear()

    def release(self, keep: Router) -> None:
        """Drop every router but `keep` and the routes kept for pricing: once a step's plans are
        made and its router built, only that router's routes are needed (memory)."""
        self._routers = {k: r for k, r in self._routers.items() if r is keep}
        self._crossing.clear()
        self._symmetries.clear()
        self._crossing_translations.clear()
        self._translations.clear()
        self._slice_folds.clear()
        keep._crossing = {}


def _with_dcn_fold(placement: Placement, sym: Symmetry, patterns: Sequence[Pattern],
                   cache: dict[frozenset, DcnFold | None], routed: dict | None = None,
                   translations: dict | None = None) -> Symmetry:
    """The slice symmetry with the cross-slice flows folded into classes (dcnfold)."""
    if (fold := fold_crossing(placement, patterns, cache, budget().flows, routed, translations)) is None:
        return sym
    moved = fold.canon_link != np.arange(len(sym.canon_link))
    canon = np.where(moved, fold.canon_link, sym.canon_link)
    return replace(sym, canon_link=canon, dcn=fold)
