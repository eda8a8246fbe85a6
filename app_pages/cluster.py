"""Cluster: a job stream on a fleet with failures; utilisation, queue wait and goodput, OCS vs static."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from app_pages.cluster_run import job_stream, page_run
from app_pages.common import (
    inline_errors,
    percent,
    pick_generation,
    saved_files,
    seconds,
    upload_bytes,
)
from podsim.cluster import run_cluster as simulate_run
from podsim.cluster.config import POLICY_NAMES
from podsim.metrics import definition
from podsim.report import figures
from podsim.scenario import RunResult
from podsim.scenario.run import cluster_run_result

DEFAULT_SYNTHETIC = "jobs=300,rate=2/h,median=3h,sigma=1"


@st.cache_data(max_entries=16, show_spinner=False)
def run_cluster(gen: str, pods: int, ocs: bool, policy: str, stream: tuple[str, str, bytes], horizon_d: float,
                availability: float, mttr_h: float, checkpoint_h: float, seed: int) -> RunResult:
    """One `podsim cluster` run (the same ClusterRun the CLI builds) as its RunResult; a progress bar while it runs."""
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
    return cluster_run_result(result, name="OCS" if ocs else "static", wall_s=result.metrics["engine_wall_s"])


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
m = runs[first].metrics
other = runs.get("static") if first == "OCS" else None


def delta(key: str, fmt) -> str | None:
    if other is None:
        return None
    a, b = m[key], other.metrics[key]
    if a is None or b is None or np.isnan(a) or np.isnan(b):
        return None
    return f"{fmt(a - b)} vs static"


st.subheader(f"{m['pods']} x {gen.name}, {m['chips']:,} chips, policy {m['policy']}: {m['jobs_total']} jobs over "
             f"{seconds(m['horizon_s'])}")
cols = st.columns(5)
cols[0].metric(f"Utilisation ({first})", percent(m["utilisation"]), delta=delta("utilisation", lambda v: f"{100 * v:+.1f} pts"),
               help=definition("utilisation"))
cols[1].metric(f"Goodput ({first})", percent(m["goodput"]), delta=delta("goodput", lambda v: f"{100 * v:+.1f} pts"),
               help=definition("goodput"))
cols[2].metric("Wait p95", seconds(m["wait_p95_s"]), delta=delta("wait_p95_s", lambda v: f"{v / 3600:+.3g} h"),
               delta_color="inverse", help=definition("wait_p95_s"))
cols[3].metric("Completed", f"{m['jobs_completed']} of {m['jobs_total']}",
               delta=delta("jobs_completed", lambda v: f"{v:+.0f}"), help=definition("jobs_completed"))
cols[4].metric("Never placeable", m["jobs_unplaceable"], delta=delta("jobs_unplaceable", lambda v: f"{v:+.0f}"),
               delta_color="inverse", help=definition("jobs_unplaceable"))

results, labels = list(runs.values()), list(runs)
st.subheader("Utilisation and queue over time")
st.plotly_chart(figures.utilisation(results, labels), key="utilisation")
st.plotly_chart(figures.queue(results, labels), key="queue")
fragmentation = figures.fragmentation(results, labels)
if fragmentation is not None:
    st.plotly_chart(fragmentation, key="fragmentation")
left, right = st.columns(2)
with left:
    st.subheader("Queue wait")
    st.plotly_chart(figures.wait_cdf(results, labels), key="wait")
with right:
    st.subheader("Goodput: where the chip-hours went")
    st.plotly_chart(figures.chip_hours(results, labels), key="goodput")
st.subheader("Goodput by slice shape")
st.plotly_chart(figures.goodput_by_shape(results, labels), key="shape_goodput")

table = pd.DataFrame([{
    "wiring": w, "utilisation": percent(r.metrics["utilisation"]), "goodput": percent(r.metrics["goodput"]),
    "fleet goodput": percent(r.metrics["fleet_goodput"]), "completed": r.metrics["jobs_completed"],
    "queued": r.metrics["jobs_queued"], "never placeable": r.metrics["jobs_unplaceable"],
    "wait p50": seconds(r.metrics["wait_p50_s"]), "wait p95": seconds(r.metrics["wait_p95_s"]),
    "host failures": r.metrics["failures_host"], "interruptions": r.metrics["job_interruptions"],
    "wall": f"{r.metrics['engine_wall_s']:.2f} s"} for w, r in runs.items()])
st.dataframe(table, hide_index=True)
for w, r in runs.items():
    for u in r.metrics["unplaceable"]:
        st.caption(f"{w}: {u['jobs']} x {u['shape']} never placeable: {u['reason']}")
