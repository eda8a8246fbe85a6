"""`podsim place --generation GEN --requests FILE.yaml [--failed FILE.yaml] [--solver cpsat|greedy]
[--time-limit S] [--seed N] [--json]`: place a batch of slice requests on one pod."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from podsim import quantities as q
from podsim.cli import app
from podsim.cli.common import console, emit_json, refuse_options, table, with_budgets
from podsim.placement import PodState, SolverParams, place, validate_placement
from podsim.placement.failures import load_failures
from podsim.placement.metrics import free_space_summary, placement_report
from podsim.placement.problem import PlacementSettings
from podsim.placement.requests import load_requests
from podsim.units import format_rate


def _where(d: dict) -> str:
    if not d["placed"]:
        return ""
    if d.get("slices"):
        return f"{d['slices']} slices on pod(s) " + ",".join(str(p) for p in d["pods"])
    if d["ocs_circuits"]:
        return f"pod {d['pod']} cubes " + ",".join(str(c) for c in d["cubes"])
    if d["cubes"] and len(d["cubes"]) == 1 and d["origin"] is not None and len(d["chips"]) < 64:
        return f"cube {d['cubes'][0]} at {tuple(d['origin'])}"
    return f"pod {d['pod']} origin {tuple(d['origin'])}"


@app.command("place")
@with_budgets("requests", "input_bytes")
def place_cmd(
    ctx: typer.Context,
    generation: Annotated[str, typer.Option("--generation", "-g", help="generation id, e.g. tpu-v4, tpu-v5e")],
    requests: Annotated[Path, typer.Option("--requests", "-r", help="YAML list of {id, shape, priority, twisted, allow_degraded, slices, span_sites}")],
    failed: Annotated[Path | None, typer.Option("--failed", "-f", help="YAML {hosts, cubes, ocs, ocs_ports} of failed parts")] = None,
    solver: str = typer.Option("cpsat", "--solver", help="cpsat (optimisation) or greedy"),
    policy: str = typer.Option("best", "--policy", help="greedy policy (and CP-SAT's first hint): best or first"),
    time_limit: float = typer.Option(1.0, "--time-limit", help="CP-SAT limit: deterministic time units (work, not seconds; reproducible), or wall-clock seconds with --wall-clock", callback=q.SOLVER_TIME_LIMIT.option("--time-limit")),
    seed: int = typer.Option(0, "--seed", help="CP-SAT random seed, 0 .. 2^63-1", callback=q.SEED.option("--seed")),
    workers: int = typer.Option(1, "--workers", help="CP-SAT workers (>= 1; several use interleaved search)", callback=q.WORKERS.option("--workers")),
    wall_clock: bool = typer.Option(False, "--wall-clock", help="apply --time-limit as wall-clock time (not reproducible)"),
    pods: int = typer.Option(1, "--pods", help="pods in the fleet (multislice requests use several)", callback=q.PLACE_PODS.option("--pods")),
    sites: int = typer.Option(1, "--sites", help="data centres the pods are split over (consecutive pods); a multislice request crosses them only with span_sites", callback=q.SITES.option("--sites")),
    no_ocs: bool = typer.Option(False, "--no-ocs", help="static wiring: cubes fixed in their home arrangement"),
    block_cubes: int = typer.Option(8, "--block-cubes", help="cubes per DCN aggregation block (locality preference)", callback=q.BLOCK_CUBES.option("--block-cubes")),
    now: float = typer.Option(0.0, "--now", help="current time in s, for the age term (requests' arrival_s)", callback=q.ARRIVAL_TIME.option("--now")),
    spare_ports: bool = typer.Option(False, "--spare-ports", help="first move fibers off failed OCS ports onto spare ports of their OCS"),
    as_json: bool = typer.Option(False, "--json", help="one JSON object on stdout"),
) -> None:
    """Place slice requests on a pod: which cubes or chips each gets, and its OCS circuits."""
    if solver == "greedy":
        refuse_options(ctx, ("time_limit", "seed", "workers", "wall_clock"), "with --solver greedy (they set CP-SAT)")
    state = PodState.empty(generation, pods=pods, ocs=not no_ocs)
    reqs = load_requests(requests, state.layout.generation)
    if failed is not None:
        state.apply_failures(load_failures(failed, state.layout))
    if spare_ports:
        state.remap_spares()
    params = SolverParams(time_limit=time_limit, num_workers=workers, random_seed=seed, deterministic=not wall_clock)
    settings = PlacementSettings(block_cubes=block_cubes, sites=sites)
    result = place(state, reqs, solver=solver, policy=policy, params=params, settings=settings, now_s=now)
    views = validate_placement(state, result, reqs)
    rows = placement_report(result, views)
    after = state.copy()
    for p in result.placed:
        for m in p.members:  # a multislice request: each slice as 'id/k'
            after.allocate(m.request.id, m)
    summary = result.summary()
    summary["free_space_after"] = free_space_summary(after, settings)
    if as_json:
        emit_json({"generation": generation, "ocs": not no_ocs, "pods": pods, "sites": sites, "requests": rows,
                   "summary": summary})
        return
    t = Table(title=f"{state.layout.generation.name}: {summary['placed']} of {summary['requests']} requests placed",
              title_justify="left")
    for col in ("id", "request", "placed", "where", "topology", "bisection", "reason"):
        t.add_column(col)
    for d in rows:
        bis = format_rate(d["bisection_bytes_per_s"]) if d["bisection_bytes_per_s"] else ""
        t.add_row(d["id"], d["request"] + (f" as {d['shape']}" if d["placed"] and d["shape"] not in d["request"] else ""),
                  "yes" if d["placed"] else "no", _where(d), d["topology"] or "", bis, d["reason"] or "")
    console.print(t)
    free = summary["free_space_after"]
    largest = free["largest_placeable"]
    table("summary", [
        ("solver", f"{summary['solver']} ({summary['status']}) in {summary['solve_s']:.3g} s"),
        ("placed chips", f"{summary['placed_chips']} (priority-weighted {summary['priority_weighted_chips']})"),
        ("utilisation", f"{summary['utilisation']:.1%} of the pod, {summary['utilisation_of_healthy']:.1%} of healthy chips"),
        ("free after", f"{free['free_chips']} chips; largest placeable slice {largest['shape'] or 'none'} ({largest['chips']} chips)"),
    ])
