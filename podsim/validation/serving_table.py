"""The serving validation table: every measured serving run (serving_rows.ROWS and the Saxml rows
of podsim.validation.serving) next to podsim's prediction, the calibration rows the rule picks,
and the cross-validated errors beside the plain ones.

The calibration rule (docs/validation.md, "Serving calibration rule"), as code:

- S1: an engine parameter with a source takes it (podsim.serving.engines); no row sets it.
- S2: otherwise, per engine parameter set and parameter, at most one row sets it, picked from the
  engine's rows by a data rule (`CALIBRATED`): the host time per layer from the batch-1 first-token
  row with the shortest prompt (ties: fewest layers); the host time per step of an engine with no
  such row from its first row in id order. The value makes that row's prediction its measurement
  (host time adds to every step and an offline run's steps do not depend on their times, so the
  value is solved in one run, and checked by a second).
- S3: an engine with no eligible row borrows the value of the nearest version of the same engine
  that has one (`BORROWS`); with none, the parameter stays as its source gives it (none: 0).
- Leave-one-out drops a row and re-applies S2-S3 to the rest; leave-one-source-out drops a whole
  source group (ServeRow.group). The Saxml rows set nothing: their cross-validated figure is the plain one.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable
from dataclasses import replace

import numpy as np

from podsim.errors import PodsimError
from podsim.serving.capacity import max_rate
from podsim.serving.engines import ENGINES, EngineModel, Sourced
from podsim.serving.result import ServingResult, simulate_serving
from podsim.serving.spec import ServingConfig
from podsim.validation.serving_rows import ALL_ROWS, ServeRow

CALIBRATED: dict[str, str] = {"tensorrt-llm-0.6": "layer_overhead_s", "jetstream": "step_overhead_s"}
"""The one calibrated parameter of each engine parameter set that has one (S2)."""
BORROWS: dict[str, str] = {"tensorrt-llm": "tensorrt-llm-0.6"}
"""An engine with no eligible row of its own takes this engine's calibrated value (S3)."""
GROUPS = ("trtllm-0.6", "trtllm-0.11", "mlperf-h100", "jetstream", "mlperf-tpu")
"""Source groups, the units leave-one-source-out drops."""
SERVER_REPLICATES, SERVER_TOLERANCE = 2, 0.25  # a Server row's rate search per replica: seeds, requests/s bracket


def _layers(row: ServeRow) -> int:
    return ServingConfig.model_validate(row.config).model.config().n_layers


def eligible(rows: Iterable[ServeRow], engine: str) -> list[ServeRow]:
    """The engine's rows S2 may pick from, in the rule's order (the first is picked)."""
    mine = [r for r in rows if r.engine == engine]
    if CALIBRATED.get(engine) == "layer_overhead_s":
        firsts = [r for r in mine if r.metric == "ttft"]
        return sorted(firsts, key=lambda r: (r.config["requests"]["prompt"]["mean"], _layers(r), r.id))
    return sorted(mine, key=lambda r: _id_key(r.id))


def _id_key(rid: str) -> tuple:
    head, _, num = rid.rpartition(".")
    return (head, int(num)) if num.isdigit() else (rid, 0)


def engine_for(row: ServeRow, values: dict[str, tuple[str, float]]) -> EngineModel:
    """The row's engine parameters with the calibrated values of `values` (engine -> (source, value))."""
    base = ENGINES[row.engine][_platform(row)]
    name = row.engine if row.engine in values else BORROWS.get(row.engine)
    param = CALIBRATED.get(row.engine) or CALIBRATED.get(BORROWS.get(row.engine, ""), "")
    if name is None or name not in values or not param:
        return replace(base, **{param: Sourced(0.0, "not calibrated: no eligible row (S3)")}) if param else base
    source, value = values[name]
    how = source if name == row.engine else f"{source}, borrowed from {name} (S3)"
    return replace(base, **{param: Sourced(value, how)})


def _platform(row: ServeRow) -> str:
    return "gpu" if row.generation.startswith("gpu") else "tpu"


def figure(row: ServeRow, r: ServingResult) -> float:
    """The row's figure from a simulation of its configuration."""
    m = r.metrics
    if row.metric == "ttft":
        return m["ttft_mean_s"]
    if row.metric == "tpg":
        return m["tokens_per_s"] / m["chips"]
    return m["tokens_per_s"] * row.replicas


def simulate(row: ServeRow, engine: EngineModel) -> ServingResult:
    return simulate_serving(ServingConfig.model_validate(row.config), engine=engine)


def calibrate(rows: Iterable[ServeRow]) -> dict[str, tuple[str, float]]:
    """S2 over `rows`: engine -> (the row that set it, value) for every engine with an eligible row."""
    rows = tuple(rows)
    out = {}
    for engine, param in CALIBRATED.items():
        pick = eligible(rows, engine)
        if not pick:
            continue
        row = pick[0]
        out[engine] = (f"calibration: {row.id} (serving rule S2)", solve(row, param))
    return out


def solve(row: ServeRow, param: str) -> float:
    """The value of `param` at which the row's prediction is its measurement: one run with it at 0
    (an offline run's steps are the same whatever their times), then the host time that closes
    the gap, spread over the steps (per layer: over steps x layers)."""
    base = ENGINES[row.engine][_platform(row)]
    zero = replace(base, **{param: Sourced(0.0, "x")})
    r = simulate(row, zero)
    if row.metric == "ttft":
        steps, gap = 1, row.measured - figure(row, r)
    else:
        m = r.metrics
        tokens = m["output_tokens"]
        steps = m["serving_steps"]
        gap = tokens * row.replicas / row.measured - tokens / m["tokens_per_s"]
    per = 1.0 / (steps * (_layers(row) if param == "layer_overhead_s" else 1))
    value = gap * per
    if value < 0:
        raise PodsimError(f"calibration row {row.id}: podsim is already slower than the measurement without host time "
                          f"({figure(row, r):.4g} against {row.measured:.4g}); the rule cannot set {param} from it")
    return value


def predict(row: ServeRow, values: dict[str, tuple[str, float]]) -> tuple[float | None, ServingResult | None, str]:
    """(figure, result, refusal) of a row under the calibrated values."""
    engine = engine_for(row, values)
    try:
        if row.metric == "server":
            return _server(row, engine)
        r = simulate(row, engine)
    except PodsimError as exc:
        return None, None, str(exc)
    return figure(row, r), r, ""


def _server(row: ServeRow, engine: EngineModel) -> tuple[float | None, ServingResult | None, str]:
    """MLPerf Server: the highest Poisson rate whose runs keep p99 TTFT and TPOT within the bounds,
    as scheduled samples/s over the replicas."""
    ttft, tpot = row.bound

    def worst(r: ServingResult) -> float:  # within the bound when <= 1
        m = r.metrics
        return max(m["ttft_p99_s"] / ttft, m["tpot_p99_s"] / tpot) if m["requests_unfinished"] == 0 else math.inf

    cfg = ServingConfig.model_validate(row.config)
    rate = max_rate(cfg, 1.0, metric=worst, replicates=SERVER_REPLICATES, tolerance_rps=SERVER_TOLERANCE, engine=engine)
    at = rate.at(rate.rate_rps) if rate.rate_rps else None
    if at is None:
        return None, None, f"no rate meets p99 TTFT <= {ttft:g} s and TPOT <= {tpot:g} s"
    return at.scheduled_rps * row.replicas, None, ""


def record(row: ServeRow, pred: float | None, r: ServingResult | None, refused: str, calibration: str,
           engine: EngineModel) -> dict:
    m = r.metrics if r is not None else {}
    return {"id": row.id, "group": row.group, "system": row.system, "engine": row.engine, "generation": row.generation,
            "metric": row.metric, "kind": row.kind, "measured": row.measured, "predicted": pred,
            "error": None if pred is None else pred / row.measured - 1, "refused": refused, "calibration": calibration,
            "assumed": row.assumed, "source": row.source, "engine_wall_s": m.get("engine_wall_s"),
            "concurrent_seqs_max": m.get("concurrent_seqs_max"), "engine_figures": engine.describe()}


def run_rows(rows: tuple[ServeRow, ...] = ALL_ROWS, on_row: Callable[[dict], None] | None = None,
             values: dict[str, tuple[str, float]] | None = None) -> list[dict]:
    """Each row's record under the rule's calibration over `rows` (or the given `values`)."""
    values = calibrate(rows) if values is None else values
    chosen = {src.split(":")[1].split("(")[0].strip(): f"{e}.{CALIBRATED[e]}" for e, (src, _) in values.items()}
    out = []
    for row in rows:
        pred, r, refused = predict(row, values)
        rec = record(row, pred, r, refused, chosen.get(row.id, ""), engine_for(row, values))
        out.append(rec)
        if on_row:
            on_row(rec)
    return out


def cross_validated(rows: tuple[ServeRow, ...], table: list[dict]) -> dict[str, dict[str, float | None]]:
    """Leave-one-out and leave-one-source-out error per row: the row predicted with S2-S3
    re-applied to the other rows (LOO), or to the rows of the other groups (LOSO). A row whose
    prediction no dropped row can change keeps its plain error."""
    plain = {r["id"]: r["error"] for r in table}
    full = calibrate(rows)
    setters = {src.split(":")[1].split("(")[0].strip() for src, _ in full.values()}
    loo, loso = dict(plain), dict(plain)
    for row in rows:
        if row.id in setters:
            values = calibrate(r for r in rows if r.id != row.id)
            pred, _, _ = predict(row, values)
            loo[row.id] = None if pred is None else pred / row.measured - 1
    for group in {r.group for r in rows}:
        others = [r for r in rows if r.group != group]
        values = calibrate(others)
        if values == full:
            continue
        for row in (r for r in rows if r.group == group):
            pred, _, _ = predict(row, values)
            loso[row.id] = None if pred is None else pred / row.measured - 1
    return {rid: {"plain": plain[rid], "loo": loo[rid], "loso": loso[rid]} for rid in plain}


def miss(err: float | None) -> float:
    """|error|, a refused row counting as a full miss."""
    return 1.0 if err is None else abs(err)


def summarise(table: list[dict], cv: dict[str, dict] | None = None) -> dict:
    """Median and max |error| over the rows that set no constant; with `cv`, the leave-one-out and
    leave-one-source-out medians over every row (calibration rows included, predicted without
    themselves)."""
    scored = [r for r in table if not r["calibration"]]
    errs = [miss(r["error"]) for r in scored]
    out = {"rows": len(table), "scored": len(scored), "calibration": len(table) - len(scored),
           "refused": sum(r["error"] is None for r in table), "groups": sorted({r["group"] for r in scored}),
           "median_abs_error": statistics.median(errs) if errs else math.nan, "max_abs_error": max(errs, default=math.nan)}
    if cv is not None:
        for k in ("loo", "loso"):
            e = [miss(v[k]) for v in cv.values()]
            out[f"{k}_median_abs_error"] = statistics.median(e) if e else math.nan
            out[f"{k}_max_abs_error"] = max(e, default=math.nan)
    return out


def band_errors(table: list[dict]) -> list[tuple[tuple[str, ...], float]]:
    """(kind, signed error) of every scored row for the error bands: ("serve", kind, generation)."""
    return [(("serve", r["kind"], r["generation"]), r["error"]) for r in table
            if not r["calibration"] and r["error"] is not None and np.isfinite(r["error"])]


def saxml_records(table: list[dict]) -> list[dict]:
    """The Saxml rows' records (podsim.validation.serving.run_table) in this table's fields: group
    mlperf-tpu, engine saxml; none calibrates (their engine's figures are praxis's code)."""
    return [{**r, "group": "mlperf-tpu", "engine": "saxml", "generation": "tpu-v5e",
             "metric": r["scenario"], "kind": "rate" if r["scenario"] == "server" else "throughput",
             "engine_figures": ENGINES["saxml"]["tpu"].describe()} for r in table]


def run_table(server: bool = False, on_row: Callable[[dict], None] | None = None, saxml_replicates: int | None = None,
              saxml_tolerance: float | None = None) -> tuple[list[dict], dict[str, dict]]:
    """The whole serving table: the engine rows (with the MLPerf Server rows' rate searches when
    `server`), then the Saxml rows (their rate searches with `saxml_replicates` seeds to
    `saxml_tolerance`, the module's defaults when None); and each row's cross-validated errors."""
    from podsim.validation import serving as saxml
    from podsim.validation.serving_rows import SERVER_ROWS

    rows = ALL_ROWS + (SERVER_ROWS if server else ())
    table = run_rows(rows, on_row)
    kw = {k: v for k, v in (("replicates", saxml_replicates), ("tolerance_rps", saxml_tolerance)) if v is not None}
    sax = saxml_records(saxml.run_table(**kw))
    for rec in sax:
        if on_row:
            on_row(rec)
    cv = cross_validated(rows, table)
    cv.update({r["id"]: {"plain": r["error"], "loo": r["error"], "loso": r["error"]} for r in sax})
    return table + sax, cv


def _fmt(metric: str, value: float | None) -> str:
    """A row's figure in its unit."""
    if value is None:
        return "refused"
    if metric == "ttft":
        return f"{value * 1e3:.1f} ms"
    if metric == "server":
        return f"{value:.2f}/s"
    if metric == "offline" and value < 100:  # a Saxml Offline row: seconds per batch
        return f"{value:.2f} s"
    return f"{value:,.0f} tok/s"


def line(r: dict, cv: dict[str, dict] | None = None) -> str:
    """One row of the printed table: id, source group, engine, measured, podsim, error, LOO and
    LOSO errors, system (and the calibration it sets)."""
    def pct(x: float | None) -> str:
        return "miss" if x is None else f"{x:+.1%}"

    c = cv.get(r["id"], {}) if cv else {}
    tag = f"  [calibration: {r['calibration']}]" if r["calibration"] else ""
    return (f"{r['id']:6} {r['group']:12} {r['engine']:17} {_fmt(r['metric'], r['measured']):>15} "
            f"{_fmt(r['metric'], r['predicted']):>15} {pct(r['error']):>7} {pct(c.get('loo', r['error'])):>7} "
            f"{pct(c.get('loso', r['error'])):>7}  {r['system']}{tag}")


HEADER = (f"{'id':6} {'group':12} {'engine':17} {'measured':>15} {'podsim':>15} {'error':>7} {'LOO':>7} {'LOSO':>7}  system")


def markdown(table: list[dict], cv: dict[str, dict]) -> str:
    """The table for docs/validation.md."""
    out = ["| id | source | engine | system | measured | podsim | error | leave-one-out | leave-one-source-out | note |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in table:
        c = cv[r["id"]]
        note = f"**calibration** ({r['calibration']})" if r["calibration"] else ""
        note += ("; " if note and r["assumed"] else "") + (r["assumed"] or "")
        cells = [("miss" if x is None else f"{x:+.1%}") for x in (r["error"], c["loo"], c["loso"])]
        out.append(f"| {r['id']} | {r['group']} | {r['engine']} | {r['system']} | {_fmt(r['metric'], r['measured'])} | "
                   f"{_fmt(r['metric'], r['predicted'])} | {' | '.join(cells)} | {note} |")
    return "\n".join(out)
