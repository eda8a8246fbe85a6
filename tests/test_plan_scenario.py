"""A scenario's `plan` section: refused at load in one line naming the field, run by run_scenario
into the `plan` table and registered `plan_*` metrics; with tokens, time to train."""

from __future__ import annotations

import math

import pytest

from podsim.metrics import METRICS
from podsim.scenario import load_scenario_text, run_scenario
from podsim.scenario.check import check_scenario

BASE = """name: p
topology: {generation: tpu-v5p}
workload: {step: {model: llama2-70b, slice: 4x4x4, parallelism: 'fsdp=64', model_overrides: {n_layers: 2, global_batch: 64}}}
"""
PLAN = "plan: {model: llama2-70b, model_overrides: {n_layers: 4, global_batch: 256}, chips: 128, top: 1%s}\n"


@pytest.fixture(scope="module")
def run():
    return run_scenario(load_scenario_text(BASE + PLAN % ", tokens: 100B, price_per_chip_hour: 4.0"))


def test_plan_section_runs_into_table_and_metrics(run):
    r = run
    m = r.metrics
    for name in ("plan_best_step_time_s", "plan_best_mfu", "plan_plans_ranked", "plan_train_time_s", "plan_train_cost_usd"):
        assert name in METRICS and not math.isnan(m[name]), name
    assert m["plan_train_energy_kwh"] != m["plan_train_energy_kwh"]  # v5p publishes no power: NaN, not a guess
    t = r.table("plan")
    assert len(t["plan"]) == 1 and t["step_time_s"][0] == pytest.approx(m["plan_best_step_time_s"])
    assert m["plan_train_cost_usd"] == pytest.approx(m["plan_train_chip_hours"] * 4.0)
    assert all(k in METRICS for k in m if k.startswith("plan_"))


@pytest.mark.parametrize(("extra", "needle"), [
    (", days: 30", "needs tokens"),
    (", tokens: 2T, days: 30", "leave chips"),
    (", option: 1", "option"),
    (", recompute: [some]", "recompute"),
    (", slices: 3", "slices"),
])
def test_plan_section_refused_at_load(extra, needle):
    from podsim.errors import PodsimError

    with pytest.raises(PodsimError) as err:
        check_scenario(load_scenario_text(BASE + PLAN % extra))
    assert needle in str(err.value)
    assert "plan" in str(err.value)


def test_report_has_a_plan_section(run):
    """The capacity report of a run with a plan section shows its plans and time to train."""
    from podsim.report import render_report

    html = render_report([run])
    assert 'id="plan"' in html and "Time to train" in html and run.metrics["plan_best_parallelism"] in html
    assert "not published" in html  # v5p publishes no power per chip
