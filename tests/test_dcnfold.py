"""Folding the DCN flows of a multislice job (issue 13 item 5): classes by colour refinement,
one representative flow per class, and the folded step equal to the full one."""

from __future__ import annotations

import numpy as np
import pytest

from podsim.collectives import plan_collective
from podsim.collectives.dcnfold import (
    _expand,
    fold_crossing,
    fold_flows,
    is_equitable,
    refine,
)
from podsim.collectives.fabricroutes import Placement
from podsim.collectives.groups import group_layout
from podsim.collectives.routes import RouterPool
from podsim.engine import build_job, simulate_step
from podsim.maxmin import max_min_rates
from podsim.topology import DcnSpec
from podsim.topology.routing import dcn_split_groups, dcn_split_routes
from podsim.trace import StepTrace, generate_trace
from podsim.trace.model import Collective, Compute, parse_group


def _csr(routes: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in routes])]).astype(np.int64)
    return indptr, np.array([k for r in routes for k in r], np.int64)


class _P:  # a stand-in pattern: fold_flows only keys patterns by identity
    pass


def test_refinement_splits_flows_by_what_they_share():
    """Three flows on link 0 (each also on a private link 1, 2, 3) and one flow alone on link 4:
    the three are one class, the lone flow another; links 1-3 one class, 0 and 4 their own."""
    indptr, links = _csr([[0, 1], [0, 2], [0, 3], [4]])
    ef = np.repeat(np.arange(4), np.diff(indptr))
    fc, lc = refine(ef, links, np.zeros(4, np.int64), np.zeros(5, np.int64))
    assert fc[0] == fc[1] == fc[2] != fc[3]
    assert lc[1] == lc[2] == lc[3] and len({lc[0], lc[1], lc[4]}) == 3
    assert is_equitable(ef, links, fc, lc)
    # putting every flow in one class is not equitable (link 0 carries 3, link 4 carries 1)
    assert not is_equitable(ef, links, np.zeros(4, np.int64), lc)


def test_folded_loads_give_the_full_max_min_rates():
    """ECMP-like: 8 flows from 4 sources over 2 'spines' hashed unevenly (spine 0 takes 6 flows,
    spine 1 takes 2). Max-min on the representatives (each entry n_A / n_L of its bytes on the
    representative link) gives every class the rate its flows get in the full problem."""
    spine = [0, 0, 0, 1, 0, 0, 0, 1]
    routes = [[10 + f // 2, 20 + spine[f], 30 + f % 2] for f in range(8)]  # source NIC, spine, sink NIC
    indptr, links = _csr(routes)
    cap = np.full(40, 100.0)
    cap[20:22] = 150.0
    full = max_min_rates(np.repeat(np.arange(8), np.diff(indptr)), links, 8, cap)
    p = _P()
    fold = fold_flows([(p, np.arange(8), np.arange(8), None, indptr, links, None)], cap, np.zeros(40))
    assert fold is not None and fold.classes < 8
    f = fold.patterns[id(p)]
    reps = f.src  # flow ids (src was arange)
    rates = max_min_rates(np.repeat(np.arange(len(reps)), np.diff(f.indptr)), f.links, len(reps), cap, f.frac)
    assert np.allclose(rates, full[reps], rtol=1e-12)
    assert f.represented == 8


def _dcn_step(slices: int, sites: int, algorithm: str) -> StepTrace:
    ops = (Compute("c", duration_s=1e-3),
           Collective("ag", "all_gather", 2**24, parse_group("x,y,z"), deps=("c",)),
           Collective("dp1", "all_reduce", 2**24, parse_group("dcn"), algorithm, deps=("c",)),
           Collective("dp2", "all_reduce", 2**22, parse_group("dcn"), algorithm, deps=("c",)))
    return StepTrace(ops, name="dcn", meta={"slices": slices})


@pytest.mark.parametrize("slices,sites,algorithm,ecmp", [
    (4, 1, "direct", "hash"), (4, 2, "auto", "hash"), (8, 2, "auto", "hash"), (8, 2, "auto", "split"),
    (8, 1, "direct", "split"), pytest.param(8, 1, "direct", "hash", marks=pytest.mark.slow)])
def test_folded_dcn_step_equals_the_full_one(slices, sites, algorithm, ecmp):
    """Two all-reduces across slices at once on 8 spines (hashed ECMP gives flows many distinct
    rates; split spreads each over the spines): the folded step equals the full one (step,
    DCN/WAN busy time, every link's bytes), with far fewer flows simulated."""
    tr = _dcn_step(slices, sites, algorithm)
    dcn = DcnSpec(sites=sites, wan_latency_s=1e-3, ecmp=ecmp)
    fast, full = (simulate_step(None, build_job(tr, "tpu-v4", "4x4x4", slices, dcn=dcn), fast_path=fp) for fp in (True, False))
    assert fast.fast_path and fast.flows == full.flows
    assert fast.flows_simulated < full.flows_simulated / 4
    assert fast.step_time_s == pytest.approx(full.step_time_s, rel=1e-9)
    for level in ("dcn", "wan"):
        assert fast.levels[level]["busy_s"] == pytest.approx(full.levels[level]["busy_s"], rel=1e-9, abs=1e-15)
    assert np.allclose(fast.link_bytes, full.link_bytes, rtol=1e-9)


def test_folded_generated_step_equals_the_full_one():
    """A generated FSDP step, data parallel over 4 slices on two sites: folded == full."""
    tr = generate_trace("llama2-70b", "4x4x4", "fsdp=16,tensor=4,dcn=4", generation="tpu-v4",
                        overrides={"n_layers": 2, "global_batch": 64})
    dcn = DcnSpec(sites=2, wan_latency_s=1e-3)
    fast, full = (simulate_step(None, build_job(tr, "tpu-v4", "4x4x4", 4, dcn=dcn), fast_path=fp) for fp in (True, False))
    assert fast.step_time_s == pytest.approx(full.step_time_s, rel=1e-9)
    assert np.allclose(fast.link_bytes, full.link_bytes, rtol=1e-9)
    assert fast.flows_simulated < full.flows_simulated / 20


def test_dcn_flows_themselves_are_folded():
    """The flows that cross slices are simulated as classes, not whole: with the ICI op alone
    as the baseline, the DCN all-reduces add far fewer simulated flows than they carry."""
    dcn = DcnSpec(ecmp="hash")
    both = _dcn_step(4, 1, "direct")
    ici = StepTrace(both.ops[:2], name="ici", meta={"slices": 4})
    a, b = (simulate_step(None, build_job(tr, "tpu-v4", "4x4x4", 4, dcn=dcn)) for tr in (ici, both))
    dcn_flows, dcn_simulated = b.flows - a.flows, b.flows_simulated - a.flows_simulated
    assert dcn_flows > 0 and 0 < dcn_simulated <= dcn_flows / 4  # 672 of 3,072 on 8 hashed spines


@pytest.mark.parametrize("sites", [1, 2])
def test_grouped_split_routes_expand_to_the_full_ones(sites):
    """Split routes with each flow's S spine links of one kind as one group entry (what the
    fold refines on) are the full split routes once every group entry is replaced by its links."""
    job = build_job(_dcn_step(4, sites, "direct"), "tpu-v4", "4x4x4", 4, dcn=DcnSpec(sites=sites))
    fab = job.fabric
    src = np.concatenate([v.chips for v in job.views])
    dst = np.roll(src, 64 + 5)  # every chip to a chip of the next slice (other leaves, other site)
    dst[:4] = src[1:5]  # and a few under their own leaf
    ip, ent, fr, members = dcn_split_groups(fab, src, dst)
    assert (ent >= fab.n_links).any() and members.shape[1] == fab.leaf_spine.shape[1] == 8
    full = dcn_split_routes(fab, src, dst)
    for got, want in zip(_expand(ip, ent, fr, np.arange(len(src)), members, fab.n_links), full, strict=True):
        assert np.array_equal(got, want) and got.dtype == want.dtype


@pytest.mark.parametrize("sites", [1, 2])
def test_grouped_fold_equals_the_fold_of_full_routes(sites):
    """The fold built on grouped spine links has exactly the classes, representatives, links,
    fractions and latencies of the fold of the routes in full (twin links never split)."""
    job = build_job(_dcn_step(8, sites, "direct"), "tpu-v4", "4x4x4", 8, dcn=DcnSpec(sites=sites, wan_latency_s=1e-3))
    placement = Placement(job.fabric, job.views)
    pool = RouterPool(placement)
    pats = [p for size in (2**24, 2**22) for p in plan_collective(
        "all_reduce", group_layout(job.views, parse_group("dcn")), size, "direct", pool).schedule.patterns()]
    grouped = fold_crossing(placement, pats, {}, 10**7)
    fab = job.fabric
    assert all(dcn_split_groups(fab, *p.flows(None)[:2]) is not None for p in pats)  # the grouped path ran
    routed = []
    for p in {id(p): p for p in pats}.values():
        src, dst, w = p.flows(None)
        routed.append((p, src, dst, w, *placement.route(src, dst)))
    full = fold_flows(routed, fab.link_capacity_bytes_per_s, fab.link_latency_s)
    assert grouped is not None and full is not None and grouped.classes == full.classes < grouped.flows / 50
    assert np.array_equal(grouped.canon_link, full.canon_link) and grouped.patterns.keys() == full.patterns.keys()
    for k, f in full.patterns.items():
        g = grouped.patterns[k]
        assert g.represented == f.represented and (g.weight is None) == (f.weight is None)
        for name in ("src", "dst", "latency_s", "indptr", "links", "frac"):
            assert np.array_equal(getattr(g, name), getattr(f, name)), name
