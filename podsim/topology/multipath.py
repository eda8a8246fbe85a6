"""Multipath routes on (twisted) tori and meshes: traffic split over all minimal paths.

A torus slice is the lattice Z^D modulo its wraparound lattice L, generated per wrapped axis d
by g_d = n_d e_d - twist_d (crossing axis d's wraparound in the + direction adds twist_d to the
other coordinates; zero on a plain torus). It is a Cayley graph, so every route is a
translate of a route from the origin. The minimal paths from s to t are the monotone lattice
paths inside the boxes spanned by the displacements t - s + v (v in L) of least L1 length
(Camarero, Martinez, Beivide, IEEE TPDS 2015); paths of different boxes end at different
lattice points, so they are distinct. Nothing is enumerated: over each box a forward and a
backward sum over the lattice levels give, for every edge a -> a + e_d, the (weighted) number
of minimal paths through it, F(a) w B(a + e_d), out of Z = sum over boxes of F(end).

`split_routes(view, src, dst, link_weight)` gives each flow its links and the fraction of its
bytes on each: with unit weights the even split over all minimal paths (`shortest_paths`);
with per-link weights a Gibbs split that favours lightly loaded links (`adaptive`, iterated
by podsim.collectives.adaptive).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from podsim.topology.slices import SliceView

ROUTING_POLICIES = ("dimension_order", "shortest_paths", "adaptive")
"""Routing policies: one dimension-order path; an even split over all minimal paths; a split
over minimal paths re-weighted by link load until max-min rates settle."""

_K_RANGE = 2  # lattice multiples tried per generator when looking for minimal displacements


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
    """Monotone lattice paths from 0 to m (m >= 0 per axis): nodes, edges and their levels."""

    n_nodes: int
    e_from: np.ndarray
    e_to: np.ndarray
    e_axis: np.ndarray
    e_start: np.ndarray  # (E, D) lattice position (>= 0) of each edge's tail
    e_level: np.ndarray
    end: int


@lru_cache(maxsize=4096)
def _box(m: tuple[int, ...]) -> _Box:
    dims = tuple(k + 1 for k in m)
    n = int(np.prod(dims))
    coords = np.stack(np.unravel_index(np.arange(n), dims), 1).astype(np.int64)
    strides = np.array([int(np.prod(dims[d + 1:])) for d in range(len(dims))], np.int64)
    fr, to, ax = [], [], []
    for d in range(len(m)):
        tail = np.flatnonzero(coords[:, d] < m[d])
        fr.append(tail)
        to.append(tail + strides[d])
        ax.append(np.full(len(tail), d, np.int64))
    e_from = np.concatenate(fr) if fr else np.empty(0, np.int64)
    return _Box(n, e_from, np.concatenate(to) if to else e_from, np.concatenate(ax) if ax else e_from,
                coords[e_from], coords[e_from].sum(1), n - 1)


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

    def edge_fractions(self, edge_weight: np.ndarray | None = None) -> np.ndarray:
        """Fraction of each flow's bytes on each edge: paths weighted by the product of their
        edges' weights (unit weights: every minimal path equally)."""
        w = np.ones(len(self.e_from)) if edge_weight is None else np.asarray(edge_weight, float)
        fwd = np.zeros(self.n_nodes)
        fwd[self.box_start] = 1.0
        bwd = np.zeros(self.n_nodes)
        bwd[self.box_end] = 1.0
        order = np.argsort(self.e_level, kind="stable")
        lv = self.e_level[order]
        cuts = np.flatnonzero(np.diff(lv)) + 1
        groups = np.split(order, cuts) if len(order) else []
        for g in groups:
            fwd += np.bincount(self.e_to[g], weights=fwd[self.e_from[g]] * w[g], minlength=self.n_nodes)
        for g in reversed(groups):
            bwd += np.bincount(self.e_from[g], weights=bwd[self.e_to[g]] * w[g], minlength=self.n_nodes)
        z = np.bincount(self.box_flow, weights=fwd[self.box_end], minlength=self.n_flows)
        return fwd[self.e_from] * w * bwd[self.e_to] / z[self.e_flow]

    def routes(self, edge_weight: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(indptr, links, frac) per flow, one entry per distinct link, links sorted."""
        frac = self.edge_fractions(edge_weight)
        n_links = int(self.link.max(initial=-1)) + 1
        key = self.e_flow * n_links + self.link
        uniq, inv = np.unique(key, return_inverse=True)
        f = np.bincount(inv, weights=frac, minlength=len(uniq))
        flow = uniq // max(n_links, 1)
        indptr = np.concatenate([[0], np.cumsum(np.bincount(flow, minlength=self.n_flows))]).astype(np.int64)
        return indptr, (uniq % max(n_links, 1)).astype(np.int64), f


def path_dag(view: SliceView, src: np.ndarray, dst: np.ndarray) -> PathDag:
    """Minimal-path DAGs between slice-local chips (plain or twisted torus, or mesh)."""
    slc = view.slice
    shape, wrap, twist = slc.shape, slc.wrap, slc.twist
    src = np.asarray(src, np.int64)
    dst = np.asarray(dst, np.int64)
    cs, cd = view.coords[src].astype(np.int64), view.coords[dst].astype(np.int64)
    rel = reduce_coords(cd - cs, shape, wrap, twist)
    for d, w in enumerate(wrap):  # a mesh axis keeps its signed offset
        if not w:
            rel[:, d] = cd[:, d] - cs[:, d]
    classes, cls = np.unique(rel, axis=0, return_inverse=True)
    cls = cls.reshape(-1)
    owner, disp = minimal_displacements(classes, shape, wrap, twist)
    # per class: its boxes' edges (tail position relative to the source, axis, sign, level,
    # node ids local to the class) and each box's start and end node
    t_from, t_to, t_axis, t_sign, t_rel, t_level = [], [], [], [], [], []
    e_count = np.zeros(len(classes), np.int64)
    n_count = np.zeros(len(classes), np.int64)
    b_cls, b_start, b_end = [], [], []
    per_class_edges = [[] for _ in range(len(classes))]
    for c, t in zip(owner.tolist(), disp, strict=True):
        m = tuple(int(v) for v in np.abs(t))
        box = _box(m)
        sign = np.where(t < 0, -1, 1)
        base = n_count[c]
        per_class_edges[c].append((box, sign, base))
        b_cls.append(c)
        b_start.append(base)
        b_end.append(base + box.end)
        n_count[c] += box.n_nodes
        e_count[c] += len(box.e_from)
    for c in range(len(classes)):
        for box, sign, base in per_class_edges[c]:
            t_from.append(box.e_from + base)
            t_to.append(box.e_to + base)
            t_axis.append(box.e_axis)
            t_sign.append(sign[box.e_axis])
            t_rel.append(box.e_start * sign)
            t_level.append(box.e_level)
    cat = (lambda xs, w=None: np.concatenate(xs) if xs else np.empty((0,) if w is None else (0, w), np.int64))
    tf, tt, ta, tsg, tl = cat(t_from), cat(t_to), cat(t_axis), cat(t_sign), cat(t_level)
    trel = cat(t_rel, len(shape))
    e_ptr = np.concatenate([[0], np.cumsum(e_count)])
    # expand per flow
    fe = e_count[cls]
    e_flow = np.repeat(np.arange(len(src)), fe)
    tidx = np.repeat(e_ptr[cls], fe) + (np.arange(fe.sum()) - np.repeat(np.cumsum(fe) - fe, fe))
    node_base = np.concatenate([[0], np.cumsum(n_count[cls])])[:-1]
    pos = reduce_coords(cs[e_flow] + trel[tidx], shape, wrap, twist)
    chip = np.ravel_multi_index(tuple(pos.T), shape) if len(pos) else np.empty(0, np.int64)
    link = view.port_link[chip, ta[tidx], (tsg[tidx] < 0).astype(np.int64)].astype(np.int64)
    if (link < 0).any():
        raise AssertionError(f"a minimal path leaves slice {slc.spec}: the slice is not wired as its topology")
    b_cls = np.asarray(b_cls, np.int64)
    box_of_cls = [np.flatnonzero(b_cls == c) for c in range(len(classes))]
    nb = np.array([len(b) for b in box_of_cls], np.int64)
    fb = nb[cls]
    box_flow = np.repeat(np.arange(len(src)), fb)
    order_b = np.concatenate(box_of_cls) if box_of_cls else np.empty(0, np.int64)
    b_ptr = np.concatenate([[0], np.cumsum(nb)])
    bidx = order_b[np.repeat(b_ptr[cls], fb) + (np.arange(fb.sum()) - np.repeat(np.cumsum(fb) - fb, fb))]
    nb_of = node_base[box_flow]
    return PathDag(
        n_flows=len(src), n_nodes=int(n_count[cls].sum()), e_flow=e_flow,
        e_from=node_base[e_flow] + tf[tidx], e_to=node_base[e_flow] + tt[tidx], e_level=tl[tidx], link=link,
        box_flow=box_flow, box_start=nb_of + np.asarray(b_start, np.int64)[bidx], box_end=nb_of + np.asarray(b_end, np.int64)[bidx],
    )


def split_routes(view: SliceView, src: np.ndarray, dst: np.ndarray, link_weight: np.ndarray | None = None):
    """(indptr, links, frac): each flow's bytes split over all its minimal paths, evenly or
    weighted by `link_weight` (per fabric link) along each path."""
    dag = path_dag(view, src, dst)
    return dag.routes(None if link_weight is None else link_weight[dag.link])
