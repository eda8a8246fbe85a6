"""Placement: a batch of slice requests on one pod with failed parts; CP-SAT or greedy."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app_pages.common import (
    colour,
    digest,
    inline_errors,
    percent,
    pick_generation,
    upload_bytes,
)
from podsim.errors import PodsimError
from podsim.files import parse_yaml
from podsim.placement import PodState, SolverParams, place, validate_placement
from podsim.placement.failures import parse_failures
from podsim.placement.metrics import free_space_summary, placement_report
from podsim.placement.podmap import pod_map
from podsim.placement.problem import PlacementSettings
from podsim.placement.requests import parse_requests
from podsim.units import format_rate

CUBE_REQUESTS = [  # the README's example batch
    {"id": "train-a", "shape": "4x4x8", "twisted": True, "priority": 1, "arrival_s": 0.0},
    {"id": "train-b", "shape": "8x8x8", "twisted": False, "priority": 0, "arrival_s": 0.0},
    {"id": "dev-1", "shape": "2x2x1", "twisted": False, "priority": 0, "arrival_s": -600.0},
    {"id": "big", "shape": "8x8x16", "twisted": True, "priority": 0, "arrival_s": 0.0},
    {"id": "huge", "shape": "12x16x16", "twisted": False, "priority": 0, "arrival_s": 0.0},
]
CUBE_FAILURES = 'hosts: [17, 300, 301]\ncubes: [5]\nocs: []\nocs_ports: ["12:6"]\n'
RECT_REQUESTS = [
    {"id": "train-a", "shape": "8x16", "twisted": False, "priority": 1, "arrival_s": 0.0},
    {"id": "train-b", "shape": "8x8", "twisted": False, "priority": 0, "arrival_s": 0.0},
    {"id": "dev-1", "shape": "2x4", "twisted": False, "priority": 0, "arrival_s": 0.0},
    {"id": "dev-2", "shape": "4x4", "twisted": False, "priority": 0, "arrival_s": 0.0},
    {"id": "eval", "shape": "4x8", "twisted": False, "priority": 0, "arrival_s": 0.0},
]
RECT_FAILURES = "hosts: [3]\n"
COLUMNS = ["id", "shape", "twisted", "priority", "arrival_s"]


@st.cache_data(max_entries=32, show_spinner="Placing...")
def run_placement(gen: str, ocs: bool, requests: list[dict], failures_text: str, solver: str, policy: str,
                  time_limit: float, seed: int, workers: int, wall_clock: bool, block_cubes: int) -> dict:
    """The library's placement path, as `podsim place` runs it: validate, place, prove, report."""
    state = PodState.empty(gen, ocs=ocs)
    reqs = parse_requests(requests, state.layout.generation, source="requests table")
    state.apply_failures(parse_failures(parse_yaml(failures_text, "failures"), state.layout))
    params = SolverParams(time_limit=time_limit, num_workers=workers, random_seed=seed, deterministic=not wall_clock)
    settings = PlacementSettings(block_cubes=block_cubes)
    result = place(state, reqs, solver=solver, policy=policy, params=params, settings=settings)
    views = validate_placement(state, result, reqs)
    after = state.copy()
    for p in result.placed:
        after.allocate(p.request.id, p)
    summary = result.summary()
    summary["free_space_after"] = free_space_summary(after, settings)
    return {"rows": placement_report(result, views), "summary": summary, "map": pod_map(after)}


def table_records(df: pd.DataFrame) -> list[dict]:
    """The edited requests table as the requests file's entries (blank rows and cells dropped)."""
    out = []
    for row in df.to_dict("records"):
        entry = {k: v for k, v in row.items() if k in COLUMNS and not (v is None or v == "" or (isinstance(v, float) and math.isnan(v)))}
        if not entry or set(entry) <= {"twisted"}:
            continue
        if isinstance(entry.get("priority"), float) and entry["priority"].is_integer():
            entry["priority"] = int(entry["priority"])
        out.append({k: (v.item() if isinstance(v, np.generic) else v) for k, v in entry.items()})
    return out


def id_ranges(ids: list[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> '0-2, 5, 7-8'."""
    out: list[str] = []
    for v in sorted(ids):
        if out and v == int(out[-1].split("-")[-1]) + 1:
            out[-1] = f"{out[-1].split('-')[0]}-{v}"
        else:
            out.append(str(v))
    return ", ".join(out)


def where(row: dict) -> str:
    if not row["placed"]:
        return ""
    if row["ocs_circuits"] or (row["cubes"] and len(row["cubes"]) > 1):
        return f"{len(row['cubes'])} cubes: {id_ranges(row['cubes'])}"
    if row["cubes"] and row["origin"] is not None:
        return f"cube {row['cubes'][0]} at {tuple(row['origin'])}"
    return f"origin {tuple(row['origin'])}" if row["origin"] is not None else ""


def map_figure(m: dict, job_order: list[str]) -> go.Figure:
    """Cubes (or chips) as squares coloured by the job holding most of them; failed parts marked.

    A 3-D cube arrangement is shown as its z layers side by side."""
    grid = m["grid"]
    gx, gy = grid[0], grid[1] if len(grid) > 1 else 1
    gz = grid[2] if len(grid) > 2 else 1
    cells = m["cells"]

    def xy(c):
        p = c["pos"]
        z = p[2] if len(p) > 2 else 0
        return p[0] + z * (gx + 1), p[1] if len(p) > 1 else 0

    cols = gx * gz + gz - 1
    size = int(np.clip(900 / max(cols, gy * 1.2), 6, 40))
    unit = m["unit"]
    fig = go.Figure()

    def hover(c):
        jobs = ", ".join(f"{j} ({n})" for j, n in c["jobs"].items()) or "none"
        lines = [f"{unit} {c['id']} at {c['pos']}", f"{c['status']}", f"jobs: {jobs}",
                 f"busy {c['busy_chips']} / {c['chips']} chips"]
        if c["failed_chips"]:
            lines.append(f"failed chips {c['failed_chips']} (hosts down: {c['failed_hosts']})")
        if c["ocs_fault"]:
            lines.append("OCS port or unit failed: no cube-level slice")
        return "<br>".join(lines)

    def add(name, sel, col, symbol="square", line=None, scale=1.0):
        if not sel:
            return
        pts = [xy(c) for c in sel]
        fig.add_trace(go.Scatter(x=[p[0] for p in pts], y=[p[1] for p in pts], mode="markers", name=name,
                                 marker={"symbol": symbol, "size": max(6, int(size * scale)), "color": col,
                                         "line": line or {"width": 0}},
                                 hovertext=[hover(c) for c in sel], hoverinfo="text"))

    owner = {c["id"]: next(iter(c["jobs"]), None) for c in cells}
    add("free", [c for c in cells if owner[c["id"]] is None and c["status"] != "failed"], "#e8e8e8")
    add("failed", [c for c in cells if c["status"] == "failed"], "#555555")
    for i, job in enumerate(job_order):
        add(job, [c for c in cells if owner[c["id"]] == job and c["status"] != "failed"], colour(i))
    marked = [c for c in cells if c["status"] != "failed" and (c["failed_chips"] or c["ocs_fault"])]
    add("failed parts (hosts, chips, OCS ports)", marked, "#d62728", symbol="x", line={"width": 1, "color": "white"}, scale=0.5)
    annotations = [{"x": z * (gx + 1) + (gx - 1) / 2, "y": gy - 0.3, "text": f"z = {z}", "showarrow": False,
                    "yanchor": "bottom"} for z in range(gz)] if gz > 1 else []
    fig.update_layout(height=int(min(700, max(260, gy * size * 1.25 + 140))), margin={"l": 10, "r": 10, "t": 30, "b": 10},
                      annotations=annotations, plot_bgcolor="white", legend={"orientation": "h", "y": -0.05})
    fig.update_xaxes(visible=False, range=[-0.7, cols - 0.3])
    fig.update_yaxes(visible=False, scaleanchor="x", range=[-0.7, gy + 0.3])
    return fig


st.title("Placement")
st.caption("Place a batch of slice requests on one pod with failed parts: which cubes or chips each job gets "
           "and the OCS circuits that make its torus. Every result is proved by `validate_placement`.")

c1, c2, c3, c4, c5 = st.columns([1.2, 0.7, 0.9, 0.8, 0.8])
gen_id, gen = pick_generation(c1)
cube_pod = bool(gen.cube_shape)
ocs = c2.toggle("OCS", value=bool(gen.ocs and cube_pod), key="ocs", disabled=not (gen.ocs and cube_pod),
                help="off: the cubes stay in their home arrangement (the v4 paper's static baseline)")
solver = c3.radio("Solver", ["cpsat", "greedy"], key="solver", horizontal=True,
                  help="CP-SAT batch admission (never worse than greedy), or greedy first/best fit")
policy = c4.selectbox("Greedy policy", ["best", "first"], key="policy", help="greedy fit, and CP-SAT's first hint")
time_limit = c5.number_input("Time limit", min_value=0.05, max_value=30.0, value=1.0, step=0.5, key="time_limit",
                             disabled=solver != "cpsat", help="CP-SAT deterministic time units (work, not seconds: reproducible); wall-clock seconds when ticked below")
with st.expander("Solver settings"):
    s1, s2, s3, s4 = st.columns(4)
    seed = s1.number_input("Seed", min_value=0, value=0, step=1, key="seed")
    workers = s2.number_input("Workers", min_value=1, max_value=2, value=1, step=1, key="workers",
                              help="more than one uses interleaved search (still reproducible)")
    block_cubes = s3.number_input("Cubes per DCN block", min_value=1, max_value=64, value=8, step=1, key="block_cubes")
    wall_clock = s4.checkbox("Wall-clock limit", value=False, key="wall_clock", help="faster answers, not reproducible")

left, right = st.columns([3, 2])
with right:
    st.markdown("**Failed parts** (ids as `podsim topology GEN --json --detail` lists them)")
    failures_text = st.text_area("Failures (YAML)", value=CUBE_FAILURES if cube_pod else RECT_FAILURES, height=130,
                                 key=f"failures_{gen_id}", label_visibility="collapsed")
    upload = st.file_uploader("Requests file (YAML list of {id, shape, twisted, priority, arrival_s})",
                              type=["yaml", "yml"], key="requests_file")
with left:
    st.markdown("**Requests** (edit cells, add or delete rows)")
    initial, source = (CUBE_REQUESTS if cube_pod else RECT_REQUESTS), f"default-{gen_id}"
    if upload is not None:
        with inline_errors():
            data = upload_bytes(upload)
            raw = parse_yaml(data.decode("utf-8", errors="replace"), upload.name)
            if not isinstance(raw, list) or not all(isinstance(r, dict) for r in raw):
                raise PodsimError(f"{upload.name}: expected a YAML list of requests ({{id, shape, priority, twisted}})")
            initial, source = raw, f"upload-{digest(data)}"
    frame = pd.DataFrame([{k: r.get(k) for k in COLUMNS} for r in initial], columns=COLUMNS)
    frame["twisted"] = frame["twisted"].fillna(False).astype(bool)
    edited = st.data_editor(frame, num_rows="dynamic", key=f"requests_{source}", hide_index=True,
                            column_config={
                                "id": st.column_config.TextColumn("id", required=True),
                                "shape": st.column_config.TextColumn("shape", required=True, help="e.g. 4x4x8"),
                                "twisted": st.column_config.CheckboxColumn("twisted", default=False),
                                "priority": st.column_config.NumberColumn("priority", min_value=0, step=1, default=0),
                                "arrival_s": st.column_config.NumberColumn("arrival (s)", step=60.0, default=0.0),
                            })

with inline_errors():
    out = run_placement(gen_id, ocs, table_records(edited), failures_text, solver, policy, float(time_limit),
                        int(seed), int(workers), bool(wall_clock), int(block_cubes))
rows, summary = out["rows"], out["summary"]
free = summary["free_space_after"]

m = st.columns(5)
m[0].metric("Placed", f"{summary['placed']} of {summary['requests']}")
m[1].metric("Chips placed", f"{summary['placed_chips']:,}")
m[2].metric("Utilisation", percent(summary["utilisation"]), help="busy chips after the batch / all chips of the pod")
m[3].metric("Solver", f"{summary['status']}", help=f"{summary['solver']} in {summary['solve_s']:.3g} s")
largest = free["largest_placeable"]
m[4].metric("Largest placeable after", largest["shape"] or "none", help=f"{largest['chips']} chips; fragmentation {free['fragmentation']:.2f}")

st.subheader("Pod map")
st.caption(f"One square per {out['map']['unit']}, coloured by the job holding most of it; grey: free, dark: failed, "
           "red x: a failed host, chip or OCS port inside.")
st.plotly_chart(map_figure(out["map"], [r["id"] for r in rows if r["placed"]]), key="pod_map")

st.subheader("Results")
results = pd.DataFrame([{
    "id": r["id"], "request": r["request"], "placed": r["placed"], "shape": r["shape"] or "", "where": where(r),
    "topology": r["topology"] or "", "reason": r["reason"] or "", "OCS circuits": len(r["ocs_circuits"]),
    "bisection": format_rate(r["bisection_bytes_per_s"]) if r["bisection_bytes_per_s"] else ""} for r in rows])
st.dataframe(results, hide_index=True)

st.subheader("Solver statistics")
stats = [
    ("solver", f"{summary['solver']} ({summary['status']})"),
    ("solve time", f"{summary['solve_s']:.3g} s" + (f" (CP-SAT {summary['cpsat_s']:.3g} s)" if summary["cpsat_s"] is not None else "")),
    ("objective / bound", f"{summary['objective']:.0f} / {summary['bound']:.0f}" if summary["objective"] is not None else "n/a (greedy)"),
    ("admitted weight", f"{summary['admitted_weight']} (greedy hint {summary['greedy_hint_weight']})"
     if summary["greedy_hint_weight"] is not None else str(summary["admitted_weight"])),
    ("kept greedy hint / completed by greedy", f"{summary['kept_hint']} / {summary['completed_by_greedy']}"),
    ("model size", f"{summary['model_vars']} variables, {summary['model_constraints']} constraints"),
    ("priority-weighted chips", f"{summary['priority_weighted_chips']:,}"),
    ("utilisation of healthy chips", percent(summary["utilisation_of_healthy"])),
    ("free after", f"{free['free_chips']:,} chips; largest placeable {largest['shape'] or 'none'} ({largest['chips']} chips)"),
]
st.dataframe(pd.DataFrame(stats, columns=["figure", "value"]), hide_index=True)
