"""The measurement-quality rule of the validation table: which rows' measurements can test a
prediction, decided from the rows' own data, the same way for every row, before any error is read
(docs/validation.md, "Which rows are scored").

The criteria are the reference sheet's own (shared/reference/measurements.md caveat 7: short eval
intervals are noisy, "those per-step figures are only ranges"; v1.0 BERT on 3456 chips left out
"because of high interval variance"; MLPerf v2.0 BERT on 4096 chips left out because its step "works out
to about 100% of bf16 peak if padding is counted"), stated as numbers:

- Q1, spread: the pooled intervals (or training blocks) the step derives from have an interquartile
  range over MAX_INTERVAL_SPREAD of their median. Then the middle half of the measurements spans
  more than +-5% around the median, the size of error the table sets out to resolve (issue 32: a
  median |error| of 5%), so the row cannot tell a right prediction from a wrong one.
- Q2, implied utilisation: the measured step implies more hardware FLOPs per second than the chip's
  peak for the row's precision, under podsim's own FLOP count of the row's setup (recompute
  included): physically impossible, so the run did less work than podsim counts (skipped padding,
  packing) and the row's setup is not what ran.

A row that fails either is shown with its reason and left out of every summary, band and pin.
A row without intervals (a stated throughput, P1) is judged by Q2 alone.
"""

from __future__ import annotations

from podsim.validation.row import Row

MAX_INTERVAL_SPREAD = 0.10
"""Q1: the largest interquartile range of a row's intervals, as a fraction of their median."""
MAX_IMPLIED_UTILISATION = 1.0
"""Q2: the largest hardware-FLOPs utilisation a measured step may imply (of the precision's peak)."""


def interval_spread(row: Row) -> float | None:
    """The interquartile range of the row's pooled intervals over their median; None without intervals."""
    p = row.intervals
    return None if p is None else (p.q3_s - p.q1_s) / p.median_s


def implied_utilisation(hfu_at_prediction: float, predicted_s: float, measured_s: float) -> float:
    """The hardware-FLOPs utilisation the measured step implies, from the prediction's (same
    FLOPs, over the measured time instead of the predicted one)."""
    return hfu_at_prediction * predicted_s / measured_s


def unscored_reason(row: Row, implied_hfu: float | None = None) -> str:
    """Why the row is not scored (Q1, Q2), or '' when it is. `implied_hfu`: the hardware-FLOPs
    utilisation of the row's precision peak its measured step implies (`implied_utilisation`)."""
    spread = interval_spread(row)
    if spread is not None and spread > MAX_INTERVAL_SPREAD:
        p = row.intervals
        return (f"not scored (Q1): its intervals' interquartile range ({p.q1_s:.4g}-{p.q3_s:.4g} s) is {spread:.0%} of "
                f"their median ({p.median_s:.4g} s), over {MAX_INTERVAL_SPREAD:.0%}")
    if implied_hfu is not None and implied_hfu > MAX_IMPLIED_UTILISATION:
        return (f"not scored (Q2): the measured step implies {implied_hfu:.0%} of the chip's {row.options.precision} peak "
                "under podsim's FLOP count of its setup")
    return ""
