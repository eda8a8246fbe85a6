"""One configuration model: the same cluster run written as a scenario file (`podsim run`), as
`podsim cluster` flags and as the dashboard's Cluster page widgets builds one ClusterRun and
gives identical numbers; the defaults the three share come from one place."""

from __future__ import annotations

import json
import math
from typing import get_args

import pytest
from helpers import run_podsim as podsim
from pydantic import ValidationError

from app_pages.cluster_run import job_stream, page_run
from podsim.cluster import ClusterConfig, ClusterRun, run_cluster
from podsim.cluster.config import POLICY_NAMES, Policy
from podsim.cluster.policies import QUEUE_POLICIES
from podsim.scenario.load import scenario_from_dict
from podsim.scenario.run import cluster_run, run_scenario
from podsim.scenario.schema import POLICY_FIELDS, SOLVER_FIELDS, StepTime, StepWorkload
from podsim.scenario.schema import Policy as ScenarioPolicy
from podsim.scenario.schema import Solver as ScenarioSolver
from podsim.study import StepStudy
from podsim.topology import get_generation
from podsim.trace.model import DEFAULT_COMPUTE_EFFICIENCY
from podsim.units import rate_per_h
from podsim.workload import parse_synthetic

SYNTHETIC = "jobs=40,rate=3/h,median=2h,sigma=1,models=gpt3-175b:1;llama2-70b:1,steps=300,steps_sigma=0.5"
SCENARIO = {
    "name": "three-ways", "topology": {"generation": "tpu-v4", "pods": 1, "wiring": "ocs"},
    "workload": {"synthetic": {"jobs": 40, "rate": "3/h", "duration": {"median": "2h", "sigma": 1},
                               "models": {"gpt3-175b": 1, "llama2-70b": 1}, "steps": {"median": 300, "sigma": 0.5}}},
    "failures": {"host": {"availability": "99.5%", "mttr": "4h"}},
    "policy": {"name": "backfill", "checkpoint_interval": "1h"}, "horizon": "2d", "seed": 3,
}
KEYS = ("jobs_total", "jobs_completed", "jobs_queued", "utilisation", "goodput", "fleet_goodput", "useful_chip_h",
        "lost_chip_h", "overhead_chip_h", "busy_chip_h", "healthy_chip_h", "wait_p50_s", "wait_p95_s",
        "slowdown_mean", "failures_host", "job_interruptions", "ocs_reconfigurations")


def _pick(metrics: dict) -> dict:
    return {k: metrics[k] for k in KEYS}


@pytest.mark.slow  # issue 24: the quick tier under 2 min of 2 cores; runs in make test
def test_scenario_cli_flags_and_dashboard_give_identical_numbers(capsys):
    scenario = scenario_from_dict(SCENARIO)
    via_run = _pick(run_scenario(scenario).metrics)

    code, out, err = podsim(capsys, "cluster", "-g", "tpu-v4", "--pods", "1", "--synthetic", SYNTHETIC,
                            "--policy", "backfill", "--host-availability", "0.995", "--mttr", "4h",
                            "--checkpoint-interval", "1h", "--horizon", "2d", "--seed", "3", "--json")
    assert code == 0, err
    doc = json.loads(out)
    via_cli = _pick(doc.get("metrics", doc))

    run = page_run("tpu-v4", 1, True, "backfill", job_stream("synthetic", SYNTHETIC, None, "tpu-v4"),
                   2.0, 0.995, 4.0, 1.0, 3)
    via_page = _pick(run_cluster(run).metrics)

    assert via_run["jobs_total"] == 40 and via_run["failures_host"] > 0 and via_run["useful_chip_h"] > 0
    assert via_cli == via_run and via_page == via_run
    # and they are one object: the scenario's ClusterRun equals the page's (a scenario states
    # its time-series step as `samples`, horizon / 500 by default, the step the others default to)
    from_scenario = cluster_run(scenario, get_generation("tpu-v4"))
    assert from_scenario.config.sample_step_s == run.config.sample_step_s
    page = run.model_copy(update={"config": run.config.model_copy(update={"sample_interval_s": run.config.sample_step_s})})
    assert from_scenario == page


def test_defaults_and_names_live_once():
    assert set(POLICY_NAMES) == set(get_args(Policy)) == set(QUEUE_POLICIES)
    fields = ClusterConfig.model_fields
    p = ScenarioPolicy()
    assert (p.name, p.checkpoint_interval, p.restart_overhead) == (
        fields["policy"].default, fields["checkpoint_interval_s"].default, fields["restart_overhead_s"].default)
    # a scenario's policy: and solver: are the config's fields under other names: type, range,
    # default and description are the config's, so each refuses what the config refuses, alike
    for model, names in ((ScenarioPolicy, POLICY_FIELDS), (ScenarioSolver, SOLVER_FIELDS)):
        assert set(model.model_fields) == set(names)
        for name, field in names.items():
            mine, theirs = model.model_fields[name], fields[field]
            assert (mine.annotation, mine.metadata, mine.description) == (theirs.annotation, theirs.metadata, theirs.description)
            assert mine.get_default(call_default_factory=True) == theirs.get_default(call_default_factory=True)
    for name, value in (("checkpoint_interval", "1ns"), ("restart_overhead", "8d"), ("schedule_depth", 0)):
        with pytest.raises(ValidationError) as scenario_err:
            ScenarioPolicy(**{name: value})
        with pytest.raises(ValidationError) as config_err:
            ClusterConfig(generation="tpu-v4", horizon_s="1d", **{POLICY_FIELDS[name]: value})
        assert scenario_err.value.errors()[0]["msg"] == config_err.value.errors()[0]["msg"]
    assert ScenarioSolver(workers=4).workers == 4 and ScenarioSolver().slowdown_overrides == {}
    # compute: the per-op model by default everywhere (None); a flat efficiency only when asked
    assert StepTime().compute_efficiency is None and StepWorkload(model="gpt3-175b", slice="4x4x4").compute_efficiency is None
    assert ClusterRun.model_fields["compute_efficiency"].default is None and StepStudy(model="gpt3-175b").compute_efficiency is None
    assert StepTime(compute_efficiency=DEFAULT_COMPUTE_EFFICIENCY).compute_efficiency == 0.6


@pytest.mark.parametrize("text,per_h", [("2/h", 2.0), ("48/d", 2.0), ("168/w", 1.0), ("1/min", 60.0), ("3", 3.0)])
def test_one_rate_parser_for_scenarios_and_the_cli(text, per_h):
    """A rate means the same in a scenario file and in `--synthetic` (weeks included)."""
    assert math.isclose(rate_per_h(text), per_h)
    assert math.isclose(parse_synthetic(f"jobs=5,rate={text}", "tpu-v4").arrival.rate_per_h, per_h)
    s = scenario_from_dict({**SCENARIO, "workload": {"synthetic": {"jobs": 5, "rate": text}}})
    assert math.isclose(s.workload.synthetic.spec("tpu-v4").arrival.rate_per_h, per_h)


def test_a_stored_scenario_reads_back_as_the_same_scenario():
    """RunResult.scenario names the library's fields (`median_s`, `mtbf_s`); they load again."""
    s = scenario_from_dict({**SCENARIO, "failures": {"host": {"mtbf": "2000h", "mttr": "4h"}}})
    dumped = s.model_dump(mode="json")
    assert dumped["workload"]["synthetic"]["duration"]["median_s"] == 7200 and dumped["failures"]["host"]["mtbf_s"] == 7.2e6
    assert scenario_from_dict(dumped) == s


def test_a_run_without_a_job_stream_is_a_one_line_user_error():
    from podsim.cluster import make_config, make_run
    from podsim.errors import PodsimError

    with pytest.raises(PodsimError, match="^give exactly one job stream"):
        make_run(config=make_config(generation="tpu-v4", horizon_s="1d"))


def test_ocs_remedies_are_scenario_fields_as_well_as_flags(capsys):
    """Degraded placement and spare ports reach the cluster run from a scenario's solver section
    exactly as from `podsim cluster --degraded-placement/--spare-ports/--degraded-slowdown`."""
    remedies = {"degraded_placement": "all", "spare_ports": True, "degraded_slowdown": 1.5}
    ocs_failing = {**SCENARIO["failures"], "ocs": {"mtbf": "50d", "mttr": "4h"}}  # the remedies need failed OCS units
    scenario = scenario_from_dict({**SCENARIO, "failures": ocs_failing, "solver": remedies})
    config = cluster_run(scenario, get_generation("tpu-v4")).config
    assert (config.degraded_placement, config.spare_ports, config.degraded_slowdown) == ("all", True, 1.5)
    via_run = _pick(run_scenario(scenario).metrics)
    code, out, err = podsim(capsys, "cluster", "-g", "tpu-v4", "--pods", "1", "--synthetic", SYNTHETIC,
                            "--policy", "backfill", "--host-availability", "0.995", "--mttr", "4h",
                            "--checkpoint-interval", "1h", "--horizon", "2d", "--seed", "3", "--json", "--ocs-mtbf", "50d",
                            "--ocs-mttr", "4h", "--degraded-placement", "all", "--spare-ports", "--degraded-slowdown", "1.5")
    assert code == 0, err
    assert _pick(json.loads(out)["metrics"]) == via_run
