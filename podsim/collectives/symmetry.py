"""The symmetry fast path of routing: which flows and links stand for the others.

On a plain torus slice, the translations of the torus are automorphisms of its links and (for
even shifts) of its dimension-order routes. When every pattern in play is unchanged by
translations with periods P (per axis), max-min rates are the same on every translate of a
flow, so it is enough to keep the flows whose source lies in the fundamental domain
(coordinates < P) and to fold every link onto its representative (`canon_link`): the load a
representative link sees from the kept flows equals the load each link of its orbit carries in
the full simulation (orbits of flows and of links have the same size). One ring stands for all
identical rings; one chip of a translation-invariant pattern for all chips. Multipath routes are
translation invariant on plain and twisted tori alike (both are Cayley graphs), so they need no
parity period, and a twisted torus folds patterns that every translation keeps (an all-to-all
over the whole slice). A multislice job's alike slices fold onto one representative each
(`slice_symmetry`); its flows across slices fold into DCN classes in dcnfold.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from podsim.collectives.crossing import pattern_periods
from podsim.collectives.dcnfold import DcnFold
from podsim.collectives.schedule import Pattern
from podsim.topology.fabric import Fabric
from podsim.topology.multipath import reduce_coords
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
