"""A grid sweep as a planner reads it: the swept fields pivoted, one table per metric, and the
ratio of each compared variant to the first (e.g. static / OCS at each host availability).

    tables = sweep_pivot(stored_sweep, runs)   # stored_sweep: podsim.store.load_stored_sweep

The compared field is the sweep's `compare` (a grid field), else its first grid field: its
values are the columns, every combination of the other swept fields a row. A cell is the mean
over the point's replicates, with its 95% interval when there are several (podsim.stats); the
ratio column divides each variant's mean by the first variant's. Pure: the HTML report and the
CLI show the same tables.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from podsim.metrics import units
from podsim.scenario.result import RunResult
from podsim.stats import clip_to_range, mean_interval

DEFAULT_METRICS = {"cluster": ("goodput", "utilisation", "useful_chip_h", "wait_p95_s"),
                   "step": ("step_time_s", "exposed_comm_s", "mfu")}


def _key(v: Any) -> str:
    return str(v)


def sweep_pivot(sweep: dict, runs: Sequence[RunResult], rows_meta: Sequence[dict] | None = None,
                metrics: Sequence[str] | None = None) -> dict | None:
    """The pivot of a stored grid sweep's runs: `compare` (the field), `variants` (its values),
    `fields` (the other swept fields), `tables` (one per metric: `metric`, `rows` of (key
    values, cells, ratios), each cell an Interval dict or None). `rows_meta`: the store rows of
    `runs` (their `point_overrides`), in the same order; default `sweep["runs"]` with status ok.
    None when the sweep has no grid to pivot."""
    spec = sweep.get("spec") or {}
    grid = spec.get("grid") or {}
    if not grid or sweep.get("mode") != "grid":
        return None
    rows_meta = list(rows_meta if rows_meta is not None else [r for r in sweep["runs"] if r["status"] == "ok"])
    if len(rows_meta) != len(runs):
        raise ValueError(f"{len(rows_meta)} store rows for {len(runs)} runs")
    compare = spec.get("compare") or next(iter(grid))
    if compare not in grid:
        raise ValueError(f"compare field {compare!r} is not swept; the grid sweeps {', '.join(grid)}")
    variants = [_key(v) for v in grid[compare]]
    fields = [f for f in grid if f != compare]
    kind = runs[0].kind if runs else "cluster"
    metrics = list(metrics or spec.get("show") or DEFAULT_METRICS.get(kind, ()))
    groups: dict[tuple, dict[str, list[RunResult]]] = {}
    for meta, run in zip(rows_meta, runs, strict=True):
        over = meta.get("point_overrides") or {}
        key = tuple(_key(over.get(f)) for f in fields)
        groups.setdefault(key, {}).setdefault(_key(over.get(compare)), []).append(run)
    order = [tuple(_key(v) for v in combo) for combo in _product([grid[f] for f in fields])]
    tables = []
    unit_of = units()
    for metric in metrics:
        rows = []
        for key in order:
            by = groups.get(key, {})
            cells = []
            for v in variants:
                vals = [r.metrics.get(metric) for r in by.get(v, [])]
                nums = [x for x in vals if isinstance(x, (int, float)) and not isinstance(x, bool)]
                cells.append(clip_to_range(mean_interval(nums), unit_of.get(metric)).to_dict() if nums else None)
            base = cells[0]["mean"] if cells and cells[0] else math.nan
            ratios = [None if c is None or not base or math.isnan(base) else c["mean"] / base for c in cells]
            rows.append((key, cells, ratios))
        tables.append({"metric": metric, "rows": rows})
    return {"compare": compare, "variants": variants, "fields": fields, "tables": tables}


def _product(lists: list[list]) -> list[tuple]:
    out: list[tuple] = [()]
    for values in lists:
        out = [(*p, v) for p in out for v in values]
    return out
