"""Fleets: pods behind one DCN, sites joined by WAN links, hierarchical all-reduce across
slices (issue 13 items 1 and 2)."""

from __future__ import annotations

import json

import pytest

from podsim.collectives.closed_form import torus_all_reduce_s
from podsim.engine import build_job, simulate_step
from podsim.engine.jobs import place_slices
from podsim.errors import PodsimError
from podsim.topology import DcnSpec, get_generation
from podsim.topology.fabric import LinkKind
from podsim.topology.summary import fleet_summary
from podsim.trace import StepTrace
from podsim.trace.model import Collective, parse_group
from tests.helpers import run_podsim

V4 = get_generation("tpu-v4")
CHIP_DCN = V4.dcn_bandwidth_per_host.si / V4.chips_per_host.value  # 6.25 GB/s: 4 chips on a 25 GB/s NIC
DCN_HOP_S = 4 * 0.5e-6  # NIC-leaf, leaf-spine, spine-leaf, leaf-NIC (eps.11)
CHIPS = 64  # one 4x4x4 slice


def ring_step_s(p: int, n: float, wan_bytes_per_s: float | None = None) -> float:
    """One step of a bidirectional ring across p slices (each chip n/(2p) each way): the
    slower of the chip's NIC share and, across sites, the WAN carrying every chip's flows."""
    t = 2 * n / (2 * p) / CHIP_DCN
    if wan_bytes_per_s is not None:
        t = max(t, CHIPS * 2 * n / (2 * p) / wan_bytes_per_s)
    return t


def dcn_ring(slices: int, n: float, dcn: DcnSpec) -> float:
    tr = StepTrace((Collective("ar", "all_reduce", n, parse_group("dcn"), "bidir_ring"),), meta={"slices": slices})
    r = simulate_step(None, build_job(tr, "tpu-v4", "4x4x4", slices, dcn=dcn))
    assert r.timeline[0].duration_s == pytest.approx(r.timeline[0].closed_form_s, rel=0.01)
    return r.step_time_s


@pytest.mark.parametrize("slices", [2, 4, 8])
def test_hierarchical_all_reduce_matches_its_closed_form(slices):
    """ICI reduce-scatter on all links of each 4x4x4 torus, a bidirectional ring across the
    slices on n/64 per chip, ICI all-gather: the textbook forms added, within 1%."""
    n = 2**28
    tr = StepTrace((Collective("ar", "all_reduce", n, parse_group("x,y,z,dcn"), "hierarchical"),), meta={"slices": slices})
    r = simulate_step(None, build_job(tr, "tpu-v4", "4x4x4", slices, dcn=DcnSpec(spines=1)))
    ici = torus_all_reduce_s((4, 4, 4), n, V4.hop_latency_s, 1 / V4.link_bytes_per_s, streams=6)
    dcn = 2 * (slices - 1) * (DCN_HOP_S + ring_step_s(slices, n / CHIPS))
    assert r.step_time_s == pytest.approx(ici + dcn, rel=0.01)


def test_wan_hop_adds_its_latency_and_bandwidth_term():
    n = 2**26
    one_site = dcn_ring(2, n, DcnSpec(spines=1))
    assert one_site == pytest.approx(2 * (DCN_HOP_S + ring_step_s(2, n)), rel=1e-6)
    for ms in (1.0, 10.0):  # two sites, the WAN wide enough: each of the 2 steps pays one WAN hop
        t = dcn_ring(2, n, DcnSpec(spines=1, sites=2, wan_latency_s=ms * 1e-3))
        assert t - one_site == pytest.approx(2 * ms * 1e-3, rel=1e-6)
    narrow = 50e9  # 50 GB/s (400 Gb/s) per site pair: all 64 chips' flows share it, 8x slower than the NICs
    t = dcn_ring(2, n, DcnSpec(spines=1, sites=2, wan_latency_s=1e-3, wan_gbps=400))
    assert t == pytest.approx(2 * (DCN_HOP_S + 1e-3 + ring_step_s(2, n, narrow)), rel=1e-6)
    assert ring_step_s(2, n, narrow) == pytest.approx(8 * ring_step_s(2, n))


def test_slices_split_evenly_over_sites():
    fab, slices = place_slices("tpu-v4", "8x8x8", 4, DcnSpec(sites=2))
    assert fab.layout.pods == 2 and [s.pod for s in slices] == [0, 0, 1, 1]
    assert fab.meta["n_sites"] == 2 and set(fab.site_of_leaf.tolist()) == {0, 1}
    with pytest.raises(PodsimError, match="cannot span 2 sites"):
        place_slices("tpu-v4", "8x8x8", 1, DcnSpec(sites=2))
    with pytest.raises(PodsimError, match=r"1 slice\(s\) cannot span 2 sites"):
        build_job(StepTrace((Collective("ar", "all_reduce", 1e6, parse_group("x")),)), "tpu-v4", "4x4x4", 1,
                  dcn=DcnSpec(sites=2))
    with pytest.raises(PodsimError, match="several sites are modelled on an EPS DCN"):
        place_slices("tpu-v4", "8x8x8", 2, DcnSpec(kind="ocs", sites=2))


def test_fleet_summary_counts():
    f = fleet_summary("tpu-v4", 4, DcnSpec(sites=2, oversubscription=2.0))
    assert (f["chips"], f["sites"], f["pods_per_site"], f["chips_per_site"]) == (16384, 2, 2, 8192)
    assert f["dcn"]["nic_bytes_per_s_per_site"] == 2048 * 25e9
    assert f["dcn"]["leaf_uplink_bytes_per_s_per_site"] == pytest.approx(2048 * 25e9 / 2)
    assert f["wan"]["site_pairs"] == 1 and f["wan"]["links"] == 8 * 2  # one per spine, each way


def test_cli_topology_fleet(capsys):
    code, out, err = run_podsim(capsys, "topology", "tpu-v4", "--pods", "4", "--sites", "2", "--json")
    assert code == 0, err
    assert json.loads(out)["wan"]["bytes_per_s_per_pair"] == 1.6e12
    code, out, _ = run_podsim(capsys, "topology", "tpu-v5e", "--pods", "2", "--sites", "2", "--wan-latency-ms", "10")
    assert code == 0 and "10 ms one way" in out
    code, _, err = run_podsim(capsys, "topology", "tpu-v4", "--pods", "3", "--sites", "2")
    assert code == 2 and "dcn.sites 2 does not divide the 3 pod(s)" in err
    code, _, err = run_podsim(capsys, "topology", "tpu-v4", "--sites", "2")
    assert code == 2 and "--sites does not apply without --pods" in err


def test_three_level_all_reduce_across_sites():
    """4 slices on 2 sites, all-reduce over x,y,z,dcn: auto picks the hierarchy ICI -> DCN ->
    WAN (reduce-scatter in each slice, then across the slices of a site, all-reduce of that
    shard across sites, all-gather back), so only 1/128 of the buffer per chip crosses the WAN,
    about half of what a flat ring across the four slices sends. Each level at its closed form."""
    n, wan, lat = 2**28, 400e9, 10e-3
    dcn = DcnSpec(spines=1, sites=2, wan_latency_s=lat, wan_gbps=wan * 8 / 1e9)
    wan_bytes, t = {}, {}
    for alg in ("auto", "bidir_ring"):
        tr = StepTrace((Collective("ar", "all_reduce", n, parse_group("x,y,z,dcn"), alg),), meta={"slices": 4})
        job = build_job(tr, "tpu-v4", "4x4x4", 4, dcn=dcn)
        r = simulate_step(None, job)
        op = r.timeline[0]
        assert op.level == "wan" and r.levels["wan"]["busy_s"] == pytest.approx(op.duration_s)
        wan_bytes[op.algorithm] = r.link_bytes[job.fabric.link_kind == LinkKind.WAN].sum()
        t[op.algorithm] = op.duration_s
    # flat ring over 256 chips: crosses the WAN twice each way, 2(p-1) steps of n/(2p): 4n(p-1)/p
    assert wan_bytes["bidir_ring"] == pytest.approx(4 * n * 255 / 256)
    assert wan_bytes["hierarchical"] == pytest.approx(2 * n)  # 256 chips x n/128, both ways summed
    m = n / CHIPS  # per chip after the ICI reduce-scatter
    ici = torus_all_reduce_s((4, 4, 4), n, V4.hop_latency_s, 1 / V4.link_bytes_per_s, streams=6)
    in_site = 2 * (DCN_HOP_S + m / 2 / CHIP_DCN)  # reduce-scatter + all-gather, 2 slices, 1 step each
    m2 = m / 2  # the shard that crosses sites: 128 chips per site, each m2/2 per step over the WAN
    across = 2 * (DCN_HOP_S + lat + max(m2 / 2 / CHIP_DCN, 2 * CHIPS * m2 / 2 / wan))
    assert t["hierarchical"] == pytest.approx(ici + in_site + across, rel=0.01)


@pytest.mark.parametrize("text,needle", [
    ("{generation: tpu-v4}\ndcn: {sites: 2}\nworkload: {synthetic: {jobs: 3, rate: 1/h}}\nhorizon: 1d", "2 sites must divide topology.pods 1"),
    ("{generation: tpu-v4, pods: 2}\ndcn: {sites: 2, kind: ocs}\nworkload: {synthetic: {jobs: 3, rate: 1/h}}\nhorizon: 1d\nstep_time: {model: engine}",
     "several sites runs on an EPS DCN"),
    ("{generation: tpu-v4}\nworkload: {synthetic: {jobs: 3, rate: 1/h}}\nhorizon: 1d\nstep_time: {model: engine, parallelism: {bert-large: 'fsdp=auto,dcn=2'}}",
     "names dcn; leave it out"),
    ("{generation: tpu-v4}\ndcn: {sites: 2, kind: ocs}\nworkload: {step: {model: resnet50, slice: 4x4x4, slices: 2, parallelism: 'data=64,dcn=2'}}", "modelled on an EPS DCN"),
    ("{generation: tpu-v4}\ndcn: {sites: 2}\nworkload: {step: {model: resnet50, slice: 4x4x4, slices: 3, parallelism: 'data=64,dcn=3'}}", "split evenly"),
])
def test_scenario_site_errors(text, needle):
    from podsim.scenario import load_scenario_text
    with pytest.raises(PodsimError) as e:
        load_scenario_text("name: x\ntopology: " + text, source="s.yaml")
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_scenario_step_study_over_two_sites():
    """A multislice step study across two sites: the gradient all-reduce reaches the WAN."""
    from podsim.scenario import load_scenario_text, run_scenario
    s = load_scenario_text("name: x\ntopology: {generation: tpu-v4}\ndcn: {sites: 2, wan_latency_s: 10ms, spines: 1}\n"
                           "workload: {step: {model: llama2-70b, slice: 4x4x4, slices: 2, parallelism: 'fsdp=64,dcn=2',"
                           " model_overrides: {global_batch: 128, n_layers: 1}}}", source="s.yaml")
    m = run_scenario(s).metrics
    assert m["sites"] == 2 and m["pods"] == 2 and m["wan_busy_s"] > 0.01 and m["dcn_busy_s"] == 0.0
