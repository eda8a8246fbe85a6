"""Collective algorithms: groups, step patterns, byte accounting, closed forms, symmetry."""

from __future__ import annotations

import math

import numpy as np
import pytest

from podsim.collectives import plan_collective
from podsim.collectives.algorithms import build_schedule
from podsim.collectives.bounds import all_to_all_link_load, all_to_all_time_s
from podsim.collectives.choice import closed_form_s
from podsim.collectives.closed_form import (
    bidir_ring_all_reduce_s,
    halving_doubling_all_reduce_s,
    ring_all_reduce_s,
    ring_reduce_scatter_s,
    torus_all_reduce_s,
)
from podsim.collectives.fabricroutes import Placement
from podsim.collectives.groups import group_layout
from podsim.collectives.patterns import ring_pattern, snake_order
from podsim.collectives.routes import RouterPool
from podsim.collectives.symmetry import translation_symmetry
from podsim.engine import simulate_collective
from podsim.engine.validate import validating
from podsim.errors import PodsimError
from podsim.topology import PodLayout, build_slice, get_generation
from podsim.topology.fabric import build_fabric
from podsim.topology.metrics import bfs_levels
from podsim.topology.shapes import validate_shape
from podsim.topology.slices import plan_slice, slice_view

V4_LINK = 45e9
HOP = 1e-6


def pool_of(built) -> RouterPool:
    return RouterPool(Placement(built.fabric, (built.view,)))


# --- groups ------------------------------------------------------------------------------

def test_group_layout_axes_and_blocks():
    """A group splits the slice into instances of p members, ranked with the first axis fastest."""
    b = build_slice("tpu-v4", "4x4x8")
    view = b.view
    local = Placement(b.fabric, (view,)).local_of_chip
    x = group_layout((view,), "x")
    assert (x.p, x.instances, x.grid) == (4, 32, (4,))
    coords = view.coords[local[x.members[0]]]
    assert coords[:, 0].tolist() == [0, 1, 2, 3] and len({tuple(c[1:]) for c in coords}) == 1
    xy = group_layout((view,), "x,y")
    assert (xy.p, xy.instances, xy.grid) == (16, 8, (4, 4))
    blocks = group_layout((view,), "z:2:4")  # 2 chips 4 apart along z
    zc = view.coords[local[blocks.members]][..., 2]
    assert blocks.p == 2 and blocks.instances == 64 and ((zc[:, 1] - zc[:, 0]) == 4).all()
    every = group_layout((view,), "all")
    assert every.p == 128 and every.instances == 1 and sorted(every.members[0]) == sorted(view.chips)


def test_group_layout_on_2d_gpu_and_multislice():
    """`all` works on a 2-D slice; a GPU group splits into (GPU in node, node); `dcn` adds the
    slices of a multislice job as the outer axis."""
    assert group_layout((build_slice("tpu-v5e", "4x8").view,), "all").grid == (4, 8)
    gpu = group_layout((build_slice("gpu-h100", "64").view,), "all")
    assert (gpu.grid, gpu.axes, gpu.dcn) == ((8, 8), ("x", "node"), (False, True))
    gen = get_generation("tpu-v4")
    lay = PodLayout(gen)
    spec = validate_shape(gen, "4x4x4")
    a, b = plan_slice(lay, spec, cubes=[0]), plan_slice(lay, spec, cubes=[5])
    fab = build_fabric(lay, circuits=a.circuits + b.circuits)
    views = (slice_view(fab, a), slice_view(fab, b))
    g = group_layout(views, "x,y,z,dcn")
    assert (g.p, g.instances, g.grid, g.dcn) == (128, 1, (4, 4, 4, 2), (False, False, False, True))
    assert set(g.members[0, :64]) == set(a.chips) and set(g.members[0, 64:]) == set(b.chips)
    d = group_layout(views, "dcn")
    assert (d.p, d.instances) == (2, 64)


def test_group_errors_are_one_line():
    view = build_slice("tpu-v4", "8x8x8").view
    with pytest.raises(PodsimError, match="group x:3 needs 3 chips along x to divide its length"):
        group_layout((view,), "x:3")


def test_snake_order_is_a_ring_of_single_steps():
    """Consecutive snake ranks differ by one step on one axis, and on even grids the last
    rank is one (wraparound) step from the first: a Hamiltonian ring of the torus."""
    for grid in [(4, 4), (4, 4, 8), (8, 2, 2)]:
        order = snake_order(grid)
        idx = np.stack(np.unravel_index(order, grid, order="F"), 1)
        step = np.abs(np.diff(np.vstack([idx, idx[:1]]), axis=0))
        step = np.minimum(step, np.array(grid) - step)
        assert sorted(order.tolist()) == list(range(math.prod(grid)))
        assert (step.sum(1) == 1).all()


# --- byte accounting (nccl-tests convention) -----------------------------------------------

def _bytes_sent(schedule) -> float:
    total = 0.0
    for stage in schedule.stages:
        for stream in stage:
            for ph in stream:
                src, _, w = ph.pattern.flows()
                total += ph.repeat * ph.bytes * (len(src) if w is None else w.sum())
    return total


@pytest.mark.parametrize("alg", ["ring", "bidir_ring", "torus", "torus_all_links", "halving_doubling", "direct"])
@pytest.mark.parametrize("kind,factor", [("reduce_scatter", 1), ("all_gather", 1), ("all_reduce", 2)])
def test_every_chip_sends_the_textbook_volume(alg, kind, factor):
    """Reduce-scatter and all-gather move (p-1)/p x n out of every chip, all-reduce twice that
    (the bandwidth terms of col.1, col.4, col.9, col.11), whatever the algorithm."""
    view = build_slice("tpu-v4", "4x4x8").view
    lay = group_layout((view,), "all")
    n = 3.0 * 2**20
    sched = build_schedule(kind, lay, n, alg)
    assert _bytes_sent(sched) == pytest.approx(factor * lay.p * (lay.p - 1) / lay.p * n, rel=1e-12)


def test_all_to_all_volume():
    lay = group_layout((build_slice("tpu-v4", "4x4x4").view,), "all")
    for alg in ("direct", "torus"):
        sent = _bytes_sent(build_schedule("all_to_all", lay, 2**20, alg))
        # direct: (p-1)/p of the buffer leaves each chip; the torus forwards it axis by axis,
        # (g-1)/g of it on each axis of length g.
        per_chip = (lay.p - 1) / lay.p if alg == "direct" else sum((g - 1) / g for g in lay.grid)
        assert sent == pytest.approx(lay.p * 2**20 * per_chip, rel=1e-12)


# --- closed forms -------------------------------------------------------------------------

@pytest.mark.parametrize("p", [4, 8, 16])
def test_schedule_closed_form_is_textbook_on_torus_rings(p):
    """On a physical torus ring the evaluated closed form is exactly MPICH's (p-1) alpha +
    (p-1)/p n beta per pass (col.1, col.11, col.21), alpha the 1 us hop, beta 1/45 GB/s."""
    b = build_slice("tpu-v4", f"{p}x{p}x{p}")
    pool = pool_of(b)
    lay = group_layout((b.view,), "x")
    n = 2.0**30
    beta = 1 / V4_LINK
    got = {k: closed_form_s(build_schedule(k, lay, n, a), pool)
           for k, a in [("all_reduce", "ring"), ("reduce_scatter", "ring"), ("all_gather", "bidir_ring")]}
    assert got["all_reduce"] == pytest.approx(ring_all_reduce_s(p, n, HOP, beta), rel=1e-12)
    assert got["reduce_scatter"] == pytest.approx(ring_reduce_scatter_s(p, n, HOP, beta), rel=1e-12)
    assert got["all_gather"] == pytest.approx(ring_reduce_scatter_s(p, n / 2, HOP, beta), rel=1e-12)
    ar_bidir = closed_form_s(build_schedule("all_reduce", lay, n, "bidir_ring"), pool)
    assert ar_bidir == pytest.approx(bidir_ring_all_reduce_s(p, n, HOP, beta), rel=1e-12)


def test_torus_closed_forms_are_textbook():
    """Multi-dimensional torus (col.20 generalised): bidirectional rings give 2 streams; the
    all-links variant 2 x 3 streams on a cube, so its busbw is 6 links x 45 GB/s (v4.25)."""
    b = build_slice("tpu-v4", "8x8x8")
    pool, lay, n = pool_of(b), group_layout((b.view,), "all"), 2.0**30
    t_torus = closed_form_s(build_schedule("all_reduce", lay, n, "torus"), pool)
    t_all = closed_form_s(build_schedule("all_reduce", lay, n, "torus_all_links"), pool)
    assert t_torus == pytest.approx(torus_all_reduce_s((8, 8, 8), n, HOP, 1 / V4_LINK, streams=2), rel=1e-12)
    assert t_all == pytest.approx(torus_all_reduce_s((8, 8, 8), n, HOP, 1 / V4_LINK, streams=6), rel=1e-12)


def test_halving_doubling_is_textbook_on_a_crossbar():
    """Inside one 8-GPU NVSwitch node every GPU reaches every other over its own NVLink, the
    fully connected network Rabenseifner's col.9 assumes (alpha = two 0.936 us hops)."""
    b = build_slice("gpu-h100", "8")
    t = closed_form_s(build_schedule("all_reduce", group_layout((b.view,), "all"), 2.0**28, "halving_doubling"), pool_of(b))
    assert t == pytest.approx(halving_doubling_all_reduce_s(8, 2.0**28, 2 * 0.936e-6, 1 / 450e9), rel=1e-9)


def test_auto_picks_by_closed_form_and_trades_latency_for_bandwidth():
    """auto takes the smallest closed form: all links busy for a large all-reduce on a pod,
    fewer sequential steps for a tiny one."""
    b = build_slice("tpu-v4", "16x16x16")
    pool, lay = pool_of(b), group_layout((b.view,), "all")
    big = plan_collective("all_reduce", lay, 2**30, "auto", pool)
    small = plan_collective("all_reduce", lay, 2**10, "auto", pool)
    assert big.schedule.algorithm == "torus_all_links"
    assert big.closed_form_s == min(big.candidates_s.values())
    assert small.schedule.algorithm != "torus_all_links"
    assert small.candidates_s[small.schedule.algorithm] < small.candidates_s["torus_all_links"]


@pytest.mark.parametrize("kind,group,alg,needle", [
    ("all_reduce", "all", "bogus", "algorithm 'bogus' is not a known algorithm; use one of: auto, ring"),
    ("all_to_all", "all", "ring", "ring has no all_to_all; use one of: auto, torus, direct"),
    ("all_reduce", "x,y", "hierarchical", "needs a group with axes inside the slice and across the DCN"),
    ("all_gather", "x:5", "ring", "x:5 needs 5 chips along x"),
    ("scatter", "all", "ring", "collective 'scatter' is not a known collective"),
])
def test_bad_requests_are_one_line_errors(kind, group, alg, needle):
    b = build_slice("tpu-v4", "12x12x12")
    with pytest.raises(PodsimError, match=needle.replace("(", r"\(")):
        simulate_collective(b, kind, 2**20, group=group, algorithm=alg)
    with pytest.raises(PodsimError, match="halving_doubling needs power-of-two axes; this group's grid is 12x12x12"):
        simulate_collective(b, "all_reduce", 2**20, algorithm="halving_doubling")


# --- symmetry fast path ---------------------------------------------------------------------

def test_translation_symmetry_periods():
    """Rings along an axis fold to one chip per 2x2x2 block (even periods keep the parity that
    breaks routing ties); a snake ring or a twisted torus has no symmetry to fold."""
    b = build_slice("tpu-v4", "8x8x8")
    lay = group_layout((b.view,), "all")
    sym = translation_symmetry(b.view, [ring_pattern(lay, 0, 1)])
    assert sym.periods == (2, 2, 2) and sym.multiplicity == 64 and sym.keep.sum() == 8
    assert translation_symmetry(b.view, [ring_pattern(lay, None, 1)]) is None
    tw = build_slice("tpu-v4", "4x4x8", twisted=True)
    assert translation_symmetry(tw.view, [ring_pattern(group_layout((tw.view,), "all"), 0, 1)]) is None
    blocks = group_layout((b.view,), "x:4")
    assert translation_symmetry(b.view, [ring_pattern(blocks, 0, 1)]).periods == (4, 2, 2)


@pytest.mark.parametrize("shape,group,kind,alg", [
    ("4x4x8", "all", "all_reduce", "torus_all_links"),
    ("8x8x8", "x", "reduce_scatter", "bidir_ring"),
    ("4x4x8", "all", "all_to_all", "direct"),
    ("8x8x8", "x:4,y", "all_gather", "torus"),
    ("8x8x8", "z", "all_reduce", "halving_doubling"),
    ("4x8x8", "y:2:2", "all_reduce", "ring"),
])
def test_fast_path_agrees_with_full_simulation(shape, group, kind, alg):
    """Folding by symmetry changes nothing a user sees: step time, per-link bytes and peak
    utilisation equal those of simulating every flow."""
    b = build_slice("tpu-v4", shape)
    with validating() as checked:
        fast = simulate_collective(b, kind, 2**26, group=group, algorithm=alg, fast_path=True)
        full = simulate_collective(b, kind, 2**26, group=group, algorithm=alg, fast_path=False)
    assert checked.count == 2
    assert fast.fast_path and not full.fast_path and fast.flows_simulated < full.flows_simulated == fast.flows
    assert fast.simulated_s == pytest.approx(full.simulated_s, rel=1e-9)
    np.testing.assert_allclose(fast.step.link_bytes, full.step.link_bytes, rtol=1e-9)
    np.testing.assert_allclose(fast.step.link_peak_utilisation, full.step.link_peak_utilisation, rtol=1e-9)


# --- all-to-all routing bounds ------------------------------------------------------------------

def test_all_to_all_loads_conserve_hops():
    """Both routings put each byte on as many links as its route has hops (shortest paths)."""
    for twisted in (False, True):
        view = build_slice("tpu-v4", "4x4x8", twisted=twisted).view
        dist = np.stack([bfs_levels(view.port_peer, s) for s in range(view.n)])
        for routing in ("dor", "ecmp"):
            assert all_to_all_link_load(view, routing).sum() == pytest.approx(dist.sum(), rel=1e-12)


def test_twisted_all_to_all_gain_depends_on_routing():
    """[ISCA23] measured 1.63x (4x4x8) and 1.31x (4x8x8) for twisted over plain tori (tw.1,
    tw.2). One dimension-order path per pair gets 1.19x and 1.00x; spreading every flow over
    all shortest paths gets 1.75x and 1.39x (every link equally busy). The paper lies between."""
    ratio = {}
    for shape in ("4x4x8", "4x8x8"):
        t = {(tw, r): all_to_all_time_s(build_slice("tpu-v4", shape, twisted=tw).view, 2**30, r)
             for tw in (False, True) for r in ("dor", "ecmp")}
        assert t[(False, "dor")] == pytest.approx(t[(False, "ecmp")])  # plain: bisection-bound either way
        ratio[shape] = (t[(False, "dor")] / t[(True, "dor")], t[(False, "ecmp")] / t[(True, "ecmp")])
    assert ratio["4x4x8"] == pytest.approx((32 / 27, 96 / 55), rel=1e-9)
    assert ratio["4x8x8"] == pytest.approx((1.0, 32 / 23), rel=1e-9)
    assert ratio["4x4x8"][0] < 1.63 < ratio["4x4x8"][1] and ratio["4x8x8"][0] < 1.31 < ratio["4x8x8"][1]
