"""Structural tests of the pod topology: link counts, degrees, OCS circuits, routes, figures."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from podsim.errors import PodsimError
from podsim.topology import DcnSpec, PodLayout, build_slice, get_generation, topology_summary
from podsim.topology.fabric import build_fabric
from podsim.topology.generations import generations, sources
from podsim.topology.metrics import bfs_levels
from podsim.topology.pod import MINUS, PLUS
from podsim.topology.routing import dcn_routes, slice_routes
from podsim.topology.shapes import validate_shape
from podsim.topology.slices import check_slice_topology, plan_slice, slice_view

SHARED = Path(__file__).resolve().parents[2] / "shared"
SHAPES_FILE = SHARED / "data" / "tpu" / "tpu_slice_shapes.json"


def _xpk_v4_shapes() -> list[str]:
    """The xpk default v4 shape list (shared data), with a copy inline so the test never skips."""
    inline = ["2x2x1", "2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8", "4x8x8", "8x8x8", "8x8x12", "8x8x16", "8x16x16"]
    if SHAPES_FILE.exists():
        assert json.loads(SHAPES_FILE.read_text())["v4"]["xpk_default_shapes"] == inline
    return inline


def _ici_graph(built) -> nx.MultiGraph:
    return built.fabric.to_networkx(built.slice.chips)


# --- generations -------------------------------------------------------------------------

def test_every_generation_loads_with_units_and_sources():
    """Every figure of every generation has a unit and a source id; missing ones say why."""
    gens = generations()
    known = set(sources()) | {"override"}
    assert set(gens) >= {"tpu-v2", "tpu-v3", "tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e", "tpu-7x", "gpu-h100"}
    for gen in gens.values():
        figs = gen.figures()
        assert len(figs) >= 12
        for name, fig in figs.items():
            # a row id of the reference sheet (v4.10, x.4, ocs.6) or a source named in the file
            assert fig.unit and (re.fullmatch(r"[a-z0-9]+\.[0-9]+", fig.source) or fig.source in known), (gen.id, name, fig.source)
            if fig.value is None:
                assert fig.note, f"{gen.id}.{name} is missing without a note saying why"
        assert gen.peak_flops_per_s > 0 and gen.link_bytes_per_s > 0 and gen.hbm_bytes_per_s > 0


def test_v3_link_conflict_recorded():
    """Where sources conflict (v3 ICI 70 vs 100 GB/s) one is chosen and the other kept beside it."""
    fig = get_generation("tpu-v3").ici_link_bandwidth
    assert fig.si == 100e9 and fig.alt is not None and fig.alt.value == 70


def test_unknown_generation_is_one_line_error():
    with pytest.raises(PodsimError, match="unknown generation 'tpu-v9'; known: tpu-v2"):
        get_generation("tpu-v9")


# --- documented pod figures (within 5%) ---------------------------------------------------

@pytest.mark.parametrize("gen,key,documented", [
    ("tpu-v4", "bisection_bytes_per_s", 24e12),
    ("tpu-v4", "allreduce_bytes_per_s", 1.1e15),
    ("tpu-v3", "bisection_bytes_per_s", 6.4e12),
    ("tpu-v5e", "bisection_bytes_per_s", 1.6e12),
    ("tpu-v5e", "allreduce_bytes_per_s", 51.2e12),
    ("tpu-v6e", "bisection_bytes_per_s", 3.2e12),
    ("tpu-v6e", "allreduce_bytes_per_s", 102.4e12),
])
def test_documented_pod_figures(gen, key, documented):
    """The Cloud TPU docs' pod bisection and all-reduce bandwidths, reproduced within 5%."""
    got = topology_summary(gen)[key]
    assert abs(got - documented) / documented < 0.05, (gen, key, got)


# --- tori: degrees and link counts ---------------------------------------------------------

@pytest.mark.parametrize("gen,shape", [("tpu-v4", None), ("tpu-v4", "4x4x8"), ("tpu-v5p", "4x4x4"), ("tpu-v5e", None), ("tpu-v3", None)])
def test_full_torus_is_regular(gen, shape):
    """A full torus: every chip has degree 2 x dims and there are dims x N cables."""
    built = build_slice(gen, shape)
    g = _ici_graph(built)
    dims = len(built.slice.shape)
    assert Counter(d for _, d in g.degree()) == {2 * dims: built.slice.n_chips}
    assert g.number_of_edges() == dims * built.slice.n_chips
    assert nx.is_connected(g)


def test_size_two_axis_keeps_both_cables():
    """A torus axis of size 2 has two distinct cables (grid_graph(periodic=True) merges them)."""
    gen = get_generation("tpu-v5e").model_copy(update={"pod_shape": (2, 8), "host_shape": (2, 4)})
    lay = PodLayout(gen)
    fab = build_fabric(lay)
    g = fab.to_networkx(np.arange(lay.n_chips))
    assert Counter(d for _, d in g.degree()) == {4: 16}
    assert g.number_of_edges() == 2 * 16
    # chips 0 and 8 (coords (0,0) and (1,0)) are joined by two parallel cables
    assert g.number_of_edges(0, 8) == 2
    periodic = nx.grid_graph(dim=[8, 2], periodic=True)
    assert periodic.number_of_edges() == 24  # the trap this test guards against


def test_subcube_slice_is_a_mesh():
    """2x2x4 inside a cube: a 3-D mesh, no wraparound, no circuits."""
    built = build_slice("tpu-v4", "2x2x4")
    g = _ici_graph(built)
    assert built.slice.spec.topology == "mesh" and not built.slice.circuits
    mesh = nx.grid_graph(dim=[4, 2, 2])
    assert g.number_of_edges() == mesh.number_of_edges()
    assert nx.is_isomorphic(nx.Graph(g), mesh)


# --- OCS circuits --------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [s for s in _xpk_v4_shapes()])
def test_v4_xpk_shapes_form_their_topology(shape):
    """Every xpk default v4 shape: circuits use each port once and realise the requested torus."""
    built = build_slice("tpu-v4", shape)
    circuits = built.slice.circuits
    ports = [(c.ocs, c.port_a) for c in circuits] + [(c.ocs, c.port_b) for c in circuits]
    assert len(ports) == len(set(ports)), "an OCS port is used twice"
    lay = built.fabric.layout
    for c in circuits:
        assert lay.port_owner(c.ocs, c.port_a)[2] == PLUS and lay.port_owner(c.ocs, c.port_b)[2] == MINUS
    check_slice_topology(built.view)
    spec = built.slice.spec
    n = built.slice.n_chips
    g = _ici_graph(built)
    if spec.kind == "cubes":
        assert len(circuits) == 3 * 16 * n // 64
        assert Counter(d for _, d in g.degree()) == {6: n}
        assert nx.diameter(nx.Graph(g)) == sum(s // 2 for s in spec.shape) if n <= 512 else True
    else:
        assert spec.topology == "mesh" and not circuits


def _plain_reference_isomorphic(shape):
    return nx.cycle_graph(shape[0]) if len(shape) == 1 else None


@pytest.mark.parametrize("shape,twisted_diameter,plain_diameter", [("4x4x8", 6, 8), ("4x8x8", 6, 10)])
def test_twisted_tori(shape, twisted_diameter, plain_diameter):
    """Twisted 4x4x8 and 4x8x8: 6-regular, diameters 6 (plain: 8 and 10), same inner links."""
    tw = build_slice("tpu-v4", shape, twisted=True)
    pl = build_slice("tpu-v4", shape, twisted=False)
    check_slice_topology(tw.view)
    gt, gp = nx.Graph(_ici_graph(tw)), nx.Graph(_ici_graph(pl))
    assert Counter(d for _, d in gt.degree()) == {6: tw.slice.n_chips}
    assert nx.diameter(gt) == twisted_diameter and nx.diameter(gp) == plain_diameter
    assert int(bfs_levels(tw.view.port_peer, 0).max()) == twisted_diameter
    assert topology_summary("tpu-v4", shape, twisted=True)["diameter_hops"] == twisted_diameter
    # only the wraparound (optical, cube-to-cube) circuits differ; copper links are identical
    copper = lambda b: {e for e in _ici_graph(b).edges(keys=False, data="kind") if e[2] == "copper"}  # noqa: E731
    assert copper(tw) == copper(pl)
    assert set(tw.slice.circuits) != set(pl.slice.circuits)
    # vertex-transitive: eccentricity is the same from every chip
    ecc = set(nx.eccentricity(gt).values())
    assert ecc == {twisted_diameter}


def test_circuits_on_any_cubes_and_twist_rules():
    """A slice may take any cubes in any order; the torus is still exact."""
    gen = get_generation("tpu-v4")
    lay = PodLayout(gen)
    spec = validate_shape(gen, "8x8x8")
    slc = plan_slice(lay, spec, cubes=[63, 5, 17, 2, 40, 41, 9, 30])
    fab = build_fabric(lay, circuits=slc.circuits)
    check_slice_topology(slice_view(fab, slc))
    with pytest.raises(PodsimError, match="cannot be twisted"):
        validate_shape(gen, "8x8x8", twisted=True)
    with pytest.raises(PodsimError, match="listed twice"):
        plan_slice(lay, validate_shape(gen, "4x4x8"), cubes=[3, 3])


def test_two_slices_share_a_pod_without_port_clash():
    gen = get_generation("tpu-v4")
    lay = PodLayout(gen)
    a = plan_slice(lay, validate_shape(gen, "4x4x8", twisted=True), cubes=[0, 1])
    b = plan_slice(lay, validate_shape(gen, "4x8x8"), cubes=[2, 3, 4, 5])
    fab = build_fabric(lay, circuits=a.circuits + b.circuits)
    check_slice_topology(slice_view(fab, a))
    check_slice_topology(slice_view(fab, b))
    with pytest.raises(PodsimError, match="used by two circuits"):
        build_fabric(lay, circuits=a.circuits + a.circuits[:1])


# --- shapes --------------------------------------------------------------------------------

@pytest.mark.parametrize("gen,shape,message", [
    ("tpu-v4", "4x4x6", "multiple of 4"),
    ("tpu-v4", "2x4x8", "multiple of 4"),
    ("tpu-v4", "4x4", "needs AxBxC"),
    ("tpu-v4", "16x16x20", "the largest tpu-v4 slice has 64"),
    ("tpu-v5p", "8x4x4", "non-decreasing"),
    ("tpu-v5e", "4x16", "not a tpu-v5e shape"),
    ("tpu-v5e", "abc", "not of the form"),
    ("tpu-v3", "8x32", "powers of two"),
    ("gpu-h100", "12", "multiple of 8"),
])
def test_invalid_shapes_say_what_is_allowed(gen, shape, message):
    with pytest.raises(PodsimError, match=message):
        validate_shape(get_generation(gen), shape)


def test_static_wraparound_only_on_full_axis():
    gen = get_generation("tpu-v5e")
    assert validate_shape(gen, "8x16").wrap == (False, True)
    assert validate_shape(gen, "16x16").topology == "torus"
    assert validate_shape(gen, "8x8").topology == "mesh"
    static_v4 = validate_shape(get_generation("tpu-v4"), "4x4x16", ocs=False)
    assert static_v4.wrap == (False, False, True)
    built = build_slice("tpu-v5e", "8x16")
    check_slice_topology(built.view)


def test_static_slice_across_the_wraparound():
    """On a static torus a rectangle may straddle the pod's wraparound and stays a mesh."""
    gen = get_generation("tpu-v5e")
    lay = PodLayout(gen)
    slc = plan_slice(lay, validate_shape(gen, "4x8"), origin=(14, 12))
    view = slice_view(build_fabric(lay), slc)
    check_slice_topology(view)
    assert {tuple(lay.coord[c]) for c in slc.chips[:2]} == {(14, 12), (14, 13)}


# --- routes --------------------------------------------------------------------------------

@pytest.mark.parametrize("gen,shape,twisted", [
    ("tpu-v4", "4x4x8", True), ("tpu-v4", "4x8x8", True), ("tpu-v4", "8x8x8", False),
    ("tpu-v4", "2x4x4", False), ("tpu-v5e", "8x16", False), ("tpu-v5e", "16x16", False),
])
def test_routes_are_shortest_paths(gen, shape, twisted):
    """Dimension-order routes follow live links and are as short as BFS distances."""
    built = build_slice(gen, shape, twisted=twisted)
    view = built.view
    n = view.n
    rng = np.random.default_rng(0)
    src = rng.integers(0, n, 400)
    dst = rng.integers(0, n, 400)
    routes = slice_routes(view, src, dst)
    fab = built.fabric
    for f in range(len(src)):
        links = routes.route(f)
        nodes = [int(view.chips[src[f]])] + [int(fab.link_dst[link]) for link in links]
        assert nodes[-1] == view.chips[dst[f]]
        assert all(fab.link_src[lk] == u for lk, u in zip(links, nodes, strict=False))
    dist = {int(s): bfs_levels(view.port_peer, int(s)) for s in np.unique(src)}
    shortest = np.array([dist[int(s)][d] for s, d in zip(src, dst, strict=True)])
    assert np.array_equal(routes.hops, shortest)


def test_ring_ties_split_both_ways():
    """On an even ring, flows to the antipode alternate direction so both directions share load."""
    built = build_slice("tpu-v4", "4x4x8")
    view = built.view
    coords = view.coords
    src = np.flatnonzero((coords[:, 0] == 0) & (coords[:, 1] == 0))
    dst = (src + 4) % 8  # z + 4 on the same z ring
    routes = slice_routes(view, src, dst)
    first = [int(built.fabric.link_dst[routes.route(f)[0]]) for f in range(len(src))]
    plus = sum(view.chips[(s + 1) % 8] == f for s, f in zip(src, first, strict=True))
    assert plus == len(src) // 2


def test_dcn_and_gpu_routes():
    """GPU -> NVSwitch -> GPU in a node; across nodes via NICs, and a spine only between leaves."""
    built = build_slice("gpu-h100", "32", dcn=DcnSpec(hosts_per_leaf=2))
    fab = built.fabric
    view = built.view
    r = slice_routes(view, np.array([0, 0, 0]), np.array([1, 8, 31]))
    assert list(r.hops) == [2, 4, 6]
    kinds = [int(fab.link_kind[lk]) for lk in r.route(2)]
    assert kinds == [3, 4, 5, 5, 4, 3]  # PCIe, NIC, leaf->spine, spine->leaf, NIC, PCIe


# --- fabric arrays -------------------------------------------------------------------------

def test_fabric_arrays_consistent():
    """Links come in reverse pairs with equal capacity; ports point at their peers."""
    built = build_slice("tpu-v4")
    fab = built.fabric
    rev = fab.link_reverse
    assert np.array_equal(fab.link_src, fab.link_dst[rev])
    assert np.array_equal(fab.link_capacity_bytes_per_s, fab.link_capacity_bytes_per_s[rev])
    live = fab.port_link >= 0
    assert np.array_equal(fab.link_dst[fab.port_link[live]], fab.port_peer[live])
    assert fab.n_chips == 4096 and len(fab.circuits) == 48 * 64
    assert math.isclose(fab.link_capacity_bytes_per_s[fab.port_link[0, 0, 0]], 45e9)


def test_ocs_dcn_uniform_and_engineered():
    """OCS DCN: a uniform mesh splits each block's uplink over all others; an engineered group
    spends its blocks' whole uplinks on circuits among themselves."""
    gen = get_generation("tpu-v4")
    lay = PodLayout(gen)
    host_bw = gen.dcn_bandwidth_per_host.si
    uniform = build_fabric(lay, dcn=DcnSpec(kind="ocs", hosts_per_leaf=64))  # 16 blocks of 4 cubes
    r = dcn_routes(uniform, np.array([0]), np.array([lay.n_chips - 1]))
    (dcn_link,) = [lk for lk in r.route(0) if uniform.link_kind[lk] == 5]
    assert uniform.link_capacity_bytes_per_s[dcn_link] == pytest.approx(64 * host_bw / 15)
    eng = build_fabric(lay, dcn=DcnSpec(kind="ocs", hosts_per_leaf=64, ocs_groups=((0, 15), (3, 4, 5))))
    r = dcn_routes(eng, np.array([0]), np.array([lay.n_chips - 1]))
    (dcn_link,) = [lk for lk in r.route(0) if eng.link_kind[lk] == 5]
    assert eng.link_capacity_bytes_per_s[dcn_link] == pytest.approx(64 * host_bw)
    with pytest.raises(PodsimError, match="no OCS-DCN circuit joins leaf 0 and leaf 3"):
        dcn_routes(eng, np.array([0]), np.array([3 * 256]))
    with pytest.raises(PodsimError, match="in two groups"):
        build_fabric(lay, dcn=DcnSpec(kind="ocs", hosts_per_leaf=64, ocs_groups=((0, 1), (1, 2))))
