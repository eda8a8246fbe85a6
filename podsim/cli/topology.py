"""`podsim topology GEN [--slice SHAPE] [--twisted] [--json] [--detail]`, or a fleet:
`podsim topology GEN --pods N [--sites M] [--dcn eps|ocs] [--oversubscription R | --dcn-tiers T]
[--wan-latency-ms L] [--wan-gbps B]`."""

from __future__ import annotations

import typer

from podsim import quantities as q
from podsim.bounds import check_fleet
from podsim.cli import app
from podsim.cli.common import emit_json, refuse_options, table
from podsim.errors import PodsimError
from podsim.topology import get_generation, topology_summary
from podsim.topology.dcn import dcn_choice
from podsim.topology.dcntiers import TIERS_HELP
from podsim.topology.summary import fleet_rows, fleet_summary, summary_rows, topology_detail


@app.command("topology")
def topology_cmd(
    ctx: typer.Context,
    generation: str = typer.Argument(..., help="generation id: tpu-v2, tpu-v3, tpu-v4, tpu-v5e, tpu-v5p, tpu-v6e, tpu-7x or gpu-h100"),
    slice_shape: str = typer.Option(None, "--slice", help="slice shape, e.g. 4x4x8 or 8x16; default: the whole pod"),
    twisted: bool = typer.Option(False, "--twisted", help="twisted torus (k x k x 2k or k x 2k x 2k)"),
    no_ocs: bool = typer.Option(False, "--no-ocs", help="static wiring: cubes fixed in their home arrangement"),
    as_json: bool = typer.Option(False, "--json", help="one JSON object on stdout"),
    detail: bool = typer.Option(False, "--detail", help="with --json: ids of hosts, cubes and OCS units (for failure files)"),
    pods: int = typer.Option(None, "--pods", help="a fleet: this many pods behind one data-centre network", callback=q.PODS.option("--pods")),
    sites: int = typer.Option(1, "--sites", help="with --pods: data centres the pods split over, joined by WAN links", callback=q.SITES.option("--sites")),
    dcn: str = typer.Option("eps", "--dcn", help="with --pods: eps (leaf-spine Clos) or ocs (OCS direct connect)"),
    oversubscription: float = typer.Option(1.0, "--oversubscription", help="with --pods: NIC bandwidth : leaf uplink bandwidth", callback=q.OVERSUBSCRIPTION.option("--oversubscription")),
    wan_latency_ms: float = typer.Option(1.0, "--wan-latency-ms", help="with --sites: one-way WAN latency (assumption: 1 ms, ~200 km of fibre)", callback=q.WAN_LATENCY.option("--wan-latency-ms", scale=1e-3, unit="ms")),
    wan_gbps: float = typer.Option(12800.0, "--wan-gbps", help="with --sites: WAN capacity per site pair and direction in Gb/s (assumption: 16 x 800GbE)", callback=q.WAN_GBPS.option("--wan-gbps")),
    dcn_tiers: str = typer.Option(None, "--dcn-tiers", help=f"with --pods: the DCN in tiers (NIC -> ToR -> aggregation block -> spine): {TIERS_HELP}"),
) -> None:
    """Summarise a pod or a slice: chips, hosts, cubes, OCS, links, bisection, all-reduce, diameter;
    with --pods, a fleet of pods on a DCN (and --sites, data centres joined by WAN links)."""
    if pods is None:
        refuse_options(ctx, ("sites", "dcn", "oversubscription", "wan_latency_ms", "wan_gbps", "dcn_tiers"), "without --pods (a fleet)")
    else:
        refuse_options(ctx, ("slice_shape", "twisted", "detail"), "with --pods (a fleet is summarised pod by pod, not by a slice)")
        if sites == 1:
            refuse_options(ctx, ("wan_latency_ms", "wan_gbps"), "without --sites > 1 (no WAN links)")
        if dcn == "ocs":
            refuse_options(ctx, ("oversubscription",), "with --dcn ocs (OCS blocks have no spine uplinks)")
    if pods is not None:
        if dcn not in ("eps", "ocs"):
            raise PodsimError(f"--dcn {dcn!r} is not known; use eps or ocs")
        check_fleet(pods, get_generation(generation).pod_chips, "--pods")  # before any per-chip array is built
        spec, _ = dcn_choice(dcn, oversubscription, sites, wan_latency_ms, wan_gbps, tiers=dcn_tiers)
        f = fleet_summary(generation, pods, spec, ocs=not no_ocs)
        if as_json:
            emit_json(f)
            return
        table(f"{f['name']} — fleet of {pods} pod(s) on {f['sites']} site(s)", fleet_rows(f))
        return
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
