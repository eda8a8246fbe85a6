"""`podsim scaling MODEL --generation GEN --slice SHAPE -p PLAN --slices 1,2,4,8 --batch-per-slice B`:
step time, MFU and parallel efficiency of a multislice job against its slice count."""

from __future__ import annotations

import math
from pathlib import Path

import typer

from podsim import quantities as q
from podsim.cli import app
from podsim.cli.common import comma_counts, emit_json, refuse_options, with_budgets
from podsim.cli.steptime import MULTISLICE_HELP, OPTION_HELP, multislice_spec, step_options
from podsim.collectives.fabricroutes import check_routing
from podsim.errors import PodsimError
from podsim.files import output_file, write_text_atomic
from podsim.scenario.scaling import with_bands
from podsim.study import StepStudy
from podsim.study.scaling import scaling_study
from podsim.topology.dcn import dcn_choice
from podsim.topology.dcntiers import TIERS_HELP
from podsim.topology.multipath import ROUTING_POLICIES
from podsim.trace.configs import parse_overrides
from podsim.units import format_percent, format_seconds


@app.command("scaling")
@with_budgets("ops", "flows")
def scaling_cmd(
    ctx: typer.Context,
    model: str = typer.Argument(..., help="model preset, e.g. llama2-70b"),
    generation: str = typer.Option("tpu-v4", "--generation", help="generation id"),
    slice_shape: str = typer.Option(..., "--slice", help="shape of each slice, e.g. 4x4x8"),
    parallelism: str = typer.Option(..., "--parallelism", "-p", help="plan inside a slice (no dcn), e.g. fsdp=32,tensor=4"),
    slices: str = typer.Option("1,2,4,8,16,32", "--slices", help="slice counts, comma-separated"),
    batch_per_slice: int = typer.Option(..., "--batch-per-slice", help="global batch per slice (weak scaling)", callback=q.BATCH.option("--batch-per-slice")),
    dcn: str = typer.Option("eps", "--dcn", help="eps, ocs or ocs-job (see podsim steptime)"),
    oversubscription: float = typer.Option(1.0, "--oversubscription", help="with --dcn eps: NIC : spine uplink bandwidth", callback=q.OVERSUBSCRIPTION.option("--oversubscription")),
    ecmp: str = typer.Option("split", "--ecmp", help="with --dcn eps: split (each flow evenly over the spines) or hash (one spine per NIC pair)"),
    sites: int = typer.Option(1, "--sites", help="data centres the slices split over (EPS DCN; WAN between)", callback=q.SITES.option("--sites")),
    wan_latency_ms: float = typer.Option(1.0, "--wan-latency-ms", help="one-way WAN latency (assumption: 1 ms)", callback=q.WAN_LATENCY.option("--wan-latency-ms", scale=1e-3, unit="ms")),
    wan_gbps: float = typer.Option(12800.0, "--wan-gbps", help="WAN Gb/s per site pair and direction (assumption)", callback=q.WAN_GBPS.option("--wan-gbps")),
    dcn_tiers: str = typer.Option(None, "--dcn-tiers", help=f"the DCN in tiers (NIC -> ToR -> aggregation block -> spine): {TIERS_HELP}"),
    set_: list[str] = typer.Option(None, "--set", help="override a model field, e.g. --set n_layers=8 (repeatable)"),
    option: list[str] = typer.Option(None, "--option", help=OPTION_HELP),
    multislice: list[str] = typer.Option(None, "--multislice", help=MULTISLICE_HELP),
    efficiency: float = typer.Option(None, "--compute-efficiency", help="a flat fraction of peak FLOP/s for every compute op instead of the per-op model", callback=q.EFFICIENCY.option("--compute-efficiency")),
    routing: str = typer.Option("dimension_order", "--routing", help=f"ICI routing in each slice: {', '.join(ROUTING_POLICIES)}"),
    static: bool = typer.Option(False, "--static", help="static wiring (no OCS between cubes)"),
    plot: str = typer.Option(None, "--plot", help="write the figure to this .html file"),
    as_json: bool = typer.Option(False, "--json", help="one JSON object on stdout"),
) -> None:
    """Weak-scaling study of a multislice job: step time, MFU, DCN/WAN time, parallel efficiency."""
    counts = comma_counts(slices, "--slices", "1,2,4,8", q.JOB_SLICES)
    if sites == 1:
        refuse_options(ctx, ("wan_latency_ms", "wan_gbps"), "without --sites > 1 (no WAN links)")
    spec, engineer = dcn_choice(dcn, oversubscription, sites, wan_latency_ms, wan_gbps, ecmp, tiers=dcn_tiers)
    if engineer:
        raise PodsimError("--dcn ocs-job is not offered for a scaling study; use eps or ocs")
    if plot is not None:
        output_file(plot, "--plot")
        if Path(plot).suffix != ".html":
            raise PodsimError(f"--plot {plot!r}: give a .html file")
    check_routing(routing)
    overrides = parse_overrides(set_)
    if "global_batch" in overrides:
        raise PodsimError("--set global_batch: leave it out; the study sets it to --batch-per-slice x slices")
    base = StepStudy(generation, slice_shape, model=model, plan=parallelism, model_overrides=overrides,
                     options=step_options(option), multislice=multislice_spec(multislice), compute_efficiency=efficiency,
                     dcn=spec, routing=routing, ocs=not static,
                     slices=spec.sites)  # the study sets each count
    study = with_bands(scaling_study(base, counts, batch_per_slice), base.generation.id)
    title = f"{model} on {generation} {slice_shape} slices ({parallelism} + dcn), {batch_per_slice} per slice"
    if plot is not None:
        from podsim.report.figures import scaling_figure  # plotly only when a plot is asked for

        write_text_atomic(plot, scaling_figure(study, title).to_html(include_plotlyjs=True), what="--plot")
    if as_json:
        emit_json({"title": title, **study})
        return
    print(title)
    print(f"{'slices':>6} {'chips':>7} {'step':>10} {'error':>7} {'MFU':>6} {'efficiency':>10} {'DCN busy':>10} {'DCN exposed':>11} "
          f"{'WAN exposed':>11} {'DCN tail':>10} {'straggler':>10} {'ECMP':>10} {'engine':>8}")
    for i, n in enumerate(study["slices"]):
        err = study["step_time_error"][i]
        print(f"{n:>6} {study['chips'][i]:>7,} {format_seconds(study['step_time_s'][i]):>10} "
              f"{'unknown' if math.isnan(err) else f'±{err:.0%}':>7} {format_percent(study['mfu'][i]):>6} "
              f"{study['parallel_efficiency'][i]:>10.1%} {format_seconds(study['dcn_busy_s'][i]):>10} "
              f"{format_seconds(study['dcn_exposed_s'][i]):>11} {format_seconds(study['wan_exposed_s'][i]):>11} "
              f"{format_seconds(study['dcn_tail_s'][i]):>10} {format_seconds(study['straggler_wait_s'][i]):>10} "
              f"{format_seconds(study['ecmp_collision_s'][i]):>10} {study['engine_wall_s'][i]:>7.2f}s")
    by_band: dict[str, list[int]] = {}
    for n, text in zip(study["slices"], study["step_time_error_text"], strict=True):
        by_band.setdefault(text, []).append(n)
    print("\nstep time error (how far podsim's steps of each kind have been from published runs): "
          + "; ".join(f"{','.join(map(str, ns))} slice(s): {text}" for text, ns in by_band.items()))
    print("what the slices add (podsim.study.multislice): the DCN tail is in the exposed communication; the straggler "
          "wait and ECMP collisions are added to the step; each point's loss against one slice is their sum")
    t = study["tiers"]
    if t["tier"]:
        print(f"\nper DCN tier ({spec.tiers.describe() if spec.tiers else 'untiered'}): busy / exposed time of the ops that climb "
              "to it, and what its busiest link needs (bytes / capacity)")
        names = list(dict.fromkeys(t["tier"]))
        print(f"{'slices':>6} " + " ".join(f"{n:>30}" for n in names))
        for n in study["slices"]:
            cells = {t["tier"][i]: i for i in range(len(t["tier"])) if t["slices"][i] == n}
            print(f"{n:>6} " + " ".join(
                f"{format_seconds(t['busy_s'][i]) + ' / ' + format_seconds(t['exposed_s'][i]) + ' / ' + format_seconds(t['link_busy_s'][i]):>30}"
                if (i := cells.get(name)) is not None else f"{'-':>30}" for name in names))
