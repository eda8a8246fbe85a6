"""Degraded fabrics: failed ICI links and chips on a slice are routed around, never through."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from podsim.collectives import ALGORITHMS, plan_collective
from podsim.collectives.fabricroutes import Placement
from podsim.collectives.groups import group_layout
from podsim.collectives.routes import RouterPool
from podsim.engine import simulate_collective
from podsim.engine.validate import validating
from podsim.errors import PodsimError
from podsim.topology import build_slice
from podsim.topology.metrics import bfs_levels
from podsim.topology.multipath import ROUTING_POLICIES
from tests.test_routing import as_dict, brute_force_split, flow_conservation

GiB = 2**30


def _healthy_and_failed(shape="4x4x4", twisted=False):
    built = build_slice("tpu-v4", shape, twisted=twisted)
    v = built.view
    failed_link = int(v.port_link[5, 0, 0])  # chip 5's x+ cable
    failed_chip = int(v.chips[42])
    return built, failed_link, failed_chip


def _degraded_view(view, link_failed, chip_failed):
    """The slice's port tables with every failed cable and chip taken out."""
    link = view.port_link.astype(np.int64)
    dead = (link >= 0) & link_failed[np.maximum(link, 0)]
    dead |= chip_failed[view.chips][:, None, None]
    peer = view.port_peer
    dead |= (peer >= 0) & chip_failed[view.chips[np.maximum(peer, 0)]]
    return dataclasses.replace(view, port_link=np.where(dead, -1, view.port_link), port_peer=np.where(dead, -1, peer))


@pytest.mark.parametrize("routing", ROUTING_POLICIES)
@pytest.mark.parametrize("shape,twisted", [("4x4x4", False), ("4x4x8", True)])
def test_no_flow_crosses_a_failed_part(routing, shape, twisted):
    built, lk, chip = _healthy_and_failed(shape, twisted)
    v = built.view
    pl = Placement(built.fabric, (v,), routing, failed_links=(lk,), failed_chips=(chip,))
    alive = np.flatnonzero(~pl.chip_failed[v.chips])
    src, dst = (g.ravel() for g in np.meshgrid(alive, alive, indexing="ij"))
    indptr, links, frac = pl.route(v.chips[src], v.chips[dst])
    assert not pl.link_failed[links].any()
    flow_conservation(v, indptr, links, frac, src, dst)
    healthy = Placement(built.fabric, (v,), routing).route(v.chips[src], v.chips[dst])
    # minimal where a minimal path survives: the mean hop count equals the surviving distance
    deg = _degraded_view(v, pl.link_failed, pl.chip_failed)
    dist = np.stack([bfs_levels(deg.port_peer, s) for s in range(v.n)])
    hops = np.bincount(np.repeat(np.arange(len(src)), np.diff(indptr)), weights=frac, minlength=len(src))
    np.testing.assert_allclose(hops, dist[src, dst], atol=1e-9)
    moved = np.diff(indptr) != np.diff(healthy[0])
    assert moved.any()  # some flows were rerouted


def test_degraded_even_split_equals_brute_force():
    """The even split over the surviving shortest paths, against enumerating them."""
    built, lk, chip = _healthy_and_failed()
    v = built.view
    pl = Placement(built.fabric, (v,), "shortest_paths", failed_links=(lk,), failed_chips=(chip,))
    deg = _degraded_view(v, pl.link_failed, pl.chip_failed)
    src = np.array([5, 4, 1, 0, 21, 6, 5])
    dst = np.array([6, 7, 2, 3, 26, 58, 63])
    r = pl.route(v.chips[src], v.chips[dst])
    for f in range(len(src)):
        want = brute_force_split(deg, int(src[f]), int(dst[f]))
        got = as_dict(*r, f)
        assert got.keys() == want.keys()
        assert all(got[k] == pytest.approx(want[k], rel=1e-9) for k in want)


def _links_used(pool, kind, layout, algorithm):
    plan = plan_collective(kind, layout, GiB, algorithm, pool)
    router = pool.router(plan.schedule.patterns(), fold=False)
    return plan, np.unique(np.concatenate([router.routes(p).links for p in plan.schedule.patterns()]))


@pytest.mark.parametrize("routing", ROUTING_POLICIES)
def test_one_failed_link_all_reduce_is_bounded(routing):
    """4x4x4 torus, one failed ICI cable: the all-reduce completes (validated), no faster than
    healthy and no slower than the closed form of the best algorithm whose healthy routes
    avoid the cable."""
    built = build_slice("tpu-v4", "4x4x4")
    v = built.view
    pool = RouterPool(Placement(built.fabric, (v,), routing))
    layout = group_layout((v,), ("x", "y", "z"))
    used = {a: _links_used(pool, "all_reduce", layout, a) for a in ALGORITHMS if a != "hierarchical"}
    ring_links = used["ring"][1]
    cable = next(int(lk) for lk in v.port_link.reshape(-1) if lk >= 0 and lk not in ring_links and (lk ^ 1) not in ring_links)
    avoiding = [p.closed_form_s for p, links in used.values() if cable not in links and (cable ^ 1) not in links]
    healthy = simulate_collective(built, "all_reduce", GiB, routing=routing)
    with validating() as checked:
        hurt = simulate_collective(built, "all_reduce", GiB, routing=routing, failed_links=[cable])
    assert checked.count == 1 and not hurt.fast_path
    assert healthy.simulated_s < hurt.simulated_s <= min(avoiding)
    assert hurt.closed_form_s == pytest.approx(hurt.simulated_s, rel=0.05)


def test_failed_parts_are_one_line_errors():
    built, lk, chip = _healthy_and_failed()
    with pytest.raises(PodsimError, match="starts or ends on a failed chip"):
        simulate_collective(built, "all_reduce", GiB, failed_chips=[chip])
    v = built.view
    cut = [int(x) for x in v.port_link[9].ravel()]  # every cable of chip 9
    with pytest.raises(PodsimError, match="cut apart"):
        simulate_collective(built, "all_to_all", GiB, failed_links=cut, routing="shortest_paths")
    with pytest.raises(PodsimError, match=r"failed_links: 99999999 is not an id of this fabric"):
        simulate_collective(built, "all_reduce", GiB, failed_links=[99999999])


def test_a_failed_ocs_unit_darkens_its_circuits():
    """OCS (dim, index) carries one circuit per cube of the slice on that face position: a
    2-cube 4x4x8 loses 2 optical cables (4 directed links) per unit; the all-reduce routes
    around them, slower than healthy, faster with multipath than on one detour path."""
    from podsim.topology.degraded import ocs_failed_links
    built = build_slice("tpu-v4", "4x4x8")
    fab = built.fabric
    links = ocs_failed_links(fab, ocs=[16])
    assert len(links) == 4 and set(links) == {fab.link_reverse[lk] for lk in links}
    cube, dim, sign, idx = fab.layout.port_owner(np.full(4, 16), np.arange(4))
    assert set(links) == {int(fab.port_link[fab.layout.face_chip[c, d, s, i], d, s]) for c, d, s, i in zip(cube, dim, sign, idx, strict=True)}
    t = {}
    for routing in ("dimension_order", "shortest_paths"):
        healthy = simulate_collective(built, "all_reduce", GiB, routing=routing)
        with validating():
            t[routing] = simulate_collective(built, "all_reduce", GiB, routing=routing, failed_links=links).simulated_s
        assert t[routing] > healthy.simulated_s
    assert t["shortest_paths"] < t["dimension_order"]
    with pytest.raises(PodsimError, match="OCS 9999 does not exist"):
        ocs_failed_links(fab, ocs=[9999])
