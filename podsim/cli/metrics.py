"""`podsim metrics [--kind cluster|step|serving] [--json]`: the metric registry (name, unit, definition,
whether a scenario target may name it), as every result, the store and the report use it."""

from __future__ import annotations

import typer

from podsim.cli import app
from podsim.cli.common import emit_json
from podsim.errors import PodsimError
from podsim.metrics import KINDS, METRICS


@app.command("metrics")
def metrics_cmd(
    kind: str | None = typer.Option(None, "--kind", help="only the metrics of a job stream (cluster), a step study (step) or a serving fleet (serving)"),
    as_json: bool = typer.Option(False, "--json", help="one JSON list on stdout"),
) -> None:
    """List the metrics runs report: name, unit, definition, and whether a target may name it."""
    if kind is not None and kind not in [k for k in KINDS if k != "both"]:
        raise PodsimError(f"--kind {kind!r} is not known; use cluster, step or serving")
    rows = [m for m in METRICS.values() if kind is None or m.kind in (kind, "both")]
    if as_json:
        emit_json([{"name": m.name, "unit": m.unit, "definition": m.definition, "kind": m.kind, "target": m.target}
                   for m in rows])
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title="metrics (podsim/metrics.py)", title_justify="left")
    for col in ("metric", "unit", "runs", "target", "definition"):
        t.add_column(col, overflow="fold")
    for m in rows:
        t.add_row(m.name, m.unit, m.kind, "yes" if m.target else "", m.definition)
    Console().print(t)
