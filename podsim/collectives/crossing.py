"""The flows of a multislice job that cross slices: which they are, their DCN routes, and the
translations of the slices that map them and the DCN onto themselves.

Every slice of a job runs one SPMD program, so a translation of the slice-local coordinates
(the same in every slice) that a pattern's layout allows (`pattern_periods`) maps its flows onto
themselves. It maps the flows across slices onto themselves too, and their DCN routes onto
routes, when it also carries the DCN's hierarchy over: chips behind one NIC onto chips behind
one NIC, NICs under one ToR / leaf onto NICs under one ToR / leaf, leaves of one site onto
leaves of one site, each link onto a link of the same capacity and latency, and every flow
split evenly over the spines (`split` ECMP: a hashed spine depends on NIC ids, which no
translation keeps). `dcn_translation` finds the largest such group (per axis the smallest
period that does, checked on the chip, NIC, ToR, leaf and site maps: linear in chips, not in
flows). Its orbits of flows all have its order M (a translation moves every chip), one flow
each with its source in the fundamental domain (`keep`); an orbit of DCN links has M / k links,
k the translations that fix each (a leaf's uplinks are fixed by every translation inside its
leaf). So the flows from `keep`, routed, stand for all of them: a link of an orbit carries k
times the load the representatives put on the whole orbit (`DcnTranslation.stab`), which is
what pricing and the DCN fold (dcnfold) need, without listing the M times more flows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from podsim.bounds import check_budget
from podsim.collectives.routeparts import route_sums
from podsim.collectives.schedule import Pattern
from podsim.topology.fabric import Fabric
from podsim.topology.routing import dcn_group_members, dcn_split_groups
from podsim.topology.slices import SliceView
from podsim.trace.model import SLICE_AXES


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


def crossing_flows(placement, pattern: Pattern, keep: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(src, dst, weight) of the pattern's flows that cross slices of `placement` (a
    fabricroutes.Placement), those from sources in `keep` only if given."""
    src, dst, w = pattern.flows(keep)
    if pattern.split is not None and pattern.split.inside:
        away = placement.slice_of_chip[src] != placement.slice_of_chip[dst]
        src, dst, w = src[away], dst[away], None if w is None else w[away]
    return src, dst, w


def dcn_groups(fabric: Fabric) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(members, capacity, latency) extended by the spine groups of a split EPS DCN
    (routing.dcn_split_groups: group g is link id n_links + g, its S twin links members[g]):
    a group's capacity is its members' and its latency S times theirs (each carries 1/S of a
    flow), for the groups whose members are alike (-1 rows elsewhere); None without groups."""
    cap, lat = fabric.link_capacity_bytes_per_s, fabric.link_latency_s
    members = dcn_group_members(fabric)
    if members is None:
        return None
    ok = (members >= 0).all(1)
    m = np.where(members >= 0, members, 0)
    ok &= (cap[m] == cap[m[:, :1]]).all(1) & (lat[m] == lat[m[:, :1]]).all(1)
    return (np.where(ok[:, None], members, -1), np.concatenate([cap, np.where(ok, cap[m[:, 0]], 0.0)]),
            np.concatenate([lat, np.where(ok, members.shape[1] * lat[m[:, 0]], 0.0)]))


def fabric_groups(fabric: Fabric, cache: dict | None = None):
    """`dcn_groups(fabric)`, kept in `cache` (a placement's crossing cache) once asked."""
    if cache is None:
        return dcn_groups(fabric)
    if "groups" not in cache:
        cache["groups"] = dcn_groups(fabric)
    return cache["groups"]


def groups_alike(groups, entries: np.ndarray, n_links: int) -> bool:
    """Whether every spine group among route `entries` (ids n_links + g) has alike links
    (`groups`: dcn_groups, whose -1 rows are the groups that do not)."""
    g = entries[entries >= n_links] - n_links
    return not len(g) or (groups is not None and bool((groups[0][g, 0] >= 0).all()))


def route_crossing(placement, src: np.ndarray, dst: np.ndarray, groups) -> tuple[tuple, bool]:
    """((indptr, entries, frac), grouped) of flows across slices: each cross-leaf flow's S
    spine links of one kind as one group entry (routing.dcn_split_groups) where the DCN splits
    over alike spines (`groups`: dcn_groups), else every link (`grouped` False)."""
    fab = placement.fabric
    g = dcn_split_groups(fab, src, dst)
    if g is not None and groups_alike(groups, g[1], fab.n_links):
        return g[:3], True
    return placement.route(src, dst), False


@dataclass(frozen=True, eq=False)
class DcnTranslation:
    """Translations of every slice (periods per slice axis, `order` of them) that map the
    patterns' flows across slices and the DCN onto themselves. `keep`: the fundamental domain
    of sources (one flow of each orbit starts there); over vertex ids (links, then spine
    groups n_links + g), `rep` is each vertex's orbit's lowest id and `stab` how many
    translations fix it (order / orbit size), for the `vertices` the job's flows can cross
    (identity and 1 elsewhere)."""

    periods: tuple[int, ...]
    order: int
    keep: np.ndarray
    vertices: np.ndarray
    rep: np.ndarray
    stab: np.ndarray


def _present(a: np.ndarray, n: int) -> np.ndarray:
    """The distinct values of `a` (in 0..n-1), sorted, by a presence map (no sort)."""
    seen = np.zeros(n, bool)
    seen[a] = True
    return np.flatnonzero(seen)


def _induced(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray | None:
    """The map a[i] -> b[i] over 0..n-1 when it is well defined and one-to-one, else None."""
    m = np.full(n, -1, np.int64)
    m[a] = b
    if not np.array_equal(m[a], b):
        return None
    u = _present(a, n)
    return m if len(_present(m[u], n)) == len(u) else None


def _vertex_map(fab: Fabric, groups, chips: np.ndarray, moved: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(the DCN vertices the chips' flows can cross, where the chip map chips -> moved takes
    each of them), when it carries the NIC, ToR, leaf and site maps over one-to-one and every
    vertex onto one of its capacity and latency; else None."""
    nics = fab.nic_of_chip[chips] - fab.first_nic
    sigma = _induced(nics, fab.nic_of_chip[moved] - fab.first_nic, len(fab.leaf_of_nic))
    if sigma is None:
        return None
    u = _present(nics, len(sigma))
    pairs = [(fab.chip_up[chips], fab.chip_up[moved]), (fab.chip_down[chips], fab.chip_down[moved]),
             (fab.nic_up[u], fab.nic_up[sigma[u]]), (fab.nic_down[u], fab.nic_down[sigma[u]])]
    if fab.tiered:
        tors = fab.tor_of_nic[u]
        tmap = _induced(tors, fab.tor_of_nic[sigma[u]], int(fab.tor_of_nic.max()) + 1)
        if tmap is None:
            return None
        t = _present(tors, len(tmap))
        pairs += [(fab.tor_up[t], fab.tor_up[tmap[t]]), (fab.tor_down[t], fab.tor_down[tmap[t]])]
    leaves = fab.leaf_of_nic[u]
    n_leaves = fab.leaf_spine.shape[0]
    lam = _induced(leaves, fab.leaf_of_nic[sigma[u]], n_leaves)
    if lam is None:
        return None
    lu = _present(leaves, n_leaves)
    base = fab.n_links
    pairs += [(base + lu, base + lam[lu]), (base + n_leaves + lu, base + n_leaves + lam[lu])]
    sites = fab.wan.shape[0]
    if sites > 1:
        su = fab.site_of_leaf[lu]
        mu = _induced(su, fab.site_of_leaf[lam[lu]], sites)
        if mu is None:
            return None
        s = _present(su, sites)
        a, b = (x.ravel() for x in np.meshgrid(s, s, indexing="ij"))
        other = a != b
        a, b = a[other], b[other]
        pairs.append((base + 2 * n_leaves + a * sites + b, base + 2 * n_leaves + mu[a] * sites + mu[b]))
    src = np.concatenate([p[0] for p in pairs]).astype(np.int64)
    dst = np.concatenate([p[1] for p in pairs]).astype(np.int64)
    members, cap, lat = groups
    grp = src >= base
    if (members[src[grp] - base] < 0).any() or (members[dst[grp] - base] < 0).any():
        return None  # some spine group's links differ
    if not (np.array_equal(cap[src], cap[dst]) and np.array_equal(lat[src], lat[dst])):
        return None
    return src, dst


def dcn_translation(placement, patterns: Sequence[Pattern], cache: dict | None = None) -> DcnTranslation | None:
    """The largest translation group of the slices of `placement` (a fabricroutes.Placement) that maps
    the crossing flows of `patterns` and the DCN they take onto themselves (module docstring);
    None when there is none but the identity, the slices are not alike native tori or
    rectangles, links or chips failed, or the DCN hashes its spines. `cache` (one per
    placement) keeps what does not depend on the patterns: each translation's check, each
    group's orbits."""
    cache = {} if cache is None else cache
    views = placement.views
    fab = placement.fabric
    if len(views) < 2 or placement.degraded or fab.dcn.kind != "eps":
        return None
    v0 = views[0]
    spec = v0.slice.spec
    if spec.kind not in ("cubes", "rectangle") or any(v.slice.spec != spec or v.slice.form != "native" for v in views):
        return None
    groups = fabric_groups(fab, cache)
    if groups is None or any(p.split is None for p in patterns):
        return None
    shape = v0.shape
    if "chips" not in cache:
        cache["chips"] = (np.concatenate([v.chips for v in views]).astype(np.int64),
                          np.concatenate([v.coords for v in views]).astype(np.int64))
    chips, coords = cache["chips"]

    def shifted(axis: int, q: int) -> np.ndarray:
        """Each chip moved by q along the axis in its slice."""
        c = coords.copy()
        c[:, axis] = (c[:, axis] + q) % shape[axis]
        return chips[np.repeat(np.arange(len(views)) * v0.n, v0.n) + np.ravel_multi_index(tuple(c.T), shape)]

    periods, maps = [], []
    for a, n in enumerate(shape):
        p = 1
        for pat in patterns:
            p = math.lcm(p, pattern_periods(pat, v0)[a])
        found = None
        for q in range(p, n, p):
            if n % q:
                continue
            if ("map", a, q) not in cache:
                cache["map", a, q] = _vertex_map(fab, groups, chips, shifted(a, q))
            if cache["map", a, q] is not None:
                found = (q, cache["map", a, q])
                break
        if found is None:
            periods.append(n)
        else:
            periods.append(found[0])
            maps.append((found[1], n // found[0]))
    periods = tuple(periods)
    if periods not in cache:
        cache[periods] = _orbits(fab, groups, chips, coords, periods, maps)
    return cache[periods]


def _orbits(fab: Fabric, groups, chips: np.ndarray, coords: np.ndarray, periods: tuple[int, ...],
            maps: list) -> DcnTranslation | None:
    """The translation group with these periods (generated by `maps`: per axis, the vertex
    map of its generator and the generator's order): its orbits of DCN vertices."""
    order = math.prod(k for _, k in maps)
    if order == 1:
        return None
    n_vertices = len(groups[1])
    vertices = _present(maps[0][0][0], len(groups[1]))
    rep = np.arange(n_vertices)
    for (src, dst), k in maps:
        perm = np.arange(n_vertices)
        perm[src] = dst
        best, cur = rep[vertices], vertices
        for _ in range(k - 1):
            cur = perm[cur]
            best = np.minimum(best, rep[cur])
        rep[vertices] = best
    size = np.bincount(rep[vertices], minlength=n_vertices)
    stab = np.ones(n_vertices, np.int64)
    stab[vertices] = order // size[rep[vertices]]
    keep = np.zeros(fab.n_chips, bool)
    keep[chips[(coords < np.array(periods)).all(1)]] = True
    return DcnTranslation(periods, order, keep, vertices, rep, stab)


def crossing_rows(placement, pattern: Pattern, trans: DcnTranslation | None) -> tuple:
    """(src, dst, weight, indptr, entries, frac) of the pattern's flows across slices (only
    those from `trans.keep`, one per orbit, when a translation is given), routed with spine
    groups as one entry wherever the DCN splits over spines (the caller checks that the
    groups' links are alike)."""
    src, dst, w = crossing_flows(placement, pattern, None if trans is None else trans.keep)
    g = dcn_split_groups(placement.fabric, src, dst)
    return (src, dst, w, *(placement.route(src, dst) if g is None else g[:3]))


def crossing_routes(placement, pattern: Pattern, cache: dict, groups, trans: DcnTranslation | None = None) -> tuple:
    """(src, dst, weight, indptr, entries, frac, latency) of the pattern's flows across slices
    for pricing, with spine groups as one entry where the DCN splits over alike spines
    (`groups`: dcn_groups), routed once per pattern and kept in `cache` (the pool's: the DCN
    fold of the step reads them there too). With `trans` (a translation that maps the
    pattern onto itself), one flow per orbit, each entry on its vertex's orbit representative
    with its fraction times `stab`: the load a representative vertex gets is the load every
    vertex of its orbit carries (what pricing reads); latency from the real route."""
    key = id(pattern) if trans is None else (id(pattern), trans.periods)
    hit = cache.get(key)
    if hit is not None:
        return hit[1]
    check_budget("flows", pattern.split.crossing, f"{pattern.name} on group {pattern.layout.name}",
                 "every flow keeps its route's links in memory; or use a smaller group, another algorithm or the fast path")
    src, dst, w = crossing_flows(placement, pattern, None if trans is None else trans.keep)
    fab = placement.fabric
    if trans is not None:
        (ip, ent, fr), grouped = route_crossing(placement, src, dst, groups)
        if len(src) * trans.order != pattern.split.crossing or not grouped:
            raise AssertionError(f"{pattern.name} on group {pattern.layout.name} is not mapped onto itself by "
                                 f"the translations {trans.periods} of the slices")
        rep = trans.rep[ent]
        part = (src, dst, w, ip, rep, fr * trans.stab[rep], route_sums(ip, ent, fr, groups[2]))
        cache[key] = (pattern, part, grouped)
        return part
    if groups is not None:
        (ip, ent, fr), grouped = route_crossing(placement, src, dst, groups)
    else:
        (ip, ent, fr), grouped = placement.route(src, dst), False
    part = (src, dst, w, ip, ent, fr, route_sums(ip, ent, fr, groups[2] if grouped else fab.link_latency_s))
    cache[id(pattern)] = (pattern, part, grouped)
    return part
