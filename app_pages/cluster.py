"""Cluster: a job stream on a fleet with failures; utilisation, queue wait and goodput, OCS vs static."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from app_pages.cluster_run import job_stream, page_run
from app_pages.common import (
    inline_errors,
    percent,
    pick_generation,
    saved_files,
    seconds,
    upload_bytes,
)
from podsim.cluster import by_shape
from podsim.cluster import run_cluster as simulate_run
from podsim.cluster.config import POLICY_NAMES

DEFAULT_SYNTHETIC = "jobs=300,rate=2/h,median=3h,sigma=1"
WIRING_COLOUR = {"OCS": "#F58518", "static": "#4C78A8"}


@st.cache_data(max_entries=16, show_spinner=False)
def run_cluster(gen: str, pods: int, ocs: bool, policy: str, stream: tuple[str, str, bytes], horizon_d: float,
                availability: float, mttr_h: float, checkpoint_h: float, seed: int) -> dict:
    """One `podsim cluster` run (the same ClusterRun the CLI builds); a progress bar while it runs."""
    kind, text, data = stream
    bar = st.progress(0.0, text=f"Simulating {'OCS' if ocs else 'static'} wiring...")
    shown = [-1]

    def on_progress(now_s: float, horizon_s: float) -> None:
        pct = int(100 * now_s / horizon_s)
        if pct != shown[0]:
            shown[0] = pct
            bar.progress(pct / 100, text=f"Simulating {'OCS' if ocs else 'static'} wiring: day {now_s / 86400:.1f} of {horizon_s / 86400:g}")

    with saved_files([(text, data)] if kind != "synthetic" else []) as paths:
        jobs = job_stream(kind, text, paths[0] if paths else None, gen)
        run = page_run(gen, pods, ocs, policy, jobs, horizon_d, availability, mttr_h, checkpoint_h, seed)
        result = simulate_run(run, on_progress=on_progress)
    bar.empty()
    waits = np.array([j.wait_s for j in result.jobs if not np.isnan(j.first_start_s)])
    return {"metrics": result.metrics, "timeseries": result.timeseries, "by_shape": by_shape(result),
            "waits_s": waits, "unplaceable": list(result.unplaceable)}


def time_figure(runs: dict[str, dict]) -> go.Figure:
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.06,
                        subplot_titles=("utilisation: busy / healthy chips (%)", "queued jobs",
                                        "largest placeable slice (chips)"))
    for wiring, r in runs.items():
        ts = r["timeseries"]
        t_d = ts["t_s"] / 86400
        col = WIRING_COLOUR[wiring]
        fig.add_trace(go.Scatter(x=t_d, y=100 * ts["utilisation"], name=f"{wiring}", line={"color": col}, legendgroup=wiring), 1, 1)
        fig.add_trace(go.Scatter(x=t_d, y=ts["queued_jobs"], name=f"{wiring} queued", line={"color": col},
                                 legendgroup=wiring, showlegend=False), 2, 1)
        if "largest_placeable_chips" in ts:
            fig.add_trace(go.Scatter(x=t_d, y=ts["largest_placeable_chips"], name=f"{wiring} largest",
                                     line={"color": col, "shape": "hv"}, legendgroup=wiring, showlegend=False), 3, 1)
    fig.update_layout(height=620, margin={"l": 10, "r": 10, "t": 40, "b": 40}, legend={"orientation": "h", "y": 1.07})
    fig.update_xaxes(title_text="day", row=3, col=1)
    return fig


def wait_figure(runs: dict[str, dict]) -> go.Figure:
    """Share of started jobs that waited at most t (empirical CDF)."""
    fig = go.Figure()
    for wiring, r in runs.items():
        w = np.sort(r["waits_s"]) / 3600
        if len(w):
            fig.add_trace(go.Scatter(x=np.maximum(w, 1 / 60), y=np.arange(1, len(w) + 1) / len(w) * 100, name=wiring,
                                     line={"color": WIRING_COLOUR[wiring], "shape": "hv"}))
    fig.update_layout(height=360, xaxis={"type": "log", "title": "wait before first start (h; under 1 min shown at 1 min)"},
                      yaxis={"title": "jobs started (%)", "range": [0, 101]}, margin={"l": 10, "r": 10, "t": 10, "b": 40})
    return fig


def goodput_figure(runs: dict[str, dict]) -> go.Figure:
    """Where the fleet's chip-hours went: useful, lost to failures, restarts, idle, down."""
    parts = [("useful", "useful_chip_h", "#54A24B"), ("lost to failures / preemption", "lost_chip_h", "#E45756"),
             ("restart / reconfiguration", "overhead_chip_h", "#EECA3B")]
    fig = go.Figure()
    names = list(runs)
    for label, key, col in parts:
        fig.add_trace(go.Bar(x=names, y=[runs[w]["metrics"][key] for w in names], name=label, marker={"color": col}))
    idle = [max(0.0, runs[w]["metrics"]["healthy_chip_h"] - runs[w]["metrics"]["busy_chip_h"]) for w in names]
    down = [runs[w]["metrics"]["fleet_chip_h"] - runs[w]["metrics"]["healthy_chip_h"] for w in names]
    fig.add_trace(go.Bar(x=names, y=idle, name="idle (healthy, free)", marker={"color": "#D0D0D0"}))
    fig.add_trace(go.Bar(x=names, y=down, name="down (failed parts)", marker={"color": "#555555"}))
    fig.update_layout(barmode="stack", height=360, yaxis_title="chip-hours", margin={"l": 10, "r": 10, "t": 10, "b": 40})
    return fig


def shape_figure(runs: dict[str, dict]) -> go.Figure:
    """Goodput (useful / allocated chip-hours) per requested slice shape."""
    fig = go.Figure()
    for wiring, r in runs.items():
        rows = [row for row in r["by_shape"] if row["allocated_chip_h"] > 0]
        fig.add_trace(go.Bar(x=[row["shape"] for row in rows], y=[100 * row["goodput"] for row in rows], name=wiring,
                             marker={"color": WIRING_COLOUR[wiring]},
                             hovertext=[f"{row['shape']}: {row['jobs']} jobs, {row['lost_chip_h']:.4g} chip-h lost, "
                                        f"wait p95 {seconds(row['wait_p95_s'])}" for row in rows], hoverinfo="text"))
    fig.update_layout(barmode="group", height=360, yaxis={"title": "goodput (%)", "range": [0, 101]},
                      xaxis_title="slice shape (smallest first)", margin={"l": 10, "r": 10, "t": 10, "b": 40})
    return fig


st.title("Cluster")
st.caption("A job stream on a fleet whose hosts fail and are repaired: jobs queue under a policy, get slices, "
           "lose work since their last checkpoint when a part fails, and restart. Compare OCS with static wiring.")

source = st.radio("Job stream", ["Synthetic", "Upload"], horizontal=True, key="stream_source",
                  help="synthetic KEY=VALUE pairs as `podsim cluster --synthetic`, or a job-stream YAML / job trace CSV")
with st.form("scenario"):
    c1, c2, c3, c4 = st.columns(4)
    gen_id, gen = pick_generation(c1)
    pods = c2.number_input("Pods", min_value=1, max_value=8, value=1, step=1, key="pods")
    policy = c3.selectbox("Policy", POLICY_NAMES, index=POLICY_NAMES.index("backfill"), key="policy",
                          help="fifo; backfill = FIFO with EASY backfilling; priority with preemption")
    horizon_d = c4.number_input("Horizon (days)", min_value=0.5, max_value=90.0, value=7.0, step=1.0, key="horizon")
    d1, d2, d3, d4 = st.columns(4)
    availability = d1.number_input("Host availability", min_value=0.9, max_value=1.0, value=0.995, step=0.001,
                                   format="%.3f", key="availability", help="1.0: no host failures")
    mttr_h = d2.number_input("Host MTTR (h)", min_value=0.1, max_value=72.0, value=4.0, step=1.0, key="mttr")
    checkpoint_h = d3.number_input("Checkpoint every (h)", min_value=0.05, max_value=24.0, value=1.0, step=0.5, key="checkpoint")
    seed = d4.number_input("Seed", min_value=0, value=1, step=1, key="seed")
    if source == "Synthetic":
        synthetic = st.text_input("Synthetic jobs", value=DEFAULT_SYNTHETIC, key="synthetic",
                                  help="jobs, rate (/h or /d), duration (lognormal, exponential, fixed, uniform), median, "
                                       "sigma, mix (v4 popularity table by default, or 4x4x4:2;8x8x8:1), priorities")
        upload = None
    else:
        upload = st.file_uploader("Job-stream YAML or job trace CSV", type=["yaml", "yml", "json", "csv"], key="jobs_file")
    compare = st.checkbox("Compare with static wiring (the same jobs and failures on a pod without OCS)", value=True,
                          key="compare")
    st.form_submit_button("Run simulation", type="primary")

with inline_errors():
    if source == "Synthetic":
        stream = ("synthetic", synthetic, b"")
    elif upload is None:
        st.info("Upload a job stream, then press Run simulation.")
        st.stop()
    else:
        stream = ("upload", upload.name, upload_bytes(upload))
    wirings = {"OCS": True} if gen.ocs and gen.cube_shape else {"static": False}
    if compare and "OCS" in wirings:
        wirings["static"] = False
    args = (int(pods), policy, stream, float(horizon_d), float(availability), float(mttr_h), float(checkpoint_h), int(seed))
    runs = {w: run_cluster(gen_id, args[0], ocs, *args[1:]) for w, ocs in wirings.items()}

first = next(iter(runs))
m = runs[first]["metrics"]
other = runs.get("static") if first == "OCS" else None


def delta(key: str, fmt) -> str | None:
    if other is None:
        return None
    a, b = m[key], other["metrics"][key]
    if a is None or b is None or np.isnan(a) or np.isnan(b):
        return None
    return f"{fmt(a - b)} vs static"


st.subheader(f"{m['pods']} x {gen.name}, {m['chips']:,} chips, policy {m['policy']}: {m['jobs_total']} jobs over "
             f"{seconds(m['horizon_s'])}")
cols = st.columns(5)
cols[0].metric(f"Utilisation ({first})", percent(m["utilisation"]), delta=delta("utilisation", lambda v: f"{100 * v:+.1f} pts"),
               help="busy chip-hours / healthy chip-hours")
cols[1].metric(f"Goodput ({first})", percent(m["goodput"]), delta=delta("goodput", lambda v: f"{100 * v:+.1f} pts"),
               help="useful / allocated chip-hours")
cols[2].metric("Wait p95", seconds(m["wait_p95_s"]), delta=delta("wait_p95_s", lambda v: f"{v / 3600:+.3g} h"),
               delta_color="inverse")
cols[3].metric("Completed", f"{m['jobs_completed']} of {m['jobs_total']}",
               delta=delta("jobs_completed", lambda v: f"{v:+.0f}"))
cols[4].metric("Never placeable", m["jobs_unplaceable"], delta=delta("jobs_unplaceable", lambda v: f"{v:+.0f}"),
               delta_color="inverse")

st.subheader("Utilisation and queue over time")
st.plotly_chart(time_figure(runs), key="time")
left, right = st.columns(2)
with left:
    st.subheader("Queue wait")
    st.plotly_chart(wait_figure(runs), key="wait")
with right:
    st.subheader("Goodput: where the chip-hours went")
    st.plotly_chart(goodput_figure(runs), key="goodput")
st.subheader("Goodput by slice shape")
st.plotly_chart(shape_figure(runs), key="shape_goodput")

table = pd.DataFrame([{
    "wiring": w, "utilisation": percent(r["metrics"]["utilisation"]), "goodput": percent(r["metrics"]["goodput"]),
    "fleet goodput": percent(r["metrics"]["fleet_goodput"]), "completed": r["metrics"]["jobs_completed"],
    "queued": r["metrics"]["jobs_queued"], "never placeable": r["metrics"]["jobs_unplaceable"],
    "wait p50": seconds(r["metrics"]["wait_p50_s"]), "wait p95": seconds(r["metrics"]["wait_p95_s"]),
    "host failures": r["metrics"]["failures_host"], "interruptions": r["metrics"]["job_interruptions"],
    "wall": f"{r['metrics']['engine_wall_s']:.2f} s"} for w, r in runs.items()])
st.dataframe(table, hide_index=True)
for w, r in runs.items():
    for u in r["unplaceable"]:
        st.caption(f"{w}: {u['jobs']} x {u['shape']} never placeable: {u['reason']}")
