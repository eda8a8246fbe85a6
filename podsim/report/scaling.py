"""The report's scaling section: per run with a scaling study (a scenario's `scaling`
section), its table by slice count and its figure (podsim.report.figures.scaling_figure).
The HTML report and the dashboard's capacity page show the same details."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from podsim.perf.opmodel import compute_timing
from podsim.report.figures import has_wan, scaling_figure
from podsim.scenario.result import RunResult
from podsim.units import format_duration as sec
from podsim.units import format_percent as pct

COLUMNS = ("slices", "chips", "global batch", "step time", "MFU", "DCN busy", "DCN exposed", "parallel efficiency")
WAN_COLUMNS = ("WAN busy", "WAN exposed")


def has_scaling(r: RunResult) -> bool:
    return len(r.table("scaling")["slices"]) > 0


def _sec(v: np.floating) -> str:
    return sec(float(v))


def _pct(v: np.floating) -> str:
    return pct(float(v))


def _err(t: dict, i: int) -> str:
    """' ±7%' after a row's step time (podsim.validation.bands), ' (error unknown)' where the corpus
    has no run of its kind, '' for a study stored before bands were recorded."""
    if "step_time_error" not in t or len(t["step_time_error"]) <= i:
        return ""
    err = float(t["step_time_error"][i])
    return " (error unknown)" if np.isnan(err) else f" ±{err:.0%}"


def band_notes(r: RunResult) -> list[str]:
    """Each distinct error band of the study's rows, with the slice counts it is for: '1 slice:
    typical error ±8% over 13 runs of single-slice steps ...'."""
    t = r.table("scaling")
    if "step_time_error_text" not in t:
        return []
    by_text: dict[str, list[int]] = {}
    for n, text in zip(t["slices"], t["step_time_error_text"], strict=True):
        by_text.setdefault(str(text), []).append(int(n))
    return [f"{', '.join(map(str, ns))} slice{'s' if ns != [1] else ''}: {text}" for text, ns in by_text.items() if text]


def scaling_rows(r: RunResult) -> tuple[list[str], list[list[str]]]:
    """The study's header and rows, formatted; WAN columns only where its slices span sites."""
    t = r.table("scaling")
    wan = has_wan(t)
    header = list(COLUMNS[:-1]) + (list(WAN_COLUMNS) if wan else []) + [COLUMNS[-1]]
    rows = []
    for i in range(len(t["slices"])):
        row = [f"{int(t['slices'][i])}", f"{int(t['chips'][i]):,}", f"{int(t['global_batch'][i]):,}", _sec(t["step_time_s"][i]) + _err(t, i),
               _pct(t["mfu"][i]), _sec(t["dcn_busy_s"][i]), _sec(t["dcn_exposed_s"][i])]
        if wan:
            row += [_sec(t["wan_busy_s"][i]), _sec(t["wan_exposed_s"][i])]
        rows.append(row + [_pct(t["parallel_efficiency"][i])])
    return header, rows


def scaling_title(r: RunResult) -> str:
    """What was scaled: model, slice, plan, batch per slice, generation and DCN."""
    sc = r.scenario.get("scaling") or {}
    dcn = r.scenario.get("dcn") or {}
    gen = (r.scenario.get("topology") or {}).get("generation", "")
    sites = dcn.get("sites", 1)
    kind = dcn.get("kind", "eps")
    net = f"{kind.upper()} DCN" + (f" {dcn.get('oversubscription', 1):g}:1" if kind == "eps" else "") + \
        (f", {sites} sites" if sites and sites > 1 else "")
    plan = r.metrics.get("scaling_parallelism") or sc.get("parallelism") or ""
    compute = compute_timing(sc.get("compute_efficiency"))
    return (f"{sc.get('model', '')} on {gen} {sc.get('slice', '')} slices ({plan} + dcn), "
            f"{sc.get('batch_per_slice', '')} per slice, {net}, {compute}")


def scaling_details(runs: Sequence[RunResult], labels: Sequence[str]) -> list[dict]:
    """One entry per run with a scaling study: label, title, header, rows and the figure."""
    out = []
    for label, r in zip(labels, runs, strict=True):
        if not has_scaling(r):
            continue
        header, rows = scaling_rows(r)
        title = scaling_title(r)
        out.append({"label": label, "title": title, "header": header, "rows": rows, "bands": band_notes(r),
                    "figure": scaling_figure(r.table("scaling"), f"Weak scaling: {title}")})
    return out
