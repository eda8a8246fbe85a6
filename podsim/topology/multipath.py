"""Multipath routes on (twisted) tori and meshes: traffic split over all minimal paths.

A torus slice is the lattice Z^D modulo its wraparound lattice L, generated per wrapped axis d
by g_d = n_d e_d - twist_d (crossing axis d's wraparound in the + direction adds twist_d to the
other coordinates; zero on a plain torus). It is a Cayley graph, so every route is a
translate of a route from the origin. The minimal paths from s to t are the monotone lattice
paths inside the boxes spanned by the displacements t - s + v (v in L) of least L1 length
(Camarero, Martinez, Beivide, IEEE TPDS 2015); paths of different boxes end at different
lattice points, so they are distinct. Nothing is enumerated: in a box of size m the share of
paths through edge a -> a + e_d is C(a) C(m - a - e_d) / C(m), C the multinomial count of
monotone paths; with per-link weights a forward and a backward sum over the lattice levels give
the weighted count F(a) w B(a + e_d) out of Z = sum over boxes of F(end).

`split_routes(view, src, dst)` gives each flow its links and the fraction of its bytes on each,
split evenly over all its minimal paths (`shortest_paths`), computed once per displacement
class and slice geometry (cached) and, under a translation symmetry, folded onto representative
links before it is expanded. `path_dag(view, src, dst).routes(weights)` weighs each path by the
product of its links' weights (`adaptive`, iterated by podsim.collectives.adaptive).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np

from podsim.topology.slices import SliceView

ROUTING_POLICIES = ("dimension_order", "shortest_paths", "adaptive")
"""Routing policies: one dimension-order path; an even split over all minimal paths; a split
over minimal paths re-weighted by link load until max-min rates settle."""

_K_RANGE = 2
"""Lattice multiples tried per generator when looking for minimal displacements: enough for
plain tori (one) and the TPU twist forms (tests/test_routing.py checks against brute force)."""


def lattice(shape, wrap, twist) -> np.ndarray:
    """(m, D) generators g_d = n_d e_d - twist_d of the wraparound lattice (wrapped axes, n_d > 1)."""
    shape = np.asarray(shape, np.int64)
    rows = []
    for d, n in enumerate(shape):
        if wrap[d] and n > 1:
            g = -np.asarray(twist[d], np.int64).copy()
            g[d] = n
            rows.append(g)
    return np.array(rows, np.int64).reshape(len(rows), len(shape))


def reduce_coords(p: np.ndarray, shape, wrap, twist) -> np.ndarray:
    """Lattice points (.., D) reduced to torus coordinates in [0, n_d) (twisted axes first:
    their wraparound shifts only plain axes in the TPU forms, so one pass suffices)."""
    p = np.array(p, np.int64)
    shape = np.asarray(shape, np.int64)
    twist = np.asarray(twist, np.int64)
    twisted = [d for d in range(len(shape)) if wrap[d] and twist[d].any()]
    for d in twisted:
        if any(twist[d][e] and d2 == e for e in range(len(shape)) for d2 in twisted):
            raise AssertionError("a twisted wraparound shifts another twisted axis; reduce_coords needs one pass per axis")
        k = np.floor_divide(p[..., d], shape[d])
        p[..., d] -= k * shape[d]
        p += k[..., None] * twist[d]
    for d in range(len(shape)):
        if wrap[d]:
            p[..., d] %= shape[d]
    return p


def minimal_displacements(delta: np.ndarray, shape, wrap, twist) -> tuple[np.ndarray, np.ndarray]:
    """For displacements `delta` (K, D) (dst - src in torus coordinates), every lattice
    displacement of least L1 length: (owner (M,), t (M, D)) with owner indexing delta."""
    delta = np.asarray(delta, np.int64)
    gens = lattice(shape, wrap, twist)
    ks = np.array(list(itertools.product(range(-_K_RANGE, _K_RANGE + 1), repeat=len(gens))), np.int64)
    shifts = ks @ gens if len(gens) else np.zeros((1, delta.shape[1]), np.int64)
    cand = delta[:, None, :] + shifts[None, :, :]  # (K, S, D)
    length = np.abs(cand).sum(2)
    best = length == length.min(1, keepdims=True)
    owner, which = np.nonzero(best)
    return owner, cand[owner, which]


@dataclass(frozen=True)
class _Box:
    """Monotone lattice paths from 0 to m (m >= 0 per axis): nodes, edges and their levels;
    `unit_frac[e]` = C(a) C(m - a - e_d) / C(m), the share of the paths through edge e, with
    C(v) = |v|! / prod v_i! the number of paths from 0 to v; `paths` = C(m)."""

    n_nodes: int
    e_from: np.ndarray
    e_to: np.ndarray
    e_axis: np.ndarray
    e_start: np.ndarray  # (E, D) lattice position (>= 0) of each edge's tail
    e_level: np.ndarray
    end: int
    unit_frac: np.ndarray
    paths: float


def _n_paths(v: np.ndarray) -> np.ndarray:
    """Monotone lattice paths from 0 to each row of v: the multinomial |v|! / prod v_i!."""
    v = np.asarray(v, np.int64)
    return _FACT[v.sum(-1)] / _FACT[v].prod(-1)


_FACT = np.array([float(math.factorial(k)) for k in range(171)])


@lru_cache(maxsize=4096)
def _box(m: tuple[int, ...]) -> _Box:
    dims = tuple(k + 1 for k in m)
    n = int(np.prod(dims))
    coords = np.indices(dims, dtype=np.int64).reshape(len(dims), n).T
    strides = np.array([int(np.prod(dims[d + 1:])) for d in range(len(dims))], np.int64)
    fr, to, ax = [], [], []
    for d in range(len(m)):
        tail = np.flatnonzero(coords[:, d] < m[d])
        fr.append(tail)
        to.append(tail + strides[d])
        ax.append(np.full(len(tail), d, np.int64))
    e_from = np.concatenate(fr) if fr else np.empty(0, np.int64)
    e_to = np.concatenate(to) if to else e_from
    total = float(_n_paths(np.array(m)))
    unit = _n_paths(coords[e_from]) * _n_paths(np.array(m) - coords[e_to]) / total
    return _Box(n, e_from, e_to, np.concatenate(ax) if ax else e_from, coords[e_from], coords[e_from].sum(1), n - 1,
                unit, total)


@dataclass(frozen=True, eq=False)
class PathDag:
    """The minimal-path DAGs of F flows, one lattice box per minimal displacement, edges
    expanded per flow; `link[e]` is the fabric link edge e crosses."""

    n_flows: int
    n_nodes: int
    e_flow: np.ndarray
    e_from: np.ndarray
    e_to: np.ndarray
    e_level: np.ndarray
    link: np.ndarray
    box_flow: np.ndarray
    box_start: np.ndarray
    box_end: np.ndarray

    @cached_property
    def _levels(self) -> list[np.ndarray]:
        order = np.argsort(self.e_level, kind="stable")
        cuts = np.flatnonzero(np.diff(self.e_level[order])) + 1
        return np.split(order, cuts) if len(order) else []

    def edge_fractions(self, edge_weight: np.ndarray | None = None) -> np.ndarray:
        """Fraction of each flow's bytes on each edge: paths weighted by the product of their
        edges' weights (unit weights: every minimal path equally), by a forward and a
        backward sum over the lattice levels."""
        w = np.ones(len(self.e_from)) if edge_weight is None else np.asarray(edge_weight, float)
        fwd = np.zeros(self.n_nodes)
        fwd[self.box_start] = 1.0
        bwd = np.zeros(self.n_nodes)
        bwd[self.box_end] = 1.0
        for g in self._levels:
            fwd += np.bincount(self.e_to[g], weights=fwd[self.e_from[g]] * w[g], minlength=self.n_nodes)
        for g in reversed(self._levels):
            bwd += np.bincount(self.e_from[g], weights=bwd[self.e_to[g]] * w[g], minlength=self.n_nodes)
        z = np.bincount(self.box_flow, weights=fwd[self.box_end], minlength=self.n_flows)
        return fwd[self.e_from] * w * bwd[self.e_to] / z[self.e_flow]

    @cached_property
    def _merge(self):
        """Entries of one flow on one link merged: (indptr, links, entry -> merged index)."""
        n_links = max(int(self.link.max(initial=-1)) + 1, 1)
        uniq, inv = np.unique(self.e_flow * n_links + self.link, return_inverse=True)
        flow = uniq // n_links
        indptr = np.concatenate([[0], np.cumsum(np.bincount(flow, minlength=self.n_flows))]).astype(np.int64)
        return indptr, (uniq % n_links).astype(np.int64), inv.reshape(-1)

    def routes(self, edge_weight: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(indptr, links, frac) per flow, one entry per distinct link, links sorted."""
        indptr, links, inv = self._merge
        return indptr, links, np.bincount(inv, weights=self.edge_fractions(edge_weight), minlength=len(links))


def _displacement_classes(view: SliceView, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(classes (K, D), flow -> class): destinations relative to sources, reduced (a mesh
    axis keeps its signed offset). Flows of one class have translated routes."""
    slc = view.slice
    cs, cd = view.coords[src].astype(np.int64), view.coords[dst].astype(np.int64)
    rel = reduce_coords(cd - cs, slc.shape, slc.wrap, slc.twist)
    for d, w in enumerate(slc.wrap):
        if not w:
            rel[:, d] = cd[:, d] - cs[:, d]
    ext, off = _key_space(slc.shape, slc.wrap)
    key = np.ravel_multi_index(tuple((rel + off).T), ext) if len(rel) else np.empty(0, np.int64)
    present = np.flatnonzero(np.bincount(key, minlength=int(np.prod(ext))))  # sorted, without sorting
    index = np.empty(int(np.prod(ext)), np.int64)
    index[present] = np.arange(len(present))
    classes = np.stack(np.unravel_index(present, ext), 1).astype(np.int64) - off if len(present) else rel[:0]
    return classes, index[key]


def _class_edges(classes: np.ndarray, shape, wrap, twist, with_dag: bool) -> dict:
    """The edges of every minimal-path box of every class: owning class, port key (tail
    relative to the source, reduced, x 2D + 2 axis + direction), even-split fraction, and
    with `with_dag` the DAG arrays (nodes numbered contiguously per class)."""
    dims = len(shape)
    owner, disp = minimal_displacements(classes, shape, wrap, twist)  # boxes come by class
    sizes, size_of = np.unique(np.abs(disp), axis=0, return_inverse=True)
    size_of = size_of.reshape(-1)
    boxes = [_box(tuple(int(v) for v in m)) for m in sizes]
    n_nodes = np.array([b.n_nodes for b in boxes], np.int64)[size_of]
    base = np.concatenate([[0], np.cumsum(n_nodes)])
    z = np.bincount(owner, weights=np.array([b.paths for b in boxes])[size_of], minlength=len(classes))
    names = ("flow", "axis", "sign", "tail", "frac") + (("from", "to", "level") if with_dag else ())
    parts = {k: [] for k in names}
    order = np.argsort(size_of, kind="stable")  # boxes of one size together
    for grp in np.split(order, np.flatnonzero(np.diff(size_of[order])) + 1) if len(order) else []:
        bx = boxes[size_of[grp[0]]]
        k = len(bx.e_from)
        sgn = np.where(disp[grp] < 0, -1, 1)  # (B, D)
        parts["flow"].append(np.repeat(owner[grp], k))
        parts["axis"].append(np.tile(bx.e_axis, len(grp)))
        parts["sign"].append(sgn[:, bx.e_axis].ravel())
        parts["tail"].append((bx.e_start[None, :, :] * sgn[:, None, :]).reshape(-1, dims))
        parts["frac"].append((bx.unit_frac[None, :] * (bx.paths / z[owner[grp]])[:, None]).ravel())
        if with_dag:
            parts["from"].append((base[grp][:, None] + bx.e_from[None, :]).ravel())
            parts["to"].append((base[grp][:, None] + bx.e_to[None, :]).ravel())
            parts["level"].append(np.tile(bx.e_level, len(grp)))
    out = {k: (np.concatenate(v) if v else np.empty((0, dims) if k == "tail" else 0, float if k == "frac" else np.int64))
           for k, v in parts.items()}
    out["direction"] = (out.pop("sign") < 0).astype(np.int64)
    ext, off = _key_space(shape, wrap)
    red = reduce_coords(out["tail"], shape, wrap, twist) + off
    out["key"] = (np.ravel_multi_index(tuple(red.T), ext) * 2 * dims + 2 * out["axis"] + out["direction"]
                  if len(red) else np.empty(0, np.int64))
    if with_dag:
        out.update(n_nodes=int(base[-1]), box_flow=owner, box_start=base[:-1], box_end=base[:-1] + n_nodes - 1)
    return out


def _key_space(shape, wrap) -> tuple[tuple[int, ...], np.ndarray]:
    """Shape and offset of relative positions: [0, n) on a wrapped axis, (-n, n) on a mesh axis."""
    ext = tuple(int(n) if w else 2 * int(n) - 1 for n, w in zip(shape, wrap, strict=True))
    return ext, np.array([0 if w else int(n) - 1 for n, w in zip(shape, wrap, strict=True)], np.int64)


def _links(view: SliceView, src_coords: np.ndarray, rel: np.ndarray, axis: np.ndarray, direction: np.ndarray) -> np.ndarray:
    slc = view.slice
    pos = reduce_coords(src_coords + rel, slc.shape, slc.wrap, slc.twist)
    chip = np.ravel_multi_index(tuple(pos.T), slc.shape) if len(pos) else np.empty(0, np.int64)
    link = view.port_link[chip, axis, direction].astype(np.int64)
    if (link < 0).any():
        raise AssertionError(f"a minimal path leaves slice {slc.spec}: the slice is not wired as its topology")
    return link


def _expand(counts: np.ndarray, ptr: np.ndarray, cls: np.ndarray):
    """Per flow, the indices of its class's entries (CSR `ptr` over classes): (flow, index)."""
    fe = counts[cls]
    flow = np.repeat(np.arange(len(cls)), fe)
    idx = np.repeat(ptr[cls], fe) + (np.arange(fe.sum()) - np.repeat(np.cumsum(fe) - fe, fe))
    return flow, idx


def path_dag(view: SliceView, src: np.ndarray, dst: np.ndarray) -> PathDag:
    """Minimal-path DAGs between slice-local chips (plain or twisted torus, or mesh), one per
    flow, over fabric links (for splits that depend on the links, e.g. their load)."""
    src = np.asarray(src, np.int64)
    dst = np.asarray(dst, np.int64)
    slc = view.slice
    classes, cls = _displacement_classes(view, src, dst)
    t = _class_edges(classes, slc.shape, slc.wrap, slc.twist, with_dag=True)
    k = len(classes)
    order = np.argsort(t["flow"], kind="stable")  # class edges grouped by class
    e_count = np.bincount(t["flow"], minlength=k)
    flow, idx = _expand(e_count, np.concatenate([[0], np.cumsum(e_count)]), cls)
    idx = order[idx]
    # nodes: each flow gets a private copy of its class's nodes
    n_count = np.bincount(t["box_flow"], weights=t["box_end"] - t["box_start"] + 1, minlength=k).astype(np.int64)
    n_ptr = np.concatenate([[0], np.cumsum(n_count)])
    node_base = np.concatenate([[0], np.cumsum(n_count[cls])])[:-1]
    link = _links(view, view.coords[src].astype(np.int64)[flow], t["tail"][idx], t["axis"][idx], t["direction"][idx])
    shift = node_base[flow] - n_ptr[t["flow"][idx]]
    b_count = np.bincount(t["box_flow"], minlength=k)
    bflow, bidx = _expand(b_count, np.concatenate([[0], np.cumsum(b_count)]), cls)
    bshift = node_base[bflow] - n_ptr[t["box_flow"][bidx]]
    return PathDag(
        n_flows=len(src), n_nodes=int(n_count[cls].sum()), e_flow=flow,
        e_from=shift + t["from"][idx], e_to=shift + t["to"][idx], e_level=t["level"][idx], link=link,
        box_flow=bflow, box_start=bshift + t["box_start"][bidx], box_end=bshift + t["box_end"][bidx],
    )


class _EvenCache:
    """Even splits of one slice geometry, per displacement class (dense over the classes):
    entries keys[start[c]:start[c] + count[c]] (port keys) and frac (their shares)."""

    def __init__(self, n_classes: int):
        self.start = np.full(n_classes, -1, np.int64)
        self.count = np.zeros(n_classes, np.int64)
        self.keys = np.empty(0, np.int64)
        self.frac = np.empty(0)


_EVEN: dict[tuple, _EvenCache] = {}
_EVEN_MAX_ENTRIES = 20_000_000
"""Most cached entries over all geometries before the cache starts again."""


def _cache_for(geo: tuple, ext) -> _EvenCache:
    """The cache of one geometry (and fold), made on first use; the whole cache starts again
    when it holds more than _EVEN_MAX_ENTRIES entries over all geometries."""
    if geo not in _EVEN:
        if sum(len(c.keys) for c in _EVEN.values()) > _EVEN_MAX_ENTRIES:
            _EVEN.clear()
        _EVEN[geo] = _EvenCache(int(np.prod(ext)))
    return _EVEN[geo]


def _even_templates(shape, wrap, twist, classes: np.ndarray) -> tuple[_EvenCache, np.ndarray]:
    """The cache holding each class's even split over its minimal paths (one entry per port:
    boxes of a class may share ports), and the classes' ids in it."""
    ext, off = _key_space(shape, wrap)
    cache = _cache_for((tuple(shape), tuple(wrap), np.asarray(twist).tobytes()), ext)
    ids = np.ravel_multi_index(tuple((classes + off).T), ext) if len(classes) else np.empty(0, np.int64)
    missing = np.flatnonzero(cache.start[ids] < 0)
    if len(missing):
        t = _class_edges(classes[missing], shape, wrap, twist, with_dag=False)
        n_keys = int(t["key"].max(initial=0)) + 1
        _store_classes(cache, ids[missing], t["flow"], t["key"], t["frac"], n_keys)
    return cache, ids


def _folded_templates(shape, wrap, twist, classes: np.ndarray, periods: tuple[int, ...]) -> tuple[_EvenCache, np.ndarray]:
    """Like `_even_templates`, with each class's ports folded by translations of `periods`:
    entries keyed by (position mod periods, axis, direction), shares summed."""
    dims = len(shape)
    ext, off = _key_space(shape, wrap)
    cache = _cache_for((tuple(shape), tuple(wrap), np.asarray(twist).tobytes(), tuple(periods)), ext)
    ids = np.ravel_multi_index(tuple((classes + off).T), ext) if len(classes) else np.empty(0, np.int64)
    missing = np.flatnonzero(cache.start[ids] < 0)
    if len(missing) and all(p == 1 for p in periods):
        # every port of an axis and direction folds onto one: a box of displacement m puts
        # |m_d| hops on axis d in the direction of m_d on every one of its paths
        owner, disp = minimal_displacements(classes[missing], shape, wrap, twist)
        paths = _n_paths(np.abs(disp))
        z = np.bincount(owner, weights=paths, minlength=len(missing))
        box, axis = np.nonzero(disp)
        folded = 2 * axis + (disp[box, axis] < 0)
        owner, share = owner[box], np.abs(disp[box, axis]) * paths[box] / z[owner[box]]
    elif len(missing):
        full, fids = _even_templates(shape, wrap, twist, classes[missing])
        owner, idx = _expand(full.count[fids], full.start[fids], np.arange(len(missing)))
        keys = full.keys[idx]
        chip, rest = keys // (2 * dims), keys % (2 * dims)
        rel = np.stack(np.unravel_index(chip, ext), 1).astype(np.int64) - off if len(chip) else np.empty((0, dims), np.int64)
        per = np.asarray(periods, np.int64)
        folded = np.ravel_multi_index(tuple((rel % per).T), tuple(periods)) * 2 * dims + rest if len(rel) else rest
        share = full.frac[idx]
    if len(missing):
        _store_classes(cache, ids[missing], owner, folded, share, int(np.prod(periods)) * 2 * dims)
    return cache, ids


def _store_classes(cache, slots: np.ndarray, owner: np.ndarray, key: np.ndarray, share: np.ndarray, n_keys: int) -> None:
    """Append each new class's link keys and byte shares (entries of one class and key summed)
    to the cache, and point the class's slot at them."""
    uniq, inv = np.unique(owner * n_keys + key, return_inverse=True)
    frac = np.bincount(inv.reshape(-1), weights=share, minlength=len(uniq))
    count = np.bincount(uniq // n_keys, minlength=len(slots))
    cache.start[slots] = len(cache.keys) + np.concatenate([[0], np.cumsum(count)[:-1]])
    cache.count[slots] = count
    cache.keys = np.concatenate([cache.keys, uniq % n_keys])
    cache.frac = np.concatenate([cache.frac, frac])


def split_routes(view: SliceView, src: np.ndarray, dst: np.ndarray, periods: tuple[int, ...] | None = None):
    """(indptr, links, frac): each flow's bytes split evenly over all its minimal paths. The
    split is computed once per displacement class (and slice geometry) and translated to
    each flow's source. With `periods` (a translation symmetry of the slice, see
    podsim.collectives.symmetry), links are given folded onto their representatives (the
    port at the chip whose coordinates are the link's mod periods), one entry per
    representative: a far flow crosses hundreds of links but few representatives."""
    src = np.asarray(src, np.int64)
    dst = np.asarray(dst, np.int64)
    slc = view.slice
    dims = len(view.shape)
    classes, cls = _displacement_classes(view, src, dst)
    if periods is None:
        cache, ids = _even_templates(slc.shape, slc.wrap, slc.twist, classes)
    else:
        cache, ids = _folded_templates(slc.shape, slc.wrap, slc.twist, classes, periods)
    flow, idx = _expand(cache.count[ids], cache.start[ids], cls)
    keys = cache.keys[idx]
    chip, rest = keys // (2 * dims), keys % (2 * dims)
    indptr = np.concatenate([[0], np.cumsum(cache.count[ids][cls])]).astype(np.int64)
    if periods is None:
        ext, off = _key_space(view.shape, slc.wrap)
        rel = np.stack(np.unravel_index(chip, ext), 1).astype(np.int64) - off if len(chip) else np.empty((0, dims), np.int64)
        return indptr, _links(view, view.coords[src].astype(np.int64)[flow], rel, rest // 2, rest % 2), cache.frac[idx]
    per = np.asarray(periods, np.int64)
    rel = np.stack(np.unravel_index(chip, tuple(periods)), 1).astype(np.int64) if len(chip) else np.empty((0, dims), np.int64)
    pos = (view.coords[src].astype(np.int64)[flow] + rel) % per
    at = np.ravel_multi_index(tuple(pos.T), view.shape) if len(pos) else np.empty(0, np.int64)
    link = view.port_link[at, rest // 2, rest % 2].astype(np.int64)
    if (link < 0).any():
        raise AssertionError(f"a minimal path leaves slice {slc.spec}: the slice is not wired as its topology")
    return indptr, link, cache.frac[idx]
