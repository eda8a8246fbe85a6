"""The validation table: published measured step times next to podsim's prediction.

Rows are those of shared/reference/measurements.md (ids M1..M17, P1) with the setups the
sheet states; where the sheet leaves a choice open (a sharding inside a slice, a remat policy)
the row's `assumed` says what podsim takes. One rule for all rows: an implementation that
predates FlashAttention (Dao et al., May 2022) materialises the attention scores in HBM
(`attention="materialized"`): the MLPerf v0.7-v1.1 BERT-style rows and PaLM; the 2023-24
GPT-3 rows use a fused kernel (M11 states flash attention). `kind`:

- `measured`: a derived training step time; error = predicted / measured - 1;
- `range`: the sheet gives a range (M6); error 0 inside it, else to the nearer end;
- `upper_bound`: the GPT-3 rows (an eval pass inside each interval, caveat 3): met when the
  prediction is at or below the bound and within 25% of it; error 0 then, else the distance
  to that band.

Rows beyond the sheet's table name their source: the Trillium GPT-3 runs on 4 and 12 slices
(T4, T12) that the sheet lists in its caveat 10, derived from the logs exactly as its method
section says, and PaLM on one pod (P1a) from its caveat 8. `SERIES` groups the runs of one model
at several slice counts; `series_table` sets their measured per-chip throughput, relative to the
fewest slices, beside podsim's.

At most four rows set constants (`calibration`, see podsim.perf.chips); they are left out of
the summary statistics. One row is not in measurements.md or its caveats: ML12 (hardware.md ml.12),
which issue 22 allows as the calibration row of the hosts' JPEG input rate. An upper-bound row is calibrated to the training part of its interval
(`calibration_target_s`). Each row is a `StepStudy` (`row_study`) run by `run_study`; multislice
rows run as one job on several slices (`place_slices` packs them pod by pod), with the DCN
between them.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace

from podsim.engine import step_summary
from podsim.perf import chips as chip_constants
from podsim.study import StepStudy, run_study
from podsim.study.study import study_trace
from podsim.topology import get_generation
from podsim.trace.generate import RECOMPUTE_POLICIES
from podsim.trace.memory import fits_hbm
from podsim.trace.model import StepTrace
from podsim.validation.bands import step_kind
from podsim.validation.mlperf_rows import MLPERF_ROWS, MLPERF_SERIES
from podsim.validation.quality import implied_utilisation, unscored_reason
from podsim.validation.row import Row, Series, per_chip_throughput, row_chips
from podsim.validation.sheet_rows import SHEET_ROWS, SHEET_SERIES

UPPER_BOUND_BAND = 0.25

ROWS: tuple[Row, ...] = SHEET_ROWS + MLPERF_ROWS
"""Every row of the table: the sheet's (podsim.validation.sheet_rows) and the MLPerf logs' (mlperf_rows)."""
SERIES: tuple[Series, ...] = SHEET_SERIES + MLPERF_SERIES
SERIES_TOLERANCE = 0.05  # the predicted per-chip throughput ratio within 5 points of the measured one


def series_table(table: list[dict], series: tuple[Series, ...] = SERIES) -> list[dict]:
    """Per series and row: slices, measured and predicted per-chip throughput relative to the
    series' fewest slices, and the difference in points (`table`: run_table's records, holding
    every row of the series asked for)."""
    by_id, rows = {r["id"]: r for r in table}, {r.id: r for r in ROWS}
    out = []
    for s in series:
        first = rows[s.rows[0]]
        m0 = per_chip_throughput(first, first.measured_s)
        p0 = per_chip_throughput(first, by_id[first.id]["predicted_s"])
        for rid in s.rows:
            row = rows[rid]
            m = per_chip_throughput(row, row.measured_s) / m0
            p = per_chip_throughput(row, by_id[rid]["predicted_s"]) / p0
            out.append({"series": s.name, "id": rid, "slices": row.slices, "chips": row_chips(row),
                        "measured_ratio": m, "predicted_ratio": p, "difference": p - m})
    return out


def setup_note(row: Row) -> str:
    """The row's note: what the sheet leaves open and podsim takes, then the TF1 gradient path."""
    o, parts = row.options, [row.assumed] if row.assumed else []
    if o.combine_grad_reduce:
        dtype = "fp32" if o.grad_bytes == 4 else "bf16"
        parts.append(f"TF1: one {dtype} gradient all-reduce after backward" + (", a replica per TensorCore" if o.replicas_per_chip == 2 else "")
                     + (f", batch norm over {o.bn_group} replicas" if o.bn_group > 1 else ""))
    return "; ".join(parts)


def row_study(row: Row, recompute: str | bool | None = None) -> StepStudy:
    """The row's step as a study (`recompute`: instead of the row's own policy)."""
    options = row.options if recompute is None else replace(row.options, recompute=recompute)
    return StepStudy(row.generation, row.shape, model=row.model, plan=row.plan, slices=row.slices,
                     model_overrides=row.overrides, options=options, name=row.id)


def fitting_study(row: Row) -> StepStudy:
    """The row's study. Where the sheet states no remat policy, the least recompute (none,
    minimal, full) whose HBM footprint per chip fits the chip (podsim.trace.memory): a run must
    fit, and nobody recomputes more than they must."""
    if row.remat_stated:
        return row_study(row)
    capacity = get_generation(row.generation).hbm_per_chip.si
    for policy in RECOMPUTE_POLICIES:
        study = row_study(row, policy)
        if fits_hbm(study_trace(study).meta["hbm_footprint"]["total_bytes"], capacity):
            return study
    return study  # fits under no policy: the table's hbm column says so


def row_trace(row: Row) -> StepTrace:
    """The trace of the row's study (`fitting_study`)."""
    return study_trace(fitting_study(row))


def predict(row: Row) -> dict:
    """Run the row's study (several slices: one job on `place_slices`, the DCN between them), and
    return the step summary with the recompute policy used."""
    r = run_study(fitting_study(row))
    return {**step_summary(r), "recompute": r.trace.meta["recompute"]}


def error(row: Row, predicted_s: float) -> float:
    """Signed error as the module docstring defines it per kind."""
    m = row.measured_s
    if row.kind == "range":
        hi = row.measured_hi_s or m
        return 0.0 if m <= predicted_s <= hi else (predicted_s / m - 1 if predicted_s < m else predicted_s / hi - 1)
    if row.kind == "upper_bound":
        lo = (1 - UPPER_BOUND_BAND) * m
        return 0.0 if lo <= predicted_s <= m else (predicted_s / m - 1 if predicted_s > m else predicted_s / lo - 1)
    return predicted_s / m - 1


def peak_scale(row: Row) -> float:
    """bf16 peak / the peak of the precision the row's matmuls run at: step_summary's
    utilisations are against the bf16 peak; the table's are against the precision's own (an
    int8 row on v5p against 918 TFLOP/s, not 459), so none reads over 100% for running int8."""
    cc = chip_constants.chip_compute(row.generation)
    return cc.peak_for("bf16") / cc.peak_for(row.options.precision, f"validation row {row.id}")


def run_table(rows: tuple[Row, ...] = ROWS, on_row: Callable[[dict], None] | None = None) -> list[dict]:
    """Each row's prediction and error; `mfu` and `hfu` against the peak of the row's precision
    (`peak_precision`), as `peak_scale` says."""
    out = []
    for row in rows:
        s = predict(row)
        scale = peak_scale(row)
        implied = implied_utilisation(s["hfu"] * scale, s["step_time_s"], row.measured_s) if s.get("hfu") else None
        rec = {"id": row.id, "system": row.system, "model": row.model_name, "kind": row.kind,
               "generation": row.generation, "slices": row.slices,
               "measured_s": row.measured_s, "measured_hi_s": row.measured_hi_s, "predicted_s": s["step_time_s"],
               "ratio": s["step_time_s"] / row.measured_s, "error": error(row, s["step_time_s"]),
               "mfu": s["mfu"] * scale if s.get("mfu") else None, "hfu": s["hfu"] * scale if s.get("hfu") else None,
               "peak_precision": row.options.precision, "exposed_comm_s": s["exposed_comm_s"],
               "calibration": row.calibration, "assumed": setup_note(row), "source": row.source,
               "engine_wall_s": s["engine_wall_s"], "recompute": s["recompute"],
               "hbm_bytes_per_chip": s.get("hbm_bytes_per_chip"), "hbm_fits": s.get("hbm_fits"),
               "unscored": unscored_reason(row, implied)}  # the measurement-quality rule (podsim.validation.quality)
        out.append(rec)
        if on_row:
            on_row(rec)
    return out


def summarise(table: list[dict]) -> dict:
    """Median and max |error| over the rows that set no constant and pass the quality rule."""
    errs = [abs(r["error"]) for r in table if not r["calibration"] and not r.get("unscored")]
    return {"rows": len(table), "validation_rows": len(errs), "median_abs_error": statistics.median(errs) if errs else 0.0,
            "max_abs_error": max(errs, default=0.0)}


CONSTANTS = ("MATMUL_FRACTION", "HBM_FRACTION", "V6E_INT8_FRACTION", "V3_HOST_JPEG_IMAGES_PER_S")
BOUNDS = {"V3_HOST_JPEG_IMAGES_PER_S": (1.0, 1e9)}
"""Where a constant may range while it is solved (fractions: 0.05 to 1)."""


@contextmanager
def fractions(**values: float) -> Iterator[None]:
    """Temporarily set calibrated constants of podsim.perf.chips (achievable fractions, the host
    input rate) by name (calibration only)."""
    unknown = set(values) - set(CONSTANTS)
    if unknown:
        raise ValueError(f"not a calibrated constant: {sorted(unknown)}")
    old = {k: getattr(chip_constants, k) for k in values}
    for k, v in values.items():
        setattr(chip_constants, k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            setattr(chip_constants, k, v)


def calibration_target_s(row: Row) -> float:
    """The step time a calibration row is fitted to: its measurement; for an upper-bound row the
    training part of its interval: T trained samples at the training rate, with full remat 4
    forward passes each (3 without), beside E eval samples at one forward pass each
    (Row.train_samples_per_interval, eval_samples_per_interval; measurements.md caveat 3)."""
    if row.kind != "upper_bound":
        return row.measured_s
    forwards = 4 if row.options.recompute == "full" else 3
    t, e = row.train_samples_per_interval, row.eval_samples_per_interval
    return row.measured_s * t * forwards / (t * forwards + e)


def _solve(row: Row, which: str, others: dict[str, float], start: float, tol: float = 1e-3, evals: int = 8) -> float:
    """The value (a fraction at most 1; a rate within BOUNDS) that makes `row`'s prediction equal
    its calibration target: secant steps on predicted / target - 1 (the step time falls as the
    value grows)."""
    target = calibration_target_s(row)
    lo, hi = BOUNDS.get(which, (0.05, 1.0))

    def gap(f: float) -> float:
        with fractions(**{**others, which: f}):
            return predict(row)["step_time_s"] / target - 1

    x0, x1 = start, min(start * 1.05, hi) if start < hi else start * 0.95
    g0, g1 = gap(x0), gap(x1)
    for _ in range(evals):
        if abs(g1) < tol or g1 == g0:
            break
        x0, x1, g0 = x1, min(max(x1 - g1 * (x1 - x0) / (g1 - g0), lo), hi), g1
        g1 = gap(x1)
        if x1 == hi and g1 > 0:  # even the whole of peak / bandwidth is too slow: cap at the bound
            break
    return x1


def calibrate(rounds: int = 2) -> dict[str, float]:
    """Set each constant from its calibration row, in turn (each row depends a little on the
    others' constants), `rounds` times."""
    rows = {r.calibration: r for r in ROWS if r.calibration}
    values = {k: getattr(chip_constants, k) for k in CONSTANTS}
    for _ in range(rounds):
        for k in CONSTANTS:
            values[k] = _solve(rows[k], k, {o: v for o, v in values.items() if o != k}, values[k])
    return values


def band_errors(table: list[dict]) -> list[tuple[tuple[str, ...], float]]:
    """(kind, error) of every row that sets no constant, for the error bands
    (podsim.validation.bands: `benchmarks/validation.py --write-bands`)."""
    return [(step_kind(r["generation"], r["slices"]), r["error"]) for r in table if not r["calibration"] and not r.get("unscored")]
