"""A scenario's `scaling` section (issue 13 item 3): it validates field by field, runs the weak-scaling
study on the scenario's fabric, is stored with the run (the `scaling` table, `scaling_*` metrics),
and the HTML report shows its table and figure."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from podsim.errors import PodsimError
from podsim.metrics import METRICS
from podsim.report import render_report
from podsim.report.figures import scaling_figure
from podsim.scenario import load_scenario, load_scenario_text, run_scenario
from podsim.store import append_run, load_run
from podsim.study import StepStudy
from podsim.study.scaling import COLUMNS, scaling_study
from podsim.topology import DcnSpec

DATA = Path(__file__).parent / "data" / "scenarios"
TINY = DATA / "tiny_scaling.yaml"


@pytest.fixture(scope="module")
def run():
    return run_scenario(load_scenario(TINY))


def test_the_study_runs_one_row_per_slice_count(run):
    t = run.table("scaling")
    assert list(t) == [*COLUMNS, "step_time_error", "step_time_error_text"]  # the study's, then each row's error band
    assert t["step_time_error_text"][0].endswith("runs of this kind") and "multislice" in t["step_time_error_text"][1]
    assert list(t["slices"]) == [1, 2, 4] and list(t["chips"]) == [64, 128, 256] and list(t["global_batch"]) == [16, 32, 64]
    # weak scaling: every slice does the same work, so compute and ICI time are the same on every row,
    # and more slices can only add DCN time
    assert t["compute_s"] == pytest.approx([t["compute_s"][0]] * 3)
    assert t["ici_exposed_s"] == pytest.approx([t["ici_exposed_s"][0]] * 3)
    assert t["dcn_busy_s"][0] == 0 and all(t["dcn_busy_s"][1:] > 0)
    assert all(t["step_time_s"][1:] >= t["step_time_s"][0])
    critical_compute = t["step_time_s"] - t["exposed_comm_s"] - t["multislice_added_s"]
    assert critical_compute == pytest.approx([critical_compute[0]] * 3, rel=1e-9)
    # what the slices add: the straggler wait (and any ECMP collisions) beside the DCN tail, none on one slice
    assert t["multislice_added_s"] == pytest.approx(t["straggler_wait_s"] + t["ecmp_collision_s"], rel=1e-12)
    assert t["straggler_wait_s"][0] == 0 and all(t["straggler_wait_s"][1:] > 0)
    # no sites: the WAN carries nothing
    assert not t["wan_busy_s"].any()


def test_a_row_equals_the_step_study_of_the_same_job(run):
    """The scenario's workload is the 2-slice job with the study's model, batch and compute: the
    study's 2-slice row is that step, simulated again."""
    t = run.table("scaling")
    assert t["step_time_s"][1] == pytest.approx(run.metrics["step_time_s"], rel=1e-9)
    assert t["mfu"][1] == pytest.approx(run.metrics["mfu"], rel=1e-9)
    assert t["dcn_exposed_s"][1] == pytest.approx(run.metrics["dcn_exposed_s"], rel=1e-9)


def test_parallel_efficiency_is_step_1_over_step_n_from_the_store(run, tmp_path):
    """Stored and loaded back, the efficiency column and the headline metric are step(1) / step(N)
    of the stored step times; MFU falls by the same factor (the same FLOPs per chip)."""
    store = tmp_path / "r.duckdb"
    back = load_run(store, append_run(store, run))
    t = back.table("scaling")
    step = t["step_time_s"]
    assert list(step) == list(run.table("scaling")["step_time_s"])
    assert t["parallel_efficiency"] == pytest.approx(step[0] / step, rel=1e-12)
    assert t["mfu"] == pytest.approx(t["mfu"][0] * step[0] / step, rel=1e-9)
    m = back.metrics
    assert m["scaling_parallel_efficiency"] == pytest.approx(step[0] / step[-1], rel=1e-12)
    assert m["scaling_slices_max"] == 4 and m["scaling_mfu"] == pytest.approx(t["mfu"][-1])
    assert m["scaling_step_time_s"] == pytest.approx(step[-1]) and m["scaling_parallelism"] == "fsdp=16,tensor=4"
    assert all(k in METRICS and METRICS[k].kind == "both" for k in m if k.startswith("scaling_"))
    assert not [k for k in m if k not in METRICS]


def test_the_report_shows_the_section_and_the_figure(run):
    html = render_report(run)
    assert '<a href="#scaling">Scaling</a>' in html and '<section id="scaling">' in html
    section = html.split('<section id="scaling">', 1)[1].split("</section>", 1)[0]
    assert "<th>slices</th><th>chips</th><th>global batch</th><th>step time</th><th>MFU</th>" in section
    assert "WAN busy" not in section  # one site: no WAN columns
    assert "<th>parallel efficiency</th>" in section and "<td>100.0%</td>" in section
    eff = run.table("scaling")["parallel_efficiency"][-1]
    assert f"<td>{eff:.1%}</td>" in section
    assert 'data-name="Scaling tiny-scaling"' in section and "Plotly.newPlot" in section
    for trace in ("step time (s)", "DCN exposed (s)", "parallel efficiency", "MFU"):
        assert f'"name":"{trace}"' in section, trace
    assert "weak scaling at the most slices" in html
    no_study = run_scenario(load_scenario(DATA / "tiny_step.yaml"))
    assert '<section id="scaling">' not in render_report(no_study)


def test_the_figure_draws_the_stored_columns(run):
    t = run.table("scaling")
    fig = scaling_figure(t, "tiny")
    by_name = {tr.name: tr for tr in fig.data}
    assert list(by_name["step time (s)"].x) == ["1", "2", "4"]
    assert list(by_name["parallel efficiency"].y) == pytest.approx(list(t["parallel_efficiency"]))
    assert list(by_name["MFU"].y) == pytest.approx(list(t["mfu"]))
    assert "WAN exposed (s)" not in by_name


BASE = yaml.safe_load(TINY.read_text())


def _with(path: str, value) -> str:
    doc = yaml.safe_load(TINY.read_text())
    *parents, last = path.split(".")
    node = doc
    for p in parents:
        node = node[p]
    node[last] = value
    return yaml.safe_dump(doc, sort_keys=False)


@pytest.mark.parametrize(("path", "value", "field", "text"), [
    ("scaling.slices", [0, 1, 2], "scaling.slices.0", "0 is out of range: slices of one job is [1, 4,096]"),
    ("scaling.slices", [1, 4, 2], "scaling.slices.2", "must increase (2 after 4)"),
    ("scaling.slices", [1, 2, 2], "scaling.slices.2", "must increase"),
    ("scaling.slices", [4], "scaling.slices", "give two or more slice counts"),
    ("scaling.parallelism", "fsdp=16,tensor=4,dcn=2", "scaling.parallelism", "leave dcn out"),
    ("scaling.parallelism", "fsdp=8,tensor=4", "scaling.parallelism", "uses 32 chips per slice; slice 4x4x4 has 64"),
    ("scaling.batch_per_slice", 8, "scaling.batch_per_slice", "8 does not split over data x fsdp x expert = 16"),
    ("scaling.batch_per_slice", 0, "scaling.batch_per_slice", "0 is out of range: a batch size is [1, "),
    ("scaling.model_overrides", {"global_batch": 64}, "scaling.model_overrides.global_batch", "leave global_batch out"),
    ("scaling.model", "gpt-9", "scaling.model", "gpt-9"),
    ("scaling.slice", "2x2x1", "scaling.slice", "whole-cube slices of an OCS pod"),
    ("scaling.slices", [1, 100000], "scaling.slices.1", "100,000 is out of range: slices of one job"),
    ("scaling.steps", 3, "scaling.steps", "unknown field 'steps'"),
])
def test_bad_input_is_one_line_naming_the_field(path, value, field, text):
    with pytest.raises(PodsimError) as exc:
        load_scenario_text(_with(path, value), source="s.yaml")
    msg = str(exc.value)
    assert "\n" not in msg and f": {field}: " in msg and text in msg, msg
    assert msg.startswith("s.yaml:")  # with the line of the field


def test_sites_must_split_every_count():
    doc = yaml.safe_load(TINY.read_text())
    doc["dcn"]["sites"] = 2
    doc["workload"]["step"]["slices"] = 2
    with pytest.raises(PodsimError, match=r"scaling\.slices\.0: slice count 1 does not split evenly over dcn.sites = 2"):
        load_scenario_text(yaml.safe_dump(doc), source="s.yaml")
    with pytest.raises(PodsimError, match="slice count 1 does not split evenly over 2 sites"):  # the library, as the CLI calls it
        scaling_study(StepStudy("tpu-v4", "4x4x4", model="llama2-70b", plan="fsdp=16,tensor=4", slices=2,
                                dcn=DcnSpec(sites=2)), [1, 2], 16)


def test_a_job_stream_may_ask_for_a_scaling_study_too():
    """The section does not need a step workload: it validates beside a job stream."""
    doc = yaml.safe_load((DATA / "tiny.yaml").read_text())
    doc["topology"] = {"generation": "tpu-v4", "wiring": "ocs"}
    doc["workload"]["synthetic"]["mix"] = "v4"
    doc["scaling"] = BASE["scaling"]
    s = load_scenario_text(yaml.safe_dump(doc), source="s.yaml")
    assert s.kind == "cluster" and s.scaling.slices == (1, 2, 4)


def test_the_study_runs_on_the_scenarios_own_figures(run):
    """A figure override of the scenario (half the DCN bandwidth per host) reaches the study: the
    2-slice row's DCN all-reduce, bandwidth-bound here, takes about twice as long."""
    doc = yaml.safe_load(TINY.read_text())
    doc["topology"]["overrides"] = {"dcn_bandwidth_per_host": {"value": 12.5, "source": "test: half of x.4"}}
    doc["scaling"]["slices"] = [1, 2]
    half = run_scenario(load_scenario_text(yaml.safe_dump(doc), source="s.yaml")).table("scaling")
    full = run.table("scaling")
    assert half["step_time_s"][0] == pytest.approx(full["step_time_s"][0])  # one slice: no DCN
    assert half["dcn_busy_s"][1] == pytest.approx(2 * full["dcn_busy_s"][1], rel=0.05)


def test_the_scenarios_dcn_tiers_reach_the_study_and_its_tier_table(run, tmp_path):
    """`dcn: {tiers: ...}` (a spec, as --dcn-tiers takes it): 4x4x4 slices of 16 hosts, one per
    2:1 ToR, so the 2-slice row's DCN all-reduce, bandwidth-bound here, takes about twice as long
    as on the 1:1 leaf-spine; the `scaling_tiers` table says it is the ToR uplinks (the
    aggregation tier's links) that ask for that time, and it is stored with the run."""
    doc = yaml.safe_load(TINY.read_text())
    doc["dcn"]["tiers"] = "tor=24x200/2,aggregation=48x200/2,spine=512x200*4"
    doc["scaling"]["slices"] = [1, 2]
    r = run_scenario(load_scenario_text(yaml.safe_dump(doc), source="s.yaml"))
    t, full = r.table("scaling"), run.table("scaling")
    assert t["dcn_busy_s"][1] == pytest.approx(2 * full["dcn_busy_s"][1], rel=0.05)
    tiers = r.table("scaling_tiers")
    two = {tiers["tier"][i]: i for i in range(len(tiers["tier"])) if tiers["slices"][i] == 2}
    assert set(two) == {"tor", "aggregation", "spine"}
    agg = two["aggregation"]
    assert tiers["busy_s"][agg] == pytest.approx(t["dcn_busy_s"][1], rel=1e-9)
    assert tiers["link_busy_s"][agg] == pytest.approx(2 * tiers["link_busy_s"][two["tor"]], rel=1e-9)
    back = load_run(tmp_path / "r.duckdb", append_run(tmp_path / "r.duckdb", r))
    assert list(back.table("scaling_tiers")["tier"]) == list(tiers["tier"])
