"""The report's spine section (issue 17): EPS Clos against OCS DCN over the fleet's life —
cumulative cost and energy, cost per useful chip-hour, the table by year and the assumptions
with their sources. Pure functions of RunResults that carry a `spine_years` table."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from podsim.scenario.result import RunResult

SPINE_COLOURS = {"eps": "#d62728", "ocs": "#1f77b4"}
SPINE_NAMES = {"eps": "EPS Clos", "ocs": "OCS DCN"}


def has_spine(r: RunResult) -> bool:
    return len(r.table("spine_years")["year"]) > 0


def _spine_runs(runs: Sequence[RunResult], labels: Sequence[str]) -> list[tuple[str, RunResult]]:
    return [(labels[i], r) for i, r in enumerate(runs) if has_spine(r)]


def _layout(fig: go.Figure, title: str, x: str, y: str) -> go.Figure:
    fig.update_layout(title=title, xaxis_title=x, yaxis_title=y, height=360, template="plotly_white",
                      margin={"l": 60, "r": 20, "t": 50, "b": 80}, legend={"orientation": "h", "y": -0.3})
    return fig


def _lines(runs: Sequence[RunResult], labels: Sequence[str], value, title: str, y: str) -> go.Figure | None:
    rows = _spine_runs(runs, labels)
    if not rows:
        return None
    fig = go.Figure()
    for k, (label, r) in enumerate(rows):
        t = r.table("spine_years")
        for kind in ("eps", "ocs"):
            sel = t["spine"] == kind
            name = SPINE_NAMES[kind] + (f" · {label}" if len(rows) > 1 else "")
            fig.add_scatter(x=t["year"][sel], y=value(t, sel), name=name, mode="lines+markers",
                            line={"color": SPINE_COLOURS[kind], "dash": ("solid", "dash", "dot")[k % 3]})
    return _layout(fig, title, "year", y)


def cumulative_cost(runs: Sequence[RunResult], labels: Sequence[str]) -> go.Figure | None:
    """Capex plus energy cost, summed from year 0."""
    return _lines(runs, labels, lambda t, s: t["cumulative_usd"][s], "Spine: cumulative cost (capex + energy)", "USD")


def cumulative_energy(runs: Sequence[RunResult], labels: Sequence[str]) -> go.Figure | None:
    return _lines(runs, labels, lambda t, s: np.cumsum(t["energy_kwh"][s]) / 1000.0,
                  "Spine: cumulative energy", "MWh")


def cost_per_useful_chip_hour(runs: Sequence[RunResult], labels: Sequence[str]) -> go.Figure | None:
    """Lifetime-to-date cost per useful chip-hour (chips at their price + the spine)."""
    return _lines(runs, labels, lambda t, s: t["lifetime_usd_per_useful_chip_h"][s],
                  "Spine: cost per useful chip-hour, life to date (chips + spine)", "USD per useful chip-hour")


def spine_figures(runs: Sequence[RunResult], labels: Sequence[str]) -> list[tuple[str, go.Figure | None]]:
    return [("Spine cumulative cost", cumulative_cost(runs, labels)),
            ("Spine cumulative energy", cumulative_energy(runs, labels)),
            ("Spine cost per useful chip-hour", cost_per_useful_chip_hour(runs, labels))]


def _usd(v: float) -> str:
    if v is None or not np.isfinite(v):
        return "n/a"
    return f"${v:,.0f}" if abs(v) >= 100 or v == 0 else f"${v:,.3f}"


def year_rows(r: RunResult) -> list[dict]:
    """The spine table by year and kind, formatted."""
    t = r.table("spine_years")
    out = []
    for i in range(len(t["year"])):
        kind = str(t["spine"][i])
        parts = (f"{int(t['spine_switches'][i])} switch ASICs" if kind == "eps" else f"{int(t['ocs'][i])} OCS")
        out.append({
            "year": int(t["year"][i]), "spine": SPINE_NAMES[kind], "link": f"{t['link_gbps'][i]:g}G",
            "parts": f"{int(t['leaf_switches'][i])} leaf ASICs, {parts}, {int(t['transceivers'][i]):,} transceivers",
            "bought": "spine re-bought" if t["spine_rebought"][i] else "",
            "capex": _usd(t["capex_usd"][i]), "power": f"{t['power_w'][i] / 1000:,.1f} kW",
            "energy": f"{t['energy_kwh'][i] / 1000:,.0f} MWh", "cumulative": _usd(t["cumulative_usd"][i]),
            "dcn": f"{t['uplink_bytes_per_s'][i] * 8 / 1e12:,.1f} Tbps",
            "algbw": "n/a" if not np.isfinite(t["dcn_algbw_bytes_per_s"][i]) else f"{t['dcn_algbw_bytes_per_s'][i] / 1e9:,.1f} GB/s",
            "step": f"{t['step_time_s'][i] * 1000:,.1f} ms", "exposed": f"{t['exposed_comm_s'][i] * 1000:,.1f} ms",
            "useful": f"{t['useful_fraction'][i]:.1%}",
            "per_useful": _usd(t["lifetime_usd_per_useful_chip_h"][i]),
            "spine_per_useful": _usd(t["lifetime_spine_usd_per_useful_chip_h"][i]),
        })
    return out


def assumption_rows(r: RunResult) -> list[dict]:
    t = r.table("spine_assumptions")
    return [{"name": str(t["name"][i]), "value": f"{t['value'][i]:,.6g} {t['unit'][i]}", "source": str(t["source"][i]),
             "note": str(t["note"][i]), "assumed": bool(t["assumed"][i])} for i in range(len(t["name"]))]


def headline(r: RunResult) -> list[tuple[str, str]]:
    """Lifetime figures and the OCS : EPS ratios (beside Jupiter's published ones)."""
    m = r.metrics
    years = m.get("spine_years")
    return [
        (f"capex over {years} years: EPS / OCS", f"{_usd(m['spine_eps_capex_usd'])} / {_usd(m['spine_ocs_capex_usd'])} "
                                                 f"(OCS = {m['spine_capex_ratio']:.1%} of EPS; Jupiter: 70%, jup.2/jup.4)"),
        (f"energy over {years} years: EPS / OCS", f"{m['spine_eps_energy_kwh'] / 1000:,.0f} / {m['spine_ocs_energy_kwh'] / 1000:,.0f} MWh "
                                                  f"(OCS = {m['spine_energy_ratio']:.1%} of EPS; Jupiter power: 59%, jup.3/jup.4)"),
        ("year-0 capex / power, OCS : EPS", f"{m['spine_year0_capex_ratio']:.1%} / {m['spine_year0_power_ratio']:.1%}"),
        ("EPS spine re-bought", f"{m['spine_eps_rebuys']} time(s)"),
        ("cost per useful chip-hour, life (chips + spine): EPS / OCS",
         f"{_usd(m['spine_eps_usd_per_useful_chip_h'])} / {_usd(m['spine_ocs_usd_per_useful_chip_h'])}"),
        ("spine cost per useful chip-hour, life: EPS / OCS",
         f"{_usd(m['spine_eps_spine_usd_per_useful_chip_h'])} / {_usd(m['spine_ocs_spine_usd_per_useful_chip_h'])}"),
    ]


def spine_details(runs: Sequence[RunResult], labels: Sequence[str]) -> list[dict]:
    """One entry per run with a spine study: headline, table by year, assumptions."""
    return [{"label": label, "headline": headline(r), "years": year_rows(r), "assumptions": assumption_rows(r)}
            for label, r in _spine_runs(runs, labels)]
