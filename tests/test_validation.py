"""The validation table (podsim/validation/table.py, docs/validation.md) is pinned: a change that
makes any row, or the summary, worse than recorded here fails. An improvement passes; record
it by updating PINNED from `benchmarks/validation.py` (and docs/validation.md)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from podsim.perf import chips
from podsim.topology import get_generation
from podsim.topology.shapes import validate_shape
from podsim.validation import ROWS, SERIES, run_table, series_table
from podsim.validation.quality import unscored_reason
from podsim.validation.table import (
    SERIES_TOLERANCE,
    error,
    peak_scale,
    predict,
    row_trace,
    summarise,
)

# |error| per row as recorded in docs/validation.md
PINNED: dict[str, float] = {"M1": 0.000, "M2": 0.000, "M3": 0.000, "ML12": 0.174, "M4": 0.024, "M5": 0.000, "M6": 0.000,
                             "M7": 0.056, "M8": 0.194, "M9": 0.095, "M10": 0.011, "M11": 0.000, "M12": 0.046, "M13": 0.000,
                             "M14": 0.000, "M15": 0.000, "M16": 0.015, "M17": 0.000, "P1": 0.022, "P1a": 0.043, "T4": 0.000,
                             "T12": 0.000,
                             # the MLPerf corpus (podsim/validation/mlperf_rows.py), as first run
                             "R06-resnet-64": 0.000, "R06-resnet-128": 0.360, "R06-resnet-512": 0.054, "R07-resnet-16": 0.000,
                             "R07-bert-16": 0.003, "R07-resnet-4096-jax": 0.000, "R07-resnet-64": 0.000, "R07-bert-64": 0.227,
                             "R07-resnet-256": 0.000, "R07-bert-256": 0.007, "R10-resnet-64": 0.006, "R10-resnet-2048": 0.000,
                             "R10-bert-3456": 0.418, "R20-resnet-3456": 0.000, "R20-bert-3456": 0.163, "R40-gpt3-1024": 0.035,
                             "R40-gpt3-1536": 0.047, "R41-gpt3-4096": 0.077, "R41-gpt3-6144": 0.049}
PINNED_SUMMARY = {"median_abs_error": 0.005, "max_abs_error": 0.360}  # the eval-interval rows as bounds, the quality rule's 3 rows left out (was 0.019, 0.418); 0.004 before the multislice terms of issue 32 (M10, P1)
SLACK = 0.02  # a row may drift by 2 points of error before the test calls it a regression
FAST = ("M1", "ML12", "M4", "M6", "M8")


def test_rows_are_sourced_and_few_set_constants():
    ids = [r.id for r in ROWS]
    assert len(ids) == len(set(ids)) and len(ROWS) >= 12
    # a row of the sheet's table cites it; a row beyond it, the sheet's caveat that lists it; ML12,
    # the calibration row of the hosts' JPEG rate issue 22 allows, hardware.md's ml.12
    # a row of the MLPerf corpus (podsim/validation/mlperf_rows.py), the results repository at its commit
    assert all(r.source.startswith(("measurements.md " + r.id, "measurements.md caveat")) or r.source.startswith("hardware.md ml.12 (")
               and r.id == "ML12" or r.corpus == "mlperf-training" and r.source.startswith("mlcommons/training_results_v")
               for r in ROWS)
    calibration = [r for r in ROWS if r.calibration]
    assert len(calibration) <= 4
    assert {r.calibration for r in calibration} == {"MATMUL_FRACTION", "HBM_FRACTION", "V6E_INT8_FRACTION", "V3_HOST_JPEG_IMAGES_PER_S"}
    assert set(PINNED) == set(ids)


def test_the_v3_multipod_rows_run_on_one_32x128_network():
    """M3 and M7 (MLPerf v0.7 "TPU v3-8192") run as the submission's code lays the 4096 chips out:
    one 32 x 128 ICI network (generations.yaml MULTIPOD-V07), its long axis a mesh line and its
    short one a ring (MULTIPOD-WRAP: --deepsea_wrap=false,true,false), not four pods over the DCN."""
    by_id = {r.id: r for r in ROWS}
    for rid in ("M3", "M7"):
        row = by_id[rid]
        assert (row.generation, row.shape, row.slices, row.plan) == ("tpu-v3-multipod", "32x128", 1, "data=4096")
        assert validate_shape(get_generation(row.generation), row.shape).wrap == (True, False)


def test_utilisation_is_against_the_rows_precision_peak():
    """An int8 row's MFU is taken against the int8 peak (v5p: 918 against 459 TFLOP/s bf16; v6e
    1836 against 918), so running int8 does not read as over 100%; bf16 rows and v4's int8 (the
    bf16 rate, v4.1) are unchanged."""
    by_id = {r.id: r for r in ROWS}
    assert peak_scale(by_id["M12"]) == pytest.approx(459 / 918) and peak_scale(by_id["M15"]) == pytest.approx(918 / 1836)
    assert peak_scale(by_id["M1"]) == 1.0 and peak_scale(by_id["M17"]) == 1.0


def test_error_rules():
    by_id = {r.id: r for r in ROWS}
    assert error(by_id["M1"], 1.1 * by_id["M1"].measured_s) == pytest.approx(0.1)
    m6 = by_id["M6"]  # a range: 0 inside, else to the nearer end
    assert error(m6, 0.0038) == 0.0 and error(m6, 0.0021) == pytest.approx(0.0021 / 0.0034 - 1)
    assert error(m6, 0.0063) == pytest.approx(0.5)
    ub = by_id["M11"]  # an upper bound: met from 75% of it up to it
    assert error(ub, 0.8 * ub.measured_s) == 0.0 and error(ub, ub.measured_s) == 0.0
    assert error(ub, 1.1 * ub.measured_s) == pytest.approx(0.1)
    assert error(ub, 0.6 * ub.measured_s) == pytest.approx(0.6 / 0.75 - 1)


def _check(table):
    for r in table:
        assert abs(r["error"]) <= PINNED[r["id"]] + SLACK, f"{r['id']}: |error| {abs(r['error']):.3f} > pinned {PINNED[r['id']]:.3f}"


def test_fast_rows_hold_their_fidelity():
    table = run_table(tuple(r for r in ROWS if r.id in FAST))
    _check(table)
    ml12 = next(r for r in table if r["id"] == "ML12")
    assert ml12["predicted_s"] == pytest.approx(32768 / 32 / chips.V3_HOST_JPEG_IMAGES_PER_S, rel=1e-9)  # input-bound


def test_uncached_jpeg_rows_are_input_bound_and_say_so():
    """M2 (v0.6 code, no --cache_decoded_image) waits for its 128 hosts; M1 (cached) does not."""
    by_id = {r.id: r for r in ROWS}
    m2, m1 = predict(by_id["M2"]), predict(by_id["M1"])
    assert m2["input_bound"] and m2["step_time_s"] == pytest.approx(32768 / 128 / chips.V3_HOST_JPEG_IMAGES_PER_S, rel=1e-9)
    assert not m1["input_bound"] and m1["input_s"] == 0


IN_SERIES = {rid for s in SERIES for rid in s.rows}


@pytest.mark.slow
@pytest.mark.parametrize("row_id", [r.id for r in ROWS if r.id not in FAST and r.id not in IN_SERIES])
def test_every_row_holds_its_fidelity(row_id):
    """One test per row, so the table's slow rows spread over cores (make test runs this file
    with pytest-xdist); together with the fast rows and the series they cover the whole table."""
    _check(run_table(tuple(r for r in ROWS if r.id == row_id)))


@pytest.mark.slow
@pytest.mark.parametrize("series", SERIES, ids=[s.rows[0] for s in SERIES])
def test_multislice_series_keep_their_per_chip_throughput_ratio(series):
    """Each multislice series (one model at several slice counts) reproduces its measured per-chip
    throughput relative to its fewest slices within 5 points (issue 22), and each of its rows
    holds its own pin."""
    table = run_table(tuple(r for r in ROWS if r.id in series.rows))
    _check(table)
    for r in series_table(table, (series,)):
        allowed = max(SERIES_TOLERANCE, SERIES_GAP_PINNED.get(r["id"], 0.0) + SLACK)
        assert abs(r["difference"]) <= allowed, f"{r['id']}: {r['predicted_ratio']:.3f} vs measured {r['measured_ratio']:.3f}"


# The MLPerf corpus's series (podsim/validation/mlperf_rows.py) as first run: |predicted - measured|
# per-chip throughput ratio where it is over the 5-point tolerance, pinned so it can only shrink
SERIES_GAP_PINNED = {"R06-resnet-128": 0.285, "ML12": 0.153, "R06-resnet-512": 0.068, "R07-resnet-64": 0.057, "R07-resnet-256": 0.175,
                     "R07-bert-256": 0.147, "R10-resnet-2048": 0.093, "M5": 0.097, "R40-gpt3-1024": 0.352,
                     "R40-gpt3-1536": 0.364, "M12": 0.362, "R41-gpt3-4096": 0.087, "R41-gpt3-6144": 0.060}


def test_series_ratios_are_per_chip_throughput_over_the_fewest_slices():
    """The series figure on two made-up records: throughput per chip is batch / step / chips."""
    by_id = {r.id: r for r in ROWS}
    t4, m15 = by_id["T4"], by_id["M15"]
    fake = [{"id": r.id, "predicted_s": 2 * r.measured_s} for r in ROWS]
    rows = {r["id"]: r for r in series_table(fake)}
    want = (2048 / t4.measured_s / 1024) / (1536 / m15.measured_s / 512)
    assert rows["T4"]["measured_ratio"] == pytest.approx(want) and rows["T4"]["predicted_ratio"] == pytest.approx(want)
    assert rows["M15"]["difference"] == 0.0 and rows["T4"]["chips"] == 1024


def test_pinned_summary_follows_from_the_pinned_rows():
    """The summary cannot worsen beyond its pin while every row holds its own pin: the median and
    max of the pinned |errors| (validation rows only) are the recorded summary."""
    table = [{"id": r.id, "error": PINNED[r.id], "calibration": r.calibration, "unscored": unscored_reason(r)} for r in ROWS]
    s = summarise(table)
    assert s["median_abs_error"] == pytest.approx(PINNED_SUMMARY["median_abs_error"], abs=1e-3)
    assert s["max_abs_error"] == pytest.approx(PINNED_SUMMARY["max_abs_error"], abs=1e-3)


def test_unstated_remat_is_the_least_recompute_that_fits_hbm():
    """Rows whose source states no remat policy take the least recompute whose HBM footprint
    fits the chip: M16's 482B encoder cannot keep its activations (none or minimal) in 32 GiB."""
    by_id = {r.id: r for r in ROWS}
    cap = get_generation("tpu-v4").hbm_per_chip.si
    m16 = by_id["M16"]
    assert not m16.remat_stated and row_trace(m16).meta["recompute"] == "full"
    for policy in ("none", "minimal"):
        fp = row_trace(replace(m16, remat_stated=True, options=replace(m16.options, recompute=policy))).meta["hbm_footprint"]
        assert fp["total_bytes"] > cap
    assert row_trace(by_id["M1"]).meta["recompute"] == "none"
    assert row_trace(by_id["M11"]).meta["recompute"] == "full"  # stated by the sheet: kept as stated


def test_encoder_rows_have_the_sheets_parameter_counts():
    """M16 and M17 are built from sizes; the parameters they come to must be the sheet's (481.8B:
    only with M16's class's gated FFN, multi-query attention and 128-wide heads; 199.7B)."""
    by_id = {r.id: r for r in ROWS}
    assert by_id["M16"].model.params == pytest.approx(481.8e9, rel=1e-3)
    assert by_id["M17"].model.params == pytest.approx(199.7e9, rel=1e-3)
