"""`podsim topology GEN [--slice SHAPE] [--twisted] [--json] [--detail]`."""

from __future__ import annotations

import typer

from podsim.cli import app
from podsim.cli.common import emit_json, table
from podsim.topology import summary_rows, topology_detail, topology_summary


@app.command("topology")
def topology_cmd(
    generation: str = typer.Argument(..., help="generation id: tpu-v2, tpu-v3, tpu-v4, tpu-v5e, tpu-v5p, tpu-v6e, tpu-7x or gpu-h100"),
    slice_shape: str = typer.Option(None, "--slice", help="slice shape, e.g. 4x4x8 or 8x16; default: the whole pod"),
    twisted: bool = typer.Option(False, "--twisted", help="twisted torus (k x k x 2k or k x 2k x 2k)"),
    no_ocs: bool = typer.Option(False, "--no-ocs", help="static wiring: cubes fixed in their home arrangement"),
    as_json: bool = typer.Option(False, "--json", help="one JSON object on stdout"),
    detail: bool = typer.Option(False, "--detail", help="with --json: ids of hosts, cubes and OCS units (for failure files)"),
) -> None:
    """Summarise a pod or a slice: chips, hosts, cubes, OCS, links, bisection, all-reduce, diameter."""
    s = topology_summary(generation, slice_shape, twisted=twisted, ocs=not no_ocs)
    if detail:
        s["detail"] = topology_detail(generation, ocs=not no_ocs)
    if as_json:
        emit_json(s)
        return
    table(f"{s['name']} — {s['scope']} {s['shape']}", summary_rows(s))
    if detail:
        d = s["detail"]
        print(f"ids: hosts 0..{len(d['hosts']) - 1}, cubes 0..{max(len(d['cubes']) - 1, 0)}, OCS 0..{max(len(d['ocs']) - 1, 0)}; use --json --detail for the full lists")
