"""Error bands (podsim/validation/bands.py): every step-time answer carries the typical error the
validation corpus measured for runs of its kind, falling back to a broader kind (and saying so)
when the corpus has too few runs of it."""

from __future__ import annotations

import math

import pytest

from podsim.validation import bands
from podsim.validation.bands import ErrorBand, band, bands_from_errors, quantile, step_kind

ERRORS = [(step_kind("tpu-v5e", 1), 0.10), (step_kind("tpu-v5e", 1), -0.02), (step_kind("tpu-v5e", 1), 0.04),
          (step_kind("tpu-v5e", 4), 0.08), (step_kind("tpu-v4", 1), -0.30)]


def test_quantile_matches_linear_interpolation():
    assert quantile([1, 2, 3, 4], 0.5) == 2.5
    assert quantile([0.0, 0.1], 0.68) == pytest.approx(0.068)
    assert quantile([7.0], 0.68) == 7.0


def test_every_prefix_pools_its_rows_absolute_errors():
    figs = bands_from_errors(ERRORS)
    assert figs[("step",)]["n_runs"] == 5 and figs[("step",)]["max"] == pytest.approx(0.30)
    assert figs[("step", "single-slice")]["n_runs"] == 4
    v5e = figs[("step", "single-slice", "tpu-v5e")]
    assert v5e["n_runs"] == 3 and v5e["median"] == pytest.approx(0.04)
    assert v5e["typical"] == pytest.approx(quantile([0.02, 0.04, 0.10], bands.TYPICAL_QUANTILE))


def test_a_kind_with_too_few_runs_falls_back_and_says_so():
    figs = bands_from_errors(ERRORS)
    own = band(step_kind("tpu-v5e", 1), figs)
    assert own.covered and own.used == own.kind and "of this kind" in own.text()
    thin = band(step_kind("tpu-v5e", 8), figs)  # one multislice run: too few, falls back to all steps
    assert not thin.covered and thin.used == ("step",) and thin.n_runs == 5
    assert "too few of multislice steps on tpu-v5e" in thin.text()
    none = band(step_kind("gpu-h100", 1), {})
    assert none.typical is None and "unknown" in none.text() and math.isnan(none.interval(1.0)[0])


def test_band_text_and_interval():
    b = ErrorBand(("step", "single-slice", "tpu-v5e"), ("step", "single-slice", "tpu-v5e"), 0.07, 31)
    assert b.with_value("8.1 s") == "8.1 s (typical error ±7% over 31 runs of this kind)"
    assert b.interval(10.0) == pytest.approx((9.3, 10.7))


def test_a_non_finite_error_is_refused():
    with pytest.raises(ValueError, match="non-finite"):
        bands_from_errors([(("step",), math.nan)])


def test_the_shipped_bands_are_the_pinned_tables():
    """podsim/data/error_bands.json is `benchmarks/validation.py --write-bands` of the table: every
    scored row's leave-one-out error (a row that sets a constant counts with its held-out error,
    split rule R5). The table's cross-validated errors are pinned row by row in
    tests/test_validation.py, so the stored figures must be those of the pinned |errors| (to the
    pins' rounding)."""
    from test_validation import PINNED_LOO

    from podsim.validation import ROWS
    from podsim.validation.quality import unscored_reason

    want = bands_from_errors((step_kind(r.generation, r.slices), PINNED_LOO[r.id]) for r in ROWS
                             if not unscored_reason(r))  # the rows the quality rule scores
    have = {k: v for k, v in bands.stored_bands().items() if k[0] == "step"}  # the serve bands: test_serving_table.py
    assert set(have) == set(want)
    for kind, fig in want.items():
        assert have[kind]["n_runs"] == fig["n_runs"], kind
        for f in ("typical", "median", "max"):
            assert have[kind][f] == pytest.approx(fig[f], abs=1.5e-3), (kind, f)
