"""Multislice jobs in trace mode: N slices on one DCN, the DCN all-reduce priced, and groups
that do not exist on the fabric refused (issue 11 item 3)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from podsim.engine import build_job, simulate_collective, simulate_step, step_summary
from podsim.engine.jobs import declared_slices
from podsim.errors import PodsimError
from podsim.topology import DcnSpec, build_slice, get_generation
from podsim.trace import StepTrace, generate_trace, save_trace
from podsim.trace.model import Collective, Compute, parse_group
from tests.helpers import run_podsim

GRAD_BYTES = 2**27  # one chip's gradient buffer (nccl-tests convention)
MS = 1e-3
# DCN figures of tpu-v4 (hardware.md): 25 GB/s per host over 1 NIC shared by 4 chips; every
# switch traversal 0.5 us (eps.11): NIC-leaf, leaf-spine, spine-leaf, leaf-NIC; PCIe adds none.
V4 = get_generation("tpu-v4")
CHIP_DCN_BYTES_PER_S = V4.dcn_bandwidth_per_host.si / V4.chips_per_host.value
DCN_HOP_S = 4 * 0.5e-6
ONE_SPINE = DcnSpec(spines=1)  # no ECMP: every leaf's whole uplink on one spine link


def bidir_ring_all_reduce_s(p: int, n: float, chip_bytes_per_s: float, alpha_s: float) -> float:
    """col.11/col.21: a ring in each direction on n/2; both directions leave the chip through
    its host's NIC, so each of the 2(p-1) steps moves 2 x n/(2p) at the chip's NIC share."""
    return 2 * (p - 1) * (alpha_s + n / p / chip_bytes_per_s)


def step_trace(slices: int, overlapped: bool, ar_bytes: float = GRAD_BYTES) -> StepTrace:
    """Forward, backward of layer 2, backward of layer 1: layer 2's gradient all-reduce across
    slices runs under layer 1's backward (overlapped) or before it (serial)."""
    ops = (
        Compute("fwd", duration_s=10 * MS),
        Compute("bwd2", duration_s=10 * MS, deps=("fwd",)),
        Collective("ar", "all_reduce", ar_bytes, parse_group("dcn"), "bidir_ring", deps=("bwd2",)),
        Compute("bwd1", duration_s=5 * MS, deps=("bwd2", "ar") if not overlapped else ("bwd2",)),
    )
    return StepTrace(ops, name=f"two layers dcn={slices}", meta={"slices": slices})


def run(slices: int, overlapped: bool, dcn: DcnSpec = ONE_SPINE) -> dict:
    tr = step_trace(slices, overlapped)
    return step_summary(simulate_step(None, build_job(tr, "tpu-v4", "4x4x4", slices, dcn=dcn)), tr)


def test_dcn_all_reduce_alone_matches_its_closed_form():
    """32 slices of 4x4x4 (2048 chips, one leaf each): the gradient all-reduce across slices
    takes the bidirectional-ring time at each chip's share of its host NIC, within 1%."""
    s = run(32, overlapped=True)
    expected = bidir_ring_all_reduce_s(32, GRAD_BYTES, CHIP_DCN_BYTES_PER_S, DCN_HOP_S)
    assert s["slices"] == 32
    assert s["dcn_busy_s"] == pytest.approx(expected, rel=0.01)
    assert s["collectives"]["all_reduce"]["busy_s"] == pytest.approx(expected, rel=0.01)


def test_dcn32_step_is_slower_than_dcn1_by_the_exposed_dcn_all_reduce():
    one, many = run(1, overlapped=True), run(32, overlapped=True)
    assert one["dcn_busy_s"] == 0.0 and one["step_time_s"] == pytest.approx(25 * MS)
    exposed = many["dcn_exposed_s"]
    assert 0 < exposed < many["dcn_busy_s"]  # partly hidden under bwd1 (5 ms)
    assert exposed == pytest.approx(many["dcn_busy_s"] - 5 * MS, rel=1e-9)
    assert many["step_time_s"] - one["step_time_s"] == pytest.approx(exposed, rel=1e-9)


def test_serial_dcn_all_reduce_adds_its_busy_time():
    one, serial = run(1, overlapped=False), run(32, overlapped=False)
    assert serial["dcn_exposed_s"] == pytest.approx(serial["dcn_busy_s"], rel=1e-9)
    assert serial["step_time_s"] - one["step_time_s"] == pytest.approx(serial["dcn_busy_s"], rel=1e-9)


def test_spine_oversubscription_slows_the_dcn_all_reduce_by_its_ratio():
    """4:1 oversubscribed spine: each leaf's uplink carries a quarter of its NICs' bandwidth,
    and every ring step crosses it, so the bandwidth term grows 4x."""
    n = 2**26
    tr = StepTrace((Collective("ar", "all_reduce", n, parse_group("dcn"), "bidir_ring"),), meta={"slices": 8})
    t = {o: simulate_step(None, build_job(tr, "tpu-v4", "4x4x4", 8, dcn=DcnSpec(spines=1, oversubscription=o))).step_time_s
         for o in (1.0, 4.0)}
    assert t[1.0] == pytest.approx(bidir_ring_all_reduce_s(8, n, CHIP_DCN_BYTES_PER_S, DCN_HOP_S), rel=0.01)
    assert t[4.0] == pytest.approx(bidir_ring_all_reduce_s(8, n, CHIP_DCN_BYTES_PER_S / 4, DCN_HOP_S), rel=0.01)


def test_slices_spread_over_pods_behind_one_dcn():
    """Slices that do not fit one pod go to the next pods, all under one Clos."""
    tr = StepTrace((Collective("ar", "all_reduce", 2**24, parse_group("dcn"), "bidir_ring"),), meta={"slices": 3})
    job = build_job(tr, "tpu-v5e", "16x16", 3, dcn=ONE_SPINE)
    assert job.fabric.layout.pods == 3 and [s.pod for s in job.slices] == [0, 1, 2]
    v5e = get_generation("tpu-v5e")  # 8 chips per host over 2 NICs: 4 chips per NIC
    chip_bw = v5e.dcn_bandwidth_per_host.si / v5e.chips_per_host.value
    r = simulate_step(None, job)
    assert r.step_time_s == pytest.approx(bidir_ring_all_reduce_s(3, 2**24, chip_bw, DCN_HOP_S), rel=0.01)


def test_generated_trace_declares_its_slices():
    t = generate_trace("resnet50", "4x4x4", "data=64,dcn=4", overrides={"global_batch": 4096})
    assert declared_slices(t) == 4
    assert declared_slices(StepTrace((Compute("c", duration_s=1.0),))) is None
    with pytest.raises(PodsimError, match="meta.slices 0 is not a whole number"):
        declared_slices(StepTrace((Compute("c", duration_s=1.0),), meta={"slices": 0}))


def test_groups_that_do_not_exist_on_the_fabric_are_errors():
    tr4 = generate_trace("resnet50", "4x4x4", "data=64,dcn=4", overrides={"global_batch": 4096})
    with pytest.raises(PodsimError, match=r"is for 4 slice\(s\) \(dcn=4\) but the job runs on 1"):
        simulate_step(tr4, build_slice("tpu-v4", "4x4x4"))
    bare = StepTrace((Collective("ar", "all_reduce", 1e6, parse_group("dcn")),))
    with pytest.raises(PodsimError, match="group dcn spans the slices of a multislice job"):
        simulate_step(bare, build_slice("tpu-v4", "4x4x4"))
    with pytest.raises(PodsimError, match="group dcn spans the slices"):
        simulate_collective(build_slice("tpu-v4", "4x4x4"), "all_reduce", "1MiB", group="dcn")
    flat = StepTrace((Collective("ar", "all_reduce", 1e6, parse_group("x,z")),))
    with pytest.raises(PodsimError, match="group axis 'z' does not exist on a 2-D slice"):
        simulate_step(flat, build_slice("tpu-v5e", "8x8"))
    # `all` on a 2-D slice is every axis it has, not x,y,z
    assert simulate_collective(build_slice("tpu-v5e", "8x8"), "all_reduce", "1MiB").group == "x,y"


def podsim(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "podsim", *args], capture_output=True, text=True, timeout=120)


def test_cli_steptime_trace_runs_the_traces_slices(tmp_path, capsys):
    f = tmp_path / "t.json"
    save_trace(step_trace(8, overlapped=False), f)
    r = podsim("steptime", "--trace", str(f), "--generation", "tpu-v4", "--slice", "4x4x4", "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)["metrics"]
    assert s["slices"] == 8 and s["dcn"] == "eps" and s["dcn_busy_s"] > 0
    # the engine's step (the serial all-reduce after the compute), plus what the study adds for 8 slices
    assert s["step_time_s"] == pytest.approx(25 * MS + s["dcn_busy_s"] + s["multislice_added_s"], rel=1e-9)
    assert s["multislice_added_s"] == pytest.approx(s["straggler_wait_s"] + s["ecmp_collision_s"], rel=1e-12)
    assert s["straggler_wait_s"] > 0 and s["ecmp_collision_s"] > 0  # 16 hosts' flows hashed over 8 spines collide
    code, out, err = run_podsim(capsys, "steptime", "--trace", str(f), "--generation", "tpu-v4", "--slice", "4x4x4", "--json",
                                "--multislice", "straggler=false", "--multislice", "ecmp_collisions=false")
    assert code == 0, err
    off = json.loads(out)["metrics"]
    assert off["step_time_s"] == pytest.approx(25 * MS + off["dcn_busy_s"], rel=1e-9) and off["multislice_added_s"] == 0
    code, out, err = run_podsim(capsys, "steptime", "--trace", str(f), "--generation", "tpu-v4", "--slice", "4x4x4", "--slices", "8", "--dcn", "ocs-job")
    assert code == 0, err
    assert "DCN (across 8 slices)" in out and "8 x 4x4x4" in out


@pytest.mark.parametrize("extra,needle", [
    (("--slices", "2"), "--slices 2 conflicts with the trace, made for 8 slice(s)"),
    (("--dcn", "infiniband"), "--dcn 'infiniband' is not known"),
    (("--dcn", "ocs", "--oversubscription", "2"), "--oversubscription applies to an EPS spine"),
])
def test_cli_multislice_errors(tmp_path, capsys, extra, needle):
    f = tmp_path / "t.json"
    save_trace(step_trace(8, overlapped=True), f)
    code, _, err = run_podsim(capsys, "steptime", "--trace", str(f), "--generation", "tpu-v4", "--slice", "4x4x4", *extra)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and needle in lines[0]


def test_cli_dcn_trace_without_a_slice_count(tmp_path, capsys):
    """A trace that names dcn but not how many slices: one slice would make its all-reduce
    free, so it is refused until --slices says how many."""
    f = tmp_path / "bare.json"
    save_trace(StepTrace((Collective("ar", "all_reduce", 2**20, parse_group("dcn")),)), f)
    code, _, err = run_podsim(capsys, "steptime", "--trace", str(f), "--generation", "tpu-v4", "--slice", "4x4x4")
    assert code == 2 and "--slices N" in err and len(err.strip().splitlines()) == 1
    code, out, err = run_podsim(capsys, "steptime", "--trace", str(f), "--generation", "tpu-v4", "--slice", "4x4x4", "--slices", "4", "--json")
    assert code == 0, err
    assert json.loads(out)["metrics"]["dcn_busy_s"] > 0


def test_job_levels_split_ici_and_dcn():
    """A hierarchical all-reduce over x,y,z,dcn counts at the dcn level; an x all-gather at ici."""
    tr = StepTrace((Collective("ag", "all_gather", 2**24, parse_group("x")),
                    Collective("ar", "all_reduce", 2**24, parse_group("x,y,z,dcn"), deps=("ag",))), meta={"slices": 2})
    r = simulate_step(None, build_job(tr, "tpu-v4", "4x4x4", 2))
    levels = {t.id: t.level for t in r.timeline}
    assert levels == {"ag": "ici", "ar": "dcn"}
    ag, ar = (next(t for t in r.timeline if t.id == i) for i in ("ag", "ar"))
    assert r.levels["ici"]["busy_s"] == pytest.approx(ag.duration_s) and r.levels["dcn"]["busy_s"] == pytest.approx(ar.duration_s)
    assert np.isfinite(r.step_time_s)


@pytest.mark.parametrize("sites", [1, 2])
def test_slice_folding_matches_the_full_simulation(sites):
    """The fast path folds every slice's ICI flows onto the first slice (and inside it by
    translation); DCN and WAN flows stay whole. A generated FSDP + tensor-parallel step on 4
    slices gives the same step, levels and per-link bytes as simulating every flow."""
    tr = generate_trace("llama2-70b", "4x4x4", "fsdp=16,tensor=4,dcn=4", generation="tpu-v4",
                        overrides={"n_layers": 2, "global_batch": 64})
    dcn = DcnSpec(sites=sites, wan_latency_s=1e-3)
    fast, full = (simulate_step(None, build_job(tr, "tpu-v4", "4x4x4", 4, dcn=dcn), fast_path=fp) for fp in (True, False))
    assert fast.fast_path and not full.fast_path and fast.flows_simulated < full.flows_simulated / 4
    assert fast.step_time_s == pytest.approx(full.step_time_s, rel=1e-9)
    for level in ("ici", "dcn", "wan"):
        assert fast.levels[level]["busy_s"] == pytest.approx(full.levels[level]["busy_s"], rel=1e-9, abs=1e-15)
    assert np.allclose(fast.link_bytes, full.link_bytes, rtol=1e-9)
    assert (fast.levels["wan"]["busy_s"] > 0) == (sites == 2)
