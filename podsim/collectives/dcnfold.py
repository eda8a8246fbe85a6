"""Folding the DCN flows of a multislice job: one representative flow per equivalence class.

The flows that cross slices (chip -> NIC -> leaf -> spine [-> WAN] -> leaf -> NIC -> chip) are
routed in full (under a split ECMP, each flow's S links of one spine kind as one group
vertex: `fold_flows`), then split into classes by colour refinement of the flow-link incidence
graph (flows coloured by pattern and byte weight, links by capacity and latency, entries by the
fraction of the flow's bytes on them; repeat: a flow's colour gains the multiset of its links'
colours, a link's the multiset of its flows' colours, until no class splits). The result is an
equitable partition: every flow of class A puts weight d(A, L) (crossings times fraction) on
links of class L, every link of L carries c(L, A) of A; it is checked before use. Max-min
progressive filling keeps it: flows of a class rise and freeze together, links of a class fill
together, and a phase starts or ends whole classes (a pattern's flows start together with equal
bytes), so the same holds through the whole simulation.

Folded, class A keeps one flow; each of its entries on a link of L moves onto L's
representative link with its fraction times n_A / n_L, so the representative link carries
d(A, L) n_A / n_L = c(L, A) flows' worth of A: exactly the load every link of L carries in
the full simulation. Nothing is assumed about ECMP: the classes are whatever symmetry the
routes leave (under `hash`, flows of one NIC pair and NIC pairs hashed alike; under `split`,
identical slices stay alike, so a few classes at any slice count).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from podsim._arrays import splitmix64, unique
from podsim.collectives.crossing import (
    DcnTranslation,
    crossing_flows,
    crossing_rows,
    dcn_translation,
    fabric_groups,
    groups_alike,
)
from podsim.collectives.routeparts import _subset, route_sums
from podsim.collectives.schedule import Pattern
from podsim.topology.routing import dcn_group_members


def _dense(x: np.ndarray) -> tuple[np.ndarray, int]:
    """Dense labels 0..k-1 of the values of x (in the order of the values), and k; small
    non-negative integers by a presence map, others by np.unique."""
    if x.dtype.kind in "iu" and len(x) and x.min() >= 0 and int(x.max()) < 8 * len(x) + 1024:
        used, at = _index(x)
        return at, len(used)
    u, inv = np.unique(x, return_inverse=True)
    return inv.ravel().astype(np.int64), len(u)


def _pair(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Dense labels of the pairs (a, b) of dense labels."""
    return _dense(a * (int(b.max(initial=0)) + 1) + b)[0]


def _segment_sum(values: np.ndarray, owner: np.ndarray, n: int) -> np.ndarray:
    """Per owner, the wrapping uint64 sum of `values` over its entries; 0 for owners with none
    (np.add.at: no sort of the entries)."""
    out = np.zeros(n, np.uint64)
    np.add.at(out, owner, values)
    return out


def _index(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct ids, sorted; each id's index among them), as np.unique(return_inverse)
    gives, by a presence map over 0..max instead of a sort."""
    if not len(ids):
        return np.empty(0, np.int64), np.empty(0, np.int64)
    present = np.zeros(int(ids.max()) + 1, bool)
    present[ids] = True
    used = np.flatnonzero(present)
    at = np.zeros(len(present), np.int64)
    at[used] = np.arange(len(used))
    return used, at[ids]


def refine(entry_flow: np.ndarray, entry_link: np.ndarray, flow_colour: np.ndarray,
           link_colour: np.ndarray, max_rounds: int = 64, entry_label: np.ndarray | None = None,
           link_mult: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Coarsest stable refinement of the given colours (flow class, link class per id);
    links crossed by no flow keep their colour; `entry_label` (dense, e.g. the fraction of
    the flow's bytes on the entry) tags each entry; `link_mult` counts an entry that many
    times in its link's multiset (a quotient graph: crossing.DcnTranslation.stab). Multisets
    are summed 64-bit hashes; a collision could only merge classes, which `is_equitable`
    then refuses."""
    tag = np.zeros(len(entry_flow), np.uint64) if entry_label is None else entry_label.astype(np.uint64) << np.uint64(32)
    mult = np.uint64(1) if link_mult is None else link_mult.astype(np.uint64)
    fc, nf = _dense(flow_colour)
    lc, nl = _dense(link_colour)
    n_flows, n_links = len(fc), len(lc)
    with np.errstate(over="ignore"):
        for _ in range(max_rounds):
            sig = _segment_sum(splitmix64((lc[entry_link].astype(np.uint64) * np.uint64(2) + np.uint64(1)) ^ tag), entry_flow, n_flows)
            fc = _pair(fc, _dense(sig)[0])
            sig = _segment_sum(splitmix64((fc[entry_flow].astype(np.uint64) * np.uint64(2)) ^ tag) * mult, entry_link, n_links)
            lc = _pair(lc, _dense(sig)[0])
            new = (int(fc.max(initial=-1)) + 1, int(lc.max(initial=-1)) + 1)
            if new == (nf, nl):
                break
            nf, nl = new
    return fc, lc


def _same_rows(own: np.ndarray, oc: np.ndarray, ew: np.ndarray, own_class: np.ndarray, k: int, ordered: bool) -> bool:
    """Whether every member of a class (own_class) has the weight its class's first member
    has on each of the k other classes: per member a row of k weights (bincount), compared
    with the first member's row, members a block at a time (no sort of the entries);
    `ordered`: `own` is non-decreasing (the caller has checked), so a block is a slice."""
    n = len(own_class)
    n_cls = int(own_class.max(initial=-1)) + 1
    first = np.full(n_cls, n, np.int64)
    np.minimum.at(first, own_class, np.arange(n))
    rep_rank = np.full(n, -1, np.int64)
    rep_rank[first] = np.arange(n_cls)
    sel = rep_rank[own] >= 0
    ref = np.bincount(rep_rank[own[sel]] * k + oc[sel], weights=ew[sel], minlength=n_cls * k).reshape(n_cls, k)
    rows = max(1, _CELLS // max(k, 1))
    for a in range(0, n, rows):
        b = min(n, a + rows)
        if ordered:
            lo, hi = np.searchsorted(own, [a, b])
            o, c, w = own[lo:hi], oc[lo:hi], ew[lo:hi]
        else:
            m = (own >= a) & (own < b)
            o, c, w = own[m], oc[m], ew[m]
        got = np.bincount((o - a) * k + c, weights=w, minlength=(b - a) * k).reshape(b - a, k)
        want = ref[own_class[a:b]]
        if not (np.array_equal(got, want) or np.allclose(got, want, rtol=1e-12, atol=0.0)):
            return False
    return True


_CELLS = 1 << 22  # (members x classes) weights compared at once by _same_rows


def is_equitable(entry_flow: np.ndarray, entry_link: np.ndarray, fc: np.ndarray, lc: np.ndarray,
                 entry_weight: np.ndarray | None = None, link_mult: np.ndarray | None = None) -> bool:
    """Whether every flow of a class puts the same weight (number of crossings, each weighed by
    the fraction of the flow's bytes on it) on each link class, and every link of a class
    carries the same weight of each flow class (exact up to float rounding of the sums);
    `link_mult` weighs each entry that many times more on its link's side (as in `refine`)."""
    ew = np.ones(len(entry_flow)) if entry_weight is None else np.asarray(entry_weight, float)
    lw = ew if link_mult is None else ew * link_mult
    n_fc = np.bincount(fc)
    n_lc = np.bincount(lc)
    for own, other, own_class, other_class, size, w in ((entry_flow, entry_link, fc, lc, n_fc, ew),
                                                          (entry_link, entry_flow, lc, fc, n_lc, lw)):
        k = int(other_class.max(initial=-1)) + 1
        ordered = len(own) < 2 or bool((own[1:] >= own[:-1]).all())
        if len(own_class) * k <= (1 << 26) and (ordered or len(own_class) * k <= 4 * _CELLS):
            if not _same_rows(own, other_class[other], w, own_class, k, ordered):
                return False
            continue
        # many classes on the other side: per (member, other class) weights by sorting
        oc = other_class[other]
        rows, inv_rows = np.unique(own * (int(oc.max(initial=0)) + 1) + oc, return_inverse=True)
        n = np.bincount(inv_rows.ravel(), weights=w, minlength=len(rows))
        member, ocls = np.divmod(rows, int(oc.max(initial=0)) + 1)
        mcls = own_class[member]
        group_key = mcls * (int(ocls.max(initial=0)) + 1) + ocls
        keys, inv, members = np.unique(group_key, return_inverse=True, return_counts=True)
        inv = inv.ravel()
        if not np.array_equal(members, size[keys // (int(ocls.max(initial=0)) + 1)]):
            return False  # some member of the class has none of that other class
        lo = np.full(len(keys), np.inf)
        hi = np.full(len(keys), -np.inf)
        np.minimum.at(lo, inv, n)
        np.maximum.at(hi, inv, n)
        if not np.allclose(lo, hi, rtol=1e-12, atol=0.0):
            return False
    return True


@dataclass(frozen=True, eq=False)
class FoldedFlows:
    """One pattern's representative flows (one per class): ends, byte weights, latency of
    their own routes, and CSR routes on representative links with each entry's fraction of
    the flow's bytes; `represented`: the pattern's flows they stand for."""

    src: np.ndarray
    dst: np.ndarray
    weight: np.ndarray | None
    latency_s: np.ndarray
    indptr: np.ndarray
    links: np.ndarray
    frac: np.ndarray
    represented: int


@dataclass(frozen=True, eq=False)
class DcnFold:
    """The classes of every cross-slice flow of a job: per pattern (by id) its folded flows,
    and fabric link id -> representative link id (identity off the classes' links)."""

    patterns: dict[int, FoldedFlows]
    canon_link: np.ndarray
    flows: int
    classes: int


def fold_flows(routed: Sequence[tuple], capacity: np.ndarray, latency: np.ndarray,
               members: np.ndarray | None = None, trans: DcnTranslation | None = None) -> DcnFold | None:
    """Fold the flows of patterns that run on the same links: `routed` holds, per pattern,
    (pattern, src, dst, weight, indptr, links, frac), routed in full (`frac`: the fraction of
    the flow's bytes on each entry, None on single paths). None when the partition is not
    equitable (only a hash collision could do that) or saves nothing.

    With `members` (S links per group, `routing.dcn_split_groups`), an entry id n_links + g
    stands for the S links of group g, each with the entry's fraction. Those links are twins
    (the same flows cross each with the same fraction, and they have one capacity and
    latency, which the caller checks), so refinement never separates them: refining with one
    vertex per group gives the same classes, on S times fewer entries (and `is_equitable`
    weighs a flow's S entries on a group as one, the same test up to that constant factor).
    Only the representatives' routes are expanded to their links.

    With `trans` (crossing.DcnTranslation), `routed` holds one flow of each orbit of the
    translations (the flows from `trans.keep`), and refinement runs on the quotient: every
    entry on its vertex's orbit representative, counted `stab` times on that vertex's side
    (each vertex of an orbit carries `stab` times the load the representatives put on the
    whole orbit), which gives the classes refinement of every flow gives (colours are
    constant on orbits); classes then count `order` flows per representative and every
    vertex of each orbit."""
    if not routed:
        return None
    n_links = len(capacity)
    order = 1 if trans is None else trans.order
    sizes = [len(r[4]) - 1 for r in routed]
    base = np.concatenate([[0], np.cumsum(sizes)])
    n_flows = int(base[-1])
    el = np.concatenate([r[5] for r in routed]).astype(np.int64)
    ew = np.concatenate([np.ones(len(r[5])) if r[6] is None else np.asarray(r[6], float) for r in routed])
    ef = np.concatenate([np.repeat(np.arange(n) + b, np.diff(r[4])) for n, b, r in zip(sizes, base, routed, strict=False)])
    pat = np.repeat(np.arange(len(routed)), sizes)
    weight = np.concatenate([np.ones(n) if r[3] is None else np.asarray(r[3], float) for n, r in zip(sizes, routed, strict=True)])
    if trans is not None:
        el = trans.rep[el]
    used, local = _index(el)
    stab = None if trans is None else trans.stab[el]
    link_colour = _pair(*(_dense(x[_lowest(used, members, n_links)])[0] for x in (capacity, latency)))
    fc, lc = refine(ef, local, _pair(pat, _dense(weight)[0]), link_colour, entry_label=_dense(ew)[0], link_mult=stab)
    n_classes = int(fc.max()) + 1
    if n_classes == n_flows * order or not is_equitable(ef, local, fc, lc, ew, stab):
        return None
    del ef, local, el, ew, stab
    if trans is not None:  # every vertex of each orbit the representatives cross, in its orbit's class
        at = np.full(len(trans.rep), -1, np.int64)
        at[used] = np.arange(len(used))
        verts = trans.vertices[at[trans.rep[trans.vertices]] >= 0]
        lc, used = lc[at[trans.rep[verts]]], verts
    group = used >= n_links
    one = _lowest(used, members, n_links)  # a link of each vertex, and how many links it stands for
    size = np.where(group, 1 if members is None else members.shape[1], 1)
    n_fc, n_lc = np.bincount(fc) * order, np.bincount(lc, weights=size).astype(np.int64)
    rep_link = np.full(int(lc.max()) + 1, np.iinfo(np.int64).max)
    np.minimum.at(rep_link, lc, one)
    canon = np.arange(n_links)
    link_class = np.full(n_links, -1, np.int64)
    vertices = [(used[~group], lc[~group])]
    if group.any():
        vertices.append((members[used[group] - n_links], lc[group][:, None]))
    for ids, cls in vertices:
        canon[ids] = rep_link[cls]
        link_class[ids] = cls
    first = np.full(n_classes, n_flows)
    np.minimum.at(first, fc, np.arange(n_flows))
    out = {}
    for i, (p, src, dst, w, ip, lk, fr) in enumerate(routed):
        reps = np.sort(first[unique(fc[base[i]:base[i + 1]])]) - base[i]
        indptr, links, share = _expand(ip, np.asarray(lk, np.int64), fr, reps, members, n_links)
        hops = np.diff(indptr)
        flow_latency = route_sums(indptr, links, share, latency)  # as Router.routes sums a full route's
        frac = share * n_fc[fc[base[i] + np.repeat(reps, hops)]] / n_lc[link_class[links]]
        out[id(p)] = FoldedFlows(src[reps], dst[reps], None if w is None else np.asarray(w)[reps], flow_latency,
                                 indptr, canon[links], frac, sizes[i] * order)
    return DcnFold(out, canon, n_flows * order, n_classes)


def _lowest(vertices: np.ndarray, members: np.ndarray | None, n_links: int) -> np.ndarray:
    """The lowest link of each vertex (a link, or a spine group n_links + g)."""
    one = vertices.copy()
    group = vertices >= n_links
    if group.any():
        one[group] = members[vertices[group] - n_links].min(axis=1)
    return one


def _expand(ip: np.ndarray, entries: np.ndarray, frac: np.ndarray | None, flows: np.ndarray,
            members: np.ndarray | None, n_links: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(indptr, links, frac) of `flows` with every group entry replaced by its links in order."""
    indptr, ent, fr = _subset(ip, entries, None if frac is None else np.asarray(frac, float), flows)
    if fr is None:
        fr = np.ones(len(ent))
    if members is None or not (ent >= n_links).any():
        return indptr, ent, fr
    grp = ent >= n_links
    count = np.where(grp, members.shape[1], 1)
    at = np.concatenate([[0], np.cumsum(count)])  # where each entry's links start once expanded
    ent, fr, grp = np.repeat(ent, count), np.repeat(fr, count), np.repeat(grp, count)
    k = np.arange(len(ent)) - np.repeat(at[:-1], count)
    ent[grp] = members[ent[grp] - n_links, k[grp]]
    return at[indptr], ent, fr


def fold_crossing(placement, patterns: Sequence[Pattern], cache: dict[frozenset, DcnFold | None],
                  max_flows: int, routed: dict | None = None, translations: dict | None = None) -> DcnFold | None:
    """The fold of the flows of `patterns` that cross slices of `placement` (a
    fabricroutes.Placement), all together since they may run at once; a pattern that mixes flows
    inside and across slices (a ring over `z,dcn`) brings its crossing flows. Where the
    slices' translations map those flows and the DCN onto themselves
    (crossing.dcn_translation), only one flow of each orbit is listed and routed; otherwise
    every one, or (`routed`) the routes of crossing flows already made for pricing
    (crossing.crossing_routes, by pattern id), used as they are. None when a pattern cannot
    say which of its flows cross, or has more than `max_flows` crossing (the router refuses
    it), when none crosses, or when folding saves nothing. Cached by the set of crossing
    patterns; `translations`: the placement's crossing.dcn_translation cache."""
    crossing, seen = [], set()
    for pat in patterns:
        if id(pat) in seen:
            continue
        seen.add(id(pat))
        sp = pat.split
        if sp is None or sp.crossing > max_flows:
            return None
        if sp.crossing:
            crossing.append(pat)
    if not crossing:
        return None
    key = frozenset(id(p) for p in crossing)
    if key not in cache:
        fab = placement.fabric
        trans = dcn_translation(placement, crossing, translations)
        rows = []
        for pat in crossing:
            hit = routed.get(id(pat)) if routed is not None and trans is None else None
            rows.append((pat, *hit[1][:6]) if hit is not None else (pat, *crossing_rows(placement, pat, trans)))
        if trans is not None and any(len(r[1]) * trans.order != r[0].split.crossing for r in rows):
            trans = None  # a pattern not mapped onto itself after all: every flow
            rows = [(pat, *crossing_rows(placement, pat, None)) for pat in crossing]
        members, groups = dcn_group_members(fab), fabric_groups(fab, translations)
        if not all(groups_alike(groups, r[5], fab.n_links) for r in rows):
            trans, rows = None, []
            for pat in crossing:  # some spine group's links differ: every flow on its links
                src, dst, w = crossing_flows(placement, pat)
                rows.append((pat, src, dst, w, *placement.route(src, dst)))
        cache[key] = fold_flows(rows, fab.link_capacity_bytes_per_s, fab.link_latency_s, members, trans)
    return cache[key]
