"""`podsim run SCENARIO [-o DIR] [--store PATH] [--json]`: run one scenario with a progress bar,
write its result tables (Parquet), append it to a DuckDB results store and render its HTML
capacity-planning report."""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from pathlib import Path

import typer

from podsim.cli import app
from podsim.cli.common import console, emit_json, progress_reporter, table, warn_inferred_shapes
from podsim.errors import PodsimError
from podsim.files import output_folder, safe_component, write_text_atomic
from podsim.report import render_report
from podsim.report.render import interval_rows, key_rows, threshold_text
from podsim.scenario import RunResult, Scenario, load_scenario, run_scenario
from podsim.store import append_run, new_run_id, write_tables
from podsim.units import format_seconds


def run_with_progress(scenario: Scenario) -> RunResult:
    """run_scenario with a progress bar on stderr (progress lines when it is not a terminal)."""
    with progress_reporter(scenario.name) as update:
        def progress(done: float, total: float) -> None:
            update(done, total, format_seconds(done) + " simulated" if scenario.kind == "cluster" else "")

        return run_scenario(scenario, on_progress=progress)


RUN_FILES = ("report.html", "summary.parquet")  # a folder holding either holds a run's outputs


def save_run(result: RunResult, out: Path, store: Path | None, report: bool = True,
             overwrite: bool = False) -> tuple[RunResult, dict[str, Path]]:
    """Store the run, write its Parquet tables and its report; the run (with its id) and paths.

    The files are written to a staging folder inside `out` and moved into place only after the
    store row (one transaction) is in, so a failure leaves no partial run behind. A folder that
    holds another run's files is refused unless `overwrite` (which removes that run's tables
    first, so two runs' files never mix).
    """
    out = output_folder(out)
    old = [p for p in out.iterdir() if p.name in RUN_FILES or p.suffix == ".parquet"]
    if old and not overwrite:
        raise PodsimError(f"output folder {str(out)!r} holds another run's files ({old[0].name}); "
                          "give another --out or --overwrite to replace them")
    store = store or out / "results.duckdb"
    result = dataclasses.replace(result, run_id=new_run_id(result.name))
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=out))
    try:
        staged = write_tables(result, staging)
        if report:
            staged.append(write_text_atomic(staging / "report.html", render_report(result)))
        append_run(store, result, run_id=result.run_id)
        for p in old:
            p.unlink(missing_ok=True)
        for p in staged:
            os.replace(p, out / p.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    paths = {"store": store, "tables": out}
    if report:
        paths["report"] = out / "report.html"
    return result, paths


def print_run(result: RunResult, paths: dict[str, Path]) -> None:
    table(f"{result.name} ({'job stream' if result.kind == 'cluster' else 'step study'}), run {result.run_id}",
          [(name, cells[0]) for name, cells in key_rows([result])])
    rows = interval_rows(result)
    if rows:
        table(f"{result.replicates} replicates: mean [95% interval]", rows)
    for t in result.targets:
        value = "n/a" if t["value"] is None else threshold_text(t["metric"], t["value"])
        console.print(f"target {t['metric']} {t['op']} {threshold_text(t['metric'], t['threshold'])}: {value} "
                      f"{'[green]met[/green]' if t['met'] else '[red]missed[/red]'}")
    for r in result.references:
        ratio = f"{r['ratio']:.3g}x" if r["ratio"] is not None else "n/a"
        console.print(f"{r['metric']}: podsim {threshold_text(r['metric'], r['podsim'])}, published "
                      f"{threshold_text(r['metric'], r['published'])} ({r['source']}): {ratio}")
    print(f"store: {paths['store']}  tables: {paths['tables']}/*.parquet")


@app.command("run")
def run_cmd(
    scenario: Path = typer.Argument(..., help="scenario YAML file"),
    out: Path = typer.Option(None, "--out", "-o", help="output folder (default out/<scenario name>)"),
    overwrite: bool = typer.Option(False, "--overwrite", help="replace another run's files in the output folder"),
    store: Path = typer.Option(None, "--store", help="DuckDB results store to append to (default OUT/results.duckdb)"),
    report: bool = typer.Option(True, "--report/--no-report", help="write OUT/report.html"),
    as_json: bool = typer.Option(False, "--json", help="one JSON object on stdout"),
) -> None:
    """Run a scenario: results tables, the results store, and an HTML capacity-planning report."""
    s = load_scenario(scenario)
    result = run_with_progress(s)
    warn_inferred_shapes(result.metrics)
    out = out or Path("out") / safe_component(s.name)
    output_folder(out)  # a bad --out is refused before the run, not after it
    result, paths = save_run(result, out, store, report, overwrite)
    if as_json:
        emit_json({**result.summary(), "outputs": {k: str(v) for k, v in paths.items()}})
        return
    print_run(result, paths)
    if "report" in paths:
        print(f"report: {paths['report'].resolve()}")
