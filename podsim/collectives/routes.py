"""Routing a pattern's flows on a job's placement, folded by the symmetry fast path; cached.

`Placement` (fabricroutes.py) is a fabric with a job's slices and a routing policy
(`ROUTING_POLICIES`). `Router.routes(pattern)` gives each flow its links (ICI routes inside a
slice by the policy, `ecmp_routes` between slices), the fraction of its bytes on each link (1 on
a single path) and its latency (the fraction-weighted sum of its links' latencies: every minimal
path has the same hop count), cached per pattern. Under a `Symmetry` (symmetry.py: translations
of a torus slice, alike slices of a multislice job) only the representative flows are routed,
on representative links. `RouterPool` keeps one router per symmetry of a placement, so route
caches are shared, and folds the flows across slices into DCN classes for a whole step
(dcnfold.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

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
)
from podsim.collectives.dcnfold import DcnFold, fold_crossing
from podsim.collectives.fabricroutes import Placement
from podsim.collectives.routeparts import RoutePart, join_parts, route_sums
from podsim.collectives.schedule import Pattern
from podsim.collectives.symmetry import Symmetry, slice_symmetry, translation_symmetry


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

    def budget_flows(self, pattern: Pattern) -> int:
        """The most flows `routes(pattern)` routes at once, as the flows budget counts them: its
        representatives inside slices, or (a slice symmetry) the larger of those and the flows
        across slices the DCN fold does not hold. Over `budget().flows`, `routes` refuses it."""
        sym = self.symmetry
        if sym is None or sym.chip_weight is None:
            return self.flows_to_route(pattern)
        sp = pattern.split
        inside = self.flows_to_route(pattern) - sp.crossing if sp.inside else 0
        folded = sym.dcn is not None and id(pattern) in sym.dcn.patterns
        return max(inside, 0 if folded else sp.crossing)

    def check_budget(self, pattern: Pattern) -> None:
        """Refuse, as `routes` would, a pattern over the flows budget (before building any flow)."""
        self._check_size(pattern, self.budget_flows(pattern))

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
