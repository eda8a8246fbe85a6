"""Routes on a slice with failed ICI links or chips: around the hole, never through it.

A failed cable takes both its directions down; a failed chip takes all its cables. A flow
whose route (by the policy) touches a failed part is routed again over the shortest paths of
the surviving graph: minimal paths of the healthy torus where one survives, longer ones where
none does. `dimension_order` takes one of them (at each hop the first live port, x before y
before z, + before -, that gets one hop closer); the multipath policies split evenly over all
of them (path counts from both ends, Brandes style: the share of edge u -> v is
sigma_s(u) sigma_t(v) / sigma_s(t) when d_s(u) + 1 + d_t(v) = d_s(t)).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from podsim.errors import PodsimError
from podsim.topology.fabric import LinkKind
from podsim.topology.slices import SliceView

_CELLS = 4_000_000  # flows x edges per chunk of the even split


def live_ports(view: SliceView, failed_links: np.ndarray) -> np.ndarray:
    """(N, D, 2) bool: the port's link is wired and neither it nor its reverse failed."""
    link = view.port_link.astype(np.int64)
    ok = link >= 0
    ok[ok] = ~failed_links[link[ok]]
    return ok


def _bfs(peer: np.ndarray, live: np.ndarray, sources: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Hop distances (-1: unreachable) and shortest-path counts from each source, (S, N)."""
    n = peer.shape[0]
    flat_peer = np.where(live, peer, -1).reshape(n, -1)
    dist = np.full((len(sources), n), -1, np.int64)
    sigma = np.zeros((len(sources), n))
    rows = np.arange(len(sources))
    dist[rows, sources] = 0
    sigma[rows, sources] = 1.0
    level = 0
    frontier = dist == 0
    while frontier.any():
        s_idx, u = np.nonzero(frontier)
        nb = flat_peer[u]  # (K, 2D)
        ok = nb >= 0
        s_rep = np.repeat(s_idx, ok.sum(1))
        v = nb[ok]
        w = np.repeat(sigma[s_idx, u], ok.sum(1))
        fresh = dist[s_rep, v] < 0
        fresh |= dist[s_rep, v] == level + 1
        s_rep, v, w = s_rep[fresh], v[fresh], w[fresh]
        dist[s_rep, v] = level + 1
        np.add.at(sigma, (s_rep, v), w)
        level += 1
        frontier = dist == level
    return dist, sigma


def _endpoints(src, dst, view: SliceView, failed_chips: np.ndarray) -> None:
    bad = failed_chips[view.chips[src]] | failed_chips[view.chips[dst]]
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise PodsimError(f"a flow from slice chip {int(src[k])} to {int(dst[k])} starts or ends on a failed chip; "
                          "a collective cannot include a failed chip (shrink the group or move the job)")


def detour_routes(view: SliceView, src: np.ndarray, dst: np.ndarray, failed_links: np.ndarray,
                  failed_chips: np.ndarray, multipath: bool):
    """(indptr, links, frac) between slice-local chips over the surviving ICI graph.

    `failed_links` is a bool mask over fabric links (a cable's two directions together);
    `failed_chips` over fabric chips (their cables count as failed)."""
    src = np.asarray(src, np.int64)
    dst = np.asarray(dst, np.int64)
    _endpoints(src, dst, view, failed_chips)
    link = view.port_link.astype(np.int64)
    peer = view.port_peer.astype(np.int64)
    live = live_ports(view, failed_links)
    dead_chip = failed_chips[view.chips]
    live &= ~dead_chip[:, None, None]
    live &= ~np.where(peer >= 0, dead_chip[np.maximum(peer, 0)], True)
    srcs, s_of = np.unique(src, return_inverse=True)
    dsts, t_of = np.unique(dst, return_inverse=True)
    d_t, sig_t = _bfs(peer, live, dsts)  # links are bidirectional: distances to t = from t
    far = d_t[t_of, src]
    if (far < 0).any():
        k = int(np.flatnonzero(far < 0)[0])
        raise PodsimError(f"slice chips {int(src[k])} and {int(dst[k])} are cut apart by the failed ICI links/chips; "
                          "no route survives")
    if not multipath:
        return _greedy(peer, link, live, src, dst, d_t[t_of])
    d_s, sig_s = _bfs(peer, live, srcs)
    n, dims = peer.shape[0], peer.shape[1]
    u_all = np.repeat(np.arange(n), 2 * dims)
    v_all = peer.reshape(-1)
    l_all = link.reshape(-1)
    ok = live.reshape(-1)
    u_all, v_all, l_all = u_all[ok], v_all[ok], l_all[ok]
    flows, links, fracs = [], [], []
    step = max(1, _CELLS // max(len(u_all), 1))
    for a in range(0, len(src), step):
        f = np.arange(a, min(a + step, len(src)))
        ds, dt = d_s[s_of[f]], d_t[t_of[f]]  # (F, N)
        total = ds[np.arange(len(f)), dst[f]]
        on = (ds[:, u_all] >= 0) & (dt[:, v_all] >= 0) & (ds[:, u_all] + 1 + dt[:, v_all] == total[:, None])
        fi, ei = np.nonzero(on)
        share = sig_s[s_of[f][fi], u_all[ei]] * sig_t[t_of[f][fi], v_all[ei]] / sig_s[s_of[f][fi], dst[f][fi]]
        flows.append(f[fi])
        links.append(l_all[ei])
        fracs.append(share)
    flow = np.concatenate(flows) if flows else np.empty(0, np.int64)
    order = np.argsort(flow, kind="stable")
    indptr = np.concatenate([[0], np.cumsum(np.bincount(flow, minlength=len(src)))]).astype(np.int64)
    return indptr, np.concatenate(links)[order] if links else flow, np.concatenate(fracs)[order] if fracs else np.empty(0)


def _greedy(peer, link, live, src, dst, dist_to_dst):
    """One shortest surviving path per flow: at each hop the first live port one hop closer."""
    n_flows = len(src)
    cur = src.copy()
    rows = np.arange(n_flows)
    hops_left = dist_to_dst[rows, src]
    flow_e, link_e = [], []
    dims = peer.shape[1]
    for _ in range(int(hops_left.max(initial=0))):
        act = np.flatnonzero(cur != dst)
        if not len(act):
            break
        nb = peer[cur[act]].reshape(len(act), 2 * dims)
        ok = live[cur[act]].reshape(len(act), 2 * dims)
        closer = ok & (np.take_along_axis(dist_to_dst[act], np.maximum(nb, 0), 1) == (dist_to_dst[act, cur[act]] - 1)[:, None])
        pick = np.argmax(closer, 1)
        flow_e.append(act)
        link_e.append(link[cur[act]].reshape(len(act), 2 * dims)[np.arange(len(act)), pick])
        cur[act] = nb[np.arange(len(act)), pick]
    if not np.array_equal(cur, dst):  # pragma: no cover - distances guarantee progress
        raise AssertionError("detour routes did not reach their destinations")
    flow = np.concatenate(flow_e) if flow_e else np.empty(0, np.int64)
    lk = np.concatenate(link_e) if link_e else np.empty(0, np.int64)
    order = np.argsort(flow, kind="stable")
    indptr = np.concatenate([[0], np.cumsum(np.bincount(flow, minlength=n_flows))]).astype(np.int64)
    return indptr, lk[order], np.ones(len(lk))


def ocs_failed_links(fabric, ocs: Sequence[int] = (), ocs_ports: Sequence[tuple[int, int]] = ()) -> tuple[int, ...]:
    """Fabric ICI link ids carried by failed OCS units or ports (each circuit through one is
    dark): the slice keeps its chips but loses those optical cables, a degraded torus that
    `failed_links` then routes around. Ports with no circuit set carry nothing."""
    lay = fabric.layout
    if not lay.ocs:
        if len(ocs) or len(ocs_ports):
            raise PodsimError(f"{lay.generation.id} has no OCS (or is wired statically); there is no OCS to fail")
        return ()
    o = [int(u) for u in ocs]
    for u in o:
        lay.check_ocs_port(u, 0)
    for u, p in ocs_ports:
        lay.check_ocs_port(int(u), int(p))
    units = np.repeat(np.array(o, np.int64), lay.ports_per_ocs)
    ports = np.tile(np.arange(lay.ports_per_ocs), len(o))
    units = np.concatenate([units, np.array([int(u) for u, _ in ocs_ports], np.int64)])
    ports = np.concatenate([ports, np.array([int(p) for _, p in ocs_ports], np.int64)])
    cube, dim, sign, idx = lay.port_owner(units, ports)
    cabled = cube >= 0
    chip = lay.face_chip[cube[cabled], dim[cabled], sign[cabled], idx[cabled]]
    link = fabric.port_link[chip, dim[cabled], sign[cabled]].astype(np.int64)
    optical = link >= 0
    optical[optical] = fabric.link_kind[link[optical]] == LinkKind.OPTICAL
    return tuple(sorted({int(x) for x in link[optical]}))
