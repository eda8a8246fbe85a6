"""Translations of the slices that map the flows across slices and the DCN onto themselves
(collectives/crossing.py, issue 23): the DCN fold and pricing list one flow per orbit, and give
exactly what listing every flow gives."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest

from podsim.collectives import dcnfold, plan_collective
from podsim.collectives.closed_form import schedule_time_s
from podsim.collectives.crossing import crossing_flows, dcn_groups, dcn_translation
from podsim.collectives.fabricroutes import Placement
from podsim.collectives.groups import group_layout
from podsim.collectives.routes import RouterPool
from podsim.engine import build_job, simulate_step
from podsim.topology import DcnSpec
from podsim.topology.routing import dcn_split_groups
from podsim.trace import StepTrace, generate_trace
from podsim.trace.model import Compute, parse_group
from tests.helpers import flat_cross_slice

TIERS = "tor=24x200/2,aggregation=48x200/2,spine=64x200*4"


def _job(slices: int, dcn: DcnSpec, shape: str = "4x4x4"):
    return build_job(StepTrace((Compute("c", duration_s=1e-3),), meta={"slices": slices}), "tpu-v4", shape, slices, dcn=dcn)


def _patterns(job, group: str, algorithm: str, pool: RouterPool) -> list:
    pats = [p for size in (2**24, 2**22) for p in plan_collective(
        "all_reduce", group_layout(job.views, parse_group(group)), size, algorithm, pool).schedule.patterns()]
    return [p for p in {id(p): p for p in pats}.values() if p.split.crossing]


CASES = [(8, DcnSpec(), "dcn", "direct"), (8, DcnSpec(sites=2, wan_latency_s=1e-3), "z,dcn", "direct"),
         (4, DcnSpec(), "x,y,z,dcn", "direct"), (8, DcnSpec(sites=2), "y,dcn", "auto"),
         (4, DcnSpec(tiers=TIERS), "z,dcn", "direct")]


@pytest.mark.parametrize("slices,dcn,group,algorithm", CASES)
def test_translation_maps_every_route_onto_a_route(slices, dcn, group, algorithm):
    """The check behind the group, made on the flows themselves: every crossing flow's orbit
    has `order` flows, one from `keep`; and the load every flow puts on each DCN vertex is
    `stab` times the load the flows from `keep` put on its orbit."""
    job = _job(slices, dcn)
    placement = Placement(job.fabric, job.views)
    pats = _patterns(job, group, algorithm, RouterPool(placement))
    trans = dcn_translation(placement, pats)
    assert trans is not None and trans.order > 1
    n = len(dcn_groups(job.fabric)[1])
    for pat in pats:
        src, dst, _ = crossing_flows(placement, pat)
        ks, kd, _ = crossing_flows(placement, pat, trans.keep)
        assert len(ks) * trans.order == len(src) == pat.split.crossing
        full = np.bincount(dcn_split_groups(job.fabric, src, dst)[1], minlength=n)
        ip, ent, fr, _ = dcn_split_groups(job.fabric, ks, kd)
        folded = np.bincount(trans.rep[ent], minlength=n) * trans.stab
        on = trans.rep == np.arange(n)  # orbit representatives
        assert np.array_equal(full[on], folded[on]) and full.sum() == (np.bincount(ent, minlength=n)).sum() * trans.order
        assert np.array_equal(full, full[trans.rep])  # every vertex of an orbit carries its representative's load


@pytest.mark.parametrize("slices,dcn,group,algorithm", CASES)
def test_fold_by_orbits_equals_the_fold_of_every_flow(slices, dcn, group, algorithm):
    """The DCN fold on one flow per orbit has exactly the classes, representatives, links,
    fractions and latencies of the fold of every crossing flow."""
    job = _job(slices, dcn)
    placement = Placement(job.fabric, job.views)
    pats = _patterns(job, group, algorithm, RouterPool(placement))
    quotient = dcnfold.fold_crossing(placement, pats, {}, 10**7)
    with mock.patch.object(dcnfold, "dcn_translation", lambda *a, **k: None):
        full = dcnfold.fold_crossing(placement, pats, {}, 10**7)
    assert quotient is not None and full is not None
    assert (quotient.flows, quotient.classes) == (full.flows, full.classes)
    assert np.array_equal(quotient.canon_link, full.canon_link) and quotient.patterns.keys() == full.patterns.keys()
    for k, f in full.patterns.items():
        g = quotient.patterns[k]
        assert g.represented == f.represented and (g.weight is None) == (f.weight is None)
        for name in ("src", "dst", "latency_s", "indptr", "links", "frac") + (("weight",) if f.weight is not None else ()):
            assert np.array_equal(getattr(g, name), getattr(f, name)), name


@pytest.mark.parametrize("slices,dcn,group,algorithm", CASES[:3])
def test_pricing_by_orbits_equals_pricing_every_flow(slices, dcn, group, algorithm):
    """Closed forms priced on one crossing flow per orbit equal those priced on every flow."""
    job = _job(slices, dcn)
    placement = Placement(job.fabric, job.views)
    times = []
    for trans in (True, False):
        pool = RouterPool(placement)
        if not trans:
            pool._crossing_translation = lambda patterns: None
        lay = group_layout(job.views, parse_group(group))
        scheds = [plan_collective("all_reduce", lay, 2**24, a, pool).schedule for a in ("direct", "ring")]
        assert (pool.router(scheds[0].patterns()).translation is not None) == trans
        times.append([schedule_time_s(s, pool.router(s.patterns())) for s in scheds])
    assert times[0] == times[1]


def test_no_translation_where_the_dcn_hashes_its_spines():
    """A hashed spine depends on the NIC ids, which no translation keeps: every flow is listed."""
    job = _job(4, DcnSpec(ecmp="hash"))
    placement = Placement(job.fabric, job.views)
    assert dcn_translation(placement, _patterns(job, "dcn", "direct", RouterPool(placement))) is None


def test_generated_step_by_orbits_equals_the_step_folded_from_every_flow():
    """A generated step data parallel over 8 slices, its gradient reductions as one collective
    over an in-slice axis and `dcn` (as an importer gives them): folded from one flow per orbit it is bit for bit the step folded
    from every crossing flow, and equals the unfolded step."""
    tr = generate_trace("llama2-70b", "4x4x4", "dcn=8,data=4,fsdp=4,tensor=4", generation="tpu-v4",
                        overrides={"n_layers": 1, "global_batch": 128})
    tr = flat_cross_slice(tr)
    job = build_job(tr, "tpu-v4", "4x4x4", 8, dcn=DcnSpec())
    quotient = simulate_step(None, job)
    with mock.patch.object(dcnfold, "dcn_translation", lambda *a, **k: None):
        every = simulate_step(None, job)
    full = simulate_step(None, job, fast_path=False)
    assert quotient.fold == every.fold and "fold into" in quotient.fold
    assert quotient.step_time_s == every.step_time_s == pytest.approx(full.step_time_s, rel=1e-12)
    assert np.array_equal(quotient.link_bytes, every.link_bytes)
    assert np.array_equal(quotient.link_peak_utilisation, every.link_peak_utilisation)
    assert np.allclose(quotient.link_bytes, full.link_bytes, rtol=1e-12)


def test_spines_unlike_route_every_link():
    """A leaf whose spine uplinks differ in capacity is no group of alike links: flows across
    slices then take every link (route_crossing, groups_alike), the others stay grouped."""
    from dataclasses import replace

    from podsim.collectives.crossing import groups_alike, route_crossing

    job = _job(4, DcnSpec())
    placement = Placement(job.fabric, job.views)
    src, dst, _ = crossing_flows(placement, _patterns(job, "dcn", "direct", RouterPool(placement))[0])
    fab = job.fabric
    ip, ent, fr, _ = dcn_split_groups(fab, src, dst)
    groups = dcn_groups(fab)
    assert groups_alike(groups, ent, fab.n_links) and route_crossing(placement, src, dst, groups)[1]
    leaf = int(ent[ent >= fab.n_links].min()) - fab.n_links  # a leaf's uplinks the flows take
    cap = fab.link_capacity_bytes_per_s.copy()
    cap[fab.leaf_spine[leaf, 0]] /= 2
    unlike = Placement(replace(fab, link_capacity_bytes_per_s=cap), job.views)
    groups = dcn_groups(unlike.fabric)
    assert not groups_alike(groups, ent, fab.n_links) and groups_alike(groups, ent[ent < fab.n_links], fab.n_links)
    (ip2, ent2, fr2), grouped = route_crossing(unlike, src, dst, groups)
    assert not grouped and not (ent2 >= fab.n_links).any()
    assert all(np.array_equal(a, b) for a, b in zip((ip2, ent2, fr2), unlike.route(src, dst), strict=True))
