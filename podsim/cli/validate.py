"""`podsim validate FILE [--json]`: check a scenario or a sweep file without running it."""

from __future__ import annotations

from pathlib import Path

import typer

from podsim.cli import app
from podsim.cli.common import emit_json, with_budgets
from podsim.scenario.load import read_yaml_doc, scenario_from_doc
from podsim.scenario.schema import Scenario
from podsim.sweep import load_sweep


def describe_scenario(s: Scenario) -> str:
    t = s.topology
    fleet = f"{t.pods} x {t.generation} ({t.wiring})"
    w = s.workload
    if w.step is not None:
        st = w.step
        what = f"step study: {st.model or st.trace} on {st.slices} x {st.slice}{' twisted' if st.twisted else ''}"
    elif w.serving is not None:
        sv = w.serving
        fleet_of = f"{sv.replicas} x {sv.slice}" if sv.disaggregated is None else \
            f"{sv.disaggregated.prefill} prefill + {sv.disaggregated.decode} decode x {sv.slice}"
        what = (f"serving fleet: {sv.model.model or sv.model.config().name} on {fleet_of}, "
                f"{sv.requests.arrivals.kind} arrivals for {sv.duration:g} s" + (", capacity search" if sv.capacity else ""))
    elif w.synthetic is not None:
        what = f"job stream: {w.synthetic.jobs} synthetic jobs over {s.horizon / 86400:g} d"
    elif w.odd is not None:
        what = (f"job stream: {w.odd.jobs} odd-shape jobs of {w.odd.min_chips}-{w.odd.max_chips} chips "
                f"over {s.horizon / 86400:g} d")
    else:
        what = f"job stream: trace {w.trace.path.name} over {s.horizon / 86400:g} d"
    targets = ", ".join(f"{k} {v}" for k, v in s.targets.items()) or "no targets"
    return f"scenario {s.name!r}: {fleet}, {what}; {targets}"


def check_input_files(s: Scenario) -> None:
    """Read the files a run would read (job trace, failure trace, step trace), so a scenario
    `validate` passes does not fail on them later."""
    from podsim.cluster import load_failure_trace
    from podsim.scenario.check import scenario_generation
    from podsim.topology import parse_shape
    from podsim.trace import load_trace

    if s.workload.trace is not None:
        s.workload.trace.jobs(scenario_generation(s))
    if s.failures.trace is not None:
        load_failure_trace(s.failures.trace)
    if s.workload.step is not None and s.workload.step.trace is not None:
        load_trace(s.workload.step.trace, shape=parse_shape(s.workload.step.slice))


@app.command("validate")
@with_budgets("ops", "events", "input_bytes")
def validate_cmd(
    file: Path = typer.Argument(..., help="scenario or sweep YAML file"),
    as_json: bool = typer.Option(False, "--json", help="one JSON object on stdout"),
) -> None:
    """Check a scenario or sweep file: one line naming the file, line and field if it is wrong."""
    doc = read_yaml_doc(file)  # parsed once: a scenario is validated from it (a sweep is read by its loader)
    if isinstance(doc.data, dict) and "sweep" in doc.data:
        sw = load_sweep(file)
        n = len(sw.points) if sw.mode == "grid" else len(sw.cells) * sw.spec.replicates
        info = {"file": str(file), "kind": "sweep", "name": sw.spec.sweep, "sweep_id": sw.sweep_id, "mode": sw.mode,
                "points" if sw.mode == "grid" else "cells": n}
        text = f"ok: {file}: sweep {sw.spec.sweep!r} ({sw.mode}), {n} {'point' if sw.mode == 'grid' else 'cell'}{'s' if n != 1 else ''}"
        if sw.spec.capacity:
            c = sw.spec.capacity
            text += f", bisecting {c.field} over [{c.low}, {c.high}]"
    else:
        s = scenario_from_doc(doc)
        check_input_files(s)
        info = {"file": str(file), "kind": "scenario", "name": s.name, "workload": s.kind}
        text = f"ok: {file}: {describe_scenario(s)}"
    if as_json:
        emit_json(info)
    else:
        print(text)
