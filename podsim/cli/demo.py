"""`podsim demo`: the main job of `make demo` — the demo scenario end to end: simulated, stored,
written as Parquet tables and as an HTML capacity-planning report whose path comes last."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import typer

from podsim.cli import app
from podsim.cli.run import print_run, run_with_progress, save_run
from podsim.files import output_folder
from podsim.scenario import load_scenario


def demo_scenario_path():
    """The packaged demo scenario (podsim/scenario/demo.yaml) as a file."""
    return resources.as_file(resources.files("podsim.scenario").joinpath("demo.yaml"))


@app.command("demo")
def demo_cmd(out: Path = typer.Option(Path("out/demo"), "--out", "-o", help="folder for the demo's output")) -> None:
    """Run the demo scenario end to end and say where its report is."""
    with demo_scenario_path() as path:
        scenario = load_scenario(path)
    output_folder(out)  # a file in the way or no permission: refused before the run, not after it
    print(f"demo scenario: {scenario.question}")
    result = run_with_progress(scenario)
    result, paths = save_run(result, out, None, force=True)  # the demo's own folder, replaced on each run
    print_run(result, paths)
    print(f"demo report: {paths['report'].resolve()}")
