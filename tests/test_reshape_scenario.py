"""The worked reshaping scenario's parts (issue 27, item 7): an odd-shape job stream in a scenario,
the slowdown charged per placement class, the plan a non-native placement is priced with, and the
report's placement-modes section. Small pods and one simulated layer keep each test to seconds."""

from __future__ import annotations

import math

import pytest

from podsim.cluster import ClusterConfig, simulate
from podsim.cluster.config import make_config
from podsim.errors import PodsimError
from podsim.report import render_report
from podsim.report.reshape import reshape_details
from podsim.scenario import load_scenario_text, run_scenario
from podsim.study import CachedStepTime, EngineStepTime, StepStudy
from podsim.study.steptime import plan_for_any_size
from podsim.topology import DcnSpec
from podsim.workload.odd import OddShapeSpec, odd_shape_jobs

TORUS = "torus-8x8x8-b4-p6-400gbps"
PRICED = {"slowdown_model": "llama2-70b", "slowdown_overrides": {"n_layers": 1}}


PLAN = "tensor=2,fsdp=auto"


def _study(model, gen, shape, twisted, slices, sites, plan=PLAN):
    return StepStudy(gen, shape, model=model, plan=plan, twisted=twisted, slices=slices, dcn=DcnSpec(sites=sites))


def test_the_priced_plan_rounds_only_a_batch_that_does_not_split():
    s, note = plan_for_any_size(_study("llama2-70b", TORUS, (4, 4, 4), False, 1, 1, None))
    assert s.model_overrides == {} and note == ""
    s, note = plan_for_any_size(_study("llama2-70b", TORUS, (2, 2, 6), False, 1, 1))
    assert s.model_overrides == {"global_batch": 1032} and "1024 rounded up to 1032" in note  # tensor=2, fsdp=12
    s, note = plan_for_any_size(_study("llama2-70b", TORUS, (2, 2, 6), False, 1, 1, None))
    assert s.plan == "fsdp=24" and s.model_overrides == {"global_batch": 1032}  # the preset's tensor plan cannot use 24
    with pytest.raises(PodsimError, match="does not divide"):
        plan_for_any_size(_study("llama2-70b", TORUS, (1, 2, 3), False, 1, 1, "tensor=4,fsdp=auto"))


def test_slowdown_charged_per_class_is_the_mean_of_its_runs():
    """Folded and split runs on a generic torus: each class's mean is the mean of the charged
    factors of its jobs (all single runs here), NaN for a class with no run; the largest bounds them."""
    jobs = odd_shape_jobs(OddShapeSpec(jobs=40, max_chips=256, max_side=8, rate_per_h=20, median_s=3600), 3)
    cfg = ClusterConfig(generation=TORUS, horizon_s=2 * 86400, fold="allowed", **PRICED)
    r = simulate(cfg, jobs, step_time=CachedStepTime(EngineStepTime(), _study))
    m = r.metrics
    assert m["runs_fold"] > 0 and m["runs_split"] > 0 and m["runs_scatter"] == 0
    assert math.isnan(m["slowdown_scatter_mean"])
    for form in ("fold", "split"):
        slow = [o.slowdown for o in r.jobs if o.placement == form and o.runs == 1]
        assert len(slow) == m[f"runs_{form}"]
        assert m[f"slowdown_{form}_mean"] == pytest.approx(sum(slow) / len(slow))
    charged = [o.slowdown for o in r.jobs if o.placement in ("fold", "split")]
    assert m["slowdown_charged_max"] == pytest.approx(max(charged)) and min(charged) >= 1.0


def test_overrides_need_a_slowdown_model_and_known_fields():
    with pytest.raises(PodsimError, match="give slowdown_model too"):
        make_config(generation=TORUS, horizon_s=3600, slowdown_overrides={"n_layers": 1})
    with pytest.raises(PodsimError, match="'n_layerz' cannot be set"):
        make_config(generation=TORUS, horizon_s=3600, slowdown_model="llama2-70b", slowdown_overrides={"n_layerz": 1})


SCENARIO = """
name: odd-{mode}
topology: {{generation: {gen}, wiring: {wiring}}}
workload:
  odd: {{jobs: 30, max_chips: 64, max_side: 8, rate_per_h: 20, median_s: 1h}}
solver: {{{solver}slowdown_model: llama2-70b, slowdown_overrides: {{n_layers: 1}}}}
step_time: {{model: engine, parallelism: {{llama2-70b: "tensor=2,fsdp=auto"}}}}
horizon: 1d
seed: 2
"""


def _run(mode: str, gen: str = TORUS):
    solver, wiring = {"exact": ("", "ocs"), "fold": ("fold: allowed, ", "ocs"), "hilbert": ("placement: hilbert, ", "static")}[mode]
    return run_scenario(load_scenario_text(SCENARIO.format(mode=mode, gen=gen, wiring=wiring, solver=solver)))


def test_an_odd_shape_scenario_and_its_report_section():
    """The same odd-shape stream placed exactly and with folds and splits: exact shapes leave the
    sides a block cannot hold never placeable, folding and splitting place them; the report's
    placement-modes section has one row per run with the slowdown charged per class."""
    exact, fold = _run("exact"), _run("fold")
    assert exact.metrics["jobs_unplaceable"] > 0 == fold.metrics["jobs_unplaceable"]
    assert exact.metrics["jobs_total"] == fold.metrics["jobs_total"] == 30
    d = reshape_details([exact, fold], ["exact", "fold"])
    assert [row[0] for row in d["rows"]] == ["exact", "fold"]
    assert d["rows"][0][2] == "exact shapes, best fit" and d["rows"][1][2] == "fold and split allowed, best fit"
    assert d["pricing"] == ["llama2-70b (tensor=2,fsdp=auto, n_layers=1) on the engine"]
    assert f"{fold.metrics['runs_fold']:,} / {fold.metrics['runs_split']:,} / 0" == d["rows"][1][7]
    assert reshape_details([exact], ["exact"]) is None  # nothing reshapes: no section
    html = render_report([exact, fold], labels=["exact", "fold"])
    assert 'id="reshape"' in html and "timed alone" in html


def test_an_odd_stream_is_refused_where_its_sides_cannot_fit():
    text = SCENARIO.format(mode="x", gen=TORUS, wiring="ocs", solver="").replace("max_side: 8", "max_side: 16")
    with pytest.raises(PodsimError, match="max_side 16 is longer than"):
        load_scenario_text(text)
