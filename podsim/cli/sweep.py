"""`podsim sweep SWEEP.yaml [--executor serial|process|dask] [--address tcp://...] [--resume]`:
run a sweep's points (or bisect its fleet size), store each as it finishes, report them."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from podsim.cli import app
from podsim.cli.common import emit_json, refuse_options, with_budgets
from podsim.errors import PodsimError
from podsim.files import check_store, claim_folder, output_folder, safe_component, write_text_atomic
from podsim.report import render_report
from podsim.report.render import threshold_text
from podsim.stats import interval_text
from podsim.store import load_run, load_stored_sweep
from podsim.sweep import answer_text, load_sweep, open_executor, probe_text, run_sweep

DEFAULT_SHOW = {"cluster": ("utilisation", "goodput", "wait_p95_s", "jobs_completed"),
                "step": ("step_time_s", "exposed_comm_s", "mfu")}


def point_line(row: dict, show: tuple[str, ...]) -> str:
    """One line per finished point: progress, label, status and its key figures."""
    head = f"[{row['done']}/{row['total']}] {row['label']}: {row['status']}"
    if row["status"] == "failed":
        return f"{head}: {row['error']}"
    m = row["metrics"] or {}
    keys = show or DEFAULT_SHOW["step" if "step_time_s" in m and "goodput" not in m else "cluster"]
    figs = ", ".join(f"{k} {threshold_text(k, m.get(k))}" for k in keys)  # n/a where missing (None or NaN)
    met = "" if row["targets_met"] is None else f", targets {'met' if row['targets_met'] else 'missed'}"
    wall = f" ({row['wall_s']:.1f} s)" if "wall_s" in row else ""
    return f"{head}: {figs}{met}{wall}"


@app.command("sweep")
@with_budgets("ops", "flows", "events", "input_bytes")
def sweep_cmd(
    ctx: typer.Context,
    file: Path = typer.Argument(..., help="sweep YAML file (sweep:, base:, grid:/points:/capacity:)"),
    out: str = typer.Option(None, "--out", "-o", help="output folder (default out/sweeps/<name>; new, empty or one podsim wrote: it adds to it)"),
    store: str = typer.Option(None, "--store", help="DuckDB results store (default OUT/results.duckdb)"),
    executor: str = typer.Option("serial", "--executor", "-e", help="serial, process or dask"),
    workers: int = typer.Option(None, "--workers", "-w", help="process or local Dask workers (default: the CPUs)"),
    address: str = typer.Option(None, "--address", help="Dask scheduler, e.g. tcp://10.0.0.5:8786 (default: a local cluster)"),
    resume: bool = typer.Option(False, "--resume", help="skip points already stored (failed points run again)"),
    restart: bool = typer.Option(False, "--restart", help="forget the sweep's stored points and run them all"),
    report: bool = typer.Option(True, "--report/--no-report", help="write OUT/report.html comparing the points"),
    as_json: bool = typer.Option(False, "--json", help="one JSON object on stdout at the end"),
) -> None:
    """Run a sweep on one machine or a Dask cluster, storing each point as it finishes."""
    if executor == "serial":
        refuse_options(ctx, ("workers",), "with --executor serial (one point at a time in this process)")
    if executor != "dask":
        refuse_options(ctx, ("address",), f"with --executor {executor} (it names a Dask scheduler)")
    if resume and restart:
        raise PodsimError("give --resume (skip stored points) or --restart (forget them), not both")
    sweep = load_sweep(file)
    if store is not None:
        store = check_store(store, read_only=False)
        output_folder(store.parent, "results store folder")
    out = claim_folder(Path("out") / "sweeps" / safe_component(sweep.spec.sweep) if out is None else out, "--out")
    store = store or out / "results.duckdb"
    show = tuple(sweep.spec.show)
    seen = {"stored": 0}

    def on_point(row: dict) -> None:
        seen["stored"] += row["status"] in ("ok", "failed", "skipped")
        if not as_json:
            print(point_line(row, show), flush=True)

    with open_executor(executor, workers, address) as handle:
        if not as_json:
            n = len(sweep.points) if sweep.mode == "grid" else f"{len(sweep.cells)} cell(s) bisected"
            print(f"sweep {sweep.sweep_id}: {n} points on {handle.description}; store {store}", flush=True)
        try:
            outcome = run_sweep(sweep, handle, store, resume=resume, restart=restart, on_point=on_point)
        except KeyboardInterrupt:
            print(f"{seen['stored']} point(s) stored in {store}; run the same command with --resume to go on",
                  file=sys.stderr, flush=True)
            raise typer.Exit(130) from None
    paths = {"store": str(store)}
    if report:
        stored = load_stored_sweep(store, sweep.sweep_id)
        ok = [r for r in stored["runs"] if r["status"] == "ok"]
        if ok:
            runs = [load_run(store, r["run_id"]) for r in ok]
            path = write_text_atomic(out / "report.html", render_report(runs, title=f"Sweep {sweep.spec.sweep}",
                                                                        labels=[r["point_label"] for r in ok], sweep=stored))
            paths["report"] = str(path.resolve())
    if as_json:
        emit_json({**outcome.to_dict(), "outputs": paths})
        _exit_if_failed(outcome)
        return
    print(f"done: {outcome.ran} run, {outcome.skipped} already stored, {outcome.failed} failed")
    for cell in outcome.capacity:
        ans = cell["answer"]
        name = cell["cell"]
        tried = ", ".join(f"{k}: {probe_text(v)}" for k, v in cell["evaluated"].items())
        if cell.get("error"):
            print(f"capacity {name}: no answer, a point failed ({tried}): {cell['error']}")
        elif ans is None:
            print(f"capacity {name}: no {cell['field']} in [{cell['low']}, {cell['high']}] meets the targets ({tried})")
        else:
            m = cell["evaluated"][str(ans)]["metrics"]
            cost = m.get("cost_usd")
            money = f"cost ${cost:,.0f}" if cost is not None else "no cost: the generation has no price with a source"
            fleet = f"; {m['fleet_chip_h']:,.0f} chip-hours over the horizon, {money}" if m.get("fleet_chip_h") is not None else ""
            print(f"capacity {name}: smallest {cell['field']} meeting the targets = {answer_text(cell)} ({tried}){fleet}")
            for metric, iv in cell["evaluated"][str(ans)].get("intervals", {}).items():
                if metric in cell.get("targets", ()):
                    print(f"  {metric} at {ans}: {interval_text(iv, lambda v, k=metric: threshold_text(k, v))}")
    if "report" in paths:
        print(f"report: {paths['report']}")
    _exit_if_failed(outcome)


def _exit_if_failed(outcome) -> None:
    """A sweep with failed points exits 1 after its output, naming them on stderr."""
    if not outcome.failed:
        return
    failed = [p for p in outcome.points if p.get("status") == "failed"]
    names = ", ".join(repr(p.get("label")) for p in failed[:5]) + (", ..." if len(failed) > 5 else "")
    print(f"error: {outcome.failed} point(s) failed{': ' + names if names else ''}; their errors are above "
          "(rerun with --resume to retry only them)", file=sys.stderr)
    raise typer.Exit(1)
