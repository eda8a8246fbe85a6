"""The DuckDB results store: a run comes back as it went in; sweep points count their
computations and attempts; readers see a clear error for a missing store or run."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from podsim.errors import PodsimError
from podsim.scenario import load_scenario, run_scenario
from podsim.scenario.result import TABLES
from podsim.store import (
    append_run,
    list_runs,
    list_sweeps,
    load_run,
    save_sweep,
    store_point,
    stored_points,
    write_tables,
)

DATA = Path(__file__).parent / "data" / "scenarios"


@pytest.fixture(scope="module")
def runs():
    return [run_scenario(load_scenario(DATA / name)) for name in ("tiny.yaml", "tiny_step.yaml")]


def _same_tables(a, b):
    for name in TABLES:
        ta, tb = a.tables.get(name), b.tables.get(name)
        if ta is None or not len(next(iter(ta.values()))):
            assert tb is None
            continue
        for col, kind in TABLES[name].items():
            if kind == "s":
                assert list(ta[col]) == list(tb[col]), (name, col)
            else:
                assert np.array_equal(ta[col], tb[col], equal_nan=kind == "f"), (name, col)


def test_round_trip(tmp_path, runs):
    store = tmp_path / "r.duckdb"
    ids = [append_run(store, r) for r in runs]
    listed = list_runs(store)
    assert {r["run_id"] for r in listed} == set(ids) and all(r["status"] == "ok" for r in listed)
    by = {r["run_id"]: r for r in listed}
    assert by[ids[0]]["goodput"] == pytest.approx(runs[0].metrics["goodput"]) and by[ids[1]]["kind"] == "step"
    for rid, r in zip(ids, runs, strict=True):
        back = load_run(store, rid)
        assert back.run_id == rid and back.name == r.name and back.kind == r.kind
        assert back.targets_met == r.targets_met and back.scenario == r.scenario
        assert back.metrics["chips"] == r.metrics["chips"] and back.cost["cost_usd"] == pytest.approx(r.cost["cost_usd"])
        _same_tables(r, back)


def test_sweep_points_count_computations(tmp_path, runs):
    store = tmp_path / "r.duckdb"
    save_sweep(store, "s-1", "s", "grid", 2, "s.yaml", {"sweep": "s"})
    p = {"key": "k1", "label": "one", "index": 0}
    store_point(store, "s-1", p, error="ValueError: boom")
    assert stored_points(store, "s-1")["k1"]["status"] == "failed"
    store_point(store, "s-1", p, result=runs[0])
    row = stored_points(store, "s-1")["k1"]
    assert (row["status"], row["computed"], row["attempts"]) == ("ok", 1, 2)
    store_point(store, "s-1", p, result=runs[0])  # a repeat would show as computed 2
    assert stored_points(store, "s-1")["k1"]["computed"] == 2
    assert len(list_runs(store, sweep_id="s-1")) == 1  # replaced, not duplicated
    (s,) = list_sweeps(store)
    assert (s["sweep_id"], s["ok"], s["failed"], s["stored"]) == ("s-1", 1, 0, 1)


def test_parquet_tables(tmp_path, runs):
    r = dataclasses.replace(runs[0], run_id="abc")
    paths = write_tables(r, tmp_path)
    names = {p.stem for p in paths}
    assert {"timeseries", "jobs", "summary"} <= names
    ts = pq.read_table(tmp_path / "timeseries.parquet")
    assert ts.column_names == ["run_id", *TABLES["timeseries"]] and ts.num_rows == len(r.tables["timeseries"]["t_s"])
    summary = pq.read_table(tmp_path / "summary.parquet").to_pylist()[0]
    assert summary["run_id"] == "abc" and summary["goodput"] == pytest.approx(r.metrics["goodput"])


def test_missing_store_and_run(tmp_path, runs):
    with pytest.raises(PodsimError, match="does not exist"):
        list_runs(tmp_path / "none.duckdb")
    store = tmp_path / "r.duckdb"
    append_run(store, runs[0])
    with pytest.raises(PodsimError, match="no run 'nope'"):
        load_run(store, "nope")
    (tmp_path / "junk.duckdb").write_text("not a database")
    with pytest.raises(PodsimError, match="not a podsim results store|cannot open"):
        list_runs(tmp_path / "junk.duckdb")


def test_a_store_older_than_a_result_table_still_loads(tmp_path, runs):
    """A store written before a result table existed (the `scaling` table came with scenarios'
    scaling sections) loads read-only; its runs simply have none of that table."""
    import duckdb

    store = tmp_path / "old.duckdb"
    rid = append_run(store, runs[1])
    con = duckdb.connect(str(store))
    con.execute("DROP TABLE scaling")
    con.close()
    back = load_run(store, rid)
    assert "scaling" not in back.tables and len(back.table("scaling")["slices"]) == 0
    _same_tables(runs[1], back)


def test_a_store_written_before_a_table_column_was_appended(tmp_path, runs):
    """step_times gained slices and sites: an older store reads them as 0 (read-only, no ALTER)
    and gains the columns on its next write, keeping its old rows."""
    import duckdb

    from podsim.scenario.result import normalise_table

    st = {"model": ["m"], "shape": ["2x2"], "twisted": [False], "step_time_s": [1.0], "compute_s": [1.0],
          "exposed_comm_s": [0.0], "source": ["x"], "slices": [2], "sites": [1],
          "step_time_error": [0.05], "step_time_error_text": ["typical error ±5% over 9 runs of this kind"]}
    r = dataclasses.replace(runs[0], tables={**runs[0].tables, "step_times": normalise_table("step_times", st)})
    store = tmp_path / "old.duckdb"
    old = append_run(store, r)
    con = duckdb.connect(str(store))
    for col in ("step_time_error_text", "step_time_error", "sites", "slices"):  # every column appended since, last first
        con.execute(f"ALTER TABLE step_times DROP COLUMN {col}")
    con.close()
    assert list(load_run(store, old).tables["step_times"]["slices"]) == [0]
    new = append_run(store, r)
    assert list(load_run(store, new).tables["step_times"]["slices"]) == [2]
    assert list(load_run(store, old).tables["step_times"]["sites"]) == [0]
    assert list(load_run(store, old).tables["step_times"]["step_time_error_text"]) == [""]  # an appended text column
