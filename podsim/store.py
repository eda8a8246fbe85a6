"""The results store: runs and sweeps in one DuckDB file, readable by SQL, the report and the
dashboard.

Tables: `runs` (one row per run or sweep point: key figures as columns, the scenario, metrics,
cost, targets and references as JSON), `sweeps` (one row per sweep: its spec and, for capacity
sweeps, the answer), and one table per result table of podsim.scenario.result.TABLES (timeseries,
jobs, step_times, step_ops, step_kinds), each row keyed by `run_id`.

Every call opens the file, does its work in one transaction and closes it again, so a sweep
writing points and a dashboard reading them take turns instead of holding the file's lock
(DuckDB lets one process write at a time). A writer that finds the file locked retries for a
few seconds.

    from podsim.store import list_runs, load_run
    rows = list_runs("out/demo/results.duckdb")          # newest first
    result = load_run("out/demo/results.duckdb", rows[0]["run_id"])   # a RunResult
"""

from __future__ import annotations

import datetime as dt
import json
import math
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from podsim.errors import PodsimError
from podsim.files import check_store, inside, output_folder, write_parquet
from podsim.metrics import store_columns
from podsim.scenario.result import TABLES, RunResult, _clean, normalise_table

SCHEMA_VERSION = 1
_KIND_SQL = {"f": "DOUBLE", "i": "BIGINT", "s": "VARCHAR", "b": "BOOLEAN"}
_HEADLINE = store_columns()  # runs columns copied from the metrics for SQL (the metric registry's)
_RUN_COLUMNS = {
    "run_id": "VARCHAR PRIMARY KEY", "created_at": "TIMESTAMP", "name": "VARCHAR", "kind": "VARCHAR",
    "status": "VARCHAR", "error": "VARCHAR", "scenario_hash": "VARCHAR", "sweep_id": "VARCHAR",
    "point_key": "VARCHAR", "point_label": "VARCHAR", "point_json": "VARCHAR", "computed": "INTEGER",
    "attempts": "INTEGER", "targets_met": "BOOLEAN", "wall_s": "DOUBLE", **_HEADLINE, "scenario_json": "VARCHAR",
    "metrics_json": "VARCHAR", "topology_json": "VARCHAR", "cost_json": "VARCHAR", "targets_json": "VARCHAR",
    "references_json": "VARCHAR", "intervals_json": "VARCHAR",
}
_SWEEP_COLUMNS = {
    "sweep_id": "VARCHAR PRIMARY KEY", "created_at": "TIMESTAMP", "name": "VARCHAR", "mode": "VARCHAR",
    "points": "INTEGER", "source": "VARCHAR", "spec_json": "VARCHAR", "result_json": "VARCHAR",
}


def _ddl(have: set[tuple[str, str]]) -> list[str]:
    """What a store whose tables have the columns `have` ((table, column) pairs) lacks: its
    missing tables, and the result-table columns appended to TABLES since it was written (NULL
    in its old rows). Only those: one ALTER per column on every write cost ~10 ms a connection."""
    out = [f"CREATE TABLE IF NOT EXISTS runs ({', '.join(f'{k} {v}' for k, v in _RUN_COLUMNS.items())})",
           f"CREATE TABLE IF NOT EXISTS sweeps ({', '.join(f'{k} {v}' for k, v in _SWEEP_COLUMNS.items())})",
           "CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR)"]
    tables = {t for t, _ in have}
    if "runs" in tables:  # columns added to runs since the store was written (NULL in its old rows)
        out += [f"ALTER TABLE runs ADD COLUMN IF NOT EXISTS {c} {t}" for c, t in _RUN_COLUMNS.items()
                if ("runs", c) not in have and "PRIMARY" not in t]
    for name, cols in TABLES.items():
        if name not in tables:
            body = ", ".join(["run_id VARCHAR"] + [f'"{c}" {_KIND_SQL[k]}' for c, k in cols.items()])
            out.append(f"CREATE TABLE IF NOT EXISTS {name} ({body})")
        else:
            out += [f'ALTER TABLE {name} ADD COLUMN IF NOT EXISTS "{c}" {_KIND_SQL[k]}' for c, k in cols.items() if (name, c) not in have]
    return out


@contextmanager
def connect(store: str | Path, read_only: bool = False, wait_s: float = 15.0) -> Iterator[duckdb.DuckDBPyConnection]:
    """A short-lived connection to the store (created with its tables on first write)."""
    path = Path(store)
    if read_only and not path.exists():
        raise PodsimError(f"results store {str(path)!r} does not exist; `podsim run` or `podsim sweep` creates it")
    check_store(path, read_only)  # a FIFO or a device is refused before DuckDB opens it (it would block)
    if not read_only:
        output_folder(path.parent, "results store folder")
    deadline = time.monotonic() + wait_s
    while True:
        try:
            con = duckdb.connect(str(path), read_only=read_only)
            break
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower() or time.monotonic() > deadline:
                raise PodsimError(f"cannot open results store {str(path)!r}: {' '.join(str(exc).split())}") from None
            time.sleep(0.05)
        except duckdb.Error as exc:
            raise PodsimError(f"{str(path)!r} is not a podsim results store: {' '.join(str(exc).split())}") from None
    try:
        if not read_only:
            have = con.execute("SELECT table_name, column_name FROM information_schema.columns "
                               "WHERE table_schema = 'main'").fetchall()
            for stmt in _ddl(set(have)):
                con.execute(stmt)
            con.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
        yield con
    finally:
        con.close()


def _json(x: Any) -> str:
    return json.dumps(_clean(x), default=str)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


def new_run_id(name: str) -> str:
    stamp = _now().strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{''.join(c if c.isalnum() else '-' for c in name)[:24]}-{secrets.token_hex(3)}"


def _arrow(name: str, run_id: str, columns: dict[str, np.ndarray]) -> pa.Table:
    cols = normalise_table(name, columns)
    n = len(next(iter(cols.values()))) if cols else 0
    arrays = {"run_id": pa.array([run_id] * n, pa.string())}
    for c, kind in TABLES[name].items():
        arrays[c] = pa.array(list(cols[c]), pa.string()) if kind == "s" else pa.array(cols[c])
    return pa.table(arrays)


def _headline(result: RunResult) -> dict:
    m = result.metrics
    out = {}
    for k in _HEADLINE:
        v = m.get(k, result.topology.get(k))
        out[k] = None if isinstance(v, float) and math.isnan(v) else v
    return out


def _insert_run(con, row: dict, result: RunResult | None) -> None:
    cols = list(_RUN_COLUMNS)
    con.execute(f"INSERT INTO runs ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})", [row.get(c) for c in cols])
    if result is None:
        return
    for name in TABLES:
        table = result.tables.get(name)
        if table is None or not len(next(iter(table.values()), [])):
            continue
        con.register("_podsim_rows", _arrow(name, row["run_id"], table))
        con.execute(f"INSERT INTO {name} SELECT * FROM _podsim_rows")
        con.unregister("_podsim_rows")


def _delete_run(con, run_id: str) -> None:
    for name in TABLES:
        con.execute(f"DELETE FROM {name} WHERE run_id = ?", [run_id])
    con.execute("DELETE FROM runs WHERE run_id = ?", [run_id])


def _result_row(result: RunResult, run_id: str) -> dict:
    return {
        "run_id": run_id, "created_at": _now(), "name": result.name, "kind": result.kind, "status": "ok",
        "error": None, "scenario_hash": result.scenario_hash, "computed": 1, "attempts": 1,
        "targets_met": result.targets_met, "wall_s": result.wall_s, **_headline(result),
        "scenario_json": _json(result.scenario), "metrics_json": _json(result.metrics),
        "topology_json": _json(result.topology), "cost_json": _json(result.cost),
        "targets_json": _json(list(result.targets)), "references_json": _json(list(result.references)),
        "intervals_json": _json(result.intervals) if result.intervals else None,
    }


def append_run(store: str | Path, result: RunResult, run_id: str | None = None) -> str:
    """Store a run with its tables; returns its run_id (new unless given)."""
    run_id = run_id or result.run_id or new_run_id(result.name)
    with connect(store) as con:
        con.execute("BEGIN")
        _insert_run(con, _result_row(result, run_id), result)
        con.execute("COMMIT")
    return run_id


# Sweeps -------------------------------------------------------------------------------------
def save_sweep(store: str | Path, sweep_id: str, name: str, mode: str, points: int, source: str, spec: dict) -> None:
    """Record a sweep (kept if it exists: a resumed sweep has the same id)."""
    with connect(store) as con:
        con.execute("INSERT OR IGNORE INTO sweeps (sweep_id, created_at, name, mode, points, source, spec_json) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)", [sweep_id, _now(), name, mode, points, source, _json(spec)])


def set_sweep_result(store: str | Path, sweep_id: str, result: dict) -> None:
    with connect(store) as con:
        con.execute("UPDATE sweeps SET result_json = ? WHERE sweep_id = ?", [_json(result), sweep_id])


def delete_sweep_points(store: str | Path, sweep_id: str) -> int:
    """Forget every stored point of a sweep (`podsim sweep --restart`); returns how many."""
    with connect(store) as con:
        ids = [r[0] for r in con.execute("SELECT run_id FROM runs WHERE sweep_id = ?", [sweep_id]).fetchall()]
        con.execute("BEGIN")
        for rid in ids:
            _delete_run(con, rid)
        con.execute("UPDATE sweeps SET result_json = NULL WHERE sweep_id = ?", [sweep_id])
        con.execute("COMMIT")
    return len(ids)


def store_point(store: str | Path, sweep_id: str, point: dict, result: RunResult | None = None,
                error: str | None = None, name: str = "") -> str:
    """Store one sweep point as soon as it finishes: its result, or its error. A point stored
    before is replaced; `computed` counts the results ever stored for it (1 unless a point was
    computed twice) and `attempts` every try, failures included."""
    run_id = f"{sweep_id}:{point['key']}"
    with connect(store) as con:
        prev = con.execute("SELECT computed, attempts FROM runs WHERE run_id = ?", [run_id]).fetchone()
        computed, attempts = prev if prev else (0, 0)
        if result is not None:
            row = _result_row(result, run_id)
            row["computed"] = computed + 1
        else:
            row = {"run_id": run_id, "created_at": _now(), "name": name, "kind": None, "status": "failed",
                   "error": error, "computed": computed}
        row.update(sweep_id=sweep_id, point_key=point["key"], point_label=point["label"],
                   point_json=_json(point), attempts=attempts + 1)
        con.execute("BEGIN")
        _delete_run(con, run_id)
        _insert_run(con, row, result)
        con.execute("COMMIT")
    return run_id


def stored_points(store: str | Path, sweep_id: str) -> dict[str, dict]:
    """Stored points of a sweep by point key: status, error, computed, attempts, targets_met, metrics."""
    if not Path(store).exists():
        return {}
    with connect(store, read_only=True) as con:
        if not _has_tables(con):
            return {}
        rows = con.execute("SELECT point_key, status, error, computed, attempts, targets_met, metrics_json, run_id "
                           "FROM runs WHERE sweep_id = ?", [sweep_id]).fetchall()
    return {r[0]: {"status": r[1], "error": r[2], "computed": r[3], "attempts": r[4], "targets_met": r[5],
                   "metrics": json.loads(r[6]) if r[6] else {}, "run_id": r[7]} for r in rows}


def _has_tables(con) -> bool:
    return bool(con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'runs'").fetchone()[0])


# Reading ------------------------------------------------------------------------------------
_LIST_COLUMNS = ("run_id", "created_at", "name", "kind", "status", "error", "sweep_id", "point_label", "targets_met",
                 "wall_s", *_HEADLINE)


def list_runs(store: str | Path, sweep_id: str | None = None, status: str | None = None) -> list[dict]:
    """Runs in the store, newest first (a sweep's points in point order), as flat dicts."""
    where, args = [], []
    if sweep_id is not None:
        where.append("sweep_id = ?")
        args.append(sweep_id)
    if status is not None:
        where.append("status = ?")
        args.append(status)
    sql = f"SELECT {', '.join(_LIST_COLUMNS)}, point_json FROM runs"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY created_at DESC, run_id"
    with connect(store, read_only=True) as con:
        if not _has_tables(con):
            return []
        rows = con.execute(sql, args).fetchall()
    out = []
    for r in rows:
        d = dict(zip(_LIST_COLUMNS, r[:-1], strict=True))
        point = json.loads(r[-1]) if r[-1] else None
        d["point_index"] = point.get("index") if point else None
        d["point_overrides"] = point.get("overrides") if point else None
        out.append(d)
    if sweep_id is not None:
        out.sort(key=lambda d: (d["point_index"] is None, d["point_index"] or 0))
    return out


def list_sweeps(store: str | Path) -> list[dict]:
    """Sweeps in the store, newest first, with how many points are stored, ok and failed."""
    with connect(store, read_only=True) as con:
        if not _has_tables(con):
            return []
        rows = con.execute(
            "SELECT s.sweep_id, s.created_at, s.name, s.mode, s.points, s.source, s.result_json, "
            "count(r.run_id), count(r.run_id) FILTER (WHERE r.status = 'ok'), "
            "count(r.run_id) FILTER (WHERE r.status = 'failed') "
            "FROM sweeps s LEFT JOIN runs r ON r.sweep_id = s.sweep_id "
            "GROUP BY ALL ORDER BY s.created_at DESC").fetchall()
    return [{"sweep_id": r[0], "created_at": r[1], "name": r[2], "mode": r[3], "points": r[4], "source": r[5],
             "result": json.loads(r[6]) if r[6] else None, "stored": r[7], "ok": r[8], "failed": r[9]} for r in rows]


def load_stored_sweep(store: str | Path, sweep_id: str) -> dict:
    """One sweep: its spec, its result (a capacity sweep's answer per cell) and its points
    (list_runs rows; a capacity sweep's in order of the capacity field)."""
    with connect(store, read_only=True) as con:
        row = con.execute("SELECT name, mode, points, source, spec_json, result_json, created_at FROM sweeps "
                          "WHERE sweep_id = ?", [sweep_id]).fetchone() if _has_tables(con) else None
    if row is None:
        raise PodsimError(f"no sweep {sweep_id!r} in {str(store)!r}; sweeps: {', '.join(s['sweep_id'] for s in list_sweeps(store)) or 'none'}")
    spec = json.loads(row[4])
    runs = list_runs(store, sweep_id=sweep_id)
    capacity = spec.get("capacity")
    if capacity:  # fleet sizes in order, not in the order they were probed
        runs.sort(key=lambda r: ((r["point_overrides"] or {}).get(capacity["field"], 0), r["point_label"] or ""))
    return {"sweep_id": sweep_id, "name": row[0], "mode": row[1], "points": row[2], "source": row[3], "spec": spec,
            "result": json.loads(row[5]) if row[5] else None, "created_at": row[6], "runs": runs}


def load_run(store: str | Path, run_id: str) -> RunResult:
    """A stored run as the RunResult `run_scenario` returned (tables included)."""
    with connect(store, read_only=True) as con:
        row = con.execute("SELECT name, kind, status, error, scenario_json, metrics_json, topology_json, cost_json, "
                          "targets_json, references_json, wall_s, intervals_json FROM runs WHERE run_id = ?", [run_id]).fetchone() \
            if _has_tables(con) else None
        if row is None:
            raise PodsimError(f"no run {run_id!r} in {str(store)!r} (podsim report --store {store} lists them)")
        if row[2] != "ok":
            raise PodsimError(f"run {run_id!r} failed and has no results: {row[3]}")
        tables = {}
        present = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        for name, cols in TABLES.items():
            if name not in present:  # a store written before this result table existed has none of it
                continue
            t = con.execute(f"SELECT * FROM {name} WHERE run_id = ?", [run_id]).fetchnumpy()
            n = len(t["run_id"])
            if n:  # a column appended after the store was written (read-only: no ALTER) reads as NULL
                tables[name] = normalise_table(name, {c: _column(t[c] if c in t else np.ma.masked_all(n, object if k == "s" else float), k)
                                                      for c, k in cols.items()})
    return RunResult(name=row[0], kind=row[1], scenario=json.loads(row[4]), metrics=_nan(json.loads(row[5])),
                     topology=json.loads(row[6]), cost=json.loads(row[7]), targets=tuple(json.loads(row[8])),
                     references=tuple(json.loads(row[9])), tables=tables, wall_s=row[10] or 0.0, run_id=run_id,
                     intervals=json.loads(row[11]) if row[11] else {})


def _column(col: np.ndarray, kind: str) -> Any:
    """A fetched column as its table kind (masked NULLs become NaN or '')."""
    if isinstance(col, np.ma.MaskedArray):
        col = col.filled(np.nan if kind == "f" else "" if kind == "s" else 0)
    if kind == "s":
        return ["" if v is None else str(v) for v in col]
    return np.asarray(col, dtype=np.float64 if kind == "f" else np.int64 if kind == "i" else bool)


def _nan(metrics: dict) -> dict:
    """JSON nulls of float metrics back to NaN (None stays None where no figure exists)."""
    nan_keys = ("utilisation", "goodput", "fleet_goodput", "wait_p50_s", "wait_p95_s", "wait_p99_s", "wait_mean_s",
                "slowdown_mean", "slowdown_p50", "slowdown_p95", "slowdown_p99", "mfu", "model_flops_per_step")
    return {k: (math.nan if v is None and k in nan_keys else v) for k, v in metrics.items()}


# Parquet ------------------------------------------------------------------------------------
def write_tables(result: RunResult, folder: str | Path) -> list[Path]:
    """Each non-empty result table as FOLDER/<table>.parquet (with run_id), plus the key
    figures as FOLDER/summary.parquet (one row); returns the paths written."""
    folder = output_folder(folder)
    paths = []
    for name in TABLES:
        table = result.tables.get(name)
        if table is None or not len(next(iter(table.values()), [])):
            continue
        path = write_parquet(inside(folder, f"{name}.parquet"), _arrow(name, result.run_id, table))
        paths.append(path)
    flat = {k: v for k, v in _clean(result.metrics).items() if isinstance(v, (int, float, str, bool)) or v is None}
    summary = {"run_id": result.run_id, "name": result.name, "kind": result.kind, "targets_met": result.targets_met, **flat}
    path = write_parquet(folder / "summary.parquet", pa.Table.from_pylist([summary]))
    paths.append(path)
    return paths
