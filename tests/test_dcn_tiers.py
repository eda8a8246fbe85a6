"""A DCN built in tiers (issue 22 item 1): NIC -> ToR -> aggregation block -> spine block. The
tiers' closed forms, the routes each flow takes, the per-chip bandwidth a job gets as it spans
more of the network, the fold kept exact, and the per-tier busy / exposed accounting."""

from __future__ import annotations

import numpy as np
import pytest

from podsim.engine import build_job, simulate_step, step_summary
from podsim.errors import PodsimError
from podsim.topology import DcnSpec, PodLayout, get_generation
from podsim.topology.dcntiers import parse_tiers, tier_plan, tier_presets
from podsim.topology.fabric import LinkKind, build_fabric
from podsim.topology.routing import dcn_routes, dcn_split_groups, dcn_split_routes
from podsim.trace import StepTrace
from podsim.trace.model import Collective, Compute, parse_group

# 16 hosts (4 v4 chips and one 200 Gb/s NIC each: one 4x4x4 slice) per ToR at 2:1, 4 ToRs per
# block at 2:1, 4 spine blocks: a slice's chips get 25/4 GB/s from their NICs, half that over
# their ToR's uplinks (200 GB/s for 64 chips), a quarter over the block's (400 GB/s for 256).
SPEC = "tor=24x200/2,aggregation=48x200/2,spine=512x200*4"
V4_NIC = 25e9  # bytes/s per host (hardware.md x.4)


def _ar_step(slices: int, algorithm: str, size: float = 2**28) -> StepTrace:
    return StepTrace((Collective("ar", "all_reduce", size, parse_group("dcn"), algorithm),), meta={"slices": slices})


def test_tier_plan_of_the_k64_fat_tree_is_the_fat_tree():
    """The fat-tree-k64 preset (eps.12, k = 64 of 64 x 800G switches, eps.3) gives k/2 down ports
    per ToR (128 v5e hosts of 2 x 100G NICs by 8-way breakout), k/2 ToRs per pod-block, k pods
    under the spine, full bisection at every tier."""
    tp = tier_plan(tier_presets()["fat-tree-k64"], 25e9, 2)
    assert (tp.hosts_per_tor, tp.tors_per_block, tp.spines, tp.max_blocks) == (128, 32, 32, 64)
    assert tp.tor_uplink_bytes_per_s == 32 * 800e9 / 8 and tp.block_uplink_bytes_per_s == 1024 * 800e9 / 8
    assert tp.tor_oversubscription == pytest.approx(1.0) and tp.block_oversubscription == pytest.approx(1.0)
    k40 = tier_plan(tier_presets()["fat-tree-k40-4.7to1"], 25e9, 1)  # a v4 host: one 200G NIC
    assert k40.hosts_per_tor == 33 and k40.tor_oversubscription == pytest.approx(33 / 7)


@pytest.mark.parametrize("spec,message", [
    ("tor=64x100", "aggregation: Field required"),
    ("tor=64x100;aggregation=64x100", "is not TIER=RADIXxGBPS"),
    ("tor=24x200/2,aggregation=48x200/2,spine=512x200", "spine.count"),
    ("tor=24x200/2,aggregation=48x200/2,spine=512x200/2*4", "top tier"),
    ("tor=64x200/2,aggregation=48x200,spine=64x200*4", "does not split 2:1"),
    ("tor=24x50/2,aggregation=48x200/2,spine=512x200*4", "slower than the hosts"),
    ("tor=24x200/2,tor=24x200/2", "given twice"),
    ("rack=24x200/2", "TIER one of tor"),
    ("no-such-preset", "not a preset"),
])
def test_bad_tiers_get_one_line_errors(spec, message):
    with pytest.raises(PodsimError, match=message) as err:
        build_fabric(PodLayout(get_generation("tpu-v4")), dcn=DcnSpec(tiers=parse_tiers(spec)))
    assert "\n" not in str(err.value)


def test_tiers_replace_the_untiered_fields():
    with pytest.raises(ValueError, match="hosts_per_leaf, oversubscription: a tiered DCN takes them from its tiers"):
        DcnSpec(tiers=SPEC, hosts_per_leaf=32, oversubscription=2)
    ocs = DcnSpec(kind="ocs", tiers="fat-tree-k64")
    assert ocs.tiers.spine is None and "OCS above the blocks" in ocs.tiers.describe()  # circuits join the blocks (jup.5)
    assert parse_tiers("fat-tree-k64") is tier_presets()["fat-tree-k64"]


def test_spine_radix_limits_the_blocks():
    with pytest.raises(PodsimError, match="reaches at most 16 aggregation blocks; these 2 pod"):
        build_fabric(PodLayout(get_generation("tpu-v4"), pods=2), dcn=DcnSpec(tiers="tor=24x200/2,aggregation=48x200/2,spine=64x200*4"))


def test_tiered_fabric_links_and_shares():
    """A v4 pod (1024 hosts) under SPEC: 64 ToRs of 16 hosts, 16 blocks of 4 ToRs, 4 spine
    links per block; every NIC link at the NIC's speed, every ToR uplink at 200 GB/s, every
    block-spine link at 400 GB/s / 4. A ToR the pod fills only partly keeps all its uplinks."""
    fab = build_fabric(PodLayout(get_generation("tpu-v4")), dcn=DcnSpec(tiers=SPEC))
    assert (fab.meta["n_tors"], fab.meta["n_leaves"], fab.meta["n_spines"]) == (64, 16, 4)
    cap, kind = fab.link_capacity_bytes_per_s, fab.link_kind
    assert np.all(cap[kind == LinkKind.NIC] == V4_NIC)
    assert np.all(cap[kind == LinkKind.TOR] == 8 * 200e9 / 8) and (kind == LinkKind.TOR).sum() == 2 * 64
    assert np.allclose(cap[fab.leaf_spine], 16 * 200e9 / 8 / 4)
    names, tier = fab.dcn_tiers
    assert names == ("tor", "aggregation", "spine", "wan")
    assert np.array_equal(np.bincount(tier[tier >= 0], minlength=4), [2 * 1024, 2 * 64, 2 * 16 * 4, 0])
    # 33 hosts per ToR (fat-tree-k40): the pod's 1024 hosts leave the last ToR with 1 host, and its 7 x 200G uplinks
    k40 = build_fabric(PodLayout(get_generation("tpu-v4")), dcn=DcnSpec(tiers="fat-tree-k40-4.7to1"))
    up = k40.link_capacity_bytes_per_s[k40.tor_up]
    assert len(up) == 32 and np.all(up == 7 * 200e9 / 8) and np.bincount(k40.tor_of_nic)[-1] == 1


def _kinds(fab, route) -> list[str]:
    return [LinkKind(int(fab.link_kind[k])).name for k in route]


@pytest.mark.parametrize("ecmp", ["hash", "split"])
def test_routes_climb_only_as_high_as_they_must(ecmp):
    fab = build_fabric(PodLayout(get_generation("tpu-v4")), dcn=DcnSpec(tiers=SPEC, ecmp=ecmp))
    host = fab.layout.chips_of_host[:, 0]
    src = host[[0, 0, 0, 0]]
    dst = np.array([fab.layout.chips_of_host[0, 1], host[1], host[16], host[64]])  # same host, ToR, block; other block
    want = [["PCIE", "PCIE"], ["PCIE", "NIC", "NIC", "PCIE"], ["PCIE", "NIC", "TOR", "TOR", "NIC", "PCIE"],
            ["PCIE", "NIC", "TOR", "DCN", "DCN", "TOR", "NIC", "PCIE"]]
    if ecmp == "hash":
        r = dcn_routes(fab, src, dst)
        assert [_kinds(fab, r.route(f)) for f in range(4)] == want
    else:
        ip, links, frac = dcn_split_routes(fab, src, dst)
        got = [_kinds(fab, links[ip[f]:ip[f + 1]]) for f in range(4)]
        assert got[:3] == want[:3] and got[3] == want[3][:3] + ["DCN"] * 8 + want[3][-3:]
        assert np.allclose(frac[ip[3] + 3:ip[3] + 11], 0.25)


@pytest.mark.parametrize("sites", [1, 2])
def test_grouped_tiered_routes_expand_to_the_full_ones(sites):
    from podsim.collectives.dcnfold import _expand

    job = build_job(_ar_step(8, "direct"), "tpu-v4", "4x4x4", 8, dcn=DcnSpec(tiers=SPEC, sites=sites))
    fab = job.fabric
    src = np.concatenate([v.chips for v in job.views])
    dst = np.roll(src, 64 * 3 + 5)  # other ToRs, other blocks, other site
    dst[:8] = src[[4, 8, 12, 70, 130, 200, 260, 300]]  # under their own ToR and block too
    ip, ent, fr, members = dcn_split_groups(fab, src, dst)
    full = dcn_split_routes(fab, src, dst)
    for got, want in zip(_expand(ip, ent, fr, np.arange(len(src)), members, fab.n_links), full, strict=True):
        assert np.array_equal(got, want) and got.dtype == want.dtype


def _per_chip_busbw(r, slices: int, size: float = 2**28) -> float:
    return 2 * (slices - 1) / slices * size / r.step_time_s


@pytest.mark.parametrize("algorithm", ["ring", "direct"])
def test_per_chip_dcn_bandwidth_falls_as_the_job_spans_more_tiers(algorithm):
    """What each chip gets from a 256 MiB all-reduce over N slices, by the topology alone:
    within one block (N = 2, 4) every byte crosses its ToR's 2:1 uplinks, 25/4/2 = 3.125 GB/s
    per chip; a ring keeps that beyond a block (only one slice's bytes cross each block
    boundary), while the all-pairs exchange sends (N - 4)/N of its bytes over the block's 2:1
    uplinks too. Each time equals its busiest tier's links' bytes / capacity (closed form)."""
    got = {}
    for n in (2, 4, 8, 16):
        r = simulate_step(None, build_job(_ar_step(n, algorithm), "tpu-v4", "4x4x4", n, dcn=DcnSpec(tiers=SPEC)))
        got[n] = _per_chip_busbw(r, n)
        per_chip = 2 * (n - 1) / n * 2**28
        tor = 64 * per_chip / 200e9  # a ToR's 64 chips, all their bytes up its 200 GB/s
        spine = 0.0 if n <= 4 else (256 * 2 * 2**28 / n * (n - 4) / 4 / 100e9 if algorithm == "direct" else 64 * per_chip / 4 / 100e9)
        assert r.tiers["aggregation"]["link_busy_s"] == pytest.approx(tor, rel=1e-9)
        assert r.tiers["spine"]["link_busy_s"] == pytest.approx(spine, rel=1e-9, abs=1e-12)
        assert r.step_time_s == pytest.approx(max(tor, spine), rel=1e-3)  # latency: a few us
        assert r.timeline[0].tier == ("aggregation" if n <= 4 else "spine")
    assert got[2] == pytest.approx(3.125e9, rel=1e-3) and got[4] == pytest.approx(3.125e9, rel=1e-3)
    if algorithm == "ring":
        assert got[16] == pytest.approx(3.125e9, rel=2e-3)
    else:
        assert got[4] > got[8] > got[16] and got[16] == pytest.approx(1.953e9, rel=1e-3)


_STEP = (Compute("c", duration_s=1e-3), Collective("ag", "all_gather", 2**24, parse_group("x,y"), deps=("c",)),
         Collective("dp1", "all_reduce", 2**26, parse_group("dcn"), "direct", deps=("c",)),
         Collective("dp2", "all_reduce", 2**24, parse_group("dcn"), "ring", deps=("c",)))


@pytest.mark.parametrize("gen,shape,slices,dcn,engineer", [
    ("tpu-v4", "4x4x4", 8, DcnSpec(tiers=SPEC), False),
    ("tpu-v4", "4x4x4", 8, DcnSpec(tiers=SPEC, ecmp="hash"), False),
    ("tpu-v4", "4x4x4", 8, DcnSpec(tiers=SPEC, sites=2, wan_latency_s=1e-3), False),
    ("tpu-v4", "4x4x4", 8, DcnSpec(kind="ocs", tiers=SPEC), True),
    ("tpu-v5e", "16x16", 5, DcnSpec(tiers="fat-tree-k40-4.7to1"), False),  # 32-host slices on 33-host ToRs: not aligned
    pytest.param("tpu-v5e", "16x16", 5, DcnSpec(tiers="fat-tree-k40-4.7to1", ecmp="hash"), False, marks=pytest.mark.slow),
])
def test_folded_tiered_step_equals_the_full_one(gen, shape, slices, dcn, engineer):
    """The DCN fold on tiers (classes by colour refinement, the equitable check): folded and
    full give the same step, per-tier figures and every link's bytes, slices straddling ToRs
    included."""
    ops = _STEP if gen == "tpu-v5e" else (_STEP[0], Collective("ag", "all_gather", 2**24, parse_group("x,y,z"), deps=("c",)), *_STEP[2:])
    job = build_job(StepTrace(ops, meta={"slices": slices}), gen, shape, slices, dcn=dcn, engineer_dcn=engineer)
    fast, full = (simulate_step(None, job, fast_path=fp) for fp in (True, False))
    assert fast.flows_simulated < full.flows_simulated / 10
    assert fast.step_time_s == pytest.approx(full.step_time_s, rel=1e-9)
    assert np.allclose(fast.link_bytes, full.link_bytes, rtol=1e-9)
    assert fast.tiers.keys() == full.tiers.keys()
    for t in fast.tiers:
        for k in ("busy_s", "exposed_s", "link_busy_s"):
            assert fast.tiers[t][k] == pytest.approx(full.tiers[t][k], rel=1e-9, abs=1e-15)


def test_tier_accounting_in_the_step_summary():
    """Per tier: the ops that climb to it (busy and exposed, as the levels count them) and what
    its busiest link needs; the summary flattens them (tier_<name>_<figure>)."""
    tr = StepTrace((Compute("c", duration_s=0.01), Collective("ar", "all_reduce", 2**26, parse_group("dcn"), "ring")),
                   meta={"slices": 8})
    r = simulate_step(None, build_job(tr, "tpu-v4", "4x4x4", 8, dcn=DcnSpec(tiers=SPEC)))
    ar = next(t for t in r.timeline if t.id == "ar")
    assert ar.tier == "spine" and r.tiers["spine"]["busy_s"] == pytest.approx(ar.duration_s)
    assert r.tiers["spine"]["exposed_s"] == pytest.approx(ar.duration_s - 0.01, rel=1e-9)
    assert r.tiers["aggregation"]["busy_s"] == 0.0 and r.tiers["tor"]["link_busy_s"] > 0
    s = step_summary(r, tr)
    assert s["tier_spine_exposed_s"] == r.tiers["spine"]["exposed_s"] and s["tiers"] is r.tiers
    assert s["dcn_exposed_s"] == pytest.approx(r.tiers["spine"]["exposed_s"])


def test_the_step_ends_when_the_slowest_slice_ends():
    """32-host v5e slices on 33-host ToRs (fat-tree-k40-4.7to1): the ToRs carry different loads
    of a ring all-reduce over the slices, so the slices' chips finish their share at different
    times; the collective, and the step, end when the slowest does: at the busiest ToR uplink's
    bytes / capacity (plus a few us of latency), not at the least loaded ToR's."""
    for n in (3, 5):
        tr = StepTrace((Collective("ar", "all_reduce", 2**26, parse_group("dcn"), "ring"),), meta={"slices": n})
        job = build_job(tr, "tpu-v5e", "16x16", n, dcn=DcnSpec(tiers="fat-tree-k40-4.7to1"))
        r = simulate_step(None, job)
        up = job.fabric.tor_up
        load = r.link_bytes[up] / job.fabric.link_capacity_bytes_per_s[up]
        assert load.max() > load.min() * 1.05
        assert r.step_time_s == pytest.approx(load.max(), rel=2e-4) and r.tiers["aggregation"]["link_busy_s"] == load.max()


def test_tiers_from_a_yaml_file_and_the_cli(tmp_path, capsys):
    """A DCN file: the three tiers as mappings (oversubscription as down:up ports) give what the
    inline spec gives; `podsim topology --pods --dcn-tiers FILE` prints its ToRs and blocks."""
    from podsim.cli import main

    f = tmp_path / "dcn.yaml"
    f.write_text("tor: {radix: 24, gbps: 200, oversubscription: '16:8'}\naggregation: {radix: 48, gbps: 200, oversubscription: 2}\n"
                 "spine: {radix: 512, gbps: 200, count: 4}\n")
    from_file, from_spec = parse_tiers(str(f)), parse_tiers(SPEC)
    assert from_file.model_dump(exclude={"name"}) == from_spec.model_dump(exclude={"name"})
    try:
        main(["topology", "tpu-v4", "--pods", "1", "--dcn-tiers", str(f), "--json"])
    except SystemExit as exc:
        assert not exc.code
    import json

    d = json.loads(capsys.readouterr().out)["dcn"]
    assert (d["tors"], d["hosts_per_tor"], d["leaves"], d["hosts_per_leaf"]) == (64, 16, 16, 64)
    assert d["tor_oversubscription"] == pytest.approx(2.0)


def test_an_ocs_dcn_keeps_its_engineered_circuits_on_tiers():
    """Blocks joined by OCS (jup.5): under a uniform mesh each of the pod's 16 blocks spreads its
    uplinks over the 15 others, so the job's two blocks share 1/15 of them; engineered for the
    job (jup.7) the two blocks' whole uplinks are one circuit between them. Same tiers below."""
    tr = _ar_step(8, "ring")
    uniform, engineered = (simulate_step(None, build_job(tr, "tpu-v4", "4x4x4", 8, dcn=DcnSpec(kind="ocs", tiers=SPEC),
                                                         engineer_dcn=e)) for e in (False, True))
    assert uniform.tiers["ocs"]["link_busy_s"] == pytest.approx(15 * engineered.tiers["ocs"]["link_busy_s"], rel=1e-9)
    assert engineered.step_time_s < uniform.step_time_s / 4
    assert engineered.tiers["aggregation"]["link_busy_s"] == uniform.tiers["aggregation"]["link_busy_s"]  # the ToR uplinks


@pytest.mark.parametrize("over", [{"a": 1}, [3], None])
def test_an_oversubscription_that_is_not_a_number_is_one_line(over):
    """A YAML tiers file with a mapping, a list or null as an oversubscription (the fuzz tier, seed
    38, found a mapping raising TypeError inside the validator: a traceback, not a refusal)."""
    tiers = {"tor": {"radix": 24, "gbps": 200, "oversubscription": over}, "aggregation": {"radix": 48, "gbps": 200},
             "spine": {"radix": 512, "gbps": 200, "count": 4}}
    with pytest.raises(PodsimError, match="oversubscription") as err:
        parse_tiers(tiers)
    assert "\n" not in str(err.value)
