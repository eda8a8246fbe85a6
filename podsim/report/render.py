"""`render_report(runs) -> str`: a self-contained HTML capacity-planning report.

One run gets the full plan: key figures and targets, topology, utilisation, goodput and queue
over time, wait CDF, fragmentation, step-time breakdown, cost and power, and the spine and
scaling studies the scenario asked for. Several runs are set
side by side (one column each) with their plots drawn over each other. plotly.js is inlined
once, so the file opens offline; no other file or network access is needed.
"""

from __future__ import annotations

import datetime as dt
import html
import json
from collections.abc import Callable, Sequence
from functools import cache
from importlib import resources
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import jinja2
import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from podsim.cluster.breakdown import chip_hour_breakdown
from podsim.metrics import definition, unit_kind
from podsim.perf.opmodel import compute_timing
from podsim.report import figures
from podsim.report.pivot import sweep_pivot
from podsim.report.plan import plan_details
from podsim.report.reshape import reshape_details
from podsim.report.scaling import scaling_details
from podsim.report.serving import SERVING_ROWS, serving_details, serving_figures
from podsim.report.spine import spine_details, spine_figures
from podsim.scenario.result import RunResult
from podsim.stats import interval_text
from podsim.sweep.run import answer_text, probe_text
from podsim.trace.memory import hbm_text
from podsim.units import format_bytes, format_rate
from podsim.units import format_duration as sec
from podsim.units import format_percent as pct
from podsim.units import is_missing as _missing

PLOT_CONFIG = {"displaylogo": False, "responsive": True, "toImageButtonOptions": {"format": "png"}}


# Formatting ---------------------------------------------------------------------------------
def num(v: Any, digits: int = 4) -> str:
    if _missing(v):
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer() and abs(v) < 1e15):
        return f"{int(v):,}"
    return f"{v:,.{digits}g}" if abs(v) < 1e4 else f"{v:,.0f}"


def usd(v: Any) -> str:
    return "not published" if _missing(v) else f"${v:,.0f}" if abs(v) >= 100 else f"${v:,.2f}"


def threshold_text(metric: str, value: float) -> str:
    """A metric's value in its unit (the metric registry's; seconds for unregistered *_s)."""
    unit = unit_kind(metric)
    return sec(value) if unit == "duration" else pct(value) if unit == "fraction" else num(value)


Row = tuple[str, Callable[[RunResult], str]]


def _m(key: str, fmt: Callable[[Any], str] = num) -> Callable[[RunResult], str]:
    return lambda r: fmt(r.metrics.get(key))


CLUSTER_ROWS: list[Row] = [
    ("fleet", lambda r: f"{r.metrics['pods']} x {r.metrics['generation']} ({r.metrics['chips']:,} chips, "
                        f"{'OCS' if r.metrics['ocs'] else 'static wiring'})"),
    ("policy / solver", lambda r: f"{r.metrics['policy']} / {r.metrics['solver']}"),
    ("jobs", lambda r: jobs_text(r.metrics)),
    ("utilisation", _m("utilisation", pct)),
    ("goodput (useful / allocated)", _m("goodput", pct)),
    ("fleet goodput (useful / all chip-hours)", _m("fleet_goodput", pct)),
    ("queue wait p50 / p95 / p99 (still-queued jobs counted)", lambda r: " / ".join(sec(r.metrics.get(k)) for k in ("wait_p50_s", "wait_p95_s", "wait_p99_s"))),
    ("queue wait p50 / p95 / p99, started jobs only", lambda r: " / ".join(sec(r.metrics.get(k)) for k in ("wait_p50_started_s", "wait_p95_started_s", "wait_p99_started_s"))),
    ("queue wait, mean: for shape / for resource", lambda r: f"{sec(r.metrics.get('wait_shape_mean_s'))} / "
                                                             f"{sec(r.metrics.get('wait_resource_mean_s'))}"),
    ("job completion time p50 / p95", lambda r: " / ".join(sec(r.metrics.get(k)) for k in ("jct_p50_s", "jct_p95_s"))),
    ("bounded slowdown p95", _m("slowdown_p95")),
    ("fragmentation (mean)", _m("fragmentation_mean", pct)),
    ("largest placeable slice (mean)", lambda r: f"{num(r.metrics.get('largest_placeable_mean_chips'))} chips"),
    ("failures (host / OCS / link)", lambda r: " / ".join(num(r.metrics[k]) for k in ("failures_host", "failures_ocs", "failures_link"))
                                               + f"; {num(r.metrics['job_interruptions'])} job interruptions"),
    ("where the chip-hours went", lambda r: "; ".join(f"{p['label']} {num(p['chip_h'])} ({pct(p['share'])})"
                                                     for p in chip_hour_breakdown(r.metrics) if p["chip_h"] > 0)),
    ("measured window", lambda r: window_text(r.metrics)),
    ("cost of the fleet", _m("cost_usd", usd)),
    ("cost per useful chip-hour", _m("cost_per_useful_chip_h_usd", usd)),
    ("energy (busy chips)", lambda r: "not published" if _missing(r.metrics.get("energy_kwh")) else f"{num(r.metrics['energy_kwh'])} kWh"),
    ("simulated / wall time", lambda r: f"{sec(r.metrics['horizon_s'])} / {r.wall_s:.2f} s"),
]
def jobs_text(m: dict) -> str:
    """Every job in exactly one state: completed, running, queued, never placeable, not arrived.
    Counts of one run; of replicates, their means (num() keeps 4 significant digits)."""
    parts = [f"{num(m['jobs_completed'])} completed", f"{num(m['jobs_running'])} running", f"{num(m['jobs_queued'])} queued",
             f"{num(m['jobs_unplaceable'])} never placeable", f"{num(m.get('jobs_not_arrived', 0))} not yet arrived"]
    return f"{num(m['jobs_total'])} = " + " + ".join(parts)


def window_text(m: dict) -> str:
    """The window the steady-state figures are over: warm-up left out, drain after the horizon."""
    warm, drain = m.get("warmup_s") or 0.0, m.get("drain_s") or 0.0
    if not warm and not drain:
        return f"the whole horizon ({sec(m['horizon_s'])}), from an empty fleet"
    text = f"{sec(warm)} to {sec(m['horizon_s'])} (warm-up left out; waits over the {num(m.get('jobs_measured', 0))} jobs submitted in it)"
    return text + (f"; drained {sec(drain)} past the horizon" if drain else "")


def _hbm(m: dict) -> str:
    """The step's HBM bytes per chip against the chip's (podsim.trace.memory), or why not known."""
    if m.get("hbm_bytes_per_chip") is None:
        return "not known (an imported trace)"
    return hbm_text(m["hbm_bytes_per_chip"], m.get("hbm_capacity_bytes"))


def band_note(m: dict) -> str:
    """' (typical error ±7% over 31 runs of this kind)': the step's error band (podsim.validation.bands,
    the step_time_error_text metric), or '' for a run stored before bands were recorded."""
    text = m.get("step_time_error_text")
    return f" ({text})" if text else ""


def with_band(m: dict, text: str) -> str:
    """A figure that scales with the step time (MFU, time to train) with the step's band, ±x% or
    that its error is unknown."""
    err = m.get("step_time_error")
    if err is None or "step_time_error_text" not in m:
        return text
    if _missing(err):
        return f"{text} (error unknown: no validation runs of this kind)"
    return f"{text} (±{err:.0%}, as the step time)"


def multislice_text(m: dict) -> str:
    """What the slices add beyond one slice's step (podsim.study.multislice), or 'one slice'."""
    if (m.get("slices") or 1) <= 1 or "straggler_wait_s" not in m:
        return "one slice"
    return (f"straggler wait {sec(m['straggler_wait_s'])}, DCN tail {sec(m.get('dcn_tail_s', 0.0))}, "
            f"ECMP collisions {sec(m.get('ecmp_collision_s', 0.0))}")


STEP_ROWS: list[Row] = [
    ("model", lambda r: f"{r.metrics['model']} ({r.metrics['parallelism'] or 'trace'})"),
    ("slices", lambda r: f"{r.metrics['slices']} x {r.metrics['generation']} {r.metrics['slice']}{' twisted' if r.metrics['twisted'] else ''} "
                         f"({r.metrics['chips']:,} chips)"),
    ("DCN", lambda r: f"{r.metrics['dcn']}" + (f" {num(r.metrics['dcn_oversubscription'])}:1" if r.metrics["dcn"] == "eps" else "")
                      + (f", circuits engineered for blocks {r.metrics['dcn_ocs_groups']}" if r.metrics.get("dcn_ocs_groups") else "")),
    ("step time", lambda r: sec(r.metrics["step_time_s"]) + band_note(r.metrics)),
    ("compute on the critical path", lambda r: sec(r.metrics["step_time_s"] - r.metrics["exposed_comm_s"]
                                                   - r.metrics.get("multislice_added_s", 0.0))),
    ("exposed / overlapped communication", lambda r: f"{sec(r.metrics['exposed_comm_s'])} / {sec(r.metrics['overlapped_comm_s'])}"),
    ("multislice terms", lambda r: multislice_text(r.metrics)),
    ("model FLOPs utilisation", lambda r: with_band(r.metrics, pct(r.metrics["mfu"]))),
    ("compute timing", lambda r: compute_timing(r.metrics.get("compute_efficiency"))),  # None: per-op model
    ("HBM per chip", lambda r: _hbm(r.metrics)),
    ("time to train", lambda r: with_band(r.metrics, f"{sec(r.metrics.get('time_to_train_s'))} ({r.metrics['steps']:,} steps)")
     if r.metrics.get("steps") else "n/a (give the study's steps)"),
    ("chip-hours", lambda r: f"{num(r.metrics['chip_h'])} ({r.cost.get('per', '')})"),
    ("cost", _m("cost_usd", usd)),
    ("energy", lambda r: "not published" if _missing(r.metrics.get("energy_kwh")) else f"{num(r.metrics['energy_kwh'])} kWh"),
    ("engine wall time", lambda r: f"{r.metrics['engine_wall_s']:.2f} s ({r.metrics['events']:,} events)"),
]


SPINE_ROWS: list[Row] = [
    ("spine capex, EPS / OCS", lambda r: f"{usd(r.metrics['spine_eps_capex_usd'])} / {usd(r.metrics['spine_ocs_capex_usd'])} "
                                         f"over {r.metrics['spine_years']} years (OCS = {pct(r.metrics['spine_capex_ratio'])})"),
    ("spine energy, EPS / OCS", lambda r: f"{num(r.metrics['spine_eps_energy_kwh'] / 1000)} / {num(r.metrics['spine_ocs_energy_kwh'] / 1000)} MWh "
                                          f"(OCS = {pct(r.metrics['spine_energy_ratio'])})"),
    ("cost per useful chip-hour, EPS / OCS", lambda r: f"${r.metrics['spine_eps_usd_per_useful_chip_h']:,.4g} / "
                                                       f"${r.metrics['spine_ocs_usd_per_useful_chip_h']:,.4g}"),
]


def _safe(fn: Callable[[RunResult], str], r: RunResult) -> str:
    try:
        return fn(r)
    except (KeyError, TypeError, ValueError):
        return "n/a"


PLAN_ROWS: list[Row] = [
    ("plan search: best plan", lambda r: f"{r.metrics['plan_best_parallelism']}: {sec(r.metrics['plan_best_step_time_s'])}, "
                                         f"MFU {pct(r.metrics['plan_best_mfu'])}"),
]
SCALING_ROWS: list[Row] = [
    ("weak scaling at the most slices", lambda r: f"{pct(r.metrics['scaling_parallel_efficiency'])} parallel efficiency, "
                                                  f"MFU {pct(r.metrics['scaling_mfu'])} on {r.metrics['scaling_slices_max']} slices"),
]


# A replicated run's figures shown with their interval (CLI, report), then its targets' metrics.
INTERVAL_METRICS = ("utilisation", "goodput", "fleet_goodput", "wait_p50_s", "wait_p95_s", "wait_p99_s", "slowdown_p95",
                    "jobs_completed", "jobs_queued", "useful_chip_h", "lost_chip_h", "overhead_chip_h",
                    "fragmentation_mean", "cost_per_useful_chip_h_usd")


def interval_rows(run: RunResult) -> list[tuple[str, str]]:
    """(metric, 'mean [low, high] (95% CI, n=N)') in the metric's unit, for a replicated run's
    headline metrics and the metrics its targets name; [] for a one-seed run."""
    if not run.intervals:
        return []
    names = [*INTERVAL_METRICS, *(t["metric"] for t in run.targets)]
    return [(m, interval_text(run.intervals[m], lambda v, m=m: threshold_text(m, v)))
            for m in dict.fromkeys(names) if m in run.intervals]


def key_rows(runs: Sequence[RunResult]) -> list[tuple[str, list[str]]]:
    """Rows of the key-figure table: label, one cell per run (n/a where a run has no such figure)."""
    rows: list[tuple[str, list[str]]] = []
    if any(r.intervals for r in runs):
        rows.append(("replicates", [f"{r.replicates} (figures: means; 95% intervals below)" if r.intervals else "1"
                                    for r in runs]))
    kinds = {r.kind for r in runs}
    for kind, spec in (("cluster", CLUSTER_ROWS), ("step", STEP_ROWS), ("serving", SERVING_ROWS)):
        if kind in kinds:
            rows += [(name, [_safe(fn, r) if r.kind == kind else "" for r in runs]) for name, fn in spec]
    for key, spec in (("spine_capex_ratio", SPINE_ROWS), ("scaling_parallel_efficiency", SCALING_ROWS),
                      ("plan_best_step_time_s", PLAN_ROWS)):  # a study's rows
        if any(key in r.metrics for r in runs):
            rows += [(name, [_safe(fn, r) if key in r.metrics else "" for r in runs]) for name, fn in spec]
    return rows


def topology_rows(t: dict) -> list[tuple[str, str]]:
    dcn = t.get("dcn", {})
    rows = [
        ("generation", f"{t['name']} ({t['generation']})"),
        ("shape", f"{t['shape']} {t['topology']}{' (twisted)' if t.get('twisted') else ''}, {'OCS' if t['ocs_wiring'] else 'static'} wiring"),
        ("chips / hosts", f"{t['chips']:,} / {t.get('hosts', 'n/a')}"),
    ]
    if t.get("cubes") is not None:
        rows.append(("cubes / OCS units / circuits", f"{t['cubes']} / {t.get('ocs')} / {t.get('ocs_circuits')}"))
    rows += [
        ("ICI link", f"{format_rate(t['link_bytes_per_s'])} per direction, {t['ici_links']:,} cables"),
        ("bisection / all-reduce bandwidth", f"{format_rate(t['bisection_bytes_per_s'])} / {format_rate(t['allreduce_bytes_per_s'])}"),
        ("diameter", f"{t['diameter_hops']} hops"),
        ("peak bf16 / HBM", f"{t['peak_flops_per_s'] / 1e15:.4g} PFLOP/s / {format_bytes(t['hbm_bytes'])}"),
        ("DCN", f"{dcn.get('kind')}: {dcn.get('leaves')} leaves, {dcn.get('spines')} spines, {num(dcn.get('oversubscription'))}:1, "
                f"{format_rate(dcn.get('bytes_per_s_per_host') or 0)} per host"),
    ]
    if t.get("pods", 1) > 1 or t.get("scope") == "pod":
        rows.append(("fleet", f"{t.get('pods', 1)} pod(s), {t.get('fleet_chips', t['chips']):,} chips"))
    return rows


def cost_rows(r: RunResult) -> list[tuple[str, str]]:
    c = r.cost
    price = c.get("price_per_chip_h_usd")
    rows = [
        ("chip-hours" + (" (fleet over the horizon)" if r.kind == "cluster" else f" ({c.get('per', '')})"), num(c.get("chip_h"))),
        ("price per chip-hour", f"${price:,.4g} (source {c.get('price_source')}: {c.get('price_note')})" if price is not None
         else f"not published (source {c.get('price_source')}: {c.get('price_note')}); set topology.overrides.price_per_chip_hour "
              f"with its source to cost it"),
        ("cost", usd(c.get("cost_usd")) + (" = chip-hours x price" if c.get("cost_usd") is not None else "")),
    ]
    if r.kind == "cluster":
        rows.append(("cost per useful chip-hour", usd(c.get("cost_per_useful_chip_h_usd"))))
    if r.kind == "serving":
        rows.append(("cost per million output tokens", "not published" if _missing(c.get("cost_per_million_tokens_usd"))
                     else f"${c['cost_per_million_tokens_usd']:,.4g}"))
    watt = c.get("power_per_chip_w")
    rows += [
        ("power per chip", f"{watt:g} W (source {c.get('power_source')}: {c.get('power_note')})" if watt is not None
         else f"not published (source {c.get('power_source')}: {c.get('power_note')})"),
        ("energy", f"{num(c.get('energy_kwh'))} kWh = busy chip-hours x power per chip" if c.get("energy_kwh") is not None else "n/a"),
    ]
    return rows


def _fig_html(fig: go.Figure | None, div_id: str) -> str | None:
    if fig is None:
        return None
    return fig.to_html(full_html=False, include_plotlyjs=False, config=PLOT_CONFIG, div_id=div_id)


@cache
def _template() -> jinja2.Template:
    env = jinja2.Environment(autoescape=jinja2.select_autoescape(["html", "j2"]), undefined=jinja2.StrictUndefined)
    env.globals.update(answer_text=answer_text, probe_text=probe_text)
    text = resources.files("podsim.report").joinpath("templates/report.html.j2").read_text()
    return env.from_string(text)


def _version() -> str:
    try:
        return version("podsim")
    except PackageNotFoundError:
        return "dev"


def default_labels(runs: Sequence[RunResult]) -> list[str]:
    names = [r.name for r in runs]
    if len(set(names)) == len(names):
        return names
    return [f"{i + 1}. {n}" for i, n in enumerate(names)]


COMPARED = (("goodput", "Goodput by run"), ("utilisation", "Utilisation by run"),
            ("wait_p95_s", "p95 wait by run, still-queued jobs counted (s)"),
            ("step_time_s", "Step time by run (s)"), ("cost_usd", "Cost by run (USD)"))


def report_figures(runs: Sequence[RunResult], labels: Sequence[str]) -> list[tuple[str, go.Figure]]:
    """The report's plots in order (the HTML report and the dashboard draw the same list).

    Several runs: first one bar per run of each headline metric and of every metric a target
    names (so a comparison shows what the targets judge); then the shared plots.
    """
    plots: list[tuple[str, go.Figure | None]] = []
    if len(runs) > 1:
        compared = list(COMPARED)
        for metric in dict.fromkeys(t["metric"] for r in runs for t in r.targets):
            if metric not in dict(compared):
                compared.append((metric, f"{metric} by run"))
        plots += [(title, figures.sweep_metric(runs, labels, metric, title)) for metric, title in compared]
    plots += [
        ("Utilisation", figures.utilisation(runs, labels)),
        ("Goodput", figures.goodput(runs, labels)),
        ("Queue", figures.queue(runs, labels)),
        ("Wait over time", figures.wait_over_time(runs, labels)),
        ("Wait CDF", figures.wait_cdf(runs, labels)),
        ("Fragmentation", figures.fragmentation(runs, labels)),
        ("Chip-hours", figures.chip_hours(runs, labels)),
        ("Goodput by slice shape", figures.goodput_by_shape(runs, labels)),
        ("Step-time breakdown", figures.step_breakdown(runs, labels)),
        ("Collectives", figures.collectives(runs, labels)),
    ]
    if len(runs) == 1:
        plots += [("Step times", figures.step_times(runs[0])), ("Timeline", figures.timeline(runs[0]))]
    plots += spine_figures(runs, labels)
    plots += serving_figures(runs, labels)
    return [(name, fig) for name, fig in plots if fig is not None]


def shared(details: list[dict], labels: Sequence[str], key: str) -> list[dict]:
    """A per-run section once per distinct content: [{labels, rows}], so identical topology or
    cost tables of a sweep's points show once ("all 6 runs") instead of once per run."""
    out: list[dict] = []
    for d, label in zip(details, labels, strict=True):
        same = next((g for g in out if g["rows"] == d[key]), None)
        if same is None:
            out.append({"labels": [label], "rows": d[key]})
        else:
            same["labels"].append(label)
    for g in out:
        g["title"] = (f"all {len(labels)} runs" if len(g["labels"]) == len(labels) and len(labels) > 1
                      else ", ".join(g["labels"]))
    return out


def pivot_rows(sweep: dict, runs: Sequence[RunResult]) -> dict | None:
    """The grid sweep's pivot (podsim.report.pivot) as text: per metric a header (the other
    swept fields, each variant, each variant / the first) and rows."""
    stored = [r for r in sweep.get("runs", []) if isinstance(r, dict) and r.get("status") == "ok"]
    grid = (sweep.get("spec") or {}).get("grid")
    p = sweep_pivot(sweep, runs, stored) if sweep.get("mode") == "grid" and grid and len(runs) == len(stored) else None
    if p is None:
        return None
    short = lambda f: f.rsplit(".", 1)[-1]  # noqa: E731
    name = short(p["compare"])
    tables = []
    for t in p["tables"]:
        m = t["metric"]
        header = [*map(short, p["fields"]), *(f"{name}={v}" for v in p["variants"]),
                  *(f"{v} / {p['variants'][0]}" for v in p["variants"][1:])]
        rows = []
        for key, cells, ratios in t["rows"]:
            text = ["n/a" if c is None else interval_text(c, lambda v, m=m: threshold_text(m, v)) if c["n"] > 1
                    else threshold_text(m, c["mean"]) for c in cells]
            rows.append([*key, *text, *("n/a" if r is None else f"{r:.3g}x" for r in ratios[1:])])
        tables.append({"metric": m, "definition": definition(m), "header": header, "rows": rows})
    return {"compare": p["compare"], "variants": p["variants"], "fields": p["fields"], "tables": tables}


def render_report(runs: RunResult | Sequence[RunResult], title: str | None = None, labels: Sequence[str] | None = None,
                  sweep: dict | None = None) -> str:
    r"""The HTML capacity-planning report of one run or of several side by side (a sweep's
    points, runs picked from a store): key figures, targets, figures, tables; self-contained.

    Parameters
    ----------
    runs : RunResult or sequence of RunResult
        The runs (`run_scenario`, `podsim.store.load_run`).
    title : str, optional
        The page title.
    labels : sequence of str, optional
        The runs' column names (default: their names).
    sweep : dict, optional
        From `podsim.store.load_stored_sweep`: adds the sweep's question and capacity answer.

    Returns
    -------
    str
        One HTML document (plotly inlined: no network needed to view it).

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from podsim import load_scenario, render_report, run_scenario
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "step.yaml"
    >>> _ = path.write_text("name: r50\ntopology: {generation: tpu-v4}\nworkload: {step: {model: resnet50, slice: 2x2x2, "
    ...                     "model_overrides: {global_batch: 64}}}")
    >>> html = render_report(run_scenario(load_scenario(path)))
    >>> html.startswith("<!DOCTYPE html>"), "r50" in html
    (True, True)
    """
    runs = [runs] if isinstance(runs, RunResult) else list(runs)
    if not runs:
        raise ValueError("render_report needs at least one run")
    labels = list(labels) if labels is not None else default_labels(runs)
    if len(labels) != len(runs):
        raise ValueError(f"{len(labels)} labels for {len(runs)} runs")
    multi = len(runs) > 1
    plot_html = [(name, _fig_html(fig, f"plot-{k}")) for k, (name, fig) in enumerate(report_figures(runs, labels))]
    details = []
    for i, r in enumerate(runs):
        details.append({
            "label": labels[i], "run": r, "topology": topology_rows(r.topology), "cost": cost_rows(r),
            "targets": [{**t, "definition": definition(t["metric"]), "threshold_text": threshold_text(t["metric"], t["threshold"]),
                         "value_text": (threshold_text(t["metric"], t["value"]) if not _missing(t["value"]) else "n/a")
                         + (f" (mean of {r.replicates})" if t.get("interval") else "")} for t in r.targets],
            "references": [{**x, "definition": definition(x["metric"]), "published_text": threshold_text(x["metric"], x["published"]),
                            "podsim_text": threshold_text(x["metric"], x["podsim"]) if not _missing(x["podsim"]) else "n/a",
                            "ratio_text": "n/a" if _missing(x["ratio"]) else f"{x['ratio']:.3g}x"} for x in r.references],
            "unplaceable": r.metrics.get("unplaceable", []),
            "intervals": interval_rows(r),
            "scenario_json": json.dumps(r.scenario, indent=2, default=str),
        })
    scaling = [{**d, "figure": _fig_html(d["figure"], f"scaling-{k}")} for k, d in enumerate(scaling_details(runs, labels))]
    pivot = pivot_rows(sweep, runs) if sweep else None
    title = title or (sweep["name"] if sweep else runs[0].name if not multi else f"{len(runs)} runs compared")
    return _template().render(
        title=title, generated=dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), version=_version(),
        plotly_js=get_plotlyjs(), labels=labels, key_rows=key_rows(runs), plots=plot_html, details=details,
        spine=spine_details(runs, labels), scaling=scaling, serving=serving_details(runs, labels), pivot=pivot,
        plan=plan_details(runs, labels),
        shared_topology=shared(details, labels, "topology"), shared_cost=shared(details, labels, "cost"),
        reshape=reshape_details(runs, labels),
        multi=multi, sweep=sweep, sweep_json=json.dumps(sweep.get("result"), indent=2, default=str) if sweep else "",
        questions=list(dict.fromkeys(r.scenario.get("question", "") for r in runs if r.scenario.get("question"))),
        escape=html.escape)
