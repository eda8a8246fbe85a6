"""The report's plots as plotly figures: pure functions of RunResults (one run, or several drawn
over each other for a comparison). A function returns None when no run has what it plots."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from podsim.scenario.result import RunResult

DAY = 86400.0
HOUR = 3600.0
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22")
KIND_COLOURS = {"compute": "#1f77b4", "all_reduce": "#d62728", "all_gather": "#2ca02c", "reduce_scatter": "#ff7f0e",
                "all_to_all": "#9467bd", "broadcast": "#17becf", "reduce": "#8c564b", "send_recv": "#e377c2"}


def _layout(fig: go.Figure, title: str, x: str, y: str, height: int = 360) -> go.Figure:
    fig.update_layout(title=title, xaxis_title=x, yaxis_title=y, height=height, template="plotly_white",
                      margin={"l": 60, "r": 20, "t": 50, "b": 80}, legend={"orientation": "h", "y": -0.3})
    return fig


def _having(runs: Sequence[RunResult], kind: str, table: str, column: str) -> list[tuple[int, RunResult]]:
    """(index, run) of the runs of this kind whose table has rows."""
    return [(i, r) for i, r in enumerate(runs) if r.kind == kind and len(r.table(table)[column])]


def _cluster(runs: Sequence[RunResult]) -> list[tuple[int, RunResult]]:
    return _having(runs, "cluster", "timeseries", "t_s")


def _over_time(runs: Sequence[RunResult], labels: Sequence[str], column: str, suffix: str = "") -> go.Figure | None:
    """One line per job-stream run of a time-series column against days (None: no such run)."""
    rows = _cluster(runs)
    if not rows:
        return None
    fig = go.Figure()
    for i, r in rows:
        ts = r.table("timeseries")
        fig.add_scatter(x=ts["t_s"] / DAY, y=ts[column], name=labels[i] + suffix, mode="lines", line={"color": PALETTE[i % 10]})
    return fig


def utilisation(runs: Sequence[RunResult], labels: Sequence[str]) -> go.Figure | None:
    """Busy / healthy chips over time."""
    fig = _over_time(runs, labels, "utilisation")
    if fig is None:
        return None
    fig.update_yaxes(tickformat=".0%", rangemode="tozero")
    return _layout(fig, "Utilisation over time (busy chips / healthy chips)", "day", "utilisation")


def goodput(runs: Sequence[RunResult], labels: Sequence[str]) -> go.Figure | None:
    """Goodput so far (useful / allocated chip-hours) and per-day goodput."""
    fig = _over_time(runs, labels, "goodput_cumulative", ": so far")
    if fig is None:
        return None
    for i, r in _cluster(runs):
        d, g = daily_goodput(r.table("timeseries"))
        if len(d):
            fig.add_bar(x=d, y=g, name=f"{labels[i]}: per day", marker={"color": PALETTE[i % 10]}, opacity=0.35)
    fig.update_yaxes(tickformat=".0%")
    return _layout(fig, "Goodput over time (useful / allocated chip-hours)", "day", "goodput")


def daily_goodput(ts: dict) -> tuple[np.ndarray, np.ndarray]:
    """Per whole day (x in days, the day's middle): 1 - (lost + overhead chip-s in the day) /
    (busy chip-s in the day)."""
    t = ts["t_s"]
    if len(t) < 2 or np.all(np.isnan(ts["busy_chip_s"])):
        return np.array([]), np.array([])
    edges = np.arange(0.0, t[-1] + 1e-9, DAY)
    if len(edges) < 2:
        return np.array([]), np.array([])
    busy = np.interp(edges, t, ts["busy_chip_s"])
    wasted = np.interp(edges, t, ts["lost_chip_s"] + ts["overhead_chip_s"])
    db, dw = np.diff(busy), np.diff(wasted)
    with np.errstate(invalid="ignore", divide="ignore"):
        g = np.where(db > 0, 1.0 - dw / db, np.nan)
    return edges[:-1] / DAY + 0.5, g


def queue(runs: Sequence[RunResult], labels: Sequence[str]) -> go.Figure | None:
    fig = _over_time(runs, labels, "queued_jobs", ": queued")
    if fig is None:
        return None
    rows = _cluster(runs)
    if len(rows) == 1:
        ts = rows[0][1].table("timeseries")
        fig.add_scatter(x=ts["t_s"] / DAY, y=ts["running_jobs"], name="running", mode="lines", line={"color": "#2ca02c"})
    return _layout(fig, "Jobs queued and running", "day", "jobs")


def wait_over_time(runs: Sequence[RunResult], labels: Sequence[str]) -> go.Figure | None:
    """Each started job's wait against its submission time."""
    rows = _cluster(runs)
    if not rows:
        return None
    fig = go.Figure()
    for i, r in rows:
        j = r.table("jobs")
        ok = ~np.isnan(j["wait_s"])
        fig.add_scatter(x=j["submit_s"][ok] / DAY, y=j["wait_s"][ok] / HOUR, mode="markers", name=labels[i],
                          marker={"size": 4, "color": PALETTE[i % 10], "opacity": 0.6},
                          text=[f"{a} {b}" for a, b in zip(j["id"][ok], j["shape"][ok], strict=True)])
    return _layout(fig, "Queue wait by submission time (started jobs)", "submitted (day)", "wait (h)")


def wait_cdf(runs: Sequence[RunResult], labels: Sequence[str]) -> go.Figure | None:
    """Empirical CDF of the wait of started jobs (the ones never started are listed apart)."""
    rows = _cluster(runs)
    if not rows:
        return None
    fig = go.Figure()
    for i, r in rows:
        w = np.sort(r.table("jobs")["wait_s"])
        w = w[~np.isnan(w)]
        if not len(w):
            continue
        fig.add_scatter(x=w / HOUR, y=np.arange(1, len(w) + 1) / len(w), mode="lines", line={"shape": "hv", "color": PALETTE[i % 10]},
                        name=labels[i])
    fig.update_yaxes(tickformat=".0%", range=[0, 1.01])
    return _layout(fig, "Wait CDF (jobs that started)", "wait (h)", "share of started jobs")


CHIP_HOURS = {"useful_chip_h": "#54A24B", "lost_failure_chip_h": "#E45756", "lost_preemption_chip_h": "#FF9DA6",
              "restart_chip_h": "#EECA3B", "reconfiguration_chip_h": "#B279A2", "degraded_chip_h": "#9D755D",
              "idle_queued_chip_h": "#F58518", "idle_empty_chip_h": "#D0D0D0", "down_chip_h": "#555555",
              "lost_chip_h": "#E45756", "overhead_chip_h": "#EECA3B", "idle_chip_h": "#D0D0D0"}


def chip_hours(runs: Sequence[RunResult], labels: Sequence[str]) -> go.Figure | None:
    """Where each job-stream run's chip-hours went (podsim.cluster.breakdown.chip_hour_breakdown: useful,
    lost to failures and preemptions, restarts, reconfiguration, degraded, idle while jobs waited,
    idle, down); the bars add up to chips x the measured window."""
    from podsim.cluster.breakdown import chip_hour_breakdown

    rows = [(i, chip_hour_breakdown(r.metrics)) for i, r in enumerate(runs) if r.kind == "cluster" and "fleet_chip_h" in r.metrics]
    if not rows:
        return None
    fig = go.Figure()
    order = list(dict.fromkeys(p["metric"] for _, parts in rows for p in parts))
    for metric in order:
        label = next(p["label"] for _, parts in rows for p in parts if p["metric"] == metric)
        fig.add_bar(x=[labels[i] for i, _ in rows], name=label, marker={"color": CHIP_HOURS.get(metric, "#888888")},
                    y=[next((p["chip_h"] for p in parts if p["metric"] == metric), 0.0) for _, parts in rows])
    fig.update_layout(barmode="stack")
    return _layout(fig, "Where the chip-hours went", "", "chip-hours")


def goodput_by_shape(runs: Sequence[RunResult], labels: Sequence[str]) -> go.Figure | None:
    """Goodput (useful / allocated chip-hours) per requested slice shape, fewest chips first."""
    from podsim.cluster.breakdown import by_shape

    fig = go.Figure()
    rows = _having(runs, "cluster", "jobs", "id")
    for i, r in rows:
        shapes = [row for row in by_shape(r.table("jobs")) if row["allocated_chip_h"] > 0]
        fig.add_bar(x=[row["shape"] for row in shapes], y=[row["goodput"] for row in shapes], name=labels[i],
                    marker={"color": PALETTE[i % 10]}, hoverinfo="text",
                    hovertext=[f"{row['shape']}: {row['jobs']} jobs, {row['lost_chip_h']:.4g} chip-h lost, "
                               f"wait p95 {row['wait_p95_s'] / HOUR:.3g} h" for row in shapes])
    if not rows:
        return None
    fig.update_layout(barmode="group")
    fig.update_yaxes(tickformat=".0%", range=[0, 1.01])
    return _layout(fig, "Goodput by slice shape (useful / allocated chip-hours)", "slice shape (fewest chips first)", "goodput")


def fragmentation(runs: Sequence[RunResult], labels: Sequence[str]) -> go.Figure | None:
    """1 - largest placeable slice / free chips over time; one run also shows the chip counts."""
    rows = [(i, r) for i, r in _cluster(runs) if not np.all(np.isnan(r.table("timeseries")["largest_placeable_chips"]))]
    if not rows:
        return None
    fig = go.Figure()
    if len(rows) == 1:
        ts = rows[0][1].table("timeseries")
        fig.add_scatter(x=ts["t_s"] / DAY, y=ts["healthy_chips"] - ts["busy_chips"], name="free chips", mode="lines", line={"color": "#2ca02c"})
        fig.add_scatter(x=ts["t_s"] / DAY, y=ts["largest_placeable_chips"], name="largest placeable slice (chips)", mode="lines",
                        line={"color": "#d62728"})
        return _layout(fig, "Fragmentation: free chips and the largest slice that still fits", "day", "chips")
    fig = _over_time([r for _, r in rows], [labels[i] for i, _ in rows], "fragmentation")
    return _layout(fig, "Fragmentation (1 - largest placeable slice / free chips)", "day", "fragmentation")


def step_breakdown(runs: Sequence[RunResult], labels: Sequence[str]) -> go.Figure | None:
    """Per step-study run: compute on the critical path, exposed and overlapped communication."""
    rows = [(i, r) for i, r in enumerate(runs) if r.kind == "step"]
    if not rows:
        return None
    names = [labels[i] for i, _ in rows]
    m = [r.metrics for _, r in rows]
    fig = go.Figure()
    fig.add_bar(y=names, x=[x["step_time_s"] - x["exposed_comm_s"] for x in m], name="compute (critical path)", orientation="h",
                marker={"color": KIND_COLOURS["compute"]})
    fig.add_bar(y=names, x=[x["exposed_comm_s"] for x in m], name="exposed communication", orientation="h",
                marker={"color": "#d62728"})
    fig.add_scatter(y=names, x=[x["overlapped_comm_s"] for x in m], name="communication overlapped with compute",
                    mode="markers", marker={"symbol": "diamond", "size": 10, "color": "#ff7f0e"})
    fig.update_layout(barmode="stack")
    return _layout(fig, "Step time breakdown", "seconds per step", "", height=140 + 50 * len(rows))


def collectives(runs: Sequence[RunResult], labels: Sequence[str]) -> go.Figure | None:
    """Op time per collective kind (the summed durations of one step's ops of that kind), simulated
    and closed form."""
    rows = _having(runs, "step", "step_kinds", "kind")
    fig = go.Figure()
    for i, r in rows:
        k = r.table("step_kinds")
        simulated = k["op_s"] if np.isfinite(k["op_s"]).any() else k["busy_s"]  # a run stored before op_s: its busy_s was the sum
        fig.add_bar(x=list(k["kind"]), y=simulated, name=f"{labels[i]}: simulated", marker={"color": PALETTE[i % 10]})
        fig.add_scatter(x=list(k["kind"]), y=k["closed_form_s"], name=f"{labels[i]}: closed form", mode="markers",
                        marker={"symbol": "line-ew-open", "size": 22, "color": PALETTE[i % 10]})
    if not rows:
        return None
    fig.update_layout(barmode="group")
    return _layout(fig, "Collectives: busy time per step by kind (sum over ops, which may overlap)", "", "seconds")


def timeline(run: RunResult, max_ops: int = 2000) -> go.Figure | None:
    """One step's ops on a time line, one row per kind."""
    ops = run.table("step_ops")
    if run.kind != "step" or not len(ops["op"]):
        return None
    fig = go.Figure()
    kinds = list(dict.fromkeys(ops["kind"]))
    for kind in kinds:
        sel = np.flatnonzero(ops["kind"] == kind)[:max_ops]
        fig.add_bar(y=[kind] * len(sel), x=(ops["end_s"][sel] - ops["start_s"][sel]), base=ops["start_s"][sel], orientation="h",
                    name=kind, marker={"color": KIND_COLOURS.get(kind, "#7f7f7f")}, text=list(ops["op"][sel]),
                    hovertemplate="%{text}: %{base:.4g} s + %{x:.4g} s<extra></extra>")
    fig.update_layout(barmode="overlay", showlegend=False)
    return _layout(fig, "One step on a time line (ops overlap where the DAG allows)", "seconds", "", height=120 + 40 * len(kinds))


def step_times(run: RunResult) -> go.Figure | None:
    """Step time per (model, shape, slices, sites) that a job stream's step-based jobs asked for."""
    st = run.table("step_times")
    if not len(st["model"]):
        return None
    order = np.argsort(st["step_time_s"])

    def spread(k) -> str:  # slices and sites read 0 in stores from before they were recorded
        n, s = int(st["slices"][k]), int(st["sites"][k])
        return (f" x{n}" if n > 1 else "") + (f" over {s} sites" if s > 1 else "")

    def band(k) -> str:  # the step's error band (absent from stores written before bands were recorded)
        err = st["step_time_error"][k] if "step_time_error" in st else None
        if err is None:
            return ""
        return " (error unknown)" if np.isnan(err) else f" (±{err:.0%})"

    names = [f"{st['model'][k]} {st['shape'][k]}{' twisted' if st['twisted'][k] else ''}{spread(k)}{band(k)}" for k in order]
    fig = go.Figure()
    fig.add_bar(y=names, x=st["compute_s"][order], name="compute", orientation="h", marker={"color": KIND_COLOURS["compute"]})
    fig.add_bar(y=names, x=st["exposed_comm_s"][order], name="exposed communication", orientation="h", marker={"color": "#d62728"})
    fig.update_layout(barmode="stack")
    return _layout(fig, "Step time of each model on each slice it ran on", "seconds per step", "", height=140 + 28 * len(names))


def sweep_metric(runs: Sequence[RunResult], labels: Sequence[str], metric: str, title: str) -> go.Figure | None:
    """One bar per run of a metric (the comparison's headline plot), when two or more runs have it."""
    vals = [r.metrics.get(metric) for r in runs]
    if sum(isinstance(v, (int, float)) and not np.isnan(v) for v in vals) < 2:
        return None  # nothing to compare
    fig = go.Figure()
    fig.add_bar(x=list(labels), y=[np.nan if v is None else v for v in vals],
                marker={"color": [PALETTE[i % 10] for i in range(len(runs))]})
    return _layout(fig, title, "", metric)


def scaling_figure(study: Mapping[str, Sequence], title: str) -> go.Figure:
    """A weak-scaling study (podsim.scenario.scaling columns): step time and the DCN (and WAN,
    where the slices span sites) exposed time as bars, parallel efficiency and MFU as lines
    against the slice count. `podsim scaling --plot`, the report and the dashboard draw it."""
    from plotly.subplots import make_subplots

    x = [str(int(n)) for n in study["slices"]]
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(go.Bar(x=x, y=list(study["step_time_s"]), name="step time (s)", marker={"color": KIND_COLOURS["compute"]}),
                  secondary_y=False)
    fig.add_trace(go.Bar(x=x, y=list(study["dcn_exposed_s"]), name="DCN exposed (s)", marker={"color": "#d62728"}),
                  secondary_y=False)
    if has_wan(study):
        fig.add_trace(go.Bar(x=x, y=list(study["wan_exposed_s"]), name="WAN exposed (s)", marker={"color": "#8c564b"}),
                      secondary_y=False)
    fig.add_trace(go.Scatter(x=x, y=list(study["parallel_efficiency"]), name="parallel efficiency", mode="lines+markers",
                             line={"color": "#2ca02c"}), secondary_y=True)
    fig.add_trace(go.Scatter(x=x, y=list(study["mfu"]), name="MFU", mode="lines+markers", line={"color": "#ff7f0e", "dash": "dash"}),
                  secondary_y=True)
    _layout(fig, title, "slices", "seconds per step", height=420)
    fig.update_layout(barmode="group")
    fig.update_yaxes(title_text="parallel efficiency, MFU", tickformat=".0%", range=[0, 1.05], dtick=0.2, secondary_y=True)
    return fig


def has_wan(study: Mapping[str, Sequence]) -> bool:
    """Whether any point of a scaling study crosses a WAN (its slices span sites)."""
    return any(np.isfinite(v) and v > 0 for v in study.get("wan_busy_s", ()))
