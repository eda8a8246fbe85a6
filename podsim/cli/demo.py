"""`podsim demo`: the main job of `make demo` — a tour on embedded defaults, output on disk."""

from __future__ import annotations

from pathlib import Path

import typer

from podsim.cli import app
from podsim.cli.common import console, table, to_json
from podsim.cli.topology import summary_rows
from podsim.topology import topology_summary


@app.command("demo")
def demo_cmd(out: Path = typer.Option(Path("out/demo"), "--out", "-o", help="folder for the demo's output")) -> None:
    """Run the demo end to end and say where its output is."""
    out.mkdir(parents=True, exist_ok=True)
    results = {
        "pod": topology_summary("tpu-v4"),
        "slice_4x4x8": topology_summary("tpu-v4", "4x4x8"),
        "slice_4x4x8_twisted": topology_summary("tpu-v4", "4x4x8", twisted=True),
    }
    for key, s in results.items():
        table(f"{s['name']} — {key.replace('_', ' ')}", summary_rows(s))
    path = out / "topology.json"
    path.write_text(to_json(results))
    console.print(f"demo output: {path.resolve()}")
