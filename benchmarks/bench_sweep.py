"""Sweep throughput on each executor, and what a run costs around the simulation itself.

1. The 12-point test sweep (tests/data/scenarios/sweep_slow.yaml: a v5e job stream of 1500
   jobs over 30 days, ~0.5 s a point) on the serial executor, a process pool and a local
   Dask cluster, 2 workers each: wall time including starting the workers.
2. The demo scenario: simulation, storing the run in DuckDB, writing Parquet, rendering the
   HTML report, loading the run back.

Run: .venv/bin/python benchmarks/bench_sweep.py
"""

from __future__ import annotations

import tempfile
import time
from importlib import resources
from pathlib import Path

from podsim.report import render_report
from podsim.scenario import load_scenario, run_scenario
from podsim.store import append_run, load_run, write_tables
from podsim.sweep import load_sweep, open_executor, run_sweep

ROOT = Path(__file__).resolve().parent.parent


def executors() -> None:
    sweep = load_sweep(ROOT / "tests/data/scenarios/sweep_slow.yaml")
    print(f"1. {len(sweep.points)}-point sweep, 2 workers (wall s, workers' start-up included)")
    for kind in ("serial", "process", "dask"):
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            with open_executor(kind, workers=2) as handle:
                started = time.perf_counter() - t0
                out = run_sweep(sweep, handle, Path(tmp) / "r.duckdb")
            wall = time.perf_counter() - t0
        per = sum(r["metrics"]["engine_wall_s"] for r in out.points) / len(out.points)
        print(f"   {kind:8} {wall:6.2f} s (start {started:.2f} s), {out.ran} points, {per:.2f} s simulation per point")


def demo_costs() -> None:
    with resources.as_file(resources.files("podsim.scenario").joinpath("demo.yaml")) as path:
        scenario = load_scenario(path)
    t0 = time.perf_counter()
    result = run_scenario(scenario)
    t1 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "r.duckdb"
        run_id = append_run(store, result)
        t2 = time.perf_counter()
        write_tables(result, tmp)
        t3 = time.perf_counter()
        html = render_report(result)
        t4 = time.perf_counter()
        load_run(store, run_id)
        t5 = time.perf_counter()
    print(f"\n2. demo scenario: run {t1 - t0:.2f} s (engine step times for {len(result.tables['step_times']['model'])} shapes), "
          f"store {t2 - t1:.3f} s, Parquet {t3 - t2:.3f} s, report {t4 - t3:.2f} s ({len(html) / 1e6:.1f} MB), "
          f"load back {t5 - t4:.3f} s")


if __name__ == "__main__":
    executors()
    demo_costs()
