"""`podsim cluster --generation GEN --pods N (--synthetic SPEC | --trace CSV [--columns ...])
--policy fifo|backfill|priority [--host-availability A | --mtbf D --mttr D] --horizon DURATION
--seed N [--ocs/--no-ocs] [--json]`: simulate a fleet's queue, failures and goodput; the
result is the RunResult `podsim run` gives for a job stream (same JSON schema, same key figures)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from podsim import quantities as q
from podsim.cli import app
from podsim.cli.common import (
    emit_json,
    progress_reporter,
    refuse_options,
    table,
    warn_inferred_shapes,
    with_budgets,
)
from podsim.cluster import make_config, make_run, run_cluster
from podsim.cluster.breakdown import goodput_gap
from podsim.cluster.config import POLICY_NAMES, default
from podsim.cluster.failures import failure_model
from podsim.errors import PodsimError
from podsim.scenario.run import cluster_run_result
from podsim.trace.model import DEFAULT_COMPUTE_EFFICIENCY
from podsim.units import format_seconds, parse_duration
from podsim.workload import TraceSpec, parse_synthetic
from podsim.workload.replay import TraceColumns


def _rows(result) -> list[tuple[str, str]]:
    """The key figures `podsim run` prints for a job stream, the OCS remedies used, and the
    shapes never placed."""
    from podsim.report.render import key_rows

    m = result.metrics
    rows = [(name, cells[0]) for name, cells in key_rows([result])]
    rows.insert(next(i for i, (name, _) in enumerate(rows) if name.startswith("goodput")) + 1,
                ("allocated but not useful", goodput_gap(m, result.table("jobs"))))
    if m.get("runs_slowdown_not_charged"):
        rows.append(("slowdown not charged", f"{m['runs_slowdown_not_charged']:,} runs on folded, split or scattered "
                     "slices ran at factor 1: jobs given in time need --slowdown-model (a preset) to price the placement"))
    elif any(m.get(f"runs_{f}") for f in ("fold", "split", "scatter")):
        rows.append(("non-native runs (fold / split / scatter)",
                     f"{m['runs_fold']:,} / {m['runs_split']:,} / {m['runs_scatter']:,}, charged {m['slowdown_charged_mean']:.3f}x "
                     f"on average (at most {m['slowdown_charged_max']:.3f}x) by the engine"))
    if m.get("degraded_starts") or m.get("spare_remaps"):
        rows.append(("OCS remedies", f"{m['degraded_starts']} runs started on a degraded torus, "
                                     f"{m['spare_remaps']} fibers moved to spare OCS ports"))
    return rows + [("never placed", f"{u['jobs']} x {u['shape']}: {u['reason']}") for u in m["unplaceable"]]


@app.command("cluster")
@with_budgets("events", "input_bytes")
def cluster_cmd(
    ctx: typer.Context,
    generation: Annotated[str, typer.Option("--generation", "-g", help="generation id, e.g. tpu-v4, tpu-v5e")],
    horizon: Annotated[str, typer.Option("--horizon", help="simulated time, e.g. 30d, 72h")],
    pods: int = typer.Option(1, "--pods", help="pods in the fleet", callback=q.PODS.option("--pods")),
    sites: int = typer.Option(1, "--sites", help="data centres the pods are split over; multislice jobs cross them only with span_sites", callback=q.SITES.option("--sites")),
    synthetic: str | None = typer.Option(None, "--synthetic", help="job stream: KEY=VALUE pairs (jobs=500,rate=6/h,...) or a YAML file"),
    trace: Path | None = typer.Option(None, "--trace", help="job trace CSV (job_id, submission_time, duration, and num_gpu or an exact shape, e.g. 4x4x8_T)"),
    columns: str | None = typer.Option(None, "--columns", help="CSV column mapping: id=...,submit=...,duration=...,accelerators=...,shape=...,twisted=...,time_scale=..."),
    arrival_scale: float = typer.Option(1.0, "--arrival-scale", help="multiply trace submission times (0.9: 11% more load)", callback=q.ARRIVAL_SCALE.option("--arrival-scale")),
    limit: int | None = typer.Option(None, "--limit", help="read at most this many trace jobs", callback=q.TRACE_JOBS.option("--limit")),
    policy: str = typer.Option(default("policy"), "--policy", help=f"queue policy: {', '.join(POLICY_NAMES)} (backfill: EASY; priority: with preemption)"),
    host_availability: float | None = typer.Option(None, "--host-availability", help="steady-state host availability, e.g. 0.995", callback=q.AVAILABILITY.option("--host-availability")),
    mtbf: str | None = typer.Option(None, "--mtbf", help="host mean time between failures, e.g. 2000h"),
    mttr: str | None = typer.Option(None, "--mttr", help="mean time to repair (default 1h)"),
    weibull_shape: float | None = typer.Option(None, "--weibull-shape", help="Weibull times to failure with this shape k (default exponential)", callback=q.WEIBULL_SHAPE.option("--weibull-shape")),
    ocs_mtbf: str | None = typer.Option(None, "--ocs-mtbf", help="per OCS unit MTBF"),
    ocs_mttr: str | None = typer.Option(None, "--ocs-mttr", help="per OCS unit MTTR (default 1h)"),
    link_mtbf: str | None = typer.Option(None, "--link-mtbf", help="per ICI cable MTBF"),
    link_mttr: str | None = typer.Option(None, "--link-mttr", help="per ICI cable MTTR (default 1h)"),
    failure_trace: Path | None = typer.Option(None, "--failure-trace", help="CSV time_s,component,id,repair_s (instead of drawn failures)"),
    ocs: bool = typer.Option(True, "--ocs/--no-ocs", help="OCS wiring, or cubes fixed in their home arrangement"),
    degraded_placement: str = typer.Option("off", "--degraded-placement", help="off, requested (jobs with allow_degraded) or all: may run on a torus with a down OCS unit's circuits dark"),
    degraded_slowdown: float = typer.Option(1.0, "--degraded-slowdown", help="run time factor on a degraded slice (1: compute-bound)", callback=q.DEGRADED_SLOWDOWN.option("--degraded-slowdown")),
    spare_ports: bool = typer.Option(False, "--spare-ports/--no-spare-ports", help="move a cube's fiber off a failed OCS port onto a spare port of that OCS"),
    solver: str = typer.Option(default("solver"), "--solver", help="greedy (fast path per job) or cpsat (batch admission)"),
    fold: str = typer.Option(default("fold"), "--fold", help="none, or allowed: fold a request onto another box or split it into whole blocks plus pieces; a reshaped job is charged the slowdown the engine prices with its own model (jobs in steps) or --slowdown-model (jobs in time), else the output says 'slowdown not charged'"),
    placement: str = typer.Option(default("placement"), "--placement", help="greedy fit: best, first, or hilbert (any free chips along a Hilbert curve; static pods)"),
    slowdown_model: str | None = typer.Option(None, "--slowdown-model", help="model preset whose step on the engine prices a non-native placement of a job given in time (without it such a run is not charged, and the output says so)"),
    decision_time_limit: float = typer.Option(default("decision_time_limit"), "--decision-time-limit", help="CP-SAT limit per scheduling decision, in deterministic time units (work, not wall-clock seconds)", callback=q.DECISION_TIME_LIMIT.option("--decision-time-limit")),
    checkpoint_interval: str = typer.Option(format_seconds(default("checkpoint_interval_s")), "--checkpoint-interval", help="run time between checkpoints"),
    restart_overhead: str = typer.Option(format_seconds(default("restart_overhead_s")), "--restart-overhead", help="time to restart from a checkpoint"),
    efficiency: float = typer.Option(None, "--compute-efficiency", help=f"a flat fraction of peak FLOP/s for step-based jobs (e.g. {DEFAULT_COMPUTE_EFFICIENCY}, hardware.md perf.3) instead of the per-op compute model", callback=q.EFFICIENCY.option("--compute-efficiency")),
    sample: str | None = typer.Option(None, "--sample", help="time-series step (default horizon/500)"),
    warmup: str | None = typer.Option(None, "--warmup", help="leave the first stretch (the fleet filling up) and its jobs out of the metrics, e.g. 2d"),
    drain: bool = typer.Option(False, "--drain/--no-drain", help="after the horizon, let the measured jobs run on (no arrivals) so their waits are whole"),
    seed: int = typer.Option(0, "--seed", help="seed for synthetic jobs, failures and CP-SAT, 0 .. 2^63-1", callback=q.SEED.option("--seed")),
    as_json: bool = typer.Option(False, "--json", help="one JSON object on stdout, the schema of `podsim run --json` (metrics, cost, tables.timeseries, scenario)"),
) -> None:
    """Simulate a fleet: job arrivals, a queue policy, placement, failures and checkpoint restarts."""
    if (synthetic is None) == (trace is None):
        raise PodsimError("give exactly one job stream: --synthetic SPEC or --trace CSV")
    if columns is not None and trace is None:
        raise PodsimError("--columns maps the columns of a --trace CSV; there is no --trace")
    if trace is None:
        refuse_options(ctx, ("limit", "arrival_scale"), "without --trace (they shape a replayed job trace)")
    if solver != "cpsat":
        refuse_options(ctx, ("decision_time_limit",), "with --solver greedy (it limits CP-SAT)")
    if degraded_placement == "off":
        refuse_options(ctx, ("degraded_slowdown",), "with --degraded-placement off (no job runs on a degraded slice)")
    if not ocs:
        refuse_options(ctx, ("spare_ports",), "with --no-ocs (spare ports are OCS ports)")
    if ocs_mtbf is None and failure_trace is None:  # only a failed OCS unit darkens circuits or ports
        refuse_options(ctx, ("spare_ports", *(("degraded_placement",) if degraded_placement in ("requested", "all") else ())),
                       "without OCS failures (--ocs-mtbf or --failure-trace): no OCS unit fails")
    if fold != "allowed" and placement != "hilbert":
        refuse_options(ctx, ("slowdown_model",), f"with --fold {fold} and --placement {placement} (every job runs on its own "
                       "shape: no non-native placement to price)")
    if host_availability is None and mtbf is None and ocs_mtbf is None and link_mtbf is None:
        refuse_options(ctx, ("weibull_shape",), "without a failure process (--mtbf, --host-availability, --ocs-mtbf or --link-mtbf)")
    failures = failure_model(host_availability, mtbf, mttr, weibull_shape, ocs_mtbf, ocs_mttr, link_mtbf, link_mttr)
    if failure_trace is not None and failures.any:
        raise PodsimError("give --failure-trace or failure processes (--host-availability, --mtbf, ...), not both")
    config = make_config(
        generation=generation, pods=pods, sites=sites, ocs=ocs, policy=policy, solver=solver,
        decision_time_limit=decision_time_limit, horizon_s=q.HORIZON.check(parse_duration(horizon), "--horizon"),
        checkpoint_interval_s=q.CHECKPOINT_INTERVAL.check(parse_duration(checkpoint_interval), "--checkpoint-interval"),
        restart_overhead_s=q.RESTART_OVERHEAD.check(parse_duration(restart_overhead), "--restart-overhead"),
        failures=failures, sample_interval_s=parse_duration(sample) if sample else None,
        warmup_s=parse_duration(warmup) if warmup else 0.0, drain=drain,
        degraded_placement=degraded_placement, degraded_slowdown=degraded_slowdown, spare_ports=spare_ports,
        fold=fold, placement=placement, slowdown_model=slowdown_model)
    if trace is not None:
        refuse_options(ctx, ("efficiency",), "to a job trace (its jobs are given in time, not in steps)")
        cols = TraceColumns.parse(columns)
        stream = {"trace": TraceSpec(path=trace, columns=cols, limit=limit, arrival_scale=arrival_scale)}
    else:
        stream = {"synthetic": parse_synthetic(synthetic, generation)}
        if not stream["synthetic"].models:
            refuse_options(ctx, ("efficiency",), "to jobs given in time (it sets step-based jobs' compute: give models=... in --synthetic)")
    run = make_run(config=config, failure_trace=failure_trace, compute_efficiency=efficiency, seed=seed, **stream)
    with progress_reporter("simulating") as update:
        def progress(now: float, total: float) -> None:
            update(now, total, format_seconds(now), f"{format_seconds(now)} of {format_seconds(total)} simulated")

        sim = run_cluster(run, on_progress=progress)
    result = cluster_run_result(sim, wall_s=sim.metrics["engine_wall_s"])
    warn_inferred_shapes(result.metrics)
    if as_json:  # the schema of `podsim run --json`, with the time series and the cluster config
        emit_json({**result.summary(tables=("timeseries",)), "scenario": result.scenario})
        return
    table(f"cluster simulation, {format_seconds(config.horizon_s)}", _rows(result))
