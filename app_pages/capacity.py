"""Capacity plan: runs and sweeps from a results store side by side, and the HTML report."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import streamlit as st

from app_pages.common import inline_errors, percent, seconds, step_time_cell, upload_bytes
from podsim.files import output_folder
from podsim.report import render_report
from podsim.report.render import key_rows, report_figures, threshold_text
from podsim.report.scaling import scaling_details
from podsim.report.spine import spine_details
from podsim.scenario import load_scenario_text, run_scenario
from podsim.store import append_run, list_runs, list_sweeps, load_run, load_stored_sweep
from podsim.sweep import answer_text, probe_text

DEFAULT_STORE = "out/demo/results.duckdb"  # what `make demo` writes
@st.cache_data(max_entries=64, show_spinner="Loading runs from the store...")
def load_runs(store: str, run_ids: tuple[str, ...], stamps: tuple[str, ...]) -> list:
    """RunResults from the store; `stamps` (their creation times) key the cache, so a point a
    sweep stores again is read again."""
    return [load_run(store, r) for r in run_ids]


@st.cache_data(max_entries=8, show_spinner=False)
def report_html(store: str, run_ids: tuple[str, ...], stamps: tuple[str, ...], labels: tuple[str, ...],
                sweep_id: str | None) -> str:
    """The same self-contained HTML report `podsim report` writes."""
    sweep = load_stored_sweep(store, sweep_id) if sweep_id else None
    return render_report(load_runs(store, run_ids, stamps), labels=list(labels), sweep=sweep)


def run_label(row: dict) -> str:
    where = f" [{row['point_label']}]" if row.get("point_label") else ""
    return f"{row['name']}{where} · {row['run_id'][-6:]}"


def runs_frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame([{
        "run": run_label(r), "kind": r["kind"] or "", "status": r["status"], "sweep": r["sweep_id"] or "",
        "fleet": f"{r['pods']} x {r['generation']}" if r["generation"] else "",
        "utilisation": percent(r["utilisation"]), "goodput": percent(r["goodput"]),
        "wait p95": seconds(r["wait_p95_s"]), "step time": step_time_cell(r),
        "cost (USD)": "n/a" if r["cost_usd"] is None else f"{r['cost_usd']:,.0f}",
        "targets met": {True: "yes", False: "no", None: ""}[r["targets_met"]],
        "created": r["created_at"].strftime("%Y-%m-%d %H:%M:%S") if r["created_at"] else ""} for r in rows])


def show_runs(store: str, rows: list[dict], labels: list[str], key: str, sweep_id: str | None = None) -> None:
    """Key figures and targets side by side, the report's plots, and the report to download."""
    ids = tuple(r["run_id"] for r in rows)
    stamps = tuple(str(r["created_at"]) for r in rows)
    runs = load_runs(store, ids, stamps)
    for question in dict.fromkeys(r.scenario.get("question") for r in runs if r.scenario.get("question")):
        st.markdown(f"**Question:** {question}")
    table = pd.DataFrame([[name, *cells] for name, cells in key_rows(runs)], columns=["figure", *labels])
    st.dataframe(table, hide_index=True)
    targets = [{"run": label, "target": t["metric"], "wanted": f"{t['op']} {threshold_text(t['metric'], t['threshold'])}",
                "got": threshold_text(t["metric"], t["value"]), "met": "yes" if t["met"] else "no"}
               for label, r in zip(labels, runs, strict=True) for t in r.targets]
    if targets:
        st.markdown("**Targets**")
        st.dataframe(pd.DataFrame(targets), hide_index=True)
    for d in spine_details(runs, labels):  # spine economics: EPS Clos against OCS DCN over the fleet's life
        st.markdown(f"**Spine: EPS Clos against OCS DCN** ({d['label']})")
        st.dataframe(pd.DataFrame(d["headline"], columns=["figure", "EPS / OCS"]), hide_index=True, key=f"{key}-spine-{d['label']}")
        st.dataframe(pd.DataFrame(d["years"]), hide_index=True, key=f"{key}-spine-years-{d['label']}")
        with st.expander("Spine assumptions and their sources"):
            st.dataframe(pd.DataFrame(d["assumptions"]), hide_index=True, key=f"{key}-spine-assumptions-{d['label']}")
    for d in scaling_details(runs, labels):  # weak scaling: step time, MFU, efficiency against slices
        st.markdown(f"**Scaling** ({d['label']}): {d['title']}")
        st.dataframe(pd.DataFrame(d["rows"], columns=d["header"]), hide_index=True, key=f"{key}-scaling-{d['label']}")
        if d["bands"]:
            st.caption("Step time error: " + "; ".join(d["bands"]))
        st.plotly_chart(d["figure"], key=f"{key}-scaling-plot-{d['label']}")
    plots = report_figures(runs, labels)
    for row in range(0, len(plots), 2):
        cols = st.columns(2)
        for col, (name, fig) in zip(cols, plots[row:row + 2], strict=False):
            col.plotly_chart(fig, key=f"{key}-{name}")
    st.download_button("Download the HTML report", data=lambda: report_html(store, ids, stamps, tuple(labels), sweep_id),
                       file_name=f"podsim-report-{key}.html", mime="text/html", key=f"download-{key}",
                       help="the same self-contained report as `podsim report` (plotly inlined, opens offline)")


def capacity_answer(sweep: dict) -> pd.DataFrame | None:
    cells = (sweep.get("result") or {}).get("cells")
    if not cells:
        return None
    return pd.DataFrame([{
        "cell": c["cell"], "replicates": c.get("replicates", 1), "field": c["field"], "range": f"{c['low']}..{c['high']}",
        "answer": answer_text(c),
        "evaluated": ", ".join(f"{v} {probe_text(e)}" for v, e in
                               sorted(c["evaluated"].items(), key=lambda kv: float(kv[0])))} for c in cells])


st.title("Capacity plan")
st.caption("Runs and sweeps from a DuckDB results store (`podsim run`, `podsim sweep`) side by side, "
           "and the same HTML report `podsim report` writes.")

store = st.text_input("Results store", value=os.environ.get("PODSIM_STORE", DEFAULT_STORE), key="store",
                      help="a DuckDB file written by `podsim run` or `podsim sweep`; `podsim dashboard --store PATH` sets it")
exists = Path(store).is_file()

with st.expander("Run a scenario file and store it", expanded=not exists):
    upload = st.file_uploader("Scenario YAML (as `podsim run` takes; files it names must be absolute paths)",
                              type=["yaml", "yml"], key="scenario_file")
    if st.button("Run and store", type="primary", key="run_scenario", disabled=upload is None):
        with inline_errors():
            scenario = load_scenario_text(upload_bytes(upload).decode("utf-8", errors="replace"), source=upload.name)
            bar = st.progress(0.0, text=f"Running {scenario.name}...")
            result = run_scenario(scenario, on_progress=lambda done, total: bar.progress(min(1.0, done / total) if total else 1.0))
            bar.empty()
            output_folder(Path(store).parent, "results store folder")
            run_id = append_run(store, result)
        st.success(f"Stored run {run_id} ({scenario.name}): targets met: {result.targets_met}")
        exists = True

if not exists:
    st.info(f"No results store at {store}: `podsim run podsim/scenario/demo.yaml -o out/demo` writes one "
            "(so does `make demo`), or run a scenario file above.")
    st.stop()

with inline_errors():
    rows = list_runs(store)
    sweeps = list_sweeps(store)
ok = [r for r in rows if r["status"] == "ok"]
m = st.columns(4)
m[0].metric("Runs", len(rows))
m[1].metric("Finished", len(ok))
m[2].metric("Sweeps", len(sweeps))
m[3].metric("Targets met", f"{sum(bool(r['targets_met']) for r in ok)} of {sum(r['targets_met'] is not None for r in ok)}")

runs_tab, sweeps_tab = st.tabs(["Runs side by side", "Sweeps"])
with runs_tab:
    st.dataframe(runs_frame(rows), hide_index=True, height=min(400, 40 + 35 * len(rows)))
    by_label = {run_label(r): r for r in ok}
    picked = st.multiselect("Runs to compare", list(by_label), default=list(by_label)[:2], key="picked_runs",
                            help="finished runs; the newest two by default")
    if picked:
        labels = [p.split(" · ")[0] for p in picked]
        show_runs(store, [by_label[p] for p in picked], labels if len(set(labels)) == len(labels) else picked, key="runs")
    else:
        st.info("Pick one or more runs.")

with sweeps_tab:
    if not sweeps:
        st.info("No sweeps in this store: `podsim sweep SWEEP.yaml --store PATH` adds one.")
    else:
        names = {f"{s['name']} ({s['mode']}, {s['ok']} ok / {s['failed']} failed) · {s['sweep_id'][-8:]}": s for s in sweeps}
        pick = st.selectbox("Sweep", list(names), key="sweep")
        with inline_errors():
            sweep = load_stored_sweep(store, names[pick]["sweep_id"])
        answer = capacity_answer(sweep)
        if answer is not None:
            st.markdown("**Capacity answer** (bisection over the field: the smallest value that meets every target)")
            st.dataframe(answer, hide_index=True)
        points = [r for r in sweep["runs"] if r["status"] == "ok"]
        failed = [r for r in sweep["runs"] if r["status"] != "ok"]
        for r in failed:
            st.warning(f"point {r['point_label']}: {r['error']}")
        if points:  # in point order (a capacity sweep's in order of the field)
            show_runs(store, points, [r["point_label"] or r["run_id"][-6:] for r in points], key="sweep",
                      sweep_id=sweep["sweep_id"])
