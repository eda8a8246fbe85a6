"""`podsim cluster --generation GEN --pods N (--synthetic SPEC | --trace CSV [--columns ...])
--policy fifo|backfill|priority [--host-availability A | --mtbf D --mttr D] --horizon DURATION
--seed N [--ocs/--no-ocs] [--json]`: simulate a fleet's queue, failures and goodput."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from podsim.bounds import MAX_JOBS, opt_count, opt_finite, opt_seed
from podsim.cli import app
from podsim.cli.common import emit_json, progress_lines, table
from podsim.cluster import (
    RooflineStepTime,
    failure_model,
    load_failure_trace,
    make_config,
    simulate,
)
from podsim.errors import PodsimError
from podsim.units import format_duration, format_percent, format_seconds, parse_duration
from podsim.workload import TraceColumns, generate_jobs, load_trace_csv, parse_synthetic


def _rows(m: dict, unplaceable: list[dict]) -> list[tuple[str, str]]:
    pct, sec = format_percent, format_duration
    rows = [
        ("fleet", f"{m['pods']} x {m['generation']} ({m['chips']} chips, {'OCS' if m['ocs'] else 'static wiring'}), "
                  f"policy {m['policy']}, solver {m['solver']}"),
        ("jobs", f"{m['jobs_total']} total: {m['jobs_completed']} completed, {m['jobs_running']} running, "
                 f"{m['jobs_queued']} queued, {m['jobs_unplaceable']} never placeable, {m['jobs_not_arrived']} after the horizon"),
        ("utilisation", f"{pct(m['utilisation'])} of healthy chip-hours (availability {pct(m['availability'])})"),
        ("goodput", f"{pct(m['goodput'])} of allocated chip-hours useful; {pct(m['fleet_goodput'])} of the fleet's"),
        ("chip-hours", f"useful {m['useful_chip_h']:.6g}, lost to failures/preemption {m['lost_chip_h']:.4g}, "
                       f"restart/reconfiguration {m['overhead_chip_h']:.4g}"),
        ("queue wait", f"p50 {sec(m['wait_p50_s'])}, p95 {sec(m['wait_p95_s'])}, p99 {sec(m['wait_p99_s'])}"),
        ("slowdown", f"mean {m['slowdown_mean']:.3g}, p95 {m['slowdown_p95']:.3g} (bounded, tau 10 s)"),
        ("failures", f"{m['failures_host']} host, {m['failures_ocs']} OCS, {m['failures_link']} link; "
                     f"{m['job_interruptions']} job interruptions, {m['preemptions']} preemptions, "
                     f"{m['ocs_reconfigurations']} OCS reconfigurations"),
    ]
    if m.get("degraded_starts") or m.get("spare_remaps"):
        rows.append(("OCS remedies", f"{m['degraded_starts']} runs started on a degraded torus, "
                                     f"{m['spare_remaps']} fibers moved to spare OCS ports"))
    if "largest_placeable_mean_chips" in m:
        rows.append(("fragmentation", f"largest placeable slice {m['largest_placeable_mean_chips']:.0f} chips on average "
                                      f"(min {m['largest_placeable_min_chips']:.0f}); 1 - largest/free {m['fragmentation_mean']:.2f}"))
    for u in unplaceable:
        rows.append(("never placed", f"{u['jobs']} x {u['shape']}: {u['reason']}"))
    rows.append(("wall time", f"{m['engine_wall_s']:.2f} s ({m['passes']} scheduling passes, {m['placement_calls']} placement calls)"))
    return rows


@app.command("cluster")
def cluster_cmd(
    generation: Annotated[str, typer.Option("--generation", "-g", help="generation id, e.g. tpu-v4, tpu-v5e")],
    horizon: Annotated[str, typer.Option("--horizon", help="simulated time, e.g. 30d, 72h")],
    pods: int = typer.Option(1, "--pods", help="pods in the fleet", callback=opt_count("--pods")),
    synthetic: str | None = typer.Option(None, "--synthetic", help="job stream: KEY=VALUE pairs (jobs=500,rate=6/h,...) or a YAML file"),
    trace: Path | None = typer.Option(None, "--trace", help="job trace CSV (job_id, submission_time, duration, num_gpu)"),
    columns: str | None = typer.Option(None, "--columns", help="CSV column mapping: id=...,submit=...,duration=...,accelerators=...,time_scale=..."),
    arrival_scale: float = typer.Option(1.0, "--arrival-scale", help="multiply trace submission times (0.9: 11% more load)", callback=opt_finite("--arrival-scale", low=0, low_open=True)),
    limit: int | None = typer.Option(None, "--limit", help="read at most this many trace jobs", callback=opt_count("--limit", 1, MAX_JOBS, "the simulation's job limit")),
    policy: str = typer.Option("fifo", "--policy", help="fifo, backfill (EASY) or priority (with preemption)"),
    host_availability: float | None = typer.Option(None, "--host-availability", help="steady-state host availability, e.g. 0.995", callback=opt_finite("--host-availability")),
    mtbf: str | None = typer.Option(None, "--mtbf", help="host mean time between failures, e.g. 2000h"),
    mttr: str | None = typer.Option(None, "--mttr", help="mean time to repair (default 1h)"),
    weibull_shape: float | None = typer.Option(None, "--weibull-shape", help="Weibull times to failure with this shape k (default exponential)", callback=opt_finite("--weibull-shape", low=0, low_open=True)),
    ocs_mtbf: str | None = typer.Option(None, "--ocs-mtbf", help="per OCS unit MTBF"),
    ocs_mttr: str | None = typer.Option(None, "--ocs-mttr", help="per OCS unit MTTR (default 1h)"),
    link_mtbf: str | None = typer.Option(None, "--link-mtbf", help="per ICI cable MTBF"),
    link_mttr: str | None = typer.Option(None, "--link-mttr", help="per ICI cable MTTR (default 1h)"),
    failure_trace: Path | None = typer.Option(None, "--failure-trace", help="CSV time_s,component,id,repair_s (instead of drawn failures)"),
    ocs: bool = typer.Option(True, "--ocs/--no-ocs", help="OCS wiring, or cubes fixed in their home arrangement"),
    degraded_placement: str = typer.Option("off", "--degraded-placement", help="off, requested (jobs with allow_degraded) or all: may run on a torus with a down OCS unit's circuits dark"),
    degraded_slowdown: float = typer.Option(1.0, "--degraded-slowdown", help="run time factor on a degraded slice (1: compute-bound)", callback=opt_finite("--degraded-slowdown", low=1, high=100)),
    spare_ports: bool = typer.Option(False, "--spare-ports/--no-spare-ports", help="move a cube's fiber off a failed OCS port onto a spare port of that OCS"),
    solver: str = typer.Option("greedy", "--solver", help="greedy (fast path per job) or cpsat (batch admission)"),
    decision_time_limit: float = typer.Option(1.0, "--decision-time-limit", help="CP-SAT limit per scheduling decision", callback=opt_finite("--decision-time-limit", low=0, low_open=True)),
    checkpoint_interval: str = typer.Option("1h", "--checkpoint-interval", help="run time between checkpoints"),
    restart_overhead: str = typer.Option("5min", "--restart-overhead", help="time to restart from a checkpoint"),
    efficiency: float = typer.Option(0.6, "--efficiency", help="fraction of peak FLOP/s for step-based jobs (roofline)", callback=opt_finite("--efficiency", low=0, high=1, low_open=True)),
    sample: str | None = typer.Option(None, "--sample", help="time-series step (default horizon/500)"),
    seed: int = typer.Option(0, "--seed", help="seed for synthetic jobs, failures and CP-SAT, 0 .. 2^63-1", callback=opt_seed()),
    as_json: bool = typer.Option(False, "--json", help="one JSON object on stdout (metrics, never-placed shapes, time series)"),
) -> None:
    """Simulate a fleet: job arrivals, a queue policy, placement, failures and checkpoint restarts."""
    if (synthetic is None) == (trace is None):
        raise PodsimError("give exactly one job stream: --synthetic SPEC or --trace CSV")
    if columns is not None and trace is None:
        raise PodsimError("--columns maps the columns of a --trace CSV; there is no --trace")
    failures = failure_model(host_availability, mtbf, mttr, weibull_shape, ocs_mtbf, ocs_mttr, link_mtbf, link_mttr)
    if failure_trace is not None and failures.any:
        raise PodsimError("give --failure-trace or failure processes (--host-availability, --mtbf, ...), not both")
    config = make_config(
        generation=generation, pods=pods, ocs=ocs, policy=policy, solver=solver,
        decision_time_limit_s=decision_time_limit, horizon_s=parse_duration(horizon),
        checkpoint_interval_s=parse_duration(checkpoint_interval), restart_overhead_s=parse_duration(restart_overhead),
        failures=failures, sample_interval_s=parse_duration(sample) if sample else None,
        degraded_placement=degraded_placement, degraded_slowdown=degraded_slowdown, spare_ports=spare_ports)
    if trace is not None:
        jobs = load_trace_csv(trace, generation, TraceColumns.parse(columns), limit=limit, arrival_scale=arrival_scale)
    else:
        jobs = generate_jobs(parse_synthetic(synthetic, generation), seed)
    events = load_failure_trace(failure_trace) if failure_trace is not None else None
    step_time = RooflineStepTime(efficiency)
    err = Console(stderr=True)
    with Progress(TextColumn("simulating"), BarColumn(), TextColumn("{task.fields[t]}"), TimeElapsedColumn(),
                  console=err, transient=True, disable=not err.is_terminal) as bar:
        task = bar.add_task("sim", total=config.horizon_s, t="")
        lines = None if err.is_terminal else progress_lines("simulating")

        def progress(now: float, total: float) -> None:
            bar.update(task, completed=now, t=format_seconds(now))
            if lines is not None:
                lines(now, total, f"{format_seconds(now)} of {format_seconds(total)} simulated")

        result = simulate(config, jobs, events, seed=seed, step_time=step_time, on_progress=progress)
    if as_json:
        emit_json(result.to_dict(timeseries=True))
        return
    table(f"cluster simulation, {format_seconds(config.horizon_s)}", _rows(result.metrics, list(result.unplaceable)))
