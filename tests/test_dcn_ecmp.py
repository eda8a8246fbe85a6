"""How an EPS DCN spreads cross-leaf flows over its spines (`DcnSpec.ecmp`): `split` (the
default) puts 1/S of every flow on each spine, `hash` one spine per NIC pair. The split keeps
identical slices identical, so the DCN fold stays a few classes however many slices a job has
(issue 13: 32 slices of 4x4x4 took 343 s under the hash, where the fold only merged the 4
chips of a host and each of the 16 N (N - 1) NIC-pair classes finished at its own time)."""

from __future__ import annotations

import numpy as np
import pytest

from podsim.engine import build_job, simulate_step
from podsim.errors import PodsimError
from podsim.study import StepStudy
from podsim.study.scaling import scaling_study
from podsim.topology import DcnSpec
from podsim.topology.dcn import dcn_choice
from podsim.topology.fabric import LinkKind
from podsim.topology.routing import dcn_routes, dcn_split_routes
from podsim.trace import StepTrace
from podsim.trace.model import Collective, Compute, parse_group


def _dcn_only(slices: int) -> StepTrace:
    ops = (Compute("c", duration_s=1e-3),
           Collective("dp", "all_reduce", 2**24, parse_group("dcn"), "direct", deps=("c",)))
    return StepTrace(ops, name="dcn", meta={"slices": slices})


def test_split_routes_spread_each_flow_evenly_over_the_spines():
    """A flow between leaves puts 1/S of its bytes on each of its leaf's S uplinks and each of
    the S downlinks into the other leaf, and all of them on its NIC and PCIe links; the hashed
    route crosses the same links with one spine of the S."""
    job = build_job(_dcn_only(2), "tpu-v4", "4x4x4", 2, dcn=DcnSpec(ecmp="split"))
    fab = job.fabric
    src, dst = job.views[0].chips, job.views[1].chips
    indptr, links, frac = dcn_split_routes(fab, src, dst)
    n_spines = fab.leaf_spine.shape[1]
    assert n_spines == 8 and len(indptr) == len(src) + 1
    kind = fab.link_kind[links]
    for f in range(len(src)):
        sl = slice(indptr[f], indptr[f + 1])
        spine = kind[sl] == LinkKind.DCN
        assert spine.sum() == 2 * n_spines and np.allclose(frac[sl][spine], 1 / n_spines)
        assert np.allclose(frac[sl][~spine], 1.0) and len(np.unique(links[sl])) == indptr[f + 1] - indptr[f]
    hashed = dcn_routes(fab, src, dst)
    assert set(hashed.links.tolist()) <= set(links.tolist())
    # every uplink of the first slice's leaf carries the same bytes: 64 flows x 1/8 each
    load = np.bincount(links, weights=frac, minlength=fab.n_links)
    up = fab.leaf_spine[fab.leaf_of_nic[fab.nic_of_chip[src] - fab.first_nic][0]]
    assert np.allclose(load[up], len(src) / n_spines)


@pytest.mark.parametrize("slices", [8, 32])
def test_split_fold_stays_small_for_any_slice_count(slices):
    """The DCN all-reduce's flows fold into the same handful of classes on 8 and on 32 slices
    (under the hash they were 16 N (N - 1) NIC-pair classes: 15,872 on 32 slices)."""
    r = simulate_step(None, build_job(_dcn_only(slices), "tpu-v4", "4x4x4", slices, dcn=DcnSpec(ecmp="split")))
    assert r.fast_path and r.flows == 2 * 64 * slices * (slices - 1)  # all pairs, reduce-scatter then all-gather
    assert r.flows_simulated <= 8


def test_split_fold_equals_full_on_two_sites():
    """Split over spines and WAN links, 4 slices on two sites: the folded step is the full one."""
    tr = _dcn_only(4)
    dcn = DcnSpec(ecmp="split", sites=2, wan_latency_s=1e-3)
    fast, full = (simulate_step(None, build_job(tr, "tpu-v4", "4x4x4", 4, dcn=dcn), fast_path=fp) for fp in (True, False))
    assert fast.flows_simulated < full.flows_simulated / 100
    assert fast.step_time_s == pytest.approx(full.step_time_s, rel=1e-9)
    assert fast.levels["wan"]["busy_s"] == pytest.approx(full.levels["wan"]["busy_s"], rel=1e-9)
    assert np.allclose(fast.link_bytes, full.link_bytes, rtol=1e-9)


def test_split_weak_scaling_follows_the_all_reduce_closed_form():
    """Under the split the DCN busy time of the weak-scaling study grows as the all-reduce's
    2 (N - 1) / N bytes per chip (each chip's share of its NIC is the bottleneck), and the step
    never shrinks as slices are added; under the hash 8 slices beat 4 (fewer flows per uplink,
    more collisions at 2 and 4 slices)."""
    base = StepStudy("tpu-v4", "4x4x4", model="llama2-70b", plan="fsdp=16,tensor=4", model_overrides={"n_layers": 2})
    s = scaling_study(base.replace(dcn=DcnSpec(ecmp="split")), [1, 2, 4, 8], 16)
    busy = s["dcn_busy_s"]
    for i, n in enumerate(s["slices"][1:], start=1):
        assert busy[i] / busy[1] == pytest.approx(2 * (n - 1) / n, rel=0.02)
    assert all(b >= a * (1 - 1e-9) for a, b in zip(s["step_time_s"], s["step_time_s"][1:], strict=False))
    h = scaling_study(base.replace(dcn=DcnSpec(ecmp="hash")), [4, 8], 16)
    assert h["dcn_busy_s"][0] > busy[2] * 1.2 and h["dcn_busy_s"][1] < h["dcn_busy_s"][0]


def test_ecmp_option_is_checked():
    assert dcn_choice("eps", 1.0, ecmp="hash")[0].ecmp == "hash"
    with pytest.raises(PodsimError, match="--ecmp 'spray' is not known"):
        dcn_choice("eps", 1.0, ecmp="spray")
    with pytest.raises(PodsimError, match="applies to an EPS spine"):
        dcn_choice("ocs", 1.0, ecmp="hash")


def test_gpu_slices_split_their_node_to_node_traffic_too():
    """A GPU slice's own traffic crosses the DCN between nodes: under `split` a flow between
    nodes under different leaves spreads over the spines, a flow inside a node stays on its
    NVSwitch (two links, all its bytes), and the ring all-reduce's time is the closed form's
    on both models (the ring's one flow per node pair hashes without collisions here)."""
    from podsim.engine import simulate_collective
    from podsim.topology import build_slice
    from podsim.topology.routing import ecmp_routes

    times = {}
    for ecmp in ("split", "hash"):
        b = build_slice("gpu-h100", "256", dcn=DcnSpec(ecmp=ecmp))  # 32 nodes, 2 leaves of 16
        fab, chips = b.fabric, b.view.chips
        ip, lk, fr = ecmp_routes(fab, chips[[0, 0]], chips[[1, 255]], switched=True)
        assert np.diff(ip)[0] == 2 and fab.link_kind[lk[:2]].tolist() == [LinkKind.NVLINK] * 2
        spine = fab.link_kind[lk[ip[1]:]] == LinkKind.DCN
        if ecmp == "split":
            assert fr is not None and spine.sum() == 2 * fab.leaf_spine.shape[1]
            assert np.allclose(fr[ip[1]:][spine], 1 / fab.leaf_spine.shape[1])
        else:
            assert fr is None and spine.sum() == 2
        r = simulate_collective(b, "all_reduce", 2**26, group="all", algorithm="ring")
        times[ecmp] = r.simulated_s
        assert r.simulated_s == pytest.approx(r.closed_form_s, rel=0.02)
    assert times["split"] <= times["hash"] * (1 + 1e-9)
