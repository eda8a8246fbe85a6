"""The validation table: published measured step times next to podsim's prediction.

Rows come in modules by source: measurements.md's (`sheet_rows`: MLPerf Training logs, PaLM) and
MaxText's published tables (`maxtext_rows`), each with the setup its source states; where the
source leaves a choice open the row's `assumed` says what podsim takes. One rule for attention
for every row: an implementation that predates FlashAttention (Dao et al., May 2022) materialises
the attention scores in HBM (`attention="materialized"`): the MLPerf v0.7-v1.1 BERT-style rows and
PaLM; the 2023-24 GPT-3 and MaxText rows use a fused kernel.

Every row is scored against the value it implies (`implied_s`, split rule R6): a measured step
itself; a range (M6) its midpoint; an upper bound whose interval also runs an eval pass (the GPT-3
rows, measurements.md caveat 3) the training part of the bound, from podsim's own FLOP counts of
the row's training step (remat included) and of the forward pass of its eval sequences. error =
predicted / implied - 1.

Which rows set constants is not marked on any row: `podsim.validation.split.calibration_rows`
picks them from the rows' data by the split rule; they are left out of the plain summary and
scored with their held-out (cross-validated) error. `SERIES` groups the runs of one model at
several slice counts; `series_table` sets their measured per-chip throughput, relative to the
fewest slices, beside podsim's. Each row is a `StepStudy` (`row_study`) run by `run_study`;
multislice rows run as one job on several slices (`place_slices` packs them pod by pod), with the
DCN between them.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import replace

from podsim.engine import StepResult, step_summary
from podsim.perf import chips as chip_constants
from podsim.perf.efficiency import HBM, MATMUL, constant_name, fraction
from podsim.study import StepStudy, run_study
from podsim.study.study import study_trace
from podsim.topology import get_generation
from podsim.trace.configs import ResNetConfig
from podsim.trace.memory import fits_hbm
from podsim.trace.model import StepTrace
from podsim.trace.options import GenerateOptions
from podsim.trace.plans import model_config
from podsim.validation.bands import step_kind
from podsim.validation.maxtext_rows import MAXTEXT_ROWS, MAXTEXT_SERIES
from podsim.validation.mlperf_rows import MLPERF_ROWS, MLPERF_SERIES
from podsim.validation.quality import implied_utilisation, unscored_reason
from podsim.validation.row import Row, Series, per_chip_throughput, row_chips, row_key
from podsim.validation.sheet_rows import SHEET_ROWS, SHEET_SERIES

ROWS: tuple[Row, ...] = SHEET_ROWS + MLPERF_ROWS + MAXTEXT_ROWS
"""Every row of the table: the sheet's (podsim.validation.sheet_rows), the MLPerf logs' (mlperf_rows)
and MaxText's published tables' (maxtext_rows)."""
SERIES: tuple[Series, ...] = SHEET_SERIES + MLPERF_SERIES + MAXTEXT_SERIES
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


def hosts_unmodelled(row: Row) -> bool:
    """Whether the row's hosts run a named input pipeline whose rate has no basis
    (podsim.perf.chips.host_input_has_basis): the row then runs without its hosts. A pipeline or
    generation with no rate entry at all is a mistake in the row and raises."""
    o = row.options
    if o.input_pipeline == "none" or o.input_rate_per_host is not None:
        return False
    return not chip_constants.host_input_has_basis(row.generation, o.input_pipeline)


def setup_note(row: Row) -> str:
    """The row's note: what the sheet leaves open and podsim takes, then the TF1 gradient path."""
    o, parts = row.options, [row.assumed] if row.assumed else []
    if hosts_unmodelled(row):
        parts.append(f"the hosts' {o.input_pipeline} rate has no basis (podsim.perf.chips): run without the hosts")
    if o.combine_grad_reduce:
        dtype = "fp32" if o.grad_bytes == 4 else "bf16"
        parts.append(f"TF1: one {dtype} gradient all-reduce after backward" + (", a replica per TensorCore" if o.replicas_per_chip == 2 else "")
                     + (f", batch norm over {o.bn_group} replicas" if o.bn_group > 1 else ""))
    return "; ".join(parts)


def row_study(row: Row, recompute: str | bool | None = None) -> StepStudy:
    """The row's step as a study (`recompute`: instead of the row's own policy; hosts whose rate
    has no basis left out, `hosts_unmodelled`)."""
    options = row.options if recompute is None else replace(row.options, recompute=recompute)
    if hosts_unmodelled(row):
        options = replace(options, input_pipeline="none")
    return StepStudy(row.generation, row.shape, model=row.model, plan=row.plan, slices=row.slices,
                     model_overrides=row.overrides, options=options, name=row.id)


USER_OPTIONS = ("recompute", "microbatches", "precision", "optimizer", "input_pipeline", "input_rate_per_host",
                "capacity_factor")
"""What a user gives podsim for a published run beside its model, plan, slices and batch: what the run's
configuration names (its remat policy, micro-batches, matmul precision, optimizer, input pipeline and
rate, MoE capacity). Everything else (which matmuls are quantised, collective matmul, attention kernel,
sequence parallelism, overlap, wire dtypes, TF1 settings, mesh order and mapping) the row states from
its code, and a user would leave to podsim's defaults. (Two TF1 settings are flags of the MLPerf runs'
run_and_time.sh, not code: the replicas per chip, `num_cores`, and the batch-norm group,
`distributed_group_size`; they are left to the defaults with the rest of TF1's.)"""


def as_user(row: Row) -> Row:
    """The row as a user would give it (USER_OPTIONS kept, every other option podsim's default, as
    current programs run): the gap between its error and the row's own shows how much of the
    table's accuracy rests on settings read from each run's code."""
    return replace(row, options=GenerateOptions(**{k: getattr(row.options, k) for k in USER_OPTIONS}))


UNSTATED_REMAT = ("none", "minimal", "full")
"""The policies tried, least recompute first, where a row's source states none: the ones any
framework can run (`dots` and `save_attention` are named policies of JAX programs, taken only where
a row's code states them)."""


def fitting_study(row: Row) -> StepStudy:
    """The row's study. Where the sheet states no remat policy, the least recompute of
    UNSTATED_REMAT whose HBM footprint per chip fits the chip (podsim.trace.memory): a run must
    fit, and nobody recomputes more than they must."""
    if row.remat_stated:
        return row_study(row)
    capacity = get_generation(row.generation).hbm_per_chip.si
    for policy in UNSTATED_REMAT:
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
    return step_record(run_study(fitting_study(row)))


def step_record(r: StepResult) -> dict:
    """A step's summary (`step_summary`) with the recompute policy its trace ran."""
    return {**step_summary(r), "recompute": r.trace.meta["recompute"]}


_SHARE: dict[tuple, float] = {}


def train_share(row: Row) -> float:
    """The training part of an upper bound's interval (R6): T trained samples (sequences, images) at
    podsim's hardware FLOPs per trained sample (forward, backward and recompute, from the row's
    trace) over those plus E eval samples at the model's forward FLOPs each; 1 for a row without eval."""
    t, e = row.train_samples_per_interval, row.eval_samples_per_interval
    if not e:
        return 1.0
    key = row_key(row)
    if key not in _SHARE:
        trace = row_trace(row)
        cfg = model_config(row.model, row.overrides)
        train = float(trace.meta["hardware_flops_per_step"]) / cfg.global_batch
        forward = cfg.forward_flops_per_image() if isinstance(cfg, ResNetConfig) else cfg.forward_flops_per_token() * cfg.seq_len
        _SHARE[key] = t * train / (t * train + e * forward)
    return _SHARE[key]


def implied_s(row: Row) -> float:
    """The step time a row implies (R6): its measurement; a range's midpoint; an upper bound's
    training part (`train_share`)."""
    if row.kind == "range":
        return (row.measured_s + (row.measured_hi_s or row.measured_s)) / 2
    if row.kind == "upper_bound":
        return row.measured_s * train_share(row)
    return row.measured_s


def error(row: Row, predicted_s: float) -> float:
    """Signed error against the value the row implies: predicted / implied_s - 1."""
    return predicted_s / implied_s(row) - 1


def peak_scale(row: Row) -> float:
    """bf16 peak / the peak of the precision the row's matmuls run at: step_summary's
    utilisations are against the bf16 peak; the table's are against the precision's own (an
    int8 row on v5p against 918 TFLOP/s, not 459), so none reads over 100% for running int8."""
    cc = chip_constants.chip_compute(row.generation)
    return cc.peak_for("bf16") / cc.peak_for(row.options.precision, f"validation row {row.id}")


def no_basis(row: Row) -> tuple[str, ...]:
    """The compute constants the row reads that have no basis (neither a source nor an
    identifiable row: split rule A2), so run at the vendor's figure (podsim.perf.efficiency)."""
    chip = get_generation(row.generation).chip_id
    names = (constant_name(chip, MATMUL, row.options.precision), constant_name(chip, HBM))
    return tuple(n for n in names if fraction(n).basis == "none")


def record(row: Row, s: dict, sets: tuple[str, ...] = ()) -> dict:
    """A table record of a row from its step summary `s` (`predict`); `sets`: the constants the
    split rule has the row set (podsim.validation.split.calibration_rows), else it validates;
    `unscored`: the measurement-quality rule's reason to leave it out of every figure
    (podsim.validation.quality), Q2 read at the training step the row implies (R6)."""
    scale = peak_scale(row)
    hfu = s["hfu"] * scale if s.get("hfu") else None
    implied = implied_utilisation(hfu, s["step_time_s"], implied_s(row)) if hfu else None
    return {"id": row.id, "system": row.system, "model": row.model_name, "kind": row.kind, "corpus": row.corpus,
            "generation": row.generation, "slices": row.slices,
            "measured_s": row.measured_s, "measured_hi_s": row.measured_hi_s, "implied_s": implied_s(row), "predicted_s": s["step_time_s"],
            "error": error(row, s["step_time_s"]),
            "mfu": s["mfu"] * scale if s.get("mfu") else None, "hfu": hfu,
            "peak_precision": row.options.precision, "exposed_comm_s": s["exposed_comm_s"],
            "calibration": ", ".join(sets), "assumed": setup_note(row), "source": row.source,
            "engine_wall_s": s["engine_wall_s"], "recompute": s["recompute"],
            "hbm_bytes_per_chip": s.get("hbm_bytes_per_chip"), "hbm_fits": s.get("hbm_fits"),
            "unscored": unscored_reason(row, implied), "no_basis": no_basis(row)}


def constants_by_row(picks: dict[str, str]) -> dict[str, tuple[str, ...]]:
    """Row id -> the constants it sets, sorted, from `calibration_rows`' constant -> row id."""
    sets: dict[str, list[str]] = {}
    for name, rid in picks.items():
        sets.setdefault(rid, []).append(name)
    return {rid: tuple(sorted(names)) for rid, names in sets.items()}


def run_table(rows: tuple[Row, ...] = ROWS, on_row: Callable[[dict], None] | None = None,
              picks: dict[str, str] | None = None) -> list[dict]:
    """Each row's prediction and error at the constants in force; `mfu` and `hfu` against the peak
    of the row's precision (`peak_precision`), as `peak_scale` says; `picks` (constant -> row id,
    `calibration_rows`) tags the rows that set constants."""
    sets = constants_by_row(picks or {})
    out = []
    for row in rows:
        rec = record(row, predict(row), sets.get(row.id, ()))
        out.append(rec)
        if on_row:
            on_row(rec)
    return out


def summarise(table: list[dict]) -> dict:
    """Median and max |error| over the rows that set no constant and pass the quality rule."""
    errs = [abs(r["error"]) for r in table if not r["calibration"] and not r.get("unscored")]
    return {"rows": len(table), "validation_rows": len(errs), "median_abs_error": statistics.median(errs) if errs else 0.0,
            "max_abs_error": max(errs, default=0.0)}


def kind_figures(table: list[dict]) -> dict[str, dict]:
    """Per kind of run (generation x single slice or multislice, podsim.validation.bands.step_kind):
    median and max |error| over its validation rows (plain) and, where the records carry them, over
    every scored row of the kind with its cross-validated errors (`loo`, `loso`); rows the quality
    rule leaves out (`unscored`) count in neither."""
    def med(xs: list[float]) -> float:
        return statistics.median(xs) if xs else float("nan")

    out: dict[str, dict] = {}
    for kind in sorted({step_kind(r["generation"], r["slices"])[1:] for r in table}, key=lambda k: (k[1], k[0])):
        rs = [r for r in table if step_kind(r["generation"], r["slices"])[1:] == kind and not r.get("unscored")]
        plain = [abs(r["error"]) for r in rs if not r["calibration"]]
        fig = {"n": len(rs), "plain_n": len(plain), "plain_median": med(plain), "plain_max": max(plain, default=float("nan"))}
        for k in ("loo", "loso"):
            xs = [abs(r[k]) for r in rs if k in r]
            fig[f"{k}_median"], fig[f"{k}_max"] = med(xs), max(xs, default=float("nan"))
        out[f"{kind[1]} {kind[0]}"] = fig
    return out


def band_errors(table: list[dict], cv: dict[str, float]) -> list[tuple[tuple[str, ...], float]]:
    """(kind, cross-validated error) of every scored row, calibration rows with their held-out
    error (R5), for the error bands (podsim.validation.bands: `benchmarks/validation.py --write-bands`);
    not the rows the quality rule leaves out."""
    return [(step_kind(r["generation"], r["slices"]), cv[r["id"]]) for r in table if not r.get("unscored")]
