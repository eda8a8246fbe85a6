"""The MLPerf rows (podsim/validation/mlperf_rows.py) build as studies under their stated plans,
carry what the split rule needs, and the log derivation (mlperf_rows_logs.py) follows
measurements.md's method. No engine run: the errors are pinned in test_validation.py."""

from __future__ import annotations

import math

import pytest

from podsim.study.study import study_trace
from podsim.topology import parse_shape
from podsim.trace.mesh import parse_parallelism
from podsim.validation import ROWS, SERIES
from podsim.validation.mlperf_rows import MLPERF_ROWS, MLPERF_SERIES
from podsim.validation.mlperf_rows_logs import eval_intervals, events, pooled, training_blocks
from podsim.validation.quality import (
    MAX_INTERVAL_SPREAD,
    implied_utilisation,
    interval_spread,
    unscored_reason,
)
from podsim.validation.row import per_chip_throughput, row_chips
from podsim.validation.sheet_rows import MLPERF_ROUND_PUBLISHED, SHEET_ROWS
from podsim.validation.table import fitting_study, summarise


def test_every_mlperf_row_builds_under_its_plan():
    """Each row's plan covers its slice exactly, and its study's trace builds (trace generation
    and the HBM count only), with the recompute policy it states or the least that fits."""
    for row in MLPERF_ROWS:
        plan = parse_parallelism(row.plan)
        assert plan.ici_chips == math.prod(parse_shape(row.shape)) and plan.dcn == row.slices, row.id
        trace = study_trace(fitting_study(row))
        assert trace.meta["hbm_footprint"]["total_bytes"] > 0
        if row.remat_stated:
            assert trace.meta["recompute"] == row.options.recompute, row.id


def test_rows_join_the_table_once_dated_and_grouped():
    ids = [r.id for r in ROWS]
    assert len(ids) == len(set(ids)) and set(r.id for r in MLPERF_ROWS) <= set(ids)
    assert len(MLPERF_ROWS) >= 19 and not {r.id for r in MLPERF_ROWS} & {r.id for r in SHEET_ROWS}
    for r in MLPERF_ROWS:
        assert r.corpus == "mlperf-training" and r.published in MLPERF_ROUND_PUBLISHED.values(), r.id
        assert r.id.startswith("R") and r.source.startswith("mlcommons/training_results_v") and "@" in r.source, r.id


def test_upper_bounds_state_their_interval():
    """Split rule R6: a row whose interval holds an eval pass is an upper bound with its trained
    and evaluated samples; the trained ones are whole steps of the row's batch. Every sheet GPT-3
    bound carries the benchmark's 24,576 / 24,567."""
    for r in MLPERF_ROWS + SHEET_ROWS:
        if r.kind == "upper_bound":
            batch = r.overrides["global_batch"]
            assert r.train_samples_per_interval > 0 and r.eval_samples_per_interval > 0, r.id
            assert r.train_samples_per_interval % batch == 0, r.id
        elif r.corpus == "mlperf-training" and r.id.startswith("R"):
            assert r.train_samples_per_interval == r.eval_samples_per_interval == 0, r.id
    gpt3 = [r for r in SHEET_ROWS + MLPERF_ROWS if r.model_name == "gpt3-175b"]
    assert len(gpt3) == 12 and all((r.train_samples_per_interval, r.eval_samples_per_interval) == (24576, 24567) for r in gpt3)


def test_series_are_one_model_at_growing_chip_counts():
    by_id = {r.id: r for r in ROWS}
    assert set(MLPERF_SERIES) <= set(SERIES)
    for s in MLPERF_SERIES:
        rows = [by_id[i] for i in s.rows]
        assert len(rows) >= 3 and len({r.model_name for r in rows}) == 1 and len({r.generation for r in rows}) == 1, s.name
        chips = [row_chips(r) for r in rows]
        assert chips == sorted(chips) and len(set(chips)) == len(chips), s.name
        assert all(per_chip_throughput(r, r.measured_s) > 0 for r in rows)


V06 = """:::MLL 100.0 run_start: {"value": null, "metadata": {"lineno": 1, "file": "x"}}
:::MLL 130.0 eval_accuracy: {"value": 0.1, "metadata": {"epoch_num": 4}}
:::MLL 150.0 eval_accuracy: {"value": 0.2, "metadata": {"epoch_num": 8}}
:::MLL 160.0 eval_accuracy: {"value": 0.3, "metadata": {"epoch_num": 12}}
:::MLL 171.0 eval_accuracy: {"value": 0.4, "metadata": {"epoch_num": 16}}
"""
V07 = "\n".join(f':::MLLOG {{"namespace": "", "time_ms": {t}, "key": "{k}", "value": null, "metadata": {{}}}}' for t, k in (
    (0, "run_start"), (1000, "block_start"), (5000, "block_stop"), (5500, "block_start"), (8500, "block_stop"),
    (9000, "block_start"), (9100, "block_start"), (20000, "block_stop"), (21000, "block_start"), (23000, "block_stop"),
    (24000, "eval_accuracy"), (30000, "eval_accuracy"), (40000, "eval_accuracy"))) + "\nnot a log line\n"


def test_log_derivation_follows_the_method():
    """Intervals between eval points with each run's first left out, pooled over runs; training
    blocks with each run's first left out and a restarted block dropped; both log formats."""
    assert [e.key for e in events(V06)][:2] == ["run_start", "eval_accuracy"] and events(V06)[1].metadata == {"epoch_num": 4}
    assert eval_intervals([V06]) == [10.0, 11.0]
    assert eval_intervals([V06, V07]) == [10.0, 11.0, 10.0]
    assert training_blocks([V07]) == [3.0, 2.0]  # 4.0 (first) left out, the restarted block dropped
    p = pooled(eval_intervals([V06, V06]))
    assert (p.median_s, p.n, p.step_s(4)) == (10.5, 4, 10.5 / 4) and p.q1_s <= p.median_s <= p.q3_s
    with pytest.raises(ValueError, match="need at least 2"):
        pooled([1.0])


def test_the_quality_rule_reads_only_the_rows_intervals():
    """The measurement-quality rule (podsim/validation/quality.py, docs/validation.md): every row
    derived from MLPerf logs carries its pooled intervals; Q1 leaves out exactly the rows whose
    interquartile range is over 10% of their median, whatever podsim predicts for them (M6 and
    the round 1.0 and 2.0 BERT runs on 3456 chips: 49%, 28%, 63%; the next widest, R06-resnet-128,
    is 8%); Q2 leaves out a step that implies more than the chip's peak."""
    for r in ROWS:
        if r.corpus == "mlperf-training":
            assert r.intervals is not None and r.intervals.q1_s <= r.intervals.median_s <= r.intervals.q3_s, r.id
    unscored = {r.id for r in ROWS if unscored_reason(r)}
    assert unscored == {r.id for r in ROWS if (interval_spread(r) or 0) > MAX_INTERVAL_SPREAD}
    assert unscored == {"M6", "R10-bert-3456", "R20-bert-3456"}
    m1 = next(r for r in ROWS if r.id == "M1")
    assert "Q2" in unscored_reason(m1, implied_hfu=1.2) and unscored_reason(m1, implied_hfu=0.9) == ""
    assert implied_utilisation(0.5, 2.0, 1.0) == 1.0
    fake = [{"error": 0.01, "calibration": "", "unscored": ""}, {"error": 0.9, "calibration": "", "unscored": "Q1"}]
    assert summarise(fake)["max_abs_error"] == 0.01 and summarise(fake)["validation_rows"] == 1


def test_eval_interval_rows_are_bounds_with_the_chips_eval_work():
    """Split rule R6 alike for every row whose interval holds an eval pass (the sheet's M1-M9 and
    ML12 as the corpus's rows): an upper bound, or M6's range; the eval samples are what the chips
    ran (padded eval batches: ResNet's ceil(50,000 / eval batch) batches, at least the 50,000
    images; BERT's max_eval_steps batches, at least the 10,000 sequences)."""
    by_id = {r.id: r for r in ROWS}
    for rid in ("M1", "M2", "M3", "M4", "M5", "M7", "M8", "M9", "ML12"):
        assert by_id[rid].kind == "upper_bound", rid
    for r in ROWS:
        if r.kind == "upper_bound" and r.model_name == "resnet50":
            assert 50000 <= r.eval_samples_per_interval < 50000 + r.overrides["global_batch"] + 8192, r.id
        if r.kind == "upper_bound" and r.model_name == "bert-large":
            assert r.eval_samples_per_interval >= 10000 and r.eval_samples_per_interval % r.overrides["global_batch"] == 0, r.id
