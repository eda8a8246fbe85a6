"""Step time: one training step of a preset model (or an uploaded trace) on one slice or on
N slices behind the data-centre network, simulated."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app_pages.common import (
    MAX_UPLOAD_BYTES,
    colour,
    inline_errors,
    percent,
    pick_generation,
    saved_files,
    seconds,
    upload_bytes,
)
from app_pages.step_run import ROUTINGS, page_study, step_view
from podsim.engine.jobs import declared_slices
from podsim.errors import PodsimError
from podsim.perf.opmodel import compute_timing
from podsim.study.multislice import terms_text
from podsim.topology import format_shape, get_generation, parse_shape
from podsim.topology.shapes import is_twistable
from podsim.trace import PRESETS, load_trace
from podsim.trace.configs import ResNetConfig
from podsim.trace.memory import fits_message
from podsim.trace.model import DEFAULT_COMPUTE_EFFICIENCY
from podsim.trace.plans import resolve_plan
from podsim.units import format_bytes

# Parallelism plans and global batches for the default 128-chip slice (4x4x8) that fit its
# 32 GiB of HBM per chip with full recompute (podsim.trace.memory); any plan whose sizes multiply
# to the slice's chips will do; a model not listed starts at FSDP over every chip and its preset
# batch. (No bare strings in page scripts: Streamlit's magic would print them.)
DEFAULT_PLANS = {"gpt3-175b": "fsdp=32,tensor=4", "llama2-70b": "fsdp=32,tensor=4",
                 "mixtral-8x7b": "fsdp=32,expert=4", "resnet50": "data=128"}
DEFAULT_BATCH = {"gpt3-175b": 32, "llama2-70b": 64, "mixtral-8x7b": 128}
RECOMPUTE = ["none", "minimal", "full"]
TRACE_TYPES = ["json", "yaml", "yml", "et", "eg", "txt"]


DCN_KINDS = {"eps": "EPS leaf-spine", "ocs": "OCS uniform mesh", "ocs-job": "OCS engineered for the job"}


@st.cache_data(max_entries=16, show_spinner="Generating the trace and simulating one step...")
def preset_step(model: str, gen: str, shape: str, twisted: bool, plan: str, efficiency: float | None,
                slices: int = 1, dcn: str = "eps", oversubscription: float = 1.0, global_batch: int | None = None,
                recompute: str = "none", sites: int = 1, routing: str = "dimension_order", tiers: str | None = None) -> dict:
    return step_view(page_study(gen, shape, twisted, efficiency, slices, dcn, oversubscription, sites, routing,
                                model=model, plan=plan, global_batch=global_batch, recompute=recompute, tiers=tiers))


@st.cache_data(max_entries=8, show_spinner="Reading the trace and simulating one step...")
def uploaded_step(files: tuple[tuple[str, bytes], ...], gen: str, shape: str, twisted: bool, efficiency: float | None,
                  slices: int = 1, dcn: str = "eps", oversubscription: float = 1.0, sites: int = 1,
                  routing: str = "dimension_order", tiers: str | None = None) -> dict:
    """An uploaded trace through `load_trace`, the CLI's loader (format by suffix and content)."""
    with saved_files(files) as paths:
        trace = load_trace(paths, shape=parse_shape(shape, get_generation(gen).dims))
    declared = declared_slices(trace)
    if declared is not None and declared != slices:
        raise PodsimError(f"the trace is for {declared} slice(s) (dcn={declared}); set Slices to {declared}")
    return step_view(page_study(gen, shape, twisted, efficiency, slices, dcn, oversubscription, sites, routing, trace=trace,
                                tiers=tiers))


def lane(t: dict) -> str:
    if t["kind"] == "compute":
        return "compute"
    return f"{t['kind']} {t['group']}".strip()


def gantt_figure(timeline: list[dict]) -> go.Figure:
    """One bar per op from its start to its end, one row per op kind and group."""
    fig = go.Figure()
    kinds = list(dict.fromkeys(t["kind"] for t in timeline))
    lanes = list(dict.fromkeys(lane(t) for t in sorted(timeline, key=lambda t: (t["kind"] != "compute", t["kind"], t["group"]))))
    for i, kind in enumerate(kinds):
        ops = [t for t in timeline if t["kind"] == kind]
        text = [f"{t['id']}{' (' + t['name'] + ')' if t['name'] else ''}<br>{t['kind']} {t['group']}<br>"
                f"{seconds(t['start_s'])} + {seconds(t['end_s'] - t['start_s'])}"
                + (f"<br>{format_bytes(t['bytes'])}, {t['algorithm']}, closed form {seconds(t['closed_form_s'])}" if t["bytes"] else "")
                for t in ops]
        fig.add_trace(go.Bar(y=[lane(t) for t in ops], x=[t["end_s"] - t["start_s"] for t in ops],
                             base=[t["start_s"] for t in ops], orientation="h", name=kind,
                             marker={"color": "#4C78A8" if kind == "compute" else colour(i + 1)},
                             hovertext=text, hoverinfo="text"))
    fig.update_layout(barmode="overlay", height=max(240, 60 + 34 * len(lanes)), xaxis_title="time in the step (s)",
                      margin={"l": 10, "r": 10, "t": 30, "b": 40}, legend={"orientation": "h", "y": 1.08})
    fig.update_yaxes(categoryorder="array", categoryarray=lanes[::-1])
    return fig


def breakdown_figure(s: dict) -> go.Figure:
    """The step = compute + exposed communication; communication = overlapped + exposed."""
    parts = [("compute", s["compute_s"], 0, "#4C78A8"), ("exposed communication", s["exposed_comm_s"], 0, "#E45756"),
             ("overlapped communication", s["overlapped_comm_s"], 1, "#F58518"),
             ("exposed communication", s["exposed_comm_s"], 1, "#E45756")]
    rows = ["step", "communication"]
    fig = go.Figure()
    for i, (name, value, row, col) in enumerate(parts):
        fig.add_trace(go.Bar(y=[rows[row]], x=[value], name=name, orientation="h", marker={"color": col},
                             showlegend=i != 3, legendgroup=name, text=[seconds(value)], textposition="inside",
                             hovertext=f"{name}: {seconds(value)}", hoverinfo="text"))
    fig.update_layout(barmode="stack", height=230, margin={"l": 10, "r": 10, "t": 10, "b": 10},
                      legend={"orientation": "h", "y": -0.25}, xaxis={"ticksuffix": " s"})
    fig.update_yaxes(categoryorder="array", categoryarray=rows[::-1])
    return fig


def heatmap_figure(u: dict, which: str) -> go.Figure:
    z = np.asarray(u[which], float).T * 100
    top = float(np.nanmax(z, initial=0.0)) if np.isfinite(z).any() else 0.0
    labels = ["(" + ",".join(str(int(v)) for v in c) + ")" for c in u["coords"]]
    fig = go.Figure(go.Heatmap(z=z, x=labels, y=u["ports"], colorscale="YlOrRd", zmin=0, zmax=max(top, 1.0),
                               colorbar={"title": "%"}, hoverongaps=False,
                               hovertemplate="chip %{x}, port %{y}: %{z:.1f}%<extra></extra>"))
    fig.update_layout(height=300, margin={"l": 10, "r": 10, "t": 10, "b": 40}, xaxis_title="chip (slice coordinates)",
                      xaxis={"showticklabels": len(labels) <= 64}, yaxis={"autorange": "reversed", "title": "port"})
    return fig


st.title("Step time")
st.caption("One training step on a slice: a preset model's trace (or yours) runs on the flow-level engine; "
           "compute and communication overlap where the op DAG allows.")

c1, c2, c3, c4 = st.columns([1.2, 1, 0.7, 1])
gen_id, gen = pick_generation(c1)
shape_text = c2.text_input("Slice shape", value="4x4x8" if gen.cube_shape else "8x16", key=f"shape_{gen_id}")
with inline_errors():
    shape = format_shape(parse_shape(shape_text, gen.dims))
twistable = is_twistable(parse_shape(shape)) and bool(gen.ocs and gen.cube_shape)
twisted = c3.checkbox("Twisted", value=False, key="twisted", disabled=not twistable) and twistable
flat = c4.checkbox("Flat compute efficiency", value=False, key="flat",
                   help="off: the per-op model (matmuls padded to the MXU tile at the precision's rate, memory-bound ops at "
                        "HBM bandwidth); on: every op at one fraction of peak FLOP/s")
efficiency = (c4.slider("Compute efficiency", 0.1, 1.0, DEFAULT_COMPUTE_EFFICIENCY, 0.05, key="efficiency",
                        help="fraction of peak FLOP/s compute ops reach (0.6: the v4 paper's LLM average, perf.3)")
              if flat else None)
d1, d2, d3, d4, d5 = st.columns([0.7, 1.3, 1, 0.7, 1.3])
n_slices = int(d1.number_input("Slices", min_value=1, max_value=64, value=1, step=1, key="slices",
                               help="slices of a multislice job, data parallel over the DCN (the trace's dcn=N)"))
dcn_kind = d2.selectbox("Data-centre network", list(DCN_KINDS), format_func=DCN_KINDS.get, key="dcn_kind",
                        disabled=n_slices == 1)
oversub = d3.number_input("Spine oversubscription", min_value=1.0, max_value=16.0, value=1.0, step=1.0, key="oversub",
                          disabled=n_slices == 1 or dcn_kind != "eps", help="NIC bandwidth : leaf uplink bandwidth (EPS only)")
n_sites = int(d4.number_input("Sites", min_value=1, max_value=max(1, n_slices), value=1, step=1, key="sites",
                              disabled=n_slices == 1 or dcn_kind != "eps",
                              help="data centres the slices split over (EPS DCN), joined by WAN links (1 ms, 12.8 Tb/s per site pair)"))
n_sites = n_sites if n_slices > 1 and dcn_kind == "eps" else 1  # a disabled widget keeps its value
tiers = st.text_input("DCN tiers", value="", key="dcn_tiers", disabled=n_slices == 1,
                      placeholder="untiered leaf-spine; or fat-tree-k40-4.7to1, fat-tree-k64, tor=48x200/2,aggregation=64x400/3,spine=256x400*8",
                      help="the DCN built in tiers, NIC -> ToR -> aggregation block -> spine blocks: a preset, or each tier's "
                           "RADIXxGBPS[/OVERSUBSCRIPTION] (the spine's *COUNT of spine blocks); replaces the spine oversubscription")
tiers = tiers.strip() if n_slices > 1 else ""
routing = d5.selectbox("ICI routing", list(ROUTINGS), format_func=ROUTINGS.get, key="routing",
                       help="inside each slice: one dimension-order path, an even split over all minimal paths, or that split re-weighted by link load")
source = st.radio("Trace", ["Preset model", "Upload a trace"], horizontal=True, key="source")

with inline_errors():
    if source == "Preset model":
        m1, m2, m3, m4 = st.columns([1, 1.6, 0.8, 0.8])
        models = list(PRESETS)
        model = m1.selectbox("Model", models, index=models.index("llama2-70b"), key="model")
        default_plan = DEFAULT_PLANS.get(model) or resolve_plan(None, model, math.prod(parse_shape(shape, gen.dims)))
        plan = m2.text_input("Parallelism", value=default_plan, key=f"plan_{model}",
                             help="data, fsdp, tensor, pipeline, expert (and dcn); sizes multiply to the slice's chips")
        batch = int(m3.number_input("Global batch", min_value=1, max_value=1_000_000, step=1,
                                    value=DEFAULT_BATCH.get(model, PRESETS[model].global_batch), key=f"batch_{model}",
                                    help="sequences (images) per step over every slice"))
        cnn = isinstance(PRESETS[model], ResNetConfig)
        recompute = m4.selectbox("Recompute", RECOMPUTE, index=0 if cnn else 2, key=f"recompute_{model}", disabled=cnn,
                                 help="activation recomputation: none, minimal (the attention core) or full (each layer)")
        out = preset_step(model, gen_id, shape, twisted, plan, efficiency, n_slices, dcn_kind, float(oversub), batch,
                          "none" if cnn else recompute, n_sites, routing, tiers or None)
    else:
        uploads = st.file_uploader(f"Trace file(s): podsim JSON/YAML, ASTRA-sim text, Chakra .et/.json (one per rank); "
                                   f"at most {MAX_UPLOAD_BYTES // 2**20} MB each", type=TRACE_TYPES,
                                   accept_multiple_files=True, key="trace_files")
        if not uploads:
            st.info("Upload a trace to simulate it on the slice above.")
            st.stop()
        files = tuple((u.name, upload_bytes(u)) for u in uploads)
        out = uploaded_step(files, gen_id, shape, twisted, efficiency, n_slices, dcn_kind, float(oversub), n_sites, routing,
                            tiers or None)

s = out["summary"]
st.subheader(f"{out['name'] or 'uploaded trace'}: {out['ops']} ops")
compute_note = compute_timing(efficiency)
where = f"{n_slices} {gen.name} {shape} slices on {out['pods']} pod(s), {DCN_KINDS[dcn_kind]} DCN" if n_slices > 1 else f"a {gen.name} {shape}{' twisted' if twisted else ''} slice"
if n_sites > 1:
    where += f" over {n_sites} sites"
st.caption(f"on {where}, {ROUTINGS[routing]} routing, {compute_note}" + (f"; compute constants: {out['constants']}" if out["constants"] else ""))
if s.get("hbm_fits") is False:
    st.warning(fits_message(s["hbm_bytes_per_chip"], s["hbm_capacity_bytes"]))
band = out["band"]
m = st.columns(6)
m[0].metric("Step time", seconds(s["step_time_s"]), help=band["text"])
m[1].metric("Compute", seconds(s["compute_s"]))
m[2].metric("Exposed communication", seconds(s["exposed_comm_s"]),
            help=f"{seconds(s['comm_s'])} busy, {seconds(s['overlapped_comm_s'])} hidden behind compute")
m[3].metric("Model FLOPs utilisation", percent(s.get("mfu")) if "mfu" in s else "n/a",
            help="model FLOPs per step / (chips x peak x step time); known for generated traces")
m[4].metric("Hardware FLOPs utilisation", percent(s.get("hfu")) if "hfu" in s else "n/a",
            help="hardware FLOPs per step (recomputation included) / (chips x peak x step time)")
m[5].metric("Engine", f"{s['engine_wall_s']:.2f} s", help=f"{s['events']:,} events, {s['flows_simulated']:,} of {s['flows']:,} flows simulated")
mfu_band = "" if "mfu" not in s else (", error unknown" if band["typical"] is None else f", MFU ±{band['typical']:.0%} with it")
st.caption(f"Step time {seconds(s['step_time_s'])} ({band['text']}){mfu_band}")
if n_slices > 1 and s.get("multislice"):
    ms = s["multislice"]
    st.caption(f"What the {n_slices} slices add: "
               + terms_text(ms["straggler_wait_s"], ms["dcn_tail_s"], ms["ecmp_collision_s"], ms["notes"]))
lv = st.columns(4)
lv[0].metric("ICI busy", seconds(s["ici_busy_s"]), help="time collectives inside the slices are in flight")
lv[1].metric("ICI exposed", seconds(s["ici_exposed_s"]), help="the part of it no compute overlaps")
lv[2].metric("DCN busy", seconds(s["dcn_busy_s"]), help="time collectives across slices (over the DCN) are in flight")
lv[3].metric("DCN exposed", seconds(s["dcn_exposed_s"]), help="the part of it no compute overlaps")
if n_slices > 1 and s["tiers"]:
    st.caption("Per DCN tier: the ops whose flows climb no higher than it (busy, and the part no compute overlaps), and the "
               "time its busiest link needs for the step's bytes on it (bytes / capacity)" + (f"; {tiers}" if tiers else ""))
    st.dataframe([{"tier": t, "busy": seconds(d["busy_s"]), "exposed": seconds(d["exposed_s"]),
                   "busiest link needs": seconds(d["link_busy_s"]), "links carrying bytes": d["links"]}
                  for t, d in s["tiers"].items()], hide_index=True)

st.subheader("Op timeline")
st.plotly_chart(gantt_figure(out["timeline"]), key="gantt")
st.download_button("Download the timeline for Perfetto", data=out["perfetto"], file_name=f"{out['name'] or 'step'}-timeline.json",
                   mime="application/json", key="timeline_download",
                   help="Chrome trace-event JSON (open it at ui.perfetto.dev or chrome://tracing): the same file as "
                        "`podsim steptime --trace ... --timeline`; tracks per compute stream and collective group, "
                        "link-utilisation counters for the busiest links")

left, right = st.columns([1, 1])
with left:
    st.subheader("Breakdown")
    st.plotly_chart(breakdown_figure(s), key="breakdown")
with right:
    st.subheader("Collectives")
    kinds = pd.DataFrame([{"kind": k, "ops": int(v["ops"]), "bytes": format_bytes(v["bytes"]), "busy": seconds(v["busy_s"]), "op time": seconds(v["op_s"]),
                           "closed form": seconds(v["closed_form_s"]), "algorithms": ", ".join(v["algorithms"])}
                          for k, v in sorted(s["collectives"].items())])
    if kinds.empty:
        st.info("No communication in this trace.")
    else:
        st.dataframe(kinds, hide_index=True)

st.subheader("Link utilisation")
which = st.radio("Show", ["mean", "peak"], horizontal=True, key="util_kind",
                 format_func=lambda w: {"mean": "mean over the step (bytes / capacity x step time)",
                                        "peak": "peak load / capacity while simulated"}[w])
st.plotly_chart(heatmap_figure(out["utilisation"], which), key="heatmap")
if out["hot_links"]:
    st.caption("Busiest links by this step's bytes: " + "; ".join(
        f"{h['src']}->{h['dst']} ({h['kind']}, {format_bytes(h['bytes'])})" for h in out["hot_links"][:5]))
