"""`podsim demo`: the main job of `make demo` — the demo scenario end to end: simulated, stored,
written as Parquet tables and as an HTML capacity-planning report whose path comes last."""

from __future__ import annotations

from importlib import resources

import typer

from podsim.cli import app
from podsim.cli.run import check_out, print_run, run_with_progress, save_run
from podsim.scenario import load_scenario


def demo_scenario_path():
    """The packaged demo scenario (podsim/scenario/demo.yaml) as a file."""
    return resources.as_file(resources.files("podsim.scenario").joinpath("demo.yaml"))


@app.command("demo")
def demo_cmd(out: str = typer.Option("out/demo", "--out", "-o", help="folder for the demo's output (new, empty, or one podsim wrote: it is replaced)")) -> None:
    """Run the demo scenario end to end and say where its report is."""
    with demo_scenario_path() as path:
        scenario = load_scenario(path)
    out = check_out(out, force=True)  # before the run: only a folder podsim wrote is replaced (never `--out ~`)
    print(f"demo scenario: {scenario.question}")
    result = run_with_progress(scenario)
    result, paths = save_run(result, out, None, force=True)  # the demo's own folder, replaced on each run
    print_run(result, paths)
    print(f"demo report: {paths['report'].resolve()}")
