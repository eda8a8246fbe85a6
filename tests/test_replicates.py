"""Replicates and their intervals (podsim.stats): the Student-t interval against its textbook
value and its coverage, and a replicated scenario through the run, the store, the report and the CLI."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from podsim.errors import PodsimError
from podsim.report import render_report
from podsim.scenario import load_scenario, run_scenario
from podsim.stats import Interval, interval_text, mean_interval, metric_intervals, replicate_seeds
from podsim.store import append_run, load_run

DATA = Path(__file__).parent / "data" / "scenarios"


def test_interval_matches_the_textbook_t_value():
    """n = 5: t(0.975, 4) = 2.776 (any t table), sd of 1..5 = sqrt(2.5)."""
    iv = mean_interval([1, 2, 3, 4, 5])
    half = 2.776445 * math.sqrt(2.5) / math.sqrt(5)
    assert iv.mean == 3 and iv.n == 5
    assert iv.low == pytest.approx(3 - half, rel=1e-6) and iv.high == pytest.approx(3 + half, rel=1e-6)
    assert iv.sd == pytest.approx(math.sqrt(2.5))
    assert mean_interval([1, 2, 3, 4, 5], 0.90).half_width == pytest.approx(2.131847 * math.sqrt(0.5), rel=1e-6)


def test_interval_covers_the_true_mean_95_percent_of_the_time():
    """2000 samples of 4 normal draws: the 95% interval holds the true mean in 95% +- 1.5% of them."""
    rng = np.random.default_rng(3)
    hits = sum(mean_interval(rng.normal(10.0, 2.0, 4)).contains(10.0) for _ in range(2000))
    assert abs(hits / 2000 - 0.95) < 0.015


def test_nan_replicates_are_left_out_and_counted():
    iv = mean_interval([1.0, math.nan, 3.0, None])
    assert iv.n == 2 and iv.replicates == 4 and iv.mean == 2.0
    one = mean_interval([7.0])
    assert one.mean == 7.0 and math.isnan(one.low) and math.isnan(one.half_width)
    assert "no interval" in interval_text(one)
    assert "of 4" in interval_text(iv)
    assert Interval.from_dict(iv.to_dict()) == iv


def test_metric_intervals_skip_text_and_bools():
    ivs = metric_intervals([{"a": 1.0, "b": "x", "c": True}, {"a": 3.0, "b": "y", "c": False}])
    assert set(ivs) == {"a"} and ivs["a"].mean == 2.0


def test_replicate_seeds_are_spawned_children():
    assert replicate_seeds(7, 3) == replicate_seeds(7, 3)
    assert len(set(replicate_seeds(7, 5))) == 5
    assert replicate_seeds(7, 2) == replicate_seeds(7, 5)[:2]  # more replicates keep the first ones


@pytest.fixture(scope="module")
def replicated():
    s = load_scenario(DATA / "tiny.yaml").model_copy(update={"replicates": 3})
    return s, run_scenario(s)


def test_replicated_run_is_the_mean_of_its_seeds(replicated):
    """Each replicate equals a one-seed run with that seed; the run's figures are their means."""
    s, run = replicated
    singles = [run_scenario(s.model_copy(update={"replicates": 1, "seed": seed})) for seed in replicate_seeds(s.seed, 3)]
    for metric in ("goodput", "utilisation", "wait_p95_s", "jobs_completed"):
        values = [r.metrics[metric] for r in singles]
        assert run.metrics[metric] == pytest.approx(np.mean(values))
        iv = run.interval(metric)
        assert iv.n == 3 and iv.low <= iv.mean <= iv.high
        assert iv.sd == pytest.approx(np.std(values, ddof=1))
    assert run.metrics["replicates"] == 3 and run.metrics["seed"] == s.seed
    reps = run.table("replicates")
    assert set(reps["replicate"].tolist()) == {0, 1, 2}
    goodput = reps["value"][reps["metric"] == "goodput"]
    assert sorted(goodput) == pytest.approx(sorted(r.metrics["goodput"] for r in singles))
    target = next(t for t in run.targets if t["metric"] == "wait_p95_s")
    assert target["value"] == run.metrics["wait_p95_s"] and target["interval"]["n"] == 3


def test_replicated_run_round_trips_the_store_and_shows_in_the_report(replicated, tmp_path, capsys):
    from helpers import run_podsim

    _, run = replicated
    rid = append_run(tmp_path / "r.duckdb", run)
    listed = run_podsim(capsys, "report", "--store", str(tmp_path / "r.duckdb"), "--list")
    assert listed.code == 0 and f"run {rid}: tiny (cluster, ok, 3 replicates)" in listed.out
    back = load_run(tmp_path / "r.duckdb", rid)
    assert back.intervals.keys() == run.intervals.keys()
    assert back.interval("goodput").mean == pytest.approx(run.interval("goodput").mean)
    assert back.summary()["replicates"] == 3
    html = render_report(back)
    assert "Replicates of tiny: mean and 95% interval" in html
    assert "95% CI, n=3" in html


def test_a_replicated_summary_shows_mean_counts_as_figures(replicated):
    """Of replicates, job and failure counts are means: printed to 4 digits, still adding up."""
    import re

    from podsim.report.render import CLUSTER_ROWS, jobs_text

    _, run = replicated
    m = {**run.metrics, "jobs_completed": 235 / 3, "jobs_running": 5 / 3, "jobs_queued": 0.0, "jobs_unplaceable": 0.0,
         "jobs_not_arrived": 0.0, "jobs_total": 80.0}
    assert jobs_text(m) == "80 = 78.33 completed + 1.667 running + 0 queued + 0 never placeable + 0 not yet arrived"
    for label, cell in CLUSTER_ROWS:
        text = cell(run)
        assert not re.search(r"\d\.\d{6,}", text), f"{label}: {text}"


def test_step_study_refuses_replicates():
    s = load_scenario(DATA / "tiny_step.yaml")
    with pytest.raises(PodsimError, match="replicates 2: a step study draws nothing at random"):
        run_scenario(s.model_copy(update={"replicates": 2}))


def test_intervals_stay_inside_the_metrics_range():
    """A fraction's interval stays in [0, 1] and a duration's above 0 (the registry's units)."""
    from podsim.metrics import units

    ivs = metric_intervals([{"goodput": 0.99, "wait_p95_s": 0.0}, {"goodput": 0.90, "wait_p95_s": 600.0},
                            {"goodput": 1.0, "wait_p95_s": 0.0}], units=units())
    assert ivs["goodput"].high == 1.0 and 0 < ivs["goodput"].low < ivs["goodput"].mean
    assert ivs["wait_p95_s"].low == 0.0 and ivs["wait_p95_s"].high > ivs["wait_p95_s"].mean


def test_one_replicate_helper_for_job_streams_and_serving_fleets():
    """podsim.scenario.replicates: the seeds spawned from the root (the root itself for one run),
    progress over the replicates one after another, the means with intervals cut to the metric's
    range, settings kept from the first, and a table row per replicate and metric with a value."""
    from podsim.scenario.replicates import pool_replicates, run_replicates

    seen = []
    seeds, out = run_replicates(7, 3, lambda s, progress: (progress(5.0, 10.0), s)[1], lambda d, t: seen.append((d, t)))
    assert seeds == replicate_seeds(7, 3) and out == list(seeds) and seen == [(5.0, 30.0), (15.0, 30.0), (25.0, 30.0)]
    assert run_replicates(7, 1, lambda s, progress: (s, progress))[1] == [(7, None)]
    each = [{"generation": "tpu-v4", "goodput": g, "wait_p50_s": w, "engine_wall_s": 1.0} for g, w in
            ((0.99, 1.0), (0.2, float("nan")), (0.98, 3.0))]
    metrics, intervals, table = pool_replicates(each, seeds, 7, {"generation", "engine_wall_s"})
    assert metrics["generation"] == "tpu-v4" and metrics["seed"] == 7 and metrics["replicates"] == 3 and metrics["engine_wall_s"] == 3.0
    assert metrics["goodput"] == pytest.approx(0.7233333) and intervals["goodput"]["high"] == 1.0  # a fraction: cut at 1
    assert metrics["wait_p50_s"] == 2.0 and intervals["wait_p50_s"]["n"] == 2  # the NaN replicate left out
    rows = list(zip(table["replicate"], table["metric"], strict=True))
    assert len(rows) == 5 and (1, "wait_p50_s") not in rows and (1, "goodput") in rows
