"""`podsim steptime`: simulate a collective, or a whole step trace, on a slice.

    podsim steptime --generation tpu-v4 --slice 16x16x16 --collective all_reduce --bytes 1GiB
    podsim steptime --trace step.json --generation tpu-v4 --slice 8x16x16 [--json]
    podsim steptime --trace dcn32.json --generation tpu-v5e --slice 16x16 [--slices 32] [--dcn ocs]
    podsim steptime --trace all_reduce.*.et --network inputs_network_tpu_v3_8.yml
"""

from __future__ import annotations

import glob

import typer

from podsim.bounds import opt_count, opt_finite
from podsim.cli import app
from podsim.cli.common import check_timeline_path, emit_json, table, write_timeline
from podsim.collectives import ALGORITHMS, KINDS
from podsim.collectives.routes import check_routing
from podsim.engine import (
    DEFAULT_COMPUTE_EFFICIENCY,
    CollectiveResult,
    build_job,
    declared_slices,
    simulate_collective,
    simulate_step,
    step_summary,
)
from podsim.engine.linkload import record_link_load
from podsim.errors import PodsimError
from podsim.topology import build_slice, dcn_choice, format_shape, get_generation, parse_shape
from podsim.topology.multipath import ROUTING_POLICIES
from podsim.trace import load_trace
from podsim.trace.astra_network import network_generation
from podsim.trace.kinds import normalise_algorithm, normalise_kind
from podsim.trace.memory import fits_message, hbm_text
from podsim.units import format_bytes, format_rate, format_seconds, parse_bytes


def collective_rows(r: CollectiveResult) -> list[tuple[str, str]]:
    """Human-readable rows of one collective's result."""
    gap = r.simulated_s / r.closed_form_s - 1 if r.closed_form_s > 0 else 0.0
    rows = [
        ("collective", f"{r.kind} of {format_bytes(r.size_bytes)} over group {r.group} ({r.group_size} chips, {r.instances} instance(s))"),
        ("algorithm", r.algorithm),
        ("simulated time", format_seconds(r.simulated_s)),
        ("closed-form time", f"{format_seconds(r.closed_form_s)} (simulated {gap:+.2%})"),
        ("algorithm bandwidth", format_rate(r.algbw_bytes_per_s)),
        ("bus bandwidth", f"{format_rate(r.busbw_bytes_per_s)} per chip"),
        ("engine", f"{r.engine_wall_s:.3f} s wall, {r.events} events, {r.flows_simulated:,} of {r.flows:,} flows simulated"
                   + (" (symmetry fast path)" if r.fast_path else "")),
    ]
    if len(r.candidates_s) > 1:
        rows.append(("closed form by algorithm", ", ".join(f"{a} {format_seconds(t)}" for a, t in sorted(r.candidates_s.items(), key=lambda kv: kv[1]))))
    return rows


def step_rows(s: dict) -> list[tuple[str, str]]:
    """Human-readable rows of a step summary."""
    rows = [
        ("step time", format_seconds(s["step_time_s"])),
        ("compute", format_seconds(s["compute_s"])),
        ("communication", f"{format_seconds(s['comm_s'])} busy, {format_seconds(s['exposed_comm_s'])} exposed"),
    ]
    for level, label in (("ici", "ICI (inside slices)"), ("dcn", f"DCN (across {s.get('slices', 1)} slices)"),
                         ("wan", "WAN (across sites)")):
        lv = s.get("levels", {}).get(level)
        if lv and (lv["busy_s"] > 0 or level == "dcn" and s.get("slices", 1) > 1):
            rows.append((label, f"{format_seconds(lv['busy_s'])} busy, {format_seconds(lv['exposed_s'])} exposed"))
    for kind, k in sorted(s["collectives"].items()):
        rows.append((kind, f"{int(k['ops'])} ops, {format_bytes(k['bytes'])}, {format_seconds(k['busy_s'])} busy "
                           f"(closed form {format_seconds(k['closed_form_s'])})"))
    if s.get("input_s"):
        rows.append(("host input", f"{format_seconds(s['input_s'])} per step on the hosts; " + (
            f"input-bound: the chips wait {format_seconds(s['input_wait_s'])} for it" if s["input_bound"] else "the chips take longer (not input-bound)")))
    if "mfu" in s:
        rows.append(("model FLOPs utilisation", f"{s['mfu']:.1%}"))
    if "hfu" in s:
        rows.append(("hardware FLOPs utilisation", f"{s['hfu']:.1%} (recomputation included)"))
    if "hbm_bytes_per_chip" in s:
        rows.append(("HBM per chip", hbm_text(s["hbm_bytes_per_chip"], s.get("hbm_capacity_bytes"))))
    rows.append(("engine", f"{s['engine_wall_s']:.3f} s wall, {s['events']:,} events, {s['flows_simulated']:,} of {s['flows']:,} flows simulated"))
    return rows


def expand_paths(patterns: list[str]) -> list[str]:
    """Shell-style patterns (quoted 'all_reduce.*.et') to sorted paths; a pattern that matches
    nothing is kept as given so the loader names the missing file."""
    out: list[str] = []
    for p in patterns:
        hits = sorted(glob.glob(p)) if glob.has_magic(p) else []
        out.extend(hits or [p])
    return out


def resolve_slices(trace, given: int | None) -> int:
    """The job's slice count: `--slices`, else what the trace says (dcn=N), else 1; the two
    disagreeing is an error."""
    declared = declared_slices(trace)
    if given is not None:
        if given < 1:
            raise PodsimError(f"--slices {given}: give a whole number >= 1")
        if declared is not None and declared != given:
            raise PodsimError(f"--slices {given} conflicts with the trace, made for {declared} slice(s) (dcn={declared}); drop --slices or regenerate the trace")
        return given
    return declared or 1




def _trace_mode(files: list[str], generation: str | None, network: str | None, slice_shape: str | None,
                twisted: bool, efficiency: float | None, fast_path: bool, as_json: bool,
                slices: int | None = None, dcn: str = "eps", oversubscription: float = 1.0,
                wan: tuple[int, float, float, str] = (1, 1.0, 12800.0, "split"), routing: str = "dimension_order",
                timeline: str | None = None) -> None:
    if (generation is None) == (network is None):
        raise PodsimError("give --generation GEN (with --slice) or --network ASTRA_NETWORK.yml for a trace")
    check_timeline_path(timeline)
    gen = network_generation(network) if network else get_generation(generation)
    shape = parse_shape(slice_shape, gen.dims) if slice_shape else gen.pod_shape
    spec, engineer = dcn_choice(dcn, oversubscription, *wan)
    trace = load_trace(expand_paths(files), shape=shape)
    n = resolve_slices(trace, slices)
    job = build_job(trace, gen, shape if slice_shape else None, n, twisted=twisted, dcn=spec, engineer_dcn=engineer,
                    name=trace.name or "trace")
    with record_link_load(timeline is not None) as load:
        result = simulate_step(None, job, compute_efficiency=efficiency, fast_path=fast_path, routing=routing)
    if timeline:
        write_timeline(timeline, result, load.last, title=trace.name or files[0])
    summary = step_summary(result, trace)
    shape_name = format_shape(job.slices[0].shape)
    summary.update(trace=trace.name, slice=shape_name, twisted=job.slices[0].twisted, dcn=job.fabric.dcn.kind,
                   dcn_oversubscription=job.fabric.dcn.oversubscription, pods=job.fabric.layout.pods,
                   sites=job.fabric.dcn.sites)
    if summary.get("hbm_fits") is False:
        typer.echo("warning: " + fits_message(summary["hbm_bytes_per_chip"], summary["hbm_capacity_bytes"]), err=True)
    if as_json:
        emit_json(summary)
        return
    where = shape_name if n == 1 else f"{n} x {shape_name} on {job.fabric.layout.pods} pod(s), {dcn} DCN"
    if spec.sites > 1:
        where += f", {spec.sites} sites"
    table(f"{trace.name or files[0]} on {gen.name} — {where}", step_rows(summary))


@app.command("steptime")
def steptime_cmd(
    generation: str = typer.Option(None, "--generation", help="generation id, e.g. tpu-v4"),
    trace_files: list[str] = typer.Option(None, "--trace", help="a step trace (podsim JSON/YAML, ASTRA-sim text, Chakra .et/.json); for Chakra, one file per rank: repeat --trace or quote a pattern like 'all_reduce.*.et'"),
    network: str = typer.Option(None, "--network", help="with --trace: an ASTRA-sim network .yml instead of --generation"),
    efficiency: float = typer.Option(None, "--efficiency", help=f"with --trace: a flat fraction of peak FLOP/s for every compute op (e.g. {DEFAULT_COMPUTE_EFFICIENCY}, hardware.md perf.3) instead of the per-op model", callback=opt_finite("--efficiency", low=0, high=1, low_open=True)),
    slice_shape: str = typer.Option(None, "--slice", help="slice shape, e.g. 4x4x8; default: the whole pod"),
    twisted: bool = typer.Option(False, "--twisted", help="twisted torus (k x k x 2k or k x 2k x 2k)"),
    collective: str = typer.Option(None, "--collective", help=f"one of: {', '.join(KINDS)}"),
    size: str = typer.Option(None, "--bytes", help="size in the nccl-tests convention, e.g. 1GiB, 256MB, 4096"),
    group: str = typer.Option("all", "--group", help="slice axes of the group: x, x,y, all, x:4 ..."),
    algorithm: str = typer.Option("auto", "--algorithm", help=f"auto (fastest by closed form) or one of: {', '.join(ALGORITHMS)}"),
    slices: int = typer.Option(None, "--slices", help="with --trace: slices of a multislice job (default: the trace's dcn=N, else 1)", callback=opt_count("--slices", 1, 4096, "slices of one job")),
    dcn: str = typer.Option("eps", "--dcn", help="with --trace: data-centre network between slices: eps (leaf-spine Clos), ocs (uniform OCS mesh), ocs-job (OCS circuits engineered for the job)"),
    oversubscription: float = typer.Option(1.0, "--oversubscription", help="with --dcn eps: NIC bandwidth : spine uplink bandwidth", callback=opt_finite("--oversubscription", low=1, high=1000)),
    sites: int = typer.Option(1, "--sites", help="with --trace: data centres the slices split over, joined by WAN links (EPS DCN)", callback=opt_count("--sites", 1, 64, "data centres of one job")),
    wan_latency_ms: float = typer.Option(1.0, "--wan-latency-ms", help="with --sites: one-way WAN latency (assumption: 1 ms, ~200 km of fibre)", callback=opt_finite("--wan-latency-ms", low=0, high=1000)),
    wan_gbps: float = typer.Option(12800.0, "--wan-gbps", help="with --sites: WAN capacity per site pair and direction, Gb/s (assumption: 16 x 800GbE)", callback=opt_finite("--wan-gbps", low=0, low_open=True)),
    ecmp: str = typer.Option("split", "--ecmp", help="with --dcn eps: split (each flow evenly over the spines) or hash (one spine per NIC pair, collisions included)"),
    no_fast_path: bool = typer.Option(False, "--no-fast-path", help="simulate every flow (no symmetry folding)"),
    routing: str = typer.Option("dimension_order", "--routing", help=f"ICI routing in the slice: {', '.join(ROUTING_POLICIES)}"),
    timeline: str = typer.Option(None, "--timeline", help="with --trace: write the step as Chrome trace-event JSON (open in Perfetto), e.g. step.json"),
    as_json: bool = typer.Option(False, "--json", help="one JSON object on stdout"),
) -> None:
    """Simulate a collective on a slice (simulated and closed-form time, algorithm and bus
    bandwidth), or a whole step trace (--trace: step time and where it goes)."""
    check_routing(routing)
    if trace_files:
        _trace_mode(trace_files, generation, network, slice_shape, twisted, efficiency, not no_fast_path, as_json,
                    slices, dcn, oversubscription, (sites, wan_latency_ms, wan_gbps, ecmp), routing, timeline)
        return
    if timeline:
        raise PodsimError("--timeline writes a step trace's timeline: give it with --trace FILE")
    if generation is None:
        raise PodsimError("give --generation GEN (e.g. --generation tpu-v4)")
    if collective is None or size is None:
        raise PodsimError("give --collective KIND and --bytes SIZE (e.g. --collective all_reduce --bytes 1GiB)")
    collective, algorithm = normalise_kind(collective, field="--collective"), normalise_algorithm(algorithm, field="--algorithm")
    nbytes = parse_bytes(size)
    built = build_slice(generation, slice_shape, twisted=twisted)
    r = simulate_collective(built, collective, nbytes, group=group, algorithm=algorithm, fast_path=not no_fast_path,
                            routing=routing)
    if as_json:
        out = r.to_dict()
        out.update(generation=generation, slice=format_shape(built.slice.shape), twisted=built.slice.twisted, routing=routing)
        emit_json(out)
        return
    name = built.fabric.generation.name
    table(f"{name} — {format_shape(built.slice.shape)}{' twisted' if built.slice.twisted else ''}, {routing} routing",
          collective_rows(r))
