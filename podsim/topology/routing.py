"""Routes as link-id lists, vectorised over many flows.

- Tori and meshes: dimension-order routing (x, then y, then z), the shorter way round each
  ring; ties on an even ring alternate with the source coordinate's parity so both directions
  carry equal load. On a twisted torus the wraparound shifts other coordinates, so the route
  tries each way round each twisted axis (and once round in full) and keeps the shortest:
  still dimension-ordered, and minimal in hops (the lattice-graph view of Camarero et al.).
- DCN: chip -> NIC -> leaf -> spine [-> WAN -> spine k of the other site] -> leaf -> NIC ->
  chip on the EPS Clos, each flow split evenly over the spines (`dcn.ecmp: split`) or on the
  one spine a deterministic hash of the NIC pair picks (`hash`); leaf -> leaf directly on the
  OCS DCN. On a tiered DCN the NIC sits under a ToR, the ToR under its aggregation block (the
  leaf): a flow between ToRs climbs ToR -> block -> ToR, one between blocks goes on up.
- GPU nodes: GPU -> NVSwitch -> GPU inside a node, the DCN between nodes.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from podsim.errors import PodsimError
from podsim.topology.fabric import Fabric
from podsim.topology.slices import SliceView


@dataclass(frozen=True)
class Routes:
    """Routes of F flows in CSR form: flow f uses links[indptr[f]:indptr[f+1]], in order."""

    indptr: np.ndarray
    links: np.ndarray

    @property
    def n_flows(self) -> int:
        return len(self.indptr) - 1

    @property
    def hops(self) -> np.ndarray:
        return np.diff(self.indptr)

    def route(self, f: int) -> np.ndarray:
        return self.links[self.indptr[f]:self.indptr[f + 1]]


def _from_padded(m: np.ndarray) -> Routes:
    keep = m >= 0
    indptr = np.concatenate([[0], np.cumsum(keep.sum(1))]).astype(np.int64)
    return Routes(indptr, m[keep].astype(np.int32))


def torus_steps(src: np.ndarray, dst: np.ndarray, shape, wrap, twist: np.ndarray) -> np.ndarray:
    """Signed hop counts per axis (F, dims) of minimal dimension-order routes src -> dst.

    `src`, `dst` are (F, dims) slice coordinates; `twist[d]` is added to the coordinates when
    a route crosses axis d's wraparound in the + direction (zero for a plain torus).
    """
    shape = np.asarray(shape, np.int64)
    dims = len(shape)
    twisted_axes = [d for d in range(dims) if wrap[d] and twist[d].any()]
    best_t = None
    best_len = None
    # A twisted wraparound shifts other coordinates, so going round a twisted ring the long
    # way, or once more in full, can shorten the rest of the route: try all three.
    for choice in itertools.product((-1, 0, 1), repeat=len(twisted_axes)):
        pick = dict(zip(twisted_axes, choice, strict=True))
        pos = src.astype(np.int64).copy()
        t = np.zeros_like(pos)
        for d in range(dims):
            n = shape[d]
            delta = dst[:, d] - pos[:, d]
            if not wrap[d] or n == 1:
                step = delta
            else:
                fwd = delta % n
                bwd = fwd - n
                if d in pick:
                    step = fwd + pick[d] * n
                else:
                    tie_plus = (pos[:, d] % 2) == 0
                    step = np.where(fwd < -bwd, fwd, np.where(fwd > -bwd, bwd, np.where(tie_plus, fwd, bwd)))
                    step = np.where(fwd == 0, 0, step)
            crossed = np.floor_divide(pos[:, d] + step, n)
            pos[:, d] = (pos[:, d] + step) % n
            if twist[d].any():
                pos = (pos + crossed[:, None] * twist[d][None, :]) % shape
            t[:, d] = step
        length = np.abs(t).sum(1)
        if best_t is None:
            best_t, best_len = t, length
        else:
            better = length < best_len
            best_t = np.where(better[:, None], t, best_t)
            best_len = np.minimum(length, best_len)
    return best_t


def torus_routes(view: SliceView, src: np.ndarray, dst: np.ndarray) -> Routes:
    """Dimension-order routes between slice-local chip indices, following the live ports."""
    src = np.asarray(src, np.int64)
    dst = np.asarray(dst, np.int64)
    slc = view.slice
    steps = torus_steps(view.coords[src], view.coords[dst], slc.shape, slc.wrap, slc.twist)
    cur = src.copy()
    flows, links = [], []
    for d in range(len(slc.shape)):
        direction = (steps[:, d] < 0).astype(np.int64)
        count = np.abs(steps[:, d])
        for h in range(int(count.max(initial=0))):
            act = np.flatnonzero(count > h)
            lk = view.port_link[cur[act], d, direction[act]]
            if (lk < 0).any():
                raise AssertionError(f"route leaves slice {slc.spec} on dim {d}: the slice is not wired as its topology")
            flows.append(act)
            links.append(lk)
            cur[act] = view.port_peer[cur[act], d, direction[act]]
    if not np.array_equal(cur, dst):
        raise AssertionError("dimension-order routes did not reach their destinations")
    if not flows:
        return Routes(np.zeros(len(src) + 1, np.int64), np.empty(0, np.int32))
    f = np.concatenate(flows)
    lk = np.concatenate(links)
    order = np.argsort(f, kind="stable")
    indptr = np.concatenate([[0], np.cumsum(np.bincount(f, minlength=len(src)))]).astype(np.int64)
    return Routes(indptr, lk[order].astype(np.int32))


def ecmp_spine(src_nic: np.ndarray, dst_nic: np.ndarray, n_spines: int) -> np.ndarray:
    """Deterministic ECMP hash of a NIC pair onto a spine."""
    h = (src_nic.astype(np.uint64) * np.uint64(2654435761) + dst_nic.astype(np.uint64) * np.uint64(40503)) >> np.uint64(7)
    return (h % np.uint64(max(n_spines, 1))).astype(np.int64)


def dcn_routes(fabric: Fabric, src_chips: np.ndarray, dst_chips: np.ndarray) -> Routes:
    """Routes over the DCN between chips (global ids), through their hosts' NICs."""
    return _from_padded(_dcn_padded(fabric, src_chips, dst_chips))


# Columns of a padded DCN route: chip -> NIC -> [ToR -> block] -> spine | circuit [-> WAN] -> spine
# -> [block -> ToR] -> NIC -> chip; the ToR columns stay -1 on an untiered DCN.
CHIP_UP, NIC_UP, TOR_UP, UP, WAN, DOWN, TOR_DOWN, NIC_DOWN, CHIP_DOWN = range(9)
_ENDS = (CHIP_UP, NIC_UP, TOR_UP, TOR_DOWN, NIC_DOWN, CHIP_DOWN)  # hops below the spine, in order


def _dcn_ends(fabric: Fabric, src_chips: np.ndarray, dst_chips: np.ndarray,
              switched: bool = False) -> tuple[np.ndarray, ...]:
    """(m, ns, nd, ls, ld, across): padded (flows x 9) DCN routes with only the hops below the
    spine filled (chip, NIC and, tiered, ToR columns; -1 elsewhere), each flow's NICs and leaves
    (aggregation blocks), and which flows cross leaves (their UP/WAN/DOWN columns are the spine
    or circuit hops, filled by the caller). `switched` (a GPU slice): flows inside a node go
    GPU -> NVSwitch -> GPU (columns 0, 1)."""
    src_chips = np.asarray(src_chips, np.int64)
    dst_chips = np.asarray(dst_chips, np.int64)
    ns = fabric.nic_of_chip[src_chips] - fabric.first_nic
    nd = fabric.nic_of_chip[dst_chips] - fabric.first_nic
    ls, ld = fabric.leaf_of_nic[ns], fabric.leaf_of_nic[nd]
    m = np.full((len(src_chips), 9), -1, np.int64)
    m[:, CHIP_UP] = fabric.chip_up[src_chips]
    m[:, CHIP_DOWN] = fabric.chip_down[dst_chips]
    via_leaf = ns != nd
    m[via_leaf, NIC_UP] = fabric.nic_up[ns[via_leaf]]
    m[via_leaf, NIC_DOWN] = fabric.nic_down[nd[via_leaf]]
    if fabric.tiered:  # flows between ToRs climb to their block
        ts, td = fabric.tor_of_nic[ns], fabric.tor_of_nic[nd]
        via_tor = via_leaf & (ts != td)
        m[via_tor, TOR_UP] = fabric.tor_up[ts[via_tor]]
        m[via_tor, TOR_DOWN] = fabric.tor_down[td[via_tor]]
    across = via_leaf & (ls != ld)
    if switched:
        same = fabric.layout.host_of_chip[src_chips] == fabric.layout.host_of_chip[dst_chips]
        m[same] = -1
        m[same, 0] = fabric.nvlink_up[src_chips[same]]
        m[same, 1] = fabric.nvlink_down[dst_chips[same]]
        across &= ~same
    return m, ns, nd, ls, ld, across


def _dcn_padded(fabric: Fabric, src_chips: np.ndarray, dst_chips: np.ndarray, ends: tuple | None = None) -> np.ndarray:
    """Padded single-path DCN routes: `_dcn_ends` (or the given `ends`, filled in place) with
    each cross-leaf flow on its hashed spine (EPS) or its leaf-to-leaf circuit (OCS)."""
    m, ns, nd, ls, ld, across = _dcn_ends(fabric, src_chips, dst_chips) if ends is None else ends
    if fabric.dcn.kind == "eps":
        spine = ecmp_spine(ns[across], nd[across], fabric.leaf_spine.shape[1])
        m[across, UP] = fabric.leaf_spine[ls[across], spine]
        m[across, DOWN] = fabric.spine_leaf[spine, ld[across]]
        if fabric.wan.shape[0] > 1:  # between sites: spine k of one site to spine k of the other
            sa, sb = fabric.site_of_leaf[ls[across]], fabric.site_of_leaf[ld[across]]
            m[across, WAN] = np.where(sa != sb, fabric.wan[sa, sb, spine], -1)
    else:
        m[across, UP] = fabric.leaf_leaf[ls[across], ld[across]]
        if (m[across, UP] < 0).any():
            k = int(np.flatnonzero(across)[np.argmax(m[across, UP] < 0)])
            raise PodsimError(f"no OCS-DCN circuit joins leaf {ls[k]} and leaf {ld[k]}; add both to one of dcn.ocs_groups")
    return m


def dcn_split_routes(fabric: Fabric, src_chips: np.ndarray, dst_chips: np.ndarray,
                     switched: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(indptr, links, frac) of DCN routes with every cross-leaf flow split evenly over the
    spines (`DcnSpec.ecmp == "split"`): 1/S of its bytes on each leaf -> spine [-> WAN] -> leaf
    path; flows under one leaf (or, `switched`, inside one GPU node) take their single path
    (frac 1)."""
    ends = _dcn_ends(fabric, src_chips, dst_chips, switched)  # no hashed spine: every spine is taken
    m, across = ends[0], ends[5]
    n_spines = fabric.leaf_spine.shape[1] if fabric.dcn.kind == "eps" else 0
    if not (n_spines > 1 and across.any()):
        m = _dcn_padded(fabric, src_chips, dst_chips, ends)
        return _csr_columns([(m[:, c], 1.0) for c in range(m.shape[1])])
    ls, ld = ends[3][across], ends[4][across]
    share = 1.0 / n_spines
    rows = np.flatnonzero(across)  # the spine links of each kind, (flows across leaves x S)
    spread = [(fabric.leaf_spine[ls], share, rows)]
    if fabric.wan.shape[0] > 1:
        sa, sb = fabric.site_of_leaf[ls], fabric.site_of_leaf[ld]
        other = sa != sb
        spread.append((fabric.wan[sa[other], sb[other]], share, rows[other]))
    spread.append((fabric.spine_leaf[:, ld].T, share, rows))
    below = [(m[:, c], 1.0) for c in _ENDS]
    hops = sum((c >= 0).astype(np.int64) for c, _ in below)
    for ids, _, r in spread:
        hops[r] += (ids >= 0).sum(1)
    return _csr_columns(below[:3] + spread + below[3:], hops)


def _csr_columns(cols: list, hops: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(indptr, links, frac) of flows whose routes are their valid (>= 0) entries of the
    columns in order; each column is (link ids, fraction) over all flows, or (link ids
    (rows x width), fraction, rows) over some, `width` entries in a row; `hops` (valid
    entries per flow) is counted from the columns when not given. Filled column by column:
    no (flows x columns) matrix is held."""
    if hops is None:
        hops = sum((c[0] >= 0).astype(np.int64) for c in cols)
    indptr = np.concatenate([[0], np.cumsum(hops)]).astype(np.int64)
    links = np.empty(indptr[-1], np.int64)
    frac = np.empty(indptr[-1])
    pos = indptr[:-1].copy()
    for ids, f, *rows in cols:
        if not rows:
            ok = ids >= 0
            at = pos[ok]
            links[at], frac[at] = ids[ok], f
            pos += ok
            continue
        ok = ids >= 0
        at = pos[rows[0]][:, None] + (np.cumsum(ok, axis=1) - 1)  # valid entries packed in order
        links[at[ok]], frac[at[ok]] = ids[ok], f
        pos[rows[0]] += ok.sum(1)
    return indptr, links, frac


def ecmp_routes(fabric: Fabric, src_chips: np.ndarray, dst_chips: np.ndarray,
                switched: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(indptr, links, frac or None) over the DCN as `fabric.dcn.ecmp` says (`switched`: inside a
    GPU slice, through the NVSwitch within a node): one hashed spine, or split over them."""
    if not (fabric.dcn.kind == "eps" and fabric.dcn.ecmp == "split"):
        r = (switch_routes if switched else dcn_routes)(fabric, src_chips, dst_chips)
        return r.indptr, r.links.astype(np.int64), None
    return dcn_split_routes(fabric, src_chips, dst_chips, switched)


def switch_routes(fabric: Fabric, src_chips: np.ndarray, dst_chips: np.ndarray) -> Routes:
    """GPU clusters: through the node's NVSwitch inside a node, over the DCN between nodes."""
    return _from_padded(_dcn_padded(fabric, src_chips, dst_chips, _dcn_ends(fabric, src_chips, dst_chips, switched=True)))


def slice_routes(view: SliceView, src: np.ndarray, dst: np.ndarray) -> Routes:
    """Routes between slice-local chip indices over the slice's own network (a scattered slice:
    dimension-order routes over its pod's whole torus, through chips that are not its own)."""
    if view.slice.spec.kind == "gpu":
        return switch_routes(view.fabric, view.chips[np.asarray(src)], view.chips[np.asarray(dst)])
    if view.slice.form == "scatter":
        host, local = pod_view(view.fabric, int(view.slice.pod))
        chips = np.asarray(view.chips, np.int64)
        return torus_routes(host, local[chips[np.asarray(src)]], local[chips[np.asarray(dst)]])
    return torus_routes(view, src, dst)


def dcn_group_members(fabric: Fabric) -> np.ndarray | None:
    """The S spine links of every group `dcn_split_groups` uses, in group id order (a leaf's
    uplinks, a leaf's downlinks, one site pair's WAN links; -1 where a site pair has none);
    None unless the DCN is an EPS Clos split over S > 1 spines."""
    n_spines = fabric.leaf_spine.shape[1] if fabric.dcn.kind == "eps" else 0
    if fabric.dcn.ecmp != "split" or n_spines < 2:
        return None
    return np.concatenate([fabric.leaf_spine, fabric.spine_leaf.T, fabric.wan.reshape(-1, n_spines)]).astype(np.int64)


_POD_VIEWS: dict = {}


def pod_view(fabric: Fabric, pod: int):
    """(the whole pod as a native slice's view, chip id -> its index in it) of a statically
    wired fabric, kept per fabric."""
    from podsim.topology.shapes import SliceSpec
    from podsim.topology.slices import plan_slice, slice_view

    key = (id(fabric), pod)
    hit = _POD_VIEWS.get(key)
    if hit is None or hit[0] is not fabric:
        lay = fabric.layout
        gen = lay.generation
        if lay.ocs:
            raise PodsimError("a scattered slice is routed over a statically wired pod; this fabric has OCS")
        spec = SliceSpec(gen.id, gen.pod_shape, False, "rectangle", (True,) * gen.dims)
        slc = plan_slice(lay, spec, origin=(0,) * gen.dims, pod=pod)
        local = np.full(fabric.n_chips, -1, np.int64)
        local[slc.chips] = np.arange(slc.n_chips)
        if len(_POD_VIEWS) > 64:
            _POD_VIEWS.clear()
        hit = _POD_VIEWS[key] = (fabric, slice_view(fabric, slc), local)
    return hit[1], hit[2]


def dcn_split_groups(fabric: Fabric, src_chips: np.ndarray, dst_chips: np.ndarray):
    """`dcn_split_routes` with each cross-leaf flow's S spine links of one kind as one entry:
    id n_links + g for group g, whose links are `members[g]` in spine order (a leaf's uplinks,
    a leaf's downlinks, one site pair's WAN links), each carrying the entry's fraction 1/S.
    Replacing every group entry by its members gives `dcn_split_routes` exactly. Returns
    (indptr, entries, frac, members); None unless the DCN is an EPS Clos split over S > 1 spines."""
    members = dcn_group_members(fabric)
    if members is None:
        return None
    n_spines = members.shape[1]
    m, _, _, ls, ld, across = _dcn_ends(fabric, src_chips, dst_chips)  # no hashed spine: every spine is taken
    ls, ld = ls[across].astype(np.int64), ld[across].astype(np.int64)
    n_leaves, base = fabric.leaf_spine.shape[0], fabric.n_links
    sites = fabric.wan.shape[0]

    def column(ids):
        c = np.full(len(m), -1, np.int64)
        c[across] = ids
        return c

    cols = [(m[:, c], 1.0) for c in _ENDS[:3]] + [(column(base + ls), 1.0 / n_spines)]
    if sites > 1:
        sa, sb = fabric.site_of_leaf[ls].astype(np.int64), fabric.site_of_leaf[ld].astype(np.int64)
        cols.append((column(np.where(sa != sb, base + 2 * n_leaves + sa * sites + sb, -1)), 1.0 / n_spines))
    cols += [(column(base + n_leaves + ld), 1.0 / n_spines)] + [(m[:, c], 1.0) for c in _ENDS[3:]]
    return (*_csr_columns(cols), members)
