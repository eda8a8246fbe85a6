"""`podsim topology GEN [--slice SHAPE] [--twisted] [--json] [--detail]`."""

from __future__ import annotations

import typer

from podsim.cli import app
from podsim.cli.common import emit_json, table
from podsim.topology import topology_detail, topology_summary
from podsim.units import format_bytes, format_rate


def summary_rows(s: dict) -> list[tuple[str, str]]:
    """Human-readable rows of a topology summary (shared with the demo)."""
    wrap = "".join("xyz"[i] if w else "-" for i, w in enumerate(s["wraparound"])) if len(s["wraparound"]) > 1 else ""
    rows = [
        ("shape", f"{s['shape']} ({s['topology']}{', wraparound ' + wrap if wrap else ''})"),
        ("chips / hosts / cubes", f"{s['chips']} / {s['hosts']} / {s['cubes']}"),
        ("OCS units / circuits", f"{s['ocs']} / {s['ocs_circuits']}" + (f" ({s['ocs_ports_per_unit']} ports each)" if s["ocs_ports_per_unit"] else "")),
        ("ICI cables", f"{s['ici_links']} at {format_rate(s['link_bytes_per_s'])} per direction"),
        ("bisection bandwidth", format_rate(s["bisection_bytes_per_s"])),
        ("all-reduce bandwidth", format_rate(s["allreduce_bytes_per_s"])),
        ("diameter", f"{s['diameter_hops']} hops"),
        ("peak bf16", f"{s['peak_flops_per_s'] / 1e15:.4g} PFLOP/s"),
        ("HBM", format_bytes(s["hbm_bytes"])),
        ("DCN", f"{format_rate(s['dcn_bytes_per_s'])} over {s['hosts']} hosts ({s['dcn']['kind']}, {s['dcn']['leaves']} leaves, {s['dcn']['spines']} spines)"),
    ]
    return rows


@app.command("topology")
def topology_cmd(
    generation: str = typer.Argument(..., help="generation id, e.g. tpu-v4 (see `podsim topology --help`)"),
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
