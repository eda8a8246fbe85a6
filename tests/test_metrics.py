"""The metric registry and the one result type: every metric a run reports is registered with a
unit and a definition; targets, the store and the report read their units from it; `podsim
cluster` flags and `podsim run` on the same scenario give the same RunResult numbers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import run_podsim as podsim

from podsim import metrics as reg
from podsim.metrics import METRICS, Metric
from podsim.scenario import load_scenario, run_scenario
from podsim.scenario.fields import STEP_TARGETS, TARGET_UNITS
from podsim.scenario.spine import spine_metrics

DATA = Path(__file__).parent / "data" / "scenarios"
# tests/data/scenarios/tiny.yaml written as `podsim cluster` flags (36 h / 200 samples = 648 s)
TINY_FLAGS = ("cluster", "-g", "tpu-v5e", "--pods", "1", "--no-ocs", "--synthetic",
              "jobs=60,rate=2/h,duration=lognormal,median=2h,sigma=0.8,max=1d,mix=2x2:4;2x4:3;4x4:2;4x8:1;8x8:1",
              "--policy", "backfill", "--host-availability", "0.99", "--mttr", "2h", "--horizon", "36h", "--seed", "5",
              "--sample", "648s", "--json")
WALL = {"engine_wall_s", "placement_s"}  # machine-dependent


@pytest.fixture(scope="module")
def tiny():
    return run_scenario(load_scenario(DATA / "tiny.yaml"))


def test_every_metric_a_run_reports_is_registered(tiny):
    step = run_scenario(load_scenario(DATA / "tiny_step.yaml"))
    for run in (tiny, step):
        missing = [k for k in run.metrics if k not in METRICS]
        assert not missing, f"{run.kind} metrics without a registry entry: {missing}"
        wrong = [k for k in run.metrics if METRICS[k].kind not in (run.kind, "both")]
        assert not wrong, f"{run.kind} metrics registered for the other kind: {wrong}"
    rows = [{"spine": k, "capex_usd": 2.0, "energy_kwh": 3.0, "cumulative_usd": 5.0, "spine_rebought": True,
             "lifetime_usd_per_useful_chip_h": 1.0, "lifetime_spine_usd_per_useful_chip_h": 0.1, "useful_chip_h": 9.0,
             "power_w": 4.0} for k in ("eps", "ocs")]
    assert set(spine_metrics(rows)) <= set(METRICS)
    assert all(m.definition and m.unit in reg.UNITS for m in METRICS.values())


def test_targets_and_store_columns_come_from_the_registry():
    """The same target metrics, threshold units and store columns as the lists they replace."""
    serving = {k: v for k, v in TARGET_UNITS.items() if METRICS[k].kind == "serving"}  # issue 28's, checked below
    assert {k: v for k, v in TARGET_UNITS.items() if k not in serving} == {
        "wait_p50_s": "duration", "wait_p95_s": "duration", "wait_p99_s": "duration", "wait_mean_s": "duration",
        "wait_p95_with_queued_s": "duration", "wait_p99_with_queued_s": "duration",
        "goodput": "fraction", "fleet_goodput": "fraction", "utilisation": "fraction", "availability": "fraction",
        "slowdown_p95": "number", "slowdown_mean": "number", "jobs_queued": "number", "jobs_unplaceable": "number",
        "fragmentation_mean": "fraction", "cost_usd": "number", "cost_per_useful_chip_h_usd": "number",
        "step_time_s": "duration", "exposed_comm_s": "duration", "time_to_train_s": "duration", "mfu": "fraction",
        # added with the per-op model (HFU) and multislice levels (exposed time per network level)
        "hfu": "fraction", "ici_exposed_s": "duration", "dcn_exposed_s": "duration", "wan_exposed_s": "duration",
        # added with the wait split and job completion time (issue 27)
        "wait_shape_mean_s": "duration", "wait_resource_mean_s": "duration", "wait_shape_share": "fraction",
        "jct_mean_s": "duration", "jct_p95_s": "duration", "slowdown_charged_mean": "number"}
    assert serving["ttft_p99_s"] == "duration" and serving["slo_attainment"] == "fraction" and serving["capacity_chips"] == "number"
    assert set(STEP_TARGETS) == {"step_time_s", "exposed_comm_s", "time_to_train_s", "mfu", "cost_usd",
                                 "hfu", "ici_exposed_s", "dcn_exposed_s", "wan_exposed_s"}
    assert reg.store_columns() == {
        "generation": "VARCHAR", "pods": "INTEGER", "chips": "BIGINT", "utilisation": "DOUBLE", "goodput": "DOUBLE",
        "wait_p95_s": "DOUBLE", "step_time_s": "DOUBLE", "cost_usd": "DOUBLE", "energy_kwh": "DOUBLE",
        "replicates": "INTEGER",  # added with replicated runs (podsim.stats)
        "jct_p95_s": "DOUBLE",  # added with job completion time (issue 27)
        # serving fleets (issue 28)
        "slo_attainment": "DOUBLE", "goodput_rps": "DOUBLE", "tokens_per_s_per_chip": "DOUBLE",
        "cost_per_million_tokens_usd": "DOUBLE", "ttft_p99_s": "DOUBLE", "tpot_p99_s": "DOUBLE", "e2e_p99_s": "DOUBLE",
        "capacity_chips": "BIGINT", "step_time_error": "DOUBLE"}
    assert reg.unit_kind("mfu") == "fraction" and reg.unit_kind("unknown_s") == "duration"


def test_a_step_metric_is_one_entry(monkeypatch):
    """Adding a metric (as the fidelity work adds hfu) makes it a target a step study may set."""
    monkeypatch.setattr(reg, "METRICS", dict(METRICS))
    reg.register(Metric("hfu_test", "fraction", "hardware FLOPs / (peak FLOP/s x step time)", "step", target=True))
    assert "hfu_test" in reg.target_metrics("step") and "hfu_test" not in reg.target_metrics("cluster")
    with pytest.raises(ValueError, match="registered twice"):
        reg.register(Metric("hfu_test", "s", "something else", "step"))
    with pytest.raises(ValueError, match="unit"):
        Metric("x", "furlongs", "d", "step")


def test_podsim_cluster_and_podsim_run_give_one_result(capsys, tiny):
    """The same scenario as flags and as YAML: the same JSON schema and identical numbers."""
    code, out, err = podsim(capsys, *TINY_FLAGS)
    assert code == 0, err
    cli = json.loads(out)
    run = tiny.summary(tables=("timeseries",))
    assert set(run) <= set(cli) and cli["kind"] == run["kind"] == "cluster"
    assert {k: v for k, v in cli["metrics"].items() if k not in WALL} == \
           {k: v for k, v in run["metrics"].items() if k not in WALL}
    assert cli["cost"] == run["cost"] and cli["tables"] == run["tables"]


def test_metrics_command(capsys):
    code, out, _ = podsim(capsys, "metrics", "--kind", "step", "--json")
    rows = {r["name"]: r for r in json.loads(out)}
    assert code == 0 and rows["mfu"]["unit"] == "fraction" and rows["mfu"]["target"] and "goodput" not in rows
    code, out, err = podsim(capsys, "metrics", "--kind", "fleet")
    assert code == 2 and "--kind 'fleet'" in err and "Traceback" not in err


def test_report_names_what_a_target_measures(tiny):
    from podsim.report import render_report

    html = render_report(tiny)
    for t in tiny.targets:  # wait_p95_s and goodput: the registry's definitions as the badges' titles
        assert f'title="{reg.definition(t["metric"])}"' in html
