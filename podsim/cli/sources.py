"""`podsim sources [ID] [--json]`: what a source id says (a figure's value, its source, links)."""

from __future__ import annotations

import typer

from podsim.cli import app
from podsim.cli.common import emit_json


@app.command("sources")
def sources_cmd(
    source_id: str = typer.Argument(None, metavar="ID", help="a reference-sheet row (v4.10, ocs.17, perf.3, M2) or a named source (CACM20)"),
    as_json: bool = typer.Option(False, "--json", help="one JSON object on stdout"),
) -> None:
    """Show what a source id says: the figure, its value and unit, where it comes from, links; without ID, list the ids."""
    from podsim.sources import lookup, rows

    if source_id is None:
        listing = rows()
        if as_json:
            emit_json(listing)
            return
        for r in listing:
            print(f"{r['id']:<10} {r['fact']}")
        print(f"{len(listing)} rows of podsim/data/reference/hardware.md, measurements.md, serving_measurements.md and "
              "efficiency.md; `podsim sources ID` shows one")
        return
    d = lookup(source_id)
    if as_json:
        emit_json(d)
        return
    print(f"{d['id']}  {d['fact'] or d['source']}")
    if d["value"]:
        how = f" ({d['how']})" if d["how"] else ""
        unit = f" {d['unit']}" if d["unit"] else ""
        print(f"  value:    {d['value']}{unit}{how}")
    if d["kind"] == "row":
        print(f"  source:   {d['source']}")
        for key, text in d["publications"].items():
            print(f"            [{key}] {text}")
    for url in d["links"]:
        print(f"  link:     {url}")
    where = f"podsim/data/reference/{d['sheet']} line {d['line']}" if d["line"] else f"podsim/data/{d['sheet']}"
    print(f"  sheet:    {where}")
    if d["cited_by"]:
        print(f"  used by:  {', '.join(d['cited_by'])}")
