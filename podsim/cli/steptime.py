"""`podsim steptime`: simulate a collective on a slice (and, later, a step trace from a file).

    podsim steptime --generation tpu-v4 --slice 16x16x16 --collective all_reduce --bytes 1GiB
"""

from __future__ import annotations

import typer

from podsim.cli import app
from podsim.cli.common import emit_json, table
from podsim.collectives import ALGORITHMS, KINDS
from podsim.engine import CollectiveResult, simulate_collective
from podsim.errors import PodsimError
from podsim.topology import build_slice, format_shape
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


@app.command("steptime")
def steptime_cmd(
    generation: str = typer.Option(..., "--generation", help="generation id, e.g. tpu-v4"),
    slice_shape: str = typer.Option(None, "--slice", help="slice shape, e.g. 4x4x8; default: the whole pod"),
    twisted: bool = typer.Option(False, "--twisted", help="twisted torus (k x k x 2k or k x 2k x 2k)"),
    collective: str = typer.Option(None, "--collective", help=f"one of: {', '.join(KINDS)}"),
    size: str = typer.Option(None, "--bytes", help="size in the nccl-tests convention, e.g. 1GiB, 256MB, 4096"),
    group: str = typer.Option("all", "--group", help="slice axes of the group: x, x,y, all, x:4 ..."),
    algorithm: str = typer.Option("auto", "--algorithm", help=f"auto (fastest by closed form) or one of: {', '.join(ALGORITHMS)}"),
    no_fast_path: bool = typer.Option(False, "--no-fast-path", help="simulate every flow (no symmetry folding)"),
    as_json: bool = typer.Option(False, "--json", help="one JSON object on stdout"),
) -> None:
    """Simulate a collective on a slice: simulated and closed-form time, algorithm and bus bandwidth."""
    # A `--trace FILE` mode (a step trace from a file, run with podsim.engine.simulate_step)
    # belongs here, beside the collective mode; it is added with the trace importers.
    if collective is None or size is None:
        raise PodsimError("give --collective KIND and --bytes SIZE (e.g. --collective all_reduce --bytes 1GiB)")
    if collective not in KINDS:
        raise PodsimError(f"--collective {collective!r} is not known; use one of: {', '.join(KINDS)}")
    if algorithm != "auto" and algorithm not in ALGORITHMS:
        raise PodsimError(f"--algorithm {algorithm!r} is not known; use auto or one of: {', '.join(ALGORITHMS)}")
    nbytes = parse_bytes(size)
    built = build_slice(generation, slice_shape, twisted=twisted)
    r = simulate_collective(built, collective, nbytes, group=group, algorithm=algorithm, fast_path=not no_fast_path)
    if as_json:
        out = r.to_dict()
        out.update(generation=generation, slice=format_shape(built.slice.shape), twisted=built.slice.twisted)
        emit_json(out)
        return
    name = built.fabric.generation.name
    table(f"{name} — {format_shape(built.slice.shape)}{' twisted' if built.slice.twisted else ''}", collective_rows(r))
