"""`podsim report --store PATH [--runs ID,ID | --sweep ID] -o FILE.html`: runs from a results
store side by side in one HTML report; `--list` shows what the store holds."""

from __future__ import annotations

from pathlib import Path

import typer

from podsim import quantities as q
from podsim.cli import app
from podsim.cli.common import comma_list, emit_json, refuse_options
from podsim.errors import PodsimError
from podsim.files import output_file, write_text_atomic
from podsim.report import render_report
from podsim.store import list_runs, list_sweeps, load_run, load_stored_sweep
from podsim.sweep import answer_text


def _listing(store: Path) -> None:
    sweeps = list_sweeps(store)
    for s in sweeps:
        if s["mode"] == "capacity":
            answers = ", ".join(f"{c['cell']}: {c['field']} = {answer_text(c)}" for c in (s["result"] or {}).get("cells", []))
            print(f"sweep {s['sweep_id']}: capacity, {s['ok']} ok / {s['failed']} failed; {answers or 'not finished'}")
        else:
            print(f"sweep {s['sweep_id']}: grid, {s['ok']} ok / {s['failed']} failed of {s['points']} points")
    for r in list_runs(store):
        where = f" [{r['sweep_id']}: {r['point_label']}]" if r["sweep_id"] else ""
        reps = f", {int(r['replicates'])} replicates" if (r.get("replicates") or 1) > 1 else ""  # its figures: means
        print(f"run {r['run_id']}: {r['name']} ({r['kind'] or '-'}, {r['status']}{reps}){where}")


@app.command("report")
def report_cmd(
    ctx: typer.Context,
    store: Path = typer.Option(..., "--store", help="DuckDB results store (podsim run / podsim sweep)"),
    runs: str = typer.Option(None, "--runs", help="comma-separated run ids (default: the newest runs)"),
    sweep: str = typer.Option(None, "--sweep", help="a sweep id: all its stored points"),
    last: int = typer.Option(8, "--last", help="without --runs or --sweep: the newest N runs", callback=q.REPORT_RUNS.option("--last")),
    out: str = typer.Option(None, "--out", "-o", help="HTML file to write (a new path, or a regular file it replaces)"),
    listing: bool = typer.Option(False, "--list", help="list the store's runs and sweeps instead"),
    as_json: bool = typer.Option(False, "--json", help="one JSON object on stdout"),
) -> None:
    """Compare stored runs side by side in one self-contained HTML report."""
    if listing:
        refuse_options(ctx, ("runs", "sweep", "last", "out"), "with --list (it lists the store, writing no report)")
        if as_json:
            emit_json({"sweeps": list_sweeps(store), "runs": list_runs(store)})
        else:
            _listing(store)
        return
    if out is None:
        raise PodsimError("give --out FILE.html (or --list to see the store's runs)")
    out = output_file(out, "--out")  # a folder, a FIFO, a device ... refused before the store is read
    if runs and sweep:
        raise PodsimError("give --runs or --sweep, not both")
    if runs or sweep:
        refuse_options(ctx, ("last",), "with --runs or --sweep (they say which runs)")
    stored_sweep = None
    if sweep:
        stored_sweep = load_stored_sweep(store, sweep)
        rows = [r for r in stored_sweep["runs"] if r["status"] == "ok"]
        labels = [r["point_label"] for r in rows]
    elif runs:
        ids = comma_list(runs, "--runs", "ID1,ID2")
        rows = [{"run_id": i} for i in ids]
        labels = None
    else:
        rows = [r for r in list_runs(store, status="ok")][:last]
        labels = None
    if not rows:
        raise PodsimError(f"no finished runs to report in {store} (podsim report --store {store} --list)")
    results = [load_run(store, r["run_id"]) for r in rows]
    write_text_atomic(out, render_report(results, labels=labels, sweep=stored_sweep), make_parents=True, what="--out")
    if as_json:
        emit_json({"report": str(out.resolve()), "runs": [r.run_id for r in results]})
    else:
        print(f"report of {len(results)} run(s): {out.resolve()}")
