"""Scenario files and run_scenario: units, one-line errors with file, line and field, the run's
figures against independent checks (accounting, closed forms, hand-computed targets and cost)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import run_podsim

from podsim.errors import PodsimError
from podsim.scenario import load_scenario, load_scenario_text, run_scenario
from podsim.scenario.fields import parse_target
from podsim.scenario.run import cluster_run
from podsim.sweep.spec import apply_overrides
from podsim.units import duration_s, fraction, rate_per_h

DATA = Path(__file__).parent / "data" / "scenarios"
BROKEN = sorted((DATA / "broken").glob("*.yaml"))

# file -> (line, the field its one-line error must name, a word of what is allowed or wrong)
BROKEN_FIELDS = {
    "01_bad_yaml.yaml": (5, "topology.pods", "not valid YAML"),
    "02_unknown_generation.yaml": (3, "topology.generation", "known: tpu-v2"),
    "03_invalid_shape.yaml": (6, "workload.step.slice", "multiple of 4"),
    "04_negative_rate.yaml": (6, "workload.synthetic.rate", "must be > 0"),
    "05_missing_trace.yaml": (5, "workload.trace.path", "does not exist"),
    "06_unknown_field.yaml": (7, "policy.checkpoint_every", "allowed: name, checkpoint_interval"),
    "07_wrong_unit.yaml": (5, "horizon", "use a number with one of"),
    "08_bad_mix_shape.yaml": (7, "workload.synthetic.mix.3x5", "allowed: 1x1"),
    "09_bad_target.yaml": (7, "targets.goodput", "'>= 95%'"),
    "10_price_without_source.yaml": (5, "topology.overrides.price_per_chip_hour.source", "missing required field"),
    "11_availability_out_of_range.yaml": (6, "failures.host.availability", "outside [0, 1]"),
    "12_wiring_typo.yaml": (2, "topology.wiring", "'ocs' or 'static'"),
    "13_override_wrong_unit.yaml": (5, "topology.overrides.price_per_chip_hour.unit", "USD/h"),
}


def test_every_broken_file_has_an_expectation():
    assert len(BROKEN) >= 10 and {p.name for p in BROKEN} == set(BROKEN_FIELDS)


@pytest.mark.parametrize("path", BROKEN, ids=lambda p: p.stem)
def test_broken_scenario_is_one_line_naming_the_field(path, capsys):
    """Exit code 2, one line: FILE:LINE: FIELD: what is wrong and what is allowed; no traceback."""
    line, field, needle = BROKEN_FIELDS[path.name]
    code, out, err = run_podsim(capsys, "validate", str(path))
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"error: {path}:{line}: "), lines[0]
    assert field in lines[0] and needle in lines[0], lines[0]


def test_run_refuses_a_broken_scenario_with_exit_2(capsys):
    code, _, err = run_podsim(capsys, "run", str(DATA / "broken" / "02_unknown_generation.yaml"), "-o", "/nonexistent/x")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "tpu-v9" in err


def test_units():
    assert duration_s("3h") == 10800 and duration_s("500ns") == pytest.approx(5e-7) and duration_s(90) == 90
    assert rate_per_h("2/h") == 2 and rate_per_h("48/d") == 2 and rate_per_h("1/min") == 60 and rate_per_h(3) == 3
    assert fraction("99.5%") == pytest.approx(0.995) and fraction(0.95) == 0.95
    assert parse_target("wait_p95_s", "<= 1h") == ("<=", 3600) and parse_target("goodput", {"min": "95%"}) == (">=", 0.95)
    for bad in ("-1h", "3 parsecs"):
        with pytest.raises(PodsimError):
            duration_s(bad)
    with pytest.raises(PodsimError):
        rate_per_h("0/h")


@pytest.fixture(scope="module")
def tiny():
    return run_scenario(load_scenario(DATA / "tiny.yaml"))


def test_cluster_run_accounting(tiny):
    """Goodput over time ends at the run's goodput; busy chip-hours integrate the samples."""
    m, ts = tiny.metrics, tiny.tables["timeseries"]
    assert tiny.kind == "cluster" and m["jobs_total"] == 60
    # the cumulative series at the last sample, carried to the horizon, gives the final figures
    assert ts["goodput_cumulative"][-1] == pytest.approx(m["goodput"], abs=0.02)
    assert ts["busy_chip_s"][-1] / 3600 <= m["busy_chip_h"] + 1e-6
    assert np.all(np.diff(ts["busy_chip_s"]) >= -1e-6) and np.all(np.diff(ts["lost_chip_s"]) >= -1e-6)
    jobs = tiny.tables["jobs"]
    started = ~np.isnan(jobs["first_start_s"])
    assert np.allclose(jobs["wait_s"][started], (jobs["first_start_s"] - jobs["submit_s"])[started])
    assert jobs["allocated_chip_s"].sum() / 3600 == pytest.approx(m["allocated_chip_h"])
    # the censored wait counts queued jobs, so it is never below the started jobs' wait
    assert m["wait_p95_with_queued_s"] >= m["wait_p95_s"] - 1e-9


def test_targets_and_cost_by_hand(tiny):
    m = tiny.metrics
    by = {t["metric"]: t for t in tiny.targets}
    assert by["wait_p95_s"]["met"] == (m["wait_p95_s"] <= 7200) and by["goodput"]["met"] == (m["goodput"] >= 0.9)
    assert tiny.targets_met == (by["wait_p95_s"]["met"] and by["goodput"]["met"])
    c = tiny.cost
    assert c["chip_h"] == pytest.approx(256 * 36) and c["price_source"] == "pr.5"
    assert c["cost_usd"] == pytest.approx(256 * 36 * 1.20)
    assert c["energy_kwh"] is None and "not in the reference sheet" in c["power_note"]


def test_same_seed_same_run(tiny):
    again = run_scenario(load_scenario(DATA / "tiny.yaml"))
    for k in ("utilisation", "goodput", "wait_p95_s", "jobs_completed", "failures_host"):
        assert again.metrics[k] == tiny.metrics[k]
    assert np.array_equal(again.tables["timeseries"]["busy_chips"], tiny.tables["timeseries"]["busy_chips"])


V5P = """
name: v5p-price
topology: {generation: tpu-v5p, pods: 1}
workload: {synthetic: {jobs: 5, rate: 1/h, mix: {4x4x4: 1}, duration: {kind: fixed, median: 1h}}}
horizon: 6h
"""


def test_v5p_has_no_price_unless_given_with_a_source():
    r = run_scenario(load_scenario_text(V5P))
    assert r.cost["cost_usd"] is None and r.cost["chip_h"] == pytest.approx(8960 * 6)
    assert "no v5p price" in r.cost["price_note"]
    priced = V5P.replace("{generation: tpu-v5p, pods: 1}",
                         "{generation: tpu-v5p, pods: 1, overrides: {price_per_chip_hour: {value: 4.2, source: 'quote 2025-01'}}}")
    r = run_scenario(load_scenario_text(priced))
    assert r.cost["cost_usd"] == pytest.approx(8960 * 6 * 4.2) and r.cost["price_source"] == "quote 2025-01"


def test_cpsat_workers_capped_in_sweeps():
    s = load_scenario_text(V5P.replace("horizon: 6h", "horizon: 6h\nsolver: {kind: cpsat, workers: 4}"))
    from podsim.scenario.check import scenario_generation
    gen = scenario_generation(s)
    assert cluster_run(s, gen).config.cpsat_workers == 4 and cluster_run(s, gen, cpsat_workers_cap=1).config.cpsat_workers == 1


@pytest.fixture(scope="module")
def step():
    return run_scenario(load_scenario(DATA / "tiny_step.yaml"))


def test_step_study(step):
    m = step.metrics
    assert step.kind == "step" and m["chips"] == 128 and m["slices"] == 2
    assert m["time_to_train_s"] == pytest.approx(1000 * m["step_time_s"])
    assert m["step_time_s"] >= m["compute_s"] - 1e-12 and m["exposed_comm_s"] <= m["comm_s"] + 1e-12
    assert m["chip_h"] == pytest.approx(128 * m["time_to_train_s"] / 3600)
    assert m["cost_usd"] == pytest.approx(m["chip_h"] * 3.22)
    assert m["dcn_ocs_groups"] == [[0, 1]]  # the job's two blocks, engineered
    kinds = step.tables["step_kinds"]
    assert "all_reduce" in list(kinds["kind"]) and len(step.tables["step_ops"]["op"]) > 10


def test_engineered_ocs_dcn_beats_a_uniform_mesh(step):
    """Two blocks of 64 on a uniform mesh share each uplink with 63 peers; engineered circuits
    give the pair a whole uplink, so the cross-slice all-reduce is much faster."""
    import yaml
    raw = yaml.safe_load((DATA / "tiny_step.yaml").read_text())
    from podsim.scenario.load import scenario_from_dict
    uniform = run_scenario(scenario_from_dict(apply_overrides(raw, {"dcn.ocs_groups": "none"})))
    assert uniform.metrics["dcn_collective_busy_s"] > 5 * step.metrics["dcn_collective_busy_s"]
    assert uniform.metrics["step_time_s"] > step.metrics["step_time_s"]


@pytest.mark.parametrize("text,needle", [
    ("{generation: tpu-v4}\nworkload: {step: {model: resnet50, slice: 4x4x4}}\nhorizon: 1d", "horizon: a step study"),
    ("{generation: tpu-v4}\nworkload: {synthetic: {jobs: 3, rate: 1/h}}", "horizon: a job stream needs a horizon"),
    ("{generation: tpu-v5e}\nworkload: {synthetic: {jobs: 3, rate: 1/h, mix: {2x2: 1}}}\nhorizon: 1d", "topology.wiring: tpu-v5e has no OCS"),
    ("{generation: tpu-v4}\nworkload: {step: {model: resnet50, slice: 4x4x4, parallelism: data=32}}", "uses 32 chips per slice"),
    ("{generation: tpu-v4}\nworkload: {synthetic: {jobs: 3, rate: 1/h}}\nhorizon: 1d\ntargets: {step_time_s: '<= 1s'}", "no target on 'step_time_s'"),
    ("{generation: tpu-v4}\ndcn: {kind: ocs, ocs_groups: job}\nworkload: {synthetic: {jobs: 3, rate: 1/h}}\nhorizon: 1d", "multislice step job"),
    ("{generation: tpu-v5e, wiring: static}\nworkload: {step: {model: llama2-70b, slice: 4x4, slices: 2}}",
     "workload.step.slices: a multislice job takes whole-cube slices of an OCS pod; tpu-v5e 4x4 is not one"),
])
def test_cross_field_errors(text, needle):
    with pytest.raises(PodsimError) as e:
        load_scenario_text("name: x\ntopology: " + text, source="s.yaml")
    msg = str(e.value)
    assert needle in msg and msg.startswith("s.yaml:") and "\n" not in msg


def test_demo_scenario_is_valid():
    from podsim.cli.demo import demo_scenario_path
    with demo_scenario_path() as p:
        s = load_scenario(p)
    assert s.step_time.model == "engine" and s.targets and s.horizon > 0


def test_run_cli_writes_tables_store_and_report(tmp_path, capsys):
    import json

    from podsim.store import list_runs
    out = tmp_path / "o"
    code, stdout, err = run_podsim(capsys, "run", str(DATA / "tiny.yaml"), "-o", str(out), "--json")
    assert code == 0, err
    summary = json.loads(stdout)
    assert summary["name"] == "tiny" and summary["outputs"]["report"] == str(out / "report.html")
    assert {p.name for p in out.iterdir()} >= {"report.html", "results.duckdb", "timeseries.parquet", "jobs.parquet", "summary.parquet"}
    (row,) = list_runs(out / "results.duckdb")
    assert row["run_id"] == summary["run_id"] and row["goodput"] == pytest.approx(summary["metrics"]["goodput"])
    shared = tmp_path / "shared.duckdb"
    code, stdout, _ = run_podsim(capsys, "run", str(DATA / "tiny_step.yaml"), "-o", str(tmp_path / "p"), "--store", str(shared))
    assert code == 0 and stdout.strip().splitlines()[-1] == f"report: {(tmp_path / 'p' / 'report.html').resolve()}"
    assert [r["kind"] for r in list_runs(shared)] == ["step"]


@pytest.mark.parametrize("path,needle", [
    (DATA / "tiny.yaml", "scenario 'tiny': 1 x tpu-v5e (static), job stream: 60 synthetic jobs over 1.5 d"),
    (DATA / "sweep16.yaml", "sweep 'sixteen' (grid), 16 points"),
    (DATA / "capacity.yaml", "bisecting topology.pods over [1, 6]"),
])
def test_validate_ok(path, needle, capsys):
    code, stdout, _ = run_podsim(capsys, "validate", str(path))
    assert code == 0 and stdout.startswith("ok: ") and needle in stdout


def test_trace_workload_and_failure_trace(tmp_path):
    """A replayed job CSV (accelerators rounded up to v5e shapes) and a failure CSV, both named
    relative to the scenario file."""
    (tmp_path / "jobs.csv").write_text("job_id,submission_time,duration,num_gpu\n"
                                       + "".join(f"j{i},{i * 600},{3600 + 60 * i},{[1, 4, 8, 16][i % 4]}\n" for i in range(20)))
    (tmp_path / "fail.csv").write_text("time_s,component,id,repair_s\n1800,host,3,7200\n5400,host,20,600\n")
    (tmp_path / "s.yaml").write_text("name: replay\ntopology: {generation: tpu-v5e, wiring: static}\n"
                                     "workload: {trace: {path: jobs.csv}}\nfailures: {trace: fail.csv}\nhorizon: 1d\n")
    r = run_scenario(load_scenario(tmp_path / "s.yaml"))
    m = r.metrics
    assert m["jobs_total"] == 20 and m["jobs_completed"] == 20 and m["failures_host"] == 2
    assert sorted(set(r.tables["jobs"]["shape"])) == ["1x1", "2x2", "2x4", "4x4"]  # 1, 4, 8, 16 accelerators
