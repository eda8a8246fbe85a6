"""`podsim run SCENARIO [-o DIR] [--force] [--store PATH] [--json]`: run one scenario with a
progress bar, write its result tables (Parquet), append it to a DuckDB results store and render
its HTML capacity-planning report. A non-empty DIR is refused before the run (--force replaces it
whole once the run is done)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import typer

from podsim.cli import app
from podsim.cli.common import (
    console,
    emit_json,
    progress_reporter,
    table,
    warn_inferred_shapes,
    with_budgets,
)
from podsim.files import (
    check_store,
    output_dir,
    output_folder,
    safe_component,
    staged_folder,
    write_text_atomic,
)
from podsim.report import render_report
from podsim.report.render import interval_rows, key_rows, threshold_text
from podsim.scenario import RunResult, Scenario, load_scenario, run_scenario
from podsim.scenario.run import STEP_JSON_TABLES
from podsim.store import append_run, new_run_id, write_tables
from podsim.units import format_seconds


def run_with_progress(scenario: Scenario) -> RunResult:
    """run_scenario with a progress bar on stderr (progress lines when it is not a terminal)."""
    with progress_reporter(scenario.name) as update:
        def progress(done: float, total: float) -> None:
            update(done, total, format_seconds(done) + " simulated" if scenario.kind == "cluster" else "")

        return run_scenario(scenario, on_progress=progress)


def check_out(out: str | Path, force: bool = False) -> Path:
    """Refuse an output folder before any simulation: it must be new or empty, or one podsim
    wrote when `force` (then a finished run replaces it whole, see save_run); anything else
    (a file, a device, a folder of other files) is refused (podsim.files.output_dir)."""
    out = output_dir(out, "--out", force=force)
    output_folder(out.parent)  # a parent that cannot be made is refused before the run too
    return out


def save_run(result: RunResult, out: Path, store: Path | None, report: bool = True,
             force: bool = False) -> tuple[RunResult, dict[str, Path]]:
    """Store the run, write its Parquet tables and its report into `out`; the run (with its id)
    and paths.

    Everything is written to a staging folder beside `out` (its results store too, unless
    `store` names one elsewhere) and renamed into place only after the store row is committed,
    so a failure leaves no partial run behind. A non-empty `out` is refused unless `force`,
    which replaces it whole once the new run is complete.
    """
    out = check_out(out, force)
    if store is not None:
        check_store(store, read_only=False)
    inside = store is None or Path(store).resolve().is_relative_to(out.resolve())  # replaced with the folder
    rel = Path("results.duckdb") if store is None else Path(store).resolve().relative_to(out.resolve()) if inside else None
    result = dataclasses.replace(result, run_id=new_run_id(result.name))
    with staged_folder(out) as staging:
        write_tables(result, staging)
        if report:
            write_text_atomic(staging / "report.html", render_report(result))
        if inside:
            output_folder((staging / rel).parent)
        append_run(staging / rel if inside else store, result, run_id=result.run_id)
    paths = {"store": out / rel if inside else Path(store), "tables": out}
    if report:
        paths["report"] = out / "report.html"
    return result, paths


def print_run(result: RunResult, paths: dict[str, Path]) -> None:
    kind = {"cluster": "job stream", "step": "step study", "serving": "serving fleet"}.get(result.kind, result.kind)
    table(f"{result.name} ({kind}), run {result.run_id}",
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
@with_budgets("ops", "flows", "events", "input_bytes")
def run_cmd(
    scenario: Path = typer.Argument(..., help="scenario YAML file"),
    out: str = typer.Option(None, "--out", "-o", help="output folder (default out/<scenario name>)"),
    force: bool = typer.Option(False, "--force", help="replace an output folder podsim wrote (whole, once the run is done)"),
    overwrite: bool = typer.Option(False, "--overwrite", hidden=True, help="the old name of --force"),
    store: str = typer.Option(None, "--store", help="DuckDB results store to append to (default OUT/results.duckdb)"),
    report: bool = typer.Option(True, "--report/--no-report", help="write OUT/report.html"),
    as_json: bool = typer.Option(False, "--json", help="one JSON object on stdout"),
) -> None:
    """Run a scenario: results tables, the results store, and an HTML capacity-planning report."""
    s = load_scenario(scenario)
    out = check_out(Path("out") / safe_component(s.name) if out is None else out, force or overwrite)  # before the run
    if store is not None:
        store = check_store(store, read_only=False)
        output_folder(store.parent, "results store folder")
    result = run_with_progress(s)
    warn_inferred_shapes(result.metrics)
    result, paths = save_run(result, out, store, report, force or overwrite)
    if as_json:
        tables = STEP_JSON_TABLES if result.kind == "step" else ()
        emit_json({**result.summary(tables=tables), "outputs": {k: str(v) for k, v in paths.items()}})
        return
    print_run(result, paths)
    if "report" in paths:
        print(f"report: {paths['report'].resolve()}")
