"""Open axes: a static pod wired without a wraparound on an axis (the v3 multipod's 128-chip axis),
and rings along any open line of chips, which run folded onto the line."""

from __future__ import annotations

import numpy as np
import pytest

from podsim.collectives.algorithms import build_schedule
from podsim.collectives.choice import closed_form_s
from podsim.collectives.closed_form import ring_all_reduce_s, ring_reduce_scatter_s
from podsim.collectives.fabricroutes import Placement
from podsim.collectives.groups import group_layout
from podsim.collectives.patterns import folded_ring_next
from podsim.collectives.routes import RouterPool
from podsim.topology import build_slice, get_generation
from podsim.topology.shapes import validate_shape

V3_LINK = 100e9  # generations.yaml tpu-v3 ici_link_bandwidth (v3.11)
HOP = 1e-6  # x.2


def test_the_multipod_is_one_32x128_network_open_along_its_long_axis():
    gen = get_generation("tpu-v3-multipod")
    assert gen.pod_shape == (32, 128) and gen.chip_id == "tpu-v3" and gen.pod_chips == 4096
    spec = validate_shape(gen, "32x128")
    assert spec.wrap == (True, False) and spec.topology == "partial torus"
    b = build_slice(gen, "32x128")
    fab = b.fabric
    coord = b.view.coords
    at = {tuple(c): chip for c, chip in zip(coord.tolist(), b.view.chips.tolist(), strict=True)}
    links = set(zip(fab.link_src.tolist(), fab.link_dst.tolist(), strict=True))
    assert (at[(0, 127)], at[(0, 0)]) not in links and (at[(0, 0)], at[(0, 127)]) not in links  # no wraparound cable
    assert (at[(31, 5)], at[(0, 5)]) in links and (at[(0, 126)], at[(0, 127)]) in links
    # cables: 128 rings of 32 on the wrapped axis, 32 lines of 127 on the open one; two directions each
    ici = (fab.link_src < fab.n_chips) & (fab.link_dst < fab.n_chips)
    assert int(ici.sum()) == 2 * (128 * 32 + 32 * 127)


@pytest.mark.parametrize("n", [4, 5, 8, 16, 128])
def test_folded_ring_is_one_cycle_of_one_or_two_link_hops(n):
    for step in (1, -1):
        nxt = folded_ring_next(n, step)
        seen, i = [], 0
        for _ in range(n):
            seen.append(i)
            i = int(nxt[i])
        assert i == 0 and sorted(seen) == list(range(n))
        assert np.abs(nxt - np.arange(n)).max() <= 2
        # each link (i, i+1) is crossed once in each direction
        fwd = np.zeros(n - 1, int)
        back = np.zeros(n - 1, int)
        for a, b in enumerate(nxt):
            lo, hi = sorted((a, int(b)))
            (fwd if b > a else back)[lo:hi] += 1
        assert (fwd == 1).all() and (back == 1).all()


@pytest.mark.parametrize("p", [4, 8, 16])
def test_a_ring_on_a_mesh_line_costs_two_hops_a_step_and_one_ring_of_bandwidth(p):
    """On a 16x16 slice of a v3 pod (a mesh: no axis spans the pod) a ring of p along x is folded:
    (p-1)(2 alpha + n/p beta) per pass, where a ring closed over the line paid (p-1) hops on every
    step; both directions together (bidir_ring) share every link, so they cost what one ring does
    (the missing wraparound doubles a torus ring's time, hardware.md x.7)."""
    b = build_slice("tpu-v3", "16x16")
    pool = RouterPool(Placement(b.fabric, (b.view,)))
    lay = group_layout((b.view,), f"x:{p}")
    assert lay.line == (True,)
    n, beta = 2.0**28, 1 / V3_LINK
    rs = closed_form_s(build_schedule("reduce_scatter", lay, n, "ring"), pool)
    assert rs == pytest.approx(ring_reduce_scatter_s(p, n, 2 * HOP, beta), rel=1e-12)
    ar = closed_form_s(build_schedule("all_reduce", lay, n, "ring"), pool)
    assert ar == pytest.approx(ring_all_reduce_s(p, n, 2 * HOP, beta), rel=1e-12)
    assert closed_form_s(build_schedule("all_reduce", lay, n, "bidir_ring"), pool) == pytest.approx(ar, rel=1e-12)


def test_rings_that_close_through_a_wraparound_are_not_folded():
    b = build_slice("tpu-v3", "32x32")
    assert group_layout((b.view,), "x").line == (False,)
    assert group_layout((b.view,), "x:8").line == (True,)  # a block of a longer axis is a line
    gpu = build_slice("gpu-h100", "16")  # a switched GPU slice has no lines
    assert not any(group_layout((gpu.view,), "x").line)
